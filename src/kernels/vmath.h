/* Vectorised transcendental functions and activations over arrays, per tier.
 * The scalar tier uses libm through the reference formulas; the AVX2 and
 * AVX-512 tiers use the approximations whose error bounds are stated in
 * x86/vmath_avx2.h (AVX-512 uses the same polynomials on 16 lanes). */
#ifndef NNF_KERNELS_VMATH_H
#define NNF_KERNELS_VMATH_H

#include "base/cpu.h"
#include "ops/params.h"

#include <stddef.h>

/* The SIMD tiers' exp polynomial: e^r = 1 + r + r^2 q(r) on |r| <= ln 2 / 2,
 * q(r) = Q0 + Q1 r + Q2 r^2 + Q3 r^3 + Q4 r^4 (x86/vmath_avx2.h). */
#define NNF_EXP_Q0 4.9999994040e-01f
#define NNF_EXP_Q1 1.6666521132e-01f
#define NNF_EXP_Q2 4.1668388993e-02f
#define NNF_EXP_Q3 8.3687454462e-03f
#define NNF_EXP_Q4 1.3814540580e-03f

/* NNF_VM_SILU: x * sigmoid(x) as the conv and GEMM epilogues compute it
 * (AVX2: nnf_silu8_fast, AVX-512: nnf_silu16, both x / (1 + exp(-x))). */
typedef enum nnf_vm_fn { NNF_VM_EXP = 0, NNF_VM_SIGMOID, NNF_VM_TANH, NNF_VM_ERF, NNF_VM_SILU } nnf_vm_fn;

/* y[i] = fn(x[i]); x and y may be the same array. */
void nnf_vmath(nnf_isa isa, nnf_vm_fn fn, const float *x, float *y, size_t n);
/* y[i] = act(x[i]); x and y may be the same array. */
void nnf_act_array(nnf_isa isa, const nnf_activation *act, const float *x, float *y, size_t n);

void nnf_vmath_avx2(nnf_vm_fn fn, const float *x, float *y, size_t n);
void nnf_act_array_avx2(const nnf_activation *act, const float *x, float *y, size_t n);
void nnf_vmath_avx512(nnf_vm_fn fn, const float *x, float *y, size_t n);
void nnf_act_array_avx512(const nnf_activation *act, const float *x, float *y, size_t n);

#endif

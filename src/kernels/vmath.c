/* Tier dispatch for the array math, and its portable version. */
#include "kernels/vmath.h"

#include "kernels/ref/activation.h"

#include <math.h>

static float vm_scalar(nnf_vm_fn fn, float x) {
    switch (fn) {
    case NNF_VM_EXP: return expf(x);
    case NNF_VM_SIGMOID: return nnf_f32_sigmoid(x);
    case NNF_VM_TANH: return tanhf(x);
    case NNF_VM_ERF: return erff(x);
    case NNF_VM_SILU: return x * nnf_f32_sigmoid(x);
    }
    return x;
}

void nnf_vmath(nnf_isa isa, nnf_vm_fn fn, const float *x, float *y, size_t n) {
    isa = isa > nnf_cpu_get()->max_isa ? nnf_cpu_get()->max_isa : isa;
    if (isa == NNF_ISA_AVX512) {
        nnf_vmath_avx512(fn, x, y, n);
    } else if (isa == NNF_ISA_AVX2) {
        nnf_vmath_avx2(fn, x, y, n);
    } else {
        for (size_t i = 0; i < n; i++)
            y[i] = vm_scalar(fn, x[i]);
    }
}

void nnf_act_array(nnf_isa isa, const nnf_activation *act, const float *x, float *y, size_t n) {
    isa = isa > nnf_cpu_get()->max_isa ? nnf_cpu_get()->max_isa : isa;
    if (isa == NNF_ISA_AVX512) {
        nnf_act_array_avx512(act, x, y, n);
    } else if (isa == NNF_ISA_AVX2) {
        nnf_act_array_avx2(act, x, y, n);
    } else {
        for (size_t i = 0; i < n; i++)
            y[i] = nnf_act_apply(act, x[i]);
    }
}

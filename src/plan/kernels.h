/* Kernel selection and weight packing for the optimised GEMM/MatMul/Conv
 * kernels: the nnf_plan_fn entries of the operator table, and the pure
 * selection functions behind them (unit-tested on their own).
 *
 * A plan's state is immutable after planning: runs on several sessions at
 * once read it concurrently. Packing scratch is per calling thread. */
#ifndef NNF_PLAN_KERNELS_H
#define NNF_PLAN_KERNELS_H

#include "kernels/conv_fast.h"
#include "kernels/gemm.h"
#include "ops/op.h"

nnf_status nnf_plan_gemm(NNF_PLAN_ARGS);
nnf_status nnf_plan_matmul(NNF_PLAN_ARGS);
nnf_status nnf_plan_conv(NNF_PLAN_ARGS);

/* How a Gemm/MatMul will run. */
typedef struct nnf_gemm_choice {
    const nnf_gemm_cfg *cfg; /* NULL: keep the reference kernel */
    int prepack_b;           /* B is constant: pack it once at plan time */
    int flatten;             /* batched A with one 2-D B: one GEMM with M = batch * m */
} nnf_gemm_choice;

/* m, n, k: per-matrix extents; a_batch/b_batch: batch element counts of A
 * and B (1 when absent), b_const: B's data is known at plan time. */
nnf_gemm_choice nnf_gemm_choose(int64_t m, int64_t n, int64_t k, int64_t a_batch,
                                int64_t b_batch, int b_const, nnf_isa isa);

#endif

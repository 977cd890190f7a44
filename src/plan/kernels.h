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
#include "ops/params.h"

nnf_status nnf_plan_gemm(NNF_PLAN_ARGS);
nnf_status nnf_plan_matmul(NNF_PLAN_ARGS);
nnf_status nnf_plan_conv(NNF_PLAN_ARGS);
nnf_status nnf_plan_conv_transpose(NNF_PLAN_ARGS);

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

/* How the epilogue reads a MatMul's residual: rows ld floats apart (N, or 0
 * where one row serves every row), Y's axis d at bs[d] floats (0 where it
 * broadcasts; a batched run reads its batch axes'); full: laid out like Y. */
typedef struct nnf_mm_residual {
    size_t ld;
    bool full;
    int64_t bs[NNF_MAX_RANK];
} nnf_mm_residual;

/* A residual (dtype dt, rank rr, dims rd) the epilogue can take for an
 * output of rank yr, dims yd: float32, shaped like Y (its leading axes may
 * be left out) but for extents of 1 it broadcasts along, its last one
 * excepted (whole rows of N); a Y of rank below 2 (a 1-D operand) takes it
 * laid out like Y only. plan_gemm.c; the attention's plan reads its mask so. */
bool nnf_mm_residual_layout(nnf_dtype dt, int rr, const int64_t *rd, int yr, const int64_t *yd,
                            bool rows_last, nnf_mm_residual *l);

/* The matrix of a MatMul operand whose last two axes have strides rs (rows)
 * and cs (columns): rows ld apart, or read transposed (columns ld apart)
 * when the columns are the unit-stride axis' neighbours; false when neither
 * axis has unit stride (fold_transpose leaves no such operand). */
bool nnf_mm_matrix_of(int64_t rs, int64_t cs, size_t *ld, int *trans);

/* The epilogue of one conv run (plan_conv.c; the blocked plan shares it):
 * input 2 as the per-channel bias when has_bias (oc values), and from the
 * conv's params cp the activation and the fused residual input, shaped like
 * the output (y_numel elements), before or after the activation. */
nnf_status nnf_conv_run_epilogue(const nnf_node *node, nnf_buf *const *in, int has_bias,
                                 const nnf_conv_params *cp, size_t oc, size_t y_numel, nnf_epilogue *e);

/* Resize (plan_resize.c): the fast kernels' tables for a Resize whose
 * roi, scales and sizes are constants; t->kind NONE when the reference
 * kernel must run. */
struct nnf_resize_tables;
nnf_status nnf_resize_tables_for(const nnf_node *node, const nnf_tinfo *in, const nnf_tinfo *out,
                                 struct nnf_resize_tables *t);

/* The logical 2-D shape of a Conv on NCHW extents xd, weight wd, output yd
 * (plan_nchwc.c); false when no blocked kernel takes it. The layout pass
 * asks the same question before it blocks a conv. */
bool nnf_nchwc_conv_shape(const nnf_conv_params *cp, const int64_t *xd, const int64_t *wd, const int64_t *yd,
                          nnf_conv2d_shape *s);

#endif

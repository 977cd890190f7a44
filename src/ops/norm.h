/* Attributes of the normalisation operators, shared by their definitions
 * (ops/norm.c) and kernels. */
#ifndef NNF_OPS_NORM_H
#define NNF_OPS_NORM_H

#include <stddef.h>
#include <stdint.h>

typedef struct nnf_norm_params {
    float epsilon;
    int64_t axis;       /* LayerNormalization, LpNormalization: as written (may be negative) */
    int64_t num_groups; /* GroupNormalization */
    int per_channel;    /* GroupNormalization: scale/bias per channel (opset 21) or per group (18) */
    int p;              /* LpNormalization: 1 or 2 */
} nnf_norm_params;

/* LpNormalization of one line of n values ld apart (kernels/ref/norm.c):
 * y = x / ||x||_p in double, a zero norm giving zeros. The reference runs it
 * on every line; the plan (plan/plan_norm.c) on lines whose norm is too
 * small for its float reciprocal. */
void nnf_lpnorm_line(const float *x, float *y, size_t n, size_t ld, int p);

#endif

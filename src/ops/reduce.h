/* Typed parameters of the reduction operators (ReduceXxx, ArgMax, ArgMin),
 * shared by their definitions (ops/reduce.c) and reference kernels
 * (kernels/ref/reduce.c). */
#ifndef NNF_OPS_REDUCE_H
#define NNF_OPS_REDUCE_H

#include "ops/op.h"

typedef enum nnf_reduce_kind {
    NNF_REDUCE_SUM = 0,
    NNF_REDUCE_MEAN,
    NNF_REDUCE_MAX,
    NNF_REDUCE_MIN,
    NNF_REDUCE_PROD,
    NNF_REDUCE_L1,
    NNF_REDUCE_L2,
    NNF_REDUCE_LOG_SUM,
    NNF_REDUCE_LOG_SUM_EXP,
    NNF_REDUCE_SUM_SQUARE,
} nnf_reduce_kind;

/* Axes come from the `axes` attribute before ReduceSum-13 / other Reduce-18
 * and from the optional second input after. */
typedef struct nnf_reduce_params {
    nnf_reduce_kind kind;
    int keepdims;
    int noop_with_empty_axes;
    int axes_from_input;
    int n_axes; /* attribute axes; 0 = none given */
    int64_t axes[NNF_MAX_RANK];
} nnf_reduce_params;

typedef struct nnf_argminmax_params {
    int is_max;
    int64_t axis;
    int keepdims;
    int select_last_index;
} nnf_argminmax_params;

/* Which dims of a rank-`rank` input are reduced: mask[i] = 1. `axes` is the
 * axes input (NULL when absent; int64 or int32 data, n entries) and is used
 * only when p->axes_from_input. No axes reduce every dim, or none with
 * noop_with_empty_axes. Duplicate or out-of-range axes are errors. */
nnf_status nnf_reduce_mask(const nnf_node *node, const nnf_reduce_params *p, int rank,
                           const void *axes, nnf_dtype axes_dtype, int64_t n,
                           unsigned char mask[NNF_MAX_RANK]);

#endif

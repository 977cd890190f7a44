/* The broadcasting loop shared by every n-ary element-wise reference kernel
 * (binary arithmetic, comparisons, Where, variadic folds, PRelu). */
#ifndef NNF_KERNELS_REF_BROADCAST_H
#define NNF_KERNELS_REF_BROADCAST_H

#include "ops/op.h"

#include <stddef.h>

#define NNF_BCAST_MAX_IN 3

/* Called for a run of n output elements: in[k] points at input k's element
 * for the first of them and stride[k] is its element step (0 where input k
 * is broadcast along the run, else 1). */
typedef void (*nnf_bcast_row_fn)(const void *ctx, size_t n, void *out, const void *const *in,
                                 const ptrdiff_t *stride);

/* One operand of nnf_ref_broadcast: rank <= the output's, dims aligned to the
 * trailing output dims (numpy); each dim equals the output's or is 1. */
typedef struct nnf_bcast_in {
    const void *data;
    size_t elem_size;
    int rank;
    const int64_t *dims;
} nnf_bcast_in;

/* A tensor as an operand, its dims as they are. */
static inline nnf_bcast_in nnf_bcast_operand(const nnf_buf *b) {
    return (nnf_bcast_in){b->data, nnf_dtype_size(b->dtype), b->rank, b->dims};
}

/* Visit every element of out (dense, row-major) once, in runs as long as the
 * operands' broadcast patterns allow, calling row for each run. Handles rank 0
 * (one run of 1) and empty outputs (no call). The caller has checked that
 * the shapes broadcast. n_in <= NNF_BCAST_MAX_IN. */
void nnf_ref_broadcast(const nnf_buf *out, int n_in, const nnf_bcast_in *in, nnf_bcast_row_fn row,
                       const void *ctx);

#endif

/* Helpers shared by the reference kernels of the tensor operators
 * (src/kernels/ref/tensor_*.c). */
#ifndef NNF_KERNELS_REF_TENSOR_REF_H
#define NNF_KERNELS_REF_TENSOR_REF_H

#include "ops/tensor_common.h"

/* The gather engine behind Transpose, Slice, Expand, Tile and Pad.
 *
 * For every output coordinate (o_0 .. o_{rank-1}) over odims:
 *   out[o] = src[sum_k map[k][o_k] * istride[k]]     (element units)
 * or *fill when any map[k][o_k] is -1 (Pad's constant border). map[k] has
 * odims[k] entries, each a valid index of the input so that the sum stays in
 * bounds; fill may be NULL when no map holds -1. Rows whose innermost map is
 * contiguous with istride 1 are copied with memcpy. */
typedef struct nnf_gather_map {
    int rank;
    int64_t odims[NNF_MAX_RANK];
    int64_t istride[NNF_MAX_RANK];
    int64_t *map[NNF_MAX_RANK]; /* point into one block owned by the map */
    int64_t *block;
} nnf_gather_map;

/* Allocate map[k] for odims (rank may be 0). Free with nnf_gather_map_free. */
nnf_status nnf_gather_map_alloc(const nnf_node *node, int rank, const int64_t *odims,
                                 nnf_gather_map *m);
void nnf_gather_map_free(nnf_gather_map *m);
void nnf_gather_map_run(const nnf_gather_map *m, void *dst, const void *src, size_t esize,
                        const void *fill);

/* n copies of the es-byte element at elem (memset where its bytes are all
 * one value, 16-byte stores where es divides 16). */
void nnf_fill_elems(void *dst, const void *elem, size_t n, size_t es);

/* Element i of a numeric tensor as double / int64, and a double stored into
 * element i with C conversion rules (integers truncate; used for fill values). */
double nnf_load_f64(nnf_dtype t, const void *p, size_t i);
void nnf_store_f64(nnf_dtype t, void *p, size_t i, double v);

/* Row ranges of the indexing kernels (tensor_index.c), so that a plan can run
 * them in parallel; the reference kernels run every row. A row is one line of
 * the operator's axis: GatherElements' rows are the indices' last axis, TopK's
 * the lines along its axis (outer * inner of them). The row functions write
 * no messages: the caller reports the out-of-range index in *bad (against
 * x's extent on the axis) or TopK's allocation failure (k over 256 only). */
nnf_status nnf_index_error(const nnf_node *node, int64_t v, int64_t d);
nnf_status nnf_gather_elements_check(const nnf_node *node, const nnf_buf *x, const nnf_buf *idx,
                                     int *axis);
bool nnf_gather_elements_rows(const nnf_buf *x, const nnf_buf *idx, nnf_buf *y, int axis,
                              size_t first, size_t count, int64_t *bad);
nnf_status nnf_top_k_check(const nnf_node *node, const nnf_buf *x, const nnf_buf *vals, int *axis);
bool nnf_top_k_rows(const nnf_buf *x, nnf_buf *vals, nnf_buf *inds, int axis, bool largest,
                    size_t first, size_t count);

#endif

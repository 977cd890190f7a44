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

/* Element i of a numeric tensor as double / int64, and a double stored into
 * element i with C conversion rules (integers truncate; used for fill values). */
double nnf_load_f64(nnf_dtype t, const void *p, size_t i);
void nnf_store_f64(nnf_dtype t, void *p, size_t i, double v);

#endif

/* Window arithmetic shared by Conv, ConvTranspose and the pools, and by the
 * optimised conv kernels, so that every kernel agrees on output extents and
 * padding with the reference. */
#ifndef NNF_OPS_CONV_H
#define NNF_OPS_CONV_H

#include "ops/op.h"
#include "ops/params.h"

/* Parse the attributes common to windowed ops (kernel_shape, strides,
 * dilations, pads, auto_pad) into p. Missing strides/dilations are 1 on every
 * axis, missing pads 0; p->spatial is the count implied by the attributes, or
 * 0 when none says it (then the input rank decides at inference).
 * p->residual_input is set to -1. */
nnf_status nnf_conv_parse_window(const nnf_node *node, nnf_conv_params *p);

/* Extent of one output axis for a window of `kernel` taps with the given
 * stride/dilation over `in` elements padded by pad_begin/pad_end. ceil_mode
 * follows the ONNX pools: round up, but drop a last window that would start
 * in the end padding. Returns -1 when in < 0 (unknown) and 0 when the padded
 * input is shorter than the dilated window. */
int64_t nnf_conv_out_dim(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                         int64_t pad_begin, int64_t pad_end, int ceil_mode);

/* The pads a (forward) window op actually uses for input extents in_spatial
 * (p->spatial entries, all known): the explicit pads for NOTSET, zeros for
 * VALID, and for SAME_UPPER/SAME_LOWER the split of the total pad that makes
 * out = ceil(in / stride), the odd element going to the end (UPPER) or the
 * beginning (LOWER). p->kernel must be known. */
nnf_status nnf_conv_resolve_pads(const nnf_conv_params *p, const int64_t *in_spatial,
                                 int64_t *pads_begin, int64_t *pads_end);

/* Output extents of a forward window op (Conv, pools) given resolved pads.
 * Entries are -1 where the input extent is unknown; NNF_ERR_SHAPE naming the
 * node when a window does not fit. */
nnf_status nnf_conv_out_spatial(const nnf_node *node, const nnf_conv_params *p,
                                const int64_t *in_spatial, const int64_t *pads_begin,
                                const int64_t *pads_end, int64_t *out_spatial);

/* ConvTranspose: the output extents and the pads to crop from the full
 * transposed result. With output_shape given, the pads are derived from it
 * (odd element to the end for SAME_UPPER, to the beginning otherwise, as in
 * the ONNX spec); with SAME_* auto_pad, out = in * stride, except that a
 * stride longer than the dilated kernel plus output_padding gives the full
 * transposed extent (what onnxruntime computes). in_spatial must be known. */
nnf_status nnf_conv_transpose_resolve(const nnf_node *node, const nnf_conv_params *p,
                                      const int64_t *in_spatial, int64_t *pads_begin,
                                      int64_t *pads_end, int64_t *out_spatial);

/* The params a kernel runs with: spatial rank from the input, kernel extents
 * from the weight's dims (kernel_shape is optional). The node's params are
 * never written: sessions share them. */
static inline nnf_conv_params nnf_conv_effective(const nnf_conv_params *p, int rank, const int64_t *w_dims) {
    nnf_conv_params e = *p;
    e.spatial = rank - 2;
    for (int i = 0; i < e.spatial; i++)
        e.kernel[i] = w_dims[2 + i];
    return e;
}

#endif

/* Internal operators of the NCHWc8 blocked layout, domain "nnfuse.nchwc"
 * (ONNX Runtime's com.microsoft.nchwc has the same shape: the blocked ops
 * keep their ONNX names, so profiles, dumps and filters still say "Conv"),
 * made only by passes/layout_nchwc.c: a model file that names them is
 * refused.
 *
 * A blocked value of logical shape [N, C, H, W] has the graph shape
 * [N, C8, H, W], C8 = C rounded up to 8, and NCHWc8 storage (see
 * kernels/nchwc.h): inference, buffer sizes and layout-blind ops (same-shape
 * Add, Concat of whole blocks) need nothing else. The logical channel count
 * travels in the ops that need it (ReorderOutput and the global pools
 * take it as `channels`; Conv from its weight).
 *
 *   ReorderInput         X [N,C,H,W] -> [N,C8,H,W] blocked
 *   ReorderOutput        blocked [N,C8,H,W] -> [N,channels,H,W]
 *   Conv                 Conv (group 1 or depthwise) with its fused epilogue;
 *                        X blocked, or plain NCHW when in_blocked is 0 (the
 *                        first conv); W, B as Conv's; output blocked, or
 *                        plain NCHW when out_plain (a dense conv that only
 *                        NCHW readers or the graph's outputs read: the
 *                        output reorder fused into its tiles), or channel-last
 *                        when out_group (a Transpose after it fused too)
 *   ConvPwDw             a pointwise Conv (conv) and the depthwise Conv (dw)
 *                        that alone read its output, made by
 *                        passes/fuse_pw_dw.c: X, W, B, W_dw, B_dw (biases
 *                        optional); X and output blocked
 *   MaxPool, AveragePool blocked in and out
 *   GlobalAveragePool, GlobalMaxPool   blocked in, [N,channels,1,1] out
 *                        (channels rounded up to 8: the output blocked, the
 *                        same bytes)
 *   Resize               nearest Resize of H and W, blocked in and out
 *   Add, Sub, Mul        one operand blocked [N,C8,H,W], the other blocked
 *                        [N or 1,C8,1,1] (per channel: a squeeze-and-
 *                        excitation scale), output blocked; the node keeps
 *                        the ONNX op's params (same-shape ones stay ONNX
 *                        ops on blocked values: layout-blind)
 *
 * Their reference kernels reorder to NCHW, run the NCHW op's reference
 * kernel and reorder back, so the oracle stays the ONNX op's. */
#ifndef NNF_OPS_NCHWC_H
#define NNF_OPS_NCHWC_H

#include "ops/params.h"

#include <stdint.h>

typedef struct nnf_nchwc_params {
    /* first, so that the NCHW reference kernels (Conv, pools) read it as
     * their own params */
    nnf_conv_params conv;
    int64_t channels; /* ReorderOutput, global pools: logical channel count */
    int in_blocked;   /* Conv: input 0 is blocked (else plain NCHW) */
    int out_plain;    /* Conv: output 0 is plain NCHW (else blocked); never with a residual */
    /* Conv with out_plain: 0, or the output channel-last in groups of
     * out_group channels (passes/fuse_conv_transpose.c): [N, C / G, H, W, G]
     * (a Reshape to [N, C / G, G, H, W] and a Transpose (0, 1, 3, 4, 2)
     * fused), or [N, H, W, C] when out_nhwc (a Transpose (0, 2, 3, 1), G = C) */
    int64_t out_group;
    int out_nhwc;
    nnf_conv_params dw; /* ConvPwDw: the depthwise conv (conv is the pointwise one) */
} nnf_nchwc_params;

/* Which operand of a binary op (a: input 0, b: input 1, y: its output, all
 * 4-D extents) is a per-channel vector: the other shaped like y, H x W > 1,
 * this one [N or 1, C, 1, 1]; 0 or 1, else -1. The layout pass asks on
 * logical extents, the blocked op's plan on padded ones. */
int nnf_nchwc_channel_operand(const int64_t *a, const int64_t *b, const int64_t *y);

struct nnf_node;
/* The two Conv nodes a ConvPwDw node stands for (inputs X, W, B and
 * (pointwise output), W_dw, B_dw), their params in p1, p2. */
void nnf_nchwc_pw_dw_split(const struct nnf_node *node, struct nnf_node *n1, nnf_nchwc_params *p1,
                           struct nnf_node *n2, nnf_nchwc_params *p2);

static inline int64_t nnf_nchwc_round(int64_t c) { return (c + 7) / 8 * 8; }

#endif

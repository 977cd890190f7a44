/* nnfuse::Attention, made only by passes/fuse_attention.c: the scaled dot
 * product of attention, P = Softmax(alpha * Q·Kᵀ [+ bias] [+ mask]) along
 * the last axis, then P·V, run as one node so the scores (batch x heads x
 * S x T floats: 72 MB a layer for Whisper's 1500 frames) never go through
 * memory whole (plan/plan_attention.c runs them a block of query rows at a
 * time).
 *
 * Inputs: those of the scores' MatMul (Q, Kᵀ, then its fused bias and
 * residual inputs, where it has them), then V. `qk` and `pv` are the two
 * MatMuls' params (folded Transposes' views, alpha, the fused bias and mask
 * at the indices `qk` names in this node's inputs); `sm` the Softmax's. Its
 * reference kernel runs the two MatMuls' and the Softmax's, so the oracle is
 * the three ops'. */
#ifndef NNF_OPS_ATTENTION_H
#define NNF_OPS_ATTENTION_H

#include "ops/elementwise.h"
#include "ops/op.h"
#include "ops/params.h"

typedef struct nnf_attention_params {
    nnf_gemm_params qk, pv;
    nnf_softmax_params sm;
} nnf_attention_params;

/* The node as its three parts: the scores' MatMul (inputs 0 .. n - 2), the
 * Softmax and the MatMul with V (inputs: the probabilities, then input
 * n - 1). Their input arrays are this node's; only the counts differ. */
void nnf_attention_split(const nnf_node *node, nnf_node *qk, nnf_node *sm, nnf_node *pv);

#endif

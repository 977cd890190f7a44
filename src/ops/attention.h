/* nnfuse::Attention, made only by passes/fuse_attention.c: the scaled dot
 * product of attention, P = Softmax(S) along the last axis with S = alpha *
 * Q·Kᵀ [+ bias] [+ mask], or S selected against a constant by a boolean
 * mask (a causal mask as GPT-2 exports it: Where(mask, S, -3.4e38)); then
 * P·V, run as one node so the scores (batch x heads x S x T floats: 72 MB a
 * layer for Whisper's 1500 frames) never go through memory whole
 * (plan/plan_attention.c runs them a block of query rows at a time).
 *
 * Inputs: those of the scores' MatMul (Q, Kᵀ, then its fused bias and
 * residual inputs, where it has them: `n_qk` of them), the Where's
 * condition and its other operand (a scalar) where it has one, then V.
 * `qk` and `pv` are the two MatMuls' params (folded Transposes' views,
 * alpha, the fused bias and mask at the indices `qk` names in this node's
 * inputs); `sm` the Softmax's. Its reference kernel runs the ops it stands
 * for, so the oracle is theirs. */
#ifndef NNF_OPS_ATTENTION_H
#define NNF_OPS_ATTENTION_H

#include "ops/elementwise.h"
#include "ops/op.h"
#include "ops/params.h"

typedef struct nnf_attention_params {
    nnf_gemm_params qk, pv;
    nnf_softmax_params sm;
    int n_qk;         /* the scores' MatMul's inputs, this node's first */
    int where_cond;   /* the Where's condition (input n_qk), or -1: no Where */
    int scores_first; /* the scores are the Where's second input (kept where the condition
                       * holds), else its third (kept where it does not) */
} nnf_attention_params;

/* The node as its parts: the scores' MatMul (inputs 0 .. n_qk - 1), the
 * Softmax and the MatMul with V (inputs: the probabilities, then the last
 * input). Their input arrays are this node's; only the counts differ. */
void nnf_attention_split(const nnf_node *node, nnf_node *qk, nnf_node *sm, nnf_node *pv);

#endif

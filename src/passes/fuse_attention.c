/* MatMul (the scores, Q·Kᵀ with its fused scale, bias and mask) [→ Where
 * against a constant: a causal mask] → Softmax along the last axis →
 * MatMul with V becomes one nnfuse::Attention node
 * (ops/attention.h), which runs a block of query rows at a time and never
 * writes the scores whole (plan/plan_attention.c). Runs after fuse_scale,
 * fuse_residual and fold_transpose (-O2), so the scores' MatMul has taken
 * the scale, the mask and the heads' Transposes already.
 *
 * Fused only where the plan runs it: float32, Q, Kᵀ and V with the same
 * batch axes (no broadcast between them: the same extents, or symbolic dims
 * of the same names), nothing fused after the Softmax or into the second
 * MatMul. The shapes may be symbolic (BERT exported with dynamic axes): the
 * plan takes the extents from each run. The node takes the second MatMul's
 * place and name. */
#include "passes/pass.h"

#include "ops/attention.h"

#include <string.h>

/* Operand s of a MatMul as the product reads it: float32, rank >= 2. */
static bool operand(const nnf_graph *g, const nnf_node *mm, int s, nnf_shape *out) {
    const nnf_value *v = &g->values[mm->inputs[s]];
    if (v->dtype != NNF_DTYPE_FLOAT32 || v->shape.rank < 2)
        return false;
    *out = nnf_matmul_operand_shape(mm->params, s, &v->shape);
    return true;
}

/* A Where between the scores and the Softmax that selects them against a
 * constant float scalar by a boolean condition whose rows are whole (it
 * broadcasts along the batch axes and rows only, as the epilogue reads a
 * mask): GPT-2's causal mask, Where(bias[.., :S, :T], w, -3.4e38). Its
 * output is the scores' shape. */
static bool select_ok(nnf_pass_ctx *ctx, const nnf_node *wh, int scores) {
    const nnf_graph *g = ctx->graph;
    if (!nnf_pass_is_op(wh, "Where") || wh->n_inputs != 3 || ctx->uses[scores] != 1 ||
        (wh->inputs[1] == scores) == (wh->inputs[2] == scores) || wh->inputs[0] == scores)
        return false;
    int other = wh->inputs[wh->inputs[1] == scores ? 2 : 1];
    float fill;
    const nnf_shape *c = &g->values[wh->inputs[0]].shape, *s = &g->values[scores].shape;
    return g->values[wh->inputs[0]].dtype == NNF_DTYPE_BOOL &&
           nnf_pass_const_scalar(g, other, &fill) &&
           nnf_shape_same(&g->values[wh->outputs[0]].shape, s) && nnf_pass_rows_broadcast(c, s);
}

static bool fusable(nnf_pass_ctx *ctx, const nnf_node *mm1, const nnf_node *wh, const nnf_node *sm,
                    const nnf_node *mm2) {
    const nnf_graph *g = ctx->graph;
    const nnf_gemm_params *p1 = mm1->params, *p2 = mm2->params;
    const nnf_softmax_params *ps = sm->params;
    int scores = mm1->outputs[0], probs = sm->outputs[0];
    if (wh && !select_ok(ctx, wh, scores))
        return false;
    if (!p1 || !p2 || !ps || sm->inputs[0] != (wh ? wh->outputs[0] : scores) ||
        ctx->uses[sm->inputs[0]] != 1 || ctx->uses[scores] != 1 || ctx->uses[probs] != 1 ||
        mm2->inputs[0] != probs || mm2->inputs[1] == probs || ps->kind != NNF_SOFTMAX ||
        p1->act.kind != NNF_ACT_NONE || p2->act.kind != NNF_ACT_NONE || p2->alpha != 1.0f ||
        p2->bias_input >= 0 || p2->residual_input >= 0 || (p2->permuted & 1u))
        return false;
    int r = g->values[scores].shape.rank;
    nnf_shape q, k, v;
    if (g->values[scores].dtype != NNF_DTYPE_FLOAT32 || !operand(g, mm1, 0, &q) ||
        !operand(g, mm1, 1, &k) || !operand(g, mm2, 1, &v) || q.rank != r || k.rank != r ||
        v.rank != r || (ps->axis != -1 && ps->axis != r - 1))
        return false;
    for (int i = 0; i + 2 < r; i++)
        if (!nnf_pass_dim_fits(&q, i, &k, i, false) || !nnf_pass_dim_fits(&q, i, &v, i, false))
            return false;
    /* a bias (a constant row) and a mask are as fuse_residual took them:
     * what the epilogue of the scores' GEMM reads */
    return true;
}

nnf_status nnf_pass_fuse_attention(nnf_pass_ctx *ctx) {
    nnf_graph *g = ctx->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        nnf_node *mm2 = &g->nodes[i];
        if (!nnf_pass_is_op(mm2, "MatMul") || mm2->n_inputs != 2)
            continue;
        nnf_node *sm = nnf_pass_producer(ctx, mm2->inputs[0]);
        if (!nnf_pass_is_op(sm, "Softmax"))
            continue;
        nnf_node *mm1 = nnf_pass_producer(ctx, sm->inputs[0]), *wh = NULL;
        if (nnf_pass_is_op(mm1, "Where")) {
            wh = mm1;
            mm1 = nnf_pass_producer(ctx, wh->inputs[1]);
            if (!nnf_pass_is_op(mm1, "MatMul"))
                mm1 = nnf_pass_producer(ctx, wh->inputs[2]);
        }
        if (!nnf_pass_is_op(mm1, "MatMul") || !fusable(ctx, mm1, wh, sm, mm2))
            continue;
        nnf_attention_params *p = nnf_arena_calloc(&g->arena, 1, sizeof *p);
        if (!p)
            return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory fusing '%s' into '%s'",
                             mm1->name, mm2->name);
        p->qk = *(const nnf_gemm_params *)mm1->params;
        p->pv = *(const nnf_gemm_params *)mm2->params;
        p->sm = *(const nnf_softmax_params *)sm->params;
        p->n_qk = mm1->n_inputs;
        p->where_cond = -1;
        int v = mm2->inputs[1], n = mm1->n_inputs + (wh ? 3 : 1), scores = mm1->outputs[0],
            probs = sm->outputs[0];
        NNF_CHECK(nnf_pass_resize_inputs(mm2, n));
        memcpy(mm2->inputs, mm1->inputs, (size_t)mm1->n_inputs * sizeof(int));
        if (wh) {
            p->where_cond = mm1->n_inputs;
            p->scores_first = wh->inputs[1] == scores;
            mm2->inputs[p->where_cond] = wh->inputs[0];
            mm2->inputs[p->where_cond + 1] = wh->inputs[p->scores_first ? 2 : 1];
        }
        mm2->inputs[n - 1] = v;
        mm2->op_type = "Attention";
        mm2->domain = "nnfuse";
        mm2->opset = 1;
        mm2->op = nnf_op_find("nnfuse", "Attention", 1, NULL);
        mm2->params = p;
        NNF_CHECK(nnf_pass_merge_names(ctx, mm2, mm1));
        if (wh) {
            NNF_CHECK(nnf_pass_merge_names(ctx, mm2, wh));
            g->values[wh->outputs[0]].producer = -1;
            ctx->uses[wh->outputs[0]] = 0;
            wh->dead = true;
        }
        NNF_CHECK(nnf_pass_merge_names(ctx, mm2, sm));
        g->values[scores].producer = g->values[probs].producer = -1;
        mm1->dead = sm->dead = true;
        ctx->uses[scores] = ctx->uses[probs] = 0;
        ctx->fusions++;
    }
    return NNF_OK;
}

/* MatMul → Mul or Div by a constant scalar becomes the MatMul's alpha,
 * applied to the accumulator in the epilogue: y = alpha · (A·B). The
 * attention scores' scale (Q·Kᵀ / √d) was a pass of its own over the
 * batch × heads × seq² scores.
 *
 * The values do not change: the epilogue rounds alpha · acc once, as the Mul
 * did. A division is folded only by a power of two, whose reciprocal is
 * exact (x / 8 and x · 0.125 round alike); by anything else x · (1/c) may
 * differ from x / c in the last bit, and the Div stays. The MatMul must have
 * nothing fused yet (this pass runs before fuse_residual and
 * fuse_activation): a bias or an activation before the scale would be
 * scaled with it. */
#include "passes/pass.h"

#include "ops/params.h"

#include <math.h>
#include <string.h>

/* 1/c exactly, for c = ±2^k whose reciprocal is a normal float. */
static bool exact_reciprocal(float c, float *r) {
    int e;
    float m = frexpf(c, &e);
    if (!isfinite(c) || c == 0.0f || fabsf(m) != 0.5f)
        return false;
    *r = 1.0f / c;
    return isnormal(*r) && *r * c == 1.0f;
}

nnf_status nnf_pass_fuse_scale(nnf_pass_ctx *ctx) {
    nnf_graph *g = ctx->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        nnf_node *op = &g->nodes[i];
        int is_mul = nnf_pass_is_op(op, "Mul"), is_div = nnf_pass_is_op(op, "Div");
        if ((!is_mul && !is_div) || op->n_inputs != 2 || op->opset < 7)
            continue;
        /* Mul: the MatMul on either side; Div: the MatMul is the dividend */
        for (int side = 0; side < (is_mul ? 2 : 1); side++) {
            int mv = op->inputs[side], sv = op->inputs[1 - side];
            nnf_node *mm = nnf_pass_producer(ctx, mv);
            float c, alpha;
            if (!nnf_pass_is_op(mm, "MatMul") || mm->outputs[0] != mv || ctx->uses[mv] != 1 ||
                mv == sv || !nnf_pass_const_scalar(g, sv, &c))
                continue;
            const nnf_value *m = &g->values[mv], *y = &g->values[op->outputs[0]];
            nnf_gemm_params *gp = mm->params;
            if (!gp || m->dtype != NNF_DTYPE_FLOAT32 || y->dtype != NNF_DTYPE_FLOAT32 ||
                !nnf_shape_same(&m->shape, &y->shape) || gp->alpha != 1.0f ||
                gp->act.kind != NNF_ACT_NONE || gp->bias_input >= 0 || gp->residual_input >= 0)
                continue;
            if (is_mul)
                alpha = c;
            else if (!exact_reciprocal(c, &alpha))
                continue;
            gp->alpha = alpha;
            NNF_CHECK(nnf_pass_merge_names(ctx, mm, op));
            nnf_pass_take_output(ctx, mm, 0, op->outputs[0]);
            op->dead = true;
            ctx->fusions++;
            break;
        }
    }
    return NNF_OK;
}

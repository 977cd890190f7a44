/* Conv → Add(conv, x) with x shaped like the output becomes a Conv with a
 * residual epilogue: y = act(conv + bias + x); x joins the conv as input 3.
 * The pipeline runs this pass again after fuse_activation: a conv that has
 * taken its activation by then takes the Add after it, y = act(conv + bias)
 * + x (YOLOv5's bottleneck, x + SiLU(conv): the sum was an Add node of its
 * own, a pass over three tensors; now the conv's activation pass adds x).
 * MatMul → Add(matmul, x) likewise, where x is shaped like the output or is a
 * constant row of the output's last extent (the bias of a Linear layer); x
 * joins the MatMul as its next input. A MatMul takes a bias row and then a
 * residual (fuse_matmul). Its residual may also broadcast over the output's
 * batch axes and rows (an attention mask [B, 1, 1, S] added to the scores
 * [B, H, S, S]): whole rows of N values, read per batch and row at strides
 * of 0 where it broadcasts. */
#include "passes/pass.h"

#include "ops/params.h"

#include <string.h>

/* Conv residuals: both shapes known and equal (a conv's kernels read the
 * residual at the output's extents). */
static bool same_shape(const nnf_shape *a, const nnf_shape *b) {
    return nnf_shape_known(a) && nnf_shape_same(a, b);
}

/* A constant vector [N] (or [1..1, N]) matching the last extent of a MatMul
 * output m, known: the Add's output is then m's shape whatever m's other
 * extents (a symbolic batch and sequence). */
static bool bias_row(const nnf_value *x, const nnf_shape *m) {
    if (!x->data || !nnf_shape_known(&x->shape) || m->rank < 1 || x->shape.rank < 1 ||
        m->dims[m->rank - 1] < 0)
        return false;
    for (int i = 0; i + 1 < x->shape.rank; i++)
        if (x->shape.dims[i] != 1)
            return false;
    return x->shape.rank <= m->rank && x->shape.dims[x->shape.rank - 1] == m->dims[m->rank - 1];
}

/* A MatMul takes up to two Adds after it: a constant bias row (its bias
 * slot, bias_input) and then a tensor of its output's shape (residual_input):
 * a Linear layer's bias and the skip connection after it, in that order, the
 * order the epilogue adds them (acc + bias + x, rounded as the two Add nodes
 * were). */
static nnf_status fuse_matmul(nnf_pass_ctx *ctx, nnf_node *add) {
    nnf_graph *g = ctx->graph;
    for (int side = 0; side < 2; side++) {
        int mv = add->inputs[side], xv = add->inputs[1 - side];
        nnf_node *mm = nnf_pass_producer(ctx, mv);
        if (!mm || strcmp(mm->op_type, "MatMul") || mm->domain[0] || ctx->uses[mv] != 1 || mv == xv ||
            mm->n_inputs < 2 || mm->n_inputs > 3)
            continue;
        nnf_gemm_params *gp = mm->params;
        if (gp->act.kind != NNF_ACT_NONE || gp->residual_input >= 0)
            continue;
        const nnf_value *m = &g->values[mv], *x = &g->values[xv];
        const nnf_shape *out = &g->values[add->outputs[0]].shape;
        if (m->dtype != NNF_DTYPE_FLOAT32 || x->dtype != NNF_DTYPE_FLOAT32)
            continue;
        /* symbolic dims match by name (nnf_shape_same); the GEMM's run
         * checks the residual's extents */
        int as_bias = gp->bias_input < 0 && bias_row(x, &m->shape);
        /* a residual that broadcasts needs Y's rows: both operands 2-D or more */
        bool rows = g->values[mm->inputs[0]].shape.rank >= 2 &&
                    g->values[mm->inputs[1]].shape.rank >= 2;
        bool fits =
            nnf_shape_same(&x->shape, out) || (rows && nnf_pass_rows_broadcast(&x->shape, out));
        if (!as_bias && !(nnf_shape_same(&m->shape, out) && fits))
            continue;
        int slot = mm->n_inputs;
        NNF_CHECK(nnf_pass_resize_inputs(mm, slot + 1));
        mm->inputs[slot] = xv;
        if (as_bias)
            gp->bias_input = slot;
        else
            gp->residual_input = slot;
        NNF_CHECK(nnf_pass_merge_names(ctx, mm, add));
        nnf_pass_take_output(ctx, mm, 0, add->outputs[0]);
        add->dead = true;
        ctx->fusions++;
        return NNF_OK;
    }
    return NNF_OK;
}

nnf_status nnf_pass_fuse_residual(nnf_pass_ctx *ctx) {
    nnf_graph *g = ctx->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        nnf_node *add = &g->nodes[i];
        if (add->dead || strcmp(add->op_type, "Add") || add->domain[0] || add->n_inputs != 2 || add->opset < 7)
            continue;
        NNF_CHECK(fuse_matmul(ctx, add));
        if (add->dead)
            continue;
        for (int side = 0; side < 2; side++) {
            int cv = add->inputs[side], xv = add->inputs[1 - side];
            nnf_node *conv = nnf_pass_producer(ctx, cv);
            if (!conv || strcmp(conv->op_type, "Conv") || conv->domain[0] || ctx->uses[cv] != 1 || cv == xv)
                continue;
            nnf_conv_params *cp = conv->params;
            if (cp->residual_input >= 0)
                continue;
            const nnf_value *c = &g->values[cv], *x = &g->values[xv];
            if (c->dtype != NNF_DTYPE_FLOAT32 || x->dtype != NNF_DTYPE_FLOAT32 || !same_shape(&c->shape, &x->shape) ||
                !same_shape(&c->shape, &g->values[add->outputs[0]].shape))
                continue;
            NNF_CHECK(nnf_pass_resize_inputs(conv, 4));
            conv->inputs[3] = xv;
            cp->residual_input = 3;
            cp->residual_after_act = cp->act.kind != NNF_ACT_NONE;
            NNF_CHECK(nnf_pass_merge_names(ctx, conv, add));
            nnf_pass_take_output(ctx, conv, 0, add->outputs[0]);
            add->dead = true;
            ctx->fusions++;
            break;
        }
    }
    return NNF_OK;
}

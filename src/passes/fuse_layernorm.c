/* The LayerNorm primitive chain of opset < 17 exports becomes one
 * LayerNormalization over the last axis:
 *
 *   m = ReduceMean(x, [-1])   d = Sub(x, m)      v = ReduceMean(Pow(d, 2), [-1])
 *   y = Add(Mul(Div(d, Sqrt(Add(v, eps))), gamma), beta)
 *
 * Nine nodes and eight intermediate tensors become one pass over x. The
 * rewritten node is the chain's last Add, now bound to LayerNormalization. */
#include "passes/pass.h"

#include "ops/norm.h"
#include "ops/op.h"
#include "ops/reduce.h"

#include <string.h>

/* Producer of v when it is op and v has exactly one reader. */
static nnf_node *single(nnf_pass_ctx *ctx, int v, const char *op) {
    nnf_node *p = v >= 0 ? nnf_pass_producer(ctx, v) : NULL;
    return nnf_pass_is_op(p, op) && ctx->uses[v] == 1 ? p : NULL;
}

/* ReduceMean over exactly the last axis of a rank-r input, keepdims. */
static bool mean_last_axis(const nnf_graph *g, const nnf_node *n) {
    const nnf_reduce_params *p = n->params;
    int r = g->values[n->inputs[0]].shape.rank;
    if (!p || !p->keepdims || r < 1)
        return false;
    const void *axes = NULL;
    nnf_dtype dt = NNF_DTYPE_INT64;
    int64_t count = 0;
    if (p->axes_from_input && n->n_inputs > 1 && n->inputs[1] >= 0) {
        const nnf_value *a = &g->values[n->inputs[1]];
        if (!a->data)
            return false;
        axes = a->data;
        dt = a->dtype;
        count = nnf_shape_numel(&a->shape);
    }
    unsigned char mask[NNF_MAX_RANK];
    nnf_error_clear();
    if (nnf_reduce_mask(n, p, r, axes, dt, count, mask) != NNF_OK)
        return false;
    for (int i = 0; i < r; i++)
        if (mask[i] != (i == r - 1))
            return false;
    return true;
}

/* gamma/beta: constant vectors of the last extent. */
static bool affine_vector(const nnf_graph *g, int v, int64_t c) {
    if (!nnf_pass_const_f32(g, v))
        return false;
    const nnf_shape *s = &g->values[v].shape;
    return s->rank == 1 && s->dims[0] == c;
}

/* The operand of a binary node that is not `other`; -1 if neither is. */
static int other_operand(const nnf_node *n, int other) {
    if (n->n_inputs != 2)
        return -1;
    return n->inputs[0] == other ? n->inputs[1] : n->inputs[1] == other ? n->inputs[0] : -1;
}

static nnf_status try_chain(nnf_pass_ctx *ctx, nnf_node *add_beta) {
    nnf_graph *g = ctx->graph;
    if (add_beta->n_inputs != 2)
        return NNF_OK;
    for (int side = 0; side < 2; side++) {
        nnf_node *mul = single(ctx, add_beta->inputs[side], "Mul");
        int beta = add_beta->inputs[1 - side];
        if (!mul || mul->n_inputs != 2)
            continue;
        for (int ms = 0; ms < 2; ms++) {
            nnf_node *div = single(ctx, mul->inputs[ms], "Div");
            int gamma = mul->inputs[1 - ms];
            if (!div || div->n_inputs != 2)
                continue;
            int d = div->inputs[0];
            nnf_node *sqrt = single(ctx, div->inputs[1], "Sqrt");
            nnf_node *add_eps = sqrt ? single(ctx, sqrt->inputs[0], "Add") : NULL;
            if (!add_eps || add_eps->n_inputs != 2)
                continue;
            float eps;
            int vi = nnf_pass_const_scalar(g, add_eps->inputs[1], &eps)   ? 0
                     : nnf_pass_const_scalar(g, add_eps->inputs[0], &eps) ? 1
                                                                          : -1;
            if (vi < 0)
                continue;
            nnf_node *var = single(ctx, add_eps->inputs[vi], "ReduceMean");
            nnf_node *pow = var ? single(ctx, var->inputs[0], "Pow") : NULL;
            float two;
            if (!pow || pow->inputs[0] != d || !nnf_pass_const_scalar(g, pow->inputs[1], &two) ||
                two != 2.0f)
                continue;
            nnf_node *sub = nnf_pass_producer(ctx, d);
            if (!nnf_pass_is_op(sub, "Sub") || ctx->uses[d] != 2 || sub->n_inputs != 2)
                continue;
            int x = sub->inputs[0];
            nnf_node *mean = single(ctx, sub->inputs[1], "ReduceMean");
            if (!mean || mean->inputs[0] != x || !mean_last_axis(g, mean) || !mean_last_axis(g, var))
                continue;
            const nnf_shape *xs = &g->values[x].shape;
            /* the normalised (last) extent known; the others may be symbolic */
            if (g->values[x].dtype != NNF_DTYPE_FLOAT32 || xs->rank < 1 ||
                xs->dims[xs->rank - 1] < 0 || !affine_vector(g, gamma, xs->dims[xs->rank - 1]) ||
                !affine_vector(g, beta, xs->dims[xs->rank - 1]) ||
                other_operand(mul, mul->inputs[ms]) != gamma ||
                other_operand(add_beta, mul->outputs[0]) != beta)
                continue;
            const nnf_op_def *ln = nnf_op_find("", "LayerNormalization", 17, NULL);
            nnf_norm_params *p = nnf_arena_calloc(&g->arena, 1, sizeof *p);
            if (!ln)
                return NNF_OK;
            if (!p || nnf_pass_resize_inputs(add_beta, 3) != NNF_OK)
                return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory fusing LayerNorm at '%s'", add_beta->name);
            p->epsilon = eps;
            p->axis = -1;
            nnf_node *absorbed[] = {mean, sub, pow, var, add_eps, sqrt, div, mul};
            for (int i = 0; i < 8; i++) {
                NNF_CHECK(nnf_pass_merge_names(ctx, add_beta, absorbed[i]));
                absorbed[i]->dead = true;
            }
            add_beta->inputs[0] = x;
            add_beta->inputs[1] = gamma;
            add_beta->inputs[2] = beta;
            add_beta->op_type = "LayerNormalization";
            add_beta->op = ln;
            add_beta->params = p;
            ctx->fusions++;
            return NNF_OK;
        }
    }
    return NNF_OK;
}

nnf_status nnf_pass_fuse_layernorm(nnf_pass_ctx *ctx) {
    nnf_graph *g = ctx->graph;
    for (int i = 0; i < g->n_nodes; i++)
        if (nnf_pass_is_op(&g->nodes[i], "Add"))
            NNF_CHECK(try_chain(ctx, &g->nodes[i]));
    return NNF_OK;
}

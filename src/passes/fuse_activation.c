/* Conv / Gemm → activation becomes the producer's epilogue, applied while the
 * output tile is still in registers. Sigmoid(x)·x (the exporters' SiLU) is
 * recognised as one activation: the conv output feeds both the Sigmoid and the
 * Mul, so the pattern is a small DAG, not a chain. */
#include "passes/pass.h"

#include "ops/params.h"

#include <float.h>
#include <string.h>

static bool is_op(const nnf_node *n, const char *op) { return n && !n->dead && !n->domain[0] && !strcmp(n->op_type, op); }

/* Producer that can take an activation epilogue on output value v. */
static nnf_activation *epilogue_slot(nnf_pass_ctx *ctx, int v, nnf_node **prod_out) {
    nnf_node *p = nnf_pass_producer(ctx, v);
    if (!p || p->outputs[0] != v || ctx->graph->values[v].dtype != NNF_DTYPE_FLOAT32)
        return NULL;
    nnf_activation *act = NULL;
    if (is_op(p, "Conv"))
        act = &((nnf_conv_params *)p->params)->act;
    else if (is_op(p, "Gemm"))
        act = &((nnf_gemm_params *)p->params)->act;
    if (!act || act->kind != NNF_ACT_NONE)
        return NULL;
    *prod_out = p;
    return act;
}

static bool scalar_const(const nnf_graph *g, int v, float *out) {
    if (v < 0)
        return true; /* absent optional bound: keep the default */
    const nnf_value *val = &g->values[v];
    if (!val->data || val->dtype != NNF_DTYPE_FLOAT32 || nnf_shape_numel(&val->shape) != 1)
        return false;
    *out = *(const float *)val->data;
    return true;
}

/* The activation a node computes, if it is one the epilogue supports. */
static bool activation_of(const nnf_graph *g, const nnf_node *n, nnf_activation *act) {
    *act = (nnf_activation){NNF_ACT_NONE, 0, 0};
    if (is_op(n, "Relu"))
        act->kind = NNF_ACT_RELU;
    else if (is_op(n, "LeakyRelu"))
        *act = (nnf_activation){NNF_ACT_LEAKY_RELU, nnf_attr_float(n, "alpha", 0.01f), 0};
    else if (is_op(n, "Tanh"))
        act->kind = NNF_ACT_TANH;
    else if (is_op(n, "Sigmoid"))
        act->kind = NNF_ACT_SIGMOID;
    else if (is_op(n, "HardSigmoid"))
        *act = (nnf_activation){NNF_ACT_HARD_SIGMOID, nnf_attr_float(n, "alpha", 0.2f), nnf_attr_float(n, "beta", 0.5f)};
    else if (is_op(n, "HardSwish"))
        act->kind = NNF_ACT_HARD_SWISH;
    else if (is_op(n, "Gelu"))
        act->kind = !strcmp(nnf_attr_string(n, "approximate", "none"), "tanh") ? NNF_ACT_GELU_TANH : NNF_ACT_GELU_ERF;
    else if (is_op(n, "Clip")) {
        float lo = -FLT_MAX, hi = FLT_MAX;
        if (n->opset < 11) {
            lo = nnf_attr_float(n, "min", lo);
            hi = nnf_attr_float(n, "max", hi);
        } else if (!scalar_const(g, n->n_inputs > 1 ? n->inputs[1] : -1, &lo) ||
                   !scalar_const(g, n->n_inputs > 2 ? n->inputs[2] : -1, &hi)) {
            return false;
        }
        *act = (nnf_activation){NNF_ACT_CLIP, lo, hi};
    }
    return act->kind != NNF_ACT_NONE;
}

static nnf_status absorb(nnf_pass_ctx *ctx, nnf_node *prod, nnf_activation *slot, const nnf_activation *act,
                         nnf_node *last, nnf_node *also_dead) {
    *slot = *act;
    if (also_dead)
        NNF_CHECK(nnf_pass_merge_names(ctx, prod, also_dead));
    NNF_CHECK(nnf_pass_merge_names(ctx, prod, last));
    nnf_pass_take_output(ctx, prod, 0, last->outputs[0]);
    last->dead = true;
    if (also_dead)
        also_dead->dead = true;
    ctx->fusions++;
    return NNF_OK;
}

/* Mul(c, Sigmoid(c)) where c feeds only those two. */
static nnf_status try_silu(nnf_pass_ctx *ctx, nnf_node *mul) {
    nnf_graph *g = ctx->graph;
    if (!is_op(mul, "Mul") || mul->n_inputs != 2)
        return NNF_OK;
    for (int side = 0; side < 2; side++) {
        int c = mul->inputs[side], s = mul->inputs[1 - side];
        nnf_node *sig = nnf_pass_producer(ctx, s);
        nnf_node *prod = NULL;
        if (!is_op(sig, "Sigmoid") || sig->inputs[0] != c || ctx->uses[c] != 2 || ctx->uses[s] != 1)
            continue;
        nnf_activation *slot = epilogue_slot(ctx, c, &prod);
        if (!slot)
            continue;
        nnf_activation silu = {NNF_ACT_SILU, 0, 0};
        (void)g;
        return absorb(ctx, prod, slot, &silu, mul, sig);
    }
    return NNF_OK;
}

nnf_status nnf_pass_fuse_activation(nnf_pass_ctx *ctx) {
    nnf_graph *g = ctx->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        nnf_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        if (is_op(n, "Mul")) {
            NNF_CHECK(try_silu(ctx, n));
            continue;
        }
        nnf_activation act;
        if (n->n_inputs < 1 || !activation_of(g, n, &act))
            continue;
        int v = n->inputs[0];
        nnf_node *prod = NULL;
        nnf_activation *slot = v >= 0 && ctx->uses[v] == 1 ? epilogue_slot(ctx, v, &prod) : NULL;
        if (slot)
            NNF_CHECK(absorb(ctx, prod, slot, &act, n, NULL));
    }
    return NNF_OK;
}

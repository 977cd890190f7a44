/* Conv / ConvTranspose / Gemm → activation becomes the producer's epilogue, applied while the
 * output tile is still in registers, also across ops that only move elements
 * (Reshape, Transpose...) in between. Sigmoid(x)·x (the exporters' SiLU) is
 * recognised as one activation: the conv output feeds both the Sigmoid and the
 * Mul, so the pattern is a small DAG, not a chain. The exporters' erf GELU
 * (Div, Erf, Add, Mul, Mul) is recognised the same way. */
#include "passes/pass.h"

#include "ops/params.h"

#include <float.h>
#include <stdio.h>
#include <string.h>

/* Producer that can take an activation epilogue on output value v. */
static nnf_activation *epilogue_slot(nnf_pass_ctx *ctx, int v, nnf_node **prod_out) {
    nnf_node *p = nnf_pass_producer(ctx, v);
    if (!p || p->outputs[0] != v || ctx->graph->values[v].dtype != NNF_DTYPE_FLOAT32)
        return NULL;
    nnf_activation *act = NULL;
    if (nnf_pass_is_op(p, "Conv") || nnf_pass_is_op(p, "ConvTranspose"))
        act = &((nnf_conv_params *)p->params)->act;
    else if (nnf_pass_is_op(p, "Gemm") || nnf_pass_is_op(p, "MatMul"))
        act = &((nnf_gemm_params *)p->params)->act;
    if (!act || act->kind != NNF_ACT_NONE)
        return NULL;
    *prod_out = p;
    return act;
}

static bool scalar_const(const nnf_graph *g, int v, float *out) {
    return v < 0 || nnf_pass_const_scalar(g, v, out); /* absent optional bound: the default */
}

/* The activation a node computes, if it is one the epilogue supports. */
static bool activation_of(const nnf_graph *g, const nnf_node *n, nnf_activation *act) {
    *act = (nnf_activation){NNF_ACT_NONE, 0, 0};
    if (nnf_pass_is_op(n, "Relu"))
        act->kind = NNF_ACT_RELU;
    else if (nnf_pass_is_op(n, "LeakyRelu"))
        *act = (nnf_activation){NNF_ACT_LEAKY_RELU, nnf_attr_float(n, "alpha", 0.01f), 0};
    else if (nnf_pass_is_op(n, "Tanh"))
        act->kind = NNF_ACT_TANH;
    else if (nnf_pass_is_op(n, "Sigmoid"))
        act->kind = NNF_ACT_SIGMOID;
    else if (nnf_pass_is_op(n, "HardSigmoid"))
        *act = (nnf_activation){NNF_ACT_HARD_SIGMOID, nnf_attr_float(n, "alpha", 0.2f), nnf_attr_float(n, "beta", 0.5f)};
    else if (nnf_pass_is_op(n, "HardSwish"))
        act->kind = NNF_ACT_HARD_SWISH;
    else if (nnf_pass_is_op(n, "Gelu"))
        act->kind = !strcmp(nnf_attr_string(n, "approximate", "none"), "tanh") ? NNF_ACT_GELU_TANH : NNF_ACT_GELU_ERF;
    else if (nnf_pass_is_op(n, "Clip")) {
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
    if (!nnf_pass_is_op(mul, "Mul") || mul->n_inputs != 2)
        return NNF_OK;
    for (int side = 0; side < 2; side++) {
        int c = mul->inputs[side], s = mul->inputs[1 - side];
        nnf_node *sig = nnf_pass_producer(ctx, s);
        nnf_node *prod = NULL;
        if (!nnf_pass_is_op(sig, "Sigmoid") || sig->inputs[0] != c || ctx->uses[c] != 2 ||
            ctx->uses[s] != 1)
            continue;
        nnf_activation *slot = epilogue_slot(ctx, c, &prod);
        if (!slot)
            continue;
        nnf_activation silu = {NNF_ACT_SILU, 0, 0};
        return absorb(ctx, prod, slot, &silu, mul, sig);
    }
    return NNF_OK;
}

/* The constant scalar operand of a binary node equal to want (±tol), and the
 * index of the other operand; -1 if none. */
static int scalar_operand(const nnf_graph *g, const nnf_node *n, float want, float tol) {
    if (n->n_inputs != 2)
        return -1;
    for (int k = 0; k < 2; k++) {
        float v;
        if (n->inputs[k] >= 0 && g->values[n->inputs[k]].data && scalar_const(g, n->inputs[k], &v) &&
            v >= want - tol && v <= want + tol)
            return 1 - k;
    }
    return -1;
}

/* The exporters' GELU: Mul(Mul(x, Add(Erf(Div(x, sqrt2)), 1)), 0.5), rooted at
 * the last Mul; every intermediate has one reader, x has exactly two. */
static nnf_status try_gelu(nnf_pass_ctx *ctx, nnf_node *m2) {
    nnf_graph *g = ctx->graph;
    int k = scalar_operand(g, m2, 0.5f, 1e-6f);
    nnf_node *m1 = k >= 0 ? nnf_pass_producer(ctx, m2->inputs[k]) : NULL;
    if (!nnf_pass_is_op(m1, "Mul") || m1->n_inputs != 2 || ctx->uses[m1->outputs[0]] != 1)
        return NNF_OK;
    for (int side = 0; side < 2; side++) {
        int x = m1->inputs[side];
        nnf_node *add = nnf_pass_producer(ctx, m1->inputs[1 - side]);
        if (!nnf_pass_is_op(add, "Add") || ctx->uses[add->outputs[0]] != 1)
            continue;
        int ka = scalar_operand(g, add, 1.0f, 1e-6f);
        nnf_node *erf = ka >= 0 ? nnf_pass_producer(ctx, add->inputs[ka]) : NULL;
        if (!nnf_pass_is_op(erf, "Erf") || ctx->uses[erf->outputs[0]] != 1)
            continue;
        nnf_node *div = nnf_pass_producer(ctx, erf->inputs[0]);
        if (!nnf_pass_is_op(div, "Div") || ctx->uses[div->outputs[0]] != 1 || div->inputs[0] != x ||
            scalar_operand(g, div, 1.41421356f, 1e-4f) != 0 || ctx->uses[x] != 2)
            continue;
        nnf_node *prod = NULL;
        nnf_activation *slot = epilogue_slot(ctx, x, &prod);
        if (!slot)
            continue;
        nnf_activation gelu = {NNF_ACT_GELU_ERF, 0, 0};
        nnf_node *absorbed[] = {div, erf, add, m1};
        for (int i = 0; i < 4; i++) {
            NNF_CHECK(nnf_pass_merge_names(ctx, prod, absorbed[i]));
            absorbed[i]->dead = true;
        }
        return absorb(ctx, prod, slot, &gelu, m2, NULL);
    }
    return NNF_OK;
}

/* Ops that only move elements (the activation commutes with them). */
static bool moves_only(const nnf_node *n) {
    static const char *const ops[] = {"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        if (nnf_pass_is_op(n, ops[k]))
            return true;
    return false;
}

#define MAX_MOVES 4

/* act(move(...move(c))) where c comes from a producer with an epilogue and
 * every value on the way has one reader: the activation is applied to c
 * instead, in the producer's epilogue, and the moves carry its result (a
 * YOLO head's Conv → Reshape → Transpose → Sigmoid: the Sigmoid was a pass of
 * its own over the head's largest tensor). The values between the producer
 * and the last move now hold activated data, so each gets a new value named
 * "<old>:<act op>": a tool that meets the old name (compare, hooks) must not
 * mistake it for the tensor the original graph computed. n0: values that
 * existed when the pass started (ctx->uses covers only those). */
static nnf_status try_through_moves(nnf_pass_ctx *ctx, nnf_node *act_node, const nnf_activation *act, int n0) {
    nnf_graph *g = ctx->graph;
    nnf_node *moves[MAX_MOVES];
    int n_moves = 0, v = act_node->inputs[0];
    nnf_node *m = nnf_pass_producer(ctx, v);
    while (m && moves_only(m) && n_moves < MAX_MOVES) {
        if (v >= n0 || ctx->uses[v] != 1 || m->outputs[0] != v || m->n_inputs < 1)
            return NNF_OK;
        moves[n_moves++] = m;
        v = m->inputs[0];
        m = nnf_pass_producer(ctx, v);
    }
    nnf_node *prod = NULL;
    nnf_activation *slot = n_moves && v < n0 && ctx->uses[v] == 1 ? epilogue_slot(ctx, v, &prod) : NULL;
    if (!slot)
        return NNF_OK;
    /* moves[n_moves - 1] reads the producer's output: a fresh value for it
     * and for each move's output but the last, all made before any node is
     * rewired (a failure leaves at most an unread value behind); a name the
     * model already uses stops the rewrite */
    int fresh[MAX_MOVES];
    for (int k = n_moves - 1; k >= 0; k--) {
        int old = k == n_moves - 1 ? v : moves[k + 1]->outputs[0];
        char name[512];
        snprintf(name, sizeof name, "%.480s:%s", g->values[old].name, act_node->op_type);
        if (nnf_graph_find_value(g, name) >= 0)
            return NNF_OK;
        if ((fresh[k] = nnf_graph_value(g, name)) < 0)
            return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory fusing '%s'", act_node->name);
        g->values[fresh[k]].dtype = g->values[old].dtype;
        g->values[fresh[k]].shape = g->values[old].shape;
    }
    for (int k = n_moves - 1; k >= 0; k--) {
        nnf_pass_take_output(ctx, k == n_moves - 1 ? prod : moves[k + 1], 0, fresh[k]);
        moves[k]->inputs[0] = fresh[k];
    }
    nnf_pass_take_output(ctx, moves[0], 0, act_node->outputs[0]);
    *slot = *act;
    NNF_CHECK(nnf_pass_merge_names(ctx, prod, act_node));
    act_node->dead = true;
    ctx->fusions++;
    return NNF_OK;
}

nnf_status nnf_pass_fuse_activation(nnf_pass_ctx *ctx) {
    nnf_graph *g = ctx->graph;
    const int n0 = g->n_values;
    for (int i = 0; i < g->n_nodes; i++) {
        nnf_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        if (nnf_pass_is_op(n, "Mul")) {
            NNF_CHECK(try_silu(ctx, n));
            if (!n->dead)
                NNF_CHECK(try_gelu(ctx, n));
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
        else if (v >= 0)
            NNF_CHECK(try_through_moves(ctx, n, &act, n0));
    }
    return NNF_OK;
}

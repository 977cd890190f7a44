/* Conv / ConvTranspose / Gemm → activation becomes the producer's epilogue, applied while the
 * output tile is still in registers, also across ops that only move elements
 * (Reshape, Transpose...) in between. The activations exporters write out as
 * small DAGs of element-wise nodes (SiLU, the erf and tanh GELUs) are
 * recognised by the function they compute (collect_chain, chain_activation). */
#include "passes/pass.h"

#include "ops/params.h"

#include <float.h>
#include <math.h>
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

/* ---- activations the exporters write out element by element -------------
 *
 * SiLU as Mul(x, Sigmoid(x)), GELU as the Erf chain (x / sqrt2, Erf, + 1, * x,
 * * 0.5) and the tanh GELU in torch's form (x * x * x, * 0.044715, + x, *
 * sqrt(2/pi), Tanh, + 1, * x, * 0.5) or HF's gelu_new (Pow(x, 3) and x * 0.5
 * first): the same functions in many association orders. A chain is found
 * by its shape, not by its order: the element-wise nodes (unary, or binary
 * with a scalar constant or another chain value) that a Mul reaches back
 * through, down to the one value x that they read and no chain node makes.
 * It is an activation when it gives that activation's value in double at 17
 * points from -5 to 5 (within 2e-5, where the tanh and erf GELUs differ by
 * up to 4.4e-4; a model's sqrt2 written as 1.4142 still counts, as it did).
 * Every value inside has its readers inside, and x, read by the chain alone,
 * comes from a producer with an epilogue, straight or through moves. */

#define CHAIN_MAX 12

typedef struct chain {
    nnf_node *nodes[CHAIN_MAX]; /* nodes[0] the root */
    int n, x;
} chain;

static bool chain_op(const nnf_node *n) {
    static const char *const ops[] = {"Mul", "Add", "Sub", "Div", "Pow", "Tanh", "Erf", "Sigmoid"};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        if (nnf_pass_is_op(n, ops[k]))
            return n->n_inputs == (k < 5 ? 2 : 1);
    return false;
}

static int chain_index(const chain *c, const nnf_node *n) {
    for (int i = 0; i < c->n; i++)
        if (c->nodes[i] == n)
            return i;
    return -1;
}

/* The chain rooted at root, values below n0 only (ctx->uses covers those). */
static bool collect_chain(nnf_pass_ctx *ctx, nnf_node *root, int n0, chain *c) {
    const nnf_graph *g = ctx->graph;
    c->n = 1;
    c->nodes[0] = root;
    c->x = -1;
    for (int i = 0; i < c->n; i++)
        for (int k = 0; k < c->nodes[i]->n_inputs; k++) {
            int v = c->nodes[i]->inputs[k];
            float f;
            if (v < 0 || v >= n0 || g->values[v].dtype != NNF_DTYPE_FLOAT32)
                return false;
            if (nnf_pass_const_scalar(g, v, &f))
                continue;
            nnf_node *p = nnf_pass_producer(ctx, v);
            if (p && chain_op(p) && p->outputs[0] == v && v != c->x) {
                if (chain_index(c, p) < 0) {
                    if (c->n == CHAIN_MAX)
                        return false;
                    c->nodes[c->n++] = p;
                }
            } else if (c->x < 0 || c->x == v) {
                c->x = v;
            } else {
                return false; /* a second input from outside */
            }
        }
    if (c->x < 0 || c->n < 2 || root->outputs[0] < 0 || root->outputs[0] >= n0)
        return false;
    /* x's readers and every inner value's are chain nodes; shapes stay x's */
    for (int i = 0; i <= c->n; i++) {
        int v = i < c->n ? c->nodes[i]->outputs[0] : c->x, reads = 0;
        if (!nnf_shape_same(&g->values[v].shape, &g->values[c->x].shape))
            return false;
        for (int j = 0; j < c->n; j++)
            for (int k = 0; k < c->nodes[j]->n_inputs; k++)
                reads += c->nodes[j]->inputs[k] == v;
        if (i > 0 && ctx->uses[v] != reads)
            return false;
    }
    return true;
}

static double chain_eval(nnf_pass_ctx *ctx, const chain *c, int v, double x) {
    float f;
    if (v == c->x)
        return x;
    if (nnf_pass_const_scalar(ctx->graph, v, &f))
        return f;
    const nnf_node *n = nnf_pass_producer(ctx, v);
    double a = chain_eval(ctx, c, n->inputs[0], x);
    double b = n->n_inputs > 1 ? chain_eval(ctx, c, n->inputs[1], x) : 0.0;
    switch (n->op_type[0]) {
    case 'M': return a * b;
    case 'A': return a + b;
    case 'S': return n->op_type[1] == 'u' ? a - b : 1.0 / (1.0 + exp(-a));
    case 'D': return a / b;
    case 'P': return pow(a, b);
    case 'T': return tanh(a);
    default: return erf(a);
    }
}

static double act_value(nnf_act_kind k, double x) {
    switch (k) {
    case NNF_ACT_SILU: return x / (1.0 + exp(-x));
    case NNF_ACT_GELU_ERF: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    default: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    }
}

/* The activation chain c computes, or NNF_ACT_NONE. */
static nnf_act_kind chain_activation(nnf_pass_ctx *ctx, const chain *c) {
    static const nnf_act_kind kinds[] = {NNF_ACT_SILU, NNF_ACT_GELU_ERF, NNF_ACT_GELU_TANH};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        bool same = true;
        for (int i = 0; i <= 16 && same; i++) {
            double x = -5.0 + 0.625 * i, want = act_value(kinds[k], x);
            double got = chain_eval(ctx, c, c->nodes[0]->outputs[0], x);
            same = fabs(got - want) <= 2e-5 * (fabs(want) > 1.0 ? fabs(want) : 1.0);
        }
        if (same)
            return kinds[k];
    }
    return NNF_ACT_NONE;
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

/* The activation act, which nodes[0..n) compute from x alone (nodes[0]
 * gives the result; only they read x), moves into the epilogue of x's
 * producer: straight, or across moves, act(move(...move(c))), where every
 * value on the way has one reader: the activation is applied to c instead
 * and the moves carry its result (a YOLO head's Conv → Reshape → Transpose
 * → Sigmoid: the Sigmoid was a pass of its own over the head's largest
 * tensor; GPT-2's Gemm → Reshape → tanh GELU). The values between the
 * producer and the last move now hold activated data, so each gets a new
 * value named "<old>:<what>": a tool that meets the old name (compare,
 * hooks) must not mistake it for the tensor the original graph computed.
 * n0: values that existed when the pass started (ctx->uses covers only
 * those). */
static nnf_status fuse(nnf_pass_ctx *ctx, int x, nnf_node **nodes, int n, const nnf_activation *act,
                       const char *what, int n0) {
    nnf_graph *g = ctx->graph;
    nnf_node *moves[MAX_MOVES];
    int n_moves = 0, v = x;
    nnf_node *m = nnf_pass_producer(ctx, v);
    while (m && moves_only(m) && n_moves < MAX_MOVES) {
        if (v >= n0 || (n_moves && ctx->uses[v] != 1) || m->outputs[0] != v || m->n_inputs < 1)
            return NNF_OK;
        moves[n_moves++] = m;
        v = m->inputs[0];
        m = nnf_pass_producer(ctx, v);
    }
    nnf_node *prod = NULL;
    nnf_activation *slot =
        v < n0 && (!n_moves || ctx->uses[v] == 1) ? epilogue_slot(ctx, v, &prod) : NULL;
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
        snprintf(name, sizeof name, "%.480s:%s", g->values[old].name, what);
        if (nnf_graph_find_value(g, name) >= 0)
            return NNF_OK;
        if ((fresh[k] = nnf_graph_value(g, name)) < 0)
            return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory fusing '%s'", nodes[0]->name);
        g->values[fresh[k]].dtype = g->values[old].dtype;
        g->values[fresh[k]].shape = g->values[old].shape;
    }
    for (int k = n_moves - 1; k >= 0; k--) {
        nnf_pass_take_output(ctx, k == n_moves - 1 ? prod : moves[k + 1], 0, fresh[k]);
        moves[k]->inputs[0] = fresh[k];
    }
    nnf_pass_take_output(ctx, n_moves ? moves[0] : prod, 0, nodes[0]->outputs[0]);
    *slot = *act;
    for (int i = n - 1; i >= 0; i--) {
        NNF_CHECK(nnf_pass_merge_names(ctx, prod, nodes[i]));
        nodes[i]->dead = true;
    }
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
        chain c;
        if (nnf_pass_is_op(n, "Mul") && collect_chain(ctx, n, n0, &c)) {
            nnf_activation act = {chain_activation(ctx, &c), 0, 0};
            if (act.kind != NNF_ACT_NONE)
                NNF_CHECK(fuse(ctx, c.x, c.nodes, c.n, &act,
                               act.kind == NNF_ACT_SILU ? "Silu" : "Gelu", n0));
            continue;
        }
        nnf_activation act;
        int v = n->n_inputs > 0 ? n->inputs[0] : -1;
        if (v >= 0 && v < n0 && ctx->uses[v] == 1 && activation_of(g, n, &act))
            NNF_CHECK(fuse(ctx, v, &n, 1, &act, n->op_type, n0));
    }
    return NNF_OK;
}

/* Helpers shared by the passes. */
#include "passes/pass.h"

#include <stdio.h>
#include <string.h>

void nnf_pass_count_uses(nnf_pass_ctx *ctx) {
    nnf_graph *g = ctx->graph;
    memset(ctx->uses, 0, sizeof(int) * (size_t)g->n_values);
    for (int i = 0; i < g->n_nodes; i++) {
        const nnf_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0)
                ctx->uses[n->inputs[k]]++;
    }
    for (int k = 0; k < g->n_outputs; k++)
        ctx->uses[g->outputs[k]]++;
}

bool nnf_pass_is_op(const nnf_node *n, const char *op) {
    return n && !n->dead && !n->domain[0] && !strcmp(n->op_type, op);
}

bool nnf_pass_dim_fits(const nnf_shape *x, int i, const nnf_shape *y, int k, bool may_broadcast) {
    if (x->dims[i] == 1 && may_broadcast)
        return true;
    if (x->dims[i] != y->dims[k])
        return false;
    return x->dims[i] >= 0 ||
           (x->dim_names[i] && y->dim_names[k] && !strcmp(x->dim_names[i], y->dim_names[k]));
}

bool nnf_pass_rows_broadcast(const nnf_shape *x, const nnf_shape *y) {
    if (x->rank < 1 || y->rank < 1 || x->rank > y->rank)
        return false;
    for (int i = 0; i < x->rank; i++)
        if (!nnf_pass_dim_fits(x, i, y, y->rank - x->rank + i, i + 1 < x->rank))
            return false;
    return true;
}

nnf_node *nnf_pass_producer(nnf_pass_ctx *ctx, int v) {
    if (v < 0)
        return NULL;
    int p = ctx->graph->values[v].producer;
    if (p < 0 || ctx->graph->nodes[p].dead)
        return NULL;
    return &ctx->graph->nodes[p];
}

nnf_status nnf_pass_merge_names(nnf_pass_ctx *ctx, nnf_node *into, const nnf_node *from) {
    int n_into = into->fused_from ? into->n_fused_from : 1;
    int n_from = from->fused_from ? from->n_fused_from : 1;
    const char **names = nnf_arena_calloc(&ctx->graph->arena, (size_t)(n_into + n_from), sizeof *names);
    if (!names)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory fusing '%s'", from->name);
    for (int i = 0; i < n_into; i++)
        names[i] = into->fused_from ? into->fused_from[i] : into->name;
    for (int i = 0; i < n_from; i++)
        names[n_into + i] = from->fused_from ? from->fused_from[i] : from->name;
    into->fused_from = names;
    into->n_fused_from = n_into + n_from;
    return NNF_OK;
}

void nnf_pass_take_output(nnf_pass_ctx *ctx, nnf_node *node, int k, int v) {
    nnf_graph *g = ctx->graph;
    int old = node->outputs[k];
    if (old >= 0)
        g->values[old].producer = -1;
    node->outputs[k] = v;
    g->values[v].producer = (int)(node - g->nodes);
}

nnf_status nnf_pass_resize_inputs(nnf_node *node, int n) {
    if (n <= node->n_inputs)
        return NNF_OK;
    int *in = nnf_realloc(node->inputs, sizeof(int) * (size_t)n);
    if (!in)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory fusing '%s'", node->name);
    for (int k = node->n_inputs; k < n; k++)
        in[k] = NNF_NO_VALUE;
    node->inputs = in;
    node->n_inputs = n;
    return NNF_OK;
}

const void *nnf_pass_const_f32_bytes(const nnf_graph *g, int v) {
    if (v < 0)
        return NULL;
    const nnf_value *val = &g->values[v];
    if ((val->kind != NNF_VALUE_INITIALIZER && val->kind != NNF_VALUE_CONSTANT) || !val->data ||
        val->dtype != NNF_DTYPE_FLOAT32 || !nnf_shape_known(&val->shape) || val->row_scale)
        return NULL;
    return val->data;
}

const float *nnf_pass_const_f32(const nnf_graph *g, int v) {
    const void *d = nnf_pass_const_f32_bytes(g, v);
    return d && !g->values[v].misaligned ? d : NULL;
}

bool nnf_pass_const_scalar(const nnf_graph *g, int v, float *out) {
    const float *d = nnf_pass_const_f32(g, v);
    if (!d || nnf_shape_numel(&g->values[v].shape) != 1)
        return false;
    *out = d[0];
    return true;
}

/* A new float32 constant over `data` (nbytes of it), under a name unused so far. */
static int add_const(nnf_graph *g, const char *name, const nnf_shape *shape, void *data, size_t nbytes) {
    char unique[512];
    int k = 0;
    snprintf(unique, sizeof unique, "%s", name);
    while (nnf_graph_find_value(g, unique) >= 0)
        snprintf(unique, sizeof unique, "%s_%d", name, ++k);
    int v = nnf_graph_value(g, unique);
    if (v < 0)
        return -1;
    nnf_value *val = &g->values[v];
    val->kind = NNF_VALUE_CONSTANT;
    val->dtype = NNF_DTYPE_FLOAT32;
    val->shape = *shape;
    val->data = data;
    val->nbytes = nbytes;
    return v;
}

int nnf_pass_new_const(nnf_graph *g, const char *name, const nnf_shape *shape, float **data_out) {
    int64_t numel = nnf_shape_numel(shape);
    if (numel < 0)
        return -1;
    float *data = nnf_graph_block_alloc(g, ((size_t)numel ? (size_t)numel : 1) * sizeof(float));
    if (!data)
        return -1;
    *data_out = data;
    return add_const(g, name, shape, data, (size_t)numel * sizeof(float));
}

int nnf_pass_new_const_over(nnf_pass_ctx *ctx, int from, const char *name, const nnf_shape *shape,
                            float **data_out) {
    nnf_graph *g = ctx->graph;
    const nnf_value *old = &g->values[from];
    int64_t numel = nnf_shape_numel(shape);
    void *data = NULL;
    if (numel > 0 && ctx->uses[from] == 1 && old->dtype == NNF_DTYPE_FLOAT32 &&
        old->nbytes == (size_t)numel * sizeof(float))
        data = nnf_graph_take_value_block(g, from);
    if (!data)
        return nnf_pass_new_const(g, name, shape, data_out);
    *data_out = data;
    return add_const(g, name, shape, data, (size_t)numel * sizeof(float));
}

void nnf_pass_release_unused(nnf_pass_ctx *ctx) {
    nnf_graph *g = ctx->graph;
    nnf_pass_count_uses(ctx);
    for (int v = 0; v < g->n_values; v++)
        if (ctx->uses[v] == 0 && (g->values[v].kind == NNF_VALUE_INITIALIZER || g->values[v].kind == NNF_VALUE_CONSTANT))
            nnf_graph_release_value_data(g, v);
}

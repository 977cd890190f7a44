/* Op binding, attribute parsing and static shape inference with constant
 * folding. */
#include "ir/bind.h"

#include "ops/op.h"

#include <stdio.h>
#include <string.h>

static int node_opset(const nnf_graph *g, const nnf_node *n) {
    return n->opset > 0 ? n->opset : (int)nnf_graph_opset(g, n->domain);
}

static void unsupported_line(const nnf_graph *g, const nnf_node *n, char *buf, size_t size) {
    const nnf_op_def *other = NULL;
    int opset = node_opset(g, n);
    nnf_op_find(n->domain, n->op_type, opset, &other);
    if (other)
        snprintf(buf, size, "%s%s%s (opset %d; nnfuse has opsets %d-%d) at node '%s'",
                 n->domain[0] ? n->domain : "", n->domain[0] ? "::" : "", n->op_type, opset,
                 other->since_version, other->until_version, n->name);
    else
        snprintf(buf, size, "%s%s%s (opset %d) at node '%s'", n->domain[0] ? n->domain : "",
                 n->domain[0] ? "::" : "", n->op_type, opset, n->name);
}

static int collect_unsupported(const nnf_graph *g, char (*lines)[256], int max, int count) {
    for (int i = 0; i < g->n_nodes; i++) {
        const nnf_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        if (!nnf_op_find(n->domain, n->op_type, node_opset(g, n), NULL)) {
            if (count < max)
                unsupported_line(g, n, lines[count], sizeof lines[count]);
            count++;
        }
        for (int a = 0; a < n->n_attrs; a++) {
            const nnf_attr *at = &n->attrs[a];
            if (at->type == NNF_ATTR_GRAPH && at->graph)
                count = collect_unsupported(at->graph, lines, max, count);
            for (int k = 0; at->type == NNF_ATTR_GRAPHS && k < at->count; k++)
                count = collect_unsupported(at->graphs[k], lines, max, count);
        }
    }
    return count;
}

int nnf_graph_unsupported(const nnf_graph *g, char (*lines)[256], int max) {
    return collect_unsupported(g, lines, max, 0);
}

nnf_status nnf_graph_bind_ops(nnf_graph *g) {
    enum { MAX_LISTED = 16 };
    char lines[MAX_LISTED][256];
    int bad = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        nnf_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        n->opset = node_opset(g, n);
        n->op = nnf_op_find(n->domain, n->op_type, n->opset, NULL);
        if (!n->op) {
            if (bad < MAX_LISTED)
                unsupported_line(g, n, lines[bad], sizeof lines[bad]);
            bad++;
        }
    }
    if (bad) {
        char msg[NNF_ERROR_MAX];
        size_t off = (size_t)snprintf(msg, sizeof msg, "%d unsupported operator%s: ", bad, bad > 1 ? "s" : "");
        for (int k = 0; k < bad && k < MAX_LISTED && off < sizeof msg; k++)
            off += (size_t)snprintf(msg + off, sizeof msg - off, "%s%s", k ? "; " : "", lines[k]);
        if (bad > MAX_LISTED && off < sizeof msg)
            off += (size_t)snprintf(msg + off, sizeof msg - off, "; and %d more", bad - MAX_LISTED);
        if (off < sizeof msg)
            snprintf(msg + off, sizeof msg - off,
                     ". `nnfuse ops` lists what is supported; include/nnfuse_plugin.h adds custom operators");
        return nnf_error(NNF_ERR_UNSUPPORTED, "%s", msg);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        nnf_node *n = &g->nodes[i];
        if (n->dead)
            continue;
        const nnf_op_def *d = n->op;
        /* trailing omitted optionals do not count towards arity */
        int nin = n->n_inputs;
        while (nin > 0 && n->inputs[nin - 1] < 0)
            nin--;
        if (nin < d->min_inputs || nin > d->max_inputs)
            return nnf_node_error(n, NNF_ERR_INVALID_MODEL, "has %d inputs; the operator takes %d to %d",
                                  nin, d->min_inputs, d->max_inputs);
        if (n->n_outputs < d->min_outputs || n->n_outputs > d->max_outputs)
            return nnf_node_error(n, NNF_ERR_INVALID_MODEL, "has %d outputs; the operator takes %d to %d",
                                  n->n_outputs, d->min_outputs, d->max_outputs);
        for (int k = 0; k < d->min_inputs; k++)
            if (n->inputs[k] < 0)
                return nnf_node_error(n, NNF_ERR_INVALID_MODEL, "required input %d is missing", k);
    }
    return NNF_OK;
}

nnf_status nnf_graph_init_params(nnf_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        nnf_node *n = &g->nodes[i];
        if (n->dead || !n->op)
            continue;
        nnf_status st = n->op->init(n, &g->arena);
        if (st != NNF_OK)
            return st;
    }
    return NNF_OK;
}


/* Merge an inferred shape into what the file declared: inferred extents win,
 * declared ones fill gaps, symbolic names are kept. */
static void merge_shape(nnf_shape *dst, const nnf_shape *inferred) {
    if (inferred->rank < 0)
        return;
    if (dst->rank != inferred->rank) {
        *dst = *inferred;
        return;
    }
    for (int i = 0; i < dst->rank; i++) {
        if (inferred->dims[i] >= 0) {
            dst->dims[i] = inferred->dims[i];
            dst->dim_names[i] = NULL;
        } else if (dst->dims[i] < 0 && !dst->dim_names[i]) {
            dst->dim_names[i] = inferred->dim_names[i];
        }
    }
}

#define FOLD_MAX_ELEMENTS (1 << 16)

/* A 2-D Transpose read only as the B of one MatMul, where fold_transpose
 * will run (-O2 and up): it makes the Transpose the MatMul's transposed
 * read, which the GEMM plan packs straight from the constant. Folded here,
 * the transposed copy stayed in the graph's arena for the model's life
 * beside the packed one (GPT-2's LM head, tied to the token embedding: 154
 * MB, and 200 ms of its load in the reference Transpose). */
static bool read_as_matmul_b(const nnf_graph *g, const nnf_node *n) {
    int v = n->n_outputs == 1 ? n->outputs[0] : -1, readers = 0;
    if (g->opt_level < 2 || strcmp(n->op_type, "Transpose") || n->domain[0] || v < 0 ||
        g->values[v].is_output || g->values[v].shape.rank != 2)
        return false;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; !g->nodes[i].dead && k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] == v) {
                if (k != 1 || strcmp(g->nodes[i].op_type, "MatMul") || g->nodes[i].domain[0])
                    return false;
                readers++;
            }
    return readers == 1;
}

/* Whether a node with constant inputs is evaluated now. Small outputs are
 * (shape arithmetic). Larger ones only from an operator that computes
 * nothing (zero in the table's cost column: it moves data, O(its bytes))
 * and whose outputs together are no larger than its inputs: BERT's position
 * embeddings gathered by constant positions ([512, 768] -> [1, 128, 768],
 * 0.1-0.4 ms a run), a weight transposed or sliced in the graph (but one
 * transposed for a MatMul's B: read_as_matmul_b). A Tile or
 * Expand of a constant stays a node: it would grow the model; so does a
 * Reshape of a large constant (a view): folded, a copy of the weights would
 * stay in memory for the model's life, beside the mapped file's pages. */
static bool foldable(const nnf_graph *g, const nnf_node *n, const nnf_tinfo *in,
                     const nnf_tinfo *out) {
    double in_bytes = 0.0, out_bytes = 0.0;
    bool small = true;
    for (int k = 0; k < n->n_outputs; k++) {
        int64_t numel = nnf_shape_numel(&out[k].shape);
        size_t es = nnf_dtype_size(out[k].dtype);
        if (n->outputs[k] < 0 || numel < 0 || !es)
            return false;
        small &= numel <= FOLD_MAX_ELEMENTS;
        out_bytes += (double)numel * (double)es;
    }
    if (small)
        return true;
    if (nnf_is_view_op(n) || n->op->cost(n, in, out) != 0.0 || read_as_matmul_b(g, n))
        return false;
    for (int k = 0; k < n->n_inputs; k++)
        if (in[k].present)
            in_bytes += (double)nnf_shape_numel(&in[k].shape) * (double)nnf_dtype_size(in[k].dtype);
    return out_bytes <= in_bytes;
}

static nnf_status fold_node(nnf_graph *g, nnf_node *n, const nnf_tinfo *in, nnf_tinfo *out) {
    /* A Constant holding a tensor aliases the attribute's data (often weights
     * in the mapped file) instead of copying it. */
    const nnf_attr *cv = !strcmp(n->op_type, "Constant") && n->n_outputs == 1 && n->outputs[0] >= 0
                             ? nnf_node_attr(n, "value") : NULL;
    if (cv && cv->type == NNF_ATTR_TENSOR && cv->tensor) {
        nnf_value *v = &g->values[n->outputs[0]];
        v->data = cv->tensor->data;
        v->nbytes = cv->tensor->nbytes;
        v->kind = NNF_VALUE_CONSTANT;
        n->dead = true;
        return NNF_OK;
    }
    nnf_buf ib[16], ob[16];
    nnf_buf *ip[16], *op[16];
    if (n->n_inputs > 16 || n->n_outputs > 16)
        return NNF_OK;
    if (!foldable(g, n, in, out))
        return NNF_OK; /* stays a node */
    for (int k = 0; k < n->n_inputs; k++) {
        if (!in[k].present) {
            ip[k] = NULL;
            continue;
        }
        ib[k] = (nnf_buf){.dtype = in[k].dtype, .rank = in[k].shape.rank, .data = (void *)in[k].data,
                          .numel = (size_t)nnf_shape_numel(&in[k].shape)};
        memcpy(ib[k].dims, in[k].shape.dims, sizeof ib[k].dims);
        ip[k] = &ib[k];
    }
    for (int k = 0; k < n->n_outputs; k++) {
        size_t numel = (size_t)nnf_shape_numel(&out[k].shape);
        void *data = nnf_arena_alloc(&g->arena, numel * nnf_dtype_size(out[k].dtype));
        if (!data)
            return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory folding node '%s'", n->name);
        ob[k] = (nnf_buf){.dtype = out[k].dtype, .rank = out[k].shape.rank, .data = data, .numel = numel};
        memcpy(ob[k].dims, out[k].shape.dims, sizeof ob[k].dims);
        op[k] = &ob[k];
    }
    nnf_kctx ctx = {0};
    NNF_CHECK(n->op->ref(n, ip, op, &ctx));
    for (int k = 0; k < n->n_outputs; k++) {
        nnf_value *v = &g->values[n->outputs[k]];
        v->data = ob[k].data;
        v->nbytes = ob[k].numel * nnf_dtype_size(ob[k].dtype);
        v->kind = NNF_VALUE_CONSTANT;
    }
    n->dead = true;
    return NNF_OK;
}

nnf_status nnf_graph_infer(nnf_graph *g) {
    nnf_tinfo in[64], out[64];
    for (int oi = 0; oi < g->n_order; oi++) {
        nnf_node *n = &g->nodes[g->order[oi]];
        if (n->dead || !n->op)
            continue;
        if (n->n_inputs > 64 || n->n_outputs > 64)
            return nnf_node_error(n, NNF_ERR_UNSUPPORTED, "more than 64 inputs or outputs");
        /* Shape and Size read only their input's shape: foldable once it is known */
        bool shape_only = !n->domain[0] && (!strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size"));
        bool all_const = true;
        for (int k = 0; k < n->n_inputs; k++) {
            nnf_value_tinfo(g, n->inputs[k], &in[k]);
            if (in[k].present && !in[k].data && !(shape_only && nnf_shape_known(&in[k].shape)))
                all_const = false;
        }
        for (int k = 0; k < n->n_outputs; k++) {
            memset(&out[k], 0, sizeof out[k]);
            out[k].present = n->outputs[k] >= 0;
            out[k].shape.rank = -1;
        }
        nnf_status st = n->op->infer(n, in, out);
        if (st != NNF_OK)
            return nnf_error_prefix(st, "shape inference");
        for (int k = 0; k < n->n_outputs; k++) {
            if (n->outputs[k] < 0)
                continue;
            nnf_value *v = &g->values[n->outputs[k]];
            if (out[k].dtype != NNF_DTYPE_UNDEFINED)
                v->dtype = out[k].dtype;
            merge_shape(&v->shape, &out[k].shape);
            out[k].shape = v->shape;
        }
        if (all_const) {
            /* a conv's weights may still be misaligned in the file (import.c) */
            for (int k = 0; k < n->n_inputs; k++) {
                if (n->inputs[k] < 0 || !g->values[n->inputs[k]].misaligned ||
                    nnf_node_reads_bytewise(n, k))
                    continue;
                NNF_CHECK(nnf_graph_align_value(g, n->inputs[k]));
                in[k].data = g->values[n->inputs[k]].data;
            }
            NNF_CHECK(fold_node(g, n, in, out));
        }
        NNF_CHECK(nnf_dimvals_infer(g, n));
    }
    return NNF_OK;
}

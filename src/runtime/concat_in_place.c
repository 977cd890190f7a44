/* Concat in place: which Concats need no copy, decided once per session.
 *
 * Concat along axis a with every dimension before a equal to 1 (axis 1 of a
 * batch-1 NCHW tensor, or of its NCHWc8 twin when every input is whole
 * blocks, which the layout pass requires) stacks its inputs end to end: input
 * k is the byte range [off_k, off_k + bytes_k) of the output. When each input
 * is an intermediate produced by a node of this graph and read for the last
 * time by the Concat, the executor gives the input that range of the output's
 * buffer instead of a buffer of its own, and the Concat runs nothing.
 *
 * The output's buffer is then taken when its first input is produced and
 * lives until the output's last reader, which is after every input's last
 * reader (the Concat), so no input outlives it. Excluded: graph inputs and
 * constants (not produced here), graph outputs (the caller reads them after
 * the run), an input that is itself the output of an in-place Concat or is
 * named twice, unknown shapes, and sessions on the
 * reference kernels (the oracle keeps every copy). An input made by a view op
 * (Reshape & co. hand their input's bytes on) is stacked when the view's own
 * input can be produced into the slice instead (slice_source): the view then
 * runs nothing. Likewise one step further back, the input 0 of a kernel that
 * may write its output over it: both sit at one address, so it runs in
 * place. Shapes are those inferred at load; the executor checks the run-time
 * ones against them. */
#include "runtime/session.h"

#include "ops/tensor_common.h"

#include <string.h>

/* Bytes of a value with a known shape, or 0 when unknown or too large. */
static size_t static_bytes(const nnf_value *v) {
    size_t bytes;
    return nnf_value_static_bytes(v, &bytes) ? bytes : 0;
}

/* Input 0 of node m when it can be produced where m's output lives, or -1:
 * an intermediate of `bytes` bytes that m reads last, made by a node that
 * is neither a view nor an in-place Concat (whose inputs already sit in its
 * own output). Its earlier readers only read it there. m is a view
 * (Reshape & co.), which then hands the same bytes on (can_alias), or a
 * planned kernel that may write its output over input 0 (in_place_inputs:
 * YOLOv5s's SliceAssign over its head's conv output), which then runs with
 * its output and input 0 at one address. */
static int slice_source(const nnf_session *s, const nnf_node *m, size_t bytes) {
    const nnf_graph *g = s->model->graph;
    int u = m->n_inputs > 0 ? m->inputs[0] : -1, id = (int)(m - g->nodes);
    if (!nnf_is_view_op(m) && !(s->plans[id].run && (s->plans[id].in_place_inputs & 1u)))
        return -1;
    for (int k = 1; k < m->n_outputs; k++)
        if (m->outputs[k] >= 0)
            return -1; /* Dropout's mask */
    for (int k = 1; k < m->n_inputs; k++)
        if (m->inputs[k] == u)
            return -1;
    if (u < 0 || g->values[u].kind != NNF_VALUE_INTERMEDIATE || g->values[u].producer < 0 ||
        s->slice_of[u] >= 0 || static_bytes(&g->values[u]) != bytes ||
        s->last_use[u] == INT32_MAX || g->order[s->last_use[u]] != id)
        return -1;
    const nnf_node *p = &g->nodes[g->values[u].producer];
    if (nnf_is_view_op(p) || (!strcmp(p->op_type, "Concat") && !p->domain[0] &&
                              s->concat_in_place[g->values[u].producer]))
        return -1;
    return u;
}

/* The byte offsets of a Concat's inputs in its output, when it can run in
 * place; false otherwise. src[2 k], src[2 k + 1]: values produced into input
 * k's slice too (slice_source: behind a view, then behind a kernel running
 * in place), else -1. */
static bool stackable(const nnf_session *s, const nnf_node *n, int oi, size_t *off, int *src) {
    const nnf_graph *g = s->model->graph;
    const nnf_axis_params *p = n->params;
    int y = n->outputs[0];
    const nnf_value *out = &g->values[y];
    size_t total = static_bytes(out);
    if (!p || !total || s->slice_of[y] >= 0)
        return false;
    int rank = out->shape.rank;
    int64_t axis = p->axis < 0 ? p->axis + rank : p->axis;
    if (axis < 0 || axis >= rank)
        return false;
    for (int d = 0; d < axis; d++)
        if (out->shape.dims[d] != 1)
            return false;
    size_t at = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        int v = n->inputs[k];
        if (v < 0)
            return false;
        const nnf_value *in = &g->values[v];
        size_t bytes = static_bytes(in);
        if (in->kind != NNF_VALUE_INTERMEDIATE || in->producer < 0 || s->last_use[v] != oi ||
            !bytes || in->dtype != out->dtype || in->shape.rank != rank || s->slice_of[v] >= 0)
            return false;
        const nnf_node *prod = &g->nodes[in->producer];
        /* a Concat inside a Concat: kept simple, copied; a view hands on
         * its input's bytes, so that input is produced into the slice
         * (YOLOv5s's last Concat reads each head's Concat through a
         * Reshape: 8.6 MB copied a run) */
        int *sk = src + 2 * k;
        sk[0] = sk[1] = -1;
        if (nnf_is_view_op(prod)) {
            if ((sk[0] = slice_source(s, prod, bytes)) < 0)
                return false;
            prod = &g->nodes[g->values[sk[0]].producer];
        } else if (!strcmp(prod->op_type, "Concat") && !prod->domain[0]) {
            return false;
        }
        int w = slice_source(s, prod, bytes);
        sk[sk[0] < 0 ? 0 : 1] = w;
        for (int j = 0; j < k; j++)
            if (n->inputs[j] == v)
                return false;
        for (int j = 0; j < 2 * k; j++)
            for (int i = 0; i < 2; i++)
                if (sk[i] >= 0 && src[j] == sk[i])
                    return false;
        off[k] = at;
        if (!nnf_add_size(at, bytes, &at))
            return false;
    }
    return at == total;
}

nnf_status nnf_concat_in_place_plan(nnf_session *s) {
    const nnf_graph *g = s->model->graph;
    size_t nv = (size_t)g->n_values + 1;
    s->slice_of = nnf_malloc(nv * sizeof *s->slice_of);
    s->slice_off = nnf_calloc(nv, sizeof *s->slice_off);
    s->concat_in_place = nnf_calloc((size_t)g->n_nodes + 1, 1);
    if (!s->slice_of || !s->slice_off || !s->concat_in_place)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory planning a session's concats");
    for (size_t v = 0; v < nv; v++)
        s->slice_of[v] = -1;
    if (!s->plans)
        return NNF_OK;
    size_t stack[16], *off = stack;
    int src_stack[32], *src = src_stack;
    for (int oi = 0; oi < g->n_order; oi++) {
        int id = g->order[oi];
        const nnf_node *n = &g->nodes[id];
        if (n->dead || n->domain[0] || strcmp(n->op_type, "Concat") || n->n_outputs != 1 ||
            n->outputs[0] < 0 || n->n_inputs < 1 || !s->plans[id].run)
            continue;
        if (n->n_inputs > 16 && (!(off = nnf_calloc((size_t)n->n_inputs, sizeof *off)) ||
                                 !(src = nnf_calloc(2 * (size_t)n->n_inputs, sizeof *src)))) {
            if (off != stack)
                nnf_free(off);
            return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory planning a session's concats");
        }
        if (stackable(s, n, oi, off, src)) {
            s->concat_in_place[id] = 1;
            for (int k = 0; k < n->n_inputs; k++) {
                s->slice_of[n->inputs[k]] = n->outputs[0];
                s->slice_off[n->inputs[k]] = off[k];
                for (int i = 0; i < 2; i++)
                    if (src[2 * k + i] >= 0) {
                        s->slice_of[src[2 * k + i]] = n->outputs[0];
                        s->slice_off[src[2 * k + i]] = off[k];
                    }
            }
        }
        if (off != stack)
            nnf_free(off);
        if (src != src_stack)
            nnf_free(src);
        off = stack;
        src = src_stack;
    }
    return NNF_OK;
}

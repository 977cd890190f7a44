/* Symbolic shape values: the small integer vectors that exported models
 * compute from a tensor's shape at run time (x.view(x.size(0), x.size(1), 12,
 * 64) exports as Shape -> Gather -> Unsqueeze -> Concat -> Reshape) are
 * followed at load element by element: each element a known extent, a
 * symbolic dim by name ("S": what input_ids' dim 1 is at this run), or
 * unknown. Reshape's infer reads them (nnf_tinfo.dimvals), so its output is
 * "B x S x 12 x 64", not "? x ? x ? x ?", and the passes can match shapes
 * across it (BERT's attention output and its residual). Only load-time
 * shapes change: the run computes these vectors from data as before, and a
 * kernel planned on a match by name checks the run's extents.
 *
 * The ops followed: Shape, Gather (a constant index), Unsqueeze, Squeeze,
 * Identity, Cast to an integer, Concat and Slice (constant bounds, step 1) of
 * 1-D vectors of at most NNF_MAX_RANK elements; anything else ends the
 * trail. */
#include "ops/tensor_common.h"

#include <string.h>

/* Value v as a vector of dimvals (at most NNF_MAX_RANK): its own, or
 * constant integer data; -1 when it is neither. */
static int vec_of(const nnf_graph *g, int v, nnf_dimval *out) {
    if (v < 0)
        return -1;
    const nnf_value *val = &g->values[v];
    if (val->dimvals) {
        memcpy(out, val->dimvals, sizeof *out * (size_t)val->n_dimvals);
        return val->n_dimvals;
    }
    int64_t n = nnf_shape_numel(&val->shape);
    if (!val->data || val->released || val->shape.rank > 1 || n < 0 || n > NNF_MAX_RANK ||
        (val->dtype != NNF_DTYPE_INT64 && val->dtype != NNF_DTYPE_INT32))
        return -1;
    for (int64_t i = 0; i < n; i++)
        out[i] = (nnf_dimval){nnf_read_index(val->dtype, val->data, i), NULL};
    return (int)n;
}

/* One constant integer of input k (a scalar or a 1-element vector). */
static bool const_int(const nnf_graph *g, const nnf_node *n, int k, int64_t *out) {
    nnf_dimval d[NNF_MAX_RANK];
    if (k >= n->n_inputs || n->inputs[k] < 0 || g->values[n->inputs[k]].dimvals ||
        vec_of(g, n->inputs[k], d) != 1)
        return false;
    *out = d[0].v;
    return true;
}

static int shape_of(const nnf_graph *g, const nnf_node *n, nnf_dimval *out) {
    const nnf_shape *s = &g->values[n->inputs[0]].shape;
    if (s->rank < 0)
        return -1;
    int lo, hi;
    nnf_shape_op_range(n->params, s->rank, &lo, &hi);
    for (int i = lo; i < hi; i++)
        out[i - lo] = (nnf_dimval){s->dims[i], s->dims[i] < 0 ? s->dim_names[i] : NULL};
    return hi > lo ? hi - lo : 0;
}

static int gather(const nnf_graph *g, const nnf_node *n, nnf_dimval *out) {
    nnf_dimval d[NNF_MAX_RANK], idx[NNF_MAX_RANK];
    int c = vec_of(g, n->inputs[0], d);
    int64_t axis = nnf_attr_int(n, "axis", 0);
    if (c < 0 || g->values[n->inputs[0]].shape.rank != 1 || (axis != 0 && axis != -1) ||
        n->n_inputs < 2 || n->inputs[1] < 0 || g->values[n->inputs[1]].dimvals)
        return -1;
    int k = vec_of(g, n->inputs[1], idx);
    for (int i = 0; i < k; i++) {
        int64_t j = idx[i].v < 0 ? idx[i].v + c : idx[i].v;
        if (j < 0 || j >= c)
            return -1;
        out[i] = d[j];
    }
    return k;
}

static int concat(const nnf_graph *g, const nnf_node *n, nnf_dimval *out) {
    int64_t axis = nnf_attr_int(n, "axis", 0);
    if (axis != 0 && axis != -1)
        return -1;
    int total = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        nnf_dimval d[NNF_MAX_RANK];
        int c = vec_of(g, n->inputs[k], d);
        if (c < 0 || total + c > NNF_MAX_RANK || g->values[n->inputs[k]].shape.rank != 1)
            return -1;
        memcpy(out + total, d, sizeof *d * (size_t)c);
        total += c;
    }
    return total;
}

/* Slice of a vector: constant bounds, axis 0 and step 1 (opset 10+'s inputs,
 * or the older attributes). */
static int slice(const nnf_graph *g, const nnf_node *n, nnf_dimval *out) {
    nnf_dimval d[NNF_MAX_RANK];
    int c = vec_of(g, n->inputs[0], d);
    if (c < 0 || g->values[n->inputs[0]].shape.rank != 1)
        return -1;
    int64_t start, end, axis = 0, step = 1;
    if (n->opset < 10) {
        const nnf_slice_params *p = n->params;
        if (p->n_starts != 1 || p->n_ends != 1 || (p->n_axes >= 0 && p->n_axes != 1))
            return -1;
        start = p->starts[0];
        end = p->ends[0];
        axis = p->n_axes == 1 ? p->axes[0] : 0;
    } else if (!const_int(g, n, 1, &start) || !const_int(g, n, 2, &end) ||
               (n->n_inputs > 3 && n->inputs[3] >= 0 && !const_int(g, n, 3, &axis)) ||
               (n->n_inputs > 4 && n->inputs[4] >= 0 && !const_int(g, n, 4, &step))) {
        return -1;
    }
    if ((axis != 0 && axis != -1) || step != 1)
        return -1;
    start = start < 0 ? start + c : start;
    end = end < 0 ? end + c : end;
    start = start < 0 ? 0 : start > c ? c : start;
    end = end < 0 ? 0 : end > c ? c : end;
    int k = end > start ? (int)(end - start) : 0;
    memcpy(out, d + start, sizeof *d * (size_t)k);
    return k;
}

/* Ops that keep a vector's elements: Unsqueeze/Squeeze between a scalar
 * and one element, Identity, Cast to another integer type (the output's
 * dtype is checked below). */
static int same_elements(const nnf_graph *g, const nnf_node *n, nnf_dimval *out) {
    const nnf_value *y = &g->values[n->outputs[0]];
    int c = vec_of(g, n->inputs[0], out);
    return c >= 0 && nnf_shape_numel(&y->shape) == c && y->shape.rank <= 1 ? c : -1;
}

nnf_status nnf_dimvals_infer(nnf_graph *g, const nnf_node *n) {
    if (n->dead || n->domain[0] || n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs < 1 ||
        n->outputs[0] < 0)
        return NNF_OK;
    nnf_value *y = &g->values[n->outputs[0]];
    if (y->data || (y->dtype != NNF_DTYPE_INT64 && y->dtype != NNF_DTYPE_INT32))
        return NNF_OK;
    static const struct {
        const char *op;
        int (*fn)(const nnf_graph *, const nnf_node *, nnf_dimval *);
    } rules[] = {{"Shape", shape_of},          {"Gather", gather},
                 {"Concat", concat},           {"Slice", slice},
                 {"Unsqueeze", same_elements}, {"Squeeze", same_elements},
                 {"Identity", same_elements},  {"Cast", same_elements}};
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        if (strcmp(n->op_type, rules[r].op))
            continue;
        nnf_dimval d[NNF_MAX_RANK];
        int c = rules[r].fn(g, n, d);
        bool any = false; /* something known about it */
        for (int i = 0; i < c; i++)
            any |= d[i].v >= 0 || d[i].name;
        if (c <= 0 || !any)
            return NNF_OK;
        nnf_dimval *keep = nnf_arena_alloc(&g->arena, sizeof *keep * (size_t)c);
        if (!keep)
            return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory inferring '%s'", n->name);
        memcpy(keep, d, sizeof *d * (size_t)c);
        y->dimvals = keep;
        y->n_dimvals = c;
        return NNF_OK;
    }
    return NNF_OK;
}

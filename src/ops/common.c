/* Helpers shared by the operator definitions. */
#include "ops/op.h"

#include <stdio.h>
#include <string.h>

nnf_status nnf_node_error(const nnf_node *node, nnf_status status, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return nnf_error(status, "node '%s' (%s%s%s): %s", node->name,
                     node->domain && node->domain[0] ? node->domain : "",
                     node->domain && node->domain[0] ? "::" : "", node->op_type, msg);
}

nnf_status nnf_broadcast_shape(const nnf_shape *a, const nnf_shape *b, nnf_shape *out) {
    if (a->rank < 0 || b->rank < 0) {
        out->rank = -1;
        return NNF_OK;
    }
    int r = a->rank > b->rank ? a->rank : b->rank;
    nnf_shape s = {.rank = r};
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        const char *na = ia >= 0 ? a->dim_names[ia] : NULL;
        const char *nb = ib >= 0 ? b->dim_names[ib] : NULL;
        if (da == 1) {
            s.dims[i] = db;
            s.dim_names[i] = nb;
        } else if (db == 1) {
            s.dims[i] = da;
            s.dim_names[i] = na;
        } else if (da < 0 || db < 0) {
            /* unknown vs known (non-1): the known one wins; both unknown: keep a name */
            s.dims[i] = da < 0 ? db : da;
            s.dim_names[i] = s.dims[i] < 0 ? (na ? na : nb) : NULL;
        } else if (da == db) {
            s.dims[i] = da;
        } else {
            return nnf_error(NNF_ERR_SHAPE, "shapes cannot broadcast: dim %d is %lld vs %lld", i,
                             (long long)da, (long long)db);
        }
    }
    *out = s;
    return NNF_OK;
}

nnf_status nnf_norm_axis(const nnf_node *node, int64_t axis, int rank, int *out) {
    if (axis < -rank || axis >= rank)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "axis %lld out of range for rank %d",
                              (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + rank : axis);
    return NNF_OK;
}

int64_t nnf_tinfo_int(const nnf_tinfo *t, int64_t i) {
    switch (t->dtype) {
    case NNF_DTYPE_INT64: return ((const int64_t *)t->data)[i];
    case NNF_DTYPE_INT32: return ((const int32_t *)t->data)[i];
    default: return 0;
    }
}

void nnf_value_tinfo(const nnf_graph *g, int v, nnf_tinfo *t) {
    static const int64_t empty_data[1];
    memset(t, 0, sizeof *t);
    t->shape.rank = -1;
    if (v < 0)
        return;
    const nnf_value *val = &g->values[v];
    t->present = true;
    t->dtype = val->dtype;
    t->shape = val->shape;
    t->data = val->data;
    t->dimvals = val->dimvals;
    t->n_dimvals = val->n_dimvals;
    if (!t->data && !val->released && (val->kind == NNF_VALUE_INITIALIZER || val->kind == NNF_VALUE_CONSTANT))
        t->data = empty_data;
}

double nnf_node_cost(const nnf_graph *g, const nnf_node *n, bool unit_extents) {
    nnf_tinfo t[128];
    if (n->n_inputs > 64 || n->n_outputs > 64)
        return -1;
    for (int k = 0; k < n->n_inputs + n->n_outputs; k++) {
        nnf_value_tinfo(g, k < n->n_inputs ? n->inputs[k] : n->outputs[k - n->n_inputs], &t[k]);
        if (t[k].present && t[k].shape.rank < 0)
            return -1;
        for (int d = 0; d < t[k].shape.rank; d++)
            if (t[k].shape.dims[d] < 0) {
                if (!unit_extents)
                    return -1;
                t[k].shape.dims[d] = 1;
            }
    }
    return n->op->cost(n, t, t + n->n_inputs);
}

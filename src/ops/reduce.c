/* Definitions (init, infer, cost) of ReduceXxx, ArgMax and ArgMin. Their
 * reference kernels are in kernels/ref/reduce.c. */
#include "ops/reduce.h"

#include <string.h>

static const struct {
    const char *name;
    nnf_reduce_kind kind;
    int int_ok;     /* has int32/int64 kernels */
    int axes_input; /* first opset taking axes as an input */
} reduce_ops[] = {
    {"ReduceSum", NNF_REDUCE_SUM, 1, 13},
    {"ReduceMean", NNF_REDUCE_MEAN, 1, 18},
    {"ReduceMax", NNF_REDUCE_MAX, 1, 18},
    {"ReduceMin", NNF_REDUCE_MIN, 1, 18},
    {"ReduceProd", NNF_REDUCE_PROD, 1, 18},
    {"ReduceL1", NNF_REDUCE_L1, 1, 18},
    {"ReduceL2", NNF_REDUCE_L2, 0, 18},
    {"ReduceLogSum", NNF_REDUCE_LOG_SUM, 0, 18},
    {"ReduceLogSumExp", NNF_REDUCE_LOG_SUM_EXP, 0, 18},
    {"ReduceSumSquare", NNF_REDUCE_SUM_SQUARE, 1, 18},
};

static int reduce_index(const char *name) {
    for (size_t i = 0; i < sizeof reduce_ops / sizeof reduce_ops[0]; i++)
        if (!strcmp(reduce_ops[i].name, name))
            return (int)i;
    return -1;
}

nnf_status nnf_reduce_init(NNF_INIT_ARGS) {
    int idx = reduce_index(node->op_type);
    if (idx < 0)
        return nnf_node_error(node, NNF_ERR_INTERNAL, "not a reduction");
    nnf_reduce_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    if (!p)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory");
    p->kind = reduce_ops[idx].kind;
    p->keepdims = nnf_attr_int(node, "keepdims", 1) != 0;
    p->axes_from_input = node->opset >= reduce_ops[idx].axes_input;
    if (p->axes_from_input) {
        p->noop_with_empty_axes = nnf_attr_int(node, "noop_with_empty_axes", 0) != 0;
    } else {
        const int64_t *axes = NULL;
        int n = nnf_attr_ints(node, "axes", &axes);
        if (n > NNF_MAX_RANK)
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "attribute axes has %d entries", n);
        for (int i = 0; i < n; i++)
            p->axes[i] = axes[i];
        p->n_axes = n > 0 ? n : 0;
    }
    node->params = p;
    return NNF_OK;
}

nnf_status nnf_reduce_mask(const nnf_node *node, const nnf_reduce_params *p, int rank,
                           const void *axes, nnf_dtype axes_dtype, int64_t n,
                           unsigned char mask[NNF_MAX_RANK]) {
    memset(mask, 0, NNF_MAX_RANK);
    if (!p->axes_from_input) {
        axes = p->axes;
        axes_dtype = NNF_DTYPE_INT64;
        n = p->n_axes;
    } else if (!axes) {
        n = 0;
    }
    if (n == 0) {
        if (!(p->axes_from_input && p->noop_with_empty_axes))
            memset(mask, 1, (size_t)rank);
        return NNF_OK;
    }
    if (axes_dtype != NNF_DTYPE_INT64 && axes_dtype != NNF_DTYPE_INT32)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "axes must be int64, not %s",
                              nnf_dtype_name(axes_dtype));
    for (int64_t i = 0; i < n; i++) {
        int64_t a =
            axes_dtype == NNF_DTYPE_INT64 ? ((const int64_t *)axes)[i] : ((const int32_t *)axes)[i];
        int ax;
        NNF_CHECK(nnf_norm_axis(node, a, rank, &ax));
        if (mask[ax])
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "axis %lld is repeated",
                                  (long long)a);
        mask[ax] = 1;
    }
    return NNF_OK;
}

nnf_status nnf_reduce_infer(NNF_INFER_ARGS) {
    const nnf_reduce_params *p = node->params;
    if (node->n_inputs < 1 || !in[0].present)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input 0 is required");
    int idx = reduce_index(node->op_type);
    nnf_dtype t = in[0].dtype;
    int minmax = p->kind == NNF_REDUCE_MAX || p->kind == NNF_REDUCE_MIN;
    if (!(t == NNF_DTYPE_FLOAT32 || (t == NNF_DTYPE_BOOL && minmax) ||
          ((t == NNF_DTYPE_INT32 || t == NNF_DTYPE_INT64) && idx >= 0 && reduce_ops[idx].int_ok)))
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input 0 has unsupported type %s",
                              nnf_dtype_name(t));
    out[0].dtype = t;
    const nnf_shape *x = &in[0].shape;
    nnf_shape *y = &out[0].shape;
    const nnf_tinfo *ax = p->axes_from_input && node->n_inputs > 1 && in[1].present ? &in[1] : NULL;
    if (ax && ax->dtype != NNF_DTYPE_INT64 && ax->dtype != NNF_DTYPE_INT32)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "axes must be int64, not %s",
                              nnf_dtype_name(ax->dtype));
    int64_t n_axes = ax ? nnf_shape_numel(&ax->shape) : 0;
    if (x->rank < 0) {
        y->rank = -1;
        return NNF_OK;
    }
    if (ax && !ax->data && n_axes != 0) {
        /* Which dims go is known only at run time. */
        if (p->keepdims) {
            *y = *x;
            for (int i = 0; i < y->rank; i++)
                if (y->dims[i] != 1) {
                    y->dims[i] = -1;
                    y->dim_names[i] = NULL;
                }
        } else {
            y->rank = n_axes > 0 && n_axes <= x->rank ? x->rank - (int)n_axes : -1;
            for (int i = 0; i < y->rank; i++) {
                y->dims[i] = -1;
                y->dim_names[i] = NULL;
            }
        }
        return NNF_OK;
    }
    unsigned char mask[NNF_MAX_RANK];
    NNF_CHECK(nnf_reduce_mask(node, p, x->rank, ax ? ax->data : NULL,
                              ax ? ax->dtype : NNF_DTYPE_INT64, n_axes, mask));
    nnf_shape s = {.rank = 0};
    for (int i = 0; i < x->rank; i++) {
        if (!mask[i]) {
            s.dims[s.rank] = x->dims[i];
            s.dim_names[s.rank++] = x->dim_names[i];
        } else if (p->keepdims) {
            s.dims[s.rank++] = 1;
        }
    }
    *y = s;
    return NNF_OK;
}

double nnf_reduce_cost(NNF_COST_ARGS) {
    int64_t n = nnf_shape_numel(&in[0].shape);
    const nnf_reduce_params *p = node->params;
    double per = p && (p->kind == NNF_REDUCE_LOG_SUM_EXP) ? 5.0
                 : p && p->kind == NNF_REDUCE_L2          ? 2.0
                                                          : 1.0;
    return n < 0 ? 0.0 : per * (double)n;
}

nnf_status nnf_argminmax_init(NNF_INIT_ARGS) {
    nnf_argminmax_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    if (!p)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory");
    p->is_max = !strcmp(node->op_type, "ArgMax");
    p->axis = nnf_attr_int(node, "axis", 0);
    p->keepdims = nnf_attr_int(node, "keepdims", 1) != 0;
    p->select_last_index = nnf_attr_int(node, "select_last_index", 0) != 0;
    node->params = p;
    return NNF_OK;
}

nnf_status nnf_argminmax_infer(NNF_INFER_ARGS) {
    const nnf_argminmax_params *p = node->params;
    if (node->n_inputs < 1 || !in[0].present)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input 0 is required");
    nnf_dtype t = in[0].dtype;
    if (t != NNF_DTYPE_FLOAT32 && t != NNF_DTYPE_INT32 && t != NNF_DTYPE_INT64)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input 0 has unsupported type %s",
                              nnf_dtype_name(t));
    out[0].dtype = NNF_DTYPE_INT64;
    const nnf_shape *x = &in[0].shape;
    if (x->rank < 0) {
        out[0].shape.rank = -1;
        return NNF_OK;
    }
    int axis;
    NNF_CHECK(nnf_norm_axis(node, p->axis, x->rank, &axis));
    nnf_shape s = {.rank = 0};
    for (int i = 0; i < x->rank; i++) {
        if (i != axis) {
            s.dims[s.rank] = x->dims[i];
            s.dim_names[s.rank++] = x->dim_names[i];
        } else if (p->keepdims) {
            s.dims[s.rank++] = 1;
        }
    }
    if (x->dims[axis] == 0 && nnf_shape_numel(&s) > 0)
        return nnf_node_error(node, NNF_ERR_SHAPE, "axis %d has no elements to select from", axis);
    out[0].shape = s;
    return NNF_OK;
}

double nnf_argminmax_cost(NNF_COST_ARGS) {
    int64_t n = nnf_shape_numel(&in[0].shape);
    return n < 0 ? 0.0 : (double)n;
}

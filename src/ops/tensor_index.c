/* Indexing operators: Gather, GatherElements, GatherND, ScatterND, OneHot,
 * NonZero, TopK, Trilu, CumSum. */
#include "ops/tensor_common.h"

static nnf_status check_numeric_dtype(const nnf_node *node, nnf_dtype t) {
    if (t != NNF_DTYPE_UNDEFINED && !nnf_is_numeric_dtype(t))
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "dtype %s is not supported",
                              nnf_dtype_name(t));
    return NNF_OK;
}

static nnf_status check_index_dtype(const nnf_node *node, nnf_dtype t, const char *what) {
    if (t != NNF_DTYPE_UNDEFINED && !nnf_is_int_index_dtype(t))
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "%s must be int32 or int64, not %s",
                              what, nnf_dtype_name(t));
    return NNF_OK;
}

static nnf_status check_rank(const nnf_node *node, int64_t rank) {
    if (rank > NNF_MAX_RANK)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "output rank %lld exceeds %d",
                              (long long)rank, NNF_MAX_RANK);
    return NNF_OK;
}

static void copy_dim(nnf_shape *dst, int i, const nnf_shape *src, int j) {
    dst->dims[i] = src->dims[j];
    dst->dim_names[i] = src->dim_names[j];
}

nnf_status nnf_axis0_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_axis_params, p);
    p->axis = nnf_attr_int(node, "axis", 0);
    return NNF_OK;
}

/* ---- Gather ------------------------------------------------------------ */

nnf_status nnf_gather_infer(NNF_INFER_ARGS) {
    const nnf_axis_params *p = node->params;
    const nnf_tinfo *x = &in[0], *idx = &in[1];
    NNF_CHECK(nnf_check_fixed_dtype(node, x->dtype));
    NNF_CHECK(check_index_dtype(node, idx->dtype, "indices"));
    out[0].dtype = x->dtype;
    int r = x->shape.rank, q = idx->shape.rank;
    if (r < 0 || q < 0) {
        nnf_shape_unknown(&out[0].shape, -1);
        return NNF_OK;
    }
    int axis;
    NNF_CHECK(nnf_norm_axis(node, p->axis, r, &axis));
    NNF_CHECK(check_rank(node, r + q - 1));
    nnf_shape s;
    nnf_shape_unknown(&s, r + q - 1);
    int o = 0;
    for (int i = 0; i < axis; i++)
        copy_dim(&s, o++, &x->shape, i);
    for (int i = 0; i < q; i++)
        copy_dim(&s, o++, &idx->shape, i);
    for (int i = axis + 1; i < r; i++)
        copy_dim(&s, o++, &x->shape, i);
    /* Known indices into a known extent are checked now, not at the first run. */
    int64_t d = x->shape.dims[axis], n = nnf_shape_numel(&idx->shape);
    for (int64_t i = 0; idx->data && d >= 0 && i < n; i++) {
        int64_t v = nnf_tinfo_int(idx, i);
        if (v < -d || v >= d)
            return nnf_node_error(node, NNF_ERR_INVALID_ARGUMENT,
                                  "index %lld is out of range for extent %lld", (long long)v,
                                  (long long)d);
    }
    out[0].shape = s;
    return NNF_OK;
}

nnf_status nnf_gather_elements_infer(NNF_INFER_ARGS) {
    const nnf_axis_params *p = node->params;
    const nnf_tinfo *x = &in[0], *idx = &in[1];
    NNF_CHECK(nnf_check_fixed_dtype(node, x->dtype));
    NNF_CHECK(check_index_dtype(node, idx->dtype, "indices"));
    out[0].dtype = x->dtype;
    out[0].shape = idx->shape;
    int r = x->shape.rank >= 0 ? x->shape.rank : idx->shape.rank;
    if (x->shape.rank >= 0 && idx->shape.rank >= 0 && x->shape.rank != idx->shape.rank)
        return nnf_node_error(node, NNF_ERR_SHAPE, "indices have rank %d, data rank %d",
                              idx->shape.rank, x->shape.rank);
    if (r >= 0) {
        int axis;
        NNF_CHECK(nnf_norm_axis(node, p->axis, r, &axis));
    }
    return NNF_OK;
}

/* ---- GatherND / ScatterND ---------------------------------------------- */

nnf_status nnf_gather_nd_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_gathernd_params, p);
    p->batch_dims = nnf_attr_int(node, "batch_dims", 0);
    if (p->batch_dims < 0)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute 'batch_dims' is negative");
    return NNF_OK;
}

nnf_status nnf_gather_nd_infer(NNF_INFER_ARGS) {
    const nnf_gathernd_params *p = node->params;
    const nnf_tinfo *x = &in[0], *idx = &in[1];
    NNF_CHECK(nnf_check_fixed_dtype(node, x->dtype));
    if (idx->dtype != NNF_DTYPE_UNDEFINED && idx->dtype != NNF_DTYPE_INT64)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "indices must be int64");
    out[0].dtype = x->dtype;
    int r = x->shape.rank, q = idx->shape.rank, b = (int)p->batch_dims;
    int64_t m = q > 0 ? idx->shape.dims[q - 1] : -1;
    if (r < 0 || q < 0 || m < 0) {
        nnf_shape_unknown(&out[0].shape, -1);
        return NNF_OK;
    }
    if (q < 1 || b >= q || b >= r || m < 1 || b + m > r)
        return nnf_node_error(node, NNF_ERR_SHAPE,
                              "indices of rank %d with last extent %lld and batch_dims %d do not "
                              "fit data of rank %d",
                              q, (long long)m, b, r);
    int ro = q - 1 + r - b - (int)m;
    NNF_CHECK(check_rank(node, ro));
    nnf_shape s;
    nnf_shape_unknown(&s, ro);
    int o = 0;
    for (int i = 0; i < q - 1; i++)
        copy_dim(&s, o++, &idx->shape, i);
    for (int i = b + (int)m; i < r; i++)
        copy_dim(&s, o++, &x->shape, i);
    out[0].shape = s;
    return NNF_OK;
}

nnf_status nnf_scatter_nd_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_scatternd_params, p);
    const char *red = nnf_attr_string(node, "reduction", "none");
    if (!strcmp(red, "none"))
        p->reduction = NNF_SCATTER_NONE;
    else if (!strcmp(red, "add") && node->opset >= 16)
        p->reduction = NNF_SCATTER_ADD;
    else if (!strcmp(red, "mul") && node->opset >= 16)
        p->reduction = NNF_SCATTER_MUL;
    else if (!strcmp(red, "max") && node->opset >= 18)
        p->reduction = NNF_SCATTER_MAX;
    else if (!strcmp(red, "min") && node->opset >= 18)
        p->reduction = NNF_SCATTER_MIN;
    else
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                              "attribute 'reduction' = '%s' is not supported", red);
    return NNF_OK;
}

nnf_status nnf_scatter_nd_infer(NNF_INFER_ARGS) {
    const nnf_scatternd_params *p = node->params;
    const nnf_tinfo *x = &in[0], *idx = &in[1], *upd = &in[2];
    if (p->reduction != NNF_SCATTER_NONE)
        NNF_CHECK(check_numeric_dtype(node, x->dtype));
    else
        NNF_CHECK(nnf_check_fixed_dtype(node, x->dtype));
    if (idx->dtype != NNF_DTYPE_UNDEFINED && idx->dtype != NNF_DTYPE_INT64)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "indices must be int64");
    if (upd->dtype != x->dtype)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "updates are %s, data is %s",
                              nnf_dtype_name(upd->dtype), nnf_dtype_name(x->dtype));
    out[0].dtype = x->dtype;
    out[0].shape = x->shape;
    int r = x->shape.rank, q = idx->shape.rank;
    int64_t m = q > 0 ? idx->shape.dims[q - 1] : -1;
    if (r >= 0 && q >= 0 && m >= 0) {
        if (q < 1 || m > r)
            return nnf_node_error(node, NNF_ERR_SHAPE, "indices last extent %lld > data rank %d",
                                  (long long)m, r);
        if (upd->shape.rank >= 0 && upd->shape.rank != q - 1 + r - (int)m)
            return nnf_node_error(node, NNF_ERR_SHAPE, "updates have rank %d, expected %d",
                                  upd->shape.rank, q - 1 + r - (int)m);
    }
    return NNF_OK;
}

/* ---- OneHot ------------------------------------------------------------ */

nnf_status nnf_one_hot_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_axis_params, p);
    p->axis = nnf_attr_int(node, "axis", -1);
    return NNF_OK;
}

/* depth is a scalar of any numeric type; ONNX takes floats by truncation. */
bool nnf_one_hot_depth(nnf_dtype t, const void *p, int64_t *depth) {
    double d;
    switch (t) {
    case NNF_DTYPE_FLOAT32: d = *(const float *)p; break;
    case NNF_DTYPE_FLOAT64: d = *(const double *)p; break;
    case NNF_DTYPE_FLOAT16: d = nnf_f16_to_f32(*(const uint16_t *)p); break;
    case NNF_DTYPE_BFLOAT16: d = nnf_bf16_to_f32(*(const uint16_t *)p); break;
    case NNF_DTYPE_INT8: d = *(const int8_t *)p; break;
    case NNF_DTYPE_INT16: d = *(const int16_t *)p; break;
    case NNF_DTYPE_INT32: d = *(const int32_t *)p; break;
    case NNF_DTYPE_INT64: *depth = *(const int64_t *)p; return *depth > 0;
    case NNF_DTYPE_UINT8: d = *(const uint8_t *)p; break;
    case NNF_DTYPE_UINT16: d = *(const uint16_t *)p; break;
    case NNF_DTYPE_UINT32: d = *(const uint32_t *)p; break;
    case NNF_DTYPE_UINT64: d = (double)*(const uint64_t *)p; break;
    default: return false;
    }
    if (!(d >= 1.0 && d < 9.0e18))
        return false;
    *depth = (int64_t)d;
    return true;
}

nnf_status nnf_one_hot_infer(NNF_INFER_ARGS) {
    const nnf_axis_params *p = node->params;
    const nnf_tinfo *idx = &in[0], *depth = &in[1], *vals = &in[2];
    NNF_CHECK(check_numeric_dtype(node, idx->dtype));
    NNF_CHECK(check_numeric_dtype(node, depth->dtype));
    NNF_CHECK(nnf_check_fixed_dtype(node, vals->dtype));
    if (depth->shape.rank > 1 || (depth->shape.rank == 1 && depth->shape.dims[0] >= 0 &&
                                  depth->shape.dims[0] != 1))
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "depth must be a scalar");
    if (vals->shape.rank >= 0 && (vals->shape.rank != 1 || (vals->shape.dims[0] >= 0 &&
                                                           vals->shape.dims[0] != 2)))
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                              "values must be [off_value, on_value]");
    out[0].dtype = vals->dtype;
    int r = idx->shape.rank;
    if (r < 0) {
        nnf_shape_unknown(&out[0].shape, -1);
        return NNF_OK;
    }
    NNF_CHECK(check_rank(node, r + 1));
    int axis;
    NNF_CHECK(nnf_norm_axis(node, p->axis, r + 1, &axis));
    nnf_shape s;
    nnf_shape_unknown(&s, r + 1);
    for (int i = 0, j = 0; i < r + 1; i++)
        if (i != axis)
            copy_dim(&s, i, &idx->shape, j++);
    if (depth->data && !nnf_one_hot_depth(depth->dtype, depth->data, &s.dims[axis]))
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "depth must be positive");
    out[0].shape = s;
    return NNF_OK;
}

/* ---- NonZero ----------------------------------------------------------- */

nnf_status nnf_non_zero_infer(NNF_INFER_ARGS) {
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(nnf_check_fixed_dtype(node, x->dtype));
    out[0].dtype = NNF_DTYPE_INT64;
    nnf_shape_unknown(&out[0].shape, 2);
    out[0].shape.dims[0] = x->shape.rank;
    int64_t n = x->shape.rank >= 0 ? nnf_shape_numel(&x->shape) : -1;
    if (x->data && n >= 0) {
        int64_t nz = 0;
        for (int64_t i = 0; i < n; i++)
            nz += nnf_elem_nonzero(x->dtype, x->data, (size_t)i);
        out[0].shape.dims[1] = nz;
    }
    return NNF_OK;
}

/* ---- TopK -------------------------------------------------------------- */

nnf_status nnf_top_k_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_topk_params, p);
    p->axis = nnf_attr_int(node, "axis", -1);
    p->largest = nnf_attr_int(node, "largest", 1) != 0;
    p->sorted = nnf_attr_int(node, "sorted", 1) != 0;
    return NNF_OK;
}

nnf_status nnf_top_k_infer(NNF_INFER_ARGS) {
    const nnf_topk_params *p = node->params;
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(check_numeric_dtype(node, x->dtype));
    nnf_ivec k;
    NNF_CHECK(nnf_tinfo_ivec(node, &in[1], "K", &k));
    if (k.n >= 0 && k.n != 1)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "K must hold one value");
    out[0].dtype = x->dtype;
    if (node->n_outputs > 1)
        out[1].dtype = NNF_DTYPE_INT64;
    nnf_shape s = x->shape;
    int r = s.rank;
    if (r >= 0) {
        int axis;
        NNF_CHECK(nnf_norm_axis(node, p->axis, r, &axis));
        s.dims[axis] = -1;
        s.dim_names[axis] = NULL;
        if (k.data) {
            int64_t kv = nnf_ivec_at(&k, 0), d = x->shape.dims[axis];
            if (kv < 0 || (d >= 0 && kv > d))
                return nnf_node_error(node, NNF_ERR_SHAPE, "K = %lld for extent %lld",
                                      (long long)kv, (long long)d);
            s.dims[axis] = kv;
        }
    }
    out[0].shape = s;
    if (node->n_outputs > 1)
        out[1].shape = s;
    return NNF_OK;
}

/* ---- Trilu ------------------------------------------------------------- */

nnf_status nnf_trilu_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_trilu_params, p);
    p->upper = nnf_attr_int(node, "upper", 1) != 0;
    return NNF_OK;
}

nnf_status nnf_trilu_infer(NNF_INFER_ARGS) {
    NNF_CHECK(nnf_check_fixed_dtype(node, in[0].dtype));
    if (in[0].shape.rank >= 0 && in[0].shape.rank < 2)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input must have rank >= 2, has %d",
                              in[0].shape.rank);
    if (nnf_has_input(node, in, 1)) {
        nnf_ivec k;
        NNF_CHECK(nnf_tinfo_ivec(node, &in[1], "k", &k));
        if (k.n >= 0 && k.n != 1)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "k must hold one value");
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    return NNF_OK;
}

/* ---- CumSum ------------------------------------------------------------ */

nnf_status nnf_cum_sum_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_cumsum_params, p);
    p->exclusive = nnf_attr_int(node, "exclusive", 0) != 0;
    p->reverse = nnf_attr_int(node, "reverse", 0) != 0;
    return NNF_OK;
}

nnf_status nnf_cum_sum_infer(NNF_INFER_ARGS) {
    NNF_CHECK(check_numeric_dtype(node, in[0].dtype));
    nnf_ivec axis;
    NNF_CHECK(nnf_tinfo_ivec(node, &in[1], "axis", &axis));
    if (axis.n >= 0 && axis.n != 1)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "axis must hold one value");
    if (axis.data && in[0].shape.rank >= 0) {
        int a;
        NNF_CHECK(nnf_norm_axis(node, nnf_ivec_at(&axis, 0), in[0].shape.rank, &a));
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    return NNF_OK;
}

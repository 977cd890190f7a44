/* Data-movement operators that rearrange elements: Transpose, Concat, Split,
 * Slice, Tile, Pad. */
#include "ops/tensor_common.h"

static void copy_dim(nnf_shape *dst, int i, const nnf_shape *src, int j) {
    dst->dims[i] = src->dims[j];
    dst->dim_names[i] = src->dim_names[j];
}

/* ---- Transpose --------------------------------------------------------- */

nnf_status nnf_transpose_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_transpose_params, p);
    const int64_t *perm;
    int n = nnf_attr_ints(node, "perm", &perm);
    if (n > NNF_MAX_RANK)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "attribute 'perm' has rank %d > %d", n,
                              NNF_MAX_RANK);
    bool seen[NNF_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
        if (perm[i] < 0 || perm[i] >= n || seen[perm[i]])
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                                  "attribute 'perm' is not a permutation (entry %d = %lld)", i,
                                  (long long)perm[i]);
        seen[perm[i]] = true;
        p->perm[i] = (int)perm[i];
    }
    p->n_perm = n > 0 ? n : 0;
    return NNF_OK;
}

nnf_status nnf_transpose_infer(NNF_INFER_ARGS) {
    const nnf_transpose_params *p = node->params;
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(nnf_check_fixed_dtype(node, x->dtype));
    out[0].dtype = x->dtype;
    int r = x->shape.rank;
    if (r < 0) {
        nnf_shape_unknown(&out[0].shape, p->n_perm ? p->n_perm : -1);
        return NNF_OK;
    }
    if (p->n_perm && p->n_perm != r)
        return nnf_node_error(node, NNF_ERR_SHAPE, "perm has %d entries for a rank-%d input",
                              p->n_perm, r);
    nnf_shape s;
    nnf_shape_unknown(&s, r);
    for (int i = 0; i < r; i++)
        copy_dim(&s, i, &x->shape, p->n_perm ? p->perm[i] : r - 1 - i);
    out[0].shape = s;
    return NNF_OK;
}

/* ---- Concat ------------------------------------------------------------ */

nnf_status nnf_concat_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_axis_params, p);
    const nnf_attr *a = nnf_node_attr(node, "axis");
    if (!a && node->opset >= 4)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute 'axis' is missing");
    p->axis = a ? a->i : 1; /* opset 1 defaulted to 1 */
    return NNF_OK;
}

nnf_status nnf_concat_infer(NNF_INFER_ARGS) {
    const nnf_axis_params *p = node->params;
    int r = -1;
    nnf_dtype t = NNF_DTYPE_UNDEFINED;
    for (int i = 0; i < node->n_inputs; i++) {
        NNF_CHECK(nnf_check_fixed_dtype(node, in[i].dtype));
        if (t == NNF_DTYPE_UNDEFINED)
            t = in[i].dtype;
        else if (in[i].dtype != NNF_DTYPE_UNDEFINED && in[i].dtype != t)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input %d is %s, input 0 is %s", i,
                                  nnf_dtype_name(in[i].dtype), nnf_dtype_name(t));
        if (in[i].shape.rank < 0)
            continue;
        if (r >= 0 && in[i].shape.rank != r)
            return nnf_node_error(node, NNF_ERR_SHAPE, "input %d has rank %d, others %d", i,
                                  in[i].shape.rank, r);
        r = in[i].shape.rank;
    }
    out[0].dtype = t;
    if (r < 0) {
        nnf_shape_unknown(&out[0].shape, -1);
        return NNF_OK;
    }
    int axis;
    NNF_CHECK(nnf_norm_axis(node, p->axis, r, &axis));
    nnf_shape s;
    nnf_shape_unknown(&s, r);
    s.dims[axis] = 0;
    for (int i = 0; i < node->n_inputs; i++) {
        const nnf_shape *xs = &in[i].shape;
        if (xs->rank < 0) {
            s.dims[axis] = -1;
            continue;
        }
        for (int d = 0; d < r; d++) {
            if (d == axis)
                continue;
            if (s.dims[d] < 0) {
                if (xs->dims[d] >= 0 || !s.dim_names[d])
                    copy_dim(&s, d, xs, d);
            } else if (xs->dims[d] >= 0 && xs->dims[d] != s.dims[d]) {
                return nnf_node_error(node, NNF_ERR_SHAPE,
                                      "input %d has extent %lld on axis %d, expected %lld", i,
                                      (long long)xs->dims[d], d, (long long)s.dims[d]);
            }
        }
        if (s.dims[axis] >= 0)
            s.dims[axis] = xs->dims[axis] >= 0 ? s.dims[axis] + xs->dims[axis] : -1;
    }
    if (node->n_inputs == 1)
        s.dim_names[axis] = in[0].shape.dim_names[axis];
    out[0].shape = s;
    return NNF_OK;
}

/* ---- Split ------------------------------------------------------------- */

nnf_status nnf_split_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_split_params, p);
    p->axis = nnf_attr_int(node, "axis", 0);
    p->n_split = -1;
    if (node->opset < 13)
        p->n_split = nnf_attr_ints(node, "split", &p->split);
    if (node->opset >= 18) {
        p->num_outputs = nnf_attr_int(node, "num_outputs", 0);
        if (p->num_outputs && p->num_outputs != node->n_outputs)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                                  "num_outputs = %lld but the node has %d outputs",
                                  (long long)p->num_outputs, node->n_outputs);
    }
    return NNF_OK;
}

nnf_status nnf_split_infer(NNF_INFER_ARGS) {
    const nnf_split_params *p = node->params;
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(nnf_check_fixed_dtype(node, x->dtype));
    int n_out = node->n_outputs;
    for (int i = 0; i < n_out; i++) {
        out[i].dtype = x->dtype;
        nnf_shape_unknown(&out[i].shape, x->shape.rank);
    }
    nnf_ivec split = {p->n_split, NNF_DTYPE_INT64, p->split};
    /* opset 1 took split either as attribute or as input 1 */
    if (p->n_split < 0 && nnf_has_input(node, in, 1))
        NNF_CHECK(nnf_tinfo_ivec(node, &in[1], "split", &split));
    bool has_split = p->n_split >= 0 || nnf_has_input(node, in, 1);
    if (has_split && split.n >= 0 && split.n != n_out)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "split has %lld entries for %d outputs",
                              (long long)split.n, n_out);
    int r = x->shape.rank;
    if (r < 0)
        return NNF_OK;
    int axis;
    NNF_CHECK(nnf_norm_axis(node, p->axis, r, &axis));
    for (int i = 0; i < n_out; i++)
        for (int d = 0; d < r; d++)
            if (d != axis)
                copy_dim(&out[i].shape, d, &x->shape, d);
    int64_t dim = x->shape.dims[axis];
    if (has_split) {
        if (!split.data)
            return NNF_OK;
        int64_t sum = 0;
        for (int i = 0; i < n_out; i++) {
            int64_t v = nnf_ivec_at(&split, i);
            if (v < 0)
                return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "split[%d] = %lld is negative",
                                      i, (long long)v);
            out[i].shape.dims[axis] = v;
            sum += v;
        }
        if (dim >= 0 && sum != dim)
            return nnf_node_error(node, NNF_ERR_SHAPE,
                                  "split sizes add up to %lld, axis %d has extent %lld",
                                  (long long)sum, axis, (long long)dim);
        return NNF_OK;
    }
    if (dim < 0)
        return NNF_OK;
    if (p->num_outputs) {
        /* opset 18: chunks of ceil(dim / n); the last one may be smaller */
        int64_t chunk = (dim + n_out - 1) / n_out, left = dim;
        for (int i = 0; i < n_out; i++) {
            int64_t c = left < chunk ? left : chunk;
            out[i].shape.dims[axis] = c;
            left -= c;
        }
        return NNF_OK;
    }
    if (dim % n_out)
        return nnf_node_error(node, NNF_ERR_SHAPE, "extent %lld of axis %d is not divisible by %d",
                              (long long)dim, axis, n_out);
    for (int i = 0; i < n_out; i++)
        out[i].shape.dims[axis] = dim / n_out;
    return NNF_OK;
}

/* ---- Slice ------------------------------------------------------------- */

nnf_status nnf_slice_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_slice_params, p);
    p->n_starts = p->n_ends = p->n_axes = -1;
    if (node->opset < 10) {
        p->n_starts = nnf_attr_ints(node, "starts", &p->starts);
        p->n_ends = nnf_attr_ints(node, "ends", &p->ends);
        p->n_axes = nnf_attr_ints(node, "axes", &p->axes);
        if (p->n_starts < 0 || p->n_ends < 0)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                                  "attributes 'starts' and 'ends' are required");
    }
    return NNF_OK;
}

/* The starts/ends/axes/steps vectors from attributes (opset < 10) or inputs.
 * Fields stay n = -1 when absent and data = NULL when unknown. */
void nnf_slice_args_attr(const nnf_slice_params *p, nnf_ivec *v) {
    v[0] = (nnf_ivec){p->n_starts, NNF_DTYPE_INT64, p->starts};
    v[1] = (nnf_ivec){p->n_ends, NNF_DTYPE_INT64, p->ends};
    v[2] = (nnf_ivec){p->n_axes, NNF_DTYPE_INT64, p->axes};
    v[3] = (nnf_ivec){-1, NNF_DTYPE_INT64, NULL};
}

nnf_status nnf_slice_infer(NNF_INFER_ARGS) {
    const nnf_slice_params *p = node->params;
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(nnf_check_fixed_dtype(node, x->dtype));
    out[0].dtype = x->dtype;
    int r = x->shape.rank;
    nnf_ivec v[4];
    nnf_slice_args_attr(p, v);
    static const char *names[4] = {"starts", "ends", "axes", "steps"};
    bool unknown = false;
    for (int i = 0; node->opset >= 10 && i < 4; i++) {
        if (nnf_has_input(node, in, i + 1)) {
            NNF_CHECK(nnf_tinfo_ivec(node, &in[i + 1], names[i], &v[i]));
            unknown |= !v[i].data;
        } else if (i < 2) {
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input '%s' is missing", names[i]);
        }
    }
    if (r < 0) {
        nnf_shape_unknown(&out[0].shape, -1);
        return NNF_OK;
    }
    nnf_shape s;
    nnf_shape_unknown(&s, r);
    if (unknown) {
        /* Dims outside known axes keep their extent; the sliced ones are unknown. */
        bool mask[NNF_MAX_RANK];
        for (int i = 0; i < r; i++)
            mask[i] = true;
        if (v[2].n >= 0 && v[2].data)
            NNF_CHECK(nnf_axes_mask(node, &v[2], r, mask));
        for (int i = 0; i < r; i++)
            if (!mask[i])
                copy_dim(&s, i, &x->shape, i);
        out[0].shape = s;
        return NNF_OK;
    }
    nnf_slice_plan plan;
    NNF_CHECK(nnf_slice_resolve(node, r, x->shape.dims, &v[0], &v[1], &v[2], &v[3], &plan));
    for (int i = 0; i < r; i++) {
        s.dims[i] = plan.count[i];
        if (plan.keep[i])
            s.dim_names[i] = x->shape.dim_names[i];
    }
    out[0].shape = s;
    return NNF_OK;
}

/* ---- Tile -------------------------------------------------------------- */

nnf_status nnf_tile_infer(NNF_INFER_ARGS) {
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(nnf_check_fixed_dtype(node, x->dtype));
    out[0].dtype = x->dtype;
    nnf_ivec rep;
    NNF_CHECK(nnf_tinfo_ivec(node, &in[1], "repeats", &rep));
    int r = x->shape.rank;
    if (r < 0 && rep.n >= 0 && rep.n <= NNF_MAX_RANK)
        r = (int)rep.n;
    nnf_shape_unknown(&out[0].shape, r);
    if (r < 0)
        return NNF_OK;
    if (rep.n >= 0 && rep.n != r)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "repeats has %lld entries for rank %d",
                              (long long)rep.n, r);
    for (int i = 0; rep.data && x->shape.rank >= 0 && i < r; i++) {
        int64_t k = nnf_ivec_at(&rep, i), d = x->shape.dims[i];
        if (k < 0)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "repeats[%d] = %lld is negative",
                                  i, (long long)k);
        if (k == 1)
            copy_dim(&out[0].shape, i, &x->shape, i);
        else if (d >= 0 && __builtin_mul_overflow(d, k, &out[0].shape.dims[i]))
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "tiled extent overflows");
    }
    return NNF_OK;
}

/* ---- Pad --------------------------------------------------------------- */

nnf_status nnf_pad_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_pad_params, p);
    const char *mode = nnf_attr_string(node, "mode", "constant");
    if (!strcmp(mode, "constant"))
        p->mode = NNF_PAD_CONSTANT;
    else if (!strcmp(mode, "reflect"))
        p->mode = NNF_PAD_REFLECT;
    else if (!strcmp(mode, "edge"))
        p->mode = NNF_PAD_EDGE;
    else if (!strcmp(mode, "wrap") && node->opset >= 19)
        p->mode = NNF_PAD_WRAP;
    else
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "attribute 'mode' = '%s' is not supported",
                              mode);
    p->n_pads = -1;
    if (node->opset < 11) {
        p->n_pads = nnf_attr_ints(node, node->opset < 2 ? "paddings" : "pads", &p->pads);
        if (p->n_pads < 0)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute 'pads' is missing");
        p->value = nnf_attr_float(node, "value", 0.0f);
    }
    return NNF_OK;
}

nnf_status nnf_pad_infer(NNF_INFER_ARGS) {
    const nnf_pad_params *p = node->params;
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(nnf_check_fixed_dtype(node, x->dtype));
    out[0].dtype = x->dtype;
    int r = x->shape.rank;
    nnf_shape_unknown(&out[0].shape, r);
    if (r < 0)
        return NNF_OK;
    nnf_ivec pads = {p->n_pads, NNF_DTYPE_INT64, p->pads}, axes = {-1, NNF_DTYPE_INT64, NULL};
    if (p->n_pads < 0) {
        NNF_CHECK(nnf_tinfo_ivec(node, &in[1], "pads", &pads));
        if (nnf_has_input(node, in, 2) && in[2].dtype != x->dtype)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                                  "constant_value is %s, data is %s", nnf_dtype_name(in[2].dtype),
                                  nnf_dtype_name(x->dtype));
        if (nnf_has_input(node, in, 3)) {
            NNF_CHECK(nnf_tinfo_ivec(node, &in[3], "axes", &axes));
            if (!axes.data)
                return NNF_OK;
        }
    }
    if (!pads.data)
        return NNF_OK;
    int64_t begin[NNF_MAX_RANK], end[NNF_MAX_RANK];
    NNF_CHECK(nnf_pad_resolve(node, r, &pads, &axes, begin, end));
    for (int i = 0; i < r; i++) {
        int64_t d = x->shape.dims[i];
        if (!begin[i] && !end[i]) {
            copy_dim(&out[0].shape, i, &x->shape, i);
            continue;
        }
        if (d < 0)
            continue;
        int64_t o = d + begin[i] + end[i];
        if (o < 0)
            return nnf_node_error(node, NNF_ERR_SHAPE,
                                  "pads %lld,%lld crop more than extent %lld of axis %d",
                                  (long long)begin[i], (long long)end[i], (long long)d, i);
        if (d == 0 && o > 0 && p->mode != NNF_PAD_CONSTANT)
            return nnf_node_error(node, NNF_ERR_SHAPE,
                                  "cannot pad empty axis %d in a non-constant mode", i);
        out[0].shape.dims[i] = o;
    }
    return NNF_OK;
}

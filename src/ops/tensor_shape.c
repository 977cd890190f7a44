/* Shape-manipulating operators: Reshape, Flatten, Squeeze, Unsqueeze, Shape,
 * Size, Identity, Dropout, Expand, and the value generators Constant,
 * ConstantOfShape, Range, EyeLike. These carry the shape arithmetic of
 * exported models, so infer computes exact shapes whenever the integer
 * inputs are known and the best static answer (rank, -1 extents) otherwise. */
#include "ops/tensor_common.h"

#include <math.h>

static nnf_status check_rank(const nnf_node *node, int64_t rank) {
    if (rank > NNF_MAX_RANK)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "output rank %lld exceeds %d",
                              (long long)rank, NNF_MAX_RANK);
    return NNF_OK;
}

/* ---- Reshape ----------------------------------------------------------- */

nnf_status nnf_reshape_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_reshape_params, p);
    p->allowzero = nnf_attr_int(node, "allowzero", 0) != 0;
    p->n_shape = -1;
    if (node->opset < 5) {
        p->n_shape = nnf_attr_ints(node, "shape", &p->shape);
        if (p->n_shape < 0)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute 'shape' is missing");
    }
    return NNF_OK;
}

/* The one unknown extent of s, -1 if there are none or several. */
static int sole_unknown_dim(const nnf_shape *s, int skip) {
    int at = -1;
    for (int i = 0; i < s->rank; i++) {
        if (i == skip || s->dims[i] >= 0)
            continue;
        if (at >= 0)
            return -1;
        at = i;
    }
    return at;
}

static int64_t known_prod(const nnf_shape *s, int skip) {
    int64_t p = 1;
    for (int i = 0; i < s->rank; i++)
        if (i != skip && s->dims[i] >= 0 && __builtin_mul_overflow(p, s->dims[i], &p))
            return -1;
    return p;
}

/* A target computed from shapes (t->dimvals, load only): its known extents
 * and symbolic dims, 0 copying x's dim (allowzero off), and a -1 that is
 * whatever of x is left once the target's other extents and names are taken
 * out of it: x.view(B, S, -1) of "B x S x 12 x 64" is "B x S x 768". */
static void symbolic_target(const nnf_reshape_params *p, const nnf_tinfo *x, const nnf_tinfo *t,
                            nnf_shape *s) {
    int minus = -1;
    for (int i = 0; i < s->rank; i++) {
        const nnf_dimval *d = &t->dimvals[i];
        if (d->v == 0 && !p->allowzero) {
            if (x->shape.rank <= i)
                return;
            s->dims[i] = x->shape.dims[i];
            s->dim_names[i] = x->shape.dim_names[i];
        } else if (d->v == -1 && !d->name) {
            if (minus >= 0)
                return; /* the run refuses it */
            minus = i;
        } else if (d->v >= 0) {
            s->dims[i] = d->v;
        } else {
            s->dim_names[i] = d->name;
        }
    }
    if (minus < 0 || x->shape.rank < 0)
        return;
    /* x's extents over the target's: known products divide, names cancel */
    int64_t num = known_prod(&x->shape, -1), den = known_prod(s, minus);
    const char *left = NULL;
    bool used[NNF_MAX_RANK] = {false};
    for (int i = 0; i < x->shape.rank; i++) {
        if (x->shape.dims[i] >= 0)
            continue;
        const char *name = x->shape.dim_names[i];
        int j = 0;
        while (name && j < s->rank &&
               (j == minus || used[j] || s->dims[j] >= 0 || !s->dim_names[j] ||
                strcmp(s->dim_names[j], name)))
            j++;
        if (name && j < s->rank) {
            used[j] = true;
        } else if (name && !left) {
            left = name;
        } else {
            return; /* unnamed, or two names left */
        }
    }
    for (int j = 0; j < s->rank; j++)
        if (j != minus && s->dims[j] < 0 && !used[j])
            return; /* a target name x does not have */
    if (num <= 0 || den <= 0 || num % den)
        return;
    if (!left)
        s->dims[minus] = num / den;
    else if (num == den)
        s->dim_names[minus] = left;
}

nnf_status nnf_reshape_infer(NNF_INFER_ARGS) {
    const nnf_reshape_params *p = node->params;
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(nnf_check_fixed_dtype(node, x->dtype));
    out[0].dtype = x->dtype;
    nnf_ivec spec = {p->n_shape, NNF_DTYPE_INT64, p->shape};
    if (p->n_shape < 0)
        NNF_CHECK(nnf_tinfo_ivec(node, &in[1], "shape", &spec));
    if (spec.n < 0) {
        nnf_shape_unknown(&out[0].shape, -1);
        return NNF_OK;
    }
    NNF_CHECK(check_rank(node, spec.n));
    nnf_shape s;
    nnf_shape_unknown(&s, (int)spec.n);
    if (!spec.data) {
        if (p->n_shape < 0 && in[1].dimvals && in[1].n_dimvals == spec.n)
            symbolic_target(p, x, &in[1], &s);
        out[0].shape = s;
        return NNF_OK;
    }
    int infer_at = -1;
    bool has_zero = false;
    for (int i = 0; i < s.rank; i++) {
        int64_t v = nnf_ivec_at(&spec, i);
        if (v == 0 && !p->allowzero) {
            if (x->shape.rank >= 0 && i >= x->shape.rank)
                return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                                      "shape[%d] = 0 copies a dimension the rank-%d input lacks",
                                      i, x->shape.rank);
            if (x->shape.rank >= 0) {
                s.dims[i] = x->shape.dims[i];
                s.dim_names[i] = x->shape.dim_names[i];
            }
        } else if (v == -1) {
            if (infer_at >= 0)
                return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "shape has more than one -1");
            infer_at = i;
        } else if (v < -1) {
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "shape[%d] = %lld is invalid", i,
                                  (long long)v);
        } else {
            has_zero |= v == 0;
            s.dims[i] = v;
        }
    }
    if (infer_at >= 0 && has_zero)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                              "allowzero=1 with both 0 and -1 in shape is ambiguous");
    int64_t in_n = x->shape.rank >= 0 ? nnf_shape_numel(&x->shape) : -1;
    int64_t rest = nnf_dims_prod(s.dims, 0, s.rank); /* with infer_at still -1: only if none */
    if (infer_at >= 0) {
        bool others_known = true;
        for (int i = 0; i < s.rank; i++)
            others_known &= i == infer_at || s.dims[i] >= 0;
        int64_t prod = known_prod(&s, infer_at);
        if (in_n >= 0 && others_known) {
            if (prod <= 0 || in_n % prod)
                return nnf_node_error(node, NNF_ERR_SHAPE,
                                      "cannot reshape %lld elements with -1 and the other "
                                      "dimensions multiplying to %lld",
                                      (long long)in_n, (long long)prod);
            s.dims[infer_at] = in_n / prod;
        } else if (others_known && x->shape.rank >= 0) {
            /* [batch, 3, 4] -> [-1, 12]: the -1 is 'batch' */
            int u = sole_unknown_dim(&x->shape, -1);
            if (u >= 0 && known_prod(&x->shape, u) == prod)
                s.dim_names[infer_at] = x->shape.dim_names[u];
        }
    } else if (rest < 0 && nnf_shape_known(&s)) {
        return nnf_node_error(node, NNF_ERR_SHAPE, "the target shape's extents overflow");
    } else if (in_n >= 0 && rest >= 0 && in_n != rest) {
        return nnf_node_error(node, NNF_ERR_SHAPE, "cannot reshape %lld elements into %lld",
                              (long long)in_n, (long long)rest);
    }
    out[0].shape = s;
    return NNF_OK;
}

/* ---- Flatten ----------------------------------------------------------- */

nnf_status nnf_flatten_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_axis_params, p);
    p->axis = nnf_attr_int(node, "axis", 1);
    return NNF_OK;
}

/* Product of a run of dims; a single dim keeps its symbolic name. */
static void merge_dims(const nnf_shape *x, int lo, int hi, nnf_shape *s, int at) {
    s->dims[at] = nnf_dims_prod(x->dims, lo, hi);
    s->dim_names[at] = hi - lo == 1 ? x->dim_names[lo] : NULL;
}

nnf_status nnf_flatten_infer(NNF_INFER_ARGS) {
    const nnf_axis_params *p = node->params;
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(nnf_check_fixed_dtype(node, x->dtype));
    out[0].dtype = x->dtype;
    nnf_shape s;
    nnf_shape_unknown(&s, 2);
    int r = x->shape.rank;
    if (r >= 0) {
        int64_t axis = p->axis < 0 ? p->axis + r : p->axis;
        if (axis < 0 || axis > r)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "axis %lld out of range for rank %d",
                                  (long long)p->axis, r);
        merge_dims(&x->shape, 0, (int)axis, &s, 0);
        merge_dims(&x->shape, (int)axis, r, &s, 1);
    }
    out[0].shape = s;
    return NNF_OK;
}

/* ---- Squeeze / Unsqueeze ----------------------------------------------- */

nnf_status nnf_squeeze_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_axes_params, p);
    p->n_axes = -1;
    if (node->opset < 13)
        p->n_axes = nnf_attr_ints(node, "axes", &p->axes);
    return NNF_OK;
}

/* Axes from the attribute (opset < 13) or input 1; n = -1 when absent. */
static nnf_status axes_of(const nnf_node *node, const nnf_tinfo *in, nnf_ivec *axes) {
    const nnf_axes_params *p = node->params;
    axes->n = p->n_axes;
    axes->dtype = NNF_DTYPE_INT64;
    axes->data = p->axes;
    if (p->n_axes < 0 && nnf_has_input(node, in, 1))
        NNF_CHECK(nnf_tinfo_ivec(node, &in[1], "axes", axes));
    return NNF_OK;
}

nnf_status nnf_squeeze_infer(NNF_INFER_ARGS) {
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(nnf_check_fixed_dtype(node, x->dtype));
    out[0].dtype = x->dtype;
    nnf_ivec axes;
    NNF_CHECK(axes_of(node, in, &axes));
    /* an empty axes list squeezes every 1, as ONNX Runtime does */
    bool axes_given = (node->opset < 13 ? axes.n >= 0 : nnf_has_input(node, in, 1)) && axes.n != 0;
    int r = x->shape.rank;
    nnf_shape s;
    nnf_shape_unknown(&s, -1);
    if (r < 0 || (axes_given && axes.n < 0)) {
        out[0].shape = s;
        return NNF_OK;
    }
    if (axes_given && !axes.data) {
        if (axes.n > r)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "%lld axes for rank %d",
                                  (long long)axes.n, r);
        nnf_shape_unknown(&out[0].shape, r - (int)axes.n);
        return NNF_OK;
    }
    bool mask[NNF_MAX_RANK];
    if (axes_given) {
        NNF_CHECK(nnf_axes_mask(node, &axes, r, mask));
        for (int i = 0; i < r; i++)
            if (mask[i] && x->shape.dims[i] >= 0 && x->shape.dims[i] != 1)
                return nnf_node_error(node, NNF_ERR_SHAPE,
                                      "cannot squeeze axis %d of extent %lld", i,
                                      (long long)x->shape.dims[i]);
    } else {
        for (int i = 0; i < r; i++) {
            if (x->shape.dims[i] < 0) { /* might be 1: rank unknown until run time */
                out[0].shape = s;
                return NNF_OK;
            }
            mask[i] = x->shape.dims[i] == 1;
        }
    }
    s.rank = 0;
    for (int i = 0; i < r; i++) {
        if (mask[i])
            continue;
        s.dims[s.rank] = x->shape.dims[i];
        s.dim_names[s.rank++] = x->shape.dim_names[i];
    }
    out[0].shape = s;
    return NNF_OK;
}

nnf_status nnf_unsqueeze_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_axes_params, p);
    p->n_axes = -1;
    if (node->opset < 13) {
        p->n_axes = nnf_attr_ints(node, "axes", &p->axes);
        if (p->n_axes < 0)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute 'axes' is missing");
    }
    return NNF_OK;
}

nnf_status nnf_unsqueeze_infer(NNF_INFER_ARGS) {
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(nnf_check_fixed_dtype(node, x->dtype));
    out[0].dtype = x->dtype;
    nnf_ivec axes;
    NNF_CHECK(axes_of(node, in, &axes));
    int r = x->shape.rank;
    if (r < 0 || axes.n < 0) {
        nnf_shape_unknown(&out[0].shape, -1);
        return NNF_OK;
    }
    int64_t ro = r + axes.n;
    NNF_CHECK(check_rank(node, ro));
    if (!axes.data) {
        nnf_shape_unknown(&out[0].shape, (int)ro);
        return NNF_OK;
    }
    bool mask[NNF_MAX_RANK];
    NNF_CHECK(nnf_axes_mask(node, &axes, (int)ro, mask));
    nnf_shape s;
    nnf_shape_unknown(&s, (int)ro);
    for (int i = 0, j = 0; i < ro; i++) {
        if (mask[i]) {
            s.dims[i] = 1;
        } else {
            s.dims[i] = x->shape.dims[j];
            s.dim_names[i] = x->shape.dim_names[j++];
        }
    }
    out[0].shape = s;
    return NNF_OK;
}

/* ---- Shape / Size ------------------------------------------------------ */

nnf_status nnf_shape_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_shape_params, p);
    p->start = nnf_attr_int(node, "start", 0);
    p->end = nnf_attr_int(node, "end", INT64_MAX);
    return NNF_OK;
}

nnf_status nnf_shape_infer(NNF_INFER_ARGS) {
    out[0].dtype = NNF_DTYPE_INT64;
    nnf_shape_unknown(&out[0].shape, 1);
    if (in[0].shape.rank >= 0) {
        int lo, hi;
        nnf_shape_op_range(node->params, in[0].shape.rank, &lo, &hi);
        out[0].shape.dims[0] = hi - lo;
    }
    return NNF_OK;
}

nnf_status nnf_size_infer(NNF_INFER_ARGS) {
    out[0].dtype = NNF_DTYPE_INT64;
    nnf_shape_unknown(&out[0].shape, 0);
    return NNF_OK;
}

/* ---- Identity / Dropout ------------------------------------------------ */

nnf_status nnf_identity_infer(NNF_INFER_ARGS) {
    NNF_CHECK(nnf_check_fixed_dtype(node, in[0].dtype));
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    return NNF_OK;
}

nnf_status nnf_dropout_init(NNF_INIT_ARGS) {
    /* opset < 7 marks inference with is_test=1; without it ONNX Runtime also
     * runs the op as identity, so we do the same. */
    return NNF_OK;
}

nnf_status nnf_dropout_infer(NNF_INFER_ARGS) {
    NNF_CHECK(nnf_identity_infer(node, in, out));
    if (node->n_outputs > 1) {
        out[1].dtype = NNF_DTYPE_BOOL;
        out[1].shape = in[0].shape;
    }
    if (nnf_has_input(node, in, 2) && in[2].data && in[2].dtype == NNF_DTYPE_BOOL &&
        *(const uint8_t *)in[2].data)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "training_mode=true is not supported");
    return NNF_OK;
}

/* ---- Expand ------------------------------------------------------------ */

nnf_status nnf_expand_infer(NNF_INFER_ARGS) {
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(nnf_check_fixed_dtype(node, x->dtype));
    out[0].dtype = x->dtype;
    nnf_ivec spec;
    NNF_CHECK(nnf_tinfo_ivec(node, &in[1], "shape", &spec));
    if (spec.n < 0 || x->shape.rank < 0) {
        nnf_shape_unknown(&out[0].shape, -1);
        return NNF_OK;
    }
    NNF_CHECK(check_rank(node, spec.n));
    nnf_shape target;
    nnf_shape_unknown(&target, (int)spec.n);
    for (int i = 0; spec.data && i < target.rank; i++) {
        target.dims[i] = nnf_ivec_at(&spec, i);
        if (target.dims[i] < 0)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "shape[%d] = %lld is negative", i,
                                  (long long)target.dims[i]);
    }
    nnf_status st = nnf_broadcast_shape(&x->shape, &target, &out[0].shape);
    if (st != NNF_OK)
        return nnf_error_prefix(st, "node '%s' (%s)", node->name, node->op_type);
    return NNF_OK;
}

/* ---- Constant ---------------------------------------------------------- */

static nnf_status constant_scalar(nnf_node *node, nnf_arena *arena, nnf_constant_params *p,
                                  nnf_dtype dtype, int rank, int64_t n, const void *src) {
    size_t es = nnf_dtype_size(dtype), nbytes;
    if (!nnf_mul_size(es, (size_t)n, &nbytes))
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "constant is too large");
    void *d = nnf_arena_alloc(arena, nbytes ? nbytes : 1);
    if (!d)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for the constant");
    if (nbytes)
        memcpy(d, src, nbytes);
    p->dtype = dtype;
    nnf_shape_unknown(&p->shape, rank);
    if (rank == 1)
        p->shape.dims[0] = n;
    p->data = d;
    p->nbytes = nbytes;
    return NNF_OK;
}

nnf_status nnf_constant_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_constant_params, p);
    const nnf_attr *a;
    if (nnf_node_attr(node, "sparse_value"))
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                              "attribute 'sparse_value' (sparse constants) is not supported");
    if (nnf_node_attr(node, "value_string") || nnf_node_attr(node, "value_strings"))
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "string constants are not supported");
    if ((a = nnf_node_attr(node, "value")) != NULL) {
        if (a->type != NNF_ATTR_TENSOR || !a->tensor)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute 'value' is not a tensor");
        const nnf_const_tensor *t = a->tensor;
        size_t es = nnf_dtype_size(t->dtype), want;
        if (es == 0)
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                                  "attribute 'value' has unsupported dtype %s",
                                  nnf_dtype_name(t->dtype));
        int64_t n = nnf_shape_numel(&t->shape);
        if (t->shape.rank < 0 || n < 0 || !nnf_mul_size(es, (size_t)n, &want) ||
            want != t->nbytes || (want && !t->data))
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                                  "attribute 'value' holds %zu bytes, its shape needs more or "
                                  "fewer",
                                  t->nbytes);
        p->dtype = t->dtype;
        p->shape = t->shape;
        p->data = t->data;
        p->nbytes = t->nbytes;
        return NNF_OK;
    }
    if ((a = nnf_node_attr(node, "value_float")) != NULL)
        return constant_scalar(node, arena, p, NNF_DTYPE_FLOAT32, 0, 1, &a->f);
    if ((a = nnf_node_attr(node, "value_int")) != NULL)
        return constant_scalar(node, arena, p, NNF_DTYPE_INT64, 0, 1, &a->i);
    if ((a = nnf_node_attr(node, "value_floats")) != NULL)
        return constant_scalar(node, arena, p, NNF_DTYPE_FLOAT32, 1, a->count, a->floats);
    if ((a = nnf_node_attr(node, "value_ints")) != NULL)
        return constant_scalar(node, arena, p, NNF_DTYPE_INT64, 1, a->count, a->ints);
    return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "no value attribute");
}

nnf_status nnf_constant_infer(NNF_INFER_ARGS) {
    const nnf_constant_params *p = node->params;
    out[0].dtype = p->dtype;
    out[0].shape = p->shape;
    return NNF_OK;
}

/* ---- ConstantOfShape --------------------------------------------------- */

nnf_status nnf_constant_of_shape_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_constant_params, p);
    const nnf_attr *a = nnf_node_attr(node, "value");
    if (!a) {
        static const float zero = 0.0f;
        p->dtype = NNF_DTYPE_FLOAT32;
        p->data = &zero;
        p->nbytes = 4;
        return NNF_OK;
    }
    if (a->type != NNF_ATTR_TENSOR || !a->tensor)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute 'value' is not a tensor");
    size_t es = nnf_dtype_size(a->tensor->dtype);
    if (es == 0)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                              "attribute 'value' has unsupported dtype %s",
                              nnf_dtype_name(a->tensor->dtype));
    if (a->tensor->nbytes != es || !a->tensor->data)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                              "attribute 'value' must hold exactly one element");
    p->dtype = a->tensor->dtype;
    p->data = a->tensor->data;
    p->nbytes = es;
    return NNF_OK;
}

nnf_status nnf_constant_of_shape_infer(NNF_INFER_ARGS) {
    const nnf_constant_params *p = node->params;
    out[0].dtype = p->dtype;
    nnf_ivec spec;
    NNF_CHECK(nnf_tinfo_ivec(node, &in[0], "input", &spec));
    if (spec.n < 0) {
        nnf_shape_unknown(&out[0].shape, -1);
        return NNF_OK;
    }
    NNF_CHECK(check_rank(node, spec.n));
    nnf_shape_unknown(&out[0].shape, (int)spec.n);
    for (int i = 0; spec.data && i < spec.n; i++) {
        int64_t d = nnf_ivec_at(&spec, i);
        if (d < 0)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "shape[%d] = %lld is negative", i,
                                  (long long)d);
        out[0].shape.dims[i] = d;
    }
    return NNF_OK;
}

/* ---- Range ------------------------------------------------------------- */

static bool range_dtype_ok(nnf_dtype t) {
    return t == NNF_DTYPE_FLOAT32 || t == NNF_DTYPE_FLOAT64 || t == NNF_DTYPE_INT16 ||
           t == NNF_DTYPE_INT32 || t == NNF_DTYPE_INT64 || t == NNF_DTYPE_FLOAT16 ||
           t == NNF_DTYPE_BFLOAT16;
}

static bool range_is_float(nnf_dtype t) {
    return t == NNF_DTYPE_FLOAT32 || t == NNF_DTYPE_FLOAT64 || t == NNF_DTYPE_FLOAT16 ||
           t == NNF_DTYPE_BFLOAT16;
}

/* Opset 27 added float16/bfloat16 with stash_type: 1 (float, the default)
 * computes in float32, which is what the kernel does for those types. */
nnf_status nnf_range_init(NNF_INIT_ARGS) {
    int64_t stash = nnf_attr_int(node, "stash_type", 1);
    if (stash != NNF_DTYPE_FLOAT32)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                              "attribute 'stash_type' = %lld is not supported (only 1, float)",
                              (long long)stash);
    return NNF_OK;
}

static double range_f64(nnf_dtype t, const void *p) {
    switch (t) {
    case NNF_DTYPE_FLOAT32: return *(const float *)p;
    case NNF_DTYPE_FLOAT64: return *(const double *)p;
    case NNF_DTYPE_FLOAT16: return nnf_f16_to_f32(*(const uint16_t *)p);
    case NNF_DTYPE_BFLOAT16: return nnf_bf16_to_f32(*(const uint16_t *)p);
    case NNF_DTYPE_INT16: return *(const int16_t *)p;
    case NNF_DTYPE_INT32: return *(const int32_t *)p;
    default: return (double)*(const int64_t *)p;
    }
}

static int64_t range_i64(nnf_dtype t, const void *p) {
    switch (t) {
    case NNF_DTYPE_INT16: return *(const int16_t *)p;
    case NNF_DTYPE_INT32: return *(const int32_t *)p;
    default: return *(const int64_t *)p;
    }
}

/* max(ceil((limit - start) / delta), 0), exactly for integers. */
static nnf_status range_count(const nnf_node *node, nnf_dtype t, const void *start,
                              const void *limit, const void *delta, int64_t *n) {
    if (range_is_float(t)) {
        double d = range_f64(t, delta);
        /* ONNX Runtime subtracts in the input (or stash) type, then divides in double */
        double diff = t != NNF_DTYPE_FLOAT64
                          ? (double)((float)range_f64(t, limit) - (float)range_f64(t, start))
                          : range_f64(t, limit) - range_f64(t, start);
        double c = ceil(diff / d);
        if (d == 0 || isnan(c) || c >= 9.0e15)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                                  "range with delta %g over %g yields no finite length", d, diff);
        *n = c > 0 ? (int64_t)c : 0;
        return NNF_OK;
    }
    int64_t s = range_i64(t, start), l = range_i64(t, limit), d = range_i64(t, delta);
    if (d == 0)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "delta is 0");
    if ((l > s) != (d > 0) || l == s) {
        *n = 0;
        return NNF_OK;
    }
    uint64_t span = l > s ? (uint64_t)l - (uint64_t)s : (uint64_t)s - (uint64_t)l;
    uint64_t step = d > 0 ? (uint64_t)d : 0 - (uint64_t)d;
    uint64_t c = span / step + (span % step != 0);
    if (c > (uint64_t)INT64_MAX / 8)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "range is too long");
    *n = (int64_t)c;
    return NNF_OK;
}

nnf_status nnf_range_infer(NNF_INFER_ARGS) {
    nnf_dtype t = in[0].dtype;
    for (int i = 0; i < 3; i++) {
        if (in[i].dtype != NNF_DTYPE_UNDEFINED && !range_dtype_ok(in[i].dtype))
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "dtype %s is not supported",
                                  nnf_dtype_name(in[i].dtype));
        if (in[i].dtype != t)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "inputs differ in dtype");
        if (in[i].shape.rank > 0 && nnf_shape_numel(&in[i].shape) != 1)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input %d is not a scalar", i);
    }
    out[0].dtype = t;
    nnf_shape_unknown(&out[0].shape, 1);
    if (in[0].data && in[1].data && in[2].data)
        NNF_CHECK(range_count(node, t, in[0].data, in[1].data, in[2].data,
                              &out[0].shape.dims[0]));
    return NNF_OK;
}

/* ---- EyeLike ----------------------------------------------------------- */

nnf_status nnf_eye_like_init(NNF_INIT_ARGS) {
    ALLOC_PARAMS(nnf_eyelike_params, p);
    p->k = nnf_attr_int(node, "k", 0);
    p->dtype = (nnf_dtype)nnf_attr_int(node, "dtype", NNF_DTYPE_UNDEFINED);
    if (p->dtype != NNF_DTYPE_UNDEFINED && nnf_dtype_size(p->dtype) == 0)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "attribute 'dtype' = %d is not supported",
                              (int)p->dtype);
    return NNF_OK;
}

nnf_status nnf_eye_like_infer(NNF_INFER_ARGS) {
    const nnf_eyelike_params *p = node->params;
    NNF_CHECK(nnf_check_fixed_dtype(node, in[0].dtype));
    if (in[0].shape.rank >= 0 && in[0].shape.rank != 2)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input must be 2-D, has rank %d",
                              in[0].shape.rank);
    out[0].dtype = p->dtype != NNF_DTYPE_UNDEFINED ? p->dtype : in[0].dtype;
    out[0].shape = in[0].shape;
    if (out[0].shape.rank < 0)
        nnf_shape_unknown(&out[0].shape, 2);
    return NNF_OK;
}

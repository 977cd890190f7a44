/* Resize (opsets 10-19), Upsample (7-9), DepthToSpace, SpaceToDepth:
 * attributes, shape inference, cost. */
#include "ops/resize.h"

#include <math.h>
#include <string.h>

static nnf_status parse_mode(const nnf_node *node, nnf_resize_params *p, int allow_cubic) {
    const char *m = nnf_attr_string(node, "mode", "nearest");
    if (!strcmp(m, "nearest"))
        p->mode = NNF_RESIZE_NEAREST;
    else if (!strcmp(m, "linear") || !strcmp(m, "bilinear"))
        p->mode = NNF_RESIZE_LINEAR;
    else if (allow_cubic && !strcmp(m, "cubic"))
        p->mode = NNF_RESIZE_CUBIC;
    else
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "attribute mode = '%s' is not supported", m);
    return NNF_OK;
}

static nnf_status resize_alloc(nnf_node *node, nnf_arena *arena, nnf_resize_params **out) {
    nnf_resize_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    if (!p)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for attributes");
    p->coord = NNF_COORD_ASYMMETRIC;
    p->nearest = NNF_NEAREST_SIMPLE;
    p->cubic_a = -0.75f;
    p->roi_input = p->scales_input = p->sizes_input = -1;
    node->params = p;
    *out = p;
    return NNF_OK;
}

nnf_status nnf_resize_init(NNF_INIT_ARGS) {
    nnf_resize_params *p = NULL;
    NNF_CHECK(resize_alloc(node, arena, &p));
    if (node->opset < 11) {
        /* Resize-10: X, scales; asymmetric coordinates like Upsample */
        p->scales_input = 1;
        return parse_mode(node, p, 0);
    }
    p->roi_input = 1;
    p->scales_input = 2;
    p->sizes_input = 3;
    NNF_CHECK(parse_mode(node, p, 1));
    static const struct {
        const char *name;
        nnf_resize_coord coord;
    } coords[] = {
        {"half_pixel", NNF_COORD_HALF_PIXEL},
        {"half_pixel_symmetric", NNF_COORD_HALF_PIXEL_SYMMETRIC},
        {"pytorch_half_pixel", NNF_COORD_PYTORCH_HALF_PIXEL},
        {"align_corners", NNF_COORD_ALIGN_CORNERS},
        {"asymmetric", NNF_COORD_ASYMMETRIC},
        {"tf_half_pixel_for_nn", NNF_COORD_TF_HALF_PIXEL_FOR_NN},
        {"tf_crop_and_resize", NNF_COORD_TF_CROP_AND_RESIZE},
    };
    const char *c = nnf_attr_string(node, "coordinate_transformation_mode", "half_pixel");
    size_t i = 0;
    while (i < sizeof coords / sizeof coords[0] && strcmp(coords[i].name, c))
        i++;
    if (i == sizeof coords / sizeof coords[0])
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                              "attribute coordinate_transformation_mode = '%s' is not supported", c);
    p->coord = coords[i].coord;
    const char *nm = nnf_attr_string(node, "nearest_mode", "round_prefer_floor");
    if (!strcmp(nm, "round_prefer_floor"))
        p->nearest = NNF_NEAREST_ROUND_PREFER_FLOOR;
    else if (!strcmp(nm, "round_prefer_ceil"))
        p->nearest = NNF_NEAREST_ROUND_PREFER_CEIL;
    else if (!strcmp(nm, "floor"))
        p->nearest = NNF_NEAREST_FLOOR;
    else if (!strcmp(nm, "ceil"))
        p->nearest = NNF_NEAREST_CEIL;
    else
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "attribute nearest_mode = '%s' is not supported", nm);
    p->cubic_a = nnf_attr_float(node, "cubic_coeff_a", -0.75f);
    p->exclude_outside = nnf_attr_int(node, "exclude_outside", 0) != 0;
    p->extrapolation_value = nnf_attr_float(node, "extrapolation_value", 0.0f);
    if (nnf_attr_int(node, "antialias", 0) != 0 && p->mode != NNF_RESIZE_NEAREST)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "attribute antialias = 1 is not supported");
    const char *ka = nnf_attr_string(node, "keep_aspect_ratio_policy", "stretch");
    if (!strcmp(ka, "stretch"))
        p->keep_aspect = NNF_KEEP_STRETCH;
    else if (!strcmp(ka, "not_larger"))
        p->keep_aspect = NNF_KEEP_NOT_LARGER;
    else if (!strcmp(ka, "not_smaller"))
        p->keep_aspect = NNF_KEEP_NOT_SMALLER;
    else
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                              "attribute keep_aspect_ratio_policy = '%s' is not supported", ka);
    const int64_t *axes = NULL;
    int na = nnf_attr_ints(node, "axes", &axes);
    if (na > NNF_MAX_RANK)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "attribute axes has %d entries", na);
    for (int k = 0; k < na; k++)
        p->axes[k] = axes[k];
    p->n_axes = na > 0 ? na : 0;
    return NNF_OK;
}

nnf_status nnf_upsample_init(NNF_INIT_ARGS) {
    nnf_resize_params *p = NULL;
    NNF_CHECK(resize_alloc(node, arena, &p));
    NNF_CHECK(parse_mode(node, p, 0));
    if (node->opset >= 9) {
        p->scales_input = 1;
        return NNF_OK;
    }
    const float *s = NULL;
    int n = nnf_attr_floats(node, "scales", &s);
    if (n <= 0)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute scales is required");
    if (n > NNF_MAX_RANK)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "attribute scales has %d entries", n);
    for (int k = 0; k < n; k++)
        p->scales_attr[k] = s[k];
    p->n_scales_attr = n;
    return NNF_OK;
}

static double arg_value(const nnf_resize_arg *a, int64_t i) {
    switch (a->dtype) {
    case NNF_DTYPE_FLOAT32: return ((const float *)a->data)[i];
    case NNF_DTYPE_FLOAT64: return ((const double *)a->data)[i];
    case NNF_DTYPE_INT64: return (double)((const int64_t *)a->data)[i];
    case NNF_DTYPE_INT32: return ((const int32_t *)a->data)[i];
    default: return 0.0;
    }
}

nnf_status nnf_resize_resolve(const nnf_node *node, const nnf_resize_params *p, int rank,
                              const int64_t *in_dims, const nnf_resize_arg *roi,
                              const nnf_resize_arg *scales, const nnf_resize_arg *sizes,
                              int64_t *out_dims, float *scale_out, float *roi_out) {
    int axes[NNF_MAX_RANK], naxes = p->n_axes ? p->n_axes : rank;
    for (int i = 0; i < rank; i++) {
        out_dims[i] = in_dims[i];
        scale_out[i] = 1.0f;
        roi_out[i] = 0.0f;
        roi_out[rank + i] = 1.0f;
    }
    for (int i = 0; i < naxes; i++) {
        if (!p->n_axes) {
            axes[i] = i;
            continue;
        }
        int a;
        NNF_CHECK(nnf_norm_axis(node, p->axes[i], rank, &a));
        for (int k = 0; k < i; k++)
            if (axes[k] == a)
                return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute axes repeats axis %d", a);
        axes[i] = a;
    }
    if (roi && roi->present && roi->known && p->coord == NNF_COORD_TF_CROP_AND_RESIZE) {
        if (roi->count != 2 * naxes)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "roi has %lld values for %d axes",
                                  (long long)roi->count, naxes);
        if (roi->dtype != NNF_DTYPE_FLOAT32 && roi->dtype != NNF_DTYPE_FLOAT64)
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "roi has dtype %s", nnf_dtype_name(roi->dtype));
        for (int i = 0; i < naxes; i++) {
            roi_out[axes[i]] = (float)arg_value(roi, i);
            roi_out[rank + axes[i]] = (float)arg_value(roi, naxes + i);
        }
    }
    int use_scales = p->n_scales_attr > 0 || (scales && scales->present);
    int use_sizes = sizes && sizes->present;
    if (use_scales && use_sizes)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "both scales and sizes are given");
    if (!use_scales && !use_sizes)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "neither scales nor sizes is given");
    if (use_scales) {
        if (p->n_scales_attr) {
            if (p->n_scales_attr != rank)
                return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute scales has %d values for rank %d",
                                      p->n_scales_attr, rank);
        } else {
            if (scales->known && scales->count != naxes)
                return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "scales has %lld values for %d axes",
                                      (long long)scales->count, naxes);
            if (scales->dtype != NNF_DTYPE_FLOAT32 && scales->dtype != NNF_DTYPE_UNDEFINED)
                return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "scales has dtype %s", nnf_dtype_name(scales->dtype));
        }
        for (int i = 0; i < naxes; i++) {
            int a = axes[i];
            if (!p->n_scales_attr && !scales->known) {
                out_dims[a] = -1;
                continue;
            }
            float s = p->n_scales_attr ? p->scales_attr[a] : ((const float *)scales->data)[i];
            if (!(s > 0.0f) || isinf(s))
                return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "scale %g on axis %d is not positive", (double)s, a);
            scale_out[a] = s;
            /* float product truncated, as onnxruntime sizes its output */
            out_dims[a] = in_dims[a] < 0 ? -1 : (int64_t)floorf(s * (float)in_dims[a]);
        }
        return NNF_OK;
    }
    if (sizes->known && sizes->count != naxes)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "sizes has %lld values for %d axes",
                              (long long)sizes->count, naxes);
    if (sizes->dtype != NNF_DTYPE_INT64 && sizes->dtype != NNF_DTYPE_UNDEFINED)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "sizes has dtype %s; int64 expected",
                              nnf_dtype_name(sizes->dtype));
    int all_known = sizes->known;
    for (int i = 0; i < naxes; i++)
        all_known &= in_dims[axes[i]] > 0;
    if (!sizes->known) {
        for (int i = 0; i < naxes; i++)
            out_dims[axes[i]] = -1;
        return NNF_OK;
    }
    const int64_t *sz = sizes->data;
    for (int i = 0; i < naxes; i++)
        if (sz[i] < 0)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "sizes[%d] = %lld is negative", i, (long long)sz[i]);
    if (p->keep_aspect == NNF_KEEP_STRETCH) {
        for (int i = 0; i < naxes; i++) {
            int a = axes[i];
            out_dims[a] = sz[i];
            scale_out[a] = in_dims[a] > 0 ? (float)sz[i] / (float)in_dims[a] : 1.0f;
        }
        return NNF_OK;
    }
    if (!all_known) {
        for (int i = 0; i < naxes; i++)
            out_dims[axes[i]] = -1;
        return NNF_OK;
    }
    float s = (float)sz[0] / (float)in_dims[axes[0]];
    for (int i = 1; i < naxes; i++) {
        float si = (float)sz[i] / (float)in_dims[axes[i]];
        s = p->keep_aspect == NNF_KEEP_NOT_LARGER ? fminf(s, si) : fmaxf(s, si);
    }
    for (int i = 0; i < naxes; i++) {
        int a = axes[i];
        scale_out[a] = s;
        out_dims[a] = (int64_t)floorf(s * (float)in_dims[a] + 0.5f);
    }
    return NNF_OK;
}

static nnf_resize_arg arg_from_tinfo(const nnf_node *node, const nnf_tinfo *in, int idx) {
    nnf_resize_arg a = {0};
    if (idx < 0 || idx >= node->n_inputs || !in[idx].present)
        return a;
    int64_t n = in[idx].shape.rank >= 0 ? nnf_shape_numel(&in[idx].shape) : -1;
    a.present = n != 0;
    a.known = in[idx].data != NULL && n >= 0;
    a.dtype = in[idx].dtype;
    a.count = n;
    a.data = in[idx].data;
    return a;
}

nnf_status nnf_resize_infer(NNF_INFER_ARGS) {
    const nnf_resize_params *p = node->params;
    const nnf_tinfo *x = &in[0];
    if (x->dtype != NNF_DTYPE_FLOAT32 && x->dtype != NNF_DTYPE_UNDEFINED)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input X has dtype %s; only float32 is supported",
                              nnf_dtype_name(x->dtype));
    out[0].dtype = NNF_DTYPE_FLOAT32;
    out[0].shape.rank = -1;
    int rank = x->shape.rank;
    if (rank < 0)
        return NNF_OK;
    if (rank == 0)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "cannot resize a scalar");
    nnf_resize_arg roi = arg_from_tinfo(node, in, p->roi_input);
    nnf_resize_arg scales = arg_from_tinfo(node, in, p->scales_input);
    nnf_resize_arg sizes = arg_from_tinfo(node, in, p->sizes_input);
    float sc[NNF_MAX_RANK], r[2 * NNF_MAX_RANK];
    nnf_shape s = x->shape;
    NNF_CHECK(nnf_resize_resolve(node, p, rank, x->shape.dims, &roi, &scales, &sizes, s.dims, sc, r));
    for (int i = 0; i < rank; i++)
        if (s.dims[i] != x->shape.dims[i] || s.dims[i] < 0)
            s.dim_names[i] = s.dims[i] == x->shape.dims[i] ? x->shape.dim_names[i] : NULL;
    out[0].shape = s;
    return NNF_OK;
}

double nnf_resize_cost(NNF_COST_ARGS) {
    const nnf_resize_params *p = node->params;
    int64_t n = nnf_shape_numel(&out[0].shape);
    if (n < 0 || p->mode == NNF_RESIZE_NEAREST)
        return 0.0;
    /* a multiply-add per tap; taps grow with every axis whose extent changes */
    double taps = 1.0;
    for (int i = 0; i < out[0].shape.rank && i < in[0].shape.rank; i++)
        if (out[0].shape.dims[i] != in[0].shape.dims[i])
            taps *= p->mode == NNF_RESIZE_LINEAR ? 2.0 : 4.0;
    return 2.0 * (double)n * taps;
}

/* ---- DepthToSpace / SpaceToDepth ------------------------------------------ */

nnf_status nnf_space_depth_init(NNF_INIT_ARGS) {
    nnf_space_depth_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    if (!p)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for attributes");
    if (!nnf_node_attr(node, "blocksize"))
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute blocksize is required");
    p->blocksize = nnf_attr_int(node, "blocksize", 0);
    if (p->blocksize < 1)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute blocksize must be positive");
    const char *m = nnf_attr_string(node, "mode", "DCR");
    if (!strcmp(m, "CRD"))
        p->crd = 1;
    else if (strcmp(m, "DCR"))
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute mode = '%s'; DCR or CRD expected", m);
    node->params = p;
    return NNF_OK;
}

static nnf_status space_depth_infer(const nnf_node *node, const nnf_tinfo *in, nnf_tinfo *out, int to_space) {
    const nnf_space_depth_params *p = node->params;
    const nnf_tinfo *x = &in[0];
    if (!nnf_dtype_size(x->dtype) && x->dtype != NNF_DTYPE_UNDEFINED)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input has dtype %s", nnf_dtype_name(x->dtype));
    out[0].dtype = x->dtype;
    out[0].shape = x->shape;
    if (x->shape.rank < 0)
        return NNF_OK;
    if (x->shape.rank != 4)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input has rank %d; needs (N, C, H, W)", x->shape.rank);
    int64_t bs = p->blocksize, b2 = bs * bs;
    nnf_shape *s = &out[0].shape;
    for (int i = 1; i < 4; i++)
        s->dim_names[i] = NULL;
    if (to_space) {
        if (x->shape.dims[1] >= 0 && x->shape.dims[1] % b2)
            return nnf_node_error(node, NNF_ERR_SHAPE, "%lld channels are not a multiple of blocksize^2 = %lld",
                                  (long long)x->shape.dims[1], (long long)b2);
        s->dims[1] = x->shape.dims[1] < 0 ? -1 : x->shape.dims[1] / b2;
        s->dims[2] = x->shape.dims[2] < 0 ? -1 : x->shape.dims[2] * bs;
        s->dims[3] = x->shape.dims[3] < 0 ? -1 : x->shape.dims[3] * bs;
    } else {
        for (int i = 2; i < 4; i++)
            if (x->shape.dims[i] >= 0 && x->shape.dims[i] % bs)
                return nnf_node_error(node, NNF_ERR_SHAPE, "spatial extent %lld is not a multiple of blocksize %lld",
                                      (long long)x->shape.dims[i], (long long)bs);
        s->dims[1] = x->shape.dims[1] < 0 ? -1 : x->shape.dims[1] * b2;
        s->dims[2] = x->shape.dims[2] < 0 ? -1 : x->shape.dims[2] / bs;
        s->dims[3] = x->shape.dims[3] < 0 ? -1 : x->shape.dims[3] / bs;
    }
    return NNF_OK;
}

nnf_status nnf_depth_to_space_infer(NNF_INFER_ARGS) { return space_depth_infer(node, in, out, 1); }
nnf_status nnf_space_to_depth_infer(NNF_INFER_ARGS) { return space_depth_infer(node, in, out, 0); }

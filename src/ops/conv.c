/* Conv and ConvTranspose: attributes, shape inference, cost; and the window
 * arithmetic the pools and the optimised kernels share (conv.h). */
#include "ops/conv.h"

#include <string.h>

/* Input i as inference sees it, or NULL when omitted (or past the node's end). */
static const nnf_tinfo *opt_in(const nnf_node *node, const nnf_tinfo *in, int i) {
    return i < node->n_inputs && in[i].present ? &in[i] : NULL;
}

static nnf_status parse_axis_ints(const nnf_node *node, const char *name, int64_t min_value,
                                  int64_t *dst, int per_axis, int *spatial) {
    const int64_t *v = NULL;
    int n = nnf_attr_ints(node, name, &v);
    if (n < 0)
        return NNF_OK;
    if (n % per_axis)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute %s has %d values, not a multiple of %d",
                              name, n, per_axis);
    int axes = n / per_axis;
    if (axes > NNF_MAX_SPATIAL)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                              "attribute %s implies %d spatial axes; at most %d are supported", name,
                              axes, NNF_MAX_SPATIAL);
    if (*spatial && axes != *spatial)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                              "attribute %s implies %d spatial axes, other attributes %d", name, axes,
                              *spatial);
    *spatial = axes;
    for (int i = 0; i < n; i++) {
        if (v[i] < min_value)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute %s[%d] = %lld is below %lld",
                                  name, i, (long long)v[i], (long long)min_value);
        /* pads are stored begin-all, end-all in ONNX order */
        dst[i] = v[i];
    }
    return NNF_OK;
}

nnf_status nnf_conv_parse_window(const nnf_node *node, nnf_conv_params *p) {
    int spatial = 0;
    for (int i = 0; i < NNF_MAX_SPATIAL; i++) {
        p->kernel[i] = 0;
        p->strides[i] = 1;
        p->dilations[i] = 1;
        p->pads_begin[i] = 0;
        p->pads_end[i] = 0;
    }
    int64_t pads[2 * NNF_MAX_SPATIAL] = {0};
    NNF_CHECK(parse_axis_ints(node, "kernel_shape", 1, p->kernel, 1, &spatial));
    NNF_CHECK(parse_axis_ints(node, "strides", 1, p->strides, 1, &spatial));
    NNF_CHECK(parse_axis_ints(node, "dilations", 1, p->dilations, 1, &spatial));
    NNF_CHECK(parse_axis_ints(node, "pads", 0, pads, 2, &spatial));
    for (int i = 0; i < spatial; i++) {
        p->pads_begin[i] = pads[i];
        p->pads_end[i] = pads[spatial + i];
    }
    p->spatial = spatial;
    const char *ap = nnf_attr_string(node, "auto_pad", "NOTSET");
    if (!strcmp(ap, "NOTSET") || !ap[0])
        p->auto_pad = NNF_AUTO_PAD_NOTSET;
    else if (!strcmp(ap, "SAME_UPPER"))
        p->auto_pad = NNF_AUTO_PAD_SAME_UPPER;
    else if (!strcmp(ap, "SAME_LOWER"))
        p->auto_pad = NNF_AUTO_PAD_SAME_LOWER;
    else if (!strcmp(ap, "VALID"))
        p->auto_pad = NNF_AUTO_PAD_VALID;
    else
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute auto_pad has unknown value '%s'", ap);
    p->group = 1;
    p->residual_input = -1;
    p->act.kind = NNF_ACT_NONE;
    return NNF_OK;
}

int64_t nnf_conv_out_dim(int64_t in, int64_t kernel, int64_t stride, int64_t dilation,
                         int64_t pad_begin, int64_t pad_end, int ceil_mode) {
    if (in < 0)
        return -1;
    int64_t span = (kernel - 1) * dilation + 1;
    int64_t room = in + pad_begin + pad_end - span;
    if (room < 0)
        return 0;
    int64_t out = room / stride + 1;
    if (ceil_mode && room % stride) {
        out++;
        /* a window starting in the end padding would see no input at all */
        if ((out - 1) * stride >= in + pad_begin)
            out--;
    }
    return out;
}

nnf_status nnf_conv_resolve_pads(const nnf_conv_params *p, const int64_t *in_spatial,
                                 int64_t *pads_begin, int64_t *pads_end) {
    for (int i = 0; i < p->spatial; i++) {
        switch (p->auto_pad) {
        case NNF_AUTO_PAD_NOTSET:
            pads_begin[i] = p->pads_begin[i];
            pads_end[i] = p->pads_end[i];
            break;
        case NNF_AUTO_PAD_VALID:
            pads_begin[i] = pads_end[i] = 0;
            break;
        case NNF_AUTO_PAD_SAME_UPPER:
        case NNF_AUTO_PAD_SAME_LOWER: {
            int64_t in = in_spatial[i], s = p->strides[i];
            if (in < 0 || p->kernel[i] <= 0)
                return nnf_error(NNF_ERR_INTERNAL, "SAME padding needs known input and kernel extents");
            int64_t out = (in + s - 1) / s;
            int64_t span = (p->kernel[i] - 1) * p->dilations[i] + 1;
            int64_t total = (out - 1) * s + span - in;
            if (total < 0)
                total = 0;
            int64_t small = total / 2, big = total - small;
            pads_begin[i] = p->auto_pad == NNF_AUTO_PAD_SAME_UPPER ? small : big;
            pads_end[i] = p->auto_pad == NNF_AUTO_PAD_SAME_UPPER ? big : small;
            break;
        }
        }
    }
    return NNF_OK;
}

nnf_status nnf_conv_out_spatial(const nnf_node *node, const nnf_conv_params *p,
                                const int64_t *in_spatial, const int64_t *pads_begin,
                                const int64_t *pads_end, int64_t *out_spatial) {
    for (int i = 0; i < p->spatial; i++) {
        if (in_spatial[i] < 0 || p->kernel[i] <= 0) {
            out_spatial[i] = -1;
            continue;
        }
        if (p->auto_pad == NNF_AUTO_PAD_SAME_UPPER || p->auto_pad == NNF_AUTO_PAD_SAME_LOWER) {
            out_spatial[i] = (in_spatial[i] + p->strides[i] - 1) / p->strides[i];
            continue;
        }
        int ceil_mode = p->auto_pad == NNF_AUTO_PAD_NOTSET ? p->ceil_mode : 0;
        out_spatial[i] = nnf_conv_out_dim(in_spatial[i], p->kernel[i], p->strides[i], p->dilations[i],
                                          pads_begin[i], pads_end[i], ceil_mode);
        if (out_spatial[i] <= 0)
            return nnf_node_error(node, NNF_ERR_SHAPE,
                                  "window of %lld (dilation %lld) does not fit spatial axis %d of "
                                  "extent %lld padded by %lld+%lld",
                                  (long long)p->kernel[i], (long long)p->dilations[i], i,
                                  (long long)in_spatial[i], (long long)pads_begin[i],
                                  (long long)pads_end[i]);
    }
    return NNF_OK;
}

nnf_status nnf_conv_transpose_resolve(const nnf_node *node, const nnf_conv_params *p,
                                      const int64_t *in_spatial, int64_t *pads_begin,
                                      int64_t *pads_end, int64_t *out_spatial) {
    for (int i = 0; i < p->spatial; i++) {
        int64_t in = in_spatial[i], s = p->strides[i];
        int64_t full = s * (in - 1) + p->output_padding[i] + (p->kernel[i] - 1) * p->dilations[i] + 1;
        int same = p->auto_pad == NNF_AUTO_PAD_SAME_UPPER || p->auto_pad == NNF_AUTO_PAD_SAME_LOWER;
        if (p->has_output_shape || same) {
            int64_t out = p->has_output_shape ? p->output_shape[i] : in * s;
            int64_t total = full - out;
            if (total < 0)
                total = 0;
            int64_t small = total / 2, big = total - small;
            pads_begin[i] = p->auto_pad == NNF_AUTO_PAD_SAME_UPPER ? small : big;
            pads_end[i] = p->auto_pad == NNF_AUTO_PAD_SAME_UPPER ? big : small;
            /* An explicit output_shape longer than the full result gets a
             * tail that only the bias reaches. SAME padding whose stride
             * outruns the kernel (in*stride > full) yields the full result,
             * as onnxruntime does, not the spec's in*stride. */
            out_spatial[i] = p->has_output_shape ? out : full - total;
        } else if (p->auto_pad == NNF_AUTO_PAD_VALID) {
            pads_begin[i] = pads_end[i] = 0;
            out_spatial[i] = full;
        } else {
            pads_begin[i] = p->pads_begin[i];
            pads_end[i] = p->pads_end[i];
            out_spatial[i] = full - pads_begin[i] - pads_end[i];
        }
        if (out_spatial[i] <= 0)
            return nnf_node_error(node, NNF_ERR_SHAPE, "output extent %lld on spatial axis %d is not positive",
                                  (long long)out_spatial[i], i);
    }
    return NNF_OK;
}

/* ---- Conv ---------------------------------------------------------------- */

static nnf_status conv_common_init(nnf_node *node, nnf_arena *arena, nnf_conv_params **out) {
    nnf_conv_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    if (!p)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for attributes");
    NNF_CHECK(nnf_conv_parse_window(node, p));
    p->group = nnf_attr_int(node, "group", 1);
    if (p->group < 1)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute group = %lld must be positive",
                              (long long)p->group);
    node->params = p;
    *out = p;
    return NNF_OK;
}

nnf_status nnf_conv_init(NNF_INIT_ARGS) {
    nnf_conv_params *p = NULL;
    return conv_common_init(node, arena, &p);
}

/* Checks shared by Conv and ConvTranspose: dtypes, rank, kernel extents from
 * the weight. Sets *rank (-1 when unknown) and fills p->spatial/p->kernel. */
static nnf_status conv_check_inputs(const nnf_node *node, nnf_conv_params *p, const nnf_tinfo *in,
                                    int *rank_out) {
    const nnf_tinfo *x = &in[0], *w = &in[1];
    if (x->dtype != NNF_DTYPE_FLOAT32 && x->dtype != NNF_DTYPE_UNDEFINED)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input X has dtype %s; only float32 is supported",
                              nnf_dtype_name(x->dtype));
    if (w->dtype != NNF_DTYPE_FLOAT32 && w->dtype != NNF_DTYPE_UNDEFINED)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input W has dtype %s; only float32 is supported",
                              nnf_dtype_name(w->dtype));
    int rank = x->shape.rank >= 0 ? x->shape.rank : w->shape.rank;
    *rank_out = rank;
    if (rank < 0)
        return NNF_OK;
    if (rank < 3)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input has rank %d; needs at least 3 (N, C, spatial)",
                              rank);
    if (rank - 2 > NNF_MAX_SPATIAL)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "%d spatial axes; at most %d are supported",
                              rank - 2, NNF_MAX_SPATIAL);
    if ((x->shape.rank >= 0 && w->shape.rank >= 0 && x->shape.rank != w->shape.rank))
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input X has rank %d but weight W rank %d",
                              x->shape.rank, w->shape.rank);
    if (p->spatial && p->spatial != rank - 2)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                              "attributes describe %d spatial axes but the input has %d", p->spatial,
                              rank - 2);
    p->spatial = rank - 2;
    for (int i = 0; i < p->spatial; i++) {
        int64_t wk = w->shape.rank >= 0 ? w->shape.dims[2 + i] : -1;
        if (wk >= 0 && p->kernel[i] > 0 && wk != p->kernel[i])
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                                  "kernel_shape[%d] = %lld disagrees with the weight's extent %lld", i,
                                  (long long)p->kernel[i], (long long)wk);
        if (wk == 0)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "weight has an empty spatial axis %d", i);
        if (wk > 0)
            p->kernel[i] = wk;
    }
    return NNF_OK;
}

static void copy_batch_dim(nnf_shape *dst, const nnf_tinfo *x) {
    if (x->shape.rank >= 1) {
        dst->dims[0] = x->shape.dims[0];
        dst->dim_names[0] = x->shape.dim_names[0];
    } else {
        dst->dims[0] = -1;
        dst->dim_names[0] = NULL;
    }
}

nnf_status nnf_conv_infer(NNF_INFER_ARGS) {
    /* a private copy: sessions infer concurrently and the model is immutable */
    nnf_conv_params params = *(const nnf_conv_params *)node->params, *p = &params;
    const nnf_tinfo *x = &in[0], *w = &in[1], *b = opt_in(node, in, 2);
    int rank;
    NNF_CHECK(conv_check_inputs(node, p, in, &rank));
    out[0].dtype = NNF_DTYPE_FLOAT32;
    if (rank < 0) {
        out[0].shape.rank = -1;
        return NNF_OK;
    }
    int64_t m = w->shape.rank >= 0 ? w->shape.dims[0] : -1;
    int64_t cg = w->shape.rank >= 0 ? w->shape.dims[1] : -1;
    int64_t c = x->shape.rank >= 0 ? x->shape.dims[1] : -1;
    if (m >= 0 && m % p->group)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "%lld output channels do not split into %lld groups",
                              (long long)m, (long long)p->group);
    if (c >= 0 && cg >= 0 && c != cg * p->group)
        return nnf_node_error(node, NNF_ERR_SHAPE,
                              "input has %lld channels but the weight expects %lld x %lld groups",
                              (long long)c, (long long)cg, (long long)p->group);
    if (b && b->shape.rank >= 0 &&
        (b->shape.rank != 1 || (m >= 0 && b->shape.dims[0] >= 0 && b->shape.dims[0] != m)))
        return nnf_node_error(node, NNF_ERR_SHAPE, "bias B must have shape [%lld]", (long long)m);
    nnf_shape s = {.rank = rank};
    copy_batch_dim(&s, x);
    s.dims[1] = m;
    int64_t in_sp[NNF_MAX_SPATIAL], pb[NNF_MAX_SPATIAL], pe[NNF_MAX_SPATIAL];
    int known = 1;
    for (int i = 0; i < p->spatial; i++) {
        in_sp[i] = x->shape.rank >= 0 ? x->shape.dims[2 + i] : -1;
        if (in_sp[i] < 0 || p->kernel[i] <= 0)
            known = 0;
    }
    if (known) {
        NNF_CHECK(nnf_conv_resolve_pads(p, in_sp, pb, pe));
    } else {
        memcpy(pb, p->pads_begin, sizeof pb);
        memcpy(pe, p->pads_end, sizeof pe);
    }
    NNF_CHECK(nnf_conv_out_spatial(node, p, in_sp, pb, pe, s.dims + 2));
    if (p->residual_input >= 0) {
        const nnf_tinfo *r = opt_in(node, in, p->residual_input);
        if (!r)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "fused residual input %d is missing",
                                  p->residual_input);
        if (r->shape.rank >= 0 && r->shape.rank != rank)
            return nnf_node_error(node, NNF_ERR_SHAPE, "fused residual has rank %d, output rank %d",
                                  r->shape.rank, rank);
        for (int i = 0; r->shape.rank >= 0 && i < rank; i++)
            if (r->shape.dims[i] >= 0 && s.dims[i] >= 0 && r->shape.dims[i] != s.dims[i])
                return nnf_node_error(node, NNF_ERR_SHAPE, "fused residual differs from the output on axis %d", i);
    }
    out[0].shape = s;
    return NNF_OK;
}

double nnf_conv_cost(NNF_COST_ARGS) {
    int64_t n_out = nnf_shape_numel(&out[0].shape);
    const nnf_shape *w = &in[1].shape;
    int64_t wn = nnf_shape_numel(w);
    if (n_out < 0 || wn < 0 || w->rank < 3 || w->dims[0] <= 0)
        return 0.0;
    /* each output element reads one weight filter: C/group * prod(kernel) taps */
    double taps = (double)wn / (double)w->dims[0];
    return 2.0 * (double)n_out * taps;
}

/* ---- ConvTranspose ------------------------------------------------------- */

nnf_status nnf_conv_transpose_init(NNF_INIT_ARGS) {
    nnf_conv_params *p = NULL;
    NNF_CHECK(conv_common_init(node, arena, &p));
    int spatial = p->spatial;
    NNF_CHECK(parse_axis_ints(node, "output_padding", 0, p->output_padding, 1, &spatial));
    p->spatial = spatial;
    const int64_t *os = NULL;
    int n = nnf_attr_ints(node, "output_shape", &os);
    if (n >= 0) {
        /* spatial extents only, or the full N, C, spatial... form some exporters write */
        int sp = spatial ? spatial : n;
        if (n != sp && n != sp + 2)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute output_shape has %d values for %d spatial axes",
                                  n, sp);
        if (sp > NNF_MAX_SPATIAL)
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "attribute output_shape has %d spatial axes", sp);
        for (int i = 0; i < sp; i++) {
            p->output_shape[i] = os[n - sp + i];
            if (p->output_shape[i] <= 0)
                return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute output_shape[%d] is not positive",
                                      n - sp + i);
        }
        p->has_output_shape = 1;
        if (!p->spatial)
            p->spatial = sp;
    }
    return NNF_OK;
}

nnf_status nnf_conv_transpose_infer(NNF_INFER_ARGS) {
    nnf_conv_params params = *(const nnf_conv_params *)node->params, *p = &params;
    const nnf_tinfo *x = &in[0], *w = &in[1], *b = opt_in(node, in, 2);
    int rank;
    NNF_CHECK(conv_check_inputs(node, p, in, &rank));
    out[0].dtype = NNF_DTYPE_FLOAT32;
    if (rank < 0) {
        out[0].shape.rank = -1;
        return NNF_OK;
    }
    int64_t cin = w->shape.rank >= 0 ? w->shape.dims[0] : -1;
    int64_t mg = w->shape.rank >= 0 ? w->shape.dims[1] : -1;
    int64_t c = x->shape.rank >= 0 ? x->shape.dims[1] : -1;
    if (cin >= 0 && cin % p->group)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "%lld input channels do not split into %lld groups",
                              (long long)cin, (long long)p->group);
    if (c >= 0 && cin >= 0 && c != cin)
        return nnf_node_error(node, NNF_ERR_SHAPE, "input has %lld channels but the weight expects %lld",
                              (long long)c, (long long)cin);
    int64_t m = mg >= 0 ? mg * p->group : -1;
    if (b && b->shape.rank >= 0 &&
        (b->shape.rank != 1 || (m >= 0 && b->shape.dims[0] >= 0 && b->shape.dims[0] != m)))
        return nnf_node_error(node, NNF_ERR_SHAPE, "bias B must have shape [%lld]", (long long)m);
    nnf_shape s = {.rank = rank};
    copy_batch_dim(&s, x);
    s.dims[1] = m;
    int64_t in_sp[NNF_MAX_SPATIAL] = {0}, pb[NNF_MAX_SPATIAL], pe[NNF_MAX_SPATIAL], o[NNF_MAX_SPATIAL];
    int known = 1;
    for (int i = 0; i < p->spatial; i++) {
        in_sp[i] = x->shape.rank >= 0 ? x->shape.dims[2 + i] : -1;
        if (in_sp[i] <= 0 || p->kernel[i] <= 0)
            known = 0;
    }
    if (known) {
        NNF_CHECK(nnf_conv_transpose_resolve(node, p, in_sp, pb, pe, o));
        for (int i = 0; i < p->spatial; i++)
            s.dims[2 + i] = o[i];
    } else {
        for (int i = 0; i < p->spatial; i++)
            s.dims[2 + i] = p->has_output_shape ? p->output_shape[i] : -1;
    }
    out[0].shape = s;
    return NNF_OK;
}

double nnf_conv_transpose_cost(NNF_COST_ARGS) {
    /* every input element scatters through M/group * prod(kernel) weights */
    int64_t n_in = nnf_shape_numel(&in[0].shape);
    const nnf_shape *w = &in[1].shape;
    int64_t wn = nnf_shape_numel(w);
    if (n_in < 0 || wn < 0 || w->rank < 3 || w->dims[0] <= 0)
        return 0.0;
    return 2.0 * (double)n_in * ((double)wn / (double)w->dims[0]);
}

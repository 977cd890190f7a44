/* Reference Resize / Upsample (float32, any rank) and DepthToSpace /
 * SpaceToDepth (any element type).
 *
 * Resize is separable: every output coordinate on an axis maps to a few
 * input taps with weights (1 for nearest, 2 for linear, 4 for cubic), and
 * an output element is the sum over the product of its axes' taps. The taps
 * are computed once per axis, in float as onnxruntime does (so that nearest
 * rounding agrees on ties); axes whose every output reads one input (scale 1,
 * nearest) collapse to a single tap. tf_crop_and_resize positions outside
 * the input take extrapolation_value. */
#include "ops/resize.h"

#include <math.h>
#include <string.h>

enum { MAX_OUTER_COMBOS = 256 };

typedef struct axis_taps {
    int taps;       /* per output position */
    int64_t *idx;   /* [out * taps], element offsets along the axis (times stride) */
    float *w;       /* [out * taps] */
    uint8_t *outside; /* [out], tf_crop_and_resize extrapolation */
} axis_taps;

typedef struct resize_job {
    int rank;
    int64_t out[NNF_MAX_RANK];
    axis_taps ax[NNF_MAX_RANK];
    float extrapolation;
    const float *x;
    float *y;
} resize_job;

float nnf_resize_source_coord(const nnf_resize_params *p, int64_t o, int64_t in, int64_t out,
                              float scale, float roi_start, float roi_end) {
    float xo = (float)o;
    switch (p->coord) {
    case NNF_COORD_HALF_PIXEL: return (xo + 0.5f) / scale - 0.5f;
    case NNF_COORD_HALF_PIXEL_SYMMETRIC: {
        float ow = scale * (float)in, adj = (float)out / ow, center = (float)in / 2.0f;
        return center * (1.0f - adj) + (xo + 0.5f) / scale - 0.5f;
    }
    case NNF_COORD_PYTORCH_HALF_PIXEL: return out > 1 ? (xo + 0.5f) / scale - 0.5f : 0.0f;
    case NNF_COORD_ALIGN_CORNERS: {
        /* The ONNX reference (and so the conformance data) uses the unrounded
         * resized length in*scale when scales are given; with sizes it equals out.
         * ONNX Runtime uses the rounded length: results differ for fractional scales. */
        float len = scale * (float)in;
        if (fabsf(len - (float)out) < 1e-3f)
            len = (float)out; /* sizes given (scale = out/in): no float round-off */
        return out == 1 || len == 1.0f ? 0.0f : xo * (float)(in - 1) / (len - 1.0f);
    }
    case NNF_COORD_ASYMMETRIC: return xo / scale;
    case NNF_COORD_TF_HALF_PIXEL_FOR_NN: return (xo + 0.5f) / scale;
    case NNF_COORD_TF_CROP_AND_RESIZE:
        return out > 1 ? roi_start * (float)(in - 1) + xo * (roi_end - roi_start) * (float)(in - 1) / (float)(out - 1)
                       : 0.5f * (roi_start + roi_end) * (float)(in - 1);
    }
    return 0.0f;
}

int64_t nnf_resize_nearest_index(const nnf_resize_params *p, float x, float scale) {
    int64_t i;
    switch (p->nearest) {
    case NNF_NEAREST_ROUND_PREFER_FLOOR:
        i = x == (float)(int64_t)x + 0.5f ? (int64_t)x : (int64_t)roundf(x);
        break;
    case NNF_NEAREST_ROUND_PREFER_CEIL: i = (int64_t)roundf(x); break;
    case NNF_NEAREST_FLOOR: i = (int64_t)floorf(x); break;
    case NNF_NEAREST_CEIL: i = (int64_t)ceilf(x); break;
    default: i = scale < 1.0f ? (int64_t)ceilf(x) : (int64_t)x; break;
    }
    return i;
}

static int64_t clamp_index(int64_t i, int64_t in) { return i < 0 ? 0 : (i >= in ? in - 1 : i); }

static void cubic_weights(float t, float a, float *w) {
    float t1 = t + 1.0f, u = 1.0f - t, u1 = u + 1.0f;
    w[0] = ((a * t1 - 5.0f * a) * t1 + 8.0f * a) * t1 - 4.0f * a;
    w[1] = ((a + 2.0f) * t - (a + 3.0f)) * t * t + 1.0f;
    w[2] = ((a + 2.0f) * u - (a + 3.0f)) * u * u + 1.0f;
    w[3] = ((a * u1 - 5.0f * a) * u1 + 8.0f * a) * u1 - 4.0f * a;
}

/* Fill one axis's taps; idx are multiplied by the axis stride. */
static void axis_fill(const nnf_resize_params *p, axis_taps *t, int64_t in, int64_t out, float scale, float rs,
                      float re, int64_t stride) {
    for (int64_t o = 0; o < out; o++) {
        float x = nnf_resize_source_coord(p, o, in, out, scale, rs, re);
        int64_t *idx = t->idx + o * t->taps;
        float *w = t->w + o * t->taps;
        t->outside[o] = p->coord == NNF_COORD_TF_CROP_AND_RESIZE && (x < 0.0f || x > (float)(in - 1));
        if (p->mode == NNF_RESIZE_NEAREST) {
            idx[0] = clamp_index(nnf_resize_nearest_index(p, x, scale), in) * stride;
            w[0] = 1.0f;
        } else if (p->mode == NNF_RESIZE_LINEAR) {
            float xc = x < 0.0f ? 0.0f : (x > (float)(in - 1) ? (float)(in - 1) : x);
            int64_t i0 = (int64_t)xc, i1 = i0 + 1 < in ? i0 + 1 : in - 1;
            float d = xc - (float)i0;
            idx[0] = i0 * stride;
            idx[1] = i1 * stride;
            w[0] = 1.0f - d;
            w[1] = d;
        } else {
            float xf = floorf(x);
            int64_t base = (int64_t)xf - 1;
            cubic_weights(x - xf, p->cubic_a, w);
            float sum = 0.0f;
            for (int k = 0; k < 4; k++) {
                int64_t i = base + k;
                if (p->exclude_outside && (i < 0 || i >= in))
                    w[k] = 0.0f;
                sum += w[k];
                idx[k] = clamp_index(i, in) * stride;
            }
            if (p->exclude_outside && sum != 0.0f)
                for (int k = 0; k < 4; k++)
                    w[k] /= sum;
        }
    }
    /* collapse to one tap when every position has a single non-zero weight */
    if (t->taps == 1)
        return;
    for (int64_t o = 0; o < out; o++) {
        int nz = 0;
        for (int k = 0; k < t->taps; k++)
            nz += t->w[o * t->taps + k] != 0.0f;
        if (nz > 1)
            return;
    }
    for (int64_t o = 0; o < out; o++) {
        int keep = 0;
        for (int k = 0; k < t->taps; k++)
            if (t->w[o * t->taps + k] != 0.0f)
                keep = k;
        t->idx[o] = t->idx[o * t->taps + keep];
        t->w[o] = t->w[o * t->taps + keep];
    }
    t->taps = 1;
}

static void resize_row(void *ctx, size_t row) {
    const resize_job *j = ctx;
    int last = j->rank - 1;
    int64_t o[NNF_MAX_RANK];
    size_t r = row;
    for (int a = last - 1; a >= 0; a--) {
        o[a] = (int64_t)(r % (size_t)j->out[a]);
        r /= (size_t)j->out[a];
    }
    float *y = j->y + (int64_t)row * j->out[last];
    int outside = 0;
    for (int a = 0; a < last; a++)
        outside |= j->ax[a].outside[o[a]];
    if (outside) {
        for (int64_t k = 0; k < j->out[last]; k++)
            y[k] = j->extrapolation;
        return;
    }
    /* offsets and weights of every combination of the outer axes' taps */
    int64_t off[MAX_OUTER_COMBOS];
    float wt[MAX_OUTER_COMBOS];
    int n = 1;
    off[0] = 0;
    wt[0] = 1.0f;
    for (int a = 0; a < last; a++) {
        const axis_taps *t = &j->ax[a];
        for (int c = n - 1; c >= 0; c--)
            for (int k = t->taps - 1; k >= 0; k--) {
                off[c * t->taps + k] = off[c] + t->idx[o[a] * t->taps + k];
                wt[c * t->taps + k] = wt[c] * t->w[o[a] * t->taps + k];
            }
        n *= t->taps;
    }
    const axis_taps *t = &j->ax[last];
    for (int64_t k = 0; k < j->out[last]; k++) {
        if (t->outside[k]) {
            y[k] = j->extrapolation;
            continue;
        }
        const int64_t *ix = t->idx + k * t->taps;
        const float *iw = t->w + k * t->taps;
        float acc = 0.0f;
        for (int c = 0; c < n; c++) {
            const float *xs = j->x + off[c];
            float s = 0.0f;
            for (int q = 0; q < t->taps; q++)
                s += iw[q] * xs[ix[q]];
            acc += wt[c] * s;
        }
        y[k] = acc;
    }
}

static nnf_resize_arg arg_from_buf(const nnf_node *node, nnf_buf *const *in, int idx) {
    nnf_resize_arg a = {0};
    if (idx < 0 || idx >= node->n_inputs || !in[idx])
        return a;
    a.present = in[idx]->numel > 0;
    a.known = 1;
    a.dtype = in[idx]->dtype;
    a.count = (int64_t)in[idx]->numel;
    a.data = in[idx]->data;
    return a;
}

static nnf_status resize_run(NNF_KERNEL_ARGS) {
    const nnf_resize_params *p = node->params;
    const nnf_buf *x = in[0], *y = out[0];
    resize_job j = {.rank = x->rank, .extrapolation = p->extrapolation_value, .x = x->data, .y = y->data};
    void *mem = NULL;
    nnf_status st = NNF_OK;
    if (x->dtype != NNF_DTYPE_FLOAT32) {
        st = nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input has dtype %s; the kernel takes float32",
                            nnf_dtype_name(x->dtype));
        goto fail;
    }
    nnf_resize_arg roi = arg_from_buf(node, in, p->roi_input), scales = arg_from_buf(node, in, p->scales_input),
                   sizes = arg_from_buf(node, in, p->sizes_input);
    int64_t od[NNF_MAX_RANK];
    float sc[NNF_MAX_RANK], r[2 * NNF_MAX_RANK];
    if (x->rank < 1 || y->rank != x->rank) {
        st = nnf_node_error(node, NNF_ERR_SHAPE, "output rank differs from the input's");
        goto fail;
    }
    if ((st = nnf_resize_resolve(node, p, x->rank, x->dims, &roi, &scales, &sizes, od, sc, r)) != NNF_OK)
        goto fail;
    int taps = p->mode == NNF_RESIZE_NEAREST ? 1 : p->mode == NNF_RESIZE_LINEAR ? 2 : 4;
    size_t total = 0;
    for (int a = 0; a < x->rank; a++) {
        if (od[a] != y->dims[a]) {
            st = nnf_node_error(node, NNF_ERR_SHAPE, "output extent %lld on axis %d, expected %lld",
                                (long long)y->dims[a], a, (long long)od[a]);
            goto fail;
        }
        if (x->dims[a] == 0 && od[a] > 0) {
            st = nnf_node_error(node, NNF_ERR_SHAPE, "cannot resize an empty axis %d", a);
            goto fail;
        }
        j.out[a] = od[a];
        total += (size_t)od[a] * (size_t)taps * (sizeof(int64_t) + sizeof(float)) + (size_t)od[a];
    }
    if (y->numel == 0)
        goto fail; /* nothing to compute; st is NNF_OK */
    mem = nnf_malloc(total + 16);
    if (!mem) {
        st = nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for resize taps");
        goto fail;
    }
    /* carve: all int64 arrays, then floats, then bytes, keeping alignment */
    char *cur = mem;
    for (int a = 0; a < x->rank; a++) {
        j.ax[a].taps = taps;
        j.ax[a].idx = (int64_t *)cur;
        cur += (size_t)od[a] * (size_t)taps * sizeof(int64_t);
    }
    for (int a = 0; a < x->rank; a++) {
        j.ax[a].w = (float *)cur;
        cur += (size_t)od[a] * (size_t)taps * sizeof(float);
    }
    for (int a = 0; a < x->rank; a++) {
        j.ax[a].outside = (uint8_t *)cur;
        cur += (size_t)od[a];
    }
    int64_t stride = 1;
    for (int a = x->rank - 1; a >= 0; a--) {
        axis_fill(p, &j.ax[a], x->dims[a], od[a], sc[a], r[a], r[x->rank + a], stride);
        stride *= x->dims[a];
    }
    int combos = 1;
    for (int a = 0; a < x->rank - 1; a++)
        combos *= j.ax[a].taps;
    if (combos > MAX_OUTER_COMBOS) {
        st = nnf_node_error(node, NNF_ERR_UNSUPPORTED, "interpolating along more than %d axes at once",
                            p->mode == NNF_RESIZE_CUBIC ? 5 : 9);
        goto fail;
    }
    nnf_parallel_for(ctx->pool, y->numel / (size_t)od[x->rank - 1], resize_row, &j);
fail:
    nnf_free(mem);
    return st;
}

nnf_status nnf_resize_ref(NNF_KERNEL_ARGS) { return resize_run(node, in, out, ctx); }

/* ---- DepthToSpace / SpaceToDepth ------------------------------------------ */

/* Copy between the (N, C, H, W) tensor `space` and the (N, C*b*b, H/b, W/b)
 * tensor `depth`, in either direction. */
static nnf_status space_depth_run(const nnf_node *node, nnf_buf *const *in, nnf_buf *const *out, int to_space) {
    const nnf_space_depth_params *p = node->params;
    const nnf_buf *x = in[0], *y = out[0];
    const nnf_buf *space = to_space ? y : x, *depth = to_space ? x : y;
    size_t es = nnf_dtype_size(x->dtype);
    if (!es || x->dtype != y->dtype || x->rank != 4 || y->rank != 4 || x->numel != y->numel)
        return nnf_node_error(node, NNF_ERR_SHAPE, "input and output must be rank-4 tensors of one dtype and size");
    int64_t bs = p->blocksize, n = space->dims[0], c = space->dims[1], h = depth->dims[2], w = depth->dims[3];
    if (depth->dims[1] != c * bs * bs || space->dims[2] != h * bs || space->dims[3] != w * bs)
        return nnf_node_error(node, NNF_ERR_SHAPE, "shapes do not match blocksize %lld", (long long)bs);
    const char *src = x->data;
    char *dst = y->data;
    /* row by row of the space tensor (bs depth rows interleaved into it),
     * each element a fixed-size copy */
    for (int64_t b = 0; b < n; b++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t hh = 0; hh < h; hh++)
                for (int64_t i = 0; i < bs; i++) {
                    int64_t srow = ((b * c + ch) * h * bs + hh * bs + i) * w * bs;
                    for (int64_t jj = 0; jj < bs; jj++) {
                        int64_t dc = p->crd ? (ch * bs + i) * bs + jj : (i * bs + jj) * c + ch;
                        int64_t drow = ((b * c * bs * bs + dc) * h + hh) * w;
                        for (int64_t ww = 0; ww < w; ww++) {
                            int64_t si = srow + ww * bs + jj, di = drow + ww;
                            int64_t from = to_space ? di : si, to = to_space ? si : di;
                            if (es == 4)
                                memcpy(dst + (size_t)to * 4, src + (size_t)from * 4, 4);
                            else
                                memcpy(dst + (size_t)to * es, src + (size_t)from * es, es);
                        }
                    }
                }
    return NNF_OK;
}

nnf_status nnf_depth_to_space_ref(NNF_KERNEL_ARGS) { return space_depth_run(node, in, out, 1); }
nnf_status nnf_space_to_depth_ref(NNF_KERNEL_ARGS) { return space_depth_run(node, in, out, 0); }

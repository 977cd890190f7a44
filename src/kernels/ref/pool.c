/* Reference pools, float32, NCHW with 1-3 spatial axes handled as 3-D
 * (missing leading axes get extent 1). For each output element the taps that
 * fall inside the input are computed per axis once, so the window loops have
 * no bounds tests. Work is split over (batch, channel) planes. */
#include "ops/conv.h"

#include <math.h>
#include <string.h>

typedef enum pool_kind { POOL_MAX, POOL_AVG, POOL_LP } pool_kind;

typedef struct pool_job {
    pool_kind kind;
    const nnf_conv_params *p;
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3], pe[3];
    int64_t in_size, out_size;
    const float *x;
    float *y;
    int64_t *indices; /* MaxPool's optional second output */
} pool_job;

/* Taps k in [lo, hi) of a window starting at `start` (stride d) inside [0, in). */
static void window_taps(int64_t start, int64_t k, int64_t d, int64_t in, int64_t *lo, int64_t *hi) {
    int64_t a = start >= 0 ? 0 : (-start + d - 1) / d;
    int64_t b = in - 1 - start < 0 ? 0 : (in - 1 - start) / d + 1;
    if (b > k)
        b = k;
    if (a > b)
        a = b;
    *lo = a;
    *hi = b;
}

/* Taps of the window inside [-pad_begin, in + pad_end): what count_include_pad counts. */
static int64_t padded_taps(int64_t start, int64_t k, int64_t d, int64_t in, int64_t pb, int64_t pe) {
    int64_t lo, hi;
    window_taps(start + pb, k, d, in + pb + pe, &lo, &hi);
    return hi - lo;
}

/* Flat index of input (ih axes) for MaxPool's Indices: row-major, or with
 * storage_order 1 the first spatial axis fastest. `lead` axes are padding. */
static int64_t flat_index(const pool_job *j, int64_t plane, int64_t i0, int64_t i1, int64_t i2) {
    if (!j->p->storage_order)
        return plane * j->in_size + (i0 * j->in[1] + i1) * j->in[2] + i2;
    int lead = 3 - j->p->spatial;
    int64_t idx[3] = {i0, i1, i2}, off = 0, mul = 1;
    for (int a = lead; a < 3; a++) {
        off += idx[a] * mul;
        mul *= j->in[a];
    }
    return plane * j->in_size + off;
}

static void pool_plane(void *ctx, size_t plane) {
    const pool_job *j = ctx;
    const float *x = j->x + (int64_t)plane * j->in_size;
    float *y = j->y + (int64_t)plane * j->out_size;
    int64_t *ind = j->indices ? j->indices + (int64_t)plane * j->out_size : NULL;
    for (int64_t od = 0; od < j->out[0]; od++) {
        int64_t sd = od * j->s[0] - j->pb[0], d0, d1;
        window_taps(sd, j->k[0], j->d[0], j->in[0], &d0, &d1);
        for (int64_t oh = 0; oh < j->out[1]; oh++) {
            int64_t sh = oh * j->s[1] - j->pb[1], h0, h1;
            window_taps(sh, j->k[1], j->d[1], j->in[1], &h0, &h1);
            for (int64_t ow = 0; ow < j->out[2]; ow++) {
                int64_t sw = ow * j->s[2] - j->pb[2], w0, w1;
                window_taps(sw, j->k[2], j->d[2], j->in[2], &w0, &w1);
                float acc = j->kind == POOL_MAX ? -INFINITY : 0.0f;
                int64_t best = -1;
                for (int64_t kd = d0; kd < d1; kd++) {
                    int64_t id = sd + kd * j->d[0];
                    for (int64_t kh = h0; kh < h1; kh++) {
                        int64_t ih = sh + kh * j->d[1];
                        const float *row = x + (id * j->in[1] + ih) * j->in[2];
                        for (int64_t kw = w0; kw < w1; kw++) {
                            int64_t iw = sw + kw * j->d[2];
                            float v = row[iw];
                            if (j->kind == POOL_MAX) {
                                if (v > acc || best < 0) {
                                    acc = v;
                                    best = flat_index(j, (int64_t)plane, id, ih, iw);
                                }
                            } else if (j->kind == POOL_AVG) {
                                acc += v;
                            } else {
                                acc += powf(fabsf(v), (float)j->p->p);
                            }
                        }
                    }
                }
                int64_t o = (od * j->out[1] + oh) * j->out[2] + ow;
                if (j->kind == POOL_AVG) {
                    int64_t count = j->p->count_include_pad
                                        ? padded_taps(sd, j->k[0], j->d[0], j->in[0], j->pb[0], j->pe[0]) *
                                              padded_taps(sh, j->k[1], j->d[1], j->in[1], j->pb[1], j->pe[1]) *
                                              padded_taps(sw, j->k[2], j->d[2], j->in[2], j->pb[2], j->pe[2])
                                        : (d1 - d0) * (h1 - h0) * (w1 - w0);
                    acc = count > 0 ? acc / (float)count : 0.0f;
                } else if (j->kind == POOL_LP) {
                    acc = powf(acc, 1.0f / (float)j->p->p);
                }
                y[o] = acc;
                if (ind)
                    ind[o] = best;
            }
        }
    }
}

static nnf_status pool_run(const nnf_node *node, nnf_buf *const *in, nnf_buf *const *out, nnf_kctx *ctx,
                           pool_kind kind) {
    const nnf_conv_params *p = node->params;
    const nnf_buf *x = in[0], *y = out[0];
    if (x->dtype != NNF_DTYPE_FLOAT32)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input has dtype %s; the kernel takes float32",
                              nnf_dtype_name(x->dtype));
    if (x->rank != p->spatial + 2 || y->rank != x->rank || y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1])
        return nnf_node_error(node, NNF_ERR_SHAPE, "input and output shapes do not match the attributes");
    pool_job j = {.kind = kind, .p = p, .x = x->data, .y = y->data};
    if (kind == POOL_MAX && node->n_outputs > 1 && out[1]) {
        if (out[1]->dtype != NNF_DTYPE_INT64 || out[1]->numel != y->numel)
            return nnf_node_error(node, NNF_ERR_SHAPE, "Indices output must be int64 shaped like Y");
        j.indices = out[1]->data;
    }
    int64_t pb[NNF_MAX_SPATIAL], pe[NNF_MAX_SPATIAL], expect[NNF_MAX_SPATIAL];
    NNF_CHECK(nnf_conv_resolve_pads(p, x->dims + 2, pb, pe));
    NNF_CHECK(nnf_conv_out_spatial(node, p, x->dims + 2, pb, pe, expect));
    int lead = 3 - p->spatial;
    j.in_size = j.out_size = 1;
    for (int a = 0; a < 3; a++) {
        int i = a - lead;
        if (i >= 0 && expect[i] != y->dims[2 + i])
            return nnf_node_error(node, NNF_ERR_SHAPE, "output extent %lld on spatial axis %d, expected %lld",
                                  (long long)y->dims[2 + i], i, (long long)expect[i]);
        j.in[a] = i >= 0 ? x->dims[2 + i] : 1;
        j.out[a] = i >= 0 ? y->dims[2 + i] : 1;
        j.k[a] = i >= 0 ? p->kernel[i] : 1;
        j.s[a] = i >= 0 ? p->strides[i] : 1;
        j.d[a] = i >= 0 ? p->dilations[i] : 1;
        j.pb[a] = i >= 0 ? pb[i] : 0;
        j.pe[a] = i >= 0 ? pe[i] : 0;
        j.in_size *= j.in[a];
        j.out_size *= j.out[a];
    }
    nnf_parallel_for(ctx->pool, (size_t)(x->dims[0] * x->dims[1]), pool_plane, &j);
    return NNF_OK;
}

nnf_status nnf_maxpool_ref(NNF_KERNEL_ARGS) { return pool_run(node, in, out, ctx, POOL_MAX); }
nnf_status nnf_avgpool_ref(NNF_KERNEL_ARGS) { return pool_run(node, in, out, ctx, POOL_AVG); }
nnf_status nnf_lppool_ref(NNF_KERNEL_ARGS) { return pool_run(node, in, out, ctx, POOL_LP); }

/* ---- global pools -------------------------------------------------------- */

typedef struct global_job {
    pool_kind kind;
    int64_t p;
    size_t plane;
    const float *x;
    float *y;
} global_job;

static void global_plane(void *ctx, size_t i) {
    const global_job *j = ctx;
    const float *x = j->x + i * j->plane;
    if (j->kind == POOL_MAX) {
        float m = -INFINITY;
        for (size_t k = 0; k < j->plane; k++)
            m = x[k] > m ? x[k] : m;
        j->y[i] = m;
        return;
    }
    /* double accumulation: a 7x7 plane is small, a 1-D audio plane is not */
    double acc = 0.0;
    if (j->kind == POOL_AVG)
        for (size_t k = 0; k < j->plane; k++)
            acc += x[k];
    else if (j->p == 1)
        for (size_t k = 0; k < j->plane; k++)
            acc += fabs((double)x[k]);
    else if (j->p == 2)
        for (size_t k = 0; k < j->plane; k++)
            acc += (double)x[k] * x[k];
    else
        for (size_t k = 0; k < j->plane; k++)
            acc += pow(fabs((double)x[k]), (double)j->p);
    if (j->kind == POOL_AVG)
        j->y[i] = j->plane ? (float)(acc / (double)j->plane) : 0.0f;
    else
        j->y[i] = (float)pow(acc, 1.0 / (double)j->p);
}

static nnf_status global_run(const nnf_node *node, nnf_buf *const *in, nnf_buf *const *out, nnf_kctx *ctx,
                             pool_kind kind) {
    const nnf_buf *x = in[0], *y = out[0];
    if (x->dtype != NNF_DTYPE_FLOAT32)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input has dtype %s; the kernel takes float32",
                              nnf_dtype_name(x->dtype));
    if (x->rank < 2)
        return nnf_node_error(node, NNF_ERR_SHAPE, "input needs rank >= 2");
    size_t planes = (size_t)(x->dims[0] * x->dims[1]);
    if (y->numel != planes)
        return nnf_node_error(node, NNF_ERR_SHAPE, "output must hold one value per (N, C)");
    if (kind == POOL_MAX && planes && x->numel == 0)
        return nnf_node_error(node, NNF_ERR_SHAPE, "GlobalMaxPool of an empty plane");
    const nnf_conv_params *p = node->params;
    global_job j = {.kind = kind, .p = p ? p->p : 2, .plane = planes ? x->numel / planes : 0,
                    .x = x->data, .y = y->data};
    nnf_parallel_for(ctx->pool, planes, global_plane, &j);
    return NNF_OK;
}

nnf_status nnf_global_maxpool_ref(NNF_KERNEL_ARGS) { return global_run(node, in, out, ctx, POOL_MAX); }
nnf_status nnf_global_avgpool_ref(NNF_KERNEL_ARGS) { return global_run(node, in, out, ctx, POOL_AVG); }
nnf_status nnf_global_lppool_ref(NNF_KERNEL_ARGS) { return global_run(node, in, out, ctx, POOL_LP); }

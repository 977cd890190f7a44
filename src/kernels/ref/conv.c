/* Reference Conv and ConvTranspose, float32, NCHW (1-3 spatial axes).
 *
 * Every rank is handled as 3-D by giving missing leading spatial axes extent
 * 1. Conv accumulates one output plane at a time: for each input channel and
 * kernel tap, the rows of the output that the tap reaches get
 * out[ow] += w * in[ow*stride + offset] over the precomputed range of ow whose
 * input lies inside the image, so the inner loop has no branches and
 * vectorises when stride is 1. Work is split over (batch, output channel)
 * planes, which keeps results independent of the thread count. */
#include "kernels/ref/activation.h"
#include "kernels/ref/axpy.h"
#include "ops/conv.h"

#include <string.h>

typedef struct conv_geom {
    int64_t n, c, m, group, cg, mg; /* cg/mg: input/output channels per group */
    int64_t in[3], out[3], k[3], s[3], d[3], pb[3];
    int64_t in_size, out_size, k_size; /* elements per plane / filter */
} conv_geom;

typedef struct conv_job {
    conv_geom g;
    const float *x, *w, *b, *res;
    float *y;
    const nnf_activation *act;
    int res_after; /* the residual after the activation */
} conv_job;

/* Output positions o in [0, out) whose tap o*s + off lands in [0, in). */
static void tap_range(int64_t out, int64_t in, int64_t s, int64_t off, int64_t *lo, int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = in - 1 - off < 0 ? 0 : (in - 1 - off) / s + 1;
    if (b > out)
        b = out;
    if (a > b)
        a = b;
    *lo = a;
    *hi = b;
}


static void epilogue(float *y, int64_t count, const float *res, int res_after,
                     const nnf_activation *act) {
    if (res && !res_after)
        for (int64_t i = 0; i < count; i++)
            y[i] += res[i];
    if (act && act->kind != NNF_ACT_NONE)
        for (int64_t i = 0; i < count; i++)
            y[i] = nnf_act_apply(act, y[i]);
    if (res && res_after)
        for (int64_t i = 0; i < count; i++)
            y[i] += res[i];
}

static void conv_plane(void *ctx, size_t idx) {
    const conv_job *j = ctx;
    const conv_geom *g = &j->g;
    int64_t n = (int64_t)idx / g->m, m = (int64_t)idx % g->m, grp = m / g->mg;
    float *y = j->y + (int64_t)idx * g->out_size;
    float bias = j->b ? j->b[m] : 0.0f;
    for (int64_t i = 0; i < g->out_size; i++)
        y[i] = bias;
    int pointwise = 1;
    for (int a = 0; a < 3; a++)
        pointwise &= g->k[a] == 1 && g->s[a] == 1 && g->pb[a] == 0 && g->in[a] == g->out[a];
    for (int64_t c = 0; c < g->cg; c++) {
        const float *x = j->x + ((n * g->c) + grp * g->cg + c) * g->in_size;
        const float *w = j->w + (m * g->cg + c) * g->k_size;
        if (pointwise) {
            axpy(g->out_size, w[0], x, y);
            continue;
        }
        for (int64_t kd = 0; kd < g->k[0]; kd++) {
            int64_t offd = kd * g->d[0] - g->pb[0], d0, d1;
            tap_range(g->out[0], g->in[0], g->s[0], offd, &d0, &d1);
            for (int64_t kh = 0; kh < g->k[1]; kh++) {
                int64_t offh = kh * g->d[1] - g->pb[1], h0, h1;
                tap_range(g->out[1], g->in[1], g->s[1], offh, &h0, &h1);
                for (int64_t kw = 0; kw < g->k[2]; kw++) {
                    int64_t offw = kw * g->d[2] - g->pb[2], w0, w1;
                    tap_range(g->out[2], g->in[2], g->s[2], offw, &w0, &w1);
                    float wv = w[(kd * g->k[1] + kh) * g->k[2] + kw];
                    if (w0 >= w1)
                        continue;
                    for (int64_t od = d0; od < d1; od++) {
                        int64_t id = od * g->s[0] + offd;
                        for (int64_t oh = h0; oh < h1; oh++) {
                            int64_t ih = oh * g->s[1] + offh;
                            const float *xr = x + (id * g->in[1] + ih) * g->in[2] + w0 * g->s[2] + offw;
                            float *yr = y + (od * g->out[1] + oh) * g->out[2] + w0;
                            if (g->s[2] == 1)
                                axpy(w1 - w0, wv, xr, yr);
                            else
                                axpy_strided(w1 - w0, wv, xr, g->s[2], yr);
                        }
                    }
                }
            }
        }
    }
    epilogue(y, g->out_size, j->res ? j->res + (int64_t)idx * g->out_size : NULL, j->res_after,
             j->act);
}

/* Fill the 3-D geometry from the buffers; missing leading axes get extent 1. */
static void geom_spatial(conv_geom *g, const nnf_conv_params *p, const nnf_buf *x, const nnf_buf *y,
                         const int64_t *pb) {
    int sp = x->rank - 2, lead = 3 - sp;
    g->in_size = g->out_size = g->k_size = 1;
    for (int a = 0; a < 3; a++) {
        int i = a - lead;
        g->in[a] = i >= 0 ? x->dims[2 + i] : 1;
        g->out[a] = i >= 0 ? y->dims[2 + i] : 1;
        g->k[a] = i >= 0 ? p->kernel[i] : 1;
        g->s[a] = i >= 0 ? p->strides[i] : 1;
        g->d[a] = i >= 0 ? p->dilations[i] : 1;
        g->pb[a] = i >= 0 ? pb[i] : 0;
        g->in_size *= g->in[a];
        g->out_size *= g->out[a];
        g->k_size *= g->k[a];
    }
}

static nnf_status check_f32(const nnf_node *node, nnf_buf *const *in, int n) {
    for (int i = 0; i < n; i++)
        if (i < node->n_inputs && in[i] && in[i]->dtype != NNF_DTYPE_FLOAT32)
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input %d has dtype %s; the kernel takes float32",
                                  i, nnf_dtype_name(in[i]->dtype));
    return NNF_OK;
}

nnf_status nnf_conv_ref(NNF_KERNEL_ARGS) {
    const nnf_conv_params *node_params = node->params, *p = node_params;
    const nnf_buf *x = in[0], *w = in[1], *b = node->n_inputs > 2 ? in[2] : NULL, *y = out[0];
    NNF_CHECK(check_f32(node, in, 3));
    if (x->rank < 3 || x->rank - 2 > NNF_MAX_SPATIAL || w->rank != x->rank || y->rank != x->rank ||
        (p->spatial && p->spatial != x->rank - 2))
        return nnf_node_error(node, NNF_ERR_SHAPE, "input, weight and output ranks do not match the attributes");
    nnf_conv_params lp = nnf_conv_effective(node_params, x->rank, w->dims);
    p = &lp;
    conv_job j = {.x = x->data, .w = w->data, .b = b ? b->data : NULL, .y = y->data, .act = &p->act};
    conv_geom *g = &j.g;
    g->n = x->dims[0];
    g->c = x->dims[1];
    g->m = w->dims[0];
    g->group = p->group;
    g->cg = w->dims[1];
    g->mg = g->m / p->group;
    if (g->cg * p->group != g->c || g->mg * p->group != g->m || y->dims[1] != g->m || y->dims[0] != g->n)
        return nnf_node_error(node, NNF_ERR_SHAPE, "channel counts do not match the weight and group");
    int64_t in_sp[NNF_MAX_SPATIAL], pb[NNF_MAX_SPATIAL], pe[NNF_MAX_SPATIAL];
    for (int i = 0; i < p->spatial; i++)
        in_sp[i] = x->dims[2 + i];
    NNF_CHECK(nnf_conv_resolve_pads(p, in_sp, pb, pe));
    geom_spatial(g, p, x, y, pb);
    if (p->residual_input >= 0) {
        const nnf_buf *r = p->residual_input < node->n_inputs ? in[p->residual_input] : NULL;
        if (!r || r->dtype != NNF_DTYPE_FLOAT32 || r->numel != y->numel)
            return nnf_node_error(node, NNF_ERR_SHAPE, "fused residual input must be float32 shaped like the output");
        j.res = r->data;
        j.res_after = p->residual_after_act;
    }
    if (b && (b->numel != (size_t)g->m))
        return nnf_node_error(node, NNF_ERR_SHAPE, "bias has %zu elements for %lld output channels", b->numel,
                              (long long)g->m);
    nnf_parallel_for(ctx->pool, (size_t)(g->n * g->m), conv_plane, &j);
    return NNF_OK;
}

/* ---- ConvTranspose ------------------------------------------------------- */

/* Output positions o = i*s + off for input i in [lo, hi) that land in [0, out). */
static void scatter_range(int64_t in, int64_t out, int64_t s, int64_t off, int64_t *lo, int64_t *hi) {
    /* i >= ceil(-off/s), i <= floor((out-1-off)/s) */
    tap_range(in, out, s, off, lo, hi);
}

static void axpy_scatter(int64_t n, float a, const float *restrict x, float *restrict y, int64_t sy) {
    for (int64_t i = 0; i < n; i++)
        y[i * sy] += a * x[i];
}

static void conv_transpose_plane(void *ctx, size_t idx) {
    const conv_job *j = ctx;
    const conv_geom *g = &j->g;
    /* here cg = input channels per group, mg = output channels per group */
    int64_t n = (int64_t)idx / g->m, m = (int64_t)idx % g->m, grp = m / g->mg, ml = m % g->mg;
    float *y = j->y + (int64_t)idx * g->out_size;
    float bias = j->b ? j->b[m] : 0.0f;
    for (int64_t i = 0; i < g->out_size; i++)
        y[i] = bias;
    for (int64_t c = 0; c < g->cg; c++) {
        int64_t ci = grp * g->cg + c;
        const float *x = j->x + (n * g->c + ci) * g->in_size;
        const float *w = j->w + (ci * g->mg + ml) * g->k_size;
        for (int64_t kd = 0; kd < g->k[0]; kd++) {
            int64_t offd = kd * g->d[0] - g->pb[0], d0, d1;
            scatter_range(g->in[0], g->out[0], g->s[0], offd, &d0, &d1);
            for (int64_t kh = 0; kh < g->k[1]; kh++) {
                int64_t offh = kh * g->d[1] - g->pb[1], h0, h1;
                scatter_range(g->in[1], g->out[1], g->s[1], offh, &h0, &h1);
                for (int64_t kw = 0; kw < g->k[2]; kw++) {
                    int64_t offw = kw * g->d[2] - g->pb[2], w0, w1;
                    scatter_range(g->in[2], g->out[2], g->s[2], offw, &w0, &w1);
                    float wv = w[(kd * g->k[1] + kh) * g->k[2] + kw];
                    if (w0 >= w1)
                        continue;
                    for (int64_t id = d0; id < d1; id++) {
                        int64_t od = id * g->s[0] + offd;
                        for (int64_t ih = h0; ih < h1; ih++) {
                            int64_t oh = ih * g->s[1] + offh;
                            const float *xr = x + (id * g->in[1] + ih) * g->in[2] + w0;
                            float *yr = y + (od * g->out[1] + oh) * g->out[2] + w0 * g->s[2] + offw;
                            axpy_scatter(w1 - w0, wv, xr, yr, g->s[2]);
                        }
                    }
                }
            }
        }
    }
    epilogue(y, g->out_size, NULL, 0, j->act); /* a fused activation (fuse_activation) */
}

nnf_status nnf_conv_transpose_ref(NNF_KERNEL_ARGS) {
    const nnf_conv_params *node_params = node->params, *p = node_params;
    const nnf_buf *x = in[0], *w = in[1], *b = node->n_inputs > 2 ? in[2] : NULL, *y = out[0];
    NNF_CHECK(check_f32(node, in, 3));
    if (x->rank < 3 || x->rank - 2 > NNF_MAX_SPATIAL || w->rank != x->rank || y->rank != x->rank ||
        (p->spatial && p->spatial != x->rank - 2))
        return nnf_node_error(node, NNF_ERR_SHAPE, "input, weight and output ranks do not match the attributes");
    nnf_conv_params lp = nnf_conv_effective(node_params, x->rank, w->dims);
    p = &lp;
    conv_job j = {
        .x = x->data, .w = w->data, .b = b ? b->data : NULL, .y = y->data, .act = &p->act};
    conv_geom *g = &j.g;
    g->n = x->dims[0];
    g->c = x->dims[1];
    g->group = p->group;
    g->cg = g->c / p->group;
    g->mg = w->dims[1];
    g->m = g->mg * p->group;
    if (w->dims[0] != g->c || g->cg * p->group != g->c || y->dims[1] != g->m || y->dims[0] != g->n)
        return nnf_node_error(node, NNF_ERR_SHAPE, "channel counts do not match the weight and group");
    if (b && b->numel != (size_t)g->m)
        return nnf_node_error(node, NNF_ERR_SHAPE, "bias has %zu elements for %lld output channels", b->numel,
                              (long long)g->m);
    int64_t in_sp[NNF_MAX_SPATIAL], pb[NNF_MAX_SPATIAL], pe[NNF_MAX_SPATIAL], o[NNF_MAX_SPATIAL];
    for (int i = 0; i < p->spatial; i++)
        in_sp[i] = x->dims[2 + i];
    NNF_CHECK(nnf_conv_transpose_resolve(node, p, in_sp, pb, pe, o));
    for (int i = 0; i < p->spatial; i++)
        if (o[i] != y->dims[2 + i])
            return nnf_node_error(node, NNF_ERR_SHAPE, "output extent %lld on spatial axis %d, expected %lld",
                                  (long long)y->dims[2 + i], i, (long long)o[i]);
    geom_spatial(g, p, x, y, pb);
    nnf_parallel_for(ctx->pool, (size_t)(g->n * g->m), conv_transpose_plane, &j);
    return NNF_OK;
}

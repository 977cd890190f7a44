/* Plans for 1-D, 2-D and 3-D MaxPool/AveragePool (NCW / NCHW / NCDHW, any
 * kernel, stride, dilation, padding, ceil_mode; MaxPool without the Indices
 * output) and for GlobalAveragePool/GlobalMaxPool. A 1-D pool is a 2-D one
 * of one row, a 2-D pool a 3-D one of depth 1. Each output row splits into
 * border columns, whose windows cross the padding and are computed one by
 * one as the reference does, and an interior span that the tier's
 * pool_span kernel vectorises. Results equal the reference's bit for bit. */
#include "kernels/eltwise_fast.h"

#include "base/alloc.h"
#include "ops/conv.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define GRAIN_FLOATS 16384

typedef struct pool_state {
    const nnf_ew_kernels *k;
    int is_max, include_pad;
    int64_t h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
    int64_t d, od, kd, sd, dd, pf, pk; /* depth (1 below 3-D); pf, pk: front and back pads */
    size_t planes;
    /* separable stride-1 MaxPool: output rows per strip, strips per plane */
    int sep;
    size_t strip, nstrip;
    void (*rowmax)(const float *xp, size_t n, size_t kw, size_t sw, float *rm);
    void (*colmax)(const float *const *rows, size_t nrows, const float *row, size_t lead, size_t sw,
                   size_t w, float *y, size_t n);
    char name[48];
} pool_state;

/* Taps [lo, hi) of a window starting at `start` (spacing d) inside [0, in): as ref/pool.c. */
static void taps(int64_t start, int64_t k, int64_t d, int64_t in, int64_t *lo, int64_t *hi) {
    int64_t a = start >= 0 ? 0 : (-start + d - 1) / d;
    int64_t b = in - 1 - start < 0 ? 0 : (in - 1 - start) / d + 1;
    if (b > k)
        b = k;
    if (a > b)
        a = b;
    *lo = a;
    *hi = b;
}

static int64_t padded_taps(int64_t start, int64_t k, int64_t d, int64_t in, int64_t pb,
                           int64_t pe) {
    int64_t lo, hi;
    taps(start + pb, k, d, in + pb + pe, &lo, &hi);
    return hi - lo;
}

/* The taps of one output depth: [d0, d1), and what count_include_pad counts. */
typedef struct depth_taps {
    int64_t z0, d0, d1, count;
} depth_taps;

/* One output whose window crosses the W padding: the reference's loop. */
static float border(const pool_state *s, const float *plane, const depth_taps *dt, int64_t y0,
                    int64_t h0, int64_t h1, int64_t count_h, int64_t ow) {
    int64_t x0 = ow * s->sw - s->pl, w0, w1;
    taps(x0, s->kw, s->dw, s->w, &w0, &w1);
    float acc = s->is_max ? -INFINITY : 0.0f;
    int first = 1;
    for (int64_t z = dt->d0; z < dt->d1; z++)
        for (int64_t i = h0; i < h1; i++) {
            const float *row = plane + ((dt->z0 + z * s->dd) * s->h + y0 + i * s->dh) * s->w;
            for (int64_t k = w0; k < w1; k++)
                acc = nnf_pool_tap(s->is_max, acc, row[x0 + k * s->dw], &first);
        }
    if (s->is_max)
        return acc;
    int64_t count = s->include_pad
                        ? dt->count * count_h * padded_taps(x0, s->kw, s->dw, s->w, s->pl, s->pr)
                        : (dt->d1 - dt->d0) * (h1 - h0) * (w1 - w0);
    return count > 0 ? acc / (float)count : 0.0f;
}

typedef struct pool_job {
    const pool_state *s;
    const float *x;
    float *y;
    int64_t lo, hi; /* interior output columns */
} pool_job;

/* Output rows (plane, output depth, output row). */
static void pool_rows(void *p, size_t first, size_t count) {
    const pool_job *j = p;
    const pool_state *s = j->s;
    size_t rows_plane = (size_t)(s->od * s->oh);
    for (size_t r = first; r < first + count; r++) {
        size_t plane = r / rows_plane;
        int64_t od = (int64_t)(r % rows_plane) / s->oh, oh = (int64_t)(r % rows_plane) % s->oh;
        const float *xp = j->x + plane * (size_t)(s->d * s->h * s->w);
        float *y = j->y + r * (size_t)s->ow;
        depth_taps dt = {.z0 = od * s->sd - s->pf};
        taps(dt.z0, s->kd, s->dd, s->d, &dt.d0, &dt.d1);
        dt.count =
            s->include_pad ? padded_taps(dt.z0, s->kd, s->dd, s->d, s->pf, s->pk) : dt.d1 - dt.d0;
        int64_t y0 = oh * s->sh - s->pt, h0, h1;
        taps(y0, s->kh, s->dh, s->h, &h0, &h1);
        int64_t count_h =
            s->include_pad ? padded_taps(y0, s->kh, s->dh, s->h, s->pt, s->pb) : h1 - h0;
        for (int64_t ow = 0; ow < j->lo; ow++)
            y[ow] = border(s, xp, &dt, y0, h0, h1, count_h, ow);
        if (j->hi > j->lo) {
            bool any = h1 > h0 && dt.d1 > dt.d0;
            nnf_pool_span sp = {.is_max = s->is_max,
                                .nd = any ? (size_t)(dt.d1 - dt.d0) : 0,
                                .plane_step = (size_t)(s->dd * s->h * s->w),
                                .nh = any ? (size_t)(h1 - h0) : 0,
                                .row_step = (size_t)(s->dh * s->w),
                                .kw = (size_t)s->kw,
                                .dw = (size_t)s->dw,
                                .stride = (size_t)s->sw,
                                .divisor = (float)(dt.count * count_h * s->kw)};
            const float *x0 =
                xp + (any ? ((dt.z0 + dt.d0 * s->dd) * s->h + y0 + h0 * s->dh) * s->w : 0) +
                j->lo * s->sw - s->pl;
            s->k->pool_span(&sp, x0, y + j->lo, (size_t)(j->hi - j->lo));
        }
        for (int64_t ow = j->hi; ow < s->ow; ow++)
            y[ow] = border(s, xp, &dt, y0, h0, h1, count_h, ow);
    }
}

/* ---- separable MaxPool, W stride 1 or 2 -------------------------------------------- */

/* On the stack: a strip's row maxima (at least kh rows of ow rounded up to
 * 8) and one -inf padded input row. */
#define SEP_RM 4096
#define SEP_ROW NNF_POOL_SEP_ROW
#define SEP_MAX_KH 64

static void rowmax_scalar(const float *xp, size_t n, size_t kw, size_t sw, float *rm) {
    for (size_t o = 0; o < n; o++) {
        float acc = -INFINITY;
        for (size_t k = 0; k < kw; k++)
            acc = xp[o * sw + k] > acc ? xp[o * sw + k] : acc;
        rm[o] = acc;
    }
}

static void colmax_scalar(const float *const *rows, size_t nrows, const float *row, size_t lead,
                          size_t sw, size_t w, float *y, size_t n) {
    for (size_t o = 0; o < n; o++) {
        float acc = rows[0][o];
        for (size_t r = 1; r < nrows; r++)
            acc = rows[r][o] > acc ? rows[r][o] : acc;
        size_t c = o * sw;
        float f = row[c < lead ? 0 : (c - lead < w ? c - lead : w - 1)];
        y[o] = f != f ? f : acc;
    }
}

static size_t round8(size_t n) {
    return (n + 7) & ~(size_t)7;
}

/* Padded row floats the row kernels read: the windows of ow rounded up to
 * 8 outputs, and on stride 2 the even/odd split's reads of 16 more. */
static size_t sep_row_len(const pool_state *s) {
    size_t ow8 = round8((size_t)s->ow), kw = (size_t)s->kw;
    return s->sw == 1 ? ow8 + kw - 1 : 2 * ((ow8 + 7 + kw / 2 + 1 + 7) & ~(size_t)7) + 16;
}

static void sep_units(void *p, size_t first, size_t count) {
    const pool_job *j = p;
    const pool_state *s = j->s;
    float rm[SEP_RM], xp[SEP_ROW];
    const float *rows[SEP_MAX_KH];
    size_t ow = (size_t)s->ow, ow8 = round8(ow), w = (size_t)s->w, pl = (size_t)s->pl,
           sw = (size_t)s->sw;
    size_t len = sep_row_len(s), copy = w < len - pl ? w : len - pl;
    for (size_t i = 0; i < pl; i++)
        xp[i] = -INFINITY;
    for (size_t i = pl + copy; i < len; i++)
        xp[i] = -INFINITY;
    for (size_t u = first; u < first + count; u++) {
        size_t plane = u / s->nstrip, st = u % s->nstrip;
        int64_t oh0 = (int64_t)(st * s->strip), oh1 = oh0 + (int64_t)s->strip;
        if (oh1 > s->oh)
            oh1 = s->oh;
        const float *xplane = j->x + plane * (size_t)(s->h * s->w);
        int64_t r0 = oh0 * s->sh - s->pt, r1 = (oh1 - 1) * s->sh - s->pt + s->kh;
        r0 = r0 < 0 ? 0 : r0;
        r1 = r1 > s->h ? s->h : r1;
        for (int64_t r = r0; r < r1; r++) {
            memcpy(xp + pl, xplane + r * s->w, copy * sizeof(float));
            s->rowmax(xp, ow, (size_t)s->kw, sw, rm + (size_t)(r - r0) * ow8);
        }
        for (int64_t oh = oh0; oh < oh1; oh++) {
            int64_t y0 = oh * s->sh - s->pt, h0 = y0 < 0 ? 0 : y0,
                    h1 = y0 + s->kh > s->h ? s->h : y0 + s->kh;
            for (int64_t r = h0; r < h1; r++)
                rows[r - h0] = rm + (size_t)(r - r0) * ow8;
            s->colmax(rows, (size_t)(h1 - h0), xplane + h0 * s->w, pl, sw, w,
                      j->y + (plane * (size_t)s->oh + (size_t)oh) * ow, ow);
        }
    }
}

/* Every window has a tap along both axes, and a strip's buffers fit. */
static int sep_fits(const pool_state *s) {
    return s->is_max && (s->sw == 1 || s->sw == 2) && s->dw == 1 && s->dh == 1 &&
           s->kh <= SEP_MAX_KH && s->pl < s->kw && s->pt < s->kh &&
           (s->ow - 1) * s->sw - s->pl <= s->w - 1 && (s->oh - 1) * s->sh - s->pt <= s->h - 1 &&
           (int64_t)round8((size_t)s->ow) * s->kh <= SEP_RM && s->ow <= SEP_ROW &&
           sep_row_len(s) <= SEP_ROW;
}

static void sep_setup(pool_state *s) {
    size_t rows = SEP_RM / round8((size_t)s->ow); /* input rows of maxima a strip holds */
    s->strip = (rows - (size_t)s->kh) / (size_t)s->sh + 1;
    if (s->strip > (size_t)s->oh)
        s->strip = (size_t)s->oh;
    s->nstrip = ((size_t)s->oh + s->strip - 1) / s->strip;
    int simd = s->k->isa != NNF_ISA_SCALAR;
    s->rowmax = simd ? nnf_pool_rowmax_avx2 : rowmax_scalar;
    s->colmax = simd ? nnf_pool_colmax_avx2 : colmax_scalar;
    s->sep = 1;
}

static nnf_status pool_run(NNF_KERNEL_ARGS) {
    const pool_state *s = ctx->state;
    const nnf_buf *x = in[0], *y = out[0];
    if (x->dtype != NNF_DTYPE_FLOAT32 || x->numel != s->planes * (size_t)(s->d * s->h * s->w) ||
        y->numel != s->planes * (size_t)(s->od * s->oh * s->ow))
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: shapes do not match the plan", s->name);
    pool_job j = {s, x->data, y->data, 0, 0};
    if (s->sep) {
        size_t units = s->planes * s->nstrip,
               per = s->strip * (size_t)(s->ow * (s->kh + s->kw)); /* compares per unit */
        nnf_ew_parallel_ranges(ctx->pool, units, per >= GRAIN_FLOATS ? 1 : GRAIN_FLOATS / per,
                               sep_units, &j);
        return NNF_OK;
    }
    /* interior: every tap along W inside the input */
    j.lo = (s->pl + s->sw - 1) / s->sw;
    int64_t last = s->w - 1 + s->pl - (s->kw - 1) * s->dw;
    j.hi = last < 0 ? 0 : last / s->sw + 1;
    if (j.lo > s->ow)
        j.lo = s->ow;
    if (j.hi > s->ow)
        j.hi = s->ow;
    if (j.hi < j.lo)
        j.hi = j.lo;
    size_t rows = s->planes * (size_t)(s->od * s->oh),
           per_row = (size_t)(s->ow * s->kd * s->kh * s->kw);
    nnf_ew_parallel_ranges(ctx->pool, rows,
                           per_row >= GRAIN_FLOATS ? 1 : GRAIN_FLOATS / (per_row ? per_row : 1),
                           pool_rows, &j);
    return NNF_OK;
}

static void state_free(void *p) {
    nnf_free(p);
}

static nnf_status plan_pool2d(const nnf_node *node, const nnf_tinfo *in, const nnf_tinfo *out,
                              nnf_kernel_plan *plan, int is_max) {
    const nnf_conv_params *p = node->params;
    const nnf_shape *xs = &in[0].shape, *ys = &out[0].shape;
    /* 1-D pools run as 2-D ones of one row ([N, C, W] is [N, C, 1, W]), 2-D
     * ones as 3-D ones of depth 1 */
    int sp = p ? p->spatial : 0;
    if (!p || sp < 1 || sp > 3 || in[0].dtype != NNF_DTYPE_FLOAT32 || !nnf_shape_known(xs) ||
        !nnf_shape_known(ys) || xs->rank != sp + 2 || ys->rank != sp + 2 ||
        nnf_shape_numel(xs) <= 0 || nnf_shape_numel(ys) <= 0)
        return NNF_OK;
    for (int k = 1; k < node->n_outputs; k++)
        if (out[k].present)
            return NNF_OK; /* MaxPool's Indices */
    for (int i = 0; i < sp; i++)
        if (p->kernel[i] < 1 || p->strides[i] < 1 || p->dilations[i] < 1)
            return NNF_OK;
    int64_t pb[NNF_MAX_SPATIAL], pe[NNF_MAX_SPATIAL];
    if (nnf_conv_resolve_pads(p, xs->dims + 2, pb, pe) != NNF_OK) {
        nnf_error_clear(); /* the reference kernel reports it */
        return NNF_OK;
    }
    pool_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a kernel plan");
    /* axis a of 3 (0 depth, 1 H, 2 W) is spatial axis a - (3 - sp), if any */
    int lead = 3 - sp, ad = 0 - lead, ah = 1 - lead, aw = 2 - lead;
    *s = (pool_state){.k = nnf_ew_kernels_for(nnf_cpu_isa()),
                      .is_max = is_max,
                      .include_pad = p->count_include_pad,
                      .d = ad >= 0 ? xs->dims[2 + ad] : 1,
                      .h = ah >= 0 ? xs->dims[2 + ah] : 1,
                      .w = xs->dims[2 + aw],
                      .od = ad >= 0 ? ys->dims[2 + ad] : 1,
                      .oh = ah >= 0 ? ys->dims[2 + ah] : 1,
                      .ow = ys->dims[2 + aw],
                      .kd = ad >= 0 ? p->kernel[ad] : 1,
                      .kh = ah >= 0 ? p->kernel[ah] : 1,
                      .kw = p->kernel[aw],
                      .sd = ad >= 0 ? p->strides[ad] : 1,
                      .sh = ah >= 0 ? p->strides[ah] : 1,
                      .sw = p->strides[aw],
                      .dd = ad >= 0 ? p->dilations[ad] : 1,
                      .dh = ah >= 0 ? p->dilations[ah] : 1,
                      .dw = p->dilations[aw],
                      .pf = ad >= 0 ? pb[ad] : 0,
                      .pt = ah >= 0 ? pb[ah] : 0,
                      .pl = pb[aw],
                      .pk = ad >= 0 ? pe[ad] : 0,
                      .pb = ah >= 0 ? pe[ah] : 0,
                      .pr = pe[aw],
                      .planes = (size_t)(xs->dims[0] * xs->dims[1])};
    if (sp < 3 && sep_fits(s))
        sep_setup(s);
    const char *sv = s->sep                                      ? "_sep"
                     : s->sw <= 2 && s->k->isa != NNF_ISA_SCALAR ? (s->sw == 1 ? "_s1" : "_s2")
                                                                 : "";
    snprintf(s->name, sizeof s->name, "f32_%s%dd%s_%s", is_max ? "maxpool" : "avgpool", sp, sv,
             s->k->isa == NNF_ISA_AVX512 ? "avx2" : s->k->suffix);
    plan->name = s->name;
    plan->run = pool_run;
    plan->state = s;
    plan->free_state = state_free;
    return NNF_OK;
}

nnf_status nnf_plan_maxpool(NNF_PLAN_ARGS) {
    return plan_pool2d(node, in, out, plan, 1);
}

nnf_status nnf_plan_avgpool(NNF_PLAN_ARGS) {
    return plan_pool2d(node, in, out, plan, 0);
}

/* ---- global pools ------------------------------------------------------------------ */

typedef struct gp_state {
    const nnf_ew_kernels *k;
    int is_max;
    size_t planes, plane;
    char name[48];
} gp_state;

typedef struct gp_job {
    const gp_state *s;
    const float *x;
    float *y;
} gp_job;

static void gp_planes(void *p, size_t first, size_t count) {
    const gp_job *j = p;
    const gp_state *s = j->s;
    for (size_t i = first; i < first + count; i++) {
        const float *x = j->x + i * s->plane;
        j->y[i] = s->is_max ? s->k->max(x, s->plane, 0)
                            : (float)(s->k->sum(x, s->plane, NNF_SUM_X) / (double)s->plane);
    }
}

static nnf_status gp_run(NNF_KERNEL_ARGS) {
    const gp_state *s = ctx->state;
    if (in[0]->dtype != NNF_DTYPE_FLOAT32 || in[0]->numel != s->planes * s->plane ||
        out[0]->numel != s->planes)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: shapes do not match the plan", s->name);
    gp_job j = {s, in[0]->data, out[0]->data};
    nnf_ew_parallel_ranges(ctx->pool, s->planes,
                           s->plane >= GRAIN_FLOATS ? 1 : GRAIN_FLOATS / s->plane, gp_planes, &j);
    return NNF_OK;
}

nnf_status nnf_plan_global_pool(NNF_PLAN_ARGS) {
    const nnf_shape *xs = &in[0].shape;
    int is_max = !strcmp(node->op_type, "GlobalMaxPool");
    if ((!is_max && strcmp(node->op_type, "GlobalAveragePool")) ||
        in[0].dtype != NNF_DTYPE_FLOAT32 || !nnf_shape_known(xs) || xs->rank < 2 ||
        nnf_shape_numel(xs) <= 0)
        return NNF_OK;
    gp_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a kernel plan");
    s->k = nnf_ew_kernels_for(nnf_cpu_isa());
    s->is_max = is_max;
    s->planes = (size_t)(xs->dims[0] * xs->dims[1]);
    s->plane = (size_t)nnf_shape_numel(xs) / s->planes;
    snprintf(s->name, sizeof s->name, "f32_global_%spool_%s", is_max ? "max" : "avg", s->k->suffix);
    plan->name = s->name;
    plan->run = gp_run;
    plan->state = s;
    plan->free_state = state_free;
    return NNF_OK;
}

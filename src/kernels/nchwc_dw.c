/* Depthwise convolution on NCHWc8 (group == C == OC): the weight repack, the
 * portable tier and the driver. One output pixel of a block is 8 channels
 * that share nothing but their position, so a tap is one multiply-add of
 * whole pixels and any stride or dilation is only a different pixel step.
 * Work items are (image, block) x a run of output rows; every pixel is
 * computed the same way whatever the split, so threads never change results. */
#include "kernels/nchwc.h"

#include "base/alloc.h"
#include "base/packs.h"
#include "kernels/x86/nchwc_avx2.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

bool nnf_nchwc_dw_supported(const nnf_conv2d_shape *s) {
    /* the channel bound keeps the padded count (blocks x 8) from wrapping */
    return s->c > 0 && s->c <= SIZE_MAX / 16 && s->group == s->c && s->oc == s->c && s->kh > 0 && s->kw > 0 && s->sh > 0 &&
           s->sw > 0 && s->dh > 0 && s->dw > 0;
}

bool nnf_nchwc_dw_small_rows(const nnf_conv2d_shape *s) {
    return s->ow >= 1 && s->ow <= 16 && s->dw == 1 && (s->kw == 3 || s->kw == 5 || s->kw == 7) &&
           s->kh == s->kw && s->pl == s->kw / 2 && (s->sw == 1 || s->sw == 2);
}

nnf_status nnf_nchwc_dw_create(const nnf_conv2d_shape *s, nnf_isa isa, const float *w, nnf_nchwc_dw **out) {
    nnf_status st = NNF_OK;
    nnf_nchwc_dw *k = NULL;
    size_t taps, floats, bytes;
    if (!out || !s || !w)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "NCHWc depthwise conv: NULL shape, weights or result");
    *out = NULL;
    if (!nnf_nchwc_dw_supported(s)) {
        st = nnf_error(NNF_ERR_UNSUPPORTED,
                       "NCHWc depthwise conv: group %zu, %zu -> %zu channels is not depthwise", s->group, s->c,
                       s->oc);
        goto fail;
    }
    if (!nnf_mul_size(s->kh, s->kw, &taps) || !nnf_mul_size(taps, nnf_nchwc_blocks(s->c) * NNF_NCHWC_B, &floats) ||
        !nnf_mul_size(floats, sizeof(float), &bytes)) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "NCHWc depthwise conv: %zux%zu weights of %zu channels overflow",
                       s->kh, s->kw, s->c);
        goto fail;
    }
    bool ready = false;
    k = nnf_calloc(1, sizeof *k);
    if (!k || !(k->w = nnf_pack_alloc(bytes, &ready))) {
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "NCHWc depthwise conv: out of memory for %zu weight bytes", bytes);
        goto fail;
    }
    k->s = *s;
    k->isa = isa >= NNF_ISA_AVX512 ? NNF_ISA_AVX512
             : isa >= NNF_ISA_AVX2 ? NNF_ISA_AVX2
                                   : NNF_ISA_SCALAR;
    /* [c][kh][kw] -> [cb][kh][kw][8], padding channels zero so their lanes
     * accumulate exact zeros */
    if (!ready)
        memset(k->w, 0, bytes);
    for (size_t c = 0; c < s->c && !ready; c++)
        for (size_t t = 0; t < taps; t++)
            k->w[((c / NNF_NCHWC_B) * taps + t) * NNF_NCHWC_B + c % NNF_NCHWC_B] = w[c * taps + t];
    snprintf(k->name, sizeof k->name, "f32_dwconv_nchwc_%zux%zu_s%zu_%s", s->kh, s->kw, s->sh,
             nnf_isa_name(k->isa));
    *out = k;
    return NNF_OK;
fail:
    nnf_nchwc_dw_destroy(k);
    return st;
}

void nnf_nchwc_dw_destroy(nnf_nchwc_dw *k) {
    if (!k)
        return;
    nnf_free_aligned(k->w);
    nnf_free(k);
}

static void dw_rows_scalar(const nnf_nchwc_dw_tile *t, size_t oh0, size_t noh) {
    const nnf_conv2d_shape *s = t->s;
    const nnf_epilogue *e = t->ep;
    const size_t B = NNF_NCHWC_B;
    for (size_t oh = oh0; oh < oh0 + noh; oh++) {
        ptrdiff_t ih0 = (ptrdiff_t)(oh * s->sh) - (ptrdiff_t)s->pt;
        size_t r0, r1;
        nnf_nchwc_window_taps(ih0, s->kh, s->dh, s->h, &r0, &r1);
        for (size_t ow = 0; ow < s->ow; ow++) {
            ptrdiff_t iw0 = (ptrdiff_t)(ow * s->sw) - (ptrdiff_t)s->pl;
            size_t q0, q1;
            nnf_nchwc_window_taps(iw0, s->kw, s->dw, s->w, &q0, &q1);
            float acc[NNF_NCHWC_B] = {0};
            for (size_t i = r0; i < r1; i++) {
                const float *xr =
                    t->x + ((size_t)(ih0 + (ptrdiff_t)(i * s->dh)) - t->x_row0) * s->w * B;
                for (size_t j = q0; j < q1; j++) {
                    const float *xp = xr + (size_t)(iw0 + (ptrdiff_t)(j * s->dw)) * B;
                    const float *wp = t->w + (i * s->kw + j) * B;
                    for (size_t l = 0; l < B; l++)
                        acc[l] += wp[l] * xp[l];
                }
            }
            size_t o = ((oh - t->y_row0) * s->ow + ow) * B;
            for (size_t l = 0; l < B; l++) {
                if (l >= t->nc) {
                    t->y[o + l] = 0.0f;
                    continue;
                }
                float v = e->alpha * acc[l];
                if (t->bias)
                    v += t->bias[l];
                float r = t->res ? e->residual_scale * t->res[o + l] : 0.0f;
                if (t->res && !e->residual_after_act)
                    v += r;
                v = nnf_act_apply(&e->act, v);
                if (t->res && e->residual_after_act)
                    v += r;
                t->y[o + l] = v;
            }
        }
    }
}

typedef struct dw_job {
    const nnf_nchwc_dw *k;
    const float *x;
    float *y;
    const nnf_epilogue *ep;
    size_t cb;
} dw_job;

/* Block blk's tile: its residual (if any) at res, y and res holding output
 * rows from y_row0 on. */
static nnf_nchwc_dw_tile tile_of(const nnf_nchwc_dw *k, const float *x, size_t x_row0,
                                 size_t x_row1, size_t blk, float *y, size_t y_row0,
                                 const float *res, const nnf_epilogue *ep) {
    const nnf_conv2d_shape *s = &k->s;
    size_t c0 = blk * NNF_NCHWC_B;
    nnf_nchwc_dw_tile t = {
        .s = s,
        .x = x,
        .w = k->w + blk * s->kh * s->kw * NNF_NCHWC_B,
        .bias = ep->bias_kind != NNF_BIAS_NONE && ep->bias ? ep->bias + c0 : NULL,
        .res = res,
        .y = y,
        .ep = ep,
        .nc = s->c - c0 < NNF_NCHWC_B ? s->c - c0 : NNF_NCHWC_B,
        .x_row0 = x_row0,
        .x_row1 = x_row1,
        .y_row0 = y_row0,
    };
    return t;
}

static void block_rows(const nnf_nchwc_dw *k, const float *x, size_t x_row0, size_t x_row1,
                       size_t blk, float *y, size_t y_row0, const float *res,
                       const nnf_epilogue *ep, size_t oh0, size_t noh) {
    nnf_nchwc_dw_tile t = tile_of(k, x, x_row0, x_row1, blk, y, y_row0, res, ep);
    if (k->isa >= NNF_ISA_AVX2)
        nnf_nchwc_dw_rows_avx2(&t, oh0, noh);
    else
        dw_rows_scalar(&t, oh0, noh);
}

void nnf_nchwc_dw_rows(const nnf_nchwc_dw *k, const float *x, size_t x_row0, size_t x_row1,
                       size_t blk, float *y, size_t y_row0, const float *res,
                       const nnf_epilogue *ep, size_t oh0, size_t noh) {
    block_rows(k, x, x_row0, x_row1, blk, y, y_row0, res, ep, oh0, noh);
}

bool nnf_nchwc_dw_pair_ok(const nnf_nchwc_dw *k, const nnf_epilogue *ep, const float *res) {
    const nnf_conv2d_shape *s = &k->s;
    if (k->isa < NNF_ISA_AVX512 || s->kw != s->kh || s->dh != 1 || s->dw != 1)
        return false;
    if (res) /* one residual form: 3x3, a clamp, the residual before it, unscaled */
        return s->kh == 3 && (s->sw == 1 || s->sw == 2) && nnf_epilogue_clamp_only(ep);
    if (s->kh == 7) /* one 7x7 form: stride 1, a clamp (x86/nchwc_dw_avx512.c) */
        return s->sh == 1 && s->sw == 1 && nnf_epilogue_clamp_only(ep);
    return (s->kh == 3 || s->kh == 5) && (s->sw == 1 || s->sw == 2) &&
           (nnf_epilogue_clamp_only(ep) ||
            (ep && ep->alpha == 1.0f && !ep->residual &&
             (ep->act.kind == NNF_ACT_SILU || ep->act.kind == NNF_ACT_HARD_SWISH)));
}

/* Blocks blk and blk + 1 with their residuals (NULL: none; the second
 * rplane further). */
static void pair_rows(const nnf_nchwc_dw *k, const float *x, size_t xplane, size_t x_row0,
                      size_t x_row1, size_t blk, float *y, size_t yplane, size_t y_row0,
                      const float *res, size_t rplane, const nnf_epilogue *ep, size_t oh0,
                      size_t noh) {
    if (!nnf_nchwc_dw_pair_ok(k, ep, res)) {
        block_rows(k, x, x_row0, x_row1, blk, y, y_row0, res, ep, oh0, noh);
        block_rows(k, x + xplane, x_row0, x_row1, blk + 1, y + yplane, y_row0,
                   res ? res + rplane : NULL, ep, oh0, noh);
        return;
    }
    nnf_nchwc_dw_tile t = tile_of(k, x, x_row0, x_row1, blk, y, y_row0, res, ep),
                      t2 = tile_of(k, x, x_row0, x_row1, blk + 1, y, y_row0, NULL, ep);
    nnf_nchwc_dw_rows2_avx512(&t, xplane, yplane, rplane, t2.nc, oh0, noh);
}

void nnf_nchwc_dw_rows2(const nnf_nchwc_dw *k, const float *x, size_t xplane, size_t x_row0,
                        size_t x_row1, size_t blk, float *y, size_t yplane, size_t y_row0,
                        const float *res, size_t rplane, const nnf_epilogue *ep, size_t oh0,
                        size_t noh) {
    pair_rows(k, x, xplane, x_row0, x_row1, blk, y, yplane, y_row0, res, rplane, ep, oh0, noh);
}

/* i: image * pairs + pair of blocks (the last one alone when cb is odd);
 * j: first output row. */
static void dw_task(void *ctx, size_t i, size_t j, size_t ni, size_t nj) {
    const dw_job *d = ctx;
    const nnf_conv2d_shape *s = &d->k->s;
    size_t in_plane = s->h * s->w * NNF_NCHWC_B, out_plane = s->oh * s->ow * NNF_NCHWC_B,
           pairs = (d->cb + 1) / 2;
    for (size_t it = i; it < i + ni; it++) {
        size_t blk = it % pairs * 2, p = it / pairs * d->cb + blk; /* the plane */
        const float *res = d->ep->residual ? d->ep->residual + p * out_plane : NULL;
        if (blk + 1 < d->cb)
            pair_rows(d->k, d->x + p * in_plane, in_plane, 0, s->h, blk, d->y + p * out_plane,
                      out_plane, 0, res, out_plane, d->ep, j, nj);
        else
            block_rows(d->k, d->x + p * in_plane, 0, s->h, blk, d->y + p * out_plane, 0, res, d->ep,
                       j, nj);
    }
}

/* dw_task with the rows outer: i the first output row, j the pair. */
static void dw_task_rows(void *ctx, size_t i, size_t j, size_t ni, size_t nj) {
    dw_task(ctx, j, i, nj, ni);
}

/* Rows per item: at least ~4 items per thread over the whole tensor so the
 * two halves of a pool stay balanced, but whole planes when there are
 * plenty of blocks (fewer, longer items keep the weights and the input rows
 * shared by neighbouring output rows in cache). */
static size_t rows_per_item(size_t planes, size_t oh, int threads) {
    size_t want = (size_t)threads * 4;
    if (threads <= 1 || planes >= want)
        return oh ? oh : 1;
    size_t per_plane = (want + planes - 1) / planes;
    size_t rows = (oh + per_plane - 1) / per_plane;
    return rows ? rows : 1;
}

nnf_status nnf_nchwc_dw_run(const nnf_nchwc_dw *k, const float *x, float *y, const nnf_epilogue *ep,
                            nnf_threadpool *pool) {
    const nnf_conv2d_shape *s = &k->s;
    nnf_epilogue none = nnf_epilogue_default();
    dw_job d = {.k = k, .x = x, .y = y, .ep = ep ? ep : &none, .cb = nnf_nchwc_blocks(s->c)};
    if (s->n == 0 || s->oh == 0 || s->ow == 0)
        return NNF_OK;
    size_t planes = s->n * ((d.cb + 1) / 2); /* pairs of blocks (dw_task) */
    size_t rows = rows_per_item(planes, s->oh, nnf_threadpool_size(pool));
    if (rows == s->oh) {
        nnf_parallel_for_2d(pool, planes, s->oh, 1, rows, dw_task, &d);
        return NNF_OK;
    }
    /* Few planes, cut into bands of rows: the items row-major, so that each
     * thread's range holds every plane of its rows, as the producer's
     * tasks (bands of rows) and the consumer's (pixel chunks) most often
     * do: plane-major, each thread read half its input from the other
     * core's cache and wrote half its output for it (MobileNetV2's 32
     * channels at 112x112 on 2 threads: 1.21x its 1-thread work) */
    nnf_parallel_for_2d(pool, s->oh, planes, rows, 1, dw_task_rows, &d);
    return NNF_OK;
}

/* Between NCHW tensors, the work is bands of output rows of a pair of
 * blocks: the input rows a band reads are reordered into a per-thread
 * buffer, the blocked rows run over them into a second one, which is
 * reordered out. Both stay in L2: the tensors are read and written once,
 * as by the row kernels on NCHW planes (conv_dw.c), which spend whole
 * vectors and a setup on each row of one channel. */

size_t nnf_nchwc_band_in_rows(const nnf_conv2d_shape *s, size_t noh) {
    size_t r = (noh - 1) * s->sh + (s->kh - 1) * s->dh + 1;
    return r < s->h ? r : s->h;
}

size_t nnf_nchwc_band_floats(const nnf_conv2d_shape *s, size_t noh, size_t outs) {
    return 2 * (nnf_nchwc_band_in_rows(s, noh) * s->w + outs * noh * s->ow) * NNF_NCHWC_B;
}

static size_t band_budget(void) {
    return nnf_cpu_get()->l2 / 4 / sizeof(float);
}

bool nnf_nchwc_band_fits(const nnf_conv2d_shape *s, size_t outs) {
    size_t l2 = nnf_cpu_get()->l2;
    /* bounded extents keep the band arithmetic from wrapping */
    return s->h <= l2 && s->w <= l2 && s->oh <= l2 && s->ow <= l2 && s->sh <= l2 && s->kh <= l2 &&
           s->dh <= l2 && nnf_nchwc_band_floats(s, 1, outs) <= band_budget();
}

size_t nnf_nchwc_band_rows(const nnf_conv2d_shape *s, size_t outs, size_t plane_items,
                           int threads) {
    size_t lo = 1, hi = s->oh; /* the floats grow with the rows: the largest that fits */
    while (lo < hi) {
        size_t mid = lo + (hi - lo + 1) / 2;
        if (nnf_nchwc_band_floats(s, mid, outs) <= band_budget())
            lo = mid;
        else
            hi = mid - 1;
    }
    size_t want = (size_t)threads * 4;
    if (threads > 1 && plane_items < want) {
        size_t bands = (want + plane_items - 1) / plane_items;
        size_t rows = (s->oh + bands - 1) / bands;
        if (rows < lo)
            lo = rows;
    }
    return lo;
}

void nnf_nchwc_band_reach(const nnf_conv2d_shape *s, size_t oh0, size_t noh, size_t *r0,
                          size_t *r1) {
    ptrdiff_t top = (ptrdiff_t)(oh0 * s->sh) - (ptrdiff_t)s->pt;
    ptrdiff_t end = top + (ptrdiff_t)((noh - 1) * s->sh + (s->kh - 1) * s->dh + 1);
    *r0 = top < 0 ? 0 : (size_t)top;
    *r1 = end < (ptrdiff_t)s->h ? (size_t)(end < 0 ? 0 : end) : s->h;
    if (*r1 < *r0)
        *r1 = *r0;
}

bool nnf_nchwc_dw_plain_ok(const nnf_conv2d_shape *s) {
    return nnf_nchwc_dw_supported(s) && nnf_nchwc_band_fits(s, 1);
}

bool nnf_nchwc_dw_plain_wins(const nnf_conv2d_shape *s, nnf_isa isa) {
    if (!nnf_nchwc_dw_plain_ok(s))
        return false;
    /* Rows the blocked kernel runs as whole tiles win on both tiers. Wider
     * ones, on AVX-512 (the pairs, 16 channels a zmm), against the 16-lane
     * row kernel: single-op models, 1 / 2 threads, the new time over the
     * row kernel's, 3x3 64 channels at 40 wide 0.71 / 0.67, 48 0.83 / 0.81,
     * 72 0.89 / 0.72, 80 0.95 / 0.96, 100 0.92 / 0.95, 96 1.00 / 1.03, 112
     * 1.03 / 1.02 (32 channels); 7x7 96 channels at 56 0.87 / 0.86, at 112
     * 1.04 / 1.06; 5x5 128 at 56 0.87 / 0.84. The row kernel's rows cost
     * whole vectors and a setup each, which a row of six or more full ones
     * amortises. On AVX2 the 8-lane row kernel won but at 28 wide (3x3 144
     * at 56 1.20, 28 0.89; 7x7 96 at 56 1.09). */
    if (nnf_nchwc_dw_small_rows(s))
        return true;
    return isa >= NNF_ISA_AVX512 && (s->ow < 96 || s->ow % 16 != 0);
}

typedef struct dw_plain_job {
    const nnf_nchwc_dw *k;
    const float *x;
    float *y;
    const nnf_epilogue *ep;
    size_t cb, pairs, rows, bands; /* rows: output rows a band, the last one fewer */
    atomic_int failed;
} dw_plain_job;

/* Item i: image i / bands / pairs, blocks 2 (i / bands % pairs) and the next
 * (if any), band i % bands. */
static void dw_plain_task(void *ctx, size_t i) {
    dw_plain_job *d = ctx;
    const nnf_nchwc_dw *k = d->k;
    const nnf_conv2d_shape *s = &k->s;
    float *buf = nnf_thread_scratch(NNF_SCRATCH_CONV_IN, nnf_nchwc_band_floats(s, d->rows, 1));
    if (!buf) {
        atomic_store(&d->failed, 1);
        return;
    }
    size_t hw = s->h * s->w, ohw = s->oh * s->ow;
    size_t xband = nnf_nchwc_band_in_rows(s, d->rows) * s->w * NNF_NCHWC_B,
           yband = d->rows * s->ow * NNF_NCHWC_B;
    size_t band = i % d->bands, pair = i / d->bands % d->pairs, b = i / d->bands / d->pairs;
    size_t blk = pair * 2, nb = blk + 1 < d->cb ? 2 : 1;
    size_t oh0 = band * d->rows, noh = s->oh - oh0 < d->rows ? s->oh - oh0 : d->rows;
    size_t r0, r1; /* the input rows the band's windows reach (none: all padding) */
    nnf_nchwc_band_reach(s, oh0, noh, &r0, &r1);
    size_t c0 = blk * NNF_NCHWC_B, nc[2]; /* the pair's channels: c0 on, nc[o] in block o */
    for (size_t o = 0; o < nb; o++) {
        size_t first = c0 + o * NNF_NCHWC_B;
        nc[o] = s->c - first < NNF_NCHWC_B ? s->c - first : NNF_NCHWC_B;
    }
    const float *x = d->x + (b * s->c + c0) * hw + r0 * s->w;
    float *xb = buf, *yb = buf + 2 * xband, *y = d->y + (b * s->c + c0) * ohw + oh0 * s->ow;
    for (size_t o = 0; o < nb && r1 > r0; o++)
        nnf_nchwc_from_nchw_block(x + o * NNF_NCHWC_B * hw, hw, nc[o], (r1 - r0) * s->w,
                                  xb + o * xband, k->isa);
    if (nb == 2)
        pair_rows(k, xb, xband, r0, r1, blk, yb, yband, oh0, NULL, 0, d->ep, oh0, noh);
    else
        block_rows(k, xb, r0, r1, blk, yb, oh0, NULL, d->ep, oh0, noh);
    for (size_t o = 0; o < nb; o++)
        nnf_nchwc_to_nchw_block(yb + o * yband, ohw, nc[o], noh * s->ow, y + o * NNF_NCHWC_B * ohw,
                                k->isa);
}

nnf_status nnf_nchwc_dw_run_plain(const nnf_nchwc_dw *k, const float *x, float *y,
                                  const nnf_epilogue *ep, nnf_threadpool *pool) {
    if (!k || !x || !y)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "NCHWc depthwise conv: NULL argument");
    const nnf_conv2d_shape *s = &k->s;
    if (!nnf_nchwc_dw_plain_ok(s))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT,
                         "%s: %zux%zu -> %zux%zu is not a shape it runs between NCHW tensors",
                         k->name, s->h, s->w, s->oh, s->ow);
    nnf_epilogue none = nnf_epilogue_default();
    if (ep && ep->residual)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: no residual between NCHW tensors", k->name);
    if (s->n == 0 || s->oh == 0 || s->ow == 0)
        return NNF_OK;
    dw_plain_job d = {.k = k, .x = x, .y = y, .ep = ep ? ep : &none, .cb = nnf_nchwc_blocks(s->c)};
    d.pairs = (d.cb + 1) / 2;
    d.rows = nnf_nchwc_band_rows(s, 1, s->n * d.pairs, nnf_threadpool_size(pool));
    d.bands = (s->oh + d.rows - 1) / d.rows;
    atomic_init(&d.failed, 0);
    nnf_parallel_for(pool, s->n * d.pairs * d.bands, dw_plain_task, &d);
    if (atomic_load(&d.failed))
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu floats of band buffer",
                         k->name, nnf_nchwc_band_floats(s, d.rows, 1));
    return NNF_OK;
}

/* Winograd F(4x4,3x3) convolution, AVX2 transforms around the tier's GEMM.
 *
 * Work item: a block of tiles (row-major over the image, a multiple of 8)
 * of one image. Per input channel, B^T is applied down the columns of each
 * tile row the block touches (contiguous vectors from the input rows), then
 * across each tile: 8 tiles at a time, the 4-wide tile columns (one 128-bit
 * load each) are turned into vectors by a 4x4 transpose in each 128-bit
 * lane. That transpose leaves the tiles in the order 0 2 4 6 1 3
 * 5 7; the GEMM columns keep that order and the output transform undoes it
 * with the same transpose, so nothing is shuffled twice. The 36 transformed
 * values go straight into 36 GEMM B operands in the packed layout (gemm.h),
 * so the GEMM packs nothing; the 36 products (OC x tiles) are turned into
 * 4x4 output tiles and the epilogue (bias, activation, residual) is applied
 * before the one store of each output.
 *
 * A group of 8 tiles may span tile rows (a 14x14 output has 4 tiles per
 * row); tiles past the image's last read zeros and are never stored. */
#include "kernels/x86/winograd_avx2.h"
#include "kernels/conv_fast.h"
#include "kernels/nchwc.h"
#include "kernels/x86/ep_fast_avx2.h"
#include "kernels/x86/transpose_avx2.h"

#include "base/alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#define WG_MAX_SLOTS 256

typedef struct wg_job {
    const nnf_conv_kernel *k;
    const float *x;
    float *y;
    const nnf_epilogue *ep;
    size_t th, tw, tiles;    /* tile rows, tiles per row, tiles per image */
    size_t blk, blocks;      /* tiles per work item (a multiple of 8), items per image */
    size_t ocp, ocper;       /* output-channel parts per block, rows per part (mr multiple) */
    size_t npad, kc;         /* GEMM N of a full block rounded to nr, K block */
    size_t wst;              /* transformed row width in floats */
    size_t vstride, mstride; /* floats between the 36 B operands / products */
    size_t off_v, off_m, off_idx, slot_floats;
    float *scratch;
    int slots;
    atomic_int failed;
    atomic_int busy[WG_MAX_SLOTS];
} wg_job;

/* 4x4 transpose within each 128-bit lane. */
static inline __attribute__((always_inline)) void tr4(__m256 *a, __m256 *b, __m256 *c, __m256 *d) {
    __m256 t0 = _mm256_unpacklo_ps(*a, *b), t1 = _mm256_unpackhi_ps(*a, *b);
    __m256 t2 = _mm256_unpacklo_ps(*c, *d), t3 = _mm256_unpackhi_ps(*c, *d);
    *a = _mm256_shuffle_ps(t0, t2, 0x44);
    *b = _mm256_shuffle_ps(t0, t2, 0xEE);
    *c = _mm256_shuffle_ps(t1, t3, 0x44);
    *d = _mm256_shuffle_ps(t1, t3, 0xEE);
}

/* B^T down the columns of tile row th of one channel into tmp (6 rows of
 * wst), read straight from the input rows: vectors inside the image are
 * plain loads, the few that straddle its edges (or the padding) are
 * assembled in a small zeroed buffer. */
static void vertical_row(const wg_job *j, const float *xc, size_t th, float *tmp) {
    const nnf_conv2d_shape *s = &j->k->s;
    const size_t wst = j->wst;
    const float *rowp[6];
    int all_rows = 1;
    for (size_t i = 0; i < 6; i++) {
        ptrdiff_t ih = (ptrdiff_t)(th * 4 + i) - (ptrdiff_t)s->pt;
        rowp[i] = ih >= 0 && ih < (ptrdiff_t)s->h ? xc + (size_t)ih * s->w : NULL;
        all_rows &= rowp[i] != NULL;
    }
    const ptrdiff_t wi = (ptrdiff_t)s->w, pl = (ptrdiff_t)s->pl;
    for (size_t q = 0; q < wst; q += 8) {
        __m256 d[6], o[6];
        ptrdiff_t iw = (ptrdiff_t)q - pl;
        if (iw >= 0 && iw + 8 <= wi) {
            for (int i = 0; i < 6; i++)
                d[i] = all_rows || rowp[i] ? _mm256_loadu_ps(rowp[i] + iw) : _mm256_setzero_ps();
        } else if (iw >= wi || iw + 8 <= 0) {
            for (int i = 0; i < 6; i++)
                d[i] = _mm256_setzero_ps();
        } else {
            ptrdiff_t lo = iw < 0 ? -iw : 0, hi = wi - iw < 8 ? wi - iw : 8;
            for (int i = 0; i < 6; i++) {
                float e[8] = {0};
                if (rowp[i])
                    memcpy(e + lo, rowp[i] + iw + lo, (size_t)(hi - lo) * sizeof(float));
                d[i] = _mm256_loadu_ps(e);
            }
        }
        nnf_wino_bt6(d, o);
        for (int i = 0; i < 6; i++)
            _mm256_storeu_ps(tmp + (size_t)i * wst + q, o[i]);
    }
}

static const float wg_zeros[8];

static inline __m256 load2(const float *lo, const float *hi) {
    return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(lo)), _mm_loadu_ps(hi), 1);
}

/* Input transform of channel ch for the block's tiles [t0, t0 + nt) (nt a
 * multiple of 8; tiles past the image read zeros) into the 36 packed B
 * operands at v. Tiles are linear over the image, so a group of 8 may span
 * tile rows: each tile's 4 columns are one 128-bit load. */
static __attribute__((noinline)) void input_block(const wg_job *j, const float *xc, size_t ch,
                                                  size_t t0, size_t nt, const size_t *toff,
                                                  float *tmp, float *v) {
    const size_t wst = j->wst, r = j->k->cfg->nr, kc = j->kc, C = j->k->s.c, tw = j->tw;
    size_t row0 = t0 / tw, last = t0 + nt < j->tiles ? t0 + nt : j->tiles;
    size_t rows = (last - 1) / tw - row0 + 1;
    for (size_t q = 0; q < rows; q++)
        vertical_row(j, xc, row0 + q, tmp + q * 6 * wst);
    /* where row ch of a B operand lives in the packed layout */
    size_t kb = ch / kc, kk = ch % kc, kcb = C - kb * kc < kc ? C - kb * kc : kc;
    float *vrow = v + kb * kc * j->npad + kk * r;
    const size_t vstride = j->vstride;
    for (size_t g = 0; g < nt; g += 8) {
        float *dst = vrow + (g / r) * r * kcb + g % r;
        const float *tp[8];
        for (size_t e = 0; e < 8; e++)
            tp[e] = toff[g + e] != SIZE_MAX ? tmp + toff[g + e] : wg_zeros;
        for (size_t k = 0; k < 6; k++) {
            size_t ko = k * wst;
            /* wg_zeros rows: the offset must stay 0 */
            __m256 a0, a1, a2, a3, b0, b1, b2, b3;
#define WG_P(e) (tp[e] == wg_zeros ? wg_zeros : tp[e] + ko)
            const float *p0 = WG_P(0), *p1 = WG_P(1), *p2 = WG_P(2), *p3 = WG_P(3), *p4 = WG_P(4),
                        *p5 = WG_P(5), *p6 = WG_P(6), *p7 = WG_P(7);
#undef WG_P
            a0 = load2(p0, p1);
            a1 = load2(p2, p3);
            a2 = load2(p4, p5);
            a3 = load2(p6, p7);
            b0 = load2(p0 + (p0 != wg_zeros) * 4, p1 + (p1 != wg_zeros) * 4);
            b1 = load2(p2 + (p2 != wg_zeros) * 4, p3 + (p3 != wg_zeros) * 4);
            b2 = load2(p4 + (p4 != wg_zeros) * 4, p5 + (p5 != wg_zeros) * 4);
            b3 = load2(p6 + (p6 != wg_zeros) * 4, p7 + (p7 != wg_zeros) * 4);
            tr4(&a0, &a1, &a2, &a3);
            tr4(&b0, &b1, &b2, &b3);
            __m256 d[6] = {a0, a1, a2, a3, b0, b1}, o[6];
            nnf_wino_bt6(d, o);
            for (size_t l = 0; l < 6; l++)
                _mm256_storeu_ps(dst + (k * 6 + l) * vstride, o[l]);
        }
    }
}

/* Output transform of channel oc for the block's tiles from the 36 products
 * m (each OC x ncols, stride mstride), epilogue, store. After the final
 * transpose a vector holds two tiles' output rows (4 columns each). */
static __attribute__((noinline)) void output_block(const wg_job *j, const float *m, size_t ncols,
                                                   size_t oc, size_t t0, const size_t *opos,
                                                   const size_t *ocr, float *yc, const float *resc,
                                                   const nnf_ep_fast *f, __m256 bias,
                                                   const nnf_tile_ep *tep) {
    const nnf_conv2d_shape *s = &j->k->s;
    const size_t mstride = j->mstride, ow = s->ow;
    nnf_tile_ep te = *tep;
    float rbuf[8];
    for (size_t g = 0; g < ncols && t0 + g < j->tiles; g += 8) {
        const float *mp = m + oc * ncols + g;
        __m256 t[4][6];
        for (size_t l = 0; l < 6; l++) {
            __m256 v[6], o[4];
            for (size_t k = 0; k < 6; k++)
                v[k] = _mm256_loadu_ps(mp + (k * 6 + l) * mstride);
            nnf_wino_at4(v, o);
            for (int i = 0; i < 4; i++)
                t[i][l] = o[i];
        }
        const size_t *pos = opos + g, *cr = ocr + g;
        for (size_t i = 0; i < 4; i++) {
            __m256 o[4];
            nnf_wino_at4(t[i], o);
            tr4(&o[0], &o[1], &o[2], &o[3]);
            for (size_t q = 0; q < 4; q++) {
                size_t e0 = 2 * q, e1 = 2 * q + 1;
                int ok0 = i < cr[e0] / 8, ok1 = i < cr[e1] / 8;
                if (!ok0 && !ok1)
                    continue;
                size_t p0 = pos[e0] + i * ow, p1 = pos[e1] + i * ow;
                size_t c0 = ok0 ? cr[e0] % 8 : 0, c1 = ok1 ? cr[e1] % 8 : 0;
                if (resc) {
                    __m128 r0 =
                        c0 == 4 ? _mm_loadu_ps(resc + p0)
                        : c0    ? _mm_maskload_ps(resc + p0, _mm256_castsi256_si128(nnf_mask8(c0)))
                                : _mm_setzero_ps();
                    __m128 r1 =
                        c1 == 4 ? _mm_loadu_ps(resc + p1)
                        : c1    ? _mm_maskload_ps(resc + p1, _mm256_castsi256_si128(nnf_mask8(c1)))
                                : _mm_setzero_ps();
                    _mm_storeu_ps(rbuf, r0);
                    _mm_storeu_ps(rbuf + 4, r1);
                }
                __m256 val;
                if (f->clamp_only) {
                    val = nnf_ep_fast8(f, o[q], bias, resc ? rbuf : NULL, 1, nnf_mask8(8));
                } else {
                    te.residual = resc ? rbuf : NULL;
                    val = nnf_ep8(o[q], &te, 0, 0, 1, nnf_mask8(8));
                }
                __m128 lo = _mm256_castps256_ps128(val), hi = _mm256_extractf128_ps(val, 1);
                if (c0 == 4)
                    _mm_storeu_ps(yc + p0, lo);
                else if (c0)
                    _mm_maskstore_ps(yc + p0, _mm256_castsi256_si128(nnf_mask8(c0)), lo);
                if (c1 == 4)
                    _mm_storeu_ps(yc + p1, hi);
                else if (c1)
                    _mm_maskstore_ps(yc + p1, _mm256_castsi256_si128(nnf_mask8(c1)), hi);
            }
        }
    }
}

static void wg_task(void *ctx, size_t item) {
    wg_job *j = ctx;
    const nnf_conv_kernel *k = j->k;
    const nnf_conv2d_shape *s = &k->s;
    int slot = nnf_slot_claim(j->busy, j->slots);
    float *base = j->scratch + (size_t)slot * j->slot_floats;
    float *tmp = base, *v = base + j->off_v, *m = base + j->off_m;
    size_t part = item % j->ocp, blkid = item / j->ocp;
    size_t b = blkid / j->blocks, t0 = (blkid % j->blocks) * j->blk;
    size_t oc0 = part * j->ocper, oc1 = oc0 + j->ocper < s->oc ? oc0 + j->ocper : s->oc;
    if (oc0 >= oc1)
        goto done;
    size_t nt = j->tiles - t0 < j->blk ? j->tiles - t0 : j->blk;
    size_t ncols = (nt + 7) / 8 * 8, plane = s->h * s->w, oplane = s->oh * s->ow;
    const float *xb = j->x + b * s->c * plane;
    /* per tile of the block: its columns in the vertical pass's rows, its
     * output origin, and its valid rows * 8 + columns (0: past the image) */
    size_t *toff = (size_t *)(base + j->off_idx), *opos = toff + j->blk, *ocr = opos + j->blk;
    for (size_t e = 0; e < ncols; e++) {
        size_t t = t0 + e;
        if (t >= j->tiles) {
            toff[e] = SIZE_MAX;
            opos[e] = ocr[e] = 0;
            continue;
        }
        size_t ty = t / j->tw, tx = t % j->tw, y0 = ty * 4, x0 = tx * 4;
        toff[e] = (ty - t0 / j->tw) * 6 * j->wst + x0;
        opos[e] = y0 * s->ow + x0;
        ocr[e] = (s->oh - y0 < 4 ? s->oh - y0 : 4) * 8 + (s->ow - x0 < 4 ? s->ow - x0 : 4);
    }
    for (size_t ch = 0; ch < s->c; ch++)
        input_block(j, xb + ch * plane, ch, t0, ncols, toff, tmp, v);
    /* columns [ncols, npad) of the last panel are multiplied but never
     * stored: zero them so stale scratch (denormals) cannot slow the GEMM */
    const size_t r = k->cfg->nr, npad_blk = (ncols + r - 1) / r * r;
    if (ncols < npad_blk)
        for (size_t xi = 0; xi < 36; xi++)
            for (size_t ch = 0; ch < s->c; ch++) {
                size_t kb = ch / j->kc, kk = ch % j->kc;
                size_t kcb = s->c - kb * j->kc < j->kc ? s->c - kb * j->kc : j->kc;
                float *row =
                    v + xi * j->vstride + kb * j->kc * j->npad + (ncols / r) * r * kcb + kk * r;
                memset(row + ncols % r, 0, (r - ncols % r) * sizeof(float));
            }
    for (size_t xi = 0; xi < 36; xi++) {
        nnf_gemm_packed bp = {.side = NNF_GEMM_B,
                              .mn = ncols,
                              .k = s->c,
                              .kc = j->kc,
                              .r = k->cfg->nr,
                              .mn_pad = j->npad,
                              .data = v + xi * j->vstride};
        /* rows [oc0, oc1) of the packed weights: with every K block full
         * (checked when ocp > 1) they start oc0 * min(K, kc) floats further on in
         * each block, whose stride (mn_pad) stays the whole matrix's */
        nnf_gemm_packed ap = *k->packed_w[xi];
        ap.data += oc0 * (s->c < j->kc ? s->c : j->kc);
        ap.mn = oc1 - oc0;
        /* the balanced tail panels (gemm.c, tail_split) counted from the
         * part's first row: kept absolute, the last part read them as full
         * panels (wrong rows, some never written; 2 threads, oc >= 128) */
        ap.tail_from = ap.tail_from > oc0 ? ap.tail_from - oc0 : 0;
        if (ap.tail_from > ap.mn)
            ap.tail_from = ap.mn;
        nnf_gemm_src a = nnf_gemm_src_packed(j->ocp > 1 ? &ap : k->packed_w[xi]),
                     bsrc = nnf_gemm_src_packed(&bp);
        if (nnf_gemm_run(k->cfg, oc1 - oc0, ncols, s->c, &a, &bsrc,
                         m + xi * j->mstride + oc0 * ncols, ncols, NULL, NULL) != NNF_OK) {
            atomic_store(&j->failed, 1);
            goto done;
        }
    }
    const nnf_epilogue *ep = j->ep;
    nnf_ep_fast f = nnf_ep_fast_init(ep);
    for (size_t oc = oc0; oc < oc1; oc++) {
        size_t yo = (b * s->oc + oc) * oplane;
        __m256 bias = _mm256_set1_ps(ep->bias ? ep->bias[oc] : 0.0f);
        nnf_tile_ep te = {.ep = ep, .bias = ep->bias ? ep->bias + oc : NULL};
        output_block(j, m, ncols, oc, t0, opos, ocr, j->y + yo,
                     ep->residual ? ep->residual + yo : NULL, &f, bias, &te);
    }
done:
    nnf_slot_release(j->busy, slot);
}

/* Tiles per block for a pool: the multiple of nr up to max_blk whose items,
 * taken in order by whichever thread is free, finish first. An item costs
 * its GEMM columns (tiles rounded up to nr) plus a few for its fixed work.
 * Halving the block until there were 2 items per thread cut ResNet's 196
 * tiles into 56 + 56 + 56 + 28: N = 56 pads to 64 and one thread did 3 of
 * the 4, where 112 + 84 keeps both busy with less padding. */
static size_t balanced_blk(size_t tiles, size_t images, size_t max_blk, size_t nr, int threads) {
    enum { WG_MAX_BAL_THREADS = 64 };
    size_t load[WG_MAX_BAL_THREADS];
    size_t nt = threads < WG_MAX_BAL_THREADS ? (size_t)threads : WG_MAX_BAL_THREADS;
    size_t best = max_blk, best_span = SIZE_MAX;
    for (size_t blk = max_blk / nr * nr; blk >= nr; blk -= nr) {
        memset(load, 0, nt * sizeof load[0]);
        size_t span = 0;
        for (size_t b = 0; b < images; b++)
            for (size_t t0 = 0; t0 < tiles; t0 += blk) {
                size_t n = tiles - t0 < blk ? tiles - t0 : blk, low = 0;
                for (size_t t = 1; t < nt; t++)
                    if (load[t] < load[low])
                        low = t;
                load[low] += (n + nr - 1) / nr * nr + 4;
                if (load[low] > span)
                    span = load[low];
            }
        if (span < best_span) {
            best_span = span;
            best = blk;
        }
    }
    return best;
}

nnf_status nnf_conv_winograd_avx2(const nnf_conv_kernel *k, const float *x, float *y,
                                  const nnf_epilogue *ep, nnf_threadpool *pool) {
    const nnf_conv2d_shape *s = &k->s;
    nnf_status st = NNF_OK;
    wg_job *j = nnf_calloc(1, sizeof *j);
    if (!j)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for a Winograd job");
    j->k = k;
    j->x = x;
    j->y = y;
    j->ep = ep;
    j->th = (s->oh + 3) / 4;
    j->tw = (s->ow + 3) / 4;
    j->tiles = j->th * j->tw;
    j->wst = (j->tw * 4 + 8 + 7) / 8 * 8;
    j->kc = nnf_gemm_kc(k->cfg, s->c);
    /* A block's 36 transformed inputs and 36 products should stay in L2/L3
     * while the GEMMs and the output transform read them back. */
    size_t target = (size_t)(2u << 20) / (36 * sizeof(float) * (s->c + s->oc));
    /* whole tile rows when they fit: a row cut between blocks has its
     * vertical pass done twice */
    size_t unit = j->tw % 16 == 0  ? j->tw
                  : j->tw % 8 == 0 ? 2 * j->tw
                  : j->tw % 4 == 0 ? 4 * j->tw
                  : j->tw % 2 == 0 ? 8 * j->tw
                                   : 16 * j->tw; /* lcm(16, tw): whole GEMM panels too */
    size_t blk = unit <= target ? target / unit * unit : target / 16 * 16;
    if (blk < 16)
        blk = 16;
    size_t tiles8 = (j->tiles + 7) / 8 * 8;
    if (blk > tiles8)
        blk = tiles8;
    /* enough items for every thread. An image too small to give each
     * thread two blocks of 16 tiles (ResNet's 14x14: 16 tiles) is cut
     * across output channels: each part
     * redoes the block's input transform, a few percent of its GEMMs while
     * parts keep 64 rows, where smaller tile blocks would leave threads idle
     * (one block) or pad the GEMMs' N. Row parts need a packed-weight view,
     * which is one offset only when every K block is full. */
    int threads = nnf_threadpool_size(pool);
    size_t items_min = (size_t)(threads > 1 ? 2 * threads : 1);
    size_t ocp = 1, mr = k->cfg->mr;
    if (threads > 1 && (s->c <= j->kc || s->c % j->kc == 0))
        while (s->n * ((j->tiles + 15) / 16) * ocp < items_min && s->oc / (ocp * 2) >= 64) {
            /* every part but the last starts before the balanced tail
             * panels (a view is one offset only over whole panels) */
            size_t per = ((s->oc + ocp * 2 - 1) / (ocp * 2) + mr - 1) / mr * mr;
            if ((ocp * 2 - 1) * per > k->packed_w[0]->tail_from)
                break;
            ocp *= 2;
        }
    if (ocp > 1)
        items_min = (size_t)threads;
    if (ocp == 1 && threads > 1 && s->n <= 64)
        blk = balanced_blk(j->tiles, s->n, blk, k->cfg->nr, threads);
    else
        while (blk > 16 && s->n * ((j->tiles + blk - 1) / blk) * ocp < items_min)
            blk = blk / 2 % unit == 0 ? blk / 2 : (blk / 2 + 7) / 8 * 8;
    j->ocp = ocp;
    j->ocper = ((s->oc + ocp - 1) / ocp + mr - 1) / mr * mr;
    j->blk = blk;
    j->blocks = (j->tiles + blk - 1) / blk;
    j->npad = (blk + k->cfg->nr - 1) / k->cfg->nr * k->cfg->nr;
    /* the tile rows a block touches, for the vertical pass */
    size_t trows = blk / j->tw + 2;
    if (trows > j->th)
        trows = j->th;
    size_t vf, mf, total;
    if (!nnf_mul_size(s->c, j->npad, &vf) || !nnf_mul_size(s->oc, j->blk, &mf) ||
        !nnf_mul_size(nnf_wino_odd_lines(vf), 36, &vf) || !nnf_mul_size(nnf_wino_odd_lines(mf), 36, &mf)) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: convolution too large", k->name);
        goto fail;
    }
    j->vstride = nnf_wino_odd_lines(s->c * j->npad);
    j->mstride = nnf_wino_odd_lines(s->oc * j->blk);
    j->off_v = nnf_wino_round16(trows * 6 * j->wst);
    j->off_m = j->off_v + nnf_wino_round16(vf);
    j->off_idx = j->off_m + nnf_wino_round16(mf);
    /* three size_t tables of blk entries */
    j->slot_floats = j->off_idx + nnf_wino_round16(3 * j->blk * (sizeof(size_t) / sizeof(float)));
    size_t items = s->n * j->blocks * j->ocp;
    j->slots = threads < WG_MAX_SLOTS ? threads : WG_MAX_SLOTS;
    if ((size_t)j->slots > items)
        j->slots = (int)items;
    if (!nnf_mul_size(j->slot_floats, (size_t)j->slots, &total) ||
        !nnf_mul_size(total, sizeof(float), &vf)) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: convolution too large", k->name);
        goto fail;
    }
    j->scratch = nnf_thread_scratch(NNF_SCRATCH_WINOGRAD, total);
    if (!j->scratch) {
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory for Winograd scratch", k->name);
        goto fail;
    }
    nnf_parallel_for(pool, items, wg_task, j);
    if (atomic_load(&j->failed))
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: a Winograd GEMM failed", k->name);
fail:
    nnf_free(j);
    return st;
}

/* ---- weights: U = G g G^T ------------------------------------------------ */

/* The weight transforms on 4 doubles a ymm (NNF_WINO_WEIGHTS: the blocked
 * kernels' panels, and nnf_wino_g6_avx2 for the kernels here). */
NNF_WINO_WEIGHTS(_avx2, __m256d, 4, _mm_load_ps, _mm_store_ps, _mm256_cvtps_pd, _mm256_cvtpd_ps,
                 _mm256_add_pd, _mm256_sub_pd, _mm256_mul_pd, _mm256_set1_pd)

/* 8 kernels at a time, 4 per double vector: their taps turned into vectors
 * by an 8x8 transpose (taps 0-7) and a gather of tap 8; the 36 values of the
 * 8 kernels leave as one 8-float store per matrix. In scalar double with a
 * store per value this was 9-13 % of loading ResNet-50. */
void nnf_wino_weight_8_avx2(const float *w, size_t stride, size_t m, float *const dst[36]) {
    float tr[9][8], pad[8][9];
    const float *src = w;
    size_t ld = stride;
    if (m < 8) { /* the missing kernels are zeros */
        memset(pad, 0, sizeof pad);
        for (size_t i = 0; i < m; i++)
            memcpy(pad[i], w + i * stride, 9 * sizeof(float));
        src = &pad[0][0];
        ld = 9;
    }
    nnf_tr8x8_avx2(src, ld, &tr[0][0], 8);
    for (size_t i = 0; i < 8; i++)
        tr[8][i] = src[i * ld + 8];
    __m256d g[9][2], t[6][3][2], r[6];
    for (int e = 0; e < 9; e++) {
        __m256 v = _mm256_loadu_ps(tr[e]);
        g[e][0] = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
        g[e][1] = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    }
    for (int h = 0; h < 2; h++)
        for (int b = 0; b < 3; b++) { /* G g, column by column */
            nnf_wino_g6_avx2(g[b][h], g[3 + b][h], g[6 + b][h], r);
            for (int a = 0; a < 6; a++)
                t[a][b][h] = r[a];
        }
    for (int a = 0; a < 6; a++) { /* (G g) G^T, row by row */
        __m256d lo[6], hi[6];
        nnf_wino_g6_avx2(t[a][0][0], t[a][1][0], t[a][2][0], lo);
        nnf_wino_g6_avx2(t[a][0][1], t[a][1][1], t[a][2][1], hi);
        for (int b = 0; b < 6; b++) {
            __m256 v = _mm256_set_m128(_mm256_cvtpd_ps(hi[b]), _mm256_cvtpd_ps(lo[b]));
            float *d = dst[a * 6 + b];
            if (m == 8) {
                _mm256_storeu_ps(d, v);
            } else {
                float tmp[8];
                _mm256_storeu_ps(tmp, v);
                memcpy(d, tmp, m * sizeof(float));
            }
        }
    }
}

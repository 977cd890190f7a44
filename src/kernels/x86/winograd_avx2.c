/* Winograd F(4x4,3x3) convolution, AVX2 transforms around the tier's GEMM.
 *
 * Work item: one block of tile rows of one image. Per input channel and tile
 * row, the 6 input rows are copied (zero padded) into a strip, B^T is applied
 * down the columns (contiguous vectors), then across each tile: 8 tiles at a
 * time, the 4-wide tile columns are turned into vectors by a 4x4 transpose in
 * each 128-bit lane. That transpose leaves the tiles in the order 0 2 4 6 1 3
 * 5 7; the GEMM columns keep that order and the output transform undoes it
 * with the same transpose, so nothing is shuffled twice. The 36 transformed
 * values go straight into 36 GEMM B operands in the packed layout (gemm.h),
 * so the GEMM packs nothing; the 36 products (OC x tiles) are turned into
 * 4x4 output tiles and the epilogue (bias, activation, residual) is applied
 * before the one store of each output.
 *
 * Tile rows are padded to a multiple of 8 tiles (selection keeps the waste
 * small); padded tiles read zeros and their outputs are never stored. */
#include "kernels/conv_fast.h"
#include "kernels/x86/ep_fast_avx2.h"

#include "base/alloc.h"

#include <stdatomic.h>
#include <string.h>

#define WG_MAX_SLOTS 256

typedef struct wg_job {
    const nnf_conv_kernel *k;
    const float *x;
    float *y;
    const nnf_epilogue *ep;
    size_t th, tw, twp;      /* tile rows, tiles per row, padded to 8 */
    size_t rows_blk, blocks; /* tile rows per work item, items per image */
    size_t ncols, npad, kc;  /* GEMM N of a full block, N rounded to nr, K block */
    size_t wst;              /* transformed row width in floats */
    size_t vstride, mstride; /* floats between the 36 B operands / products */
    size_t off_v, off_m, slot_floats;
    float *scratch;
    int slots;
    atomic_int failed;
    atomic_int busy[WG_MAX_SLOTS];
} wg_job;

/* B^T on six vectors. */
static inline __attribute__((always_inline)) void bt6(const __m256 d[6], __m256 o[6]) {
    const __m256 c4 = _mm256_set1_ps(4.0f), c5 = _mm256_set1_ps(-5.0f), c2 = _mm256_set1_ps(2.0f);
    const __m256 m4 = _mm256_set1_ps(-4.0f);
    o[0] = _mm256_fmadd_ps(c4, d[0], _mm256_fmadd_ps(c5, d[2], d[4]));
    __m256 a = _mm256_fmadd_ps(m4, d[2], d[4]), b = _mm256_fmadd_ps(m4, d[1], d[3]);
    o[1] = _mm256_add_ps(a, b);
    o[2] = _mm256_sub_ps(a, b);
    __m256 c = _mm256_sub_ps(d[4], d[2]), e = _mm256_mul_ps(c2, _mm256_sub_ps(d[3], d[1]));
    o[3] = _mm256_add_ps(c, e);
    o[4] = _mm256_sub_ps(c, e);
    o[5] = _mm256_fmadd_ps(c4, d[1], _mm256_fmadd_ps(c5, d[3], d[5]));
}

/* A^T on six vectors. */
static inline __attribute__((always_inline)) void at4(const __m256 m[6], __m256 o[4]) {
    __m256 p12 = _mm256_add_ps(m[1], m[2]), n12 = _mm256_sub_ps(m[1], m[2]);
    __m256 p34 = _mm256_add_ps(m[3], m[4]), n34 = _mm256_sub_ps(m[3], m[4]);
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], p12), p34);
    o[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), n34, n12);
    o[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), p34, p12);
    o[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), n34, n12), m[5]);
}

/* 4x4 transpose within each 128-bit lane. */
static inline __attribute__((always_inline)) void tr4(__m256 *a, __m256 *b, __m256 *c, __m256 *d) {
    __m256 t0 = _mm256_unpacklo_ps(*a, *b), t1 = _mm256_unpackhi_ps(*a, *b);
    __m256 t2 = _mm256_unpacklo_ps(*c, *d), t3 = _mm256_unpackhi_ps(*c, *d);
    *a = _mm256_shuffle_ps(t0, t2, 0x44);
    *b = _mm256_shuffle_ps(t0, t2, 0xEE);
    *c = _mm256_shuffle_ps(t1, t3, 0x44);
    *d = _mm256_shuffle_ps(t1, t3, 0xEE);
}

/* Input transform of channel ch, tile row th into GEMM columns [col0, col0 +
 * twp) of the 36 packed B operands at v (each C x npad). */
static __attribute__((noinline)) void input_tile_row(const wg_job *j, const float *xc, size_t ch,
                                                     size_t th, size_t col0, float *tmp, float *v) {
    const nnf_conv2d_shape *s = &j->k->s;
    const size_t wst = j->wst, r = j->k->cfg->nr, kc = j->kc, C = s->c;
    /* B^T down the columns, read straight from the input rows: vectors
     * inside the image are plain loads, the few that straddle its edges (or
     * the padding) are assembled in a small zeroed buffer */
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
            for (int i = 0; i < 6; i++) {
                float e[8];
                for (ptrdiff_t l = 0; l < 8; l++)
                    e[l] = rowp[i] && iw + l >= 0 && iw + l < wi ? rowp[i][iw + l] : 0.0f;
                d[i] = _mm256_loadu_ps(e);
            }
        }
        bt6(d, o);
        for (int i = 0; i < 6; i++)
            _mm256_storeu_ps(tmp + (size_t)i * wst + q, o[i]);
    }
    /* where row ch of a B operand lives in the packed layout */
    size_t kb = ch / kc, kk = ch % kc, kcb = C - kb * kc < kc ? C - kb * kc : kc;
    float *vrow = v + kb * kc * j->npad + kk * r;
    const size_t vstride = j->vstride;
    for (size_t g = 0; g < j->twp; g += 8) {
        size_t n = col0 + g;
        float *dst = vrow + (n / r) * r * kcb + n % r;
        for (size_t k = 0; k < 6; k++) {
            const float *t = tmp + k * wst + g * 4;
            __m256 a0 = _mm256_loadu_ps(t), a1 = _mm256_loadu_ps(t + 8),
                   a2 = _mm256_loadu_ps(t + 16), a3 = _mm256_loadu_ps(t + 24);
            __m256 b0 = _mm256_loadu_ps(t + 4), b1 = _mm256_loadu_ps(t + 12),
                   b2 = _mm256_loadu_ps(t + 20), b3 = _mm256_loadu_ps(t + 28);
            tr4(&a0, &a1, &a2, &a3);
            tr4(&b0, &b1, &b2, &b3);
            __m256 d[6] = {a0, a1, a2, a3, b0, b1}, o[6];
            bt6(d, o);
            for (size_t l = 0; l < 6; l++)
                _mm256_storeu_ps(dst + (k * 6 + l) * vstride, o[l]);
        }
    }
}

/* Output transform of channel oc, tile row th from GEMM columns starting at
 * col0 of the 36 products m (each OC x ncols), epilogue, store. */
static __attribute__((noinline)) void output_tile_row(const wg_job *j, const float *m, size_t ncols, size_t oc, size_t th,
                            size_t col0, float *yc, const float *resc, const nnf_ep_fast *f,
                            __m256 bias, const nnf_tile_ep *tep) {
    const nnf_conv2d_shape *s = &j->k->s;
    const size_t mstride = j->mstride, ow = s->ow;
    for (size_t g = 0; g < j->twp; g += 8) {
        const float *mp = m + oc * ncols + col0 + g;
        __m256 t[4][6];
        for (size_t l = 0; l < 6; l++) {
            __m256 v[6], o[4];
            for (size_t k = 0; k < 6; k++)
                v[k] = _mm256_loadu_ps(mp + (k * 6 + l) * mstride);
            at4(v, o);
            for (int i = 0; i < 4; i++)
                t[i][l] = o[i];
        }
        size_t x0 = g * 4;
        if (x0 >= ow)
            break;
        for (size_t i = 0; i < 4; i++) {
            size_t oh = th * 4 + i;
            if (oh >= s->oh)
                break;
            __m256 o[4];
            at4(t[i], o);
            tr4(&o[0], &o[1], &o[2], &o[3]);
            float *yr = yc + oh * ow;
            const float *rr = resc ? resc + oh * ow : NULL;
            nnf_tile_ep te = *tep;
            te.residual = rr;
            for (size_t q = 0; q < 4; q++) {
                size_t x = x0 + q * 8;
                if (x >= ow)
                    break;
                size_t left = ow - x;
                int full = left >= 8;
                __m256i mask = nnf_mask8(full ? 8 : left);
                __m256 val;
                if (f->clamp_only)
                    val = nnf_ep_fast8(f, o[q], bias, rr ? rr + x : NULL, full, mask);
                else
                    val = nnf_ep8(o[q], &te, 0, x, full, mask);
                if (full)
                    _mm256_storeu_ps(yr + x, val);
                else
                    _mm256_maskstore_ps(yr + x, mask, val);
            }
        }
    }
}

static void wg_task(void *ctx, size_t item) {
    wg_job *j = ctx;
    const nnf_conv_kernel *k = j->k;
    const nnf_conv2d_shape *s = &k->s;
    int slot;
    for (;;) {
        for (slot = 0; slot < j->slots; slot++)
            if (!atomic_load_explicit(&j->busy[slot], memory_order_relaxed) &&
                !atomic_exchange_explicit(&j->busy[slot], 1, memory_order_acquire))
                goto claimed;
    }
claimed:;
    float *base = j->scratch + (size_t)slot * j->slot_floats;
    float *tmp = base, *v = base + j->off_v, *m = base + j->off_m;
    size_t b = item / j->blocks, blk = item % j->blocks;
    size_t th0 = blk * j->rows_blk, rows = j->th - th0 < j->rows_blk ? j->th - th0 : j->rows_blk;
    size_t ncols = rows * j->twp, plane = s->h * s->w, oplane = s->oh * s->ow;
    const float *xb = j->x + b * s->c * plane;
    for (size_t ch = 0; ch < s->c; ch++)
        for (size_t r = 0; r < rows; r++)
            input_tile_row(j, xb + ch * plane, ch, th0 + r, r * j->twp, tmp, v);
    /* columns [ncols, npad) of the last panel are multiplied but never
     * stored: zero them so stale scratch (denormals) cannot slow the GEMM */
    if (ncols < j->npad) {
        const size_t r = k->cfg->nr;
        for (size_t xi = 0; xi < 36; xi++)
            for (size_t ch = 0; ch < s->c; ch++) {
                size_t kb = ch / j->kc, kk = ch % j->kc;
                size_t kcb = s->c - kb * j->kc < j->kc ? s->c - kb * j->kc : j->kc;
                float *row = v + xi * j->vstride + kb * j->kc * j->npad +
                             (ncols / r) * r * kcb + kk * r;
                memset(row + ncols % r, 0, (r - ncols % r) * sizeof(float));
            }
    }
    for (size_t xi = 0; xi < 36; xi++) {
        nnf_gemm_packed bp = {.side = NNF_GEMM_B, .mn = ncols, .k = s->c, .kc = j->kc,
                              .r = k->cfg->nr, .mn_pad = j->npad, .data = v + xi * j->vstride};
        nnf_gemm_src a = nnf_gemm_src_packed(k->packed_w[xi]), bsrc = nnf_gemm_src_packed(&bp);
        if (nnf_gemm_run(k->cfg, s->oc, ncols, s->c, &a, &bsrc, m + xi * j->mstride, ncols,
                         NULL, NULL) != NNF_OK) {
            atomic_store(&j->failed, 1);
            goto done;
        }
    }
    const nnf_epilogue *ep = j->ep;
    nnf_ep_fast f = nnf_ep_fast_init(ep);
    for (size_t oc = 0; oc < s->oc; oc++) {
        size_t yo = (b * s->oc + oc) * oplane;
        __m256 bias = _mm256_set1_ps(ep->bias ? ep->bias[oc] : 0.0f);
        nnf_tile_ep te = {.ep = ep, .bias = ep->bias ? ep->bias + oc : NULL};
        for (size_t r = 0; r < rows; r++)
            output_tile_row(j, m, ncols, oc, th0 + r, r * j->twp, j->y + yo,
                            ep->residual ? ep->residual + yo : NULL, &f, bias, &te);
    }
done:
    atomic_store_explicit(&j->busy[slot], 0, memory_order_release);
}

static _Thread_local float *t_wg_scratch;
static _Thread_local size_t t_wg_floats;

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }
/* The 36 operands are read or written together: a stride of a multiple of
 * 4 KiB (or a large power of two) maps them all to a few L1 sets, which
 * cost the first version a third of its transforms. An odd number of cache
 * lines spreads them over every set. */
static size_t odd_lines(size_t n) {
    n = round16(n);
    return (n / 16) % 2 ? n : n + 16;
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
    j->twp = (j->tw + 7) / 8 * 8;
    j->wst = j->twp * 4 + 8;
    j->kc = nnf_gemm_kc(k->cfg, s->c);
    /* A block's 36 transformed inputs and 36 products should stay in L2/L3
     * while the GEMMs and the output transform read them back. */
    size_t target = (size_t)(2u << 20) / (36 * sizeof(float) * (s->c + s->oc));
    size_t rows = target / j->twp;
    if (rows < 1)
        rows = 1;
    if (rows > j->th)
        rows = j->th;
    /* enough items for every thread */
    int threads = nnf_threadpool_size(pool);
    size_t items_min = (size_t)(threads > 1 ? 2 * threads : 1);
    while (rows > 1 && s->n * ((j->th + rows - 1) / rows) < items_min)
        rows = (rows + 1) / 2;
    j->rows_blk = rows;
    j->blocks = (j->th + rows - 1) / rows;
    j->ncols = rows * j->twp;
    j->npad = (j->ncols + k->cfg->nr - 1) / k->cfg->nr * k->cfg->nr;
    size_t vf, mf, total;
    if (!nnf_mul_size(s->c, j->npad, &vf) || !nnf_mul_size(s->oc, j->ncols, &mf) ||
        !nnf_mul_size(odd_lines(vf), 36, &vf) || !nnf_mul_size(odd_lines(mf), 36, &mf)) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: convolution too large", k->name);
        goto fail;
    }
    j->vstride = odd_lines(s->c * j->npad);
    j->mstride = odd_lines(s->oc * j->ncols);
    j->off_v = round16(6 * j->wst);
    j->off_m = j->off_v + round16(vf);
    j->slot_floats = j->off_m + round16(mf);
    size_t items = s->n * j->blocks;
    j->slots = threads < WG_MAX_SLOTS ? threads : WG_MAX_SLOTS;
    if ((size_t)j->slots > items)
        j->slots = (int)items;
    if (!nnf_mul_size(j->slot_floats, (size_t)j->slots, &total) ||
        !nnf_mul_size(total, sizeof(float), &vf)) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: convolution too large", k->name);
        goto fail;
    }
    if (total > t_wg_floats) {
        float *p = nnf_malloc_aligned(total * sizeof(float));
        if (!p) {
            st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory for Winograd scratch", k->name);
            goto fail;
        }
        nnf_free_aligned(t_wg_scratch);
        t_wg_scratch = p;
        t_wg_floats = total;
    }
    j->scratch = t_wg_scratch;
    nnf_parallel_for(pool, items, wg_task, j);
    if (atomic_load(&j->failed))
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: a Winograd GEMM failed", k->name);
fail:
    nnf_free(j);
    return st;
}

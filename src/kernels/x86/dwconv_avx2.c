/* f32_dwconv{3,5}_s{1,2}_avx2: one output row of a depthwise convolution
 * from k input row pointers, 16 outputs per step (two accumulator chains per
 * vector so the FMA latency is hidden), the epilogue applied in registers.
 * The caller guarantees every vector load's window is readable (conv_fast.c:
 * input rows for interior outputs, a padded window at the edges); the
 * row's tail is stored with a mask. Used for the
 * AVX-512 tier as well (the kernel is memory-bound). */
#include "kernels/conv_fast.h"
#include "kernels/x86/ep_fast_avx2.h"

#include <string.h>

static inline __m256i bias_mask_all(void) { return _mm256_set1_epi32(-1); }

/* Eight inputs x[0], x[S], ..., x[7S] for S = 1 or 2. */
static inline __m256 load_strided(const float *x, size_t s) {
    if (s == 1)
        return _mm256_loadu_ps(x);
    __m256 lo = _mm256_loadu_ps(x), hi = _mm256_loadu_ps(x + 8);
    __m256 even = _mm256_shuffle_ps(lo, hi, 0x88); /* lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6 */
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xd8));
}

static inline __attribute__((always_inline)) void
dw_row(const float *const *x, const float *w, const size_t k, const size_t s, float *y, size_t ow,
       const nnf_tile_ep *t) {
    nnf_ep_fast f = nnf_ep_fast_init(t->ep);
    __m256 bias = _mm256_set1_ps(t->ep->bias_kind == NNF_BIAS_PER_ROW ? t->bias[0] : 0.0f);
    if (t->ep->bias_kind == NNF_BIAS_PER_COL)
        f.clamp_only = 0;
    __m256 wv[25];
    for (size_t i = 0; i < k * k; i++)
        wv[i] = _mm256_broadcast_ss(w + i);
    for (size_t o = 0; o < ow; o += 16) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
        for (size_t i = 0; i < k; i++) {
            const float *xr = x[i] + o * s;
            for (size_t j = 0; j < k; j++) {
                __m256 wij = wv[i * k + j];
                if (j & 1) {
                    a1 = _mm256_fmadd_ps(wij, load_strided(xr + j, s), a1);
                    b1 = _mm256_fmadd_ps(wij, load_strided(xr + 8 * s + j, s), b1);
                } else {
                    a0 = _mm256_fmadd_ps(wij, load_strided(xr + j, s), a0);
                    b0 = _mm256_fmadd_ps(wij, load_strided(xr + 8 * s + j, s), b0);
                }
            }
        }
        __m256 v0 = _mm256_add_ps(a0, a1), v1 = _mm256_add_ps(b0, b1);
        size_t left = ow - o;
        if (f.clamp_only) {
            const float *res = t->residual ? t->residual + o : NULL;
            if (left >= 16) {
                _mm256_storeu_ps(y + o, nnf_ep_fast8(&f, v0, bias, res, 1, bias_mask_all()));
                _mm256_storeu_ps(y + o + 8,
                                 nnf_ep_fast8(&f, v1, bias, res ? res + 8 : NULL, 1, bias_mask_all()));
            } else {
                __m256i m0 = nnf_mask8(left), m1 = nnf_mask8(left > 8 ? left - 8 : 0);
                _mm256_maskstore_ps(y + o, m0, nnf_ep_fast8(&f, v0, bias, res, 0, m0));
                if (left > 8)
                    _mm256_maskstore_ps(y + o + 8, m1,
                                        nnf_ep_fast8(&f, v1, bias, res ? res + 8 : NULL, 0, m1));
            }
        } else if (left >= 16) {
            _mm256_storeu_ps(y + o, nnf_ep8(v0, t, 0, o, 1, nnf_mask8(8)));
            _mm256_storeu_ps(y + o + 8, nnf_ep8(v1, t, 0, o + 8, 1, nnf_mask8(8)));
        } else {
            __m256i m0 = nnf_mask8(left), m1 = nnf_mask8(left > 8 ? left - 8 : 0);
            _mm256_maskstore_ps(y + o, m0, nnf_ep8(v0, t, 0, o, left >= 8, m0));
            if (left > 8)
                _mm256_maskstore_ps(y + o + 8, m1, nnf_ep8(v1, t, 0, o + 8, 0, m1));
        }
    }
}

void nnf_dw_row_avx2(const float *const *x, const float *w, size_t k, size_t s, float *y,
                     size_t ow, const nnf_tile_ep *t) {
    /* constant k and s let the compiler unroll the taps */
    if (k == 3 && s == 1)
        dw_row(x, w, 3, 1, y, ow, t);
    else if (k == 3 && s == 2)
        dw_row(x, w, 3, 2, y, ow, t);
    else if (k == 5 && s == 1)
        dw_row(x, w, 5, 1, y, ow, t);
    else if (k == 5 && s == 2)
        dw_row(x, w, 5, 2, y, ow, t);
    else
        nnf_dw_row_scalar(x, w, k, s, y, ow, t);
}

/* 8 x 8 transpose: o[c][i] = r[i][c] (r is clobbered). */
static inline __attribute__((always_inline)) void transpose8(__m256 r[8], __m256 o[8]) {
    __m256 t[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    /* r[0..3]: columns 0-3 of rows 0-3 | 4-7; r[4..7]: the same for rows 4-7 */
    for (int c = 0; c < 4; c++) {
        o[c] = _mm256_permute2f128_ps(r[c], r[c + 4], 0x20);
        o[c + 4] = _mm256_permute2f128_ps(r[c], r[c + 4], 0x31);
    }
}

/* Loads padded row pr of the tile into the interleaved [wp][8] row d:
 * columns of the nc planes transposed 8 at a time, zeros for padding. */
static inline __attribute__((always_inline)) void
dw_c8_load_row(const nnf_conv2d_shape *s, const float *x, size_t nc, size_t pr, size_t wp,
               size_t cols, float *d) {
    ptrdiff_t ih = (ptrdiff_t)pr - (ptrdiff_t)s->pt;
    if (ih < 0 || (size_t)ih >= s->h) {
        memset(d, 0, wp * 8 * sizeof(float));
        return;
    }
    const size_t hw = s->h * s->w;
    const float *xr = x + (size_t)ih * s->w;
    const __m256 z = _mm256_setzero_ps();
    for (size_t c = 0; c < s->pl; c++)
        _mm256_store_ps(d + c * 8, z);
    for (size_t c = s->pl + cols; c < wp; c++)
        _mm256_store_ps(d + c * 8, z);
    float *dc = d + s->pl * 8;
    for (size_t iw = 0; iw < cols; iw += 8) {
        size_t n = cols - iw < 8 ? cols - iw : 8;
        __m256i m = nnf_mask8(n);
        __m256 r[8], o[8];
        if (n == 8 && nc == 8) {
            for (int c = 0; c < 8; c++)
                r[c] = _mm256_loadu_ps(xr + c * hw + iw);
        } else {
            for (int c = 0; c < 8; c++)
                r[c] = (size_t)c < nc ? _mm256_maskload_ps(xr + c * hw + iw, m) : z;
        }
        transpose8(r, o);
        /* a short group stores all 8 columns: those past the input are the
         * masked zeros, i.e. right padding, or land in the next row (loaded
         * after this one) or the buffer's slack */
        for (int j = 0; j < 8; j++)
            _mm256_store_ps(dc + (iw + (size_t)j) * 8, o[j]);
    }
}

/* Transposes the n (<= 8) interleaved outputs in ob (row i = output i,
 * lane = channel) into channel vectors and stores channel c's outputs
 * o0 .. o0 + n - 1 at y + c * ohw with the epilogue, c < nc. */
static inline __attribute__((always_inline)) void
dw_c8_flush(const float *ob, size_t n, float *y, size_t ohw, size_t o0, size_t nc, size_t c0,
            const nnf_epilogue *ep, const nnf_ep_fast *f, const float *res) {
    __m256 q[8], r[8];
    for (int i = 0; i < 8; i++)
        q[i] = _mm256_load_ps(ob + i * 8);
    transpose8(q, r);
    __m256i m = nnf_mask8(n);
    int full = n == 8;
    if (full && nc == 8 && f->clamp_only) {
        for (int c = 0; c < 8; c++) {
            __m256 b = f->bias ? _mm256_set1_ps(ep->bias[c0 + c]) : _mm256_setzero_ps();
            _mm256_storeu_ps(y + c * ohw + o0,
                             nnf_ep_fast8(f, r[c], b, res ? res + c * ohw + o0 : NULL, 1, m));
        }
        return;
    }
    for (size_t c = 0; c < nc; c++) {
        __m256 v;
        if (f->clamp_only) {
            __m256 b = f->bias ? _mm256_set1_ps(ep->bias[c0 + c]) : _mm256_setzero_ps();
            v = nnf_ep_fast8(f, r[c], b, res ? res + c * ohw + o0 : NULL, full, m);
        } else {
            nnf_tile_ep t = {.ep = ep,
                             .bias = ep->bias ? ep->bias + c0 + c : NULL,
                             .residual = res ? res + c * ohw : NULL};
            v = nnf_ep8(r[c], &t, 0, o0, full, m);
        }
        if (full)
            _mm256_storeu_ps(y + c * ohw + o0, v);
        else
            _mm256_maskstore_ps(y + c * ohw + o0, m, v);
    }
}

/* Depthwise vectorised across 8 channels instead of along the row: short
 * rows would waste the row kernel's 16 lanes and pay its per-row setup, and
 * at 14-56 wide the row kernel's unaligned overlapping loads run at a few
 * GB/s. The nc (<= 8) planes are interleaved, a tile of padded rows at a
 * time, into a [rows][wp][8] stack buffer through 8 x 8 transposes; each
 * output is k*k FMAs on whole vectors; 8 outputs at a time are transposed
 * back to their planes with the epilogue. Tiles overlap by k - s rows, so
 * the buffer stays in L1 for any height. */
static inline __attribute__((always_inline)) void
dw_c8(const nnf_conv2d_shape *s, const size_t k, const size_t st, const float *w, const float *x,
      float *y, size_t c0, size_t nc, const nnf_epilogue *ep, const float *res) {
    const size_t wp = (s->ow - 1) * st + k, ohw = s->oh * s->ow;
    /* input columns past the last window (stride 2) are never read */
    const size_t cols = s->w < wp - s->pl ? s->w : wp - s->pl;
    const size_t tile = (NNF_DW_C8_MAX / wp - k) / st + 1;
    _Alignas(32) float buf[(NNF_DW_C8_MAX + 8) * 8];
    _Alignas(32) float tmp[8], ob[64];
    __m256 wv[25];
#pragma GCC unroll 25
    for (size_t t = 0; t < k * k; t++) {
        for (size_t c = 0; c < 8; c++)
            tmp[c] = c < nc ? w[(c0 + c) * k * k + t] : 0.0f;
        wv[t] = _mm256_load_ps(tmp);
    }
    nnf_ep_fast f = nnf_ep_fast_init(ep);
    if (ep->bias_kind != NNF_BIAS_NONE && ep->bias_kind != NNF_BIAS_PER_ROW)
        f.clamp_only = 0;
    size_t nb = 0, o = 0;
    for (size_t oh0 = 0; oh0 < s->oh; oh0 += tile) {
        size_t th = s->oh - oh0 < tile ? s->oh - oh0 : tile;
        size_t rows = (th - 1) * st + k;
        for (size_t r = 0; r < rows; r++)
            dw_c8_load_row(s, x, nc, oh0 * st + r, wp, cols, buf + r * wp * 8);
        for (size_t oh = 0; oh < th; oh++) {
            size_t ow = 0;
            /* two outputs at a time share k - s of each row's loads; each
             * output's sum is formed in the same order as below */
            for (; ow + 1 < s->ow; ow += 2) {
                const float *p = buf + (oh * st * wp + ow * st) * 8;
                __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
                __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
#pragma GCC unroll 5
                for (size_t i = 0; i < k; i++)
#pragma GCC unroll 7
                    for (size_t j = 0; j < k + st; j++) {
                        __m256 v = _mm256_load_ps(p + (i * wp + j) * 8);
                        if (j < k) {
                            if (j & 1)
                                a1 = _mm256_fmadd_ps(wv[i * k + j], v, a1);
                            else
                                a0 = _mm256_fmadd_ps(wv[i * k + j], v, a0);
                        }
                        if (j >= st) {
                            if ((j - st) & 1)
                                b1 = _mm256_fmadd_ps(wv[i * k + j - st], v, b1);
                            else
                                b0 = _mm256_fmadd_ps(wv[i * k + j - st], v, b0);
                        }
                    }
                _mm256_store_ps(ob + nb * 8, _mm256_add_ps(a0, a1));
                if (++nb == 8) {
                    dw_c8_flush(ob, nb, y, ohw, o + 1 - nb, nc, c0, ep, &f, res);
                    nb = 0;
                }
                o++;
                _mm256_store_ps(ob + nb * 8, _mm256_add_ps(b0, b1));
                if (++nb == 8 || o + 1 == ohw) {
                    dw_c8_flush(ob, nb, y, ohw, o + 1 - nb, nc, c0, ep, &f, res);
                    nb = 0;
                }
                o++;
            }
            for (; ow < s->ow; ow++, o++) {
                const float *p = buf + (oh * st * wp + ow * st) * 8;
                __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
                /* unrolled so the taps' weights stay in registers */
#pragma GCC unroll 5
                for (size_t i = 0; i < k; i++)
#pragma GCC unroll 5
                    for (size_t j = 0; j < k; j++) {
                        __m256 v = _mm256_load_ps(p + (i * wp + j) * 8);
                        if (j & 1)
                            a1 = _mm256_fmadd_ps(wv[i * k + j], v, a1);
                        else
                            a0 = _mm256_fmadd_ps(wv[i * k + j], v, a0);
                    }
                _mm256_store_ps(ob + nb * 8, _mm256_add_ps(a0, a1));
                if (++nb == 8 || o + 1 == ohw) {
                    dw_c8_flush(ob, nb, y, ohw, o + 1 - nb, nc, c0, ep, &f, res);
                    nb = 0;
                }
            }
        }
    }
}

void nnf_dw_c8_avx2(const nnf_conv2d_shape *s, const float *w, const float *x, float *y, size_t c0,
                    size_t nc, const nnf_epilogue *ep, const float *res) {
    if (s->kh == 3 && s->sh == 1)
        dw_c8(s, 3, 1, w, x, y, c0, nc, ep, res);
    else if (s->kh == 3)
        dw_c8(s, 3, 2, w, x, y, c0, nc, ep, res);
    else if (s->sh == 1)
        dw_c8(s, 5, 1, w, x, y, c0, nc, ep, res);
    else
        dw_c8(s, 5, 2, w, x, y, c0, nc, ep, res);
}

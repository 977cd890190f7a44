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

/* Transposes the 8 x 8 block r (row i = output i, lane = channel) and
 * stores channel c's n (<= 8) consecutive outputs at y + c * ld, c < nc. */
static inline void dw_small_flush(const float *ob, size_t n, float *y, size_t ld, size_t nc) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_load_ps(ob + i * 8);
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
    /* r[0..3] hold channels 0,1,2,3 (outputs 0-3 | 4-7 of rows 0-3), r[4..7]
     * the same for rows 4-7 */
    for (int c = 0; c < 4; c++) {
        t[c] = _mm256_permute2f128_ps(r[c], r[c + 4], 0x20);
        t[c + 4] = _mm256_permute2f128_ps(r[c], r[c + 4], 0x31);
    }
    __m256i m = nnf_mask8(n);
    for (size_t c = 0; c < nc; c++) {
        if (n == 8)
            _mm256_storeu_ps(y + c * ld, t[c]);
        else
            _mm256_maskstore_ps(y + c * ld, m, t[c]);
    }
}

/* Small planes, vectorised across 8 channels instead of along the row: a
 * 7-wide row would fill 7 of the row kernel's 16 lanes, and the per-plane
 * and per-row setup costs more than the arithmetic. The nc (<= 8) planes are
 * interleaved into a zero-padded [hp][wp][8] window on the stack, each
 * output is k*k FMAs on whole vectors, and the 8 results are scattered back
 * to their planes. */
static inline __attribute__((always_inline)) void
dw_small(const nnf_conv2d_shape *s, const size_t k, const size_t st, const float *w, const float *x,
         float *y, size_t c0, size_t nc, const nnf_epilogue *ep, const float *res) {
    const size_t hp = (s->oh - 1) * st + k, wp = (s->ow - 1) * st + k;
    const size_t hw = s->h * s->w, ohw = s->oh * s->ow;
    _Alignas(32) float buf[NNF_DW_SMALL_MAX * 8];
    _Alignas(32) float tmp[8], ob[64];
    size_t nb = 0;
    memset(buf, 0, hp * wp * 8 * sizeof(float));
    /* input rows/columns past the last window (stride 2) are never read */
    size_t rows = s->h < hp - s->pt ? s->h : hp - s->pt;
    size_t cols = s->w < wp - s->pl ? s->w : wp - s->pl;
    for (size_t c = 0; c < nc; c++) {
        const float *xc = x + c * hw;
        for (size_t ih = 0; ih < rows; ih++) {
            float *d = buf + ((ih + s->pt) * wp + s->pl) * 8 + c;
            const float *xr = xc + ih * s->w;
            for (size_t iw = 0; iw < cols; iw++)
                d[iw * 8] = xr[iw];
        }
    }
    __m256 wv[25];
    for (size_t t = 0; t < k * k; t++) {
        for (size_t c = 0; c < 8; c++)
            tmp[c] = c < nc ? w[(c0 + c) * k * k + t] : 0.0f;
        wv[t] = _mm256_load_ps(tmp);
    }
    nnf_ep_fast f = nnf_ep_fast_init(ep);
    __m256i cmask = nnf_mask8(nc);
    __m256 bias = _mm256_setzero_ps();
    if (ep->bias_kind == NNF_BIAS_PER_ROW)
        bias = _mm256_maskload_ps(ep->bias + c0, cmask);
    else if (ep->bias_kind != NNF_BIAS_NONE)
        f.clamp_only = 0;
    /* residual lane c of output o sits at res[c * ohw + o] (ohw * 8 fits:
     * the window is at most NNF_DW_SMALL_MAX) */
    __m256i ridx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                      _mm256_set1_epi32((int)ohw));
    for (size_t oh = 0; oh < s->oh; oh++) {
        for (size_t ow = 0; ow < s->ow; ow++) {
            const float *p = buf + (oh * st * wp + ow * st) * 8;
            __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
            for (size_t i = 0; i < k; i++)
                for (size_t j = 0; j < k; j++) {
                    __m256 v = _mm256_load_ps(p + (i * wp + j) * 8);
                    if (j & 1)
                        a1 = _mm256_fmadd_ps(wv[i * k + j], v, a1);
                    else
                        a0 = _mm256_fmadd_ps(wv[i * k + j], v, a0);
                }
            __m256 v = _mm256_add_ps(a0, a1);
            size_t o = oh * s->ow + ow;
            if (f.clamp_only) {
                if (f.bias)
                    v = _mm256_add_ps(v, bias);
                if (res)
                    v = _mm256_add_ps(v, _mm256_mask_i32gather_ps(_mm256_setzero_ps(), res + o, ridx,
                                                                  _mm256_castsi256_ps(cmask), 4));
                if (f.clamp)
                    v = _mm256_min_ps(f.hi, _mm256_max_ps(f.lo, v));
                _mm256_store_ps(ob + nb * 8, v);
                if (++nb == 8 || o + 1 == ohw) {
                    dw_small_flush(ob, nb, y + o + 1 - nb, ohw, nc);
                    nb = 0;
                }
            } else {
                _mm256_store_ps(tmp, v);
                for (size_t c = 0; c < nc; c++) {
                    nnf_tile_ep t = {.ep = ep,
                                     .bias = ep->bias ? ep->bias + c0 + c : NULL,
                                     .residual = res ? res + c * ohw : NULL};
                    y[c * ohw + o] = nnf_epilogue_scalar(&t, 0, o, tmp[c]);
                }
            }
        }
    }
}

void nnf_dw_small_avx2(const nnf_conv2d_shape *s, const float *w, const float *x, float *y,
                       size_t c0, size_t nc, const nnf_epilogue *ep, const float *res) {
    if (s->kh == 3 && s->sh == 1)
        dw_small(s, 3, 1, w, x, y, c0, nc, ep, res);
    else if (s->kh == 3)
        dw_small(s, 3, 2, w, x, y, c0, nc, ep, res);
    else if (s->sh == 1)
        dw_small(s, 5, 1, w, x, y, c0, nc, ep, res);
    else
        dw_small(s, 5, 2, w, x, y, c0, nc, ep, res);
}

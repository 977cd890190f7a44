/* f32_dwconv{3,5}_s{1,2}_avx2: one output row of a depthwise convolution
 * from k input row pointers, 16 outputs per step (two accumulator chains per
 * vector so the FMA latency is hidden), the epilogue applied in registers.
 * The caller guarantees every vector load's window is readable (conv_fast.c:
 * input rows for interior outputs, a padded window at the edges); the
 * row's tail is stored with a mask. Used for the
 * AVX-512 tier as well (the kernel is memory-bound). */
#include "kernels/conv_fast.h"
#include "kernels/x86/ep_fast_avx2.h"

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

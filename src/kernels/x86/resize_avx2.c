/* AVX2 row kernels of the fast Resize: 2x element duplication and index
 * gathers. Both only copy floats, so results are the inputs' bits. */
#include "kernels/resize_fast.h"

#include <immintrin.h>

void nnf_resize_dup2_avx2(const float *x, size_t n, float *y, size_t ystride, size_t nrows) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 lo = _mm256_unpacklo_ps(v, v); /* x0 x0 x1 x1 | x4 x4 x5 x5 */
        __m256 hi = _mm256_unpackhi_ps(v, v); /* x2 x2 x3 x3 | x6 x6 x7 x7 */
        __m256 a = _mm256_permute2f128_ps(lo, hi, 0x20), b = _mm256_permute2f128_ps(lo, hi, 0x31);
        for (size_t r = 0; r < nrows; r++) {
            _mm256_storeu_ps(y + r * ystride + 2 * i, a);
            _mm256_storeu_ps(y + r * ystride + 2 * i + 8, b);
        }
    }
    for (; i < n; i++)
        for (size_t r = 0; r < nrows; r++)
            y[r * ystride + 2 * i] = y[r * ystride + 2 * i + 1] = x[i];
}

void nnf_resize_gather_avx2(const float *x, const int32_t *idx, float *y, size_t n) {
    size_t o = 0;
    for (; o + 8 <= n; o += 8)
        _mm256_storeu_ps(y + o,
                         _mm256_i32gather_ps(x, _mm256_loadu_si256((const __m256i *)(idx + o)), 4));
    for (; o < n; o++)
        y[o] = x[idx[o]];
}

void nnf_resize_blend_avx2(const float *const *h, const float *a, int terms, float *y, size_t n) {
    const __m256 z = _mm256_setzero_ps();
    __m256 va[4];
    for (int k = 0; k < terms; k++)
        va[k] = _mm256_set1_ps(a[k]);
    size_t o = 0;
    for (; o + 8 <= n; o += 8) {
        __m256 acc = _mm256_add_ps(z, _mm256_mul_ps(va[0], _mm256_loadu_ps(h[0] + o)));
        for (int k = 1; k < terms; k++)
            acc = _mm256_add_ps(acc, _mm256_mul_ps(va[k], _mm256_loadu_ps(h[k] + o)));
        _mm256_storeu_ps(y + o, acc);
    }
    for (; o < n; o++) { /* each product its own statement: never contracted into an FMA */
        float acc = 0.0f;
        for (int k = 0; k < terms; k++) {
            float p = a[k] * h[k][o];
            acc += p;
        }
        y[o] = acc;
    }
}

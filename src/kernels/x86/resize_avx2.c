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

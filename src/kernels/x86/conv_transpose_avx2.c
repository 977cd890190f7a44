/* The AVX2 row primitives of the transposed convolution's col2im and its
 * rows (conv_transpose_rows.h says what each primitive does;
 * kernels/conv_transpose.c owns the bands and the threading). No masked
 * stores: slow on AMD cores. */
#include "kernels/conv_transpose.h"

#include <immintrin.h>

static inline void convt_fill(float *d, float v, size_t n) {
    __m256 b = _mm256_set1_ps(v);
    for (size_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(d + i, b);
}

static inline void convt_set(float *restrict d, const float *restrict s, float v, size_t n) {
    __m256 b = _mm256_set1_ps(v);
    for (size_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_add_ps(_mm256_loadu_ps(s + i), b));
}

static inline void convt_add(float *restrict d, const float *restrict s, size_t n) {
    for (size_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_add_ps(_mm256_loadu_ps(d + i), _mm256_loadu_ps(s + i)));
}

/* The last 8 sums are taken before the loop writes any, and stored last
 * (the overlap twice, the same values): a tail added one float at a time
 * left the next primitive's vector loads of those floats waiting on
 * several stores (a 4x4 s2's runs are 15 long). */
static inline void convt_add_exact(float *restrict d, const float *restrict s, size_t n) {
    if (n < 8) {
        for (size_t i = 0; i < n; i++)
            d[i] += s[i];
        return;
    }
    __m256 last = _mm256_add_ps(_mm256_loadu_ps(d + n - 8), _mm256_loadu_ps(s + n - 8));
    for (size_t i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_add_ps(_mm256_loadu_ps(d + i), _mm256_loadu_ps(s + i)));
    _mm256_storeu_ps(d + n - 8, last);
}

static inline void convt_interleave2(float *restrict y, const float *restrict p0,
                                     const float *restrict p1, size_t n) {
    size_t t = 0;
    for (; t + 8 <= n; t += 8) {
        __m256 a = _mm256_loadu_ps(p0 + t), b = _mm256_loadu_ps(p1 + t);
        __m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);
        _mm256_storeu_ps(y + 2 * t, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(y + 2 * t + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
    if (t + 4 <= n) {
        __m128 a = _mm_loadu_ps(p0 + t), b = _mm_loadu_ps(p1 + t);
        _mm_storeu_ps(y + 2 * t, _mm_unpacklo_ps(a, b));
        _mm_storeu_ps(y + 2 * t + 4, _mm_unpackhi_ps(a, b));
        t += 4;
    }
    for (; t < n; t++) {
        y[2 * t] = p0[t];
        y[2 * t + 1] = p1[t];
    }
}

static inline void convt_interleave2_bias(float *restrict y, const float *restrict p0,
                                          const float *restrict p1, float b, size_t n) {
    const __m256 vb = _mm256_set1_ps(b);
    size_t t = 0;
    for (; t + 8 <= n; t += 8) {
        __m256 a = _mm256_add_ps(_mm256_loadu_ps(p0 + t), vb);
        __m256 c = _mm256_add_ps(_mm256_loadu_ps(p1 + t), vb);
        __m256 lo = _mm256_unpacklo_ps(a, c), hi = _mm256_unpackhi_ps(a, c);
        _mm256_storeu_ps(y + 2 * t, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(y + 2 * t + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
    for (; t < n; t++) {
        y[2 * t] = p0[t] + b;
        y[2 * t + 1] = p1[t] + b;
    }
}

#define NNF_CONVT_ROWS nnf_convt_rows_avx2
#include "kernels/conv_transpose_rows.h"

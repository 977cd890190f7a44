/* The AVX2 Winograd F(4x4,3x3) 1-D transforms on six vectors, shared by the
 * NCHW kernel (x86/winograd_avx2.c, vectors along a tile row) and the
 * blocked one (x86/nchwc_winograd_avx2.c, vectors of 8 channels). */
#ifndef NNF_KERNELS_X86_WINOGRAD_AVX2_H
#define NNF_KERNELS_X86_WINOGRAD_AVX2_H

#include <immintrin.h>

/* B^T on six vectors. */
static inline __attribute__((always_inline)) void nnf_wino_bt6(const __m256 d[6], __m256 o[6]) {
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
static inline __attribute__((always_inline)) void nnf_wino_at4(const __m256 m[6], __m256 o[4]) {
    __m256 p12 = _mm256_add_ps(m[1], m[2]), n12 = _mm256_sub_ps(m[1], m[2]);
    __m256 p34 = _mm256_add_ps(m[3], m[4]), n34 = _mm256_sub_ps(m[3], m[4]);
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], p12), p34);
    o[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), n34, n12);
    o[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), p34, p12);
    o[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), n34, n12), m[5]);
}

#endif

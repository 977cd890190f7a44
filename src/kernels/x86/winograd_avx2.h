/* The Winograd 1-D transforms, F(4,3) on six vectors and F(2,3) on four,
 * shared by the NCHW kernel (x86/winograd_avx2.c, vectors along a tile
 * row) and the blocked ones (x86/nchwc_winograd_avx2.c, vectors of 8
 * channels; x86/nchwc_winograd_avx512.c, of 16). NNF_WINO_1D writes them
 * for one vector type: the same operations in the same order on every
 * width. */
#ifndef NNF_KERNELS_X86_WINOGRAD_AVX2_H
#define NNF_KERNELS_X86_WINOGRAD_AVX2_H

#include <immintrin.h>
#include <stddef.h>

/* B^T (nnf_wino_bt6##S) and A^T (nnf_wino_at4##S) on vectors V, with the
 * width's add, sub, mul, fmadd, fmsub and set1; F(2,3)'s on the points 0,
 * 1, -1, inf (nnf_wino_bt4##S, nnf_wino_at2##S: nnf_wino_f2_bt,
 * nnf_wino_f2_at); the stride-2 form's F(4,2) on 0, 1, -1, 2, inf
 * (nnf_wino2_bt5##S, nnf_wino2_at4##S: nnf_wino2_bt, nnf_wino2_at). */
#define NNF_WINO_1D(S, V, ADD, SUB, MUL, FMA, FMS, SET1)                                           \
    static inline __attribute__((always_inline)) void nnf_wino_bt6##S(const V d[6], V o[6]) {      \
        const V c4 = SET1(4.0f), c5 = SET1(-5.0f), c2 = SET1(2.0f), m4 = SET1(-4.0f);              \
        o[0] = FMA(c4, d[0], FMA(c5, d[2], d[4]));                                                 \
        V a = FMA(m4, d[2], d[4]), b = FMA(m4, d[1], d[3]);                                        \
        o[1] = ADD(a, b);                                                                          \
        o[2] = SUB(a, b);                                                                          \
        V c = SUB(d[4], d[2]), e = MUL(c2, SUB(d[3], d[1]));                                       \
        o[3] = ADD(c, e);                                                                          \
        o[4] = SUB(c, e);                                                                          \
        o[5] = FMA(c4, d[1], FMA(c5, d[3], d[5]));                                                 \
    }                                                                                              \
    static inline __attribute__((always_inline)) void nnf_wino_at4##S(const V m[6], V o[4]) {      \
        V p12 = ADD(m[1], m[2]), n12 = SUB(m[1], m[2]);                                            \
        V p34 = ADD(m[3], m[4]), n34 = SUB(m[3], m[4]);                                            \
        o[0] = ADD(ADD(m[0], p12), p34);                                                           \
        o[1] = FMA(SET1(2.0f), n34, n12);                                                          \
        o[2] = FMA(SET1(4.0f), p34, p12);                                                          \
        o[3] = ADD(FMA(SET1(8.0f), n34, n12), m[5]);                                               \
    }                                                                                              \
    static inline __attribute__((always_inline)) void nnf_wino_bt4##S(const V d[4], V o[4]) {      \
        o[0] = SUB(d[0], d[2]);                                                                    \
        o[1] = ADD(d[1], d[2]);                                                                    \
        o[2] = SUB(d[2], d[1]);                                                                    \
        o[3] = SUB(d[1], d[3]);                                                                    \
    }                                                                                              \
    static inline __attribute__((always_inline)) void nnf_wino_at2##S(const V m[4], V o[2]) {      \
        o[0] = ADD(ADD(m[0], m[1]), m[2]);                                                         \
        o[1] = SUB(SUB(m[1], m[2]), m[3]);                                                         \
    }                                                                                              \
    static inline __attribute__((always_inline)) void nnf_wino2_bt5##S(const V d[5], V o[5]) {     \
        const V two = SET1(2.0f), three = SET1(3.0f), m2 = SET1(-2.0f);                            \
        V t = SUB(d[3], d[1]);                                                                     \
        o[0] = FMA(two, SUB(d[0], d[2]), t);                                                       \
        o[1] = FMA(two, d[1], SUB(d[2], d[3]));                                                    \
        o[2] = FMS(three, d[2], FMA(two, d[1], d[3]));                                             \
        o[3] = t;                                                                                  \
        o[4] = FMA(m2, t, SUB(d[4], d[2]));                                                        \
    }                                                                                              \
    static inline __attribute__((always_inline)) void nnf_wino2_at4##S(const V m[5], V o[4]) {     \
        V p = ADD(m[1], m[2]), n = SUB(m[1], m[2]);                                                \
        o[0] = ADD(ADD(m[0], p), m[3]);                                                            \
        o[1] = FMA(SET1(2.0f), m[3], n);                                                           \
        o[2] = FMA(SET1(4.0f), m[3], p);                                                           \
        o[3] = ADD(FMA(SET1(8.0f), m[3], n), m[4]);                                                \
    }

NNF_WINO_1D(, __m256, _mm256_add_ps, _mm256_sub_ps, _mm256_mul_ps, _mm256_fmadd_ps, _mm256_fmsub_ps,
            _mm256_set1_ps)

/* Pixel (ih, iw) of the NCHWc8 block at xc (rows `row` floats apart) for
 * the AVX2 blocked transforms (x86/nchwc_winograd_avx2.c,
 * x86/nchwc_winograd_s2_avx2.c): zeros outside an H x W input unless
 * INSIDE says the whole patch is in (a constant: no test then). The
 * AVX-512 files' twin is nnf_load_pixel_pair. */
static inline __attribute__((always_inline)) __m256 nnf_wino_pixel8(const int INSIDE,
                                                                    const float *xc, size_t row,
                                                                    ptrdiff_t ih, ptrdiff_t iw,
                                                                    ptrdiff_t H, ptrdiff_t W) {
    return INSIDE || (ih >= 0 && ih < H && iw >= 0 && iw < W)
               ? _mm256_loadu_ps(xc + ih * (ptrdiff_t)row + iw * 8)
               : _mm256_setzero_ps();
}

/* The weight transforms' panel steps (x86/winograd_avx2.c,
 * x86/nchwc_winograd_avx2.c, x86/nchwc_winograd_s2_avx2.c; on every SIMD
 * tier: a load-time pass, in doubles rounded once):
 * input channel kk's 3x3 taps of the panel's m output channels as t[q][o],
 * and row kk of n matrices (r <= 32 floats each, from line) streamed whole,
 * its lines one after the other (half lines streamed to the matrices in
 * turn left write-combining buffers part full). */
static inline void nnf_wino_panel_taps(const float *w, size_t stride, size_t m, size_t kk,
                                       double t[9][32]) {
    for (size_t o = 0; o < m; o++)
        for (int q = 0; q < 9; q++)
            t[q][o] = w[o * stride + kk * 9 + (size_t)q];
}

static inline void nnf_wino_stream_rows(float *const *dst, int n, size_t kk, size_t r,
                                        const float (*line)[32]) {
    for (int xi = 0; xi < n; xi++)
        for (size_t o = 0; o < r; o += 8)
            _mm256_stream_ps(dst[xi] + kk * r + o, _mm256_load_ps(line[xi] + o));
}

#endif

/* The Winograd 1-D transforms, F(4,3) on six vectors and F(2,3) on four,
 * shared by the NCHW kernel (x86/winograd_avx2.c, vectors along a tile
 * row) and the blocked ones (x86/nchwc_winograd_avx2.c, vectors of 8
 * channels; x86/nchwc_winograd_avx512.c, of 16). NNF_WINO_1D writes them
 * for one vector type: the same operations in the same order on every
 * width. */
#ifndef NNF_KERNELS_X86_WINOGRAD_AVX2_H
#define NNF_KERNELS_X86_WINOGRAD_AVX2_H

#include "kernels/x86/transpose_avx2.h"

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

/* The weight transforms' panel steps (every form on both SIMD tiers, a
 * load-time pass in doubles rounded once; NNF_WINO_WEIGHTS below):
 * input channel kk's 3x3 taps of the panel's m output channels as t[q][o]
 * (floats, exact in double; columns from m on left as they are), 8 channels
 * at a time by a transpose of taps 0-7; and row kk of n matrices (r <= 32
 * floats each, from line) streamed whole, its lines one after the other
 * (half lines streamed to the matrices in turn left write-combining buffers
 * part full). Tap by tap in scalar code the taps were half a transform. */
static inline void nnf_wino_panel_taps(const float *w, size_t stride, size_t m, size_t kk,
                                       float t[9][32]) {
    size_t o = 0;
    for (; o + 8 <= m; o += 8) {
        const float *src = w + o * stride + kk * 9;
        nnf_tr8x8_avx2(src, stride, &t[0][o], 32);
        for (size_t i = 0; i < 8; i++)
            t[8][o + i] = src[i * stride + 8];
    }
    for (; o < m; o++)
        for (int q = 0; q < 9; q++)
            t[q][o] = w[o * stride + kk * 9 + (size_t)q];
}

static inline void nnf_wino_stream_rows(float *const *dst, int n, size_t kk, size_t r,
                                        const float (*line)[32]) {
    for (int xi = 0; xi < n; xi++)
        for (size_t o = 0; o < r; o += 8)
            _mm256_stream_ps(dst[xi] + kk * r + o, _mm256_load_ps(line[xi] + o));
}

/* The blocked kernels' weight forms (nchwc.h): F(4x4,3x3), F(2x2,3x3), the
 * stride-2 F(4x4). */
enum { NNF_WINO_W_F4 = 0, NNF_WINO_W_F2, NNF_WINO_W_S2 };

/* U = G g G^T of one panel for each form (nchwc.h's weight panel
 * contract), on vectors V of L doubles (L output channels): LOADF / STOREF
 * move L floats (aligned), UP widens them to V, DOWN rounds V to floats.
 * Each channel's values come from the same operations in the same order on
 * every width, so both SIMD tiers write the same bits (tested). Needs
 * nchwc.h (nnf_wino2_g) and <string.h>. */
#define NNF_WINO_WEIGHTS(S, V, L, LOADF, STOREF, UP, DOWN, ADD, SUB, MUL, SET1)                    \
    static inline V nnf_wino_wload##S(const float *p) {                                            \
        return UP(LOADF(p));                                                                       \
    }                                                                                              \
    static inline void nnf_wino_wstore##S(float *p, V v) {                                         \
        STOREF(p, DOWN(v));                                                                        \
    }                                                                                              \
    /* G of F(4,3) (nnf_wino_g) on one column (x0, x1, x2), its rows written                       \
     * out: 1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1 */        \
    static inline __attribute__((always_inline)) void nnf_wino_g6##S(V x0, V x1, V x2, V r[6]) {   \
        V s = ADD(x0, x2), p = ADD(MUL(x0, SET1(1.0 / 24)), MUL(x2, SET1(1.0 / 6)));               \
        V q = MUL(x1, SET1(1.0 / 12));                                                             \
        r[0] = MUL(x0, SET1(1.0 / 4));                                                             \
        r[1] = MUL(ADD(s, x1), SET1(-1.0 / 6));                                                    \
        r[2] = MUL(SUB(s, x1), SET1(-1.0 / 6));                                                    \
        r[3] = ADD(p, q);                                                                          \
        r[4] = SUB(p, q);                                                                          \
        r[5] = x2;                                                                                 \
    }                                                                                              \
    /* G of F(2,3) (nnf_wino_f2_g: 1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1): the                   \
     * first value, half the sum and half the difference around the middle                         \
     * one, the last (5 operations where the matrix product took 20) */                            \
    static inline __attribute__((always_inline)) void nnf_wino_g4##S(V a, V b, V c, V o[4]) {      \
        V s = ADD(a, c);                                                                           \
        o[0] = a;                                                                                  \
        o[1] = MUL(SET1(0.5), ADD(s, b));                                                          \
        o[2] = MUL(SET1(0.5), SUB(s, b));                                                          \
        o[3] = c;                                                                                  \
    }                                                                                              \
    /* One vector of output channels from o on: taps g (row-major), values                         \
     * to line[xi] + o */                                                                          \
    static inline __attribute__((always_inline)) void nnf_wino_wvec##S(                            \
        const int FORM, const V g[9], float(*line)[32], size_t o) {                                \
        if (FORM == NNF_WINO_W_F4) {                                                               \
            V t[6][3], u[6];                                                                       \
            for (int b = 0; b < 3; b++) { /* G g, column by column */                              \
                nnf_wino_g6##S(g[b], g[3 + b], g[6 + b], u);                                       \
                for (int a = 0; a < 6; a++)                                                        \
                    t[a][b] = u[a];                                                                \
            }                                                                                      \
            for (int a = 0; a < 6; a++) { /* (G g) G^T, row by row */                              \
                nnf_wino_g6##S(t[a][0], t[a][1], t[a][2], u);                                      \
                for (int b = 0; b < 6; b++)                                                        \
                    nnf_wino_wstore##S(line[a * 6 + b] + o, u[b]);                                 \
            }                                                                                      \
        } else if (FORM == NNF_WINO_W_F2) {                                                        \
            V h[3][4], u[4];                                                                       \
            for (int c = 0; c < 3; c++)                                                            \
                nnf_wino_g4##S(g[c], g[3 + c], g[6 + c], h[c]);                                    \
            for (int a = 0; a < 4; a++) {                                                          \
                nnf_wino_g4##S(h[0][a], h[1][a], h[2][a], u);                                      \
                for (int b = 0; b < 4; b++)                                                        \
                    nnf_wino_wstore##S(line[a * 4 + b] + o, u[b]);                                 \
            }                                                                                      \
        } else { /* the stride-2 form's phases (nnf_wino2_g) */                                    \
            V h[5][2];                                                                             \
            for (int a = 0; a < 5; a++) {                                                          \
                V g0 = SET1(nnf_wino2_g[a][0]), g1 = SET1(nnf_wino2_g[a][1]);                      \
                for (int b = 0; b < 2; b++)                                                        \
                    h[a][b] = ADD(MUL(g0, g[2 * b]), MUL(g1, g[6 + 2 * b]));                       \
                nnf_wino_wstore##S(line[25 + a] + o, ADD(MUL(g0, g[1]), MUL(g1, g[7])));           \
                nnf_wino_wstore##S(line[30 + a] + o, ADD(MUL(g0, g[3]), MUL(g1, g[5])));           \
            }                                                                                      \
            for (int a = 0; a < 5; a++)                                                            \
                for (int b = 0; b < 5; b++)                                                        \
                    nnf_wino_wstore##S(line[a * 5 + b] + o,                                        \
                                       ADD(MUL(h[a][0], SET1(nnf_wino2_g[b][0])),                  \
                                           MUL(h[a][1], SET1(nnf_wino2_g[b][1]))));                \
            nnf_wino_wstore##S(line[35] + o, g[4]);                                                \
        }                                                                                          \
    }                                                                                              \
    static inline __attribute__((always_inline)) void nnf_wino_wpanel##S(                          \
        const int FORM, const float *w, size_t stride, size_t m, size_t r, size_t k,               \
        float *const *dst) {                                                                       \
        _Alignas(64) float t[9][32];                                                               \
        _Alignas(64) float line[36][32];                                                           \
        const int n = FORM == NNF_WINO_W_F2 ? 16 : 36;                                             \
        memset(t, 0, sizeof t);                                                                    \
        for (size_t kk = 0; kk < k; kk++) {                                                        \
            nnf_wino_panel_taps(w, stride, m, kk, t);                                              \
            for (size_t o = 0; o < m; o += L) {                                                    \
                V g[9];                                                                            \
                for (int q = 0; q < 9; q++)                                                        \
                    g[q] = nnf_wino_wload##S(&t[q][o]);                                            \
                nnf_wino_wvec##S(FORM, g, line, o);                                                \
            }                                                                                      \
            for (int xi = 0; m < r && xi < n; xi++) /* +0 past the channels */                     \
                memset(line[xi] + m, 0, (r - m) * sizeof(float));                                  \
            nnf_wino_stream_rows(dst, n, kk, r, (const float(*)[32])line);                         \
        }                                                                                          \
        _mm_sfence(); /* the streamed lines before anything reads them */                          \
    }                                                                                              \
    void nnf_wino_weight_panel##S(const float *w, size_t stride, size_t m, size_t r, size_t k,     \
                                  float *const dst[36]) {                                          \
        nnf_wino_wpanel##S(NNF_WINO_W_F4, w, stride, m, r, k, dst);                                \
    }                                                                                              \
    void nnf_nchwc_winof2_weight_panel##S(const float *w, size_t stride, size_t m, size_t r,       \
                                          size_t k, float *const dst[16]) {                        \
        nnf_wino_wpanel##S(NNF_WINO_W_F2, w, stride, m, r, k, dst);                                \
    }                                                                                              \
    void nnf_nchwc_wino2_weight_panel##S(const float *w, size_t stride, size_t m, size_t r,        \
                                         size_t k, float *const dst[36]) {                         \
        nnf_wino_wpanel##S(NNF_WINO_W_S2, w, stride, m, r, k, dst);                                \
    }

#endif

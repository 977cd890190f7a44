/* The GEMV block kernel (gemm.h, nnf_gemv_block_fn) written once for every
 * vector width: NNF_GEMV_BLOCK(NAME, V, W, LOAD, STORE, SET1, FMA) defines
 * NAME for panels of 2 W columns on vectors V of W floats (AVX2: 8, the
 * 16-column panels; AVX-512: 16, the 32-column ones).
 *
 * M = 1 against a packed B: one K block of np consecutive panels, their
 * partial sums carried in st. Four k steps in flight (8 accumulators) cover
 * the FMA latency; B is read once, in order, a panel row per k, which is
 * what bounds it (memory, not FMAs). A block's last kcb % 4 steps go to the
 * first set of sums. */
#ifndef NNF_KERNELS_X86_GEMV_BLOCK_H
#define NNF_KERNELS_X86_GEMV_BLOCK_H

#include <stddef.h>

#define NNF_GEMV_BLOCK(NAME, V, W, LOAD, STORE, SET1, FMA)                                         \
    void NAME(size_t kcb, const float *a, size_t a_stride, const float *b, size_t np, float *st) { \
        for (size_t p = 0; p < np; p++, st += 8 * (W)) {                                           \
            V s0 = LOAD(st), s1 = LOAD(st + (W)), s2 = LOAD(st + 2 * (W));                         \
            V s3 = LOAD(st + 3 * (W)), s4 = LOAD(st + 4 * (W)), s5 = LOAD(st + 5 * (W));           \
            V s6 = LOAD(st + 6 * (W)), s7 = LOAD(st + 7 * (W));                                    \
            size_t kk = 0;                                                                         \
            for (; kk + 4 <= kcb; kk += 4, b += 8 * (W)) {                                         \
                V a0 = SET1(a[kk * a_stride]), a1 = SET1(a[(kk + 1) * a_stride]);                  \
                V a2 = SET1(a[(kk + 2) * a_stride]), a3 = SET1(a[(kk + 3) * a_stride]);            \
                s0 = FMA(a0, LOAD(b), s0);                                                         \
                s1 = FMA(a0, LOAD(b + (W)), s1);                                                   \
                s2 = FMA(a1, LOAD(b + 2 * (W)), s2);                                               \
                s3 = FMA(a1, LOAD(b + 3 * (W)), s3);                                               \
                s4 = FMA(a2, LOAD(b + 4 * (W)), s4);                                               \
                s5 = FMA(a2, LOAD(b + 5 * (W)), s5);                                               \
                s6 = FMA(a3, LOAD(b + 6 * (W)), s6);                                               \
                s7 = FMA(a3, LOAD(b + 7 * (W)), s7);                                               \
            }                                                                                      \
            for (; kk < kcb; kk++, b += 2 * (W)) {                                                 \
                V a0 = SET1(a[kk * a_stride]);                                                     \
                s0 = FMA(a0, LOAD(b), s0);                                                         \
                s1 = FMA(a0, LOAD(b + (W)), s1);                                                   \
            }                                                                                      \
            STORE(st, s0);                                                                         \
            STORE(st + (W), s1);                                                                   \
            STORE(st + 2 * (W), s2);                                                               \
            STORE(st + 3 * (W), s3);                                                               \
            STORE(st + 4 * (W), s4);                                                               \
            STORE(st + 5 * (W), s5);                                                               \
            STORE(st + 6 * (W), s6);                                                               \
            STORE(st + 7 * (W), s7);                                                               \
        }                                                                                          \
    }

/* NNF_GEMV_BLOCK2(NAME, ...): two panels side by side (16 accumulators:
 * AVX-512's 32 registers), each with the one-panel kernel's operations in
 * its order, so the same sums whichever panels pair up; an odd last panel
 * runs alone (NAME_one, an NNF_GEMV_BLOCK). B comes from memory in a model,
 * and one sequential stream kept too few lines in flight: two streams read
 * it faster (gemm_avx512.c). */
/* (clang-format would join the two definitions' lines) */
/* clang-format off */
#define NNF_GEMV_BLOCK2(NAME, V, W, LOAD, STORE, SET1, FMA)                                        \
    static NNF_GEMV_BLOCK(NAME##_one, V, W, LOAD, STORE, SET1, FMA)                                \
    void NAME(size_t kcb, const float *a, size_t a_stride, const float *b, size_t np, float *st) { \
        size_t pstride = kcb * 2 * (W);                                                            \
        size_t p = 0;                                                                              \
        for (; p + 2 <= np; p += 2, st += 16 * (W), b += 2 * pstride) {                            \
            const float *c = b + pstride, *bb = b;                                                 \
            float *su = st + 8 * (W);                                                              \
            V s0 = LOAD(st), s1 = LOAD(st + (W)), s2 = LOAD(st + 2 * (W));                         \
            V s3 = LOAD(st + 3 * (W)), s4 = LOAD(st + 4 * (W)), s5 = LOAD(st + 5 * (W));           \
            V s6 = LOAD(st + 6 * (W)), s7 = LOAD(st + 7 * (W));                                    \
            V u0 = LOAD(su), u1 = LOAD(su + (W)), u2 = LOAD(su + 2 * (W));                         \
            V u3 = LOAD(su + 3 * (W)), u4 = LOAD(su + 4 * (W)), u5 = LOAD(su + 5 * (W));           \
            V u6 = LOAD(su + 6 * (W)), u7 = LOAD(su + 7 * (W));                                    \
            size_t kk = 0;                                                                         \
            for (; kk + 4 <= kcb; kk += 4, bb += 8 * (W), c += 8 * (W)) {                          \
                V a0 = SET1(a[kk * a_stride]), a1 = SET1(a[(kk + 1) * a_stride]);                  \
                V a2 = SET1(a[(kk + 2) * a_stride]), a3 = SET1(a[(kk + 3) * a_stride]);            \
                s0 = FMA(a0, LOAD(bb), s0);                                                        \
                s1 = FMA(a0, LOAD(bb + (W)), s1);                                                  \
                u0 = FMA(a0, LOAD(c), u0);                                                         \
                u1 = FMA(a0, LOAD(c + (W)), u1);                                                   \
                s2 = FMA(a1, LOAD(bb + 2 * (W)), s2);                                              \
                s3 = FMA(a1, LOAD(bb + 3 * (W)), s3);                                              \
                u2 = FMA(a1, LOAD(c + 2 * (W)), u2);                                               \
                u3 = FMA(a1, LOAD(c + 3 * (W)), u3);                                               \
                s4 = FMA(a2, LOAD(bb + 4 * (W)), s4);                                              \
                s5 = FMA(a2, LOAD(bb + 5 * (W)), s5);                                              \
                u4 = FMA(a2, LOAD(c + 4 * (W)), u4);                                               \
                u5 = FMA(a2, LOAD(c + 5 * (W)), u5);                                               \
                s6 = FMA(a3, LOAD(bb + 6 * (W)), s6);                                              \
                s7 = FMA(a3, LOAD(bb + 7 * (W)), s7);                                              \
                u6 = FMA(a3, LOAD(c + 6 * (W)), u6);                                               \
                u7 = FMA(a3, LOAD(c + 7 * (W)), u7);                                               \
            }                                                                                      \
            for (; kk < kcb; kk++, bb += 2 * (W), c += 2 * (W)) {                                  \
                V a0 = SET1(a[kk * a_stride]);                                                     \
                s0 = FMA(a0, LOAD(bb), s0);                                                        \
                s1 = FMA(a0, LOAD(bb + (W)), s1);                                                  \
                u0 = FMA(a0, LOAD(c), u0);                                                         \
                u1 = FMA(a0, LOAD(c + (W)), u1);                                                   \
            }                                                                                      \
            STORE(st, s0);                                                                         \
            STORE(st + (W), s1);                                                                   \
            STORE(st + 2 * (W), s2);                                                               \
            STORE(st + 3 * (W), s3);                                                               \
            STORE(st + 4 * (W), s4);                                                               \
            STORE(st + 5 * (W), s5);                                                               \
            STORE(st + 6 * (W), s6);                                                               \
            STORE(st + 7 * (W), s7);                                                               \
            STORE(su, u0);                                                                         \
            STORE(su + (W), u1);                                                                   \
            STORE(su + 2 * (W), u2);                                                               \
            STORE(su + 3 * (W), u3);                                                               \
            STORE(su + 4 * (W), u4);                                                               \
            STORE(su + 5 * (W), u5);                                                               \
            STORE(su + 6 * (W), u6);                                                               \
            STORE(su + 7 * (W), u7);                                                               \
        }                                                                                          \
        if (p < np)                                                                                \
            NAME##_one(kcb, a, a_stride, b, 1, st);                                                \
    }
/* clang-format on */

#endif

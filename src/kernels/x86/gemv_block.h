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

/* One panel's eight sums (prefix S): loaded from st, four k steps from b
 * (a0-a3 in scope), one k step (a0), stored back. */
#define NNF_GEMV_SUMS_LOAD(V, LOAD, W, S, st)                                                      \
    V S##0 = LOAD(st), S##1 = LOAD((st) + (W)), S##2 = LOAD((st) + 2 * (W));                       \
    V S##3 = LOAD((st) + 3 * (W)), S##4 = LOAD((st) + 4 * (W)), S##5 = LOAD((st) + 5 * (W));       \
    V S##6 = LOAD((st) + 6 * (W)), S##7 = LOAD((st) + 7 * (W))
#define NNF_GEMV_SUMS_STEP4(LOAD, FMA, W, S, b)                                                    \
    S##0 = FMA(a0, LOAD(b), S##0);                                                                 \
    S##1 = FMA(a0, LOAD((b) + (W)), S##1);                                                         \
    S##2 = FMA(a1, LOAD((b) + 2 * (W)), S##2);                                                     \
    S##3 = FMA(a1, LOAD((b) + 3 * (W)), S##3);                                                     \
    S##4 = FMA(a2, LOAD((b) + 4 * (W)), S##4);                                                     \
    S##5 = FMA(a2, LOAD((b) + 5 * (W)), S##5);                                                     \
    S##6 = FMA(a3, LOAD((b) + 6 * (W)), S##6);                                                     \
    S##7 = FMA(a3, LOAD((b) + 7 * (W)), S##7)
#define NNF_GEMV_SUMS_STEP1(LOAD, FMA, W, S, b)                                                    \
    S##0 = FMA(a0, LOAD(b), S##0);                                                                 \
    S##1 = FMA(a0, LOAD((b) + (W)), S##1)
#define NNF_GEMV_SUMS_STORE(STORE, W, S, st)                                                       \
    STORE(st, S##0);                                                                               \
    STORE((st) + (W), S##1);                                                                       \
    STORE((st) + 2 * (W), S##2);                                                                   \
    STORE((st) + 3 * (W), S##3);                                                                   \
    STORE((st) + 4 * (W), S##4);                                                                   \
    STORE((st) + 5 * (W), S##5);                                                                   \
    STORE((st) + 6 * (W), S##6);                                                                   \
    STORE((st) + 7 * (W), S##7)
#define NNF_GEMV_A4(V, SET1)                                                                       \
    V a0 = SET1(a[kk * a_stride]), a1 = SET1(a[(kk + 1) * a_stride]);                              \
    V a2 = SET1(a[(kk + 2) * a_stride]), a3 = SET1(a[(kk + 3) * a_stride])

#define NNF_GEMV_BLOCK(NAME, V, W, LOAD, STORE, SET1, FMA)                                         \
    void NAME(size_t kcb, const float *a, size_t a_stride, const float *b, size_t np, float *st) { \
        for (size_t p = 0; p < np; p++, st += 8 * (W)) {                                           \
            NNF_GEMV_SUMS_LOAD(V, LOAD, W, s, st);                                                 \
            size_t kk = 0;                                                                         \
            for (; kk + 4 <= kcb; kk += 4, b += 8 * (W)) {                                         \
                NNF_GEMV_A4(V, SET1);                                                              \
                NNF_GEMV_SUMS_STEP4(LOAD, FMA, W, s, b);                                           \
            }                                                                                      \
            for (; kk < kcb; kk++, b += 2 * (W)) {                                                 \
                V a0 = SET1(a[kk * a_stride]);                                                     \
                NNF_GEMV_SUMS_STEP1(LOAD, FMA, W, s, b);                                           \
            }                                                                                      \
            NNF_GEMV_SUMS_STORE(STORE, W, s, st);                                                  \
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
            NNF_GEMV_SUMS_LOAD(V, LOAD, W, s, st);                                                 \
            NNF_GEMV_SUMS_LOAD(V, LOAD, W, u, su);                                                 \
            size_t kk = 0;                                                                         \
            for (; kk + 4 <= kcb; kk += 4, bb += 8 * (W), c += 8 * (W)) {                          \
                NNF_GEMV_A4(V, SET1);                                                              \
                NNF_GEMV_SUMS_STEP4(LOAD, FMA, W, s, bb);                                          \
                NNF_GEMV_SUMS_STEP4(LOAD, FMA, W, u, c);                                           \
            }                                                                                      \
            for (; kk < kcb; kk++, bb += 2 * (W), c += 2 * (W)) {                                  \
                V a0 = SET1(a[kk * a_stride]);                                                     \
                NNF_GEMV_SUMS_STEP1(LOAD, FMA, W, s, bb);                                          \
                NNF_GEMV_SUMS_STEP1(LOAD, FMA, W, u, c);                                           \
            }                                                                                      \
            NNF_GEMV_SUMS_STORE(STORE, W, s, st);                                                  \
            NNF_GEMV_SUMS_STORE(STORE, W, u, su);                                                  \
        }                                                                                          \
        if (p < np)                                                                                \
            NAME##_one(kcb, a, a_stride, b, 1, st);                                                \
    }
/* clang-format on */

#endif

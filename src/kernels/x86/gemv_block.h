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

#endif

/* The K loop of the dense NCHWc8 convolution's register tiles, in assembly
 * (included by conv_nchwc_avx2.c only).
 *
 * Written in C with intrinsics, GCC kept the 12 accumulators, the held
 * broadcasts and the streamed weight (16 live ymm values) only by copying
 * registers around the FMAs and recomputing addresses: a 4x3 tile ran at
 * ~75 % of the FMA peak and a 2x6 one at ~60 % on ResNet-50's 3x3 stride-2
 * layer (perf annotate: vmovaps between accumulators in the inner loop).
 * Here every register is fixed, as in the GEMM microkernel (gemm_avx2.c):
 * accumulator (o, p), output block o and pixel p of an OB x P tile, lives in
 * ymm(4 + o * P + p); ymm0-3 hold the broadcasts and weights.
 *
 * One call runs n taps. Tap t reads its input at x + tab[t].x bytes (pixel p
 * at + p * XS bytes, lane l at + 4 l) and its weights at w + tab[t].w bytes
 * ([lane][OB][8], packed by conv_nchwc.c), and adds, lane by lane, weight x
 * input into the accumulators: the same FMAs in the same order as the C
 * tile, so the two paths give identical bits. The accumulators come from
 * and go back to acc[(o * P + p) * 8 + i] (96 floats; the rest unused).
 *
 * XS is the pixel stride in bytes: 32 at stride 1, 64 at stride 2 (other
 * strides stay on the C path). Displacements are constant expressions that
 * the assembler evaluates. */
#ifndef NNF_CONV_NCHWC_TAPS_AVX2_H
#define NNF_CONV_NCHWC_TAPS_AVX2_H

#include <stddef.h>

typedef struct nnf_tap {
    ptrdiff_t x, w; /* byte offsets of the tap's input and weights */
} nnf_tap;

typedef void (*nnf_taps_fn)(const float *x, const float *w, const nnf_tap *tab, size_t n,
                            float *acc);

/* broadcast input lane l of pixel p into ymm r */
#define TB(l, p, XS, r) "vbroadcastss " #l "*4+" #p "*" #XS "(%[xp]), %%ymm" #r "\n\t"
/* weight vector o of lane l (OB per lane) into ymm r */
#define TW(l, OB, o, r) "vmovaps (" #l "*" #OB "+" #o ")*32(%[wp]), %%ymm" #r "\n\t"
#define TF(a, b, acc) "vfmadd231ps %%ymm" #a ", %%ymm" #b ", %%ymm" #acc "\n\t"

/* P <= OB: the P broadcasts held in ymm0-2, each weight streamed through ymm3 */
#define STEP_4x3(l, XS) \
    TB(l, 0, XS, 0) TB(l, 1, XS, 1) TB(l, 2, XS, 2)                                                \
    TW(l, 4, 0, 3) TF(3, 0, 4) TF(3, 1, 5) TF(3, 2, 6)                                             \
    TW(l, 4, 1, 3) TF(3, 0, 7) TF(3, 1, 8) TF(3, 2, 9)                                             \
    TW(l, 4, 2, 3) TF(3, 0, 10) TF(3, 1, 11) TF(3, 2, 12)                                          \
    TW(l, 4, 3, 3) TF(3, 0, 13) TF(3, 1, 14) TF(3, 2, 15)
#define STEP_4x2(l, XS)                                                                            \
    TB(l, 0, XS, 0) TB(l, 1, XS, 1)                                                                \
    TW(l, 4, 0, 3) TF(3, 0, 4) TF(3, 1, 5)                                                         \
    TW(l, 4, 1, 2) TF(2, 0, 6) TF(2, 1, 7)                                                         \
    TW(l, 4, 2, 3) TF(3, 0, 8) TF(3, 1, 9)                                                         \
    TW(l, 4, 3, 2) TF(2, 0, 10) TF(2, 1, 11)
#define STEP_3x3(l, XS)                                                                            \
    TB(l, 0, XS, 0) TB(l, 1, XS, 1) TB(l, 2, XS, 2)                                                \
    TW(l, 3, 0, 3) TF(3, 0, 4) TF(3, 1, 5) TF(3, 2, 6)                                             \
    TW(l, 3, 1, 3) TF(3, 0, 7) TF(3, 1, 8) TF(3, 2, 9)                                             \
    TW(l, 3, 2, 3) TF(3, 0, 10) TF(3, 1, 11) TF(3, 2, 12)
/* P > OB: the OB weights held in ymm0-2, each broadcast streamed through
 * ymm3 (and ymm2 when OB < 3) */
#define STEP_3x4(l, XS)                                                                            \
    TW(l, 3, 0, 0) TW(l, 3, 1, 1) TW(l, 3, 2, 2)                                                   \
    TB(l, 0, XS, 3) TF(0, 3, 4) TF(1, 3, 8) TF(2, 3, 12)                                           \
    TB(l, 1, XS, 3) TF(0, 3, 5) TF(1, 3, 9) TF(2, 3, 13)                                           \
    TB(l, 2, XS, 3) TF(0, 3, 6) TF(1, 3, 10) TF(2, 3, 14)                                          \
    TB(l, 3, XS, 3) TF(0, 3, 7) TF(1, 3, 11) TF(2, 3, 15)
#define STEP_2(l, XS, p, r, a0, a1) TB(l, p, XS, r) TF(0, r, a0) TF(1, r, a1)
#define STEP_2x6(l, XS)                                                                            \
    TW(l, 2, 0, 0) TW(l, 2, 1, 1)                                                                  \
    STEP_2(l, XS, 0, 2, 4, 10) STEP_2(l, XS, 1, 3, 5, 11) STEP_2(l, XS, 2, 2, 6, 12)               \
    STEP_2(l, XS, 3, 3, 7, 13) STEP_2(l, XS, 4, 2, 8, 14) STEP_2(l, XS, 5, 3, 9, 15)
#define STEP_2x5(l, XS)                                                                            \
    TW(l, 2, 0, 0) TW(l, 2, 1, 1)                                                                  \
    STEP_2(l, XS, 0, 2, 4, 9) STEP_2(l, XS, 1, 3, 5, 10) STEP_2(l, XS, 2, 2, 6, 11)                \
    STEP_2(l, XS, 3, 3, 7, 12) STEP_2(l, XS, 4, 2, 8, 13)
#define STEP_2x4(l, XS)                                                                            \
    TW(l, 2, 0, 0) TW(l, 2, 1, 1)                                                                  \
    STEP_2(l, XS, 0, 2, 4, 8) STEP_2(l, XS, 1, 3, 5, 9) STEP_2(l, XS, 2, 2, 6, 10)                 \
    STEP_2(l, XS, 3, 3, 7, 11)
#define STEP_1(l, XS, p, r, a) TB(l, p, XS, r) TF(0, r, a)
#define STEP_1x8(l, XS)                                                                            \
    TW(l, 1, 0, 0)                                                                                 \
    STEP_1(l, XS, 0, 1, 4) STEP_1(l, XS, 1, 2, 5) STEP_1(l, XS, 2, 3, 6) STEP_1(l, XS, 3, 1, 7)    \
    STEP_1(l, XS, 4, 2, 8) STEP_1(l, XS, 5, 3, 9) STEP_1(l, XS, 6, 1, 10) STEP_1(l, XS, 7, 2, 11)
#define STEP_1x7(l, XS)                                                                            \
    TW(l, 1, 0, 0)                                                                                 \
    STEP_1(l, XS, 0, 1, 4) STEP_1(l, XS, 1, 2, 5) STEP_1(l, XS, 2, 3, 6) STEP_1(l, XS, 3, 1, 7)    \
    STEP_1(l, XS, 4, 2, 8) STEP_1(l, XS, 5, 3, 9) STEP_1(l, XS, 6, 1, 10)

#define TACC_ALL(M)                                                                                \
    M(0, 4) M(1, 5) M(2, 6) M(3, 7) M(4, 8) M(5, 9) M(6, 10) M(7, 11) M(8, 12) M(9, 13) M(10, 14) \
        M(11, 15)
#define TLD(i, r) "vmovaps " #i "*32(%[acc]), %%ymm" #r "\n\t"
#define TST(i, r) "vmovaps %%ymm" #r ", " #i "*32(%[acc])\n\t"

#define TAPS_FN(NAME, STEP, XS)                                                                    \
    static void NAME(const float *x, const float *w, const nnf_tap *tab, size_t n, float *acc) {  \
        const char *xp, *wp;                                                                       \
        __asm__ volatile(TACC_ALL(TLD) "test %[n], %[n]\n\t"                                       \
                                       "jz 2f\n\t"                                                 \
                                       ".p2align 5\n"                                              \
                                       "1:\n\t"                                                    \
                                       "mov (%[tab]), %[xp]\n\t"                                   \
                                       "mov 8(%[tab]), %[wp]\n\t"                                  \
                                       "add %[x], %[xp]\n\t"                                       \
                                       "add %[w], %[wp]\n\t" STEP(0, XS) STEP(1, XS) STEP(2, XS)   \
                                           STEP(3, XS) STEP(4, XS) STEP(5, XS) STEP(6, XS)         \
                                               STEP(7, XS) "add $16, %[tab]\n\t"                   \
                                                           "dec %[n]\n\t"                          \
                                                           "jnz 1b\n"                              \
                                                           "2:\n\t" TACC_ALL(TST)                  \
                         : [tab] "+r"(tab), [n] "+r"(n), [xp] "=&r"(xp), [wp] "=&r"(wp)            \
                         : [x] "r"(x), [w] "r"(w), [acc] "r"(acc)                                  \
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",  \
                           "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory", \
                           "cc");                                                                  \
    }

#define TAPS_SHAPE(OB, P)                                                                          \
    TAPS_FN(taps_##OB##x##P##_s1, STEP_##OB##x##P, 32)                                             \
    TAPS_FN(taps_##OB##x##P##_s2, STEP_##OB##x##P, 64)
TAPS_SHAPE(4, 3)
TAPS_SHAPE(4, 2)
TAPS_SHAPE(3, 4)
TAPS_SHAPE(3, 3)
TAPS_SHAPE(2, 6)
TAPS_SHAPE(2, 5)
TAPS_SHAPE(2, 4)
TAPS_SHAPE(1, 8)
TAPS_SHAPE(1, 7)

/* The assembly K loop of an OB x P tile at stride SW (1 or 2), or NULL
 * where the tile stays in C. Constant-folded in the inlined tile. */
static inline nnf_taps_fn nnf_taps_for(int OB, int P, int SW) {
#define TAPS_CASE(ob, p)                                                                           \
    if (OB == ob && P == p)                                                                        \
        return SW == 1 ? taps_##ob##x##p##_s1 : SW == 2 ? taps_##ob##x##p##_s2 : NULL;
    TAPS_CASE(4, 3)
    TAPS_CASE(4, 2)
    TAPS_CASE(3, 4)
    TAPS_CASE(3, 3)
    TAPS_CASE(2, 6)
    TAPS_CASE(2, 5)
    TAPS_CASE(2, 4)
    TAPS_CASE(1, 8)
    TAPS_CASE(1, 7)
#undef TAPS_CASE
    return NULL;
}

#endif

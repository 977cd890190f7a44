/* The K loop of the AVX-512 dense NCHWc8 register tiles, in assembly
 * (included by conv_nchwc_avx512.c only, and not in the SIMDe build, where
 * these instructions do not exist).
 *
 * Written with intrinsics (conv_nchwc_avx512.c's tap()), the 4 x 6 tile's
 * 24 accumulators, 4 weights and a broadcast fill 29 of the 32 zmm, and GCC
 * kept them only by copying registers around the FMAs: per tap (192 FMAs)
 * 38 vmovaps and 34 FMAs in the 132 form, which on Intel's 512-bit units
 * take the FMA ports (ports 0 and 5): llvm-mca (Sapphire Rapids) 114 cycles
 * per tap, 1.68 FMAs a cycle of the 2. Here every register is fixed, as in
 * the AVX2 tiles (conv_nchwc_taps_avx2.h): accumulator (z, p), zmm z of
 * pixel p, lives in zmm(z * PM + p), PM = 6, 8, 12, 12 for Z = 4, 3, 2, 1; the
 * lane's Z weights in zmm24-27; the broadcasts rotate through zmm28-31.
 *
 * One call runs the K loop of one tile over n taps: the accumulators start
 * at zero (zero != 0: the first K block) or come from acc[z][p] (the C
 * tile's [4][12] array: the partial sums it loaded), and go back there for
 * the C tile's epilogue, which reads that array as it is. Tap t reads its
 * input at x + tab[2 t] floats (pixel p at + p * XS bytes, lane l at + 4
 * l) and its weights at w + tab[2 t + 1] floats ([lane][Z zmm], 64 Z bytes
 * a lane), lane by lane, in the order of tap(): the same FMAs in the same
 * order, so both paths give identical bits. Each tap also fetches the next tile's
 * input for that tap into L1 (XPF, as the AVX2 tiles do), and four lines
 * of the next K block's weights into L2 (WPF). Only even
 * groups (2 Z blocks, every weight zmm full) and pixel strides of 1 or 2
 * (XS = 32 or 64) have an assembly form. */
#ifndef NNF_CONV_NCHWC_TAPS_AVX512_H
#define NNF_CONV_NCHWC_TAPS_AVX512_H

#include <stddef.h>

/* broadcast input lane l of pixel p into zmm b */
#define K5_B(l, p, XS, b) "vbroadcastss " #l "*4+" #p "*" #XS "(%[xp]), %%zmm" #b "\n\t"
#define K5_F(w, b, a) "vfmadd231ps %%zmm" #w ", %%zmm" #b ", %%zmm" #a "\n\t"
/* accumulator register a, zmm z of pixel p: its zmm in acc, laid out
 * [z][12] (the C tile's [ZMAX][PMAX]) */
#define K5_AM(z, p) "(" #z "*12+" #p ")*64(%[acc])"
#define K5_LD(a, z, p) "vmovups " K5_AM(z, p) ", %%zmm" #a "\n\t"
#define K5_ST(a, z, p) "vmovups %%zmm" #a ", " K5_AM(z, p) "\n\t"
#define K5_ZR(a) "vpxord %%zmm" #a ", %%zmm" #a ", %%zmm" #a "\n\t"
/* weight zmm z of lane l, Z per lane, into zmm r */
#define K5_W(l, Z, z, r) "vmovups (" #l "*" #Z "+" #z ")*64(%[wp]), %%zmm" #r "\n\t"

/* What a pixel does with its Z accumulators a...: M4/M3/M2(l, p, XS, b,
 * a...) for the lane's FMAs, for loading them, for storing them. */
#define K5_FMA4(l, p, XS, b, a0, a1, a2, a3)                                                       \
    K5_B(l, p, XS, b) K5_F(24, b, a0) K5_F(25, b, a1) K5_F(26, b, a2) K5_F(27, b, a3)
#define K5_FMA3(l, p, XS, b, a0, a1, a2)                                                           \
    K5_B(l, p, XS, b) K5_F(24, b, a0) K5_F(25, b, a1) K5_F(26, b, a2)
#define K5_FMA2(l, p, XS, b, a0, a1) K5_B(l, p, XS, b) K5_F(24, b, a0) K5_F(25, b, a1)
#define K5_FMA1(l, p, XS, b, a0) K5_B(l, p, XS, b) K5_F(24, b, a0)
#define K5_LD4(l, p, XS, b, a0, a1, a2, a3)                                                        \
    K5_LD(a0, 0, p) K5_LD(a1, 1, p) K5_LD(a2, 2, p) K5_LD(a3, 3, p)
#define K5_LD3(l, p, XS, b, a0, a1, a2) K5_LD(a0, 0, p) K5_LD(a1, 1, p) K5_LD(a2, 2, p)
#define K5_LD2(l, p, XS, b, a0, a1) K5_LD(a0, 0, p) K5_LD(a1, 1, p)
#define K5_LD1(l, p, XS, b, a0) K5_LD(a0, 0, p)
#define K5_ST4(l, p, XS, b, a0, a1, a2, a3)                                                        \
    K5_ST(a0, 0, p) K5_ST(a1, 1, p) K5_ST(a2, 2, p) K5_ST(a3, 3, p)
#define K5_ST3(l, p, XS, b, a0, a1, a2) K5_ST(a0, 0, p) K5_ST(a1, 1, p) K5_ST(a2, 2, p)
#define K5_ST2(l, p, XS, b, a0, a1) K5_ST(a0, 0, p) K5_ST(a1, 1, p)
#define K5_ST1(l, p, XS, b, a0) K5_ST(a0, 0, p)
#define K5_ZR4(l, p, XS, b, a0, a1, a2, a3) K5_ZR(a0) K5_ZR(a1) K5_ZR(a2) K5_ZR(a3)
#define K5_ZR3(l, p, XS, b, a0, a1, a2) K5_ZR(a0) K5_ZR(a1) K5_ZR(a2)
#define K5_ZR2(l, p, XS, b, a0, a1) K5_ZR(a0) K5_ZR(a1)
#define K5_ZR1(l, p, XS, b, a0) K5_ZR(a0)

/* Pixel p of a Z-high tile: its broadcast register and accumulators. */
#define K5_PX4_0(M, l, XS) M##4(l, 0, XS, 28, 0, 6, 12, 18)
#define K5_PX4_1(M, l, XS) M##4(l, 1, XS, 29, 1, 7, 13, 19)
#define K5_PX4_2(M, l, XS) M##4(l, 2, XS, 30, 2, 8, 14, 20)
#define K5_PX4_3(M, l, XS) M##4(l, 3, XS, 31, 3, 9, 15, 21)
#define K5_PX4_4(M, l, XS) M##4(l, 4, XS, 28, 4, 10, 16, 22)
#define K5_PX4_5(M, l, XS) M##4(l, 5, XS, 29, 5, 11, 17, 23)
#define K5_PX3_0(M, l, XS) M##3(l, 0, XS, 28, 0, 8, 16)
#define K5_PX3_1(M, l, XS) M##3(l, 1, XS, 29, 1, 9, 17)
#define K5_PX3_2(M, l, XS) M##3(l, 2, XS, 30, 2, 10, 18)
#define K5_PX3_3(M, l, XS) M##3(l, 3, XS, 31, 3, 11, 19)
#define K5_PX3_4(M, l, XS) M##3(l, 4, XS, 28, 4, 12, 20)
#define K5_PX3_5(M, l, XS) M##3(l, 5, XS, 29, 5, 13, 21)
#define K5_PX3_6(M, l, XS) M##3(l, 6, XS, 30, 6, 14, 22)
#define K5_PX3_7(M, l, XS) M##3(l, 7, XS, 31, 7, 15, 23)
#define K5_PX2_0(M, l, XS) M##2(l, 0, XS, 28, 0, 12)
#define K5_PX2_1(M, l, XS) M##2(l, 1, XS, 29, 1, 13)
#define K5_PX2_2(M, l, XS) M##2(l, 2, XS, 30, 2, 14)
#define K5_PX2_3(M, l, XS) M##2(l, 3, XS, 31, 3, 15)
#define K5_PX2_4(M, l, XS) M##2(l, 4, XS, 28, 4, 16)
#define K5_PX2_5(M, l, XS) M##2(l, 5, XS, 29, 5, 17)
#define K5_PX2_6(M, l, XS) M##2(l, 6, XS, 30, 6, 18)
#define K5_PX2_7(M, l, XS) M##2(l, 7, XS, 31, 7, 19)
#define K5_PX2_8(M, l, XS) M##2(l, 8, XS, 28, 8, 20)
#define K5_PX2_9(M, l, XS) M##2(l, 9, XS, 29, 9, 21)
#define K5_PX2_10(M, l, XS) M##2(l, 10, XS, 30, 10, 22)
#define K5_PX2_11(M, l, XS) M##2(l, 11, XS, 31, 11, 23)
#define K5_PX1_0(M, l, XS) M##1(l, 0, XS, 28, 0)
#define K5_PX1_1(M, l, XS) M##1(l, 1, XS, 29, 1)
#define K5_PX1_2(M, l, XS) M##1(l, 2, XS, 30, 2)
#define K5_PX1_3(M, l, XS) M##1(l, 3, XS, 31, 3)
#define K5_PX1_4(M, l, XS) M##1(l, 4, XS, 28, 4)
#define K5_PX1_5(M, l, XS) M##1(l, 5, XS, 29, 5)
#define K5_PX1_6(M, l, XS) M##1(l, 6, XS, 30, 6)
#define K5_PX1_7(M, l, XS) M##1(l, 7, XS, 31, 7)
#define K5_PX1_8(M, l, XS) M##1(l, 8, XS, 28, 8)
#define K5_PX1_9(M, l, XS) M##1(l, 9, XS, 29, 9)
#define K5_PX1_10(M, l, XS) M##1(l, 10, XS, 30, 10)
#define K5_PX1_11(M, l, XS) M##1(l, 11, XS, 31, 11)

/* Pixels 0 .. P - 1 of a Z-high tile, each doing M. */
#define K5_UPTO_1(Z, M, l, XS) K5_PX##Z##_0(M, l, XS)
#define K5_UPTO_2(Z, M, l, XS) K5_UPTO_1(Z, M, l, XS) K5_PX##Z##_1(M, l, XS)
#define K5_UPTO_3(Z, M, l, XS) K5_UPTO_2(Z, M, l, XS) K5_PX##Z##_2(M, l, XS)
#define K5_UPTO_4(Z, M, l, XS) K5_UPTO_3(Z, M, l, XS) K5_PX##Z##_3(M, l, XS)
#define K5_UPTO_5(Z, M, l, XS) K5_UPTO_4(Z, M, l, XS) K5_PX##Z##_4(M, l, XS)
#define K5_UPTO_6(Z, M, l, XS) K5_UPTO_5(Z, M, l, XS) K5_PX##Z##_5(M, l, XS)
#define K5_UPTO_7(Z, M, l, XS) K5_UPTO_6(Z, M, l, XS) K5_PX##Z##_6(M, l, XS)
#define K5_UPTO_8(Z, M, l, XS) K5_UPTO_7(Z, M, l, XS) K5_PX##Z##_7(M, l, XS)
#define K5_UPTO_9(Z, M, l, XS) K5_UPTO_8(Z, M, l, XS) K5_PX##Z##_8(M, l, XS)
#define K5_UPTO_10(Z, M, l, XS) K5_UPTO_9(Z, M, l, XS) K5_PX##Z##_9(M, l, XS)
#define K5_UPTO_11(Z, M, l, XS) K5_UPTO_10(Z, M, l, XS) K5_PX##Z##_10(M, l, XS)
#define K5_UPTO_12(Z, M, l, XS) K5_UPTO_11(Z, M, l, XS) K5_PX##Z##_11(M, l, XS)

/* The Z weights of lane l, then its FMAs pixel by pixel. */
#define K5_W4(l) K5_W(l, 4, 0, 24) K5_W(l, 4, 1, 25) K5_W(l, 4, 2, 26) K5_W(l, 4, 3, 27)
#define K5_W3(l) K5_W(l, 3, 0, 24) K5_W(l, 3, 1, 25) K5_W(l, 3, 2, 26)
#define K5_W2(l) K5_W(l, 2, 0, 24) K5_W(l, 2, 1, 25)
#define K5_W1(l) K5_W(l, 1, 0, 24)
#define K5_LANE(Z, P, l, XS) K5_W##Z(l) K5_UPTO_##P(Z, K5_FMA, l, XS)

/* The next tile's input for this tap (P pixels XS bytes apart after the
 * tile's) into L1, up to four lines. */
#define K5_XPF(P, XS)                                                                              \
    "prefetcht0 " #P "*" #XS "(%[xp])\n\t"                                                         \
    ".if " #P "*" #XS " > 64\n\tprefetcht0 " #P "*" #XS "+64(%[xp])\n\t.endif\n\t"                 \
    ".if " #P "*" #XS " > 128\n\tprefetcht0 " #P "*" #XS "+128(%[xp])\n\t.endif\n\t"               \
    ".if " #P "*" #XS " > 192\n\tprefetcht0 " #P "*" #XS "+192(%[xp])\n\t.endif\n\t"

/* Four lines from pf into L2 per tap (the next K block's weights,
 * nnf_nchwc_wfetch), pf then moving pfs bytes: 256, 64 (lines past the
 * taken ones fetched early, harmless), or 0 with pf at a readable line. */
#define K5_WPF                                                                                     \
    "prefetcht1 (%[pf])\n\tprefetcht1 64(%[pf])\n\t"                                               \
    "prefetcht1 128(%[pf])\n\tprefetcht1 192(%[pf])\n\tadd %[pfs], %[pf]\n\t"

typedef void (*nnf_k512_fn)(const float *x, const float *w, const ptrdiff_t *tab, size_t n,
                            void *acc, const char *pf, ptrdiff_t pfs, size_t zero);

/* The steps of a table entry: the 8 lanes of a blocked tap, or the kw
 * taps of one row of one channel of an NCHW input (a stem: side by side in
 * the input, 4 bytes apart, and in the weights 64 Z bytes apart, as the
 * lanes of a tap are; pixels XS = 8 bytes apart at stride 2). */
#define K5_STEPS3(Z, P, XS) K5_LANE(Z, P, 0, XS) K5_LANE(Z, P, 1, XS) K5_LANE(Z, P, 2, XS)
#define K5_STEPS6(Z, P, XS)                                                                        \
    K5_STEPS3(Z, P, XS) K5_LANE(Z, P, 3, XS) K5_LANE(Z, P, 4, XS) K5_LANE(Z, P, 5, XS)
#define K5_STEPS7(Z, P, XS) K5_STEPS6(Z, P, XS) K5_LANE(Z, P, 6, XS)
#define K5_STEPS8(Z, P, XS) K5_STEPS7(Z, P, XS) K5_LANE(Z, P, 7, XS)

#define K5_FN(Z, P, XS) K5_FNS(k512_##Z##x##P##_##XS, Z, P, XS, 8)
#define K5_FNS(NAME, Z, P, XS, S)                                                                  \
    static void NAME(const float *x, const float *w, const ptrdiff_t *tab, size_t n, void *acc,   \
                     const char *pf, ptrdiff_t pfs, size_t zero) {                                 \
        const char *xp, *wp;                                                                       \
        __asm__ volatile(                                                                          \
            "test %[zero], %[zero]\n\t"                                                            \
            "jz 3f\n\t"                                                                            \
            K5_UPTO_##P(Z, K5_ZR, 0, XS)                                                           \
            "jmp 4f\n"                                                                             \
            "3:\n\t"                                                                               \
            K5_UPTO_##P(Z, K5_LD, 0, XS)                                                           \
            "4:\n\t"                                                                               \
            "test %[n], %[n]\n\t"                                                                  \
            "jz 2f\n\t"                                                                            \
            ".p2align 5\n"                                                                         \
            "1:\n\t"                                                                               \
            "mov (%[tab]), %[xp]\n\t"                                                              \
            "mov 8(%[tab]), %[wp]\n\t"                                                             \
            "lea (%[x], %[xp], 4), %[xp]\n\t"                                                      \
            "lea (%[w], %[wp], 4), %[wp]\n\t"                                                      \
            K5_XPF(P, XS) K5_WPF K5_STEPS##S(Z, P, XS)                                              \
            "add $16, %[tab]\n\t"                                                                  \
            "dec %[n]\n\t"                                                                         \
            "jnz 1b\n"                                                                             \
            "2:\n\t"                                                                               \
            K5_UPTO_##P(Z, K5_ST, 0, XS)                                                           \
            : [tab] "+r"(tab), [n] "+r"(n), [xp] "=&r"(xp), [wp] "=&r"(wp), [pf] "+r"(pf)          \
            : [x] "r"(x), [w] "r"(w), [acc] "r"(acc), [pfs] "r"(pfs), [zero] "r"(zero)             \
            : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",     \
              "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18",   \
              "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27",   \
              "xmm28", "xmm29", "xmm30", "xmm31", "memory", "cc");                               \
    }
#define K5_BOTH(Z, P) K5_FN(Z, P, 32) K5_FN(Z, P, 64)
K5_BOTH(4, 1) K5_BOTH(4, 2) K5_BOTH(4, 3) K5_BOTH(4, 4) K5_BOTH(4, 5) K5_BOTH(4, 6)
K5_BOTH(3, 1) K5_BOTH(3, 2) K5_BOTH(3, 3) K5_BOTH(3, 4) K5_BOTH(3, 5) K5_BOTH(3, 6)
K5_BOTH(3, 7) K5_BOTH(3, 8)
K5_BOTH(2, 1) K5_BOTH(2, 2) K5_BOTH(2, 3) K5_BOTH(2, 4) K5_BOTH(2, 5) K5_BOTH(2, 6)
K5_BOTH(2, 7) K5_BOTH(2, 8) K5_BOTH(2, 9) K5_BOTH(2, 10) K5_BOTH(2, 11) K5_BOTH(2, 12)
K5_BOTH(1, 1) K5_BOTH(1, 2) K5_BOTH(1, 3) K5_BOTH(1, 4) K5_BOTH(1, 5) K5_BOTH(1, 6)
K5_BOTH(1, 7) K5_BOTH(1, 8) K5_BOTH(1, 9) K5_BOTH(1, 10) K5_BOTH(1, 11) K5_BOTH(1, 12)

/* [stride - 1][Z - 1][P - 1]; NULL: no assembly form */
#define K5_ROW6(Z, XS)                                                                             \
    k512_##Z##x1_##XS, k512_##Z##x2_##XS, k512_##Z##x3_##XS, k512_##Z##x4_##XS,                  \
        k512_##Z##x5_##XS, k512_##Z##x6_##XS
#define K5_ROW8(Z, XS) K5_ROW6(Z, XS), k512_##Z##x7_##XS, k512_##Z##x8_##XS
#define K5_ROW12(Z, XS)                                                                            \
    K5_ROW8(Z, XS), k512_##Z##x9_##XS, k512_##Z##x10_##XS, k512_##Z##x11_##XS, k512_##Z##x12_##XS
#define K5_TABLE(XS)                                                                               \
    { {K5_ROW12(1, XS)}, {K5_ROW12(2, XS)}, {K5_ROW8(3, XS)}, {K5_ROW6(4, XS)} }
static const nnf_k512_fn nnf_k512_tiles[2][4][12] = {K5_TABLE(32), K5_TABLE(64)};

/* NCHW-input stems at stride 2 (entries per channel and kernel row, the
 * row's kw taps as steps): rows of 3, 6 or 7 taps (MobileNetV2's,
 * YOLOv5s's and ResNet-50's stems), tiles of 2 or 4 zmm (32 or 64 output
 * channels). [width index (nnf_k512_row_index)][Z == 4][P - 1]. */
#define K5_RFN(Z, P, KW) K5_FNS(k512r_##Z##x##P##_##KW, Z, P, 8, KW)
#define K5_RFNS(KW)                                                                                \
    K5_RFN(4, 1, KW) K5_RFN(4, 2, KW) K5_RFN(4, 3, KW) K5_RFN(4, 4, KW) K5_RFN(4, 5, KW)           \
    K5_RFN(4, 6, KW) K5_RFN(2, 1, KW) K5_RFN(2, 2, KW) K5_RFN(2, 3, KW) K5_RFN(2, 4, KW)           \
    K5_RFN(2, 5, KW) K5_RFN(2, 6, KW) K5_RFN(2, 7, KW) K5_RFN(2, 8, KW) K5_RFN(2, 9, KW)           \
    K5_RFN(2, 10, KW) K5_RFN(2, 11, KW) K5_RFN(2, 12, KW)
K5_RFNS(3)
K5_RFNS(6)
K5_RFNS(7)
#define K5_RROW(Z, P, KW) k512r_##Z##x##P##_##KW
#define K5_RTABLE(KW)                                                                              \
    {{K5_RROW(2, 1, KW), K5_RROW(2, 2, KW), K5_RROW(2, 3, KW), K5_RROW(2, 4, KW),                  \
      K5_RROW(2, 5, KW), K5_RROW(2, 6, KW), K5_RROW(2, 7, KW), K5_RROW(2, 8, KW),                  \
      K5_RROW(2, 9, KW), K5_RROW(2, 10, KW), K5_RROW(2, 11, KW), K5_RROW(2, 12, KW)},              \
     {K5_RROW(4, 1, KW), K5_RROW(4, 2, KW), K5_RROW(4, 3, KW), K5_RROW(4, 4, KW),                  \
      K5_RROW(4, 5, KW), K5_RROW(4, 6, KW)}}
static const nnf_k512_fn nnf_k512_rows[3][2][12] = {K5_RTABLE(3), K5_RTABLE(6), K5_RTABLE(7)};

/* The row of nnf_k512_rows for kw taps, or -1. */
static inline int nnf_k512_row_index(size_t kw) {
    return kw == 3 ? 0 : kw == 6 ? 1 : kw == 7 ? 2 : -1;
}

#endif

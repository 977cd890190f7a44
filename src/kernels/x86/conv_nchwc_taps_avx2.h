/* The register tiles of the dense NCHWc8 convolution, in assembly
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
 * One call runs ntile tiles along a row, each whole: accumulators from
 * zero or from the partial sums in y, n table entries (each also
 * prefetching one line of the next K block's weights into L2, io->pf), then
 * either the partial sums or the finished outputs (bias, residual, clamp)
 * stored to y. Entry t reads its input at x + tab[t].x bytes (pixel p at +
 * p * XS bytes, step l at + 4 l) and its weights at w + tab[t].w bytes
 * ([step][OB][8], packed by conv_nchwc.c), and adds, step by step, weight x
 * input into the accumulators: the same FMAs and epilogue operations in the
 * same order as the C tile, so the two paths give identical bits. An
 * entry's steps are the 8 lanes of one tap of NCHWc8 input, or the kw taps
 * of one row of one channel of NCHW input (a stem: 3 channels x 7 rows of
 * a 7x7 are 21 entries of 7 steps; with an entry per tap, 147 entries of
 * one step, the table's loads and prefetches outweighed the FMAs, slower
 * than the C tile's loop).
 *
 * XS is the pixel stride in bytes: stride x lanes x 4 (other strides stay
 * on the C path). Displacements are constant expressions that the
 * assembler evaluates. */
#ifndef NNF_CONV_NCHWC_TAPS_AVX2_H
#define NNF_CONV_NCHWC_TAPS_AVX2_H

#include <stddef.h>

typedef struct nnf_tap {
    ptrdiff_t x, w; /* byte offsets of the tap's input and weights */
} nnf_tap;


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

/* The accumulators of output block o, as M(p, register) per pixel. */
#define ROWS(OB, P, o, M) ROWS_##OB##x##P##_##o(M)
#define ROWS_4x3_0(M) M(0, 4) M(1, 5) M(2, 6)
#define ROWS_4x3_1(M) M(0, 7) M(1, 8) M(2, 9)
#define ROWS_4x3_2(M) M(0, 10) M(1, 11) M(2, 12)
#define ROWS_4x3_3(M) M(0, 13) M(1, 14) M(2, 15)
#define ROWS_4x2_0(M) M(0, 4) M(1, 5)
#define ROWS_4x2_1(M) M(0, 6) M(1, 7)
#define ROWS_4x2_2(M) M(0, 8) M(1, 9)
#define ROWS_4x2_3(M) M(0, 10) M(1, 11)
#define ROWS_3x4_0(M) M(0, 4) M(1, 5) M(2, 6) M(3, 7)
#define ROWS_3x4_1(M) M(0, 8) M(1, 9) M(2, 10) M(3, 11)
#define ROWS_3x4_2(M) M(0, 12) M(1, 13) M(2, 14) M(3, 15)
#define ROWS_3x4_3(M)
#define ROWS_3x3_0(M) M(0, 4) M(1, 5) M(2, 6)
#define ROWS_3x3_1(M) M(0, 7) M(1, 8) M(2, 9)
#define ROWS_3x3_2(M) M(0, 10) M(1, 11) M(2, 12)
#define ROWS_3x3_3(M)
#define ROWS_2x6_0(M) M(0, 4) M(1, 5) M(2, 6) M(3, 7) M(4, 8) M(5, 9)
#define ROWS_2x6_1(M) M(0, 10) M(1, 11) M(2, 12) M(3, 13) M(4, 14) M(5, 15)
#define ROWS_2x5_0(M) M(0, 4) M(1, 5) M(2, 6) M(3, 7) M(4, 8)
#define ROWS_2x5_1(M) M(0, 9) M(1, 10) M(2, 11) M(3, 12) M(4, 13)
#define ROWS_2x4_0(M) M(0, 4) M(1, 5) M(2, 6) M(3, 7)
#define ROWS_2x4_1(M) M(0, 8) M(1, 9) M(2, 10) M(3, 11)
#define ROWS_1x8_0(M) M(0, 4) M(1, 5) M(2, 6) M(3, 7) M(4, 8) M(5, 9) M(6, 10) M(7, 11)
#define ROWS_1x7_0(M) M(0, 4) M(1, 5) M(2, 6) M(3, 7) M(4, 8) M(5, 9) M(6, 10)
#define ROWS_2x6_2(M)
#define ROWS_2x6_3(M)
#define ROWS_2x5_2(M)
#define ROWS_2x5_3(M)
#define ROWS_2x4_2(M)
#define ROWS_2x4_3(M)
#define ROWS_1x8_1(M)
#define ROWS_1x8_2(M)
#define ROWS_1x8_3(M)
#define ROWS_1x7_1(M)
#define ROWS_1x7_2(M)
#define ROWS_1x7_3(M)

/* Output blocks are ys bytes apart: blocks 0 and 2 at (base), 1 and 3 at
 * (base, ys), the base moved on by 2 ys after block 1. */
#define LD_E(p, r) "vmovups " #p "*32(%[yb]), %%ymm" #r "\n\t"
#define LD_O(p, r) "vmovups " #p "*32(%[yb],%[ys]), %%ymm" #r "\n\t"
#define ST_E(p, r) "vmovups %%ymm" #r ", " #p "*32(%[yb])\n\t"
#define ST_O(p, r) "vmovups %%ymm" #r ", " #p "*32(%[yb],%[ys])\n\t"
/* the residual, through the same addressing */
#define RS_E(p, r) "vaddps " #p "*32(%[yb]), %%ymm" #r ", %%ymm" #r "\n\t"
#define RS_O(p, r) "vaddps " #p "*32(%[yb],%[ys]), %%ymm" #r ", %%ymm" #r "\n\t"
#define EACH_BLOCK(OB, P, ME, MO)                                                                  \
    ROWS(OB, P, 0, ME) ROWS(OB, P, 1, MO) "lea (%[yb],%[ys],2), %[yb]\n\t" ROWS(OB, P, 2, ME)     \
        ROWS(OB, P, 3, MO)
#define ZERO(p, r) "vxorps %%ymm" #r ", %%ymm" #r ", %%ymm" #r "\n\t"
#define BIAS(p, r) "vaddps %%ymm0, %%ymm" #r ", %%ymm" #r "\n\t"
/* block o's biases, for the blocks the tile has (no read past the last) */
#define BIAS_BLOCK(OB, P, o) IFB_##OB##_##o("vmovups " #o "*32(%[xp]), %%ymm0\n\t" ROWS(OB, P, o, BIAS))
#define IFB_1_0(t) t
#define IFB_1_1(t)
#define IFB_1_2(t)
#define IFB_1_3(t)
#define IFB_2_0(t) t
#define IFB_2_1(t) t
#define IFB_2_2(t)
#define IFB_2_3(t)
#define IFB_3_0(t) t
#define IFB_3_1(t) t
#define IFB_3_2(t) t
#define IFB_3_3(t)
#define IFB_4_0(t) t
#define IFB_4_1(t) t
#define IFB_4_2(t) t
#define IFB_4_3(t) t
#define CLAMP(p, r) "vmaxps %%ymm" #r ", %%ymm1, %%ymm" #r "\n\tvminps %%ymm" #r ", %%ymm2, %%ymm" #r "\n\t"
#define EACH(OB, P, M) ROWS(OB, P, 0, M) ROWS(OB, P, 1, M) ROWS(OB, P, 2, M) ROWS(OB, P, 3, M)

/* The next tile's input for this tap (the P pixels after the tile's, XS
 * bytes apart) into L1. Each unit of a 1x1 conv's K loop reads another
 * plane, one stream per unit, more than the hardware prefetcher follows:
 * the first FMAs of every unit waited on their broadcasts (perf annotate,
 * ResNet-50). One tile ahead is a whole K loop (hundreds to thousands of
 * cycles) before the use; two or three tiles ahead measured the same. */
#define XPF(P, XS)                                                                                 \
    "prefetcht0 " #P "*" #XS "(%[xp])\n\t"                                                         \
    ".if " #P "*" #XS " > 64\n\tprefetcht0 " #P "*" #XS "+64(%[xp])\n\t.endif\n\t"                 \
    ".if " #P "*" #XS " > 128\n\tprefetcht0 " #P "*" #XS "+128(%[xp])\n\t.endif\n\t"               \
    ".if " #P "*" #XS " > 192\n\tprefetcht0 " #P "*" #XS "+192(%[xp])\n\t.endif\n\t"

/* The residual of the tile two ahead (its P pixels at yb + index + 2 P
 * 32 bytes: every line they touch) into L1, for the blocks the tile has.
 * The last K block's epilogue adds it; ResNet-50's bottleneck outputs (x +
 * conv, 0.4-3.2 MB) read it from memory, and its misses stalled the tiles
 * (a 64 -> 256 1x1 at 56x56 with the residual ran ~20 % slower than
 * without, 6-16 % with the prefetch; ResNet-50 in-process A/B
 * 0.977-0.989, MobileNetV2 and YOLOv5s unchanged). */
#define RPF_AT(P, index)                                                                           \
    "prefetcht0 " #P "*32*2(%[yb]" index ")\n\t"                                                  \
    ".if " #P "*32 > 64\n\tprefetcht0 " #P "*32*2+64(%[yb]" index ")\n\t.endif\n\t"               \
    ".if " #P "*32 > 128\n\tprefetcht0 " #P "*32*2+128(%[yb]" index ")\n\t.endif\n\t"             \
    ".if " #P "*32 > 192\n\tprefetcht0 " #P "*32*2+192(%[yb]" index ")\n\t.endif\n\t"             \
    "prefetcht0 " #P "*32*3-4(%[yb]" index ")\n\t"
#define RPF_BLOCK(OB, P, o, index) IFB_##OB##_##o(RPF_AT(P, index))

/* What a tile call reads and writes besides the K loop (offsets fixed for
 * the assembly below). The call runs ntile tiles side by side along the
 * row: the same taps, weights and K block, each tile's input P * XS bytes
 * after the last one's and its outputs P pixels after; y and res move on as
 * it goes (the caller's copy is spent). In C, each tile's call, its
 * arguments and its return were a tenth of a 16 -> 96 channel pointwise
 * conv (MobileNetV2's first expansion, 96 cycles of FMAs a tile). */
typedef struct nnf_taps_io {
    float *y;           /* the first tile's first pixel in its first output block */
    const float *res;   /* the residual at the same place, or NULL */
    const float *bias;  /* the first block's 8 biases, or NULL */
    ptrdiff_t ys;       /* bytes between output blocks (of y and res) */
    float lo, hi;       /* the clamp (+-inf: none) */
    int first;          /* start from zero, else from the partial sums in y */
    int last;           /* apply bias, residual, clamp; else store the partial sums */
    const char *pf;     /* a line to prefetch into L2 per tap from here (the next
                         * K block's weights, nnf_nchwc_wfetch), pf_step apart */
    ptrdiff_t pf_step;  /* 64, or 0 with pf at any readable line: none */
    const nnf_tap *tab; /* the taps, n of them */
    size_t n;
    size_t ntile;       /* tiles, at least 1 */
    ptrdiff_t rstep;    /* bytes res moves per tile: P * 32, or 0 without one */
} nnf_taps_io;
_Static_assert(offsetof(nnf_taps_io, res) == 8 && offsetof(nnf_taps_io, bias) == 16 &&
                   offsetof(nnf_taps_io, ys) == 24 && offsetof(nnf_taps_io, lo) == 32 &&
                   offsetof(nnf_taps_io, hi) == 36 && offsetof(nnf_taps_io, first) == 40 &&
                   offsetof(nnf_taps_io, last) == 44 && offsetof(nnf_taps_io, pf) == 48 &&
                   offsetof(nnf_taps_io, pf_step) == 56 && offsetof(nnf_taps_io, tab) == 64 &&
                   offsetof(nnf_taps_io, n) == 72 && offsetof(nnf_taps_io, ntile) == 80 &&
                   offsetof(nnf_taps_io, rstep) == 88,
               "nnf_taps_io offsets are baked into the assembly");

typedef void (*nnf_taps_fn)(const float *x, const float *w, nnf_taps_io *io);

/* The steps of a table entry: the 8 input lanes of one tap (NCHWc8 input),
 * or the kw taps of one row of one channel (NCHW input, a width of
 * TAPS_ROW_WIDTHS: side by side in the input, 4 bytes apart, and in the
 * weights, OB vectors apart, as the lanes of a tap are). */
#define LANES_1(S, XS) S(0, XS)
#define LANES_3(S, XS) S(0, XS) S(1, XS) S(2, XS)
#define LANES_5(S, XS) LANES_3(S, XS) S(3, XS) S(4, XS)
#define LANES_6(S, XS) LANES_5(S, XS) S(5, XS)
#define LANES_7(S, XS) LANES_6(S, XS) S(6, XS)
#define LANES_8(S, XS) LANES_7(S, XS) S(7, XS)

/* The tiles: accumulators from zero or y, the K loop, then y = clamp(acc +
 * bias + res) on the last K block (the order of nnf_ep_fast8, so the bits
 * match the C tile) or the raw partial sums; then the next tile. */
#define TAPS_FN(NAME, OB, P, XS, LN)                                                               \
    static void NAME(const float *x, const float *w, nnf_taps_io *io) {                            \
        const char *xp, *wp, *yb, *pf;                                                             \
        const nnf_tap *tab;                                                                        \
        size_t n;                                                                                  \
        ptrdiff_t ys, ps;                                                                          \
        __asm__ volatile(                                                                          \
            "mov 24(%[io]), %[ys]\n\t"                                                             \
            "mov 48(%[io]), %[pf]\n\t"                                                             \
            "mov 56(%[io]), %[ps]\n"                                                               \
            "10:\n\t"                                                                              \
            "cmpl $0, 44(%[io])\n\t"                                                               \
            "je 11f\n\t"                                                                           \
            "mov 8(%[io]), %[yb]\n\t"                                                              \
            "test %[yb], %[yb]\n\t"                                                                \
            "jz 11f\n\t" RPF_BLOCK(OB, P, 0, "") RPF_BLOCK(OB, P, 1, ",%[ys]")                     \
            "lea (%[yb],%[ys],2), %[yb]\n\t" RPF_BLOCK(OB, P, 2, "")                               \
                RPF_BLOCK(OB, P, 3, ",%[ys]") "11:\n\t"                                            \
            "cmpl $0, 40(%[io])\n\t"                                                               \
            "je 5f\n\t" EACH(OB, P, ZERO) "jmp 6f\n"                                               \
            "5:\n\t"                                                                               \
            "mov (%[io]), %[yb]\n\t" EACH_BLOCK(OB, P, LD_E, LD_O) "6:\n\t"                        \
            "mov 64(%[io]), %[tab]\n\t"                                                            \
            "mov 72(%[io]), %[n]\n\t"                                                              \
            "test %[n], %[n]\n\t"                                                                  \
            "jz 2f\n\t"                                                                            \
            ".p2align 5\n"                                                                         \
            "1:\n\t"                                                                               \
            "prefetcht1 (%[pf])\n\t"                                                               \
            "add %[ps], %[pf]\n\t"                                                                 \
            "mov (%[tab]), %[xp]\n\t"                                                              \
            "mov 8(%[tab]), %[wp]\n\t"                                                             \
            "add %[x], %[xp]\n\t"                                                                  \
            "add %[w], %[wp]\n\t" XPF(P, XS) LANES_##LN(STEP_##OB##x##P, XS)                       \
            "add $16, %[tab]\n\t"                                                                  \
            "dec %[n]\n\t"                                                                         \
            "jnz 1b\n"                                                                             \
            "2:\n\t"                                                                               \
            "cmpl $0, 44(%[io])\n\t"                                                               \
            "je 8f\n\t"                                                                            \
            "mov 16(%[io]), %[xp]\n\t"                                                             \
            "test %[xp], %[xp]\n\t"                                                                \
            "jz 7f\n\t" BIAS_BLOCK(OB, P, 0) BIAS_BLOCK(OB, P, 1) BIAS_BLOCK(OB, P, 2)             \
                BIAS_BLOCK(OB, P, 3) "7:\n\t"                                                      \
            "mov 8(%[io]), %[yb]\n\t"                                                              \
            "test %[yb], %[yb]\n\t"                                                                \
            "jz 9f\n\t" EACH_BLOCK(OB, P, RS_E, RS_O) "9:\n\t"                                     \
            "vbroadcastss 32(%[io]), %%ymm1\n\t"                                                   \
            "vbroadcastss 36(%[io]), %%ymm2\n\t" EACH(OB, P, CLAMP) "8:\n\t"                       \
            "mov (%[io]), %[yb]\n\t" EACH_BLOCK(OB, P, ST_E, ST_O)                                 \
            "add $" #P "*" #XS ", %[x]\n\t"                                                        \
            "addq $" #P "*32, (%[io])\n\t"                                                         \
            "mov 88(%[io]), %[xp]\n\t"                                                             \
            "add %[xp], 8(%[io])\n\t"                                                              \
            "decq 80(%[io])\n\t"                                                                   \
            "jnz 10b\n"                                                                            \
            : [tab] "=&r"(tab), [n] "=&r"(n), [xp] "=&r"(xp), [wp] "=&r"(wp), [yb] "=&r"(yb),      \
              [ys] "=&r"(ys), [pf] "=&r"(pf), [ps] "=&r"(ps), [x] "+r"(x)                          \
            : [w] "r"(w), [io] "r"(io)                                                             \
            : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",      \
              "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc");               \
    }

/* Every tile shape with an assembly form: the functions and the lookup
 * below are made from this one list. */
#define TAPS_SHAPES(X) X(4, 3) X(4, 2) X(3, 4) X(3, 3) X(2, 6) X(2, 5) X(2, 4) X(1, 8) X(1, 7)

/* The row widths of NCHW input with assembly tiles: the stems' 1, 3, 5
 * (ResNet-style 5x5 heads), 6 (YOLOv5's) and 7 (ResNet-50's). X(OB, P, KW)
 * for each; the tiles, the lookup and nnf_taps_row_width derive from it. */
#define TAPS_ROW_WIDTHS(X, OB, P) X(OB, P, 1) X(OB, P, 3) X(OB, P, 5) X(OB, P, 6) X(OB, P, 7)

/* XS = stride x lanes x 4 bytes: pixels of NCHWc8 input 32 or 64 bytes
 * apart, of NCHW input 4 or 8 */
#define TAPS_ROWS(OB, P, KW)                                                                       \
    TAPS_FN(taps_##OB##x##P##_s1_k##KW, OB, P, 4, KW)                                              \
    TAPS_FN(taps_##OB##x##P##_s2_k##KW, OB, P, 8, KW)
#define TAPS_SHAPE(OB, P)                                                                          \
    TAPS_FN(taps_##OB##x##P##_s1, OB, P, 32, 8)                                                    \
    TAPS_FN(taps_##OB##x##P##_s2, OB, P, 64, 8)                                                    \
    TAPS_ROW_WIDTHS(TAPS_ROWS, OB, P)
TAPS_SHAPES(TAPS_SHAPE)
#undef TAPS_SHAPE
#undef TAPS_ROWS

/* Whether NCHW input rows kw taps wide have assembly tiles. */
static inline int nnf_taps_row_width(size_t kw) {
#define TAPS_IS_WIDTH(ob, p, w) || kw == w
    return 0 TAPS_ROW_WIDTHS(TAPS_IS_WIDTH, 0, 0);
#undef TAPS_IS_WIDTH
}

/* The assembly tile OB x P at stride SW (1 or 2) on L input lanes: 8 (an
 * entry a tap's lanes) or 1 (an entry a row's KW taps, a width of
 * TAPS_ROW_WIDTHS), or NULL where the tile stays in C. Constant-folded in
 * the inlined tile for L = 8. */
static inline nnf_taps_fn nnf_taps_for(int OB, int P, int SW, int L, int KW) {
#define TAPS_KW(ob, p, kw)                                                                         \
    if (L == 1 && KW == kw)                                                                        \
        return SW == 1 ? taps_##ob##x##p##_s1_k##kw : SW == 2 ? taps_##ob##x##p##_s2_k##kw : NULL;
#define TAPS_CASE(ob, p)                                                                           \
    if (OB == ob && P == p) {                                                                      \
        if (L == 8)                                                                                \
            return SW == 1 ? taps_##ob##x##p##_s1 : SW == 2 ? taps_##ob##x##p##_s2 : NULL;         \
        TAPS_ROW_WIDTHS(TAPS_KW, ob, p)                                                            \
        return NULL;                                                                               \
    }
    TAPS_SHAPES(TAPS_CASE)
#undef TAPS_CASE
#undef TAPS_KW
    return NULL;
}

#endif

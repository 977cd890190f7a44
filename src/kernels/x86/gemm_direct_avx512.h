/* The K loop of the AVX-512 GEMM's 14 x 32 tile reading A where it lies
 * (row-major, row stride L bytes) instead of from a packed panel (included
 * by gemm_avx512.c only, and not in the SIMDe build, where these
 * instructions do not exist).
 *
 * Packing A costs a copy of A per K block: 5-8 % of a 256^3 GEMM, where
 * each packed panel serves only 8 B panels. Read in place, each k step
 * broadcasts row r's value from its own line; the 14 row addresses come
 * from two bases (rows 0 and 7) and three strides (L, 3 L, 5 L) with
 * x86's scaled indexing, so a k step advances two pointers, not 14.
 * Written with intrinsics, GCC kept 14 row pointers in registers it does
 * not have (1.2-1.8x slower than the packed path, thirty-first round).
 *
 * Registers: row r's accumulators in zmm(2 r), zmm(2 r + 1); B's two zmm
 * of the k step in zmm28-29; the broadcasts alternate zmm30-31. Four k
 * steps an iteration (displacements 0, 4, 8, 12 on A; 128 bytes a step on
 * B), then the kc % 4 left one at a time. Per k step the FMAs are those of
 * the packed tile (gemm_avx512.c, tile_rows), in the same k order from
 * zero, so the two paths give identical bits. As there, both lines of B's
 * row 16 k steps on are prefetched into L1 each step; and each iteration
 * takes one line of the next block (pf_next) into L2 while it has them. */
#ifndef NNF_GEMM_DIRECT_AVX512_H
#define NNF_GEMM_DIRECT_AVX512_H

#include <stddef.h>

/* Row r's address in A at displacement D bytes. */
#define GD_A0(D) D "(%[a0])"
#define GD_A1(D) D "(%[a0],%[L],1)"
#define GD_A2(D) D "(%[a0],%[L],2)"
#define GD_A3(D) D "(%[a0],%[L3],1)"
#define GD_A4(D) D "(%[a0],%[L],4)"
#define GD_A5(D) D "(%[a0],%[L5],1)"
#define GD_A6(D) D "(%[a0],%[L3],2)"
#define GD_A7(D) D "(%[a7])"
#define GD_A8(D) D "(%[a0],%[L],8)"
#define GD_A9(D) D "(%[a7],%[L],2)"
#define GD_A10(D) D "(%[a7],%[L3],1)"
#define GD_A11(D) D "(%[a7],%[L],4)"
#define GD_A12(D) D "(%[a0],%[L3],4)"
#define GD_A13(D) D "(%[a7],%[L3],2)"

/* Row r: broadcast into zmm BR, two FMAs into zmm C0, C1. */
#define GD_ROW(ADDR, BR, C0, C1)                                                                   \
    "vbroadcastss " ADDR ", %%zmm" #BR "\n\t"                                                      \
    "vfmadd231ps %%zmm28, %%zmm" #BR ", %%zmm" #C0 "\n\t"                                          \
    "vfmadd231ps %%zmm29, %%zmm" #BR ", %%zmm" #C1 "\n\t"

/* One k step: A at displacement DA bytes, B at DB and DB + 64, B's
 * prefetch at DB + 2048 and DB + 2112 (16 k steps on). */
/* clang-format off */
#define GD_STEP(DA, DB, DP0, DP1)                                                                  \
    "vmovups " DB "(%[b]), %%zmm28\n\t"                                                            \
    "vmovups " DB "+64(%[b]), %%zmm29\n\t"                                                         \
    "prefetcht0 " DP0 "(%[b])\n\t"                                                                 \
    "prefetcht0 " DP1 "(%[b])\n\t"                                                                 \
    GD_ROW(GD_A0(DA), 30, 0, 1) GD_ROW(GD_A1(DA), 31, 2, 3) GD_ROW(GD_A2(DA), 30, 4, 5)           \
    GD_ROW(GD_A3(DA), 31, 6, 7) GD_ROW(GD_A4(DA), 30, 8, 9) GD_ROW(GD_A5(DA), 31, 10, 11)         \
    GD_ROW(GD_A6(DA), 30, 12, 13) GD_ROW(GD_A7(DA), 31, 14, 15)                                   \
    GD_ROW(GD_A8(DA), 30, 16, 17) GD_ROW(GD_A9(DA), 31, 18, 19)                                   \
    GD_ROW(GD_A10(DA), 30, 20, 21) GD_ROW(GD_A11(DA), 31, 22, 23)                                 \
    GD_ROW(GD_A12(DA), 30, 24, 25) GD_ROW(GD_A13(DA), 31, 26, 27)

/* Zero, or store to acc, the accumulators two by two. */
#define GD_Z2(a, b) "vpxord %%zmm" #a ", %%zmm" #a ", %%zmm" #a "\n\t" \
                    "vpxord %%zmm" #b ", %%zmm" #b ", %%zmm" #b "\n\t"
#define GD_S2(a, b) "vmovups %%zmm" #a ", " #a "*64(%[acc])\n\t" \
                    "vmovups %%zmm" #b ", " #b "*64(%[acc])\n\t"
#define GD_EACH(M)                                                                                 \
    M(0, 1) M(2, 3) M(4, 5) M(6, 7) M(8, 9) M(10, 11) M(12, 13) M(14, 15) M(16, 17) M(18, 19)     \
    M(20, 21) M(22, 23) M(24, 25) M(26, 27)
/* clang-format on */

/* acc[0..27] = the 14 x 32 product of A's rows a[r * L bytes + 4 k] and
 * B's packed panel b (kc x 32) over k < kc. pf: pf_lines lines from it into
 * L2, one an iteration of four k steps (the rest are the caller's). */
static inline void nnf_gemm_direct_k14_avx512(size_t kc, const float *a, size_t lda, const float *b,
                                              void *acc, const char *pf, size_t pf_lines) {
    ptrdiff_t L = (ptrdiff_t)(lda * sizeof(float)), L3 = 3 * L, L5 = 5 * L;
    const float *a7 = a + 7 * lda;
    size_t iters = kc / 4, rest = kc % 4;
    ptrdiff_t pfs = pf_lines ? 64 : 0, zero = 0;
    size_t pfn = pf_lines;
    if (!pf_lines)
        pf = (const char *)b;
    /* clang-format off */
    __asm__ volatile(
        GD_EACH(GD_Z2)
        "test %[n], %[n]\n\t"
        "jz 2f\n\t"
        ".p2align 5\n"
        "1:\n\t"
        GD_STEP("0", "0", "2048", "2112")
        GD_STEP("4", "128", "2176", "2240")
        GD_STEP("8", "256", "2304", "2368")
        GD_STEP("12", "384", "2432", "2496")
        "prefetcht1 (%[pf])\n\t"
        "add %[pfs], %[pf]\n\t"
        "dec %[pfn]\n\t"
        "cmovz %[zero], %[pfs]\n\t"
        "add $16, %[a0]\n\t"
        "add $16, %[a7]\n\t"
        "add $512, %[b]\n\t"
        "dec %[n]\n\t"
        "jnz 1b\n"
        "2:\n\t"
        "test %[r], %[r]\n\t"
        "jz 4f\n"
        "3:\n\t"
        GD_STEP("0", "0", "2048", "2112")
        "add $4, %[a0]\n\t"
        "add $4, %[a7]\n\t"
        "add $128, %[b]\n\t"
        "dec %[r]\n\t"
        "jnz 3b\n"
        "4:\n\t"
        GD_EACH(GD_S2)
        : [a0] "+r"(a), [a7] "+r"(a7), [b] "+r"(b), [n] "+r"(iters), [r] "+r"(rest), [pf] "+r"(pf),
          [pfs] "+r"(pfs), [pfn] "+r"(pfn)
        : [L] "r"(L), [L3] "r"(L3), [L5] "r"(L5), [acc] "r"(acc), [zero] "r"(zero)
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
          "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20",
          "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30",
          "xmm31", "memory", "cc");
    /* clang-format on */
}

#endif

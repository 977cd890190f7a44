/* f32_gemm_6x16_avx2: the AVX2+FMA microkernel, and the AVX2 array math.
 *
 * Tile: 6 rows x 16 columns = 12 ymm accumulators; per k, two loads of B and
 * six broadcasts of A feed 12 FMAs (two FMA ports: 6 cycles per k, enough
 * independent chains to cover the 4-5 cycle FMA latency). Panels come from
 * gemm.c's packers: a is kc x 6, b is kc x 16, both contiguous. */
#include "kernels/gemm.h"
#include "kernels/vmath.h"
#include "kernels/x86/ep_fast_avx2.h"
#include "kernels/x86/gemv_block.h"
#include "kernels/x86/transpose_avx2.h"

#include <string.h>

static inline __attribute__((always_inline)) void store_row(float *cr, __m256 v0, __m256 v1,
                                                            size_t r, size_t n, __m256i m0,
                                                            __m256i m1, const nnf_tile_ep *t) {
    int full = n == 16;
    if (t->accumulate) {
        if (full) {
            v0 = _mm256_add_ps(v0, _mm256_loadu_ps(cr));
            v1 = _mm256_add_ps(v1, _mm256_loadu_ps(cr + 8));
        } else {
            v0 = _mm256_add_ps(v0, _mm256_maskload_ps(cr, m0));
            v1 = _mm256_add_ps(v1, _mm256_maskload_ps(cr + 8, m1));
        }
    }
    if (t->ep) {
        v0 = nnf_ep8(v0, t, r, 0, full || n >= 8, m0);
        v1 = nnf_ep8(v1, t, r, 8, full, m1);
    }
    if (full) {
        _mm256_storeu_ps(cr, v0);
        _mm256_storeu_ps(cr + 8, v1);
    } else {
        _mm256_maskstore_ps(cr, m0, v0);
        _mm256_maskstore_ps(cr + 8, m1, v1);
    }
}

/* One k step of the 6x16 tile in assembly: B's row (16 floats at byte
 * offset B) into ymm0-1, the six A values broadcast in turn into ymm2/ymm3,
 * twelve FMAs into ymm4-15. K_STEP4 is its first four rows (ymm4-11), the
 * tile of a block's 4-row tail panels. AP(A, r) addresses row r's value at
 * byte displacement A: in a packed panel (AP_PK: the six side by side) or
 * in A where it lies (AP_IN: rows L bytes apart, from one base and the
 * strides L, 3 L and 5 L with x86's scaled indexing, so a k step advances
 * one pointer, not six). */
#define AP_PK(A, r) #A "+4*" #r "(%[a])"
#define AP_IN(A, r) AP_IN##r(#A)
#define AP_IN0(D) D "(%[a])"
#define AP_IN1(D) D "(%[a],%[L],1)"
#define AP_IN2(D) D "(%[a],%[L],2)"
#define AP_IN3(D) D "(%[a],%[L3],1)"
#define AP_IN4(D) D "(%[a],%[L],4)"
#define AP_IN5(D) D "(%[a],%[L5],1)"
/* clang-format off */
#define K_STEP4(AP, A, B)                                                                          \
    "vmovups " #B "(%[b]), %%ymm0\n\t"                                                             \
    "vmovups " #B "+32(%[b]), %%ymm1\n\t"                                                          \
    "vbroadcastss " AP(A, 0) ", %%ymm2\n\t"                                                        \
    "vfmadd231ps %%ymm0, %%ymm2, %%ymm4\n\t"                                                       \
    "vfmadd231ps %%ymm1, %%ymm2, %%ymm5\n\t"                                                       \
    "vbroadcastss " AP(A, 1) ", %%ymm3\n\t"                                                        \
    "vfmadd231ps %%ymm0, %%ymm3, %%ymm6\n\t"                                                       \
    "vfmadd231ps %%ymm1, %%ymm3, %%ymm7\n\t"                                                       \
    "vbroadcastss " AP(A, 2) ", %%ymm2\n\t"                                                        \
    "vfmadd231ps %%ymm0, %%ymm2, %%ymm8\n\t"                                                       \
    "vfmadd231ps %%ymm1, %%ymm2, %%ymm9\n\t"                                                       \
    "vbroadcastss " AP(A, 3) ", %%ymm3\n\t"                                                        \
    "vfmadd231ps %%ymm0, %%ymm3, %%ymm10\n\t"                                                      \
    "vfmadd231ps %%ymm1, %%ymm3, %%ymm11\n\t"
#define K_STEP5(AP, A, B)                                                                          \
    K_STEP4(AP, A, B)                                                                              \
    "vbroadcastss " AP(A, 4) ", %%ymm2\n\t"                                                        \
    "vfmadd231ps %%ymm0, %%ymm2, %%ymm12\n\t"                                                      \
    "vfmadd231ps %%ymm1, %%ymm2, %%ymm13\n\t"
#define K_STEP6(AP, A, B)                                                                          \
    K_STEP5(AP, A, B)                                                                              \
    "vbroadcastss " AP(A, 5) ", %%ymm3\n\t"                                                        \
    "vfmadd231ps %%ymm0, %%ymm3, %%ymm14\n\t"                                                      \
    "vfmadd231ps %%ymm1, %%ymm3, %%ymm15\n\t"
/* clang-format on */

/* What the full tile finishes with (offsets fixed for the assembly below):
 * C += acc on K blocks after the first, then on the last one either a lone
 * scale or the clamp-only epilogue (nnf_ep_fast: bias per row or column, a
 * residual before the clamp) in the registers, in nnf_ep8's and
 * nnf_ep_fast8's order, so the values equal the edge tiles' C path bit for
 * bit. */
typedef struct tile_io {
    const float *bias;    /* 0: the rows' biases (per row) or the 16 columns' (per column) */
    const float *res;     /* 8: the residual at the tile's first element, or NULL */
    ptrdiff_t res_ld;     /* 16: bytes between its rows */
    int accumulate;       /* 24: add the partial sums in C */
    int ep;               /* 28: 1 bias, residual and clamp; 2 alpha first */
    int bias_kind;        /* 32: 0 none, 1 per row, 2 per column */
    float lo, hi;         /* 36, 40: the clamp (+-inf: none) */
    float alpha;          /* 44: the scale, applied first where ep is 2 */
    ptrdiff_t pf;         /* bytes past b that the K loop prefetches B from */
} tile_io;
_Static_assert(offsetof(tile_io, res) == 8 && offsetof(tile_io, res_ld) == 16 &&
                   offsetof(tile_io, accumulate) == 24 && offsetof(tile_io, ep) == 28 &&
                   offsetof(tile_io, bias_kind) == 32 && offsetof(tile_io, lo) == 36 &&
                   offsetof(tile_io, hi) == 40 && offsetof(tile_io, alpha) == 44,
               "tile_io offsets are baked into the assembly");

/* The tile's rows for the finish: M(row, C address, the row's two
 * accumulators); rows 3-5 address from c3 = c + 3 ldc. */
#define T_EACH_ROW4(M)                                                                             \
    M(0, "(%[c0])", 4, 5) M(1, "(%[c0],%[ld])", 6, 7) M(2, "(%[c0],%[ld],2)", 8, 9)                \
        M(3, "(%[c3])", 10, 11)
#define T_EACH_ROW5(M) T_EACH_ROW4(M) M(4, "(%[c3],%[ld])", 12, 13)
#define T_EACH_ROW6(M) T_EACH_ROW5(M) M(5, "(%[c3],%[ld],2)", 14, 15)
#define T_ADD(src, acc) "vaddps " src ", %%ymm" #acc ", %%ymm" #acc "\n\t"
#define T_ADD_C(r, c, a0, a1) T_ADD(c, a0) T_ADD("32" c, a1)
#define T_BIAS_ROW(r, c, a0, a1)                                                                   \
    "vbroadcastss 4*" #r "(%[a]), %%ymm0\n\t" T_ADD("%%ymm0", a0) T_ADD("%%ymm0", a1)
#define T_BIAS_COL(r, c, a0, a1) T_ADD("%%ymm0", a0) T_ADD("%%ymm1", a1)
#define T_RES(r, c, a0, a1) T_ADD("(%[a])", a0) T_ADD("32(%[a])", a1) "add %[b], %[a]\n\t"
#define T_CLAMP1(acc)                                                                              \
    "vmaxps %%ymm" #acc ", %%ymm2, %%ymm" #acc "\n\tvminps %%ymm" #acc ", %%ymm3, %%ymm" #acc "\n\t"
#define T_CLAMP(r, c, a0, a1) T_CLAMP1(a0) T_CLAMP1(a1)
#define T_MUL(acc) "vmulps %%ymm0, %%ymm" #acc ", %%ymm" #acc "\n\t"
#define T_SCALE(r, c, a0, a1) T_MUL(a0) T_MUL(a1)
#define T_STORE(r, c, a0, a1) "vmovups %%ymm" #a0 ", " c "\n\tvmovups %%ymm" #a1 ", 32" c "\n\t"

/* The full tile: 12 accumulators over the whole K block, finished into C in
 * the registers: through a stack copy and the C epilogue a 6x16 tile's tail
 * was ~4 % of a 128 x 768 x 768 product (perf: outside the K loop). The
 * 5-row form (10 accumulators, A still in 6-row panels) runs the tail panels
 * of an M = 6 q + 1 or 6 q + 2 block (tail_split); the 4-row form (8) those
 * of a small one (4 + 3, 4 + 4), and edge panels of 1-4 rows. */
/* The K loop is written in assembly: with intrinsics GCC spilled one of the
 * 12 accumulators (15 of 16 registers are live), and the store/load round
 * trip on the spilled chain capped the kernel near 60 % of peak. ymm4-15
 * (ymm4-11 for 4 rows) accumulate, ymm0-1 hold B's row, ymm2-3 the
 * broadcasts. */
#define TILE_ZERO(r) "vxorps %%ymm" #r ", %%ymm" #r ", %%ymm" #r "\n\t"
#define TILE_ZERO4 TILE_ZERO(4) TILE_ZERO(5) TILE_ZERO(6) TILE_ZERO(7) TILE_ZERO(8) TILE_ZERO(9) \
    TILE_ZERO(10) TILE_ZERO(11)
#define TILE_ZERO5 TILE_ZERO4 TILE_ZERO(12) TILE_ZERO(13)
#define TILE_ZERO6 TILE_ZERO5 TILE_ZERO(14) TILE_ZERO(15)
/* clang-format off */
#define TILE_ASM(NAME, K_STEP, T_EACH_ROW, ZERO, AP, A1, A2, A3, A4, IN)                         \
    static void NAME(size_t kc, const float *a, size_t lda, const float *b, float *c, size_t ldc,  \
                     const tile_io *io) {                                                          \
        size_t kk = kc;                                                                            \
        ptrdiff_t L = (ptrdiff_t)(lda * sizeof(float)), L3 = 3 * L, L5 = 5 * L;                    \
        (void)L3;                                                                                  \
        (void)L5;                                                                                  \
        ptrdiff_t ld = (ptrdiff_t)(ldc * sizeof(float));                                           \
        float *c3 = c + 3 * ldc;                                                                   \
        __asm__ volatile(ZERO                                                                      \
                         "cmp $4, %[k]\n\t"                                                        \
                         "jb 3f\n\t"                                                               \
                         ".p2align 5\n"                                                            \
                         "1:\n\t"                                                                  \
                         "prefetcht0 0(%[b],%[pf])\n\t" K_STEP(AP, 0, 0)                           \
                         "prefetcht0 64(%[b],%[pf])\n\t" K_STEP(AP, A1, 64)                        \
                         "prefetcht0 128(%[b],%[pf])\n\t" K_STEP(AP, A2, 128)                      \
                         "prefetcht0 192(%[b],%[pf])\n\t" K_STEP(AP, A3, 192)                      \
                         "add $" #A4 ", %[a]\n\t"                                                  \
                         "add $256, %[b]\n\t"                                                      \
                         "sub $4, %[k]\n\t"                                                        \
                         "cmp $4, %[k]\n\t"                                                        \
                         "jae 1b\n"                                                                \
                         "3:\n\t"                                                                  \
                         "test %[k], %[k]\n\t"                                                     \
                         "jz 2f\n"                                                                 \
                         "4:\n\t" K_STEP(AP, 0, 0)                                                 \
                         "add $" #A1 ", %[a]\n\t"                                                  \
                         "add $64, %[b]\n\t"                                                       \
                         "dec %[k]\n\t"                                                            \
                         "jnz 4b\n"                                                                \
                         "2:\n\t"                                                                  \
                         "cmpl $0, 24(%[io])\n\t"                                                  \
                         "je 5f\n\t" T_EACH_ROW(T_ADD_C)                                           \
                         "5:\n\t"                                                                  \
                         "cmpl $0, 28(%[io])\n\t"                                                  \
                         "je 9f\n\t"                                                               \
                         "cmpl $2, 28(%[io])\n\t"                                                  \
                         "jne 10f\n\t"                                                             \
                         "vbroadcastss 44(%[io]), %%ymm0\n\t" T_EACH_ROW(T_SCALE)                  \
                         "10:\n\t"                                                                 \
                         "mov (%[io]), %[a]\n\t"                                                   \
                         "cmpl $1, 32(%[io])\n\t"                                                  \
                         "jne 6f\n\t" T_EACH_ROW(T_BIAS_ROW)                                       \
                         "jmp 7f\n"                                                                \
                         "6:\n\t"                                                                  \
                         "cmpl $2, 32(%[io])\n\t"                                                  \
                         "jne 7f\n\t"                                                              \
                         "vmovups (%[a]), %%ymm0\n\t"                                              \
                         "vmovups 32(%[a]), %%ymm1\n\t" T_EACH_ROW(T_BIAS_COL)                     \
                         "7:\n\t"                                                                  \
                         "mov 8(%[io]), %[a]\n\t"                                                  \
                         "test %[a], %[a]\n\t"                                                     \
                         "jz 8f\n\t"                                                               \
                         "mov 16(%[io]), %[b]\n\t" T_EACH_ROW(T_RES)                               \
                         "8:\n\t"                                                                  \
                         "vbroadcastss 36(%[io]), %%ymm2\n\t"                                      \
                         "vbroadcastss 40(%[io]), %%ymm3\n\t" T_EACH_ROW(T_CLAMP)                  \
                         "9:\n\t" T_EACH_ROW(T_STORE)                                              \
                         : [a] "+r"(a), [b] "+r"(b), [k] "+r"(kk)                                  \
                         : [io] "r"(io), [c0] "r"(c), [c3] "r"(c3), [ld] "r"(ld), [pf] "r"(io->pf) \
                           IN                                                                      \
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
                           "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",          \
                           "memory", "cc");                                                        \
    }
/* clang-format on */
/* The packed panels' A steps (24 bytes a k step), and A in place (4). */
#define IN_PK
#define IN_A , [L] "r"(L), [L3] "r"(L3), [L5] "r"(L5)
TILE_ASM(tile_6x16_asm, K_STEP6, T_EACH_ROW6, TILE_ZERO6, AP_PK, 24, 48, 72, 96, IN_PK)
TILE_ASM(tile_5x16_asm, K_STEP5, T_EACH_ROW5, TILE_ZERO5, AP_PK, 24, 48, 72, 96, IN_PK)
TILE_ASM(tile_4x16_asm, K_STEP4, T_EACH_ROW4, TILE_ZERO4, AP_PK, 24, 48, 72, 96, IN_PK)
/* The same K loop and finish on A's rows where they lie: the values of
 * tile_6x16_asm, bit for bit. */
TILE_ASM(tile_6x16_in_place, K_STEP6, T_EACH_ROW6, TILE_ZERO6, AP_IN, 4, 8, 12, 16, IN_A)

/* Narrower tiles for the edges, with the same per-element order of the K
 * sums (one FMA per k, in k order), so a value does not depend on which
 * tile computed it. A tile of 6 rows costs the same whether 6 or 2 of them
 * are wanted: an M of 32 (5 full panels and 2 rows) computed 36 rows, an
 * N of 49 (7 x 7 pixels: 3 full panels and 1 column) 64 columns. Rows
 * (and the upper 8 columns of tile_6x8) that are not computed are zeroed:
 * the epilogue reads all 96. Panels of 1-3 rows run the 4-row tile on the
 * packed zero rows: a 2-row tile had four accumulator chains, bound by the
 * FMA latency, and neither it nor the raw-sum tiles prefetched B, so a
 * GEMM of 2 or 3 rows against weights from memory ran 1.1-1.2x one of 4
 * (24 MatMuls of 768 x 3072 and back at M = 2: A/B 0.87 on 1 thread). */
static void tile_6x8(size_t kc, const float *a, const float *b, float *acc) {
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
    for (size_t k = 0; k < kc; k++, a += 6, b += 16) {
        __m256 b0 = _mm256_loadu_ps(b);
        c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 0), b0, c0);
        c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), b0, c1);
        c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), b0, c2);
        c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), b0, c3);
        c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 4), b0, c4);
        c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 5), b0, c5);
    }
    __m256 z = _mm256_setzero_ps();
    _mm256_store_ps(acc + 0, c0);
    _mm256_store_ps(acc + 8, z);
    _mm256_store_ps(acc + 16, c1);
    _mm256_store_ps(acc + 24, z);
    _mm256_store_ps(acc + 32, c2);
    _mm256_store_ps(acc + 40, z);
    _mm256_store_ps(acc + 48, c3);
    _mm256_store_ps(acc + 56, z);
    _mm256_store_ps(acc + 64, c4);
    _mm256_store_ps(acc + 72, z);
    _mm256_store_ps(acc + 80, c5);
    _mm256_store_ps(acc + 88, z);
}

/* The tile's epilogue with its activation known at compile time: through
 * store_row, nnf_act8 stayed an out-of-line call with a switch per vector,
 * and SiLU after a 64-deep 1x1 conv took a quarter of the conv's time. The
 * arithmetic is nnf_ep8's, so results equal the generic path's. */
static inline __attribute__((always_inline)) void ep_tile_act(nnf_act_kind kind, const float *acc,
                                                              float *c, size_t ldc, size_t m,
                                                              size_t n, __m256i m0, __m256i m1,
                                                              const nnf_tile_ep *t) {
    nnf_epilogue e = *t->ep;
    e.act.kind = kind;
    nnf_tile_ep tk = *t;
    tk.ep = &e;
    if (kind == NNF_ACT_SILU && !(t->residual && e.residual_after_act)) {
        /* all rows' pre-activation values first, then the twelve SiLU chains
         * four side by side (nnf_silu8_fast_n): each is ~25 dependent
         * operations, and done row by row behind the loads and branches they
         * did not overlap */
        e.act.kind = NNF_ACT_NONE;
        __m256 v[12];
        for (size_t r = 0; r < 6; r++) {
            v[2 * r] = _mm256_load_ps(acc + 16 * r);
            v[2 * r + 1] = _mm256_load_ps(acc + 16 * r + 8);
            if (r >= m)
                continue;
            float *cr = c + r * ldc;
            if (t->accumulate) {
                v[2 * r] = _mm256_add_ps(v[2 * r], n == 16 ? _mm256_loadu_ps(cr)
                                                           : _mm256_maskload_ps(cr, m0));
                v[2 * r + 1] = _mm256_add_ps(v[2 * r + 1], n == 16
                                                               ? _mm256_loadu_ps(cr + 8)
                                                               : _mm256_maskload_ps(cr + 8, m1));
            }
            v[2 * r] = nnf_ep8(v[2 * r], &tk, r, 0, n >= 8, m0);
            v[2 * r + 1] = nnf_ep8(v[2 * r + 1], &tk, r, 8, n == 16, m1);
        }
        for (size_t i = 0; i < 12; i += 4)
            nnf_silu8_fast_n(v + i, 4);
        for (size_t r = 0; r < m; r++) {
            float *cr = c + r * ldc;
            if (n == 16) {
                _mm256_storeu_ps(cr, v[2 * r]);
                _mm256_storeu_ps(cr + 8, v[2 * r + 1]);
            } else {
                _mm256_maskstore_ps(cr, m0, v[2 * r]);
                _mm256_maskstore_ps(cr + 8, m1, v[2 * r + 1]);
            }
        }
        return;
    }
    for (size_t r = 0; r < m; r++)
        store_row(c + r * ldc, _mm256_load_ps(acc + 16 * r), _mm256_load_ps(acc + 16 * r + 8), r, n,
                  m0, m1, &tk);
}

static __attribute__((flatten, noinline)) void ep_tile_flat(const float *acc, float *c,
                                                            size_t ldc, size_t m, size_t n,
                                                            __m256i m0, __m256i m1,
                                                            const nnf_tile_ep *t) {
    switch (t->ep->act.kind) {
#define K(kind)                                                                                    \
    case kind: ep_tile_act(kind, acc, c, ldc, m, n, m0, m1, t); return;
        NNF_ACT_KINDS(K)
#undef K
    }
    for (size_t r = 0; r < m; r++)
        store_row(c + r * ldc, _mm256_load_ps(acc + 16 * r), _mm256_load_ps(acc + 16 * r + 8), r, n,
                  m0, m1, t);
}

/* The microkernel on a packed panel of A (lda 0), or on A's rows where
 * they lie (lda their stride in floats; a full 6-row panel): the same FMAs
 * in the same order and the same finish either way. */
static inline __attribute__((always_inline)) void ukernel(size_t kc, const float *a, size_t lda,
                                                          const float *b, float *c, size_t ldc,
                                                          size_t m, size_t n,
                                                          const nnf_tile_ep *t) {
    /* C's rows are far apart (ldc) and get read back on every K block after
     * the first: fetch them now, behind kc steps of FMAs, not at the store. */
    for (size_t r = 0; r < m; r++) {
        _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + r * ldc + 15), _MM_HINT_T0);
    }
    /* A scale alone (an attention's): the full tiles multiply in the
     * registers, first, as nnf_ep8 does. Through ep_tile_flat it was a tenth
     * of Whisper's attention on this tier. With a bias or a residual the C
     * path's alpha * v + b is one FMA (GCC contracts it), so those keep the
     * C path; the edge tiles take it too. */
    const nnf_epilogue *e = t->ep;
    nnf_epilogue unscaled;
    int scaled = e && e->alpha != 1.0f && e->bias_kind == NNF_BIAS_NONE && !e->residual &&
                 e->act.kind == NNF_ACT_NONE;
    if (scaled) {
        unscaled = *e;
        unscaled.alpha = 1.0f;
    }
    nnf_ep_fast f = nnf_ep_fast_init(scaled ? &unscaled : e);
    if (m >= 4 && n == 16 && (!e || f.clamp_only)) {
        tile_io io = {.accumulate = t->accumulate, .lo = -INFINITY, .hi = INFINITY,
                      .pf = t->b_prefetch ? t->b_prefetch : 1024};
        if (e) {
            io.ep = scaled ? 2 : 1;
            io.alpha = e->alpha;
            io.bias = t->bias;
            io.bias_kind = !f.bias                              ? 0
                           : e->bias_kind == NNF_BIAS_PER_ROW ? 1
                                                              : 2;
            io.res = t->residual;
            io.res_ld = (ptrdiff_t)(e->ld_residual * sizeof(float));
            io.lo = _mm256_cvtss_f32(f.lo);
            io.hi = _mm256_cvtss_f32(f.hi);
        }
        if (lda)
            tile_6x16_in_place(kc, a, lda, b, c, ldc, &io);
        else if (m == 6)
            tile_6x16_asm(kc, a, 0, b, c, ldc, &io);
        else if (m == 5)
            tile_5x16_asm(kc, a, 0, b, c, ldc, &io);
        else
            tile_4x16_asm(kc, a, 0, b, c, ldc, &io);
        return;
    }
    float acc[96] __attribute__((aligned(32)));
    tile_io raw = {.pf = t->b_prefetch ? t->b_prefetch : 1024}; /* the raw sums */
    if (lda) /* B's panel is zero past n: the 16 columns' first n are tile_6x8's */
        tile_6x16_in_place(kc, a, lda, b, acc, 16, &raw);
    else if (n <= 8)
        tile_6x8(kc, a, b, acc);
    else if (m <= 4) {
        tile_4x16_asm(kc, a, 0, b, acc, 16, &raw);
        memset(acc + 64, 0, 32 * sizeof(float));
    } else if (m == 5) {
        tile_5x16_asm(kc, a, 0, b, acc, 16, &raw);
        memset(acc + 80, 0, 16 * sizeof(float));
    } else
        tile_6x16_asm(kc, a, 0, b, acc, 16, &raw);

    __m256i m0 = nnf_mask8(n), m1 = nnf_mask8(n > 8 ? n - 8 : 0);
    /* bias + residual + ReLU/Clip (a conv's usual tail) without a call per
     * vector: with K = 64 the epilogue is a fifth of the tile's work */
    if (f.clamp_only && !scaled) {
        int full = n == 16;
        __m256 bc0 = _mm256_setzero_ps(), bc1 = _mm256_setzero_ps();
        if (e->bias_kind == NNF_BIAS_PER_COL) {
            bc0 = full || n >= 8 ? _mm256_loadu_ps(t->bias) : _mm256_maskload_ps(t->bias, m0);
            bc1 = full ? _mm256_loadu_ps(t->bias + 8) : _mm256_maskload_ps(t->bias + 8, m1);
        }
        for (size_t r = 0; r < m; r++) {
            float *cr = c + r * ldc;
            __m256 v0 = _mm256_load_ps(acc + 16 * r), v1 = _mm256_load_ps(acc + 16 * r + 8);
            if (t->accumulate) {
                v0 = _mm256_add_ps(v0, full ? _mm256_loadu_ps(cr) : _mm256_maskload_ps(cr, m0));
                v1 = _mm256_add_ps(v1,
                                   full ? _mm256_loadu_ps(cr + 8) : _mm256_maskload_ps(cr + 8, m1));
            }
            __m256 b0 = bc0, b1 = bc1;
            if (e->bias_kind == NNF_BIAS_PER_ROW)
                b0 = b1 = _mm256_set1_ps(t->bias[r]);
            const float *res = t->residual ? t->residual + r * e->ld_residual : NULL;
            if (full) {
                _mm256_storeu_ps(cr, nnf_ep_fast8(&f, v0, b0, res, 1, m0));
                _mm256_storeu_ps(cr + 8, nnf_ep_fast8(&f, v1, b1, res ? res + 8 : NULL, 1, m1));
            } else {
                _mm256_maskstore_ps(cr, m0, nnf_ep_fast8(&f, v0, b0, res, 0, m0));
                _mm256_maskstore_ps(cr + 8, m1,
                                    nnf_ep_fast8(&f, v1, b1, res ? res + 8 : NULL, 0, m1));
            }
        }
        return;
    }
    if (t->ep) {
        ep_tile_flat(acc, c, ldc, m, n, m0, m1, t);
        return;
    }
    for (size_t r = 0; r < m; r++)
        store_row(c + r * ldc, _mm256_load_ps(acc + 16 * r), _mm256_load_ps(acc + 16 * r + 8), r, n,
                  m0, m1, t);
}

void nnf_gemm_ukernel_6x16_avx2(size_t kc, const float *a, const float *b, float *c, size_t ldc,
                                size_t m, size_t n, const nnf_tile_ep *t) {
    ukernel(kc, a, 0, b, c, ldc, m, n, t);
}

/* A full panel of A read in place: no copy of A a K block (a tenth of
 * BERT's attention: its probabilities, 1500 wide in Whisper's). */
void nnf_gemm_ukernel_direct_6x16_avx2(size_t kc, const float *a, size_t lda, const float *b,
                                       float *c, size_t ldc, size_t n, const nnf_tile_ep *t) {
    ukernel(kc, a, lda, b, c, ldc, 6, n, t);
}

static inline __m256 vm8(nnf_vm_fn fn, __m256 x) {
    switch (fn) {
    case NNF_VM_EXP: return nnf_exp8(x);
    case NNF_VM_SIGMOID: return nnf_sigmoid8(x);
    case NNF_VM_TANH: return nnf_tanh8(x);
    case NNF_VM_ERF: return nnf_erf8(x);
    case NNF_VM_SILU: return nnf_silu8_fast(x);
    }
    return x;
}

void nnf_vmath_avx2(nnf_vm_fn fn, const float *x, float *y, size_t n) {
    size_t i = 0;
    /* the exp-based functions four vectors side by side, as the kernels
     * run them (the test compares these with the 1-vector forms) */
    if (fn == NNF_VM_EXP || fn == NNF_VM_SIGMOID || fn == NNF_VM_SILU) {
        for (; i + 32 <= n; i += 32) {
            __m256 v[4];
            NNF_EACH(j, 4) v[j] = _mm256_loadu_ps(x + i + 8 * j);
            if (fn == NNF_VM_EXP)
                nnf_exp8_n(v, 4);
            else if (fn == NNF_VM_SIGMOID)
                nnf_sigmoid8_n(v, 4);
            else
                nnf_silu8_fast_n(v, 4);
            NNF_EACH(j, 4) _mm256_storeu_ps(y + i + 8 * j, v[j]);
        }
    }
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, vm8(fn, _mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i m = nnf_mask8(n - i);
        _mm256_maskstore_ps(y + i, m, vm8(fn, _mm256_maskload_ps(x + i, m)));
    }
}

void nnf_act_array_avx2(const nnf_activation *act, const float *x, float *y, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, nnf_act8(_mm256_loadu_ps(x + i), act));
    if (i < n) {
        __m256i m = nnf_mask8(n - i);
        _mm256_maskstore_ps(y + i, m, nnf_act8(_mm256_maskload_ps(x + i, m), act));
    }
}

/* A (row-major, not transposed) into 6-row panels. */
void nnf_gemm_pack_a6_avx2(const float *base, size_t ld, size_t mn0, size_t mnc, size_t k0,
                           size_t kc, float *dst) {
    nnf_pack_a_panels_avx2(base, ld, mn0, mnc, k0, kc, dst, 6);
}

/* B read transposed into 16-column panels. */
void nnf_gemm_pack_b16_avx2(const float *base, size_t ld, size_t mn0, size_t mnc, size_t k0,
                            size_t kc, float *dst) {
    nnf_pack_a_panels_avx2(base, ld, mn0, mnc, k0, kc, dst, 16);
}

/* M = 1 against a packed B, 16-column panels (x86/gemv_block.h). */
NNF_GEMV_BLOCK(nnf_gemv_block_16_avx2, __m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps,
               _mm256_fmadd_ps)

/* Depthwise on NCHW planes, AVX-512: the plane kernel of dwconv_avx2.c (the
 * driver in dwconv_plane.h) with 16 outputs of a row per vector and 8 rows
 * per pass. A 7x7 is 49 FMAs an output, FMA-bound where a 3x3 is
 * load-bound: on the 8-lane kernels ConvNeXt's 7x7s ran at 0.35-0.46 of
 * ONNX Runtime's. What took this form from 0.8 to about 2 FMAs a cycle:
 * - each prepared row's two aligned vectors loaded once and the taps'
 *   columns shifted out of them (valignd): an unaligned 64-byte load always
 *   splits a cache line;
 * - each FMA takes its weight as a broadcast memory operand (dw_fma_bcast);
 * - 8 output rows a pass, each summed in two chains (the window's even rows
 *   and its odd rows, added at the end): one chain of 49 FMAs an output row
 *   left the pipes waiting on FMA latency;
 * - rows in the vertical padding skipped (the reference skips them too).
 * So the sums differ from the AVX2 form's in their last bits (its single
 * chain adds the padding rows' zeros); test_conv_fast checks both against
 * the double oracle. Where the epilogue is a clamp it runs on all 16 lanes
 * (nnf_ep_fast8's operations), else on each half through dw_store. */
#include "kernels/x86/avx512_intrin.h"

#include <stdint.h>

/* Stride 1: d[i] = xr[c0 + i] for i < n (rounded up to 16), zeros outside
 * the row [0, w), d 64-byte aligned: one masked load and one aligned store
 * per 16 columns (the lanes outside the row are neither read nor faulted;
 * the address is formed as an integer, as it may point before the row). */
static inline __attribute__((always_inline)) void dw_prep16_s1(const float *xr, ptrdiff_t w,
                                                               ptrdiff_t c0, size_t n, float *d) {
    for (size_t i = 0; i < n; i += 16) {
        ptrdiff_t c = c0 + (ptrdiff_t)i, lo = c < 0 ? -c : 0, hi = w - c;
        __mmask16 m = 0;
        if (hi > lo)
            m = (__mmask16)(((hi >= 16 ? 0xffffu : (1u << hi) - 1u) >> lo) << lo);
        const float *q = (const float *)((uintptr_t)xr + (uintptr_t)c * sizeof(float));
        _mm512_store_ps(d + i, _mm512_maskz_loadu_ps(m, q));
    }
}

#define DW_VL 16
#define DW_PASS dw_pass_rows16
#define DW_PREP_S1 dw_prep16_s1
#include "kernels/x86/dwconv_plane.h"

/* Columns j.. j + 15 of the 32 in cur, nxt (j < 16, a constant once the
 * taps are unrolled: valignd takes an immediate). */
static inline __attribute__((always_inline)) __m512 dw_shift(__m512 cur, __m512 nxt, size_t j) {
    __m512i c = _mm512_castps_si512(cur), n = _mm512_castps_si512(nxt);
    switch (j) {
    case 0: return cur;
    case 1: return _mm512_castsi512_ps(_mm512_alignr_epi32(n, c, 1));
    case 2: return _mm512_castsi512_ps(_mm512_alignr_epi32(n, c, 2));
    case 3: return _mm512_castsi512_ps(_mm512_alignr_epi32(n, c, 3));
    case 4: return _mm512_castsi512_ps(_mm512_alignr_epi32(n, c, 4));
    case 5: return _mm512_castsi512_ps(_mm512_alignr_epi32(n, c, 5));
    default: return _mm512_castsi512_ps(_mm512_alignr_epi32(n, c, 6));
    }
}

/* acc + w * v with w broadcast from memory by the FMA itself. As
 * intrinsics GCC hoists each tap's broadcast into a register, shared by the
 * rows that use it, and with 49 taps live across the unrolled rows spilled
 * most of them and of the sums to the stack (7424 zmm spills in this file);
 * in an asm statement the broadcast stays the FMA's operand. The emulated
 * tier (no AVX-512 to assemble) keeps the intrinsics: same operation. */
static inline __attribute__((always_inline)) __m512 dw_fma_bcast(__m512 acc, const float *w,
                                                                 __m512 v) {
#ifdef NNF_AVX512_EMULATED
    return _mm512_fmadd_ps(_mm512_set1_ps(*w), v, acc);
#else
    __asm__("vfmadd231ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(v), "m"(*w));
    return acc;
#endif
}

/* Row r's 16 outputs from column o: nnf_ep_fast8's operations on all 16
 * lanes where the epilogue is a clamp (the same bits), else dw_store on
 * each half. */
static inline __attribute__((always_inline)) void
dw_store16(const dw_pass *p, size_t r, size_t o, __m512 v, __m512 lo, __m512 hi, __m512 bias) {
    if (!p->f.clamp_only) {
        dw_store(p, r, o, _mm512_castps512_ps256(v));
        if (o + 8 < p->cw)
            dw_store(p, r, o + 8, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        return;
    }
    size_t left = p->cw - o;
    __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
    if (p->f.bias)
        v = _mm512_add_ps(v, bias);
    if (p->res)
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, p->res + r * p->ldy + o));
    if (p->f.clamp)
        v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
    _mm512_mask_storeu_ps(p->y + r * p->ldy + o, m, v);
}

/* R output rows of the strip, 16 columns at a time (dw_pass_rows8 with
 * zmm): each prepared row's two aligned vectors at the strip's column (per
 * half at stride 2) loaded once, each tap's columns shifted out of them
 * (an unaligned 64-byte load always splits a cache line), and each tap
 * vector feeds every output row whose window holds its row. */
static inline __attribute__((always_inline)) void dw_pass_rows16(const float *const *rp,
                                                                 const void *wts, const size_t k,
                                                                 const size_t st, const size_t R,
                                                                 const dw_pass *p) {
    const float *w = wts;
    const size_t rows = (R - 1) * st + k;
    const __m512 lo = _mm512_broadcast_f32x8(p->f.lo), hi = _mm512_broadcast_f32x8(p->f.hi);
    const __m512 bias = _mm512_broadcast_f32x8(p->bias);
    for (size_t o = 0; o < p->cw; o += 16) {
        __m512 acc[DW_R], odd[DW_R];
#pragma GCC unroll 8
        for (size_t r = 0; r < R; r++)
            acc[r] = odd[r] = _mm512_setzero_ps();
#pragma GCC unroll 21
        for (size_t ir = 0; ir < rows; ir++) {
            if (rp[ir] == dw_zero_row)
                continue; /* a padding row adds nothing (0 * w), as the reference skips it */
            const float *q = rp[ir] + o;
            __m512 c0 = _mm512_load_ps(q), n0 = _mm512_load_ps(q + 16), c1 = c0, n1 = n0;
            if (st == 2) {
                c1 = _mm512_load_ps(q + DW_HALF);
                n1 = _mm512_load_ps(q + DW_HALF + 16);
            }
#pragma GCC unroll 7
            for (size_t j = 0; j < k; j++) {
                __m512 v = st == 1 ? dw_shift(c0, n0, j)
                           : j & 1 ? dw_shift(c1, n1, j / 2)
                                   : dw_shift(c0, n0, j / 2);
#pragma GCC unroll 8
                for (size_t r = 0; r < R; r++)
                    if (ir >= r * st && ir - r * st < k) {
                        if ((ir - r * st) & 1)
                            odd[r] = dw_fma_bcast(odd[r], w + (ir - r * st) * k + j, v);
                        else
                            acc[r] = dw_fma_bcast(acc[r], w + (ir - r * st) * k + j, v);
                    }
            }
        }
#pragma GCC unroll 8
        for (size_t r = 0; r < R; r++)
            dw_store16(p, r, o, _mm512_add_ps(acc[r], odd[r]), lo, hi, bias);
    }
}

void nnf_dw_plane_avx512(const nnf_conv2d_shape *s, const float *x, const float *w, float *y,
                         const nnf_tile_ep *t) {
    DW_SPECIALISE(dw_plane, s, x, w, y, t);
}

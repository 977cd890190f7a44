/* Strided convolution, direct AVX2 kernel over the phase-split input (see
 * conv_strided.c): a 6 output channel x 16 pixel tile stays in registers
 * for the whole K = C kh kw (small: the stems), its B operand read straight
 * from the split rows at the tap offsets (two contiguous loads per tap)
 * instead of from packed panels. With 3 input channels K is 27..147 and the
 * GEMM path spent 11 % packing panels that each feed only OC / 6 tiles. */
#include "kernels/conv_fast.h"
#include "kernels/x86/ep_fast_avx2.h"

#include <immintrin.h>

/* The epilogue and the store of one accumulator row: nv vectors, n valid
 * pixels. */
static inline __attribute__((always_inline)) void store_row(const nnf_ep_fast *f,
                                                            const nnf_tile_ep *t, size_t r,
                                                            const __m256 *acc, int nv, size_t n,
                                                            float *c) {
    const nnf_epilogue *e = t->ep;
    __m256 bias = t->bias ? _mm256_set1_ps(t->bias[r]) : _mm256_setzero_ps();
    const float *res = t->residual ? t->residual + r * e->ld_residual : NULL;
    for (int j = 0; j < nv; j++) {
        size_t col = (size_t)j * 8;
        int full = n >= col + 8;
        __m256i mask = nnf_mask8(full ? 8 : n - col);
        __m256 v = f->clamp_only ? nnf_ep_fast8(f, acc[j], bias, res ? res + col : NULL, full, mask)
                                 : nnf_ep8(acc[j], t, r, col, full, mask);
        if (full)
            _mm256_storeu_ps(c + col, v);
        else
            _mm256_maskstore_ps(c + col, mask, v);
    }
}

/* 12 accumulators, 2 B vectors and a broadcast: a 4 x 24 tile needed 16
 * registers and the compiler kept one accumulator in memory, a store-load
 * chain through every k (30 ms on the stem, not 15). The k loop is a
 * function of its own that only ends by storing the accumulators: with the
 * epilogue inlined after it, register pressure spilled one again. */
enum { MR = NNF_STRIDED_MR };

/* acc (MR x 8 nv, row-major) = w panel (k-major, [k][MR]) times the taps at
 * src + koff[k] (the split copy at the tile's first pixel). */
#define KLOOP(NV)                                                                                  \
    static __attribute__((noinline)) void kloop_##NV(size_t kdim, const float *w,                 \
                                                     const float *src, const size_t *koff,        \
                                                     float *out) {                                \
        __m256 acc[MR][NV];                                                                        \
        _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++)                                       \
            _Pragma("GCC unroll 8") for (int j = 0; j < NV; j++) acc[r][j] = _mm256_setzero_ps(); \
        for (size_t k = 0; k < kdim; k++) {                                                        \
            const float *s = src + koff[k];                                                        \
            __m256 b[NV];                                                                          \
            _Pragma("GCC unroll 8") for (int j = 0; j < NV; j++) b[j] = _mm256_loadu_ps(s + 8 * j); \
            _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++) {                                 \
                __m256 a = _mm256_broadcast_ss(w + MR * k + r);                                    \
                _Pragma("GCC unroll 8") for (int j = 0; j < NV; j++)                               \
                    acc[r][j] = _mm256_fmadd_ps(a, b[j], acc[r][j]);                               \
            }                                                                                      \
        }                                                                                          \
        _Pragma("GCC unroll 8") for (int r = 0; r < MR; r++)                                       \
            _Pragma("GCC unroll 8") for (int j = 0; j < NV; j++)                                   \
                _mm256_store_ps(out + (r * NV + j) * 8, acc[r][j]);                                \
    }
KLOOP(1)
KLOOP(2)
#undef KLOOP

/* x / (1 + exp(-x)) with the division as a reciprocal estimate and one
 * Newton step (relative error under 3e-7), as the GEMM's SiLU epilogue
 * (x86/gemm_avx2.c): vdivps through nnf_act8 took a third of the stem. */
static inline __attribute__((always_inline)) __m256 silu8(__m256 x) {
    __m256 d = _mm256_add_ps(_mm256_set1_ps(1.0f), nnf_exp8(_mm256_sub_ps(_mm256_setzero_ps(), x)));
    __m256 r = _mm256_rcp_ps(d);
    r = _mm256_mul_ps(r, _mm256_fnmadd_ps(d, r, _mm256_set1_ps(2.0f)));
    return _mm256_mul_ps(x, r);
}

/* The epilogue on a tile's accumulators (MR x 8 nv), m x n stored. SiLU
 * (the YOLO stems): every pre-activation value first, then the SiLU chains
 * back to back so they overlap. */
static __attribute__((flatten)) void tile_store(const float *acc, int nv, size_t m, size_t n,
                                                float *c, size_t ldc, const nnf_ep_fast *f,
                                                const nnf_tile_ep *t) {
    const nnf_epilogue *e = t->ep;
    if (!f->clamp_only && e->act.kind == NNF_ACT_SILU && !(t->residual && e->residual_after_act)) {
        nnf_epilogue pre = *e;
        pre.act.kind = NNF_ACT_NONE;
        nnf_tile_ep tp = *t;
        tp.ep = &pre;
        __m256 v[MR * 2];
        __m256i mask[2];
        for (int j = 0; j < nv; j++)
            mask[j] = nnf_mask8(n >= (size_t)j * 8 + 8 ? 8 : n - (size_t)j * 8);
        size_t cnt = m * (size_t)nv;
        for (size_t r = 0; r < m; r++)
            for (int j = 0; j < nv; j++)
                v[r * (size_t)nv + (size_t)j] =
                    nnf_ep8(_mm256_load_ps(acc + (r * (size_t)nv + (size_t)j) * 8), &tp, r,
                            (size_t)j * 8, n >= (size_t)j * 8 + 8, mask[j]);
        for (size_t i = 0; i < cnt; i++)
            v[i] = silu8(v[i]);
        for (size_t r = 0; r < m; r++)
            for (int j = 0; j < nv; j++) {
                float *cp = c + r * ldc + (size_t)j * 8;
                if (n >= (size_t)j * 8 + 8)
                    _mm256_storeu_ps(cp, v[r * (size_t)nv + (size_t)j]);
                else
                    _mm256_maskstore_ps(cp, mask[j], v[r * (size_t)nv + (size_t)j]);
            }
        return;
    }
    for (size_t r = 0; r < m; r++) {
        __m256 v[2] = {_mm256_load_ps(acc + r * 8 * (size_t)nv),
                       nv > 1 ? _mm256_load_ps(acc + r * 16 + 8) : _mm256_setzero_ps()};
        store_row(f, t, r, v, nv, n, c + r * ldc);
    }
}

void nnf_conv_strided_row_avx2(size_t kdim, const float *w, size_t oc, const float *src,
                               const size_t *koff, size_t ow, float *y, size_t ldc,
                               const nnf_epilogue *ep, const float *res) {
    nnf_ep_fast f = nnf_ep_fast_init(ep);
    _Alignas(32) float acc[MR * 16];
    /* channel panels outside the tiles: a panel's MR output rows are
     * written along the row (tiles outside put every channel's line of a
     * tile, OC lines ohw * 4 bytes apart, into one L1 set) */
    for (size_t c0 = 0; c0 < oc; c0 += MR) {
        size_t m = oc - c0 < MR ? oc - c0 : MR;
        for (size_t o0 = 0; o0 < ow; o0 += 16) {
            size_t n = ow - o0 < 16 ? ow - o0 : 16;
            nnf_tile_ep t = {.ep = ep,
                             .bias = ep->bias ? ep->bias + c0 : NULL,
                             .residual = res ? res + c0 * ep->ld_residual + o0 : NULL};
            const float *wp = w + c0 * kdim;
            float *c = y + c0 * ldc + o0;
            int nv = n > 8 ? 2 : 1;
            if (nv == 2)
                kloop_2(kdim, wp, src + o0, koff, acc);
            else
                kloop_1(kdim, wp, src + o0, koff, acc);
            tile_store(acc, nv, m, n, c, ldc, &f, &t);
        }
    }
}

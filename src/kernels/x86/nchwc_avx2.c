/* AVX2 + FMA kernels of the NCHWc8 layout (kernels/nchwc.h): one ymm is one
 * pixel's 8 channels of a block throughout. The drivers (nchwc_*.c) split
 * the work and pick the tier; these functions do one tile.
 *
 * Padding lanes: inputs have zeros there, and every store of a computed
 * value goes through the block's lane mask, so an activation of 0 that is
 * not 0 (sigmoid, hard sigmoid, a clip above 0) or an empty max window
 * never leaks into them. */
#include "kernels/x86/nchwc_avx2.h"

#include "kernels/eltwise_fast.h"

#include "kernels/x86/ep_fast_avx2.h"
#include "kernels/x86/transpose_avx2.h"
#include "kernels/x86/vmath_avx2.h"

#include <math.h>
#include <string.h>

#define B NNF_NCHWC_B

/* ---- reorders ----
 * The unroll pragmas keep r[] in registers: GCC otherwise ran the loops
 * rolled through the stack (2x slower on L2-resident planes). */

void nnf_nchwc_from_nchw_tile_avx2(const float *x, size_t hw, size_t nc, size_t np, float *y) {
    size_t p = 0;
    if (nc == B) {
        for (; p + 8 <= np; p += 8) {
            __m256 r[8];
#pragma GCC unroll 8
            for (int l = 0; l < 8; l++)
                r[l] = _mm256_loadu_ps(x + l * hw + p);
            nnf_tr8_regs_avx2(r);
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++)
                _mm256_storeu_ps(y + (p + k) * B, r[k]);
        }
    } else {
        for (; p + 8 <= np; p += 8) {
            __m256 r[8];
#pragma GCC unroll 8
            for (size_t l = 0; l < 8; l++)
                r[l] = l < nc ? _mm256_loadu_ps(x + l * hw + p) : _mm256_setzero_ps();
            nnf_tr8_regs_avx2(r);
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++)
                _mm256_storeu_ps(y + (p + k) * B, r[k]);
        }
    }
    if (p < np) {
        size_t rem = np - p;
        __m256i m = nnf_mask8(rem);
        __m256 r[8];
#pragma GCC unroll 8
        for (size_t l = 0; l < 8; l++)
            r[l] = l < nc ? _mm256_maskload_ps(x + l * hw + p, m) : _mm256_setzero_ps();
        nnf_tr8_regs_avx2(r);
#pragma GCC unroll 8
        for (size_t k = 0; k < rem; k++)
            _mm256_storeu_ps(y + (p + k) * B, r[k]);
    }
}

void nnf_nchwc_to_cl_pixels_avx2(const float *x, size_t xblk, size_t cb0, size_t nb, size_t c,
                                 size_t np, float *y, size_t plane, size_t cl) {
    size_t c0 = cb0 * B, c1 = (cb0 + nb) * B < c ? (cb0 + nb) * B : c;
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (size_t p = 0; p < np; p++) {
        size_t a = c0 / cl, i = c0 % cl; /* channel ch's group and index in it */
        for (size_t ch = c0; ch < c1; ch += B) {
            __m256 v = _mm256_loadu_ps(x + (ch / B - cb0) * xblk + p * B);
            size_t n = c1 - ch < B ? c1 - ch : B;
            if (n == B && i + B <= cl) {
                _mm256_storeu_ps(y + (a * plane + p) * cl + i, v);
                if ((i += B) == cl) {
                    a++;
                    i = 0;
                }
                continue;
            }
            /* the block's lanes [l, l + m) to the group's row at i, the
             * rest to the next group's (a block may span several: groups
             * of 85 channels, or of 3) */
            for (size_t l = 0; l < n;) {
                size_t m = n - l < cl - i ? n - l : cl - i;
                __m256 s =
                    _mm256_permutevar8x32_ps(v, _mm256_add_epi32(iota, _mm256_set1_epi32((int)l)));
                _mm256_maskstore_ps(y + (a * plane + p) * cl + i, nnf_mask8(m), s);
                l += m;
                if ((i += m) == cl) {
                    a++;
                    i = 0;
                }
            }
        }
    }
}

void nnf_nchwc_to_nchw_tile_avx2(const float *x, size_t hw, size_t nc, size_t np, float *y) {
    size_t p = 0;
    if (nc == B) {
        for (; p + 8 <= np; p += 8) {
            __m256 r[8];
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++)
                r[k] = _mm256_loadu_ps(x + (p + k) * B);
            nnf_tr8_regs_avx2(r);
#pragma GCC unroll 8
            for (int l = 0; l < 8; l++)
                _mm256_storeu_ps(y + l * hw + p, r[l]);
        }
    } else {
        for (; p + 8 <= np; p += 8) {
            __m256 r[8];
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++)
                r[k] = _mm256_loadu_ps(x + (p + k) * B);
            nnf_tr8_regs_avx2(r);
#pragma GCC unroll 8
            for (size_t l = 0; l < nc; l++)
                _mm256_storeu_ps(y + l * hw + p, r[l]);
        }
    }
    if (p < np) {
        size_t rem = np - p;
        __m256i m = nnf_mask8(rem);
        __m256 r[8];
#pragma GCC unroll 8
        for (size_t k = 0; k < 8; k++)
            r[k] = k < rem ? _mm256_loadu_ps(x + (p + k) * B) : _mm256_setzero_ps();
        nnf_tr8_regs_avx2(r);
#pragma GCC unroll 8
        for (size_t l = 0; l < nc; l++)
            _mm256_maskstore_ps(y + l * hw + p, m, r[l]);
    }
}

/* Prefetch off floats past base. The address may lie past the end of the
 * buffer (a last row's look-ahead), which as a pointer sum would be
 * undefined, so it is formed as an integer: prefetches never fault. */
static inline void prefetch_at(const float *base, size_t off) {
    _mm_prefetch((const char *)((uintptr_t)base + off * sizeof(float)), _MM_HINT_T0);
}

/* ---- lanes spread within groups (grouped conv) ---- */

#define SPREAD(IMM)                                                                                \
    do {                                                                                           \
        size_t p = 0;                                                                              \
        for (; p + 4 <= np; p += 4)                                                                \
            for (size_t u = 0; u < 4; u++)                                                         \
                _mm256_storeu_ps(y + (p + u) * B,                                                  \
                                 _mm256_permute_ps(_mm256_loadu_ps(x + (p + u) * B), IMM));        \
        for (; p < np; p++)                                                                        \
            _mm256_storeu_ps(y + p * B, _mm256_permute_ps(_mm256_loadu_ps(x + p * B), IMM));       \
    } while (0)

void nnf_nchwc_lane_spread_avx2(const float *x, float *y, size_t np, size_t cpg, size_t j) {
    /* vpermilps picks within each 128-bit half by a constant: groups of 4
     * are the halves, groups of 2 their pairs */
    switch (cpg * 4 + j) {
    case 8: SPREAD(0xA0); return; /* 0 0 2 2 */
    case 9: SPREAD(0xF5); return; /* 1 1 3 3 */
    case 16: SPREAD(0x00); return;
    case 17: SPREAD(0x55); return;
    case 18: SPREAD(0xAA); return;
    case 19: SPREAD(0xFF); return;
    default: return;
    }
}
#undef SPREAD

/* ---- depthwise convolution ---- */

typedef struct dw_ctx {
    const nnf_nchwc_dw_tile *t;
    nnf_ep_fast f;  /* f.clamp_only: the whole epilogue in registers */
    __m256 bias;    /* the block's bias, zero in padding lanes */
    __m256 mask;    /* all ones on real lanes */
    const float *pf[2]; /* input rows the next output row adds to the window (NULL: none) */
} dw_ctx;

/* The clamp-only epilogue and the store of one output pixel o of the row. */
static inline __attribute__((always_inline)) void dw_store(const dw_ctx *c, float *y, const float *res, __m256 v) {
    if (c->f.clamp_only) {
        v = nnf_ep_fast8(&c->f, v, c->bias, res, 1, _mm256_setzero_si256());
        v = _mm256_and_ps(v, c->mask);
    }
    _mm256_storeu_ps(y, v);
}

/* P output pixels of the interior (every column tap inside the input) from
 * pixel o of the row; rows [r0, r1) of the window are inside. KW, SW, DW
 * are constants where the caller could make them so, which unrolls the tap
 * loop and folds every offset. */
static inline __attribute__((always_inline)) void dw_interior(const dw_ctx *c, const float *const *xr, size_t r0,
                                                              size_t r1, size_t o, float *y, const float *res,
                                                              size_t P, size_t KW, size_t SW, size_t DW,
                                                              int REUSE) {
    const nnf_nchwc_dw_tile *t = c->t;
    const nnf_conv2d_shape *s = t->s;
    /* -O2 does not unroll these on its own, and a rolled p loop keeps acc[]
     * in memory: the pragmas are what makes the accumulators registers */
    __m256 acc[8];
#pragma GCC unroll 8
    for (size_t p = 0; p < P; p++)
        acc[p] = _mm256_setzero_ps();
    size_t col = (o * SW - s->pl) * B;
    if (REUSE) {
        /* Input-column major: each input pixel of the window rows is loaded
         * once and feeds every (output pixel, tap) pair that reads it, so a
         * 3-tap stride-1 row costs P + 2 loads for 3 P FMAs, not 3 P + 3.
         * With KW, SW, DW constant every condition below folds away. */
        for (size_t i = r0; i < r1; i++) {
            const float *xp = xr[i] + col, *wp = t->w + i * KW * B;
            /* opaque to the optimiser: left visible, GCC kept col + q * 8
             * for every q in a register of its own across the rows (spilled
             * to the stack) instead of displacements from xp */
            __asm__("" : "+r"(xp));
            __m256 wv[7];
#pragma GCC unroll 8
            for (size_t j = 0; j < KW; j++)
                wv[j] = _mm256_loadu_ps(wp + j * B);
#pragma GCC unroll 64
            for (size_t q = 0; q <= (P - 1) * SW + (KW - 1) * DW; q++) {
                __m256 xv = _mm256_loadu_ps(xp + q * B);
#pragma GCC unroll 8
                for (size_t j = 0; j < KW; j++) {
                    size_t off = q - j * DW;
                    if (q >= j * DW && off % SW == 0 && off / SW < P)
                        acc[off / SW] = _mm256_fmadd_ps(xv, wv[j], acc[off / SW]);
                }
            }
        }
    } else {
        for (size_t i = r0; i < r1; i++) {
            const float *xp = xr[i] + col, *wp = t->w + i * KW * B;
            for (size_t j = 0; j < KW; j++) {
                __m256 wv = _mm256_loadu_ps(wp + j * B);
#pragma GCC unroll 8
                for (size_t p = 0; p < P; p++)
                    acc[p] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + (p * SW + j * DW) * B), wv, acc[p]);
            }
        }
    }
#pragma GCC unroll 8
    for (size_t p = 0; p < P; p++)
        dw_store(c, y + (o + p) * B, res ? res + (o + p) * B : NULL, acc[p]);
}

/* One pixel anywhere, its column taps clipped. */
static void dw_border(const dw_ctx *c, const float *const *xr, size_t r0, size_t r1, size_t o, float *y,
                      const float *res) {
    const nnf_nchwc_dw_tile *t = c->t;
    const nnf_conv2d_shape *s = t->s;
    ptrdiff_t iw0 = (ptrdiff_t)(o * s->sw) - (ptrdiff_t)s->pl;
    size_t q0, q1;
    nnf_nchwc_window_taps(iw0, s->kw, s->dw, s->w, &q0, &q1);
    __m256 acc = _mm256_setzero_ps();
    for (size_t i = r0; i < r1; i++)
        for (size_t j = q0; j < q1; j++)
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(xr[i] + (iw0 + (ptrdiff_t)(j * s->dw)) * (ptrdiff_t)B),
                                  _mm256_loadu_ps(t->w + (i * s->kw + j) * B), acc);
    dw_store(c, y + o * B, res ? res + o * B : NULL, acc);
}

static inline __attribute__((always_inline)) void dw_interior_run(const dw_ctx *c, const float *const *xr,
                                                                  size_t r0, size_t r1, size_t lo, size_t hi,
                                                                  float *y, const float *res, size_t KW,
                                                                  size_t SW, size_t DW, int REUSE) {
    size_t o = lo;
    for (; o + 8 <= hi; o += 8) {
        /* A row of a block is a few KiB, so the hardware's streams restart at
         * every 4 KiB page while the window moves down: fetch the next output
         * row's new input rows one group at a time, a row ahead. Inside a
         * model the input often comes from DRAM: MobileNetV2's 96@112 s2
         * layer went from 0.68 to 0.38 ms in-model with this (1 thread;
         * fetching the next output row too gained nothing). */
        for (int r = 0; r < 2; r++)
            if (c->pf[r])
                for (size_t l = 0; l < 8 * SW * B; l += 16)
                    prefetch_at(c->pf[r], (o * SW - c->t->s->pl) * B + l);
        dw_interior(c, xr, r0, r1, o, y, res, 8, KW, SW, DW, REUSE);
    }
    if (o + 4 <= hi) {
        dw_interior(c, xr, r0, r1, o, y, res, 4, KW, SW, DW, REUSE);
        o += 4;
    }
    for (; o < hi; o++)
        dw_interior(c, xr, r0, r1, o, y, res, 1, KW, SW, DW, REUSE);
}

/* One border pixel with the tap loop unrolled: the same sums in the same
 * order as dw_border, each column tap tested instead of a clipped range. */
static inline __attribute__((always_inline)) void dw_border_t(const dw_ctx *c, const float *const *xr, size_t r0,
                                                              size_t r1, size_t o, float *y, const float *res,
                                                              size_t KW, size_t SW, size_t DW) {
    const nnf_conv2d_shape *s = c->t->s;
    ptrdiff_t iw0 = (ptrdiff_t)(o * SW) - (ptrdiff_t)s->pl;
    __m256 acc = _mm256_setzero_ps();
    for (size_t i = r0; i < r1; i++) {
        const float *wp = c->t->w + i * KW * B;
#pragma GCC unroll 8
        for (size_t j = 0; j < KW; j++) {
            ptrdiff_t iw = iw0 + (ptrdiff_t)(j * DW);
            if (iw >= 0 && iw < (ptrdiff_t)s->w)
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(xr[i] + iw * (ptrdiff_t)B), _mm256_loadu_ps(wp + j * B), acc);
        }
    }
    dw_store(c, y + o * B, res ? res + o * B : NULL, acc);
}

/* Rows of at most 16 pixels in one or two tiles of at most 8, borders
 * included (MobileNetV2's 7x7 and 14x14 maps): each input column of the
 * window rows is loaded once and feeds the (pixel, tap) pairs that read it,
 * the taps outside the row never formed. Split into border pixels and 8-,
 * 4- and 1-pixel interior tiles, a 7-wide row ran mostly one-accumulator
 * chains of dependent FMAs. For every pixel the taps still add in (row,
 * column) order, skipping the same ones as dw_border_t: the same sums bit
 * for bit. This tile: pixels [o0, o0 + P), its taps DW apart (dilated rows'
 * borders, dw_borders, use it too). */
static inline __attribute__((always_inline)) void
dw_tile_small(const dw_ctx *c, const float *const *xr, size_t r0, size_t r1, size_t o0, float *y,
              const float *res, size_t KW, size_t SW, size_t DW, size_t P) {
    const ptrdiff_t w = (ptrdiff_t)c->t->s->w, base = (ptrdiff_t)(o0 * SW) - (ptrdiff_t)c->t->s->pl;
    __m256 acc[8];
#pragma GCC unroll 8
    for (size_t p = 0; p < P; p++)
        acc[p] = _mm256_setzero_ps();
    for (size_t i = r0; i < r1; i++) {
        const float *xp = xr[i], *wp = c->t->w + i * KW * B;
        __asm__("" : "+r"(xp)); /* displacements from xp (see dw_interior) */
        __m256 wv[7];
#pragma GCC unroll 8
        for (size_t j = 0; j < KW; j++)
            wv[j] = _mm256_loadu_ps(wp + j * B);
#pragma GCC unroll 32
        /* the tile's column q feeds pixel o0 + p through tap j when q = p SW + j DW */
        for (size_t q = 0; q < (P - 1) * SW + (KW - 1) * DW + 1; q++) {
            ptrdiff_t col = base + (ptrdiff_t)q;
            if (col < 0)
                continue;
            if (col >= w)
                break;
            __m256 xv = _mm256_loadu_ps(xp + col * (ptrdiff_t)B);
#pragma GCC unroll 8
            for (size_t j = 0; j < KW; j++)
                if (q >= j * DW && (q - j * DW) % SW == 0 && (q - j * DW) / SW < P)
                    acc[(q - j * DW) / SW] = _mm256_fmadd_ps(xv, wv[j], acc[(q - j * DW) / SW]);
        }
    }
#pragma GCC unroll 8
    for (size_t p = 0; p < P; p++)
        dw_store(c, y + (o0 + p) * B, res ? res + (o0 + p) * B : NULL, acc[p]);
}

/* Pixels [O0, O0 + N) as one tile of N <= 8. */
#define DW_TILE_CASES(O0, N, DW)                                                                   \
    switch (N) {                                                                                   \
    case 1: dw_tile_small(c, xr, r0, r1, O0, y, res, KW, SW, DW, 1); break;                        \
    case 2: dw_tile_small(c, xr, r0, r1, O0, y, res, KW, SW, DW, 2); break;                        \
    case 3: dw_tile_small(c, xr, r0, r1, O0, y, res, KW, SW, DW, 3); break;                        \
    case 4: dw_tile_small(c, xr, r0, r1, O0, y, res, KW, SW, DW, 4); break;                        \
    case 5: dw_tile_small(c, xr, r0, r1, O0, y, res, KW, SW, DW, 5); break;                        \
    case 6: dw_tile_small(c, xr, r0, r1, O0, y, res, KW, SW, DW, 6); break;                        \
    case 7: dw_tile_small(c, xr, r0, r1, O0, y, res, KW, SW, DW, 7); break;                        \
    default: dw_tile_small(c, xr, r0, r1, O0, y, res, KW, SW, DW, 8); break;                       \
    }
/* The tiles of a row: one of ow pixels, or two of ceil(ow / 2) and floor(ow / 2). */
static inline __attribute__((always_inline)) void
dw_row_small(const dw_ctx *c, const float *const *xr, size_t r0, size_t r1, float *y,
             const float *res, size_t KW, size_t SW) {
    size_t ow = c->t->s->ow, n0 = ow <= 8 ? ow : (ow + 1) / 2;
    DW_TILE_CASES(0, n0, 1)
    if (n0 < ow) {
        DW_TILE_CASES(n0, ow - n0, 1)
    }
}

/* Border pixels [o0, o1): undilated (a pixel or two a side) one at a time;
 * dilated in tiles of at most 8 (its borders are d or more pixels: one at a
 * time, each a chain of dependent FMAs, they took most of the row). */
static inline __attribute__((always_inline)) void
dw_borders(const dw_ctx *c, const float *const *xr, size_t r0, size_t r1, size_t o0, size_t o1,
           float *y, const float *res, size_t KW, size_t SW, size_t DW) {
    if (DW == 1) {
        for (size_t o = o0; o < o1; o++)
            dw_border_t(c, xr, r0, r1, o, y, res, KW, SW, DW);
        return;
    }
    for (size_t o = o0; o < o1; o += 8) {
        size_t n = o1 - o < 8 ? o1 - o : 8;
        DW_TILE_CASES(o, n, DW)
    }
}
#undef DW_TILE_CASES

/* A whole output row for constant KW, SW, DW: borders, then the interior. */
static inline __attribute__((always_inline)) void dw_row_t(const dw_ctx *c, const float *const *xr,
                                                           size_t r0, size_t r1, size_t lo,
                                                           size_t hi, float *y, const float *res,
                                                           size_t KW, size_t SW, size_t DW) {
    dw_borders(c, xr, r0, r1, 0, lo, y, res, KW, SW, DW);
    dw_interior_run(c, xr, r0, r1, lo, hi, y, res, KW, SW, DW, 1);
    dw_borders(c, xr, r0, r1, hi > lo ? hi : lo, c->t->s->ow, y, res, KW, SW, DW);
}

static __attribute__((noinline)) void dw_interior_generic(const dw_ctx *c, const float *const *xr, size_t r0,
                                                          size_t r1, size_t lo, size_t hi, float *y,
                                                          const float *res) {
    const nnf_conv2d_shape *s = c->t->s;
    dw_interior_run(c, xr, r0, r1, lo, hi, y, res, s->kw, s->sw, s->dw, 0);
}

/* ---- the general epilogue, applied to a stored row while it is in L1 ---- */

static inline __attribute__((always_inline)) void ep_row_act(nnf_act_kind kind, const dw_ctx *c, float *y,
                                                             const float *res, size_t n) {
    const nnf_epilogue *e = c->t->ep;
    nnf_activation a = e->act;
    a.kind = kind;
    __m256 alpha = _mm256_set1_ps(e->alpha), rs = _mm256_set1_ps(e->residual_scale);
    for (size_t o = 0; o < n; o++) {
        __m256 v = _mm256_loadu_ps(y + o * B);
        if (e->alpha != 1.0f)
            v = _mm256_mul_ps(v, alpha);
        if (c->t->bias)
            v = _mm256_add_ps(v, c->bias);
        __m256 r = _mm256_setzero_ps();
        if (res) {
            r = _mm256_mul_ps(_mm256_loadu_ps(res + o * B), rs);
            if (!e->residual_after_act)
                v = _mm256_add_ps(v, r);
        }
        v = nnf_act8(v, &a);
        if (res && e->residual_after_act)
            v = _mm256_add_ps(v, r);
        _mm256_storeu_ps(y + o * B, _mm256_and_ps(v, c->mask));
    }
}

static __attribute__((noinline)) void ep_row(const dw_ctx *c, float *y, const float *res, size_t n) {
    switch (c->t->ep->act.kind) {
#define K(kind)                                                                                                \
    case kind: ep_row_act(kind, c, y, res, n); return;
        NNF_ACT_KINDS(K)
#undef K
    }
    ep_row_act(NNF_ACT_NONE, c, y, res, n);
}

/* Output row oh's window: its first input row (returned), the kernel rows
 * [r0, r1) inside the input and, when xr is not NULL, their addresses: the
 * window's rows are addressed as xr[i] + column offset, so the row loops do
 * no row arithmetic. */
static inline __attribute__((always_inline)) ptrdiff_t dw_window(const nnf_nchwc_dw_tile *t, size_t oh,
                                                                 size_t kh, const float **xr, size_t *r0,
                                                                 size_t *r1) {
    const nnf_conv2d_shape *s = t->s;
    ptrdiff_t ih0 = (ptrdiff_t)(oh * s->sh) - (ptrdiff_t)s->pt;
    nnf_nchwc_window_taps(ih0, kh, s->dh, s->h, r0, r1);
    for (size_t i = *r0; xr && i < *r1; i++)
        xr[i] = t->x + ((size_t)(ih0 + (ptrdiff_t)(i * s->dh)) - t->x_row0) * s->w * B;
    return ih0;
}

/* A tile's context: the fast epilogue, the block's bias and lane mask. */
static inline __attribute__((always_inline)) dw_ctx dw_ctx_of(const nnf_nchwc_dw_tile *t) {
    dw_ctx c = {.t = t, .f = nnf_ep_fast_init(t->ep)};
    __m256i lanes = nnf_mask8(t->nc);
    c.mask = _mm256_castsi256_ps(lanes);
    c.bias = t->bias ? _mm256_maskload_ps(t->bias, lanes) : _mm256_setzero_ps();
    return c;
}

/* The output rows [oh0, oh0 + noh) of a shape dw_small_select took, with a
 * context of their own: passing the general loop's context by address kept
 * its mask and bias in memory there, not in registers (MobileNetV2's 56x56
 * depthwise 1.3x slower). */
static inline __attribute__((always_inline)) void
dw_rows_small(const nnf_nchwc_dw_tile *t, size_t oh0, size_t noh, size_t KW, size_t SW) {
    const nnf_conv2d_shape *s = t->s;
    const dw_ctx ctx = dw_ctx_of(t), *c = &ctx;
    const float *xr[7];
    for (size_t oh = oh0; oh < oh0 + noh; oh++) {
        size_t r0, r1;
        dw_window(t, oh, KW, xr, &r0, &r1);
        float *y = t->y + (oh - t->y_row0) * s->ow * B;
        const float *res = t->res ? t->res + (oh - t->y_row0) * s->ow * B : NULL;
        dw_row_small(c, xr, r0, r1, y, res, KW, SW);
        if (!c->f.clamp_only)
            ep_row(c, y, res, s->ow);
    }
}

/* dw_rows_small's forms: 3x3, 5x5 and 7x7, stride 1 and 2. */
#define DW_SMALL(KW, SW)                                                                           \
    static __attribute__((noinline)) void dw_small_##KW##_##SW(const nnf_nchwc_dw_tile *t,        \
                                                               size_t oh0, size_t noh) {           \
        dw_rows_small(t, oh0, noh, KW, SW);                                                        \
    }
DW_SMALL(3, 1)
DW_SMALL(3, 2)
DW_SMALL(5, 1)
DW_SMALL(5, 2)
DW_SMALL(7, 1)
DW_SMALL(7, 2)
#undef DW_SMALL

/* The small-row form for this shape (nnf_nchwc_dw_small_rows), or NULL. */
typedef void (*dw_small_fn)(const nnf_nchwc_dw_tile *, size_t, size_t);
static dw_small_fn dw_small_select(const nnf_conv2d_shape *s) {
    if (!nnf_nchwc_dw_small_rows(s))
        return NULL;
    if (s->kw == 3)
        return s->sw == 1 ? dw_small_3_1 : dw_small_3_2;
    if (s->kw == 5)
        return s->sw == 1 ? dw_small_5_1 : dw_small_5_2;
    return s->sw == 1 ? dw_small_7_1 : dw_small_7_2;
}

void nnf_nchwc_dw_rows_avx2(const nnf_nchwc_dw_tile *t, size_t oh0, size_t noh) {
    const nnf_conv2d_shape *s = t->s;
    dw_small_fn small = dw_small_select(s);
    if (small) {
        small(t, oh0, noh);
        return;
    }
    dw_ctx c = dw_ctx_of(t);
    size_t lo, hi; /* interior columns */
    nnf_nchwc_interior(s->w, s->pl, s->sw, s->kw, s->dw, s->ow, &lo, &hi);
    /* row pointers per kernel row (dw_window); only rows [r0, r1) are formed */
    const float *xr_buf[64];
    const float **xr = s->kh <= 64 ? xr_buf : NULL;
    for (size_t oh = oh0; oh < oh0 + noh; oh++) {
        size_t r0, r1;
        ptrdiff_t ih0 = dw_window(t, oh, s->kh, xr, &r0, &r1);
        float *y = t->y + (oh - t->y_row0) * s->ow * B;
        const float *res = t->res ? t->res + (oh - t->y_row0) * s->ow * B : NULL;
        if (!xr) {
            /* a kernel taller than 64 rows: one output row in pieces of 64 kernel rows would
             * change the summation order, so take the plain per-pixel path instead */
            for (size_t o = 0; o < s->ow; o++) {
                ptrdiff_t iw0 = (ptrdiff_t)(o * s->sw) - (ptrdiff_t)s->pl;
                size_t q0, q1;
                nnf_nchwc_window_taps(iw0, s->kw, s->dw, s->w, &q0, &q1);
                __m256 acc = _mm256_setzero_ps();
                for (size_t i = r0; i < r1; i++) {
                    const float *row =
                        t->x + ((size_t)(ih0 + (ptrdiff_t)(i * s->dh)) - t->x_row0) * s->w * B;
                    for (size_t j = q0; j < q1; j++)
                        acc = _mm256_fmadd_ps(_mm256_loadu_ps(row + (size_t)(iw0 + (ptrdiff_t)(j * s->dw)) * B),
                                              _mm256_loadu_ps(t->w + (i * s->kw + j) * B), acc);
                }
                dw_store(&c, y + o * B, res ? res + o * B : NULL, acc);
            }
        } else {
            /* rows below this window's last row that the next window's last row reaches */
            ptrdiff_t last = ih0 + (ptrdiff_t)((s->kh - 1) * s->dh), next = last + (ptrdiff_t)s->sh;
            for (int r = 0; r < 2; r++) {
                ptrdiff_t row = last + 1 + r;
                c.pf[r] = row <= next && row >= (ptrdiff_t)t->x_row0 && row < (ptrdiff_t)t->x_row1
                              ? t->x + ((size_t)row - t->x_row0) * s->w * B
                              : NULL;
                /* the groups fetch from their own first column on; the left border's columns here */
                if (c.pf[r])
                    for (size_t l = 0; l < (lo * s->sw + 1) * B; l += 16)
                        prefetch_at(c.pf[r], l);
            }
            if (s->kw == 3 && s->dw == 1 && s->sw == 1) {
                dw_row_t(&c, xr, r0, r1, lo, hi, y, res, 3, 1, 1);
            } else if (s->kw == 3 && s->dw == 1 && s->sw == 2) {
                dw_row_t(&c, xr, r0, r1, lo, hi, y, res, 3, 2, 1);
            } else if (s->kw == 5 && s->dw == 1 && s->sw == 1) {
                dw_row_t(&c, xr, r0, r1, lo, hi, y, res, 5, 1, 1);
            } else if (s->kw == 5 && s->dw == 1 && s->sw == 2) {
                dw_row_t(&c, xr, r0, r1, lo, hi, y, res, 5, 2, 1);
            } else if (s->kw == 3 && s->dw == 2 && s->sw == 1) {
                /* dilated at stride 1 (DeepLab's MobileNet and Xception
                 * backbones): the generic path's per-pixel borders and
                 * run-time tap loops ran 2x ORT's time (960 channels at
                 * 14x14, 0.148 against 0.078 ms) */
                dw_row_t(&c, xr, r0, r1, lo, hi, y, res, 3, 1, 2);
            } else if (s->kw == 3 && s->dw == 4 && s->sw == 1) {
                dw_row_t(&c, xr, r0, r1, lo, hi, y, res, 3, 1, 4);
            } else if (s->kw == 5 && s->dw == 2 && s->sw == 1) {
                dw_row_t(&c, xr, r0, r1, lo, hi, y, res, 5, 1, 2);
            } else {
                for (size_t o = 0; o < lo; o++)
                    dw_border(&c, xr, r0, r1, o, y, res);
                dw_interior_generic(&c, xr, r0, r1, lo, hi, y, res);
                for (size_t o = hi > lo ? hi : lo; o < s->ow; o++)
                    dw_border(&c, xr, r0, r1, o, y, res);
            }
        }
        if (!c.f.clamp_only)
            ep_row(&c, y, res, s->ow);
    }
}

/* ---- pools ---- */

/* One output pixel of a pool anywhere, its window clipped per axis: the
 * reference's loops with 8 channels per operation. */
static void pool_pixel(const nnf_nchwc_pool_shape *s, const float *x, ptrdiff_t sh, size_t h0, size_t h1,
                       size_t rows_padded, size_t ow, float *y, __m256 mask) {
    ptrdiff_t sw = (ptrdiff_t)(ow * s->sw) - (ptrdiff_t)s->pl;
    size_t w0, w1;
    nnf_nchwc_window_taps(sw, s->kw, s->dw, s->w, &w0, &w1);
    __m256 acc;
    if (s->is_max) {
        acc = _mm256_set1_ps(-INFINITY);
        int first = 1;
        for (size_t i = h0; i < h1; i++) {
            const float *xp = x + (size_t)(sh + (ptrdiff_t)(i * s->dh)) * s->w * B;
            for (size_t j = w0; j < w1; j++) {
                __m256 v = _mm256_loadu_ps(xp + (size_t)(sw + (ptrdiff_t)(j * s->dw)) * B);
                acc = first ? v : _mm256_max_ps(v, acc);
                first = 0;
            }
        }
    } else {
        acc = _mm256_setzero_ps();
        for (size_t i = h0; i < h1; i++) {
            const float *xp = x + (size_t)(sh + (ptrdiff_t)(i * s->dh)) * s->w * B;
            for (size_t j = w0; j < w1; j++)
                acc = _mm256_add_ps(acc, _mm256_loadu_ps(xp + (size_t)(sw + (ptrdiff_t)(j * s->dw)) * B));
        }
        size_t count;
        if (s->count_include_pad) {
            size_t pw0, pw1;
            nnf_nchwc_window_taps(sw + (ptrdiff_t)s->pl, s->kw, s->dw, s->w + s->pl + s->pr, &pw0, &pw1);
            count = rows_padded * (pw1 - pw0);
        } else {
            count = (h1 - h0) * (w1 - w0);
        }
        acc = count ? _mm256_div_ps(acc, _mm256_set1_ps((float)count)) : _mm256_setzero_ps();
    }
    _mm256_storeu_ps(y + ow * B, _mm256_and_ps(acc, mask));
}

/* pool_pixel with KW, SW constant and dilation 1: the border pixels of the
 * specialised rows, each column tap tested, the same taps in the same order. */
static inline __attribute__((always_inline)) void pool_border_t(const nnf_nchwc_pool_shape *s,
                                                                const float *const *xr, size_t h0, size_t h1,
                                                                size_t rows_padded, size_t ow, float *y,
                                                                __m256 mask, size_t KW, size_t SW, int is_max) {
    ptrdiff_t sw = (ptrdiff_t)(ow * SW) - (ptrdiff_t)s->pl, w = (ptrdiff_t)s->w;
    __m256 acc = is_max ? _mm256_set1_ps(-INFINITY) : _mm256_setzero_ps();
    int first = 1;
    for (size_t i = h0; i < h1; i++) {
#pragma GCC unroll 8
        for (size_t j = 0; j < KW; j++) {
            ptrdiff_t iw = sw + (ptrdiff_t)j;
            if (iw < 0 || iw >= w)
                continue;
            __m256 v = _mm256_loadu_ps(xr[i] + iw * (ptrdiff_t)B);
            if (is_max)
                acc = first ? v : _mm256_max_ps(v, acc);
            else
                acc = _mm256_add_ps(acc, v);
            first = 0;
        }
    }
    if (!is_max) {
        size_t cols = 0, padded = 0;
#pragma GCC unroll 8
        for (size_t j = 0; j < KW; j++) {
            ptrdiff_t iw = sw + (ptrdiff_t)j;
            cols += iw >= 0 && iw < w;
            padded += iw >= -(ptrdiff_t)s->pl && iw < w + (ptrdiff_t)s->pr;
        }
        size_t count = s->count_include_pad ? rows_padded * padded : (h1 - h0) * cols;
        acc = count ? _mm256_div_ps(acc, _mm256_set1_ps((float)count)) : _mm256_setzero_ps();
    }
    _mm256_storeu_ps(y + ow * B, _mm256_and_ps(acc, mask));
}

/* P interior output pixels from o (every column tap inside the input) with
 * KW and SW constant, dilation 1: like dw_interior, each input pixel of a
 * window row is loaded once for every output it reaches. Per output the
 * taps are still taken row by row, column by column, so max keeps the
 * reference's "first tap, then v > acc" and the sums their order. */
static inline __attribute__((always_inline)) void pool_group(const float *const *xr, size_t r0, size_t r1,
                                                             size_t pl, size_t o, float *y, size_t P, size_t KW,
                                                             size_t SW, int is_max, __m256 div, __m256 mask) {
    __m256 acc[8]; /* set by each output's first tap; zeroed only to tell the compiler so */
#pragma GCC unroll 8
    for (size_t p = 0; p < P; p++)
        acc[p] = _mm256_setzero_ps();
    for (size_t i = r0; i < r1; i++) {
        const float *xp = xr[i] + (o * SW - pl) * B;
        __asm__("" : "+r"(xp)); /* displacements from xp, as in dw_interior */
#pragma GCC unroll 64
        for (size_t q = 0; q <= (P - 1) * SW + KW - 1; q++) {
            __m256 xv = _mm256_loadu_ps(xp + q * B);
#pragma GCC unroll 8
            for (size_t j = 0; j < KW; j++) {
                if (q < j || (q - j) % SW != 0 || (q - j) / SW >= P)
                    continue;
                size_t p = (q - j) / SW;
                if (is_max)
                    acc[p] = i == r0 && j == 0 ? xv : _mm256_max_ps(xv, acc[p]);
                else
                    acc[p] = _mm256_add_ps(i == r0 && j == 0 ? _mm256_setzero_ps() : acc[p], xv);
            }
        }
    }
#pragma GCC unroll 8
    for (size_t p = 0; p < P; p++) {
        __m256 v = is_max ? acc[p] : _mm256_div_ps(acc[p], div);
        _mm256_storeu_ps(y + (o + p) * B, _mm256_and_ps(v, mask));
    }
}

static inline __attribute__((always_inline)) void pool_interior(const float *const *xr, size_t r0, size_t r1,
                                                                size_t pl, size_t lo, size_t hi, float *y,
                                                                const float *const *pf, size_t KW, size_t SW,
                                                                int is_max, __m256 div, __m256 mask) {
    size_t o = lo;
    for (; o + 8 <= hi; o += 8) {
        /* the next output row's new input rows, a group ahead (see dw_interior_run) */
        for (int r = 0; r < 2; r++)
            if (pf[r])
                for (size_t l = 0; l < 8 * SW * B; l += 16)
                    prefetch_at(pf[r], (o * SW - pl) * B + l);
        pool_group(xr, r0, r1, pl, o, y, 8, KW, SW, is_max, div, mask);
    }
    for (; o < hi; o++)
        pool_group(xr, r0, r1, pl, o, y, 1, KW, SW, is_max, div, mask);
}

void nnf_nchwc_pool_rows_avx2(const nnf_nchwc_pool_shape *s, const float *x, float *y, size_t nc, size_t oh0,
                              size_t noh) {
    __m256 mask = _mm256_castsi256_ps(nnf_mask8(nc));
    size_t lo, hi; /* interior columns */
    nnf_nchwc_interior(s->w, s->pl, s->sw, s->kw, s->dw, s->ow, &lo, &hi);
    int fast = s->dw == 1 && s->kh <= 64 &&
               ((s->kw == 2 && s->sw == 2) || (s->kw == 3 && (s->sw == 1 || s->sw == 2)) ||
                (s->kw == 5 && s->sw == 1));
    const float *xr[64];
    for (size_t oh = oh0; oh < oh0 + noh; oh++) {
        ptrdiff_t sh = (ptrdiff_t)(oh * s->sh) - (ptrdiff_t)s->pt;
        size_t h0, h1, ph0, ph1;
        nnf_nchwc_window_taps(sh, s->kh, s->dh, s->h, &h0, &h1);
        nnf_nchwc_window_taps(sh + (ptrdiff_t)s->pt, s->kh, s->dh, s->h + s->pt + s->pb, &ph0, &ph1);
        float *yr = y + oh * s->ow * B;
        if (!fast || h0 == h1) {
            for (size_t ow = 0; ow < s->ow; ow++)
                pool_pixel(s, x, sh, h0, h1, ph1 - ph0, ow, yr, mask);
            continue;
        }
        for (size_t i = h0; i < h1; i++)
            xr[i] = x + (size_t)(sh + (ptrdiff_t)(i * s->dh)) * s->w * B;
        ptrdiff_t last = sh + (ptrdiff_t)((s->kh - 1) * s->dh), next = last + (ptrdiff_t)s->sh;
        const float *pf[2];
        for (int r = 0; r < 2; r++) {
            ptrdiff_t row = last + 1 + r;
            pf[r] = row <= next && row >= 0 && row < (ptrdiff_t)s->h ? x + (size_t)row * s->w * B : NULL;
        }
        /* interior pixels have every column tap inside, in the padded input too */
        size_t rows = s->count_include_pad ? ph1 - ph0 : h1 - h0;
        __m256 div = _mm256_set1_ps((float)(rows * s->kw));
#define POOL_CASE(KW, SW, MAX)                                                                                \
    if (s->kw == KW && s->sw == SW && !s->is_max == !MAX) {                                                     \
        for (size_t ow = 0; ow < lo; ow++)                                                                    \
            pool_border_t(s, xr, h0, h1, ph1 - ph0, ow, yr, mask, KW, SW, MAX);                               \
        pool_interior(xr, h0, h1, s->pl, lo, hi, yr, pf, KW, SW, MAX, div, mask);                               \
        for (size_t ow = hi > lo ? hi : lo; ow < s->ow; ow++)                                                 \
            pool_border_t(s, xr, h0, h1, ph1 - ph0, ow, yr, mask, KW, SW, MAX);                               \
    } else
        POOL_CASE(2, 2, 1) POOL_CASE(3, 1, 1) POOL_CASE(3, 2, 1) POOL_CASE(5, 1, 1)
        POOL_CASE(2, 2, 0) POOL_CASE(3, 1, 0) POOL_CASE(3, 2, 0) POOL_CASE(5, 1, 0) {}
#undef POOL_CASE
    }
}

void nnf_nchwc_global_block_avx2(const float *x, size_t hw, int is_max, size_t nc, float *y) {
    float out[B] __attribute__((aligned(32)));
    if (is_max) {
        __m256 a0 = _mm256_set1_ps(-INFINITY), a1 = a0, a2 = a0, a3 = a0;
        size_t p = 0;
        for (; p + 4 <= hw; p += 4) {
            a0 = _mm256_max_ps(_mm256_loadu_ps(x + p * B), a0);
            a1 = _mm256_max_ps(_mm256_loadu_ps(x + (p + 1) * B), a1);
            a2 = _mm256_max_ps(_mm256_loadu_ps(x + (p + 2) * B), a2);
            a3 = _mm256_max_ps(_mm256_loadu_ps(x + (p + 3) * B), a3);
        }
        for (; p < hw; p++)
            a0 = _mm256_max_ps(_mm256_loadu_ps(x + p * B), a0);
        _mm256_store_ps(out, _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3)));
    } else {
        /* double sums like the reference: two pixels in flight per half */
        __m256d l0 = _mm256_setzero_pd(), h0 = l0, l1 = l0, h1 = l0;
        size_t p = 0;
        for (; p + 2 <= hw; p += 2) {
            __m256 v0 = _mm256_loadu_ps(x + p * B), v1 = _mm256_loadu_ps(x + (p + 1) * B);
            l0 = _mm256_add_pd(l0, _mm256_cvtps_pd(_mm256_castps256_ps128(v0)));
            h0 = _mm256_add_pd(h0, _mm256_cvtps_pd(_mm256_extractf128_ps(v0, 1)));
            l1 = _mm256_add_pd(l1, _mm256_cvtps_pd(_mm256_castps256_ps128(v1)));
            h1 = _mm256_add_pd(h1, _mm256_cvtps_pd(_mm256_extractf128_ps(v1, 1)));
        }
        if (p < hw) {
            __m256 v0 = _mm256_loadu_ps(x + p * B);
            l0 = _mm256_add_pd(l0, _mm256_cvtps_pd(_mm256_castps256_ps128(v0)));
            h0 = _mm256_add_pd(h0, _mm256_cvtps_pd(_mm256_extractf128_ps(v0, 1)));
        }
        __m256d inv = _mm256_set1_pd(hw ? 1.0 / (double)hw : 0.0);
        __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_add_pd(l0, l1), inv));
        __m128 hi = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_add_pd(h0, h1), inv));
        _mm256_store_ps(out, _mm256_set_m128(hi, lo));
    }
    memcpy(y, out, nc * sizeof(float));
}

/* ---- a binary op with a per-channel operand ---- */

#define CHANNEL_ROWS(EXPR)                                                                         \
    do {                                                                                           \
        size_t p = 0;                                                                              \
        for (; p + 4 <= np; p += 4)                                                                \
            for (size_t u = 0; u < 4; u++) {                                                       \
                __m256 a = _mm256_loadu_ps(x + (p + u) * B);                                       \
                _mm256_storeu_ps(y + (p + u) * B, EXPR);                                           \
            }                                                                                      \
        for (; p < np; p++) {                                                                      \
            __m256 a = _mm256_loadu_ps(x + p * B);                                                 \
            _mm256_storeu_ps(y + p * B, EXPR);                                                     \
        }                                                                                          \
    } while (0)

void nnf_nchwc_channel_rows_avx2(int op, const float *x, const float *v, float *y, size_t np,
                                 int v_first) {
    const __m256 c = _mm256_loadu_ps(v);
    if (op == NNF_EWB_MUL)
        CHANNEL_ROWS(_mm256_mul_ps(a, c));
    else if (op == NNF_EWB_ADD)
        CHANNEL_ROWS(_mm256_add_ps(a, c));
    else if (v_first)
        CHANNEL_ROWS(_mm256_sub_ps(c, a));
    else
        CHANNEL_ROWS(_mm256_sub_ps(a, c));
}
#undef CHANNEL_ROWS

/* ---- nearest resize ---- */

void nnf_nchwc_resize_rows_avx2(const float *x, float *y, size_t iw, size_t ow, const int32_t *rows,
                                const int32_t *cols, size_t oh0, size_t noh) {
    for (size_t i = oh0; i < oh0 + noh; i++) {
        const float *xr = x + (size_t)rows[i] * iw * B;
        float *yr = y + i * ow * B;
        size_t j = 0;
        for (; j + 4 <= ow; j += 4) {
            __m256 v0 = _mm256_loadu_ps(xr + (size_t)cols[j] * B);
            __m256 v1 = _mm256_loadu_ps(xr + (size_t)cols[j + 1] * B);
            __m256 v2 = _mm256_loadu_ps(xr + (size_t)cols[j + 2] * B);
            __m256 v3 = _mm256_loadu_ps(xr + (size_t)cols[j + 3] * B);
            _mm256_storeu_ps(yr + j * B, v0);
            _mm256_storeu_ps(yr + (j + 1) * B, v1);
            _mm256_storeu_ps(yr + (j + 2) * B, v2);
            _mm256_storeu_ps(yr + (j + 3) * B, v3);
        }
        for (; j < ow; j++)
            _mm256_storeu_ps(yr + j * B, _mm256_loadu_ps(xr + (size_t)cols[j] * B));
    }
}

/* The blocked depthwise conv on the AVX-512 tier: two channel blocks per
 * zmm (nchwc_dw.c pairs them), for 3x3 and 5x5 kernels without dilation
 * at stride 1 or 2 (and 7x7 at stride 1 with a clamp) with the epilogue in
 * registers (bias, ReLU, Clip, none: MobileNet's;
 * bias and SiLU: EfficientNet's, a tile's pixels side by side through
 * nnf_silu16, the AVX2 tier's nnf_silu8_fast bit for bit; bias and
 * HardSwish: MobileNetV3's, nnf_act8's operations; a 3x3 with a clamp and
 * a residual added before it: the passes of a grouped conv of narrow
 * groups, nchwc_gconv.c), the AVX2 kernel (x86/nchwc_avx2.c) for the rest.
 *
 * The values are the AVX2 kernel's bit for bit, lane by lane: each output
 * starts from zero and adds its taps with FMAs in (row, column) order,
 * skipping those outside the input, then adds the bias (and the
 * residual), clamps and zeroes the padding lanes in the same order (a
 * missing bias is +0 and a missing clamp is (-inf, inf): a sum that starts
 * from +0 is never -0, so adding +0 changes no bit, and max/min keep a
 * NaN). So a conv may run some blocks here and some there (an odd last
 * block, a pointwise tile group of one block) and its fused and separate
 * runs still agree.
 *
 * A row goes in tiles of 8 pixels that load each input column of a window
 * row once for every (pixel, tap) it feeds. Which columns of a tile lie
 * outside the row is a constant of the tile's code: the first tile skips
 * the left padding column, the middle ones none, and the last one ends at
 * the row's end (overlapping the one before it: its pixels there are
 * computed twice, to the same bits) and skips the right padding columns.
 * Only rows shorter than a tile and unusual pads find the outside columns
 * at run time (tile_any). The nine tap pairs, the bias and the clamp stay
 * in registers for the whole band of rows: indexed by the window row at
 * run time (rows r0..r1 inside), GCC kept them in memory and every FMA
 * read its weight from there, and the tiles at the borders tested every
 * column: MobileNetV2's pairs took 10-15 cycles a pixel at 7-56 wide
 * (FMA bound 4.5), now 7.7-10.8. */
#include "kernels/nchwc.h"
#include "kernels/x86/ep_fast_avx2.h"
#include "kernels/x86/nchwc_avx2.h"
#include "kernels/x86/nchwc_pair_avx512.h"
#include "kernels/x86/vmath_avx512.h"

#define B NNF_NCHWC_B
#define TP 8 /* pixels a tile */

typedef struct dw2_regs {
    __m512 w[9], bias, lo, hi; /* w: a 3x3's taps (a 5x5's or 7x7's: a window row at a time) */
    const float *wk;           /* the taps, the second block's K * K * 8 floats on */
    __mmask16 keep;
} dw2_regs;

/* P pixels from y of a K x K window (3, 5 or 7): input column q of the tile
 * (x + q pixels) feeds pixel p through tap j when q = p SW + j; the first L
 * and last R of its (P - 1) SW + K columns are outside the row (skipped),
 * or with ANY those outside [0, w) found at run time; rows [r0, r1) of the
 * window inside. A 5x5's 25 tap pairs (a 7x7's 49) do not fit in the
 * registers beside the 8 sums: each window row's K come from L1 as the row
 * starts. */
static inline __attribute__((always_inline)) void
dw2_tile(const dw2_regs *k, const float *const *xr, size_t r0, size_t r1, ptrdiff_t col0,
         ptrdiff_t w, size_t xplane, float *y, size_t yplane, const float *res, size_t rplane,
         const size_t SW, const size_t P, const size_t L, const size_t R, const int ANY,
         const int ACT, const size_t K, const int RES) {
    __m512 acc[TP];
#pragma GCC unroll 8
    for (size_t p = 0; p < P; p++)
        acc[p] = _mm512_setzero_ps();
#pragma GCC unroll 7
    for (size_t i = 0; i < K; i++) {
        if (i < r0 || i >= r1)
            continue;
        __m512 wr[7];
#pragma GCC unroll 7
        for (size_t j = 0; j < K; j++)
            wr[j] = K == 3 ? k->w[i * 3 + j] : nnf_load_pair(k->wk + (i * K + j) * B, K * K * B, 1);
        const float *xp = xr[i] + col0 * (ptrdiff_t)B;
#pragma GCC unroll 40
        for (size_t q = L; q < (P - 1) * SW + K - R; q++) {
            if (ANY && (col0 + (ptrdiff_t)q < 0 || col0 + (ptrdiff_t)q >= w))
                continue;
            __m512 xv = nnf_load_pair(xp + q * B, xplane, 1);
#pragma GCC unroll 7
            for (size_t j = 0; j < K; j++)
                if (q >= j && (q - j) % SW == 0 && (q - j) / SW < P)
                    acc[(q - j) / SW] = _mm512_fmadd_ps(xv, wr[j], acc[(q - j) / SW]);
        }
    }
    if (ACT) { /* 1: SiLU; 2: HardSwish (0: the clamp below) */
#pragma GCC unroll 8
        for (size_t p = 0; p < P; p++) {
            __m512 v = _mm512_add_ps(acc[p], k->bias);
            acc[p] = ACT == 1 ? nnf_silu16(v)
                              : _mm512_mul_ps(v, nnf_hard_sigmoid16(v, 1.0f / 6.0f, 0.5f));
        }
#pragma GCC unroll 8
        for (size_t p = 0; p < P; p++)
            nnf_store_pair(y + p * B, yplane, 1, _mm512_maskz_mov_ps(k->keep, acc[p]));
        return;
    }
#pragma GCC unroll 8
    for (size_t p = 0; p < P; p++) {
        /* the residual after the bias, as the AVX2 tier's nnf_ep_fast8 adds it */
        __m512 v = _mm512_add_ps(acc[p], k->bias);
        if (RES)
            v = _mm512_add_ps(v, nnf_load_pair(res + p * B, rplane, 1));
        v = _mm512_max_ps(k->lo, v);
        nnf_store_pair(y + p * B, yplane, 1, _mm512_maskz_min_ps(k->keep, k->hi, v));
    }
}

/* The constant-clip tile, and the generic one (any P <= TP: rows too short
 * for the constant-clip tiles, pads past 1). */
#define tile(k, xr, r0, r1, col0, xplane, y, yplane, SW, P, L, R)                                  \
    dw2_tile(k, xr, r0, r1, col0, 0, xplane, y, yplane, RES ? rr + ((y)-yr) : NULL, rplane, SW, P, \
             L, R, 0, ACT, K, RES)
#define tile_any(k, xr, r0, r1, col0, w, xplane, y, yplane, SW, P)                                 \
    dw2_tile(k, xr, r0, r1, col0, w, xplane, y, yplane, RES ? rr + ((y)-yr) : NULL, rplane, SW, P, \
             0, 0, 1, ACT, K, RES)

/* Columns of the tile of P pixels at output column o outside the row on
 * the left and on the right. */
static inline void outside(ptrdiff_t col0, size_t P, size_t SW, size_t K, ptrdiff_t w, ptrdiff_t *l,
                           ptrdiff_t *r) {
    *l = col0 < 0 ? -col0 : 0;
    ptrdiff_t end = col0 + (ptrdiff_t)((P - 1) * SW + K);
    *r = end > w ? end - w : 0;
}

/* The pair's taps, bias, clamp and real lanes (nc2 of the second block),
 * loaded where the rows run (not built by the caller and copied through
 * the stack); a full pair's bias without a mask. */
static inline __attribute__((always_inline)) dw2_regs regs_of(const nnf_nchwc_dw_tile *t,
                                                              size_t nc2) {
    nnf_ep_fast f = nnf_ep_fast_init(t->ep);
    dw2_regs k;
    k.keep = (__mmask16)(((1u << t->nc) - 1u) | (((1u << nc2) - 1u) << 8));
    k.lo = _mm512_broadcast_f32x8(f.lo);
    k.hi = _mm512_broadcast_f32x8(f.hi);
    k.bias = !t->bias || t->ep->bias_kind == NNF_BIAS_NONE ? _mm512_setzero_ps()
             : k.keep == 0xffff                            ? _mm512_loadu_ps(t->bias)
                                                           : _mm512_maskz_loadu_ps(k.keep, t->bias);
    k.wk = t->w;
    if (t->s->kh == 3)
        for (int i = 0; i < 9; i++)
            k.w[i] = nnf_load_pair(t->w + (size_t)i * B, 9 * B, 1);
    return k;
}

#define ROWS(SW, ACT_V, K_V, RES_V, NAME)                                                          \
    static __attribute__((noinline)) void NAME(const nnf_nchwc_dw_tile *t, size_t nc2,             \
                                               size_t xplane, size_t yplane, size_t rplane,        \
                                               size_t oh0, size_t noh) {                           \
        const int ACT = ACT_V, RES = RES_V; /* read by tile() and tile_any() */                    \
        const size_t K = K_V;                                                                      \
        const nnf_conv2d_shape *s = t->s;                                                          \
        const dw2_regs k = regs_of(t, nc2);                                                        \
        const ptrdiff_t w = (ptrdiff_t)s->w, pl = (ptrdiff_t)s->pl;                                \
        const size_t ow = s->ow;                                                                   \
        for (size_t oh = oh0; oh < oh0 + noh; oh++) {                                              \
            ptrdiff_t ih0 = (ptrdiff_t)(oh * s->sh) - (ptrdiff_t)s->pt;                            \
            size_t r0, r1;                                                                         \
            nnf_nchwc_window_taps(ih0, K, 1, s->h, &r0, &r1);                                      \
            const float *xr[7] = {NULL};                                                           \
            for (size_t i = r0; i < r1; i++)                                                       \
                xr[i] = t->x + ((size_t)(ih0 + (ptrdiff_t)i) - t->x_row0) * s->w * B;              \
            float *y = t->y + (oh - t->y_row0) * ow * B, *const yr = y;                            \
            const float *rr = RES ? t->res + (oh - t->y_row0) * ow * B : NULL;                     \
            size_t o = 0;                                                                          \
            ptrdiff_t l, r;                                                                        \
            if (ow >= TP) {                                                                        \
                /* first tile: L = pl (0 or 1) */                                                  \
                outside(-pl, TP, SW, K, w, &l, &r);                                                \
                if (r == 0 && l == 1)                                                              \
                    tile(&k, xr, r0, r1, -pl, xplane, y, yplane, SW, TP, 1, 0);                    \
                else if (K >= 5 && r == 0 && l == 2)                                               \
                    tile(&k, xr, r0, r1, -pl, xplane, y, yplane, SW, TP, 2, 0);                    \
                else if (K == 7 && r == 0 && l == 3)                                               \
                    tile(&k, xr, r0, r1, -pl, xplane, y, yplane, SW, TP, 3, 0);                    \
                else if (r == 0 && l == 0)                                                         \
                    tile(&k, xr, r0, r1, -pl, xplane, y, yplane, SW, TP, 0, 0);                    \
                else                                                                               \
                    tile_any(&k, xr, r0, r1, -pl, w, xplane, y, yplane, SW, TP);                   \
                for (o = TP;; o += TP) {                                                           \
                    ptrdiff_t col0 = (ptrdiff_t)(o * SW) - pl;                                     \
                    if (o + TP >= ow)                                                              \
                        break;                                                                     \
                    outside(col0, TP, SW, K, w, &l, &r);                                           \
                    if (r)                                                                         \
                        break;                                                                     \
                    tile(&k, xr, r0, r1, col0, xplane, y + o * B, yplane, SW, TP, 0, 0);           \
                }                                                                                  \
                /* the rest: the last TP pixels (some done twice, the same bits) */                \
                for (; o < ow; o += TP) {                                                          \
                    size_t at = o + TP <= ow ? o : ow - TP;                                        \
                    ptrdiff_t col0 = (ptrdiff_t)(at * SW) - pl;                                    \
                    outside(col0, TP, SW, K, w, &l, &r);                                           \
                    if (l == 0 && r == 0)                                                          \
                        tile(&k, xr, r0, r1, col0, xplane, y + at * B, yplane, SW, TP, 0, 0);      \
                    else if (l == 0 && r == 1)                                                     \
                        tile(&k, xr, r0, r1, col0, xplane, y + at * B, yplane, SW, TP, 0, 1);      \
                    else if (l == 0 && r == 2)                                                     \
                        tile(&k, xr, r0, r1, col0, xplane, y + at * B, yplane, SW, TP, 0, 2);      \
                    else if (K >= 5 && l == 0 && r == 3)                                           \
                        tile(&k, xr, r0, r1, col0, xplane, y + at * B, yplane, SW, TP, 0, 3);      \
                    else                                                                           \
                        tile_any(&k, xr, r0, r1, col0, w, xplane, y + at * B, yplane, SW, TP);     \
                }                                                                                  \
                continue;                                                                          \
            }                                                                                      \
            switch (ow) {                                                                          \
            case 7: /* MobileNetV2's last maps */                                                  \
                outside(-pl, 7, SW, K, w, &l, &r);                                                 \
                if (K == 5 && l == 2 && r == 2) /* EfficientNet's 5x5s at 7x7 */                   \
                    tile(&k, xr, r0, r1, -pl, xplane, y, yplane, SW, 7, 2, 2);                     \
                else if (K == 7 && l == 3 && r == 3) /* ConvNeXt's 7x7s at 7x7 */                  \
                    tile(&k, xr, r0, r1, -pl, xplane, y, yplane, SW, 7, 3, 3);                     \
                else if (l == 1 && r == 1)                                                         \
                    tile(&k, xr, r0, r1, -pl, xplane, y, yplane, SW, 7, 1, 1);                     \
                else if (l == 1 && r == 0)                                                         \
                    tile(&k, xr, r0, r1, -pl, xplane, y, yplane, SW, 7, 1, 0);                     \
                else                                                                               \
                    tile_any(&k, xr, r0, r1, -pl, w, xplane, y, yplane, SW, 7);                    \
                break;                                                                             \
            case 6: tile_any(&k, xr, r0, r1, -pl, w, xplane, y, yplane, SW, 6); break;             \
            case 5: tile_any(&k, xr, r0, r1, -pl, w, xplane, y, yplane, SW, 5); break;             \
            case 4: tile_any(&k, xr, r0, r1, -pl, w, xplane, y, yplane, SW, 4); break;             \
            case 3: tile_any(&k, xr, r0, r1, -pl, w, xplane, y, yplane, SW, 3); break;             \
            case 2: tile_any(&k, xr, r0, r1, -pl, w, xplane, y, yplane, SW, 2); break;             \
            case 1: tile_any(&k, xr, r0, r1, -pl, w, xplane, y, yplane, SW, 1); break;             \
            default: break;                                                                        \
            }                                                                                      \
        }                                                                                          \
    }
ROWS(1, 0, 3, 0, rows_1)
ROWS(2, 0, 3, 0, rows_2)
ROWS(1, 1, 3, 0, rows_1_silu)
ROWS(2, 1, 3, 0, rows_2_silu)
ROWS(1, 0, 5, 0, rows5_1)
ROWS(2, 0, 5, 0, rows5_2)
ROWS(1, 1, 5, 0, rows5_1_silu)
ROWS(2, 1, 5, 0, rows5_2_silu)
ROWS(1, 2, 3, 0, rows_1_hswish)
ROWS(2, 2, 3, 0, rows_2_hswish)
ROWS(1, 2, 5, 0, rows5_1_hswish)
ROWS(2, 2, 5, 0, rows5_2_hswish)
/* 3x3 with a clamp and a residual (before it, unscaled): the passes of a
 * grouped conv of narrow groups (nchwc_gconv.c) */
ROWS(1, 0, 3, 1, rows_1_res)
ROWS(2, 0, 3, 1, rows_2_res)
/* 7x7 at stride 1 with a clamp only (ConvNeXt's, bias and no activation):
 * each of these functions is a few thousand FMAs unrolled, and the other
 * five 7x7 forms took the file's compile from about one minute to five
 * (far more under SIMDe); they run on the AVX2 kernel, the same bits */
ROWS(1, 0, 7, 0, rows7_1)
#undef ROWS
#undef tile
#undef tile_any

void nnf_nchwc_dw_rows2_avx512(const nnf_nchwc_dw_tile *t, size_t xplane, size_t yplane,
                               size_t rplane, size_t nc2, size_t oh0, size_t noh) {
    typedef void (*rows_fn)(const nnf_nchwc_dw_tile *, size_t, size_t, size_t, size_t, size_t,
                            size_t);
    /* [5x5][stride 2][epilogue: clamp, SiLU, HardSwish]; 7x7 one form
     * (nnf_nchwc_dw_pair_ok) */
    static const rows_fn fns[2][2][3] = {
        {{rows_1, rows_1_silu, rows_1_hswish}, {rows_2, rows_2_silu, rows_2_hswish}},
        {{rows5_1, rows5_1_silu, rows5_1_hswish}, {rows5_2, rows5_2_silu, rows5_2_hswish}}};
    nnf_act_kind act = t->ep->act.kind;
    int e = act == NNF_ACT_SILU ? 1 : act == NNF_ACT_HARD_SWISH ? 2 : 0;
    if (t->res)
        (t->s->sw == 2 ? rows_2_res : rows_1_res)(t, nc2, xplane, yplane, rplane, oh0, noh);
    else if (t->s->kh == 7)
        rows7_1(t, nc2, xplane, yplane, rplane, oh0, noh);
    else
        fns[t->s->kh == 5][t->s->sw == 2][e](t, nc2, xplane, yplane, rplane, oh0, noh);
}

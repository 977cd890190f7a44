/* AVX2 register tiles of the dense NCHWc8 convolution (conv_nchwc.c has the
 * packing and the work split).
 *
 * Tile: OB output blocks (8 channels each) x P output pixels of one row, OB
 * x P <= 12 accumulators (1x8, 2x6, 3x4, 4x3). Per tap and input lane: OB
 * weight vectors loaded, P input values broadcast (stride sw pixels apart,
 * so stride 2 needs no special case), OB x P FMAs. Tiles inside the row's
 * interior run every kw tap with no bounds checks; tiles touching a border
 * read zeros for the taps outside. Rows outside the input are clipped for
 * the whole row.
 *
 * Interior tiles at stride 1 or 2 run whole in assembly
 * (conv_nchwc_taps_avx2.h: the K loop over a table of the row's taps, the
 * start and the epilogue), on NCHWc8 input and on NCHW input whose rows
 * of taps are 1, 3, 5, 6 or 7 wide and not dilated (the stems); border
 * tiles, tiles that wrap rows, other strides and kernels, tiles with
 * padding lanes and epilogues the assembly does not do run in C, with the
 * same FMAs in the same order.
 *
 * Epilogue: bias, residual and a clamp (none/ReLU/Clip) on the registers;
 * any other activation (and a residual after it) in a second pass over the
 * span just stored, still in L1, with the activation fixed at compile time.
 * The padding lanes of a partial last block are written as zeros. */
#include "kernels/nchwc.h"
#include "kernels/x86/conv_nchwc_taps_avx2.h"
#include "kernels/x86/ep_fast_avx2.h"

#include <stdint.h>

typedef struct tile_arg {
    const float *x;        /* the image's input */
    const float *w;        /* packed weights of the tile's group of output blocks */
    float *y;              /* output at (first block, row, first pixel) */
    const float *res;      /* residual at the same place, or NULL */
    const float *bias;     /* bias of the first block's first channel, or NULL */
    size_t blk0;           /* the tile's first output block */
    ptrdiff_t ih, iw;      /* input row and column of tap (0, 0) for the first pixel */
    size_t kh0, kh1;       /* the row's taps inside the input */
    size_t kw0, kw1;       /* the taps of a row's part (nnf_nchwc_row_parts; G: 0, kw) */
    size_t u0, u1;         /* the K block's input units */
    int first, last;       /* start from zero / apply the epilogue (else: partial sums in y) */
    size_t ntile;          /* tiles of P pixels side by side from (iw, y, res) */
    size_t q0;             /* G == 2: the first pixel, oh * ow + ow */
    const ptrdiff_t *toff; /* TL: per tap (unit, kh, kw), its input offset from tap 0 */
    struct tap_table *tt;  /* the row's taps for the assembly tiles (row() updates it) */
    nnf_nchwc_wfetch *wf;  /* the next K block's weights, a line per tap to the assembly */
} tile_arg;

/* The table of a tile row's taps, rebuilt when the K block, the row's
 * clipping, the part's columns or the tile height changes (not per row: 2
 * K-block units of a 3x3 are 18 taps beside ~8000 cycles of FMAs per row). */
#define TAB_MAX 512
typedef struct tap_table {
    nnf_tap e[TAB_MAX];
    size_t n, u0, u1, kh0, kh1, kw0, kw1, nob;
} tap_table;

/* An entry per tap of NCHWc8 input (its 8 lanes the assembly's steps); of
 * NCHW input, an entry per row of kw taps (side by side in the input when
 * dw == 1, as lanes are). n = 0 where no assembly tile would read it. */
static void tap_table_update(const nnf_nchwc_conv_job *j, tap_table *t, size_t u0, size_t u1,
                             size_t kh0, size_t kh1, size_t kw0, size_t kw1, size_t nob) {
    if (t->n != SIZE_MAX && t->u0 == u0 && t->u1 == u1 && t->kh0 == kh0 && t->kh1 == kh1 &&
        t->kw0 == kw0 && t->kw1 == kw1 && t->nob == nob)
        return;
    const nnf_conv2d_shape *s = &j->k->s;
    /* fields one by one: a struct assignment would clear the 8 KiB table */
    t->n = 0;
    t->u0 = u0;
    t->u1 = u1;
    t->kh0 = kh0;
    t->kh1 = kh1;
    t->kw0 = kw0;
    t->kw1 = kw1;
    t->nob = nob;
    const size_t L = j->lanes, per = L == 1 ? s->kw : 1;
    if ((u1 - u0) * (kh1 - kh0) * ((kw1 - kw0) / per) > TAB_MAX ||
        (L == 1 && (!nnf_taps_row_width(s->kw) || (s->kw > 1 && s->dw != 1))))
        return;
    const size_t wtap = L * nob * NNF_NCHWC_B, wunit = s->kh * s->kw * wtap;
    for (size_t u = u0; u < u1; u++)
        for (size_t kh = kh0; kh < kh1; kh++)
            for (size_t kw = kw0; kw < kw1; kw += per)
                t->e[t->n++] = (nnf_tap){
                    .x = (ptrdiff_t)(((u - u0) * j->x_unit + (kh - kh0) * s->dh * j->x_row +
                                      (kw - kw0) * s->dw * L) *
                                     sizeof(float)),
                    .w = (ptrdiff_t)(((u - u0) * wunit + ((kh - kh0) * s->kw + kw - kw0) * wtap) *
                                     sizeof(float))};
}

typedef struct ep_ctx {
    nnf_ep_fast f;
    int post;       /* an activation (or residual after it) left for the second pass */
    size_t partial; /* the output block with padding lanes, or SIZE_MAX */
    __m256i lanes;  /* its valid lanes */
    int asm_ep;     /* the assembly tiles can finish the outputs (see span) */
    float lo, hi;   /* their clamp */
} ep_ctx;

/* Reads for taps left or right of the input row (G tiles). */
static const float zeros[8] __attribute__((aligned(32)));

/* G = 0: every tap of every pixel is inside the row. G = 1: a tap outside
 * reads zeros instead (one select per pixel and tap, beside L * OB * P
 * FMAs), so border pixels run in full-width tiles too: with clipped taps
 * they went one at a time, OB accumulators, latency-bound. SW: stride 1 or
 * 2 known (0: s->sw), so the P broadcasts are constant offsets, not P - 1
 * index registers (spilled beside 12 accumulators). K1: a 1x1 row whose
 * one tap is inside the input. G = 2: the tile's pixels
 * run on across rows (rows whose taps are all inside the input), each with
 * its own input row: a 7-wide row made tiles of 3 + 2 + 2 pixels, 49
 * pixels make 15 x 3 + 2 x 2. */
static inline __attribute__((always_inline)) void
tile(const nnf_nchwc_conv_job *j, const tile_arg *a, const ep_ctx *ec, const int L, const int OB,
     const int P, const int G, const int SW, const int K1, const int TL) {
    const nnf_conv2d_shape *s = &j->k->s;
    /* the whole run in assembly: interior, stride 1 or 2, no padding lanes,
     * an epilogue it does */
    const nnf_taps_fn taps = !G && SW ? nnf_taps_for(OB, P, SW, L, (int)s->kw) : NULL;
    if (taps && a->tt->n && (!a->last || ec->asm_ep) &&
        (ec->partial < a->blk0 || ec->partial >= a->blk0 + (size_t)OB)) {
        const size_t wtap = (size_t)L * OB * 8, wunit = s->kh * s->kw * wtap;
        const size_t kh0 = K1 ? 0 : a->kh0, n = a->tt->n;
        const float *res = a->res && !j->ep->residual_after_act ? a->res : NULL;
        nnf_taps_io io = {
            .y = a->y,
            .res = res,
            .bias = a->bias,
            .ys = (ptrdiff_t)(j->y_blk * sizeof(float)),
            .lo = ec->lo,
            .hi = ec->hi,
            .first = a->first,
            .last = a->last,
            .tab = a->tt->e,
            .n = n,
            .rstep = res ? (ptrdiff_t)(P * 8 * sizeof(float)) : 0,
        };
        const float *x = a->x + a->u0 * j->x_unit +
                         (a->ih + (ptrdiff_t)(kh0 * s->dh)) * (ptrdiff_t)j->x_row +
                         (a->iw + (ptrdiff_t)(a->kw0 * s->dw)) * L;
        const float *w = a->w + a->u0 * wunit + (kh0 * s->kw + a->kw0) * wtap;
        /* a line of the next K block per tap while the block has lines
         * left, then none (any readable line, step 0) */
        for (size_t t = 0; t < a->ntile;) {
            size_t can = nnf_nchwc_wfetch_left(a->wf) / n, cnt = a->ntile - t;
            cnt = can && can < cnt ? can : cnt;
            const char *pf = can ? nnf_nchwc_wfetch_take(a->wf, cnt * n) : NULL;
            io.pf = pf ? pf : (const char *)a->w;
            io.pf_step = pf ? 64 : 0;
            io.ntile = cnt;
            taps(x + t * P * s->sw * L, w, &io);
            t += cnt;
        }
        return;
    }
    /* ntile tiles side by side: the setup is paid once per run, not per P
     * pixels (a 24-deep 1x1 tile is only ~150 cycles of FMAs) */
    for (size_t t = 0; t < a->ntile; t++) {
        ptrdiff_t iw0 = a->iw + (ptrdiff_t)(t * P * s->sw);
        float *yt = a->y + t * P * 8;
        const float *rt = a->res ? a->res + t * P * 8 : NULL;
        /* G == 2: pixel p's first input row and column (the run wraps rows) */
        ptrdiff_t ihp[8], iwp[8];
        if (G == 2) {
            size_t q = a->q0 + t * P, oh = q / j->ow, ow = q % j->ow;
#pragma GCC unroll 8
            for (int p = 0; p < P; p++) {
                ihp[p] = (ptrdiff_t)(oh * s->sh) - (ptrdiff_t)s->pt;
                iwp[p] = (ptrdiff_t)(ow * s->sw) - (ptrdiff_t)s->pl;
                if (++ow == j->ow) {
                    ow = 0;
                    oh++;
                }
            }
        }
        __m256 acc[4][8];
#pragma GCC unroll 4
        for (int o = 0; o < OB; o++)
#pragma GCC unroll 8
            for (int p = 0; p < P; p++)
                acc[o][p] =
                    a->first ? _mm256_setzero_ps() : _mm256_loadu_ps(yt + o * j->y_blk + p * 8);
        /* A 1-pixel border tile (a row's first or last pixel of a padded
         * conv) has OB accumulators, each FMA waiting on the last: bound by
         * the FMA latency, it ran at half the rate (YOLOv5s's stride-2 3x3s
         * at 20 wide: 9 % of the time for 5 % of the pixels). Odd lanes
         * go to a second set, added at the end. Border tiles are the same
         * pixels at every thread count, so results still do not depend on
         * it; the order differs from the interior tiles' (within the
         * tolerance of any other order). */
        const int split = G == 1 && P == 1 && L == 8 && OB >= 2;
        __m256 acc2[4];
#pragma GCC unroll 4
        for (int o = 0; o < OB; o++)
            acc2[o] = _mm256_setzero_ps();
        /* the group's weights: [icu][kh][kw][lane][OB][8] */
        const size_t xs = (SW ? (size_t)SW : s->sw) * (size_t)L, wtap = (size_t)L * OB * 8;
        const size_t xkw = s->dw * (size_t)L, wunit = s->kh * s->kw * wtap;
        if (TL && L == 1) {
            /* NCHW input, every tap inside: one flat loop over the taps
             * (3 channels x 3x3 was 27 trips through three nested loops) */
            const float *xb = a->x + a->ih * (ptrdiff_t)j->x_row + iw0;
            const size_t taps = s->kh * s->kw, t1 = a->u1 * taps;
            const float *wp = a->w + a->u0 * taps * OB * 8;
#pragma GCC unroll 3
            for (size_t t = a->u0 * taps; t < t1; t++, wp += OB * 8) {
                const float *xp = xb + a->toff[t];
                __m256 xv[8];
#pragma GCC unroll 8
                for (int p = 0; p < P; p++)
                    xv[p] = _mm256_broadcast_ss(xp + p * xs);
#pragma GCC unroll 4
                for (int o = 0; o < OB; o++) {
                    __m256 wv = _mm256_load_ps(wp + o * 8);
#pragma GCC unroll 8
                    for (int p = 0; p < P; p++)
                        acc[o][p] = _mm256_fmadd_ps(wv, xv[p], acc[o][p]);
                }
            }
        }
        for (size_t u = a->u0; u < (TL && L == 1 ? a->u0 : a->u1); u++) {
            const float *xu = a->x + u * j->x_unit;
            const float *wu = a->w + u * wunit;
            for (size_t kh = K1 ? 0 : a->kh0; kh < (K1 ? 1 : a->kh1); kh++) {
                const float *xr =
                    G == 2 ? xu : xu + (a->ih + (ptrdiff_t)(kh * s->dh)) * (ptrdiff_t)j->x_row;
                /* guarded tiles address through px[]: no pointer is formed
                 * left of the row or past it */
                const size_t kw0 = K1 || G ? 0 : a->kw0, kw1 = K1 ? 1 : G ? s->kw : a->kw1;
                ptrdiff_t iw = iw0 + (ptrdiff_t)(kw0 * s->dw);
                const float *xp = G ? xr : xr + iw * L;
                const float *wp = wu + (kh * s->kw + kw0) * wtap;
                const float *rowp[8];
                if (G == 2) {
#pragma GCC unroll 8
                    for (int p = 0; p < P; p++)
                        rowp[p] = xu + (ihp[p] + (ptrdiff_t)(kh * s->dh)) * (ptrdiff_t)j->x_row;
                }
                for (size_t kw = kw0; kw < kw1;
                     kw++, xp += G ? 0 : xkw, wp += wtap, iw += (ptrdiff_t)s->dw) {
                    const float *px[8];
                    if (G == 2) {
#pragma GCC unroll 8
                        for (int p = 0; p < P; p++) {
                            ptrdiff_t c = iwp[p] + (ptrdiff_t)(kw * s->dw);
                            px[p] = (size_t)c < j->w ? rowp[p] + c * L : zeros;
                        }
                    } else if (G) {
#pragma GCC unroll 8
                        for (int p = 0; p < P; p++) {
                            ptrdiff_t c = iw + p * (ptrdiff_t)s->sw;
                            px[p] = (size_t)c < j->w ? xr + c * L : zeros;
                        }
                    }
#pragma GCC unroll 8
                    for (int l = 0; l < L; l++) {
                        /* 16 registers: the accumulators, the shorter side of
                         * the tile held, the longer one streamed through one */
                        if (P <= OB) {
                            __m256 xv[8];
#pragma GCC unroll 8
                            for (int p = 0; p < P; p++)
                                xv[p] = _mm256_broadcast_ss(G ? px[p] + l : xp + p * xs + l);
#pragma GCC unroll 4
                            for (int o = 0; o < OB; o++) {
                                __m256 wv = _mm256_load_ps(wp + (l * OB + o) * 8);
                                if (split && (l & 1)) {
                                    acc2[o] = _mm256_fmadd_ps(wv, xv[0], acc2[o]);
                                    continue;
                                }
#pragma GCC unroll 8
                                for (int p = 0; p < P; p++)
                                    acc[o][p] = _mm256_fmadd_ps(wv, xv[p], acc[o][p]);
                            }
                        } else {
                            __m256 wv[4];
#pragma GCC unroll 4
                            for (int o = 0; o < OB; o++)
                                wv[o] = _mm256_load_ps(wp + (l * OB + o) * 8);
#pragma GCC unroll 8
                            for (int p = 0; p < P; p++) {
                                __m256 xv = _mm256_broadcast_ss(G ? px[p] + l : xp + p * xs + l);
#pragma GCC unroll 4
                                for (int o = 0; o < OB; o++)
                                    acc[o][p] = _mm256_fmadd_ps(wv[o], xv, acc[o][p]);
                            }
                        }
                    }
                }
            }
        }
        if (split)
#pragma GCC unroll 4
            for (int o = 0; o < OB; o++)
                acc[o][0] = _mm256_add_ps(acc[o][0], acc2[o]);
        if (!a->last) {
#pragma GCC unroll 4
            for (int o = 0; o < OB; o++)
#pragma GCC unroll 8
                for (int p = 0; p < P; p++)
                    _mm256_storeu_ps(yt + o * j->y_blk + p * 8, acc[o][p]);
            continue;
        }
        const nnf_epilogue *e = j->ep;
#pragma GCC unroll 4
        for (int o = 0; o < OB; o++) {
            int part = a->blk0 + (size_t)o == ec->partial;
            __m256 bv = _mm256_setzero_ps();
            if (a->bias)
                bv = part ? _mm256_maskload_ps(a->bias + o * 8, ec->lanes)
                          : _mm256_loadu_ps(a->bias + o * 8);
#pragma GCC unroll 8
            for (int p = 0; p < P; p++) {
                __m256 v = acc[o][p];
                const float *rp = rt ? rt + o * j->y_blk + p * 8 : NULL;
                if (ec->f.clamp_only) {
                    v = nnf_ep_fast8(&ec->f, v, bv, rp, 1, ec->lanes);
                } else {
                    if (e->alpha != 1.0f)
                        v = _mm256_mul_ps(v, _mm256_set1_ps(e->alpha));
                    if (a->bias)
                        v = _mm256_add_ps(v, bv);
                    if (rp && !e->residual_after_act) {
                        __m256 r = _mm256_loadu_ps(rp);
                        if (e->residual_scale != 1.0f)
                            r = _mm256_mul_ps(r, _mm256_set1_ps(e->residual_scale));
                        v = _mm256_add_ps(v, r);
                    }
                }
                if (part)
                    v = _mm256_and_ps(v, _mm256_castsi256_ps(ec->lanes));
                _mm256_storeu_ps(yt + o * j->y_blk + p * 8, v);
            }
        }
    }
}

typedef void (*tile_fn)(const nnf_nchwc_conv_job *, const tile_arg *, const ep_ctx *);

/* One tile function: tile() with its compile-time arguments (G, SW, K1, TL). */
#define TILE_FN(NAME, L, OB, P, G, SW, K1, TL)                                                     \
    static void NAME##_##L##_##OB##_##P(const nnf_nchwc_conv_job *j, const tile_arg *a,            \
                                        const ep_ctx *ec) {                                        \
        tile(j, a, ec, L, OB, P, G, SW, K1, TL);                                                   \
    }
#define TILE(L, OB, P)                                                                             \
    TILE_FN(tile, L, OB, P, 0, 0, 0, 0)                                                            \
    TILE_FN(tiles1, L, OB, P, 0, 1, 0, 0)                                                          \
    TILE_FN(tiles2, L, OB, P, 0, 2, 0, 0)                                                          \
    TILE_FN(tilep, L, OB, P, 0, 1, 1, 0)                                                           \
    TILE_FN(tileq, L, OB, P, 0, 2, 1, 0)                                                           \
    TILE_FN(tilet, L, OB, P, 0, 2, 0, 1)                                                           \
    TILE_FN(tileg, L, OB, P, 1, 0, 0, 0)                                                           \
    TILE_FN(tilex, L, OB, P, 2, 0, 0, 0)
#define TILES(L)                                                                                   \
    TILE(L, 1, 1)                                                                                  \
    TILE(L, 1, 2) TILE(L, 1, 3) TILE(L, 1, 4) TILE(L, 1, 5) TILE(L, 1, 6) TILE(L, 1, 7)            \
        TILE(L, 1, 8) TILE(L, 2, 1) TILE(L, 2, 2) TILE(L, 2, 3) TILE(L, 2, 4) TILE(L, 2, 5)        \
            TILE(L, 2, 6) TILE(L, 3, 1) TILE(L, 3, 2) TILE(L, 3, 3) TILE(L, 3, 4) TILE(L, 4, 1)    \
                TILE(L, 4, 2) TILE(L, 4, 3)
TILES(1)
TILES(8)
#define ROW(T, L)                                                                                  \
    {                                                                                              \
        {T##_##L##_1_1, T##_##L##_1_2, T##_##L##_1_3, T##_##L##_1_4,                               \
         T##_##L##_1_5, T##_##L##_1_6, T##_##L##_1_7, T##_##L##_1_8},                              \
            {T##_##L##_2_1, T##_##L##_2_2, T##_##L##_2_3, T##_##L##_2_4,                           \
             T##_##L##_2_5, T##_##L##_2_6, NULL,          NULL},                                   \
            {T##_##L##_3_1, T##_##L##_3_2, T##_##L##_3_3, T##_##L##_3_4, NULL, NULL, NULL, NULL},  \
        {                                                                                          \
            T##_##L##_4_1, T##_##L##_4_2, T##_##L##_4_3, NULL, NULL, NULL, NULL, NULL              \
        }                                                                                          \
    }
/* [interior / guarded / interior at stride 1 / across rows / interior at
 * stride 2 / 1x1 stride 1 interior / NCHW input, interior row and tile,
 * stride 2 / 1x1 stride 2 interior][lanes == 8][OB - 1][P - 1] */
static const tile_fn tiles[8][2][4][8] = {
    {ROW(tile, 1), ROW(tile, 8)},     {ROW(tileg, 1), ROW(tileg, 8)},
    {ROW(tiles1, 1), ROW(tiles1, 8)}, {ROW(tilex, 1), ROW(tilex, 8)},
    {ROW(tiles2, 1), ROW(tiles2, 8)}, {ROW(tilep, 1), ROW(tilep, 8)},
    {ROW(tilet, 1), ROW(tilet, 8)},   {ROW(tileq, 1), ROW(tileq, 8)}};
/* The second pass's last steps on pixel i: a residual after the
 * activation, padding lanes zeroed, the store. */
static inline __attribute__((always_inline)) void post_store(const nnf_epilogue *e, float *y,
                                                             const float *r, size_t i, int part,
                                                             __m256i lanes, __m256 v) {
    if (r && e->residual_after_act)
        v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_set1_ps(e->residual_scale),
                                           _mm256_loadu_ps(r + 8 * i)));
    if (part)
        v = _mm256_and_ps(v, _mm256_castsi256_ps(lanes));
    _mm256_storeu_ps(y + 8 * i, v);
}

/* The second pass on npx pixels of one block: activation, a residual after
 * it, padding lanes zeroed. */
static inline __attribute__((always_inline)) void post_act(nnf_act_kind kind, const nnf_epilogue *e,
                                                           float *y, const float *r, size_t npx,
                                                           int part, __m256i lanes) {
    nnf_activation act = e->act;
    act.kind = kind;
    size_t i = 0;
    /* four pixels at a time: SiLU side by side (nnf_silu8_fast_n) */
    for (; i + 4 <= npx; i += 4) {
        __m256 v[4];
        NNF_EACH(u, 4) v[u] = _mm256_loadu_ps(y + 8 * (i + u));
        if (kind == NNF_ACT_SILU)
            nnf_silu8_fast_n(v, 4);
        else
            NNF_EACH(u, 4) v[u] = nnf_act8(v[u], &act);
        NNF_EACH(u, 4) post_store(e, y, r, i + u, part, lanes, v[u]);
    }
    for (; i < npx; i++) {
        __m256 v = _mm256_loadu_ps(y + 8 * i);
        post_store(e, y, r, i, part, lanes,
                   kind == NNF_ACT_SILU ? nnf_silu8_fast(v) : nnf_act8(v, &act));
    }
}

static __attribute__((noinline)) void post(const nnf_epilogue *e, float *y, const float *r,
                                           size_t npx, int part, __m256i lanes) {
    switch (e->act.kind) {
#define K(kind)                                                                                    \
    case kind: post_act(kind, e, y, r, npx, part, lanes); return;
        NNF_ACT_KINDS(K)
#undef K
    }
    post_act(NNF_ACT_NONE, e, y, r, npx, part, lanes);
}

/* Columns [ow0, ow1) of a row in tiles of balanced widths (7 = 3 + 2 + 2,
 * not 3 + 3 + 1: the narrow ones have too few accumulators to hide the FMA
 * latency); equal interior tiles side by side in one call. A part of the
 * row whose taps [a->kw0, a->kw1) are inside for every column (restricted)
 * runs as interior tiles over those taps. */
static void row_tiles(const nnf_nchwc_conv_job *j, tile_arg *a, const ep_ctx *ec, size_t nob,
                      float *yb, const float *rb, size_t y0, int k1, int tl, size_t ow0, size_t ow1,
                      int restricted) {
    const nnf_conv2d_shape *s = &j->k->s;
    if (ow1 <= ow0)
        return;
    int l8 = j->lanes == 8;
    size_t pmax = nnf_nchwc_avx2_tile_px(nob);
    size_t n = ow1 - ow0, ntiles = (n + pmax - 1) / pmax, base = n / ntiles, wide = n % ntiles;
    size_t end = restricted ? ow1 : j->ow_hi;
    for (size_t t = 0, ow = ow0; t < ntiles;) {
        size_t np = base + (t < wide);
        int guard = !restricted && (ow < j->ow_lo || ow + np > j->ow_hi);
        size_t run = 1;
        if (!guard) {
            size_t last = t < wide ? wide : ntiles;
            while (t + run < last && ow + (run + 1) * np <= end)
                run++;
        }
        a->iw = (ptrdiff_t)(ow * s->sw) - (ptrdiff_t)s->pl;
        a->y = yb + (y0 + ow * NNF_NCHWC_B);
        a->res = rb ? rb + (y0 + ow * NNF_NCHWC_B) : NULL;
        a->ntile = run;
        int kind = guard ? 1 : s->sw == 1 ? (k1 ? 5 : 2) : s->sw == 2 ? (tl ? 6 : k1 ? 7 : 4) : 0;
        tiles[kind][l8][nob - 1][np - 1](j, a, ec);
        ow += run * np;
        t += run;
    }
}

static void row(const nnf_nchwc_conv_job *j, tile_arg *a, const ep_ctx *ec, size_t ocb0, size_t nob,
                size_t oh, size_t ow0, size_t ow1) {
    const nnf_conv2d_shape *s = &j->k->s;
    const nnf_epilogue *e = j->ep;
    nnf_nchwc_taps(oh, s->sh, s->pt, s->dh, s->kh, j->h, &a->kh0, &a->kh1);
    a->ih = (ptrdiff_t)(oh * s->sh) - (ptrdiff_t)s->pt;
    size_t y0 = (a->blk0 - j->y_blk0) * j->y_blk + (oh * j->ow - j->y_px0) * NNF_NCHWC_B;
    float *yb = j->y + (size_t)(a->x - j->x) / j->x_img * j->y_img;
    const float *rb = e->residual ? e->residual + (yb - j->y) : NULL;
    /* a 1x1 row inside the input: no tap loops at all (they were a third
     * of the instructions of a 24-deep pointwise tile) */
    int k1 = s->kh == 1 && s->kw == 1 && a->kh0 == 0 && a->kh1 == 1;
    int tl = a->toff && a->kh0 == 0 && a->kh1 == s->kh;
    a->kw0 = 0;
    a->kw1 = s->kw;
    tap_table_update(j, a->tt, a->u0, a->u1, a->kh0, a->kh1, 0, s->kw, nob);
    /* With the interior in assembly, the border columns are tiles of their
     * own (1 pixel for a 3x3 with padding 1): a 28-wide row of a 3x3
     * stride-2 conv ran a 3-pixel C border tile, 3-pixel and two 2-pixel
     * tiles; now 1 + 9 x 3. Runs of columns with the same taps inside
     * (a dilation past the stride: nnf_nchwc_row_parts) run over those
     * taps as interior tiles. */
    if (a->tt->n && (s->sw == 1 || s->sw == 2)) {
        nnf_nchwc_part parts[NNF_NCHWC_PARTS_MAX];
        size_t np = nnf_nchwc_row_parts(j, ow0, ow1, parts);
        for (size_t i = 0; i < np; i++) {
            int r = parts[i].kind == NNF_NCHWC_RESTRICTED;
            a->kw0 = r ? parts[i].kw0 : 0;
            a->kw1 = r ? parts[i].kw1 : s->kw;
            tap_table_update(j, a->tt, a->u0, a->u1, a->kh0, a->kh1, a->kw0, a->kw1, nob);
            row_tiles(j, a, ec, nob, yb, rb, y0, k1, tl, parts[i].ow0, parts[i].ow1, r);
        }
    } else {
        row_tiles(j, a, ec, nob, yb, rb, y0, k1, tl, ow0, ow1, 0);
    }
    if (!ec->post || !a->last)
        return;
    for (size_t o = 0; o < nob; o++) {
        size_t off = y0 + o * j->y_blk + ow0 * NNF_NCHWC_B;
        post(e, yb + off, rb ? rb + off : NULL, ow1 - ow0, ocb0 + o == ec->partial, ec->lanes);
    }
}

/* Whole rows [oh0, oh1), all inside the input vertically, as one run of
 * pixels in balanced G = 2 tiles. */
static void rows(const nnf_nchwc_conv_job *j, tile_arg *a, const ep_ctx *ec, size_t ocb0,
                 size_t nob, size_t oh0, size_t oh1) {
    const nnf_epilogue *e = j->ep;
    int l8 = j->lanes == 8;
    size_t pmax = nnf_nchwc_avx2_tile_px(nob);
    size_t y0 = (a->blk0 - j->y_blk0) * j->y_blk + (oh0 * j->ow - j->y_px0) * NNF_NCHWC_B;
    float *yb = j->y + (size_t)(a->x - j->x) / j->x_img * j->y_img;
    const float *rb = e->residual ? e->residual + (yb - j->y) : NULL;
    a->kh0 = 0;
    a->kh1 = j->k->s.kh;
    size_t n = (oh1 - oh0) * j->ow, ntiles = (n + pmax - 1) / pmax, base = n / ntiles,
           wide = n % ntiles;
    for (size_t q = 0, part = 0; part < 2; part++) {
        size_t np = base + (part == 0), cnt = part == 0 ? wide : ntiles - wide;
        if (!cnt)
            continue;
        a->q0 = oh0 * j->ow + q;
        a->y = yb + y0 + q * NNF_NCHWC_B;
        a->res = rb ? rb + y0 + q * NNF_NCHWC_B : NULL;
        a->ntile = cnt;
        tiles[3][l8][nob - 1][np - 1](j, a, ec);
        q += cnt * np;
    }
    if (!ec->post || !a->last)
        return;
    for (size_t o = 0; o < nob; o++) {
        size_t off = y0 + o * j->y_blk;
        post(e, yb + off, rb ? rb + off : NULL, n, ocb0 + o == ec->partial, ec->lanes);
    }
}

void nnf_nchwc_conv_span_avx2(const nnf_nchwc_conv_job *j, size_t b, size_t ocb0, size_t nob,
                              size_t oh0, size_t oh1, size_t ow0, size_t ow1) {
    const nnf_conv2d_shape *s = &j->k->s;
    const nnf_epilogue *e = j->ep;
    ep_ctx ec = {.f = nnf_ep_fast_init(e), .partial = SIZE_MAX};
    ec.post = !ec.f.clamp_only;
    size_t tail = s->oc % NNF_NCHWC_B;
    ec.lanes = nnf_mask8(tail ? tail : NNF_NCHWC_B);
    if (tail)
        ec.partial = j->ocb - 1;
    /* what the assembly tiles finish: bias, a residual before the
     * activation and a clamp; an activation that is not a clamp (or a
     * residual after it) is left to the second pass as in the C tiles */
    ec.asm_ep = e->alpha == 1.0f &&
                (!e->residual || e->residual_after_act || e->residual_scale == 1.0f);
    ec.lo = ec.f.clamp_only ? _mm256_cvtss_f32(ec.f.lo) : -INFINITY;
    ec.hi = ec.f.clamp_only ? _mm256_cvtss_f32(ec.f.hi) : INFINITY;
    tap_table tt; /* not zeroed: 8 KiB per span call */
    tt.n = SIZE_MAX;
    tile_arg a = {.tt = &tt,
                  .x = j->x + b * j->x_img,
                  .w = j->k->w + ocb0 * j->w_blk,
                  .blk0 = ocb0,
                  .bias = e->bias ? e->bias + ocb0 * NNF_NCHWC_B : NULL};
    ptrdiff_t toff[256];
    if (j->lanes == 1 && j->icu * s->kh * s->kw <= 256) {
        size_t t = 0;
        for (size_t u = 0; u < j->icu; u++)
            for (size_t kh = 0; kh < s->kh; kh++)
                for (size_t kw = 0; kw < s->kw; kw++)
                    toff[t++] = (ptrdiff_t)(u * j->x_unit + kh * s->dh * j->x_row + kw * s->dw);
        a.toff = toff;
    }
    /* rows so narrow that balanced tiles average half a pixel short of the
     * widest run through tiles that wrap rows, where the row's border tiles
     * run in C anyway (an all-interior row's tiles run in assembly). Every
     * such row does, even one alone at the end of a band: as a row of its
     * own, its 1-pixel border tiles would sum in their split order, and the
     * band (the thread count) would decide a pixel's bits. */
    size_t pmax = nnf_nchwc_avx2_tile_px(nob);
    int narrow = ow0 == 0 && ow1 == j->ow && (j->ow_lo > 0 || j->ow_hi < j->ow) &&
                 j->ow * 2 < (2 * pmax - 1) * ((j->ow + pmax - 1) / pmax);
    /* K blocks outermost: one block's weights serve every row of the band */
    const size_t wunit = s->kh * s->kw * j->lanes * nob * NNF_NCHWC_B;
    for (size_t u0 = 0; u0 < j->icu; u0 += j->kc) {
        a.u0 = u0;
        a.u1 = j->icu - u0 < j->kc ? j->icu : u0 + j->kc;
        a.first = u0 == 0;
        a.last = a.u1 == j->icu;
        nnf_nchwc_wfetch wf = nnf_nchwc_wfetch_init(j, a.w, a.u1, wunit, oh1 - oh0);
        a.wf = &wf;
        for (size_t oh = oh0; oh < oh1;) {
            size_t end = oh1 < j->oh_hi ? oh1 : j->oh_hi;
            if (narrow && oh >= j->oh_lo && oh < end) {
                nnf_nchwc_wfetch_upto(&wf, end - oh0);
                rows(j, &a, &ec, ocb0, nob, oh, end);
                oh = end;
            } else {
                nnf_nchwc_wfetch_upto(&wf, oh + 1 - oh0);
                nnf_nchwc_fetch_next_rows(j, a.x, a.u0, a.u1, oh, oh1);
                row(j, &a, &ec, ocb0, nob, oh, ow0, ow1);
                oh++;
            }
        }
    }
}

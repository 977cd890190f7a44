/* The blocked depthwise conv on the AVX-512 tier: two channel blocks per
 * zmm (nchwc_dw.c pairs them), for 3x3 kernels without dilation at stride 1
 * or 2 with the epilogue in registers (bias, ReLU, Clip, none: MobileNet's),
 * the AVX2 kernel (x86/nchwc_avx2.c) for the rest.
 *
 * The values are the AVX2 kernel's bit for bit, lane by lane: each output
 * starts from zero and adds its taps with FMAs in (row, column) order,
 * skipping those outside the input, then adds the bias, clamps and zeroes
 * the padding lanes in the same order. So a conv may run some blocks here
 * and some there (an odd last block, a pointwise tile group of one block)
 * and its fused and separate runs still agree.
 *
 * A row goes in tiles of up to 8 pixels that load each input column of a
 * window row once for every (pixel, tap) it feeds; in the tiles at the
 * borders the columns outside the row are skipped. */
#include "kernels/nchwc.h"
#include "kernels/x86/ep_fast_avx2.h"
#include "kernels/x86/nchwc_avx2.h"
#include "kernels/x86/nchwc_pair_avx512.h"

#define B NNF_NCHWC_B

typedef struct dw2_ctx {
    const nnf_nchwc_dw_tile *t;
    size_t xplane, yplane; /* floats from block blk's rows to block blk + 1's, in x and y */
    __m512 w[3][3];        /* the pair's taps */
    __m512 bias, lo, hi;
    __mmask16 keep; /* the real lanes */
    int has_bias, clamp;
} dw2_ctx;

static inline __attribute__((always_inline)) void dw2_store(const dw2_ctx *c, float *y, __m512 v) {
    if (c->has_bias)
        v = _mm512_add_ps(v, c->bias);
    if (c->clamp)
        v = _mm512_min_ps(c->hi, _mm512_max_ps(c->lo, v));
    nnf_store_pair(y, c->yplane, 1, _mm512_maskz_mov_ps(c->keep, v));
}

/* P pixels from o0: the tile's column q (input column col0 + q) feeds
 * pixel p through tap j when q = p SW + j; with CLIP the columns outside
 * the row are skipped (the borders' taps never formed). */
static inline __attribute__((always_inline)) void dw2_tile(const dw2_ctx *c, const float *const *xr,
                                                           size_t r0, size_t r1, size_t o0,
                                                           float *y, size_t SW, size_t P,
                                                           int CLIP) {
    const ptrdiff_t col0 = (ptrdiff_t)(o0 * SW) - (ptrdiff_t)c->t->s->pl, w = (ptrdiff_t)c->t->s->w;
    __m512 acc[8];
#pragma GCC unroll 8
    for (size_t p = 0; p < P; p++)
        acc[p] = _mm512_setzero_ps();
    for (size_t i = r0; i < r1; i++) {
        const float *xp = xr[i] + col0 * (ptrdiff_t)B;
#pragma GCC unroll 32
        for (size_t q = 0; q < (P - 1) * SW + 3; q++) {
            if (CLIP && (col0 + (ptrdiff_t)q < 0 || col0 + (ptrdiff_t)q >= w))
                continue;
            __m512 xv = nnf_load_pair(xp + q * B, c->xplane, 1);
#pragma GCC unroll 3
            for (size_t j = 0; j < 3; j++)
                if (q >= j && (q - j) % SW == 0 && (q - j) / SW < P)
                    acc[(q - j) / SW] = _mm512_fmadd_ps(xv, c->w[i][j], acc[(q - j) / SW]);
        }
    }
#pragma GCC unroll 8
    for (size_t p = 0; p < P; p++)
        dw2_store(c, y + (o0 + p) * B, acc[p]);
}

/* A row in tiles of 8 pixels (the last one shorter), those not wholly in
 * the interior [lo, hi) clipped. */
#define DW2_ROW(SW)                                                                                \
    static void dw2_row_##SW(const dw2_ctx *c, const float *const *xr, size_t r0, size_t r1,       \
                             size_t lo, size_t hi, float *y) {                                     \
        size_t ow = c->t->s->ow, o = 0;                                                            \
        for (; o + 8 <= ow; o += 8) {                                                              \
            if (o >= lo && o + 8 <= hi)                                                            \
                dw2_tile(c, xr, r0, r1, o, y, SW, 8, 0);                                           \
            else                                                                                   \
                dw2_tile(c, xr, r0, r1, o, y, SW, 8, 1);                                           \
        }                                                                                          \
        switch (ow - o) {                                                                          \
        case 7: dw2_tile(c, xr, r0, r1, o, y, SW, 7, 1); break;                                    \
        case 6: dw2_tile(c, xr, r0, r1, o, y, SW, 6, 1); break;                                    \
        case 5: dw2_tile(c, xr, r0, r1, o, y, SW, 5, 1); break;                                    \
        case 4: dw2_tile(c, xr, r0, r1, o, y, SW, 4, 1); break;                                    \
        case 3: dw2_tile(c, xr, r0, r1, o, y, SW, 3, 1); break;                                    \
        case 2: dw2_tile(c, xr, r0, r1, o, y, SW, 2, 1); break;                                    \
        case 1: dw2_tile(c, xr, r0, r1, o, y, SW, 1, 1); break;                                    \
        default: break;                                                                            \
        }                                                                                          \
    }
DW2_ROW(1)
DW2_ROW(2)
#undef DW2_ROW

void nnf_nchwc_dw_rows2_avx512(const nnf_nchwc_dw_tile *t, size_t xplane, size_t yplane, size_t nc2,
                               size_t oh0, size_t noh) {
    const nnf_conv2d_shape *s = t->s;
    nnf_ep_fast f = nnf_ep_fast_init(t->ep);
    dw2_ctx c = {.t = t,
                 .xplane = xplane,
                 .yplane = yplane,
                 .has_bias = t->bias && f.bias,
                 .clamp = f.clamp};
    c.keep = (__mmask16)(((1u << t->nc) - 1u) | (((1u << nc2) - 1u) << 8));
    c.lo = _mm512_broadcast_f32x8(f.lo);
    c.hi = _mm512_broadcast_f32x8(f.hi);
    c.bias = c.has_bias ? _mm512_maskz_loadu_ps(c.keep, t->bias) : _mm512_setzero_ps();
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            c.w[i][j] = nnf_load_pair(t->w + (size_t)(i * 3 + j) * B, 9 * B, 1);
    size_t lo, hi;
    nnf_nchwc_interior(s->w, s->pl, s->sw, 3, 1, s->ow, &lo, &hi);
    for (size_t oh = oh0; oh < oh0 + noh; oh++) {
        ptrdiff_t ih0 = (ptrdiff_t)(oh * s->sh) - (ptrdiff_t)s->pt;
        size_t r0, r1;
        nnf_nchwc_window_taps(ih0, 3, 1, s->h, &r0, &r1);
        const float *xr[3] = {NULL, NULL, NULL};
        for (size_t i = r0; i < r1; i++)
            xr[i] = t->x + ((size_t)(ih0 + (ptrdiff_t)i) - t->x_row0) * s->w * B;
        float *y = t->y + oh * s->ow * B;
        if (s->sw == 1)
            dw2_row_1(&c, xr, r0, r1, lo, hi, y);
        else
            dw2_row_2(&c, xr, r0, r1, lo, hi, y);
    }
}

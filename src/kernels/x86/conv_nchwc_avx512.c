/* AVX-512 register tiles of the dense NCHWc8 convolution, with a blocked
 * input or an NCHW one (a model's first conv; conv_nchwc.c has the packing
 * and the work split).
 *
 * The tensors keep their 8-channel blocks: one zmm holds two output blocks
 * (16 output channels) of one pixel, and the packed weights of a group of
 * nob <= 8 blocks, [unit][kh][kw][lane][nob][8], give each lane's 16
 * weights of blocks 2z and 2z + 1 as one contiguous load (the low half
 * alone, masked, when nob is odd). Tile: Z zmm (2Z blocks) x P pixels of
 * one row, Z x P <= 24 accumulators (4 x 6, 3 x 8, 2 x 12, 1 x 12). Per
 * tap and input lane: Z weight loads, P broadcasts, Z x P FMAs, in the
 * order (unit, kh, kw, lane) of every other tier, so an output's value does
 * not depend on where tiles or tasks start. Tiles touching a border read
 * zeros for the taps outside the row; rows outside the input are clipped
 * for the whole row. The border columns of the rows whose kernel rows are
 * all inside run as column tiles instead (col_tile: one pixel a row, the
 * outside taps skipped, the same values).
 *
 * Interior tiles of even groups at strides 1 and 2 run their K loop in
 * assembly (x86/conv_nchwc_taps_avx512.h: GCC's register allocation of this
 * C loop copied registers around the FMAs); the C loop below is the same
 * computation and serves the rest, and the SIMDe build.
 *
 * Epilogue on the last K block: alpha, bias, residual before or after the
 * activation, any activation, and the padding lanes of a partial last
 * block zeroed (nnf_ep16_apply); one zmm's two halves are stored to
 * their two blocks. Earlier K blocks store the partial sums to y. */
#include "kernels/nchwc.h"
#include "kernels/x86/nchwc_pair_avx512.h"
#include "kernels/x86/vmath_avx512.h"

#include <string.h>
#ifndef NNF_AVX512_EMULATED
#include "kernels/x86/conv_nchwc_taps_avx512.h"
#endif

#define ZMAX 4
#define PMAX 12

/* Reads for taps left or right of the input row. */
static const float zeros[8] __attribute__((aligned(32)));

typedef struct tile_arg {
    const float *x;       /* the image's input at the K block's first unit */
    const float *w;       /* the group's packed weights at the K block's first unit */
    float *y;             /* output at (first block, row, first pixel) */
    const float *res;     /* residual at the same place, or NULL */
    size_t nob;           /* output blocks of the group */
    size_t nu;            /* input units in the K block */
    size_t kh0, kh1;      /* the row's taps inside the input */
    ptrdiff_t ih, iw;     /* input row and column of tap (0, 0) for the first pixel */
    int first, last;      /* start from zero / apply the epilogue */
    size_t blk0;          /* the group's first output block */
    const ptrdiff_t *tab; /* per tap of the row: input offset from (ih, iw), weight offset */
    size_t ntab;          /* (floats); tab NULL: too many taps, nested loops */
    nnf_nchwc_wfetch *wf; /* the next K block's weights, lines per tap to the assembly */
    int rows;             /* tab's entries are rows (NCHW input: channel, kh) for the
                           * assembly's stem forms, not taps */
} tile_arg;

/* zmm z's lanes: both blocks, or the low one when block 2z + 1 is past
 * the group. */
static inline __mmask16 zmask(size_t nob, int z) {
    return (size_t)(2 * z + 1) < nob ? (__mmask16)0xffff : (__mmask16)0x00ff;
}

/* The fast epilogue's activations: a clamp (none, ReLU, Clip), or these. */
enum { EP_CLAMP = 0, EP_SILU, EP_SIGMOID };

/* One zmm row of a tile through the fast epilogue (finish): bias, residual
 * r (NULL: none) before or after the activation, clamp to (lo, hi), SiLU or
 * Sigmoid (ACT). */
static inline __attribute__((always_inline)) void
ep_row(const __m512 *acc, int P, int has_bias, __m512 bias, const float *r, int after, __m512 lo,
       __m512 hi, const int ACT, float *y, size_t blk, int both, __mmask16 keep) {
    for (int p = 0; p < P; p++) {
        __m512 v = acc[p];
        if (has_bias)
            v = _mm512_add_ps(v, bias);
        __m512 rv = r ? nnf_load_pair(r + p * NNF_NCHWC_B, blk, both) : _mm512_setzero_ps();
        if (r && !after)
            v = _mm512_add_ps(v, rv);
        v = ACT == EP_SILU      ? nnf_silu16(v)
            : ACT == EP_SIGMOID ? nnf_sigmoid16(v)
                                : _mm512_min_ps(hi, _mm512_max_ps(lo, v));
        if (r && after)
            v = _mm512_add_ps(v, rv);
        nnf_store_pair(y + p * NNF_NCHWC_B, blk, both, _mm512_maskz_mov_ps(keep, v));
    }
}

/* ep_row in the usual case with every flag a constant: a bias, both
 * blocks real and full, the residual r (NULL: none) before the clamp or
 * SiLU. */
static inline __attribute__((always_inline)) void ep_row_usual(const __m512 *acc, int P,
                                                               __m512 bias, const float *r,
                                                               __m512 lo, __m512 hi, int silu,
                                                               float *y, size_t blk) {
    if (silu && r)
        ep_row(acc, P, 1, bias, r, 0, lo, hi, EP_SILU, y, blk, 1, 0xffff);
    else if (silu)
        ep_row(acc, P, 1, bias, NULL, 0, lo, hi, EP_SILU, y, blk, 1, 0xffff);
    else if (r)
        ep_row(acc, P, 1, bias, r, 0, lo, hi, EP_CLAMP, y, blk, 1, 0xffff);
    else
        ep_row(acc, P, 1, bias, NULL, 0, lo, hi, EP_CLAMP, y, blk, 1, 0xffff);
}

/* The clamp that ReLU (0, inf), Clip (alpha, beta) and none (-inf, inf)
 * are, as max/min in nnf_act16's operand order (NaN kept). */
static inline void clamp_bounds(const nnf_epilogue *e, __m512 *lo, __m512 *hi) {
    int kind = e->act.kind;
    *lo = _mm512_set1_ps(kind == NNF_ACT_RELU   ? 0.0f
                         : kind == NNF_ACT_CLIP ? e->act.alpha
                                                : -__builtin_inff());
    *hi = _mm512_set1_ps(kind == NNF_ACT_CLIP ? e->act.beta : __builtin_inff());
}

/* The last K block's outputs: the epilogue, padding lanes zeroed. */
static __attribute__((noinline)) void finish(const nnf_nchwc_conv_job *j, const tile_arg *a,
                                             __m512 acc[ZMAX][PMAX], int Z, int P) {
    const nnf_epilogue *e = j->ep;
    const nnf_conv2d_shape *s = &j->k->s;
    size_t tail = s->oc % NNF_NCHWC_B;
    /* The common epilogues (ResNet's, MobileNetV2's, YOLOv5s's) without a
     * test per value: alpha 1, a residual unscaled; ReLU, Clip or none as
     * max/min against (lo, hi) in nnf_act16's operand order (NaN kept), or
     * SiLU as nnf_act16 computes it. Through nnf_ep16_apply each value
     * re-read alpha, the scale and the activation's kind and jumped through
     * its switch: finish was 20 % of a 64 -> 256 1x1 conv, 32 % with a
     * residual. */
    int kind = e->act.kind;
    int fast = e->alpha == 1.0f && (!a->res || e->residual_scale == 1.0f) &&
               (kind == NNF_ACT_NONE || kind == NNF_ACT_RELU || kind == NNF_ACT_CLIP ||
                kind == NNF_ACT_SILU || kind == NNF_ACT_SIGMOID);
    __m512 lo, hi;
    clamp_bounds(e, &lo, &hi);
    for (int z = 0; z < Z; z++) {
        size_t ob = a->blk0 + 2 * (size_t)z;
        int both = (size_t)(2 * z + 1) < a->nob;
        /* the lanes of real channels: block ob, then ob + 1 */
        __mmask16 keep = (__mmask16)(tail && ob + 1 == j->ocb ? (1u << tail) - 1u : 0xffu);
        if (both)
            keep |= (__mmask16)((tail && ob + 2 == j->ocb ? (1u << tail) - 1u : 0xffu) << 8);
        __m512 bias = _mm512_setzero_ps();
        if (e->bias)
            bias = _mm512_maskz_loadu_ps(keep, e->bias + ob * NNF_NCHWC_B);
        if (fast) {
            size_t off = 2 * (size_t)z * j->y_blk;
            const float *r = a->res ? a->res + off : NULL;
            float *y = a->y + off;
            size_t blk = j->y_blk;
            /* the usual case with every flag a constant: a bias, both
             * blocks real and full, any residual before the activation
             * (the general call tested each flag per value: 8-13 % of a
             * 1x1 conv with K = 64 was this function) */
            if (e->bias && keep == 0xffff && (!r || !e->residual_after_act) &&
                kind != NNF_ACT_SIGMOID) {
                ep_row_usual(acc[z], P, bias, r, lo, hi, kind == NNF_ACT_SILU, y, blk);
                continue;
            }
            /* Sigmoid: YOLOv5s's detection heads (255 channels, none
             * after it); through nnf_ep16_apply its switch ran per value */
            if (kind == NNF_ACT_SILU)
                ep_row(acc[z], P, e->bias != NULL, bias, r, e->residual_after_act, lo, hi, EP_SILU,
                       a->y + off, j->y_blk, both, keep);
            else if (kind == NNF_ACT_SIGMOID)
                ep_row(acc[z], P, e->bias != NULL, bias, r, e->residual_after_act, lo, hi,
                       EP_SIGMOID, a->y + off, j->y_blk, both, keep);
            else
                ep_row(acc[z], P, e->bias != NULL, bias, r, e->residual_after_act, lo, hi, EP_CLAMP,
                       a->y + off, j->y_blk, both, keep);
            continue;
        }
        for (int p = 0; p < P; p++) {
            size_t off = 2 * (size_t)z * j->y_blk + (size_t)p * NNF_NCHWC_B;
            __m512 r = a->res ? nnf_load_pair(a->res + off, j->y_blk, both) : _mm512_setzero_ps();
            __m512 v = nnf_ep16_apply(acc[z][p], e, e->bias != NULL, bias, a->res != NULL, r);
            nnf_store_pair(a->y + off, j->y_blk, both, _mm512_maskz_mov_ps(keep, v));
        }
    }
}

/* finish's most common form inline, every flag a constant: a bias, the
 * group's blocks all real (no channel tail), alpha 1, a residual unscaled
 * before a clamp (none, ReLU, Clip) or SiLU. 0: not this form, nothing
 * written. SiLU here too: YOLOv5s ~1.5 % faster on 1 thread (even on 2),
 * 150 KB more code. */
static inline __attribute__((always_inline)) int fast_tile(const nnf_nchwc_conv_job *j,
                                                           const tile_arg *a,
                                                           __m512 acc[ZMAX][PMAX], const int Z,
                                                           const int P) {
    const nnf_epilogue *e = j->ep;
    int kind = e->act.kind;
    if (!e->bias || e->alpha != 1.0f ||
        (a->res && (e->residual_scale != 1.0f || e->residual_after_act)) ||
        (kind != NNF_ACT_NONE && kind != NNF_ACT_RELU && kind != NNF_ACT_CLIP &&
         kind != NNF_ACT_SILU) ||
        (j->k->s.oc % NNF_NCHWC_B && a->blk0 + a->nob == j->ocb))
        return 0;
    __m512 lo, hi;
    clamp_bounds(e, &lo, &hi);
    size_t blk = j->y_blk;
    int silu = kind == NNF_ACT_SILU;
#pragma GCC unroll 4
    for (int z = 0; z < Z; z++) {
        __m512 bias = _mm512_loadu_ps(e->bias + (a->blk0 + 2 * (size_t)z) * NNF_NCHWC_B);
        size_t off = 2 * (size_t)z * blk;
        ep_row_usual(acc[z], P, bias, a->res ? a->res + off : NULL, lo, hi, silu, a->y + off, blk);
    }
    return 1;
}

/* One tap's L input lanes (8 of a blocked input, 1 of an NCHW one) into
 * the Z x P accumulators: pixel p's input at x + p * SW * L (SW = 1 or 2),
 * or at px[p] (SW = 0); lane l's weights of zmm z at w + l * wlane + 16 z. */
static inline __attribute__((always_inline)) void tap(const int Z, const int P, const int SW,
                                                      const int L, const float *x,
                                                      const float *const *px, const float *w,
                                                      size_t wlane, const __mmask16 *km,
                                                      __m512 acc[ZMAX][PMAX]) {
#pragma GCC unroll 8
    for (int l = 0; l < L; l++, w += wlane) {
        __m512 wv[ZMAX];
#pragma GCC unroll 4
        for (int z = 0; z < Z; z++)
            wv[z] = _mm512_maskz_loadu_ps(km[z], w + 16 * z);
#pragma GCC unroll 12
        for (int p = 0; p < P; p++) {
            __m512 xv = _mm512_set1_ps(SW ? x[p * SW * L + l] : px[p][l]);
#pragma GCC unroll 4
            for (int z = 0; z < Z; z++)
                acc[z][p] = _mm512_fmadd_ps(wv[z], xv, acc[z][p]);
        }
    }
}

/* The K loop of a 3-block group (24 output channels: MobileNetV2's 56x56
 * projections) over a row's taps. As two zmm per pixel the second holds
 * one block and 8 padding lanes: a quarter of the FMAs computed nothing.
 * Here block 2 of pixels p and p + 1 share a zmm: its weights as both
 * halves (one broadcast load), its input the two pixels' broadcasts
 * joined (one shuffle), so 1.5 FMAs a pixel, not 2. Each output gets the
 * same FMAs in the same order as in tap(), so the same bits; acc[1][p]
 * (block 2 in its low half) goes in and comes out as tap() leaves it. */
static inline __attribute__((always_inline)) void tile3_taps(const int P, const int SW,
                                                             const float *x0, const ptrdiff_t *tab,
                                                             size_t ntab, const float *w,
                                                             __m512 acc[ZMAX][PMAX]) {
    enum { Q = (PMAX + 1) / 2 };
    __m512 pair[Q];
#pragma GCC unroll 6
    for (int q = 0; q < (P + 1) / 2; q++)
        pair[q] = 2 * q + 1 < P ? nnf_pair_join(acc[1][2 * q], acc[1][2 * q + 1]) : acc[1][2 * q];
    for (size_t t = 0; t < ntab; t++) {
        const float *x = x0 + tab[2 * t], *wt = w + tab[2 * t + 1];
#pragma GCC unroll 8
        for (int l = 0; l < NNF_NCHWC_B; l++) {
            __m512 w01 = _mm512_loadu_ps(wt + 24 * l);
            __m512 w2 = _mm512_broadcast_f32x8(_mm256_loadu_ps(wt + 24 * l + 16));
#pragma GCC unroll 6
            for (int q = 0; q < (P + 1) / 2; q++) {
                __m512 xa = _mm512_set1_ps(x[2 * q * SW * NNF_NCHWC_B + l]);
                acc[0][2 * q] = _mm512_fmadd_ps(w01, xa, acc[0][2 * q]);
                if (2 * q + 1 < P) {
                    __m512 xb = _mm512_set1_ps(x[(2 * q + 1) * SW * NNF_NCHWC_B + l]);
                    acc[0][2 * q + 1] = _mm512_fmadd_ps(w01, xb, acc[0][2 * q + 1]);
                    xa = nnf_pair_join(xa, xb);
                }
                pair[q] = _mm512_fmadd_ps(w2, xa, pair[q]);
            }
        }
    }
#pragma GCC unroll 6
    for (int q = 0; q < (P + 1) / 2; q++) {
        acc[1][2 * q] = pair[q];
        if (2 * q + 1 < P)
            acc[1][2 * q + 1] = _mm512_castps256_ps512(nnf_pair_high(pair[q]));
    }
}

/* A tile's accumulators from y, pixels ps floats apart (8: one row; a row
 * apart: a column tile), or zeros on the first K block; and back. */
static inline __attribute__((always_inline)) void
acc_load(const nnf_nchwc_conv_job *j, const tile_arg *a, const int Z, const int P, size_t ps,
         const __mmask16 *km, __m512 acc[ZMAX][PMAX]) {
#pragma GCC unroll 4
    for (int z = 0; z < Z; z++)
#pragma GCC unroll 12
        for (int p = 0; p < P; p++)
            acc[z][p] = a->first ? _mm512_setzero_ps()
                                 : nnf_load_pair(a->y + 2 * (size_t)z * j->y_blk + (size_t)p * ps,
                                                 j->y_blk, km[z] == 0xffff);
}

static inline __attribute__((always_inline)) void
acc_store(const nnf_nchwc_conv_job *j, const tile_arg *a, const int Z, const int P, size_t ps,
          const __mmask16 *km, __m512 acc[ZMAX][PMAX]) {
#pragma GCC unroll 4
    for (int z = 0; z < Z; z++)
#pragma GCC unroll 12
        for (int p = 0; p < P; p++)
            nnf_store_pair(a->y + 2 * (size_t)z * j->y_blk + (size_t)p * ps, j->y_blk,
                           km[z] == 0xffff, acc[z][p]);
}

/* One tile of Z zmm x P pixels. G = 0: every tap of every pixel inside the
 * row, pixels SW (1 or 2, known at compile time: constant displacements
 * from one pointer) or s->sw (SW = 0: a pointer per pixel) apart; G = 1:
 * taps outside read zeros. L: input lanes per unit, 8 (NCHWc8 input) or 1
 * (NCHW input: a model's first conv, its units channels). */
static inline __attribute__((always_inline)) void tile(const nnf_nchwc_conv_job *j,
                                                       const tile_arg *a, const int Z, const int P,
                                                       const int G, const int SW, const int L) {
    const nnf_conv2d_shape *s = &j->k->s;
    const size_t nob = a->nob, wlane = nob * NNF_NCHWC_B, wtap = (size_t)L * wlane,
                 wunit = s->kh * s->kw * wtap;
    __mmask16 km[ZMAX];
#pragma GCC unroll 4
    for (int z = 0; z < Z; z++)
        km[z] = zmask(nob, z);
    if (a->last && a->res) {
        /* the residual's lines, fetched while the K loop runs: the epilogue
         * read them after it and waited (ResNet-50's 64 -> 256 1x1s at
         * 56x56, K = 64: 0.87x ORT per layer). ResNet-50 in one process
         * (ab_builds, both orders) 1.03x on 1 thread, even on 2; YOLOv5s,
         * MobileNetV2 even. The output's lines fetched the same way (for
         * writing, or into L1) did not pay: YOLOv5s 0.99x. */
        for (int z = 0; z < Z; z++)
            for (int h = 0; h < 1 + (km[z] == 0xffff); h++) {
                const char *r = (const char *)(a->res + (2 * (size_t)z + (size_t)h) * j->y_blk);
                for (int b = 0; b < P * 32; b += 64)
                    _mm_prefetch(r + b, _MM_HINT_T0);
                _mm_prefetch(r + P * 32 - 1, _MM_HINT_T0);
            }
    }
#ifndef NNF_AVX512_EMULATED
    if (!G && SW && a->tab) {
        /* the assembly K loop (conv_nchwc_taps_avx512.h) where it has one:
         * it zeroes the accumulators or takes the partial sums from acc,
         * and leaves the sums there for the epilogue. Copied through a
         * second array both ways (96 more loads and stores a tile), a 1x1
         * with K = 64 ran 77 % of the FMA peak against 88 % at K = 256;
         * without, 64 -> 32 at 56x56 0.062 -> 0.058 ms, ResNet-50 ~1.5 %,
         * YOLOv5s ~1.5 %, MobileNetV2 4-6 % faster (ab_builds, both
         * orders, the same outputs). One zmm too (16 output channels):
         * MobileNetV2's 32 -> 16 at 112x112 0.083 -> 0.079 ms. Odd groups
         * (24 channels: 3 blocks) packed with a zero block to take these
         * measured even against the C loop (144 -> 24 at 56x56), so stay
         * there */
        nnf_k512_fn k5 = L == NNF_NCHWC_B ? nnf_k512_tiles[SW - 1][Z - 1][P - 1] : NULL;
        if (L == 1 && (Z == 2 || Z == 4) && a->rows)
            k5 = nnf_k512_rows[nnf_k512_row_index(s->kw)][Z == 4][P - 1];
        if (k5 && nob == 2 * (size_t)Z) {
            __m512 acc[ZMAX][PMAX];
            if (!a->first)
                acc_load(j, a, Z, P, NNF_NCHWC_B, km, acc);
            /* four lines of the next K block per tap while it has them
             * (a flattened 1x1 is one row: nothing else fetched them, and
             * ResNet-50's 7x7 maps fetched a K block in 7 bursts) */
            size_t n = a->ntab, left = nnf_nchwc_wfetch_left(a->wf);
            const char *pf = (const char *)a->w;
            ptrdiff_t pfs = 0;
            if (n && left >= 4 * n) {
                pf = nnf_nchwc_wfetch_take(a->wf, 4 * n);
                pfs = 256;
            } else if (n && left >= n) {
                pf = nnf_nchwc_wfetch_take(a->wf, n);
                pfs = 64;
            }
            k5(a->x + a->ih * (ptrdiff_t)j->x_row + a->iw * L, a->w, a->tab, n, acc, pf, pfs,
               (size_t)a->first);
            if (a->last && fast_tile(j, a, acc, Z, P))
                return;
            if (a->last)
                finish(j, a, acc, Z, P);
            else
                acc_store(j, a, Z, P, NNF_NCHWC_B, km, acc);
            return;
        }
    }
#endif
    __m512 acc[ZMAX][PMAX];
    acc_load(j, a, Z, P, NNF_NCHWC_B, km, acc);
    if (Z == 2 && L == NNF_NCHWC_B && !G && SW && a->tab && !a->rows && nob == 3 &&
        !nnf_nchwc_no_pair3) {
        const float *x0 = a->x + a->ih * (ptrdiff_t)j->x_row + a->iw * L;
        tile3_taps(P, SW, x0, a->tab, a->ntab, a->w, acc);
    } else if (!G && SW && a->tab) {
        /* one flat loop over the row's taps (three nested ones left GCC
         * rotating the accumulators through other registers every trip) */
        const float *x0 = a->x + a->ih * (ptrdiff_t)j->x_row + a->iw * L;
        for (size_t t = 0; t < a->ntab; t++) {
            if (!a->rows) {
                tap(Z, P, SW, L, x0 + a->tab[2 * t], NULL, a->w + a->tab[2 * t + 1], wlane, km,
                    acc);
                continue;
            }
            /* a row entry without its assembly form: its kw taps in order */
            for (size_t kw = 0; kw < s->kw; kw++)
                tap(Z, P, SW, L, x0 + a->tab[2 * t] + kw * s->dw * L, NULL,
                    a->w + a->tab[2 * t + 1] + kw * wtap, wlane, km, acc);
        }
    } else {
        for (size_t u = 0; u < a->nu; u++) {
            const float *xu = a->x + u * j->x_unit, *wu = a->w + u * wunit;
            for (size_t kh = a->kh0; kh < a->kh1; kh++) {
                const float *xr = xu + (a->ih + (ptrdiff_t)(kh * s->dh)) * (ptrdiff_t)j->x_row;
                const float *wp = wu + kh * s->kw * wtap;
                for (size_t kw = 0; kw < s->kw; kw++, wp += wtap) {
                    ptrdiff_t c0 = a->iw + (ptrdiff_t)(kw * s->dw);
                    const float *px[PMAX];
                    if (G || !SW) {
#pragma GCC unroll 12
                        for (int p = 0; p < P; p++) {
                            ptrdiff_t c = c0 + p * (ptrdiff_t)s->sw;
                            px[p] = !G || (size_t)c < j->w ? xr + c * L : zeros;
                        }
                    }
                    tap(Z, P, G || !SW ? 0 : SW, L, G ? xr : xr + c0 * L, px, wp, wlane, km,
                        acc);
                }
            }
        }
    }
    if (a->last) {
        /* a copy: passing acc itself would keep it in memory in the loop */
        __m512 out[ZMAX][PMAX];
#pragma GCC unroll 4
        for (int z = 0; z < Z; z++)
#pragma GCC unroll 12
            for (int p = 0; p < P; p++)
                out[z][p] = acc[z][p];
        finish(j, a, out, Z, P);
        return;
    }
    acc_store(j, a, Z, P, NNF_NCHWC_B, km, acc);
}

/* nob blocks of P pixels from s (blocks sblk floats apart, pixels sps) to d
 * (dblk, dps). */
static void copy_pixels(float *d, size_t dblk, size_t dps, const float *s, size_t sblk, size_t sps,
                        size_t nob, int P) {
    for (size_t b = 0; b < nob; b++)
        for (int p = 0; p < P; p++)
            memcpy(d + b * dblk + (size_t)p * dps, s + b * sblk + (size_t)p * sps,
                   NNF_NCHWC_B * sizeof(float));
}

/* A column tile: P pixels of one border column (a->iw's), from P
 * consecutive rows of the row interior (every kernel row inside the input;
 * a->ih the first's), one pixel per row: a row's border column alone was a
 * 1-pixel tile that read the whole K block's weights for one pixel (a
 * 20-wide stride-2 row's left column: 12 % of that conv). The taps outside
 * the row are skipped, not read as zeros: a sum starts at +0 and adding
 * +-0 to it leaves it unchanged, so the values are those of the 1-pixel
 * tile. The epilogue runs on a contiguous copy (finish takes pixels 8
 * floats apart), written back after. */
static inline __attribute__((always_inline)) void col_tile(const nnf_nchwc_conv_job *j,
                                                           const tile_arg *a, const int Z,
                                                           const int P, const int L) {
    const nnf_conv2d_shape *s = &j->k->s;
    const size_t nob = a->nob, wlane = nob * NNF_NCHWC_B, wtap = (size_t)L * wlane,
                 wunit = s->kh * s->kw * wtap, prow = j->ow * NNF_NCHWC_B;
    const ptrdiff_t xrow = (ptrdiff_t)(s->sh * j->x_row);
    __mmask16 km[ZMAX];
#pragma GCC unroll 4
    for (int z = 0; z < Z; z++)
        km[z] = zmask(nob, z);
    size_t kw0, kw1;
    nnf_nchwc_window_taps(a->iw, s->kw, s->dw, j->w, &kw0, &kw1);
    __m512 acc[ZMAX][PMAX];
    acc_load(j, a, Z, P, prow, km, acc);
    for (size_t u = 0; u < a->nu; u++) {
        const float *xu = a->x + u * j->x_unit, *wu = a->w + u * wunit;
        for (size_t kh = 0; kh < s->kh; kh++) {
            const float *xr = xu + (a->ih + (ptrdiff_t)(kh * s->dh)) * (ptrdiff_t)j->x_row;
            for (size_t kw = kw0; kw < kw1; kw++) {
                const float *px[PMAX];
                const float *x0 = xr + (a->iw + (ptrdiff_t)(kw * s->dw)) * L;
#pragma GCC unroll 12
                for (int p = 0; p < P; p++)
                    px[p] = x0 + p * xrow;
                tap(Z, P, 0, L, NULL, px, wu + (kh * s->kw + kw) * wtap, wlane, km, acc);
            }
        }
    }
    if (!a->last) {
        acc_store(j, a, Z, P, prow, km, acc);
        return;
    }
    /* [2 Z blocks][P pixels][8]: the residual in, the outputs out */
    float buf[2 * ZMAX * PMAX * NNF_NCHWC_B], rbuf[2 * ZMAX * PMAX * NNF_NCHWC_B];
    nnf_nchwc_conv_job jb = *j;
    jb.y_blk = (size_t)P * NNF_NCHWC_B;
    tile_arg ab = *a;
    ab.y = buf;
    ab.res = a->res ? rbuf : NULL;
    if (a->res)
        copy_pixels(rbuf, jb.y_blk, NNF_NCHWC_B, a->res, j->y_blk, prow, nob, P);
    __m512 out[ZMAX][PMAX];
#pragma GCC unroll 4
    for (int z = 0; z < Z; z++)
#pragma GCC unroll 12
        for (int p = 0; p < P; p++)
            out[z][p] = acc[z][p];
    finish(&jb, &ab, out, Z, P);
    copy_pixels(a->y, j->y_blk, prow, buf, jb.y_blk, NNF_NCHWC_B, nob, P);
}

typedef void (*tile_fn)(const nnf_nchwc_conv_job *, const tile_arg *);

#define TILE_KINDS(Z, P, N, L)                                                                     \
    static void N##tile_##Z##_##P(const nnf_nchwc_conv_job *j, const tile_arg *a) {                \
        tile(j, a, Z, P, 0, 0, L);                                                                 \
    }                                                                                              \
    static void N##tile1_##Z##_##P(const nnf_nchwc_conv_job *j, const tile_arg *a) {               \
        tile(j, a, Z, P, 0, 1, L);                                                                 \
    }                                                                                              \
    static void N##tile2_##Z##_##P(const nnf_nchwc_conv_job *j, const tile_arg *a) {               \
        tile(j, a, Z, P, 0, 2, L);                                                                 \
    }                                                                                              \
    static void N##tileg_##Z##_##P(const nnf_nchwc_conv_job *j, const tile_arg *a) {               \
        tile(j, a, Z, P, 1, 0, L);                                                                 \
    }                                                                                              \
    static void N##tilec_##Z##_##P(const nnf_nchwc_conv_job *j, const tile_arg *a) {               \
        col_tile(j, a, Z, P, L);                                                                   \
    }
/* tile*: blocked input; ntile*: NCHW input */
#define TILE_FN(Z, P) TILE_KINDS(Z, P, , NNF_NCHWC_B) TILE_KINDS(Z, P, n, 1)
#define TILES_UPTO6(Z)                                                                             \
    TILE_FN(Z, 1) TILE_FN(Z, 2) TILE_FN(Z, 3) TILE_FN(Z, 4) TILE_FN(Z, 5) TILE_FN(Z, 6)
#define TILES_UPTO8(Z) TILES_UPTO6(Z) TILE_FN(Z, 7) TILE_FN(Z, 8)
#define TILES_UPTO12(Z) TILES_UPTO8(Z) TILE_FN(Z, 9) TILE_FN(Z, 10) TILE_FN(Z, 11) TILE_FN(Z, 12)
TILES_UPTO12(1)
TILES_UPTO12(2)
TILES_UPTO8(3)
TILES_UPTO6(4)

#define ROW6(T, Z) T##_##Z##_1, T##_##Z##_2, T##_##Z##_3, T##_##Z##_4, T##_##Z##_5, T##_##Z##_6
#define ROW8(T, Z) ROW6(T, Z), T##_##Z##_7, T##_##Z##_8
#define ROW12(T, Z) ROW8(T, Z), T##_##Z##_9, T##_##Z##_10, T##_##Z##_11, T##_##Z##_12
#define TABLE(T)                                                                                   \
    {                                                                                              \
        {ROW12(T, 1)}, {ROW12(T, 2)}, {ROW8(T, 3)}, {                                              \
            ROW6(T, 4)                                                                             \
        }                                                                                          \
    }
/* [NCHW input][interior, any stride / interior, stride 1 / interior,
 * stride 2 / guarded / border column][Z - 1][P - 1] */
static const tile_fn tiles[2][5][ZMAX][PMAX] = {
    {TABLE(tile), TABLE(tile1), TABLE(tile2), TABLE(tileg), TABLE(tilec)},
    {TABLE(ntile), TABLE(ntile1), TABLE(ntile2), TABLE(ntileg), TABLE(ntilec)}};
/* the widest tile per Z: 24 accumulators (12 with one zmm: 16 would leave
 * too few rows to balance a 7- or 14-wide row) */
static const size_t tile_px[ZMAX] = {12, 12, 8, 6};

#define TAB_MAX 512

/* The taps of rows clipped to [kh0, kh1) and columns to [kw0, kw1), units
 * [0, nu) of the K block: tab [2 t] input offsets (from tap (0, kw0)), [2 t
 * + 1] weight offsets, in the summation order. */
static size_t tap_table(const nnf_nchwc_conv_job *j, size_t nob, size_t nu, size_t kh0, size_t kh1,
                        size_t kw0, size_t kw1, ptrdiff_t *tab) {
    const nnf_conv2d_shape *s = &j->k->s;
    const size_t wtap = j->lanes * nob * NNF_NCHWC_B, wunit = s->kh * s->kw * wtap;
    size_t n = 0;
    for (size_t u = 0; u < nu; u++)
        for (size_t kh = kh0; kh < kh1; kh++)
            for (size_t kw = kw0; kw < kw1; kw++, n++) {
                tab[2 * n] = (ptrdiff_t)(u * j->x_unit + kh * s->dh * j->x_row +
                                         (kw - kw0) * s->dw * j->lanes);
                tab[2 * n + 1] = (ptrdiff_t)(u * wunit + (kh * s->kw + kw) * wtap);
            }
    return n;
}

/* The entries of an NCHW input's rows (channel, kernel row) for the
 * assembly's stem forms, which take a row's kw taps as steps; 0 where it
 * has none (any stride but 2, dilation, other widths, odd groups). */
static size_t row_table(const nnf_nchwc_conv_job *j, size_t nob, size_t nu, size_t kh0, size_t kh1,
                        ptrdiff_t *tab) {
#ifdef NNF_AVX512_EMULATED
    (void)j, (void)nob, (void)nu, (void)kh0, (void)kh1, (void)tab;
    return 0;
#else
    const nnf_conv2d_shape *s = &j->k->s;
    if (j->lanes != 1 || s->sw != 2 || s->dw != 1 || nnf_k512_row_index(s->kw) < 0 ||
        (nob != 4 && nob != 8))
        return 0;
    const size_t wtap = nob * NNF_NCHWC_B, wunit = s->kh * s->kw * wtap;
    size_t n = 0;
    for (size_t u = 0; u < nu; u++)
        for (size_t kh = kh0; kh < kh1; kh++, n++) {
            tab[2 * n] = (ptrdiff_t)(u * j->x_unit + kh * s->dh * j->x_row);
            tab[2 * n + 1] = (ptrdiff_t)(u * wunit + kh * s->kw * wtap);
        }
    return n;
#endif
}

void nnf_nchwc_conv_span_avx512(const nnf_nchwc_conv_job *j, size_t b, size_t ocb0, size_t nob,
                                size_t oh0, size_t oh1, size_t ow0, size_t ow1) {
    const nnf_conv2d_shape *s = &j->k->s;
    const int Z = (int)((nob + 1) / 2);
    const size_t pmax = tile_px[Z - 1], wunit = s->kh * s->kw * j->lanes * nob * NNF_NCHWC_B;
    float *yb = j->y + b * j->y_img + (ocb0 - j->y_blk0) * j->y_blk;
    const float *rb = j->ep->residual ? j->ep->residual + (yb - j->y) : NULL;
    tile_arg a = {.nob = nob, .blk0 = ocb0};
    ptrdiff_t tab[2 * TAB_MAX]; /* not zeroed: 8 KiB per span call */
    size_t tab_u = SIZE_MAX, tab_kh0 = 0, tab_kh1 = 0, tab_kw0 = 0, tab_kw1 = 0;
    /* the row's parts (nnf_nchwc_row_parts); the rows whose kernel rows are
     * all inside, [col_r0, col_r1), run the columns of their border parts
     * as column tiles (none when a row has no interior or no border), but
     * runs of a tile's width and more, which run as row tiles over their
     * taps */
    nnf_nchwc_part parts[NNF_NCHWC_PARTS_MAX];
    const size_t nparts = nnf_nchwc_row_parts(j, ow0, ow1, parts);
    int col[NNF_NCHWC_PARTS_MAX], interior = 0, border = 0;
    for (size_t i = 0; i < nparts; i++) {
        interior |= parts[i].kind == NNF_NCHWC_INTERIOR;
        col[i] = parts[i].kind == NNF_NCHWC_GUARDED ||
                 (parts[i].kind == NNF_NCHWC_RESTRICTED && parts[i].ow1 - parts[i].ow0 < pmax);
        border |= col[i];
    }
    size_t col_r0 = j->oh_lo > oh0 ? j->oh_lo : oh0, col_r1 = j->oh_hi < oh1 ? j->oh_hi : oh1;
    if (!interior || !border || col_r0 > col_r1)
        col_r0 = col_r1 = 0;
    /* K blocks outermost: one block's weights serve every row of the band */
    for (size_t u0 = 0; u0 < j->icu; u0 += j->kc) {
        a.nu = j->icu - u0 < j->kc ? j->icu - u0 : j->kc;
        a.x = j->x + b * j->x_img + u0 * j->x_unit;
        a.w = j->k->w + ocb0 * j->w_blk + u0 * wunit;
        a.first = u0 == 0;
        a.last = u0 + a.nu == j->icu;
        nnf_nchwc_wfetch wf =
            nnf_nchwc_wfetch_init(j, j->k->w + ocb0 * j->w_blk, u0 + a.nu, wunit, oh1 - oh0);
        a.wf = &wf;
        for (size_t oh = oh0; oh < oh1; oh++) {
            nnf_nchwc_wfetch_upto(&wf, oh + 1 - oh0);
            nnf_nchwc_fetch_next_rows(j, a.x, 0, a.nu, oh, oh1);
            nnf_nchwc_taps(oh, s->sh, s->pt, s->dh, s->kh, j->h, &a.kh0, &a.kh1);
            a.ih = (ptrdiff_t)(oh * s->sh) - (ptrdiff_t)s->pt;
            /* the border columns as tiles of their own, the interior in
             * balanced tiles (7 pixels are 4 + 3, not 6 + 1): a border tile
             * runs every tap through the C loop with a pointer per pixel,
             * and a 40-wide stride-2 row cut 6 + 6 + ... had its first 6
             * pixels there for the one that needs it (tileg_* were 4.5 %
             * of a YOLOv5s run). Rows without an interior stay one run. */
            for (size_t pi = 0; pi < nparts; pi++) {
                const nnf_nchwc_part *pt = &parts[pi];
                size_t n = pt->ow1 - pt->ow0;
                /* the interior rows' border columns: column tiles below */
                if (col[pi] && oh >= col_r0 && oh < col_r1)
                    continue;
                int kind = pt->kind == NNF_NCHWC_GUARDED ? 3 : s->sw <= 2 ? (int)s->sw : 0;
                size_t kw0 = kind == 3 ? 0 : pt->kw0, kw1 = kind == 3 ? s->kw : pt->kw1;
                /* the table of the row's taps, rebuilt when the K block, the
                 * row's clipping or the part's columns change */
                a.tab = NULL;
                if (kind != 3 && a.nu * (a.kh1 - a.kh0) * (kw1 - kw0) <= TAB_MAX) {
                    if (tab_u != u0 || tab_kh0 != a.kh0 || tab_kh1 != a.kh1 || tab_kw0 != kw0 ||
                        tab_kw1 != kw1) {
                        a.ntab = kw0 == 0 && kw1 == s->kw
                                     ? row_table(j, nob, a.nu, a.kh0, a.kh1, tab)
                                     : 0;
                        a.rows = a.ntab > 0;
                        if (!a.rows)
                            a.ntab = tap_table(j, nob, a.nu, a.kh0, a.kh1, kw0, kw1, tab);
                        tab_u = u0;
                        tab_kh0 = a.kh0;
                        tab_kh1 = a.kh1;
                        tab_kw0 = kw0;
                        tab_kw1 = kw1;
                    }
                    a.tab = tab;
                }
                /* a run's taps only through the table */
                if (pt->kind == NNF_NCHWC_RESTRICTED && !a.tab) {
                    kind = 3;
                    kw0 = 0;
                }
                size_t ntiles = (n + pmax - 1) / pmax, base = n / ntiles, wide = n % ntiles;
                for (size_t t = 0, ow = pt->ow0; t < ntiles; t++) {
                    size_t np = base + (t < wide);
                    a.iw = (ptrdiff_t)(ow * s->sw) - (ptrdiff_t)s->pl + (ptrdiff_t)(kw0 * s->dw);
                    size_t off = (oh * j->ow + ow - j->y_px0) * NNF_NCHWC_B;
                    a.y = yb + off;
                    a.res = rb ? rb + off : NULL;
                    tiles[j->lanes == 1][kind][Z - 1][np - 1](j, &a);
                    ow += np;
                }
            }
        }
        /* the border parts' columns of rows [col_r0, col_r1), pmax rows a
         * tile */
        for (size_t pi = 0; col_r0 < col_r1 && pi < nparts; pi++)
            for (size_t ow = parts[pi].ow0; col[pi] && ow < parts[pi].ow1; ow++) {
                size_t n = col_r1 - col_r0, ntiles = (n + pmax - 1) / pmax, base = n / ntiles,
                       wide = n % ntiles;
                a.iw = (ptrdiff_t)(ow * s->sw) - (ptrdiff_t)s->pl;
                for (size_t t = 0, oh = col_r0; t < ntiles; t++) {
                    size_t np = base + (t < wide);
                    a.ih = (ptrdiff_t)(oh * s->sh) - (ptrdiff_t)s->pt;
                    size_t off = (oh * j->ow + ow - j->y_px0) * NNF_NCHWC_B;
                    a.y = yb + off;
                    a.res = rb ? rb + off : NULL;
                    tiles[j->lanes == 1][4][Z - 1][np - 1](j, &a);
                    oh += np;
                }
            }
    }
}

/* The NCHW depthwise plane kernel's driver, shared by its AVX2 and AVX-512
 * forms (dwconv_avx2.c, dwconv_avx512.c): the ring of prepared input rows,
 * the strips and passes, and the epilogue's 8-lane store. The includer
 * defines DW_VL (8 or 16 outputs per vector) and DW_PASS (the name of its
 * pass, declared here and defined after the include), which sums R output
 * rows of a strip and stores them; wts is what the includer's entry point
 * gave dw_plane. It may define DW_PREP_S1, its own fill of a stride-1 row
 * (dw_prep_s1's contract). */
#ifndef NNF_KERNELS_X86_DWCONV_PLANE_H
#define NNF_KERNELS_X86_DWCONV_PLANE_H

#include "kernels/conv_fast.h"
#include "kernels/x86/ep_fast_avx2.h"

#include <string.h>

/* Output columns per strip: a strip's prepared rows (DW_ROWS of them) fit in
 * 17 KB of stack (27 KB for the 16-lane form's 8-row passes), so they stay
 * in L1 next to the input being streamed. */
#define DW_CW 128
/* Floats per prepared-row half: the strip rounded up to DW_VL, what the
 * taps read past it (k / 2 for stride 2, k - 1 for stride 1, both < 8 up to
 * 7x7; the AVX-512 pass reads a whole 16-float vector past it), and the
 * fill's last 8-wide store, which may start up to 7 floats late; a multiple
 * of 16, so both halves of a row start on a cache line. */
#define DW_HALF (DW_CW + 32)
#define DW_ROW (2 * DW_HALF)
/* Output rows per pass, and the input rows a pass reads: (R - 1) s + k.
 * Each output row is a chain of k*k dependent FMAs: 4 rows at 8 lanes
 * keep the AVX2 tier's loads in check, 8 at 16 lanes keep both FMA pipes
 * busy (4 chains of 4-cycle FMAs ran a 7x7 at 0.8 FMAs a cycle). */
#if DW_VL == 16
#define DW_R 8
#else
#define DW_R 4
#endif
#define DW_ROWS ((DW_R - 1) * 2 + 7)

static _Alignas(64) const float dw_zero_row[DW_ROW];

#ifndef DW_PREP_S1
#define DW_PREP_S1 dw_prep_s1
#endif

/* f(s, k, stride, ...) with the kernel size and stride as constants, so the
 * taps unroll: 3x3, 5x5 or 7x7 at stride 1 or 2 (nnf_dw_specialised). */
#define DW_SPECIALISE(f, s, ...)                                                                   \
    do {                                                                                           \
        if ((s)->kh == 3)                                                                          \
            (s)->sh == 1 ? f(s, 3, 1, __VA_ARGS__) : f(s, 3, 2, __VA_ARGS__);                      \
        else if ((s)->kh == 5)                                                                     \
            (s)->sh == 1 ? f(s, 5, 1, __VA_ARGS__) : f(s, 5, 2, __VA_ARGS__);                      \
        else                                                                                       \
            (s)->sh == 1 ? f(s, 7, 1, __VA_ARGS__) : f(s, 7, 2, __VA_ARGS__);                      \
    } while (0)

/* Eight input columns from c on (c >= 0), zeros past the row's end w. */
static inline __attribute__((always_inline)) __m256 dw_load_part(const float *xr, ptrdiff_t w,
                                                                 ptrdiff_t c) {
    if (c + 8 <= w)
        return _mm256_loadu_ps(xr + c);
    if (c < w)
        return _mm256_maskload_ps(xr + c, nnf_mask8((size_t)(w - c)));
    return _mm256_setzero_ps();
}

/* Stride 1: d[i] = xr[c0 + i] for i < n (rounded up to 8), zeros outside
 * the row [0, w): the left/right padding, no bounds checks in the taps. */
static inline __attribute__((always_inline)) void dw_prep_s1(const float *xr, ptrdiff_t w,
                                                             ptrdiff_t c0, size_t n, float *d) {
    size_t i = 0;
    for (; i < n && c0 + (ptrdiff_t)i < 0; i++)
        d[i] = 0.0f;
    for (; i < n; i += 8)
        _mm256_storeu_ps(d + i, dw_load_part(xr, w, c0 + (ptrdiff_t)i));
}

/* Stride 2: the padded row split once into its even (d) and odd (d +
 * DW_HALF) columns, d[i] = xr[c0 + 2i], d[DW_HALF + i] = xr[c0 + 2i + 1]
 * for i < n, so every tap of 8 stride-2 outputs is one contiguous load
 * instead of two loads and two shuffles per tap. */
static inline __attribute__((always_inline)) void dw_prep_s2(const float *xr, ptrdiff_t w,
                                                             ptrdiff_t c0, size_t n, float *d) {
    float *od = d + DW_HALF;
    size_t i = 0;
    for (; i < n && c0 + 2 * (ptrdiff_t)i < 0; i++) {
        ptrdiff_t c = c0 + 2 * (ptrdiff_t)i + 1;
        d[i] = 0.0f;
        od[i] = c >= 0 && c < w ? xr[c] : 0.0f;
    }
    for (; i < n; i += 8) {
        ptrdiff_t c = c0 + 2 * (ptrdiff_t)i;
        __m256 lo = dw_load_part(xr, w, c), hi = dw_load_part(xr, w, c + 8);
        /* lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6 -> lo0 lo2 lo4 lo6 hi0 hi2 hi4 hi6 */
        __m256 e = _mm256_shuffle_ps(lo, hi, 0x88), o = _mm256_shuffle_ps(lo, hi, 0xdd);
        _mm256_storeu_ps(d + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xd8)));
        _mm256_storeu_ps(od + i,
                         _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(o), 0xd8)));
    }
}

/* What a pass needs besides its rows: where its outputs go and the
 * epilogue. y and res are at output (oh0, o0) of the plane. */
typedef struct dw_pass {
    float *y;
    const float *res;
    size_t ldy, o0, cw;
    const nnf_tile_ep *t;
    nnf_ep_fast f;
    __m256 bias;
} dw_pass;

static inline __attribute__((always_inline)) void dw_store(const dw_pass *p, size_t r, size_t o,
                                                           __m256 v) {
    size_t left = p->cw - o;
    int full = left >= 8;
    __m256i m = nnf_mask8(full ? 8 : left);
    float *y = p->y + r * p->ldy + o;
    if (p->f.clamp_only) {
        v = nnf_ep_fast8(&p->f, v, p->bias, p->res ? p->res + r * p->ldy + o : NULL, full, m);
    } else {
        nnf_tile_ep t = *p->t;
        t.residual = p->res ? p->res + r * p->ldy - p->o0 : NULL;
        v = nnf_ep8(v, &t, 0, p->o0 + o, full, m);
    }
    if (full)
        _mm256_storeu_ps(y, v);
    else
        _mm256_maskstore_ps(y, m, v);
}

static inline __attribute__((always_inline)) void
DW_PASS(const float *const *rp, const void *wts, size_t k, size_t st, size_t R, const dw_pass *p);

/* One channel plane: column strips of up to DW_CW outputs; per strip, passes
 * of DW_R output rows. The input rows a pass reads are prepared once each
 * into a ring of DW_ROWS rows (zero-padded; split into even/odd columns for
 * stride 2) and shared by the next pass's overlap, so the borders cost no
 * padded copy of the plane and no per-output bounds checks. Rows in the
 * vertical padding point at a zero row. */
static inline __attribute__((always_inline)) void dw_plane(const nnf_conv2d_shape *s,
                                                           const size_t k, const size_t st,
                                                           const float *x, const void *wts,
                                                           float *y, const nnf_tile_ep *t) {
    _Alignas(64) float ring[DW_ROWS * DW_ROW];
    const size_t nring = (DW_R - 1) * st + k;
    dw_pass p = {.ldy = s->ow, .t = t, .f = nnf_ep_fast_init(t->ep)};
    p.bias = t->bias ? _mm256_set1_ps(t->bias[0]) : _mm256_setzero_ps();
    for (size_t o0 = 0; o0 < s->ow; o0 += DW_CW) {
        size_t cw = s->ow - o0 < DW_CW ? s->ow - o0 : DW_CW;
        size_t cwv = (cw + DW_VL - 1) / DW_VL * DW_VL;
        /* prepared columns: stride 1 reads cwv + k - 1, stride 2 reads
         * cwv + k / 2 per half (rounded up to 8 by the fill); the AVX-512
         * pass loads cwv + 16, aligned, and shifts the taps out of them */
        size_t n = DW_VL == 16 ? cwv + 16 : st == 1 ? cwv + k - 1 : cwv + k / 2;
        ptrdiff_t c0 = (ptrdiff_t)(o0 * st) - (ptrdiff_t)s->pl;
        size_t next = 0; /* padded rows below this are in the ring */
        p.o0 = o0;
        p.cw = cw;
        for (size_t oh0 = 0; oh0 < s->oh; oh0 += DW_R) {
            size_t R = s->oh - oh0 < DW_R ? s->oh - oh0 : DW_R, rows = (R - 1) * st + k;
            const float *rp[DW_ROWS];
            for (size_t i = 0; i < rows; i++) {
                size_t pr = oh0 * st + i;
                ptrdiff_t ih = (ptrdiff_t)pr - (ptrdiff_t)s->pt;
                if (ih < 0 || ih >= (ptrdiff_t)s->h) {
                    rp[i] = dw_zero_row;
                    continue;
                }
                float *d = ring + (pr % nring) * DW_ROW;
                if (pr >= next) {
                    const float *xr = x + (size_t)ih * s->w;
                    if (st == 1)
                        DW_PREP_S1(xr, (ptrdiff_t)s->w, c0, n, d);
                    else
                        dw_prep_s2(xr, (ptrdiff_t)s->w, c0, n, d);
                }
                rp[i] = d;
            }
            next = oh0 * st + rows;
            p.y = y + oh0 * s->ow + o0;
            p.res = t->residual ? t->residual + oh0 * s->ow + o0 : NULL;
            switch (R) {
#if DW_R == 8
            case 8: DW_PASS(rp, wts, k, st, 8, &p); break;
            case 7: DW_PASS(rp, wts, k, st, 7, &p); break;
            case 6: DW_PASS(rp, wts, k, st, 6, &p); break;
            case 5: DW_PASS(rp, wts, k, st, 5, &p); break;
#endif
            case 4: DW_PASS(rp, wts, k, st, 4, &p); break;
            case 3: DW_PASS(rp, wts, k, st, 3, &p); break;
            case 2: DW_PASS(rp, wts, k, st, 2, &p); break;
            default: DW_PASS(rp, wts, k, st, 1, &p); break;
            }
        }
    }
}

#endif

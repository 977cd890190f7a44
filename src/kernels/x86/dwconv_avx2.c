/* Depthwise on NCHW planes (AVX2):
 *
 *   nnf_dw_plane_avx2  3x3/5x5/7x7, stride 1/2: one channel plane, vectorised
 *                      along the output row, several output rows per pass
 *                      (see dw_plane);
 *   nnf_dw_c8_avx2     the same shapes, up to 8 planes at once, vectorised
 *                      across channels (narrow planes, see dw_c8);
 *   nnf_dw_any_avx2    any window, one plane a row at a time.
 *
 * Both apply the epilogue in registers. Used for the AVX-512 tier as well
 * (the 3x3s are load-bound, not FMA-bound), except where the plane kernel's
 * 16-lane form wins (dwconv_avx512.c, nnf_dw_select). */
#include "base/alloc.h"
#include "kernels/conv_fast.h"
#include "kernels/x86/ep_fast_avx2.h"
#include "kernels/x86/transpose_avx2.h"

#include <math.h>
#include <string.h>

/* ---- plane kernel (its driver: dwconv_plane.h) ------------------------------ */

#define DW_VL 8
#define DW_PASS dw_pass_rows8
#include "kernels/x86/dwconv_plane.h"

/* R output rows of the strip from the (R - 1) s + k prepared rows rp, 8
 * columns at a time: each input vector is loaded once and feeds every
 * output row whose window holds its row (up to k / s of them), so the
 * loads per output fall from k*k to about k*k/R * (1 + (k - s)/(R s)).
 * Each output row's sum is formed in the same order (row i, then tap j). */
static inline __attribute__((always_inline)) void dw_pass_rows8(const float *const *rp,
                                                                const void *wts, const size_t k,
                                                                const size_t st, const size_t R,
                                                                const dw_pass *p) {
    const __m256 *wv = wts;
    const size_t rows = (R - 1) * st + k;
    for (size_t o = 0; o < p->cw; o += 8) {
        __m256 acc[DW_R];
#pragma GCC unroll 4
        for (size_t r = 0; r < R; r++)
            acc[r] = _mm256_setzero_ps();
#pragma GCC unroll 13
        for (size_t ir = 0; ir < rows; ir++)
#pragma GCC unroll 7
            for (size_t j = 0; j < k; j++) {
                const float *q = st == 1 ? rp[ir] + o + j : rp[ir] + (j & 1) * DW_HALF + o + j / 2;
                __m256 v = _mm256_loadu_ps(q);
#pragma GCC unroll 4
                for (size_t r = 0; r < R; r++)
                    if (ir >= r * st && ir - r * st < k)
                        acc[r] = _mm256_fmadd_ps(wv[(ir - r * st) * k + j], v, acc[r]);
            }
#pragma GCC unroll 4
        for (size_t r = 0; r < R; r++)
            dw_store(p, r, o, acc[r]);
    }
}

/* The weights broadcast once per plane (past the registers they spill: each
 * is an FMA's memory operand). */
static inline __attribute__((always_inline)) void dw_plane8(const nnf_conv2d_shape *s,
                                                            const size_t k, const size_t st,
                                                            const float *x, const float *w,
                                                            float *y, const nnf_tile_ep *t) {
    __m256 wv[49];
#pragma GCC unroll 49
    for (size_t i = 0; i < k * k; i++)
        wv[i] = _mm256_broadcast_ss(w + i);
    dw_plane(s, k, st, x, wv, y, t);
}

void nnf_dw_plane_avx2(const nnf_conv2d_shape *s, const float *x, const float *w, float *y,
                       const nnf_tile_ep *t) {
    DW_SPECIALISE(dw_plane8, s, x, w, y, t);
}

/* ---- any window ------------------------------------------------------------- */

/* One kernel row's taps at stride 1 over a whole output row: yr[o] (+)=
 * sum_j wr[j] xp[o + j dw], xp a zero-padded input row readable up to
 * ow rounded up to 8, plus the window's span. Four vectors side by side
 * (one FMA's latency would otherwise bound a long row of taps); the last
 * part vector masked. */
static void dw_any_row_s1(const float *xp, const float *wr, size_t kw, size_t dw, size_t ow,
                          float *yr, bool first) {
    size_t o = 0;
    for (; o + 32 <= ow; o += 32) {
        const float *xo = xp + o;
        float *yp = yr + o;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        if (!first) {
            a0 = _mm256_loadu_ps(yp);
            a1 = _mm256_loadu_ps(yp + 8);
            a2 = _mm256_loadu_ps(yp + 16);
            a3 = _mm256_loadu_ps(yp + 24);
        }
        for (size_t j = 0; j < kw; j++, xo += dw) {
            __m256 wj = _mm256_broadcast_ss(wr + j);
            a0 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(xo), a0);
            a1 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(xo + 8), a1);
            a2 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(xo + 16), a2);
            a3 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(xo + 24), a3);
        }
        _mm256_storeu_ps(yp, a0);
        _mm256_storeu_ps(yp + 8, a1);
        _mm256_storeu_ps(yp + 16, a2);
        _mm256_storeu_ps(yp + 24, a3);
    }
    for (; o < ow; o += 8) {
        __m256i m = nnf_mask8(ow - o < 8 ? ow - o : 8);
        const float *xo = xp + o;
        __m256 acc = first ? _mm256_setzero_ps() : _mm256_maskload_ps(yr + o, m);
        for (size_t j = 0; j < kw; j++, xo += dw)
            acc = _mm256_fmadd_ps(_mm256_broadcast_ss(wr + j), _mm256_loadu_ps(xo), acc);
        _mm256_maskstore_ps(yr + o, m, acc);
    }
}

/* Any kernel, stride, dilation and padding, one plane: each output row is
 * summed into y a kernel row at a time (row i, then tap j, as the other
 * kernels), then the epilogue over the row. At stride 1 each input row is
 * copied between zeros into per-thread scratch, so every output is a
 * vector lane; otherwise the outputs whose taps all fall inside the row go
 * without bounds checks. A 1-D conv is one row. */
void nnf_dw_any_avx2(const nnf_conv2d_shape *s, const float *x, const float *w, float *y,
                     const nnf_tile_ep *t) {
    const size_t kh = s->kh, kw = s->kw, ow = s->ow, sw = s->sw, dw = s->dw;
    const ptrdiff_t W = (ptrdiff_t)s->w, pl = (ptrdiff_t)s->pl;
    const ptrdiff_t span = (ptrdiff_t)((kw - 1) * dw);
    /* outputs [lo, hi) have every tap inside: o sw >= pl, o sw - pl + span < W */
    size_t lo = (size_t)((pl + (ptrdiff_t)sw - 1) / (ptrdiff_t)sw), hi = 0;
    if (W - 1 - span + pl >= 0)
        hi = (size_t)((W - 1 - span + pl) / (ptrdiff_t)sw) + 1;
    hi = hi < ow ? hi : ow;
    lo = lo < hi ? lo : hi;
    /* the padded row: output o's taps read pad[o + j dw], pad[q] = x[q - pl] */
    size_t padn = (ow + 7) / 8 * 8 + (size_t)span;
    float *pad = sw == 1 ? nnf_thread_scratch(NNF_SCRATCH_CONV_IN, padn) : NULL;
    for (size_t oh = 0; oh < s->oh; oh++) {
        float *yr = y + oh * ow;
        bool first = true;
        for (size_t i = 0; i < kh; i++) {
            ptrdiff_t ih = (ptrdiff_t)(oh * s->sh + i * s->dh) - (ptrdiff_t)s->pt;
            if (ih < 0 || ih >= (ptrdiff_t)s->h)
                continue;
            const float *xr = x + (size_t)ih * s->w, *wr = w + i * kw;
            if (pad) {
                /* pad[q] for q in [0, padn): zeros, the row's [q0, q1), zeros */
                ptrdiff_t q0 = pl < (ptrdiff_t)padn ? pl : (ptrdiff_t)padn;
                ptrdiff_t q1 = pl + W < (ptrdiff_t)padn ? pl + W : (ptrdiff_t)padn;
                memset(pad, 0, (size_t)q0 * sizeof *pad);
                if (q1 > q0)
                    memcpy(pad + q0, xr, (size_t)(q1 - q0) * sizeof *pad);
                else
                    q1 = q0;
                memset(pad + q1, 0, (padn - (size_t)q1) * sizeof *pad);
                dw_any_row_s1(pad, wr, kw, dw, ow, yr, first);
                first = false;
                continue;
            }
            for (size_t o = 0; o < ow; o++) {
                ptrdiff_t iw0 = (ptrdiff_t)(o * sw) - pl;
                float acc = first ? 0.0f : yr[o];
                if (o >= lo && o < hi) {
                    for (size_t j = 0; j < kw; j++)
                        acc = fmaf(wr[j], xr[iw0 + (ptrdiff_t)(j * dw)], acc);
                } else {
                    for (size_t j = 0; j < kw; j++) {
                        ptrdiff_t iw = iw0 + (ptrdiff_t)(j * dw);
                        if (iw >= 0 && iw < W)
                            acc = fmaf(wr[j], xr[iw], acc);
                    }
                }
                yr[o] = acc;
            }
            first = false;
        }
        if (first)
            memset(yr, 0, ow * sizeof *yr);
        nnf_tile_ep tr = *t;
        if (tr.residual)
            tr.residual += oh * ow;
        size_t o = 0;
        for (; o + 8 <= ow; o += 8)
            _mm256_storeu_ps(
                yr + o, nnf_ep8(_mm256_loadu_ps(yr + o), &tr, 0, o, 1, _mm256_setzero_si256()));
        if (o < ow) {
            __m256i m = nnf_mask8(ow - o);
            _mm256_maskstore_ps(yr + o, m, nnf_ep8(_mm256_maskload_ps(yr + o, m), &tr, 0, o, 0, m));
        }
    }
}

/* ---- channel-interleaved kernel ------------------------------------------- */

/* Loads padded row pr of the tile into the interleaved [wp][8] row d:
 * columns of the nc planes transposed 8 at a time, zeros for padding. */
static inline __attribute__((always_inline)) void
dw_c8_load_row(const nnf_conv2d_shape *s, const float *x, size_t nc, size_t pr, size_t wp,
               size_t cols, float *d) {
    ptrdiff_t ih = (ptrdiff_t)pr - (ptrdiff_t)s->pt;
    if (ih < 0 || (size_t)ih >= s->h) {
        memset(d, 0, wp * 8 * sizeof(float));
        return;
    }
    const size_t hw = s->h * s->w;
    const float *xr = x + (size_t)ih * s->w;
    const __m256 z = _mm256_setzero_ps();
    for (size_t c = 0; c < s->pl; c++)
        _mm256_store_ps(d + c * 8, z);
    for (size_t c = s->pl + cols; c < wp; c++)
        _mm256_store_ps(d + c * 8, z);
    float *dc = d + s->pl * 8;
    for (size_t iw = 0; iw < cols; iw += 8) {
        size_t n = cols - iw < 8 ? cols - iw : 8;
        __m256i m = nnf_mask8(n);
        __m256 r[8];
        if (n == 8 && nc == 8) {
            for (int c = 0; c < 8; c++)
                r[c] = _mm256_loadu_ps(xr + c * hw + iw);
        } else {
            for (int c = 0; c < 8; c++)
                r[c] = (size_t)c < nc ? _mm256_maskload_ps(xr + c * hw + iw, m) : z;
        }
        nnf_tr8_regs_avx2(r);
        /* a short group stores all 8 columns: those past the input are the
         * masked zeros, i.e. right padding, or land in the next row (loaded
         * after this one) or the buffer's slack */
        for (int j = 0; j < 8; j++)
            _mm256_store_ps(dc + (iw + (size_t)j) * 8, r[j]);
    }
}

/* Transposes the n (<= 8) interleaved outputs in ob (row i = output i,
 * lane = channel) into channel vectors and stores channel c's outputs
 * o0 .. o0 + n - 1 at y + c * ohw with the epilogue, c < nc. */
static inline __attribute__((always_inline)) void
dw_c8_flush(const float *ob, size_t n, float *y, size_t ohw, size_t o0, size_t nc, size_t c0,
            const nnf_epilogue *ep, const nnf_ep_fast *f, const float *res) {
    __m256 r[8];
    for (int i = 0; i < 8; i++)
        r[i] = _mm256_load_ps(ob + i * 8);
    nnf_tr8_regs_avx2(r);
    __m256i m = nnf_mask8(n);
    int full = n == 8;
    if (full && nc == 8 && f->clamp_only) {
        for (int c = 0; c < 8; c++) {
            __m256 b = f->bias ? _mm256_set1_ps(ep->bias[c0 + c]) : _mm256_setzero_ps();
            _mm256_storeu_ps(y + c * ohw + o0,
                             nnf_ep_fast8(f, r[c], b, res ? res + c * ohw + o0 : NULL, 1, m));
        }
        return;
    }
    for (size_t c = 0; c < nc; c++) {
        __m256 v;
        if (f->clamp_only) {
            __m256 b = f->bias ? _mm256_set1_ps(ep->bias[c0 + c]) : _mm256_setzero_ps();
            v = nnf_ep_fast8(f, r[c], b, res ? res + c * ohw + o0 : NULL, full, m);
        } else {
            nnf_tile_ep t = {.ep = ep,
                             .bias = ep->bias ? ep->bias + c0 + c : NULL,
                             .residual = res ? res + c * ohw : NULL};
            v = nnf_ep8(r[c], &t, 0, o0, full, m);
        }
        if (full)
            _mm256_storeu_ps(y + c * ohw + o0, v);
        else
            _mm256_maskstore_ps(y + c * ohw + o0, m, v);
    }
}

/* Depthwise vectorised across 8 channels instead of along the row: short
 * rows would waste the row kernel's 16 lanes and pay its per-row setup, and
 * at 14-56 wide the row kernel's unaligned overlapping loads run at a few
 * GB/s. The nc (<= 8) planes are interleaved, a tile of padded rows at a
 * time, into a [rows][wp][8] stack buffer through 8 x 8 transposes; each
 * output is k*k FMAs on whole vectors; 8 outputs at a time are transposed
 * back to their planes with the epilogue. Tiles overlap by k - s rows, so
 * the buffer stays in L1 for any height. */
static inline __attribute__((always_inline)) void
dw_c8(const nnf_conv2d_shape *s, const size_t k, const size_t st, const float *w, const float *x,
      float *y, size_t c0, size_t nc, const nnf_epilogue *ep, const float *res) {
    const size_t wp = (s->ow - 1) * st + k, ohw = s->oh * s->ow;
    /* input columns past the last window (stride 2) are never read */
    const size_t cols = s->w < wp - s->pl ? s->w : wp - s->pl;
    const size_t tile = (NNF_DW_C8_MAX / wp - k) / st + 1;
    _Alignas(32) float buf[(NNF_DW_C8_MAX + 8) * 8];
    _Alignas(32) float tmp[8], ob[64];
    __m256 wv[49];
#pragma GCC unroll 49
    for (size_t t = 0; t < k * k; t++) {
        for (size_t c = 0; c < 8; c++)
            tmp[c] = c < nc ? w[(c0 + c) * k * k + t] : 0.0f;
        wv[t] = _mm256_load_ps(tmp);
    }
    nnf_ep_fast f = nnf_ep_fast_init(ep);
    if (ep->bias_kind != NNF_BIAS_NONE && ep->bias_kind != NNF_BIAS_PER_ROW)
        f.clamp_only = 0;
    size_t nb = 0, o = 0;
    for (size_t oh0 = 0; oh0 < s->oh; oh0 += tile) {
        size_t th = s->oh - oh0 < tile ? s->oh - oh0 : tile;
        size_t rows = (th - 1) * st + k;
        for (size_t r = 0; r < rows; r++)
            dw_c8_load_row(s, x, nc, oh0 * st + r, wp, cols, buf + r * wp * 8);
        for (size_t oh = 0; oh < th; oh++) {
            size_t ow = 0;
            /* two outputs at a time share k - s of each row's loads; each
             * output's sum is formed in the same order as below */
            for (; ow + 1 < s->ow; ow += 2) {
                const float *p = buf + (oh * st * wp + ow * st) * 8;
                __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
                __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps();
#pragma GCC unroll 7
                for (size_t i = 0; i < k; i++)
#pragma GCC unroll 9
                    for (size_t j = 0; j < k + st; j++) {
                        __m256 v = _mm256_load_ps(p + (i * wp + j) * 8);
                        if (j < k) {
                            if (j & 1)
                                a1 = _mm256_fmadd_ps(wv[i * k + j], v, a1);
                            else
                                a0 = _mm256_fmadd_ps(wv[i * k + j], v, a0);
                        }
                        if (j >= st) {
                            if ((j - st) & 1)
                                b1 = _mm256_fmadd_ps(wv[i * k + j - st], v, b1);
                            else
                                b0 = _mm256_fmadd_ps(wv[i * k + j - st], v, b0);
                        }
                    }
                _mm256_store_ps(ob + nb * 8, _mm256_add_ps(a0, a1));
                if (++nb == 8) {
                    dw_c8_flush(ob, nb, y, ohw, o + 1 - nb, nc, c0, ep, &f, res);
                    nb = 0;
                }
                o++;
                _mm256_store_ps(ob + nb * 8, _mm256_add_ps(b0, b1));
                if (++nb == 8 || o + 1 == ohw) {
                    dw_c8_flush(ob, nb, y, ohw, o + 1 - nb, nc, c0, ep, &f, res);
                    nb = 0;
                }
                o++;
            }
            for (; ow < s->ow; ow++, o++) {
                const float *p = buf + (oh * st * wp + ow * st) * 8;
                __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
                /* unrolled so the taps' weights stay in registers */
#pragma GCC unroll 7
                for (size_t i = 0; i < k; i++)
#pragma GCC unroll 7
                    for (size_t j = 0; j < k; j++) {
                        __m256 v = _mm256_load_ps(p + (i * wp + j) * 8);
                        if (j & 1)
                            a1 = _mm256_fmadd_ps(wv[i * k + j], v, a1);
                        else
                            a0 = _mm256_fmadd_ps(wv[i * k + j], v, a0);
                    }
                _mm256_store_ps(ob + nb * 8, _mm256_add_ps(a0, a1));
                if (++nb == 8 || o + 1 == ohw) {
                    dw_c8_flush(ob, nb, y, ohw, o + 1 - nb, nc, c0, ep, &f, res);
                    nb = 0;
                }
            }
        }
    }
}

void nnf_dw_c8_avx2(const nnf_conv2d_shape *s, const float *w, const float *x, float *y, size_t c0,
                    size_t nc, const nnf_epilogue *ep, const float *res) {
    DW_SPECIALISE(dw_c8, s, w, x, y, c0, nc, ep, res);
}

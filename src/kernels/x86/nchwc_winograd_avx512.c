/* The AVX-512 transforms of the blocked Winograd's stride-1 forms
 * (nchwc_winograd.c): F(4x4,3x3), x86/nchwc_winograd_avx2.c's on two channel
 * blocks per zmm, and F(2x2,3x3) (nchwc.h), the same code with 2x2 tiles
 * from 4x4 patches. V and M hold a tile's channels contiguously
 * ([xi][tile][c8]), so a zmm of V or M is two blocks' 16 channels in one load
 * or store; the input and output keep their NCHWc8 planes, so each pixel's
 * zmm is two 8-float halves from two planes. For F(4x4,3x3) the operations
 * per lane are the AVX2 ones in the same order (and exp16 is exp8 bit for
 * bit), so the outputs are the same bits. On Intel's two 512-bit ports the
 * 8-wide transforms were 6.7 % of a YOLOv5s run. An odd last block runs with
 * its upper half zero. The load-time weight transforms of every form
 * (NNF_WINO_WEIGHTS) are here too, 8 doubles a zmm. */
#include "kernels/nchwc.h"
#include "kernels/x86/nchwc_pair_avx512.h"
#include "kernels/x86/vmath_avx512.h"
#include "kernels/x86/winograd_avx2.h"

#include <string.h>

NNF_WINO_1D(_16, __m512, _mm512_add_ps, _mm512_sub_ps, _mm512_mul_ps, _mm512_fmadd_ps,
            _mm512_fmsub_ps, _mm512_set1_ps)

NNF_WINO_WEIGHTS(_avx512, __m512d, 8, _mm256_load_ps, _mm256_store_ps, _mm512_cvtps_pd,
                 _mm512_cvtpd_ps, _mm512_add_pd, _mm512_sub_pd, _mm512_mul_pd, _mm512_set1_pd)

/* The 1-D transforms of the form with output tiles of T (4 or 2): B^T on
 * T + 2 vectors, A^T down to T. */
static inline __attribute__((always_inline)) void bt_form(int T, const __m512 *d, __m512 *o) {
    if (T == 4)
        nnf_wino_bt6_16(d, o);
    else
        nnf_wino_bt4_16(d, o);
}

static inline __attribute__((always_inline)) void at_form(int T, const __m512 *m, __m512 *o) {
    if (T == 4)
        nnf_wino_at4_16(m, o);
    else
        nnf_wino_at2_16(m, o);
}

/* One tile's patch of two blocks (the second when BOTH) through B^T d B
 * into its A x A matrices at vt, vstride apart; INSIDE: every pixel of the
 * patch inside the input (no tests). Loops of constant trips, unrolled:
 * with A a loop bound GCC kept them loops, each pixel a test and the patch
 * on the stack. */
static inline __attribute__((always_inline)) void
input_unit(const int T, const int BOTH, const int INSIDE, const float *xc, size_t row, size_t plane,
           ptrdiff_t ih0, ptrdiff_t iw0, ptrdiff_t H, ptrdiff_t W, float *vt, size_t vstride) {
    const int A = T + 2;
    __m512 e[6][6];
    /* down the columns, then along the rows: xi = a * A + b */
#pragma GCC unroll 6
    for (int c = 0; c < A; c++) {
        __m512 col[6], o[6];
#pragma GCC unroll 6
        for (int r = 0; r < A; r++)
            col[r] = nnf_load_pixel_pair(BOTH, INSIDE, xc, row, plane, ih0 + r, iw0 + c, H, W);
        bt_form(T, col, o);
#pragma GCC unroll 6
        for (int a = 0; a < A; a++)
            e[a][c] = o[a];
    }
#pragma GCC unroll 6
    for (int a = 0; a < A; a++) {
        __m512 o[6];
        bt_form(T, e[a], o);
#pragma GCC unroll 6
        for (int b = 0; b < A; b++)
            nnf_store_v_pair(BOTH, vt + (size_t)(a * A + b) * vstride, o[b]);
    }
}

static inline __attribute__((always_inline)) void input_form(int T, const nnf_nchwc_wino *k,
                                                             const float *x, size_t t0, size_t nt,
                                                             float *v, size_t vstride) {
    const int A = T + 2; /* the input patch's edge */
    const nnf_conv2d_shape *s = &k->s;
    const size_t tw = (s->ow + (size_t)T - 1) / (size_t)T, row = s->w * NNF_NCHWC_B,
                 plane = s->h * row, cb_n = k->c8 / NNF_NCHWC_B;
    const ptrdiff_t H = (ptrdiff_t)s->h, W = (ptrdiff_t)s->w;
    for (size_t t = 0; t < nt; t++) {
        size_t ty = (t0 + t) / tw, tx = (t0 + t) % tw;
        ptrdiff_t ih0 = (ptrdiff_t)(ty * (size_t)T) - (ptrdiff_t)s->pt,
                  iw0 = (ptrdiff_t)(tx * (size_t)T) - (ptrdiff_t)s->pl;
        int inside = ih0 >= 0 && iw0 >= 0 && ih0 + A <= H && iw0 + A <= W;
        for (size_t cb = 0; cb < cb_n; cb += 2) {
            const float *xc = x + cb * plane;
            int both = cb + 1 < cb_n;
            /* the next tile's new columns in both planes (see the AVX2 one) */
            if (iw0 + A < W)
                for (int r = 0; r < A; r++) {
                    ptrdiff_t ih = ih0 + r;
                    if (ih >= 0 && ih < H) {
                        const float *p = xc + (size_t)ih * row + (size_t)(iw0 + A) * NNF_NCHWC_B;
                        _mm_prefetch((const char *)p, _MM_HINT_T0);
                        _mm_prefetch((const char *)(p + 2 * NNF_NCHWC_B), _MM_HINT_T0);
                        if (both) {
                            _mm_prefetch((const char *)(p + plane), _MM_HINT_T0);
                            _mm_prefetch((const char *)(p + plane + 2 * NNF_NCHWC_B), _MM_HINT_T0);
                        }
                    }
                }
            float *vt = v + t * k->c8 + cb * NNF_NCHWC_B;
            if (inside && both)
                input_unit(T, 1, 1, xc, row, plane, ih0, iw0, H, W, vt, vstride);
            else if (both)
                input_unit(T, 1, 0, xc, row, plane, ih0, iw0, H, W, vt, vstride);
            else if (inside)
                input_unit(T, 0, 1, xc, row, plane, ih0, iw0, H, W, vt, vstride);
            else
                input_unit(T, 0, 0, xc, row, plane, ih0, iw0, H, W, vt, vstride);
        }
    }
}

void nnf_nchwc_wino_input_avx512(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt,
                                 float *v, size_t vstride) {
    input_form(4, k, x, t0, nt, v, vstride);
}

void nnf_nchwc_winof2_input_avx512(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt,
                                   float *v, size_t vstride) {
    input_form(2, k, x, t0, nt, v, vstride);
}

/* A^T along one row of a tile (u: its A values), the epilogue, nx pixels
 * stored at yr (residual at rr). */
static inline __attribute__((always_inline)) void
output_row(const int T, size_t nx, const int BOTH, const __m512 *u, float *yr, const float *rr,
           size_t plane, const nnf_epilogue *e, const nnf_activation *act, __m512 bias,
           __mmask16 keep) {
    __m512 o[4];
    at_form(T, u, o);
    for (size_t q = 0; q < nx; q++) {
        size_t off = q * NNF_NCHWC_B;
        __m512 r = rr ? nnf_load_pair(rr + off, plane, BOTH) : _mm512_setzero_ps();
        __m512 val = nnf_ep16_apply_act(o[q], e, act, 1, bias, rr != NULL, r);
        nnf_store_pair(yr + off, plane, BOTH, _mm512_maskz_mov_ps(keep, val));
    }
}

/* One tile of two output blocks (the second when BOTH) from its A x A
 * matrices at mt, mstride apart: A^T m A, the epilogue, ny x nx pixels
 * stored at yt (FULL: T x T, constant trips, unrolled like input_unit). */
static inline __attribute__((always_inline)) void
output_unit(const int T, const int FULL, const int BOTH, const float *mt, size_t mstride, float *yt,
            const float *rt, size_t row, size_t plane, size_t ny, size_t nx, const nnf_epilogue *e,
            const nnf_activation *act, __m512 bias, __mmask16 keep) {
    const int A = T + 2;
    /* down the columns, then along the rows */
    __m512 u[4][6];
#pragma GCC unroll 6
    for (int b = 0; b < A; b++) {
        __m512 col[6], o[4];
#pragma GCC unroll 6
        for (int a = 0; a < A; a++) {
            const float *p = mt + (size_t)(a * A + b) * mstride;
            col[a] = BOTH ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(0x00ff, p);
        }
        at_form(T, col, o);
#pragma GCC unroll 4
        for (int i = 0; i < T; i++)
            u[i][b] = o[i];
    }
    /* the next tile's output and residual rows (see the AVX2 one) */
    for (size_t i = 0; i < (FULL ? (size_t)T : ny); i++)
        for (int h = 0; h < 1 + BOTH; h++) {
            size_t o = (size_t)h * plane + i * row;
            if (rt) {
                _mm_prefetch((const char *)(rt + o + (size_t)T * NNF_NCHWC_B), _MM_HINT_T0);
                _mm_prefetch((const char *)(rt + o + (size_t)A * NNF_NCHWC_B), _MM_HINT_T0);
            }
            __builtin_prefetch(yt + o + (size_t)T * NNF_NCHWC_B, 1, 3);
            __builtin_prefetch(yt + o + (size_t)A * NNF_NCHWC_B, 1, 3);
        }
    if (FULL) {
#pragma GCC unroll 4
        for (int i = 0; i < T; i++)
            output_row(T, T, BOTH, u[i], yt + (size_t)i * row, rt ? rt + (size_t)i * row : NULL,
                       plane, e, act, bias, keep);
    } else {
        for (size_t i = 0; i < ny; i++)
            output_row(T, nx, BOTH, u[i], yt + i * row, rt ? rt + i * row : NULL, plane, e, act,
                       bias, keep);
    }
}

/* One activation kind known at compile time (nnf_act16's switch folds). */
static inline __attribute__((always_inline)) void
output_act(int T, nnf_act_kind kind, const nnf_nchwc_wino *k, const float *m, size_t mstride,
           size_t t0, size_t nt, float *y, const float *res, const nnf_epilogue *e) {
    const nnf_conv2d_shape *s = &k->s;
    const size_t tw = (s->ow + (size_t)T - 1) / (size_t)T, row = s->ow * NNF_NCHWC_B,
                 plane = s->oh * row, ob_n = k->oc8 / NNF_NCHWC_B;
    nnf_activation act = e->act;
    act.kind = kind;
    for (size_t t = 0; t < nt; t++) {
        size_t ty = (t0 + t) / tw, tx = (t0 + t) % tw, oy0 = ty * (size_t)T, ox0 = tx * (size_t)T;
        size_t ny = s->oh - oy0 < (size_t)T ? s->oh - oy0 : (size_t)T,
               nx = s->ow - ox0 < (size_t)T ? s->ow - ox0 : (size_t)T;
        int full = ny == (size_t)T && nx == (size_t)T;
        for (size_t ob = 0; ob < ob_n; ob += 2) {
            const float *mt = m + t * k->oc8 + ob * NNF_NCHWC_B;
            int both = ob + 1 < ob_n;
            __mmask16 keep = nnf_pair_keep(s->oc, ob, ob_n);
            __m512 bias = _mm512_setzero_ps();
            if (e->bias)
                bias = _mm512_maskz_loadu_ps(keep, e->bias + ob * NNF_NCHWC_B);
            size_t off0 = ob * plane + oy0 * row + ox0 * NNF_NCHWC_B;
            float *yt = y + off0;
            const float *rt = res ? res + off0 : NULL;
            if (full && both)
                output_unit(T, 1, 1, mt, mstride, yt, rt, row, plane, ny, nx, e, &act, bias, keep);
            else if (both)
                output_unit(T, 0, 1, mt, mstride, yt, rt, row, plane, ny, nx, e, &act, bias, keep);
            else
                output_unit(T, 0, 0, mt, mstride, yt, rt, row, plane, ny, nx, e, &act, bias, keep);
        }
    }
}

static inline __attribute__((always_inline)) void
output_form(int T, const nnf_nchwc_wino *k, const float *m, size_t mstride, size_t t0, size_t nt,
            float *y, const float *res, const nnf_epilogue *ep) {
    switch (ep->act.kind) {
#define K(kind)                                                                                    \
    case kind: output_act(T, kind, k, m, mstride, t0, nt, y, res, ep); return;
        NNF_ACT_KINDS(K)
#undef K
    }
    output_act(T, NNF_ACT_NONE, k, m, mstride, t0, nt, y, res, ep);
}

void nnf_nchwc_wino_output_avx512(const nnf_nchwc_wino *k, const float *m, size_t mstride,
                                  size_t t0, size_t nt, float *y, const float *res,
                                  const nnf_epilogue *ep) {
    output_form(4, k, m, mstride, t0, nt, y, res, ep);
}

void nnf_nchwc_winof2_output_avx512(const nnf_nchwc_wino *k, const float *m, size_t mstride,
                                    size_t t0, size_t nt, float *y, const float *res,
                                    const nnf_epilogue *ep) {
    output_form(2, k, m, mstride, t0, nt, y, res, ep);
}

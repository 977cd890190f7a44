/* The AVX2 transforms of the blocked Winograd's stride-1 forms
 * (nchwc_winograd.c): F(4x4,3x3), and F(2x2,3x3) (nchwc.h), the same code
 * with 2x2 tiles from 4x4 patches.
 *
 * Every vector is one pixel's 8 channels, so B^T d B and A^T m A are plain
 * lane-wise arithmetic on (T + 2)^2 vectors: no transposes (the NCHW kernel,
 * x86/winograd_avx2.c, transposes 4x4 blocks to put tiles into lanes). The
 * 1-D transforms are the NCHW kernel's (x86/winograd_avx2.h). */
#include "kernels/nchwc.h"
#include "kernels/x86/vmath_avx2.h"
#include "kernels/x86/winograd_avx2.h"

#include <string.h>

/* The 1-D transforms of the form with output tiles of T (4 or 2): B^T on
 * T + 2 vectors, A^T down to T. */
static inline __attribute__((always_inline)) void bt_form(int T, const __m256 *d, __m256 *o) {
    if (T == 4)
        nnf_wino_bt6(d, o);
    else
        nnf_wino_bt4(d, o);
}

static inline __attribute__((always_inline)) void at_form(int T, const __m256 *m, __m256 *o) {
    if (T == 4)
        nnf_wino_at4(m, o);
    else
        nnf_wino_at2(m, o);
}

/* One tile's (T + 2)^2 patch of one block through B^T d B into its
 * matrices at vt, vstride apart; INSIDE: every pixel inside the input (no
 * tests). Constant trips, unrolled (as loops GCC kept the patch on the
 * stack and a test per pixel: see x86/nchwc_winograd_avx512.c). */
static inline __attribute__((always_inline)) void
input_unit(const int T, const int INSIDE, const float *xc, size_t row, ptrdiff_t ih0, ptrdiff_t iw0,
           ptrdiff_t H, ptrdiff_t W, float *vt, size_t vstride) {
    const int A = T + 2;
    __m256 e[6][6];
    /* down the columns, then along the rows: xi = a * A + b */
#pragma GCC unroll 6
    for (int c = 0; c < A; c++) {
        __m256 col[6], o[6];
#pragma GCC unroll 6
        for (int r = 0; r < A; r++)
            col[r] = nnf_wino_pixel8(INSIDE, xc, row, ih0 + r, iw0 + c, H, W);
        bt_form(T, col, o);
#pragma GCC unroll 6
        for (int a = 0; a < A; a++)
            e[a][c] = o[a];
    }
#pragma GCC unroll 6
    for (int a = 0; a < A; a++) {
        __m256 o[6];
        bt_form(T, e[a], o);
#pragma GCC unroll 6
        for (int b = 0; b < A; b++)
            _mm256_storeu_ps(vt + (size_t)(a * A + b) * vstride, o[b]);
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
        for (size_t cb = 0; cb < cb_n; cb++) {
            const float *xc = x + cb * plane;
            /* the next tile's new columns (T pixels) of its rows: A x c / 8
             * row streams, more than the hardware prefetcher follows
             * (ResNet-50's 64-channel 3x3s at 56x56 spent a sixth of their
             * time here) */
            if (iw0 + A < W)
                for (int r = 0; r < A; r++) {
                    ptrdiff_t ih = ih0 + r;
                    if (ih >= 0 && ih < H) {
                        const float *p = xc + (size_t)ih * row + (size_t)(iw0 + A) * NNF_NCHWC_B;
                        _mm_prefetch((const char *)p, _MM_HINT_T0);
                        _mm_prefetch((const char *)(p + 2 * NNF_NCHWC_B), _MM_HINT_T0);
                    }
                }
            float *vt = v + t * k->c8 + cb * NNF_NCHWC_B;
            if (inside)
                input_unit(T, 1, xc, row, ih0, iw0, H, W, vt, vstride);
            else
                input_unit(T, 0, xc, row, ih0, iw0, H, W, vt, vstride);
        }
    }
}

void nnf_nchwc_wino_input_avx2(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt,
                               float *v, size_t vstride) {
    input_form(4, k, x, t0, nt, v, vstride);
}

void nnf_nchwc_winof2_input_avx2(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt,
                                 float *v, size_t vstride) {
    input_form(2, k, x, t0, nt, v, vstride);
}

/* One tile of one output block from its (T + 2)^2 matrices at mt, mstride
 * apart: A^T m A, the epilogue, ny x nx pixels stored at yt (FULL: T x T,
 * constant trips, unrolled). */
static inline __attribute__((always_inline)) void
output_unit(const int T, const int FULL, const float *mt, size_t mstride, float *yt,
            const float *rt, size_t row, size_t ny, size_t nx, const nnf_epilogue *e,
            const nnf_activation *act, __m256 bias, __m256 mask) {
    const int A = T + 2;
    /* down the columns, then along the rows */
    __m256 u[4][6];
#pragma GCC unroll 6
    for (int b = 0; b < A; b++) {
        __m256 col[6], o[4];
#pragma GCC unroll 6
        for (int a = 0; a < A; a++)
            col[a] = _mm256_loadu_ps(mt + (size_t)(a * A + b) * mstride);
        at_form(T, col, o);
#pragma GCC unroll 4
        for (int i = 0; i < T; i++)
            u[i][b] = o[i];
    }
    /* the next tile's output and residual rows (T pixels, up to two lines
     * each): a tile writes (and reads) T rows of every output block, T x
     * oc / 8 streams each, more than the hardware prefetcher follows. The
     * residual comes from L3 (YOLOv5's bottleneck input, two convs
     * earlier: its 64-channel 3x3s at 80x80 ran 8 % slower with the Add
     * fused than conv and Add apart, 4 % faster with these); the output
     * rows alone: ResNet-50 A/B 0.988, YOLOv5s 0.993. */
    const size_t NY = FULL ? (size_t)T : ny, NX = FULL ? (size_t)T : nx;
    for (size_t i = 0; i < NY; i++) {
        if (rt) {
            const float *r = rt + i * row;
            _mm_prefetch((const char *)(r + (size_t)T * NNF_NCHWC_B), _MM_HINT_T0);
            _mm_prefetch((const char *)(r + (size_t)A * NNF_NCHWC_B), _MM_HINT_T0);
        }
        __builtin_prefetch(yt + i * row + (size_t)T * NNF_NCHWC_B, 1, 3);
        __builtin_prefetch(yt + i * row + (size_t)A * NNF_NCHWC_B, 1, 3);
    }
    for (size_t i = 0; i < NY; i++) {
        __m256 o[4];
        at_form(T, u[i], o);
        for (size_t q = 0; q < NX; q++) {
            size_t off = i * row + q * NNF_NCHWC_B;
            __m256 r = rt ? _mm256_loadu_ps(rt + off) : _mm256_setzero_ps();
            __m256 val = nnf_ep8_apply(o[q], e, act, 1, bias, rt != NULL, r);
            _mm256_storeu_ps(yt + off, _mm256_and_ps(val, mask));
        }
    }
}

/* One activation kind known at compile time (nnf_act8's switch folds away). */
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
        for (size_t ob = 0; ob < ob_n; ob++) {
            const float *mt = m + t * k->oc8 + ob * NNF_NCHWC_B;
            __m256 mask, bias = nnf_block_bias8(e->bias, s->oc, ob, ob_n, &mask);
            size_t off0 = ob * plane + oy0 * row + ox0 * NNF_NCHWC_B;
            float *yt = y + off0;
            const float *rt = res ? res + off0 : NULL;
            if (ny == (size_t)T && nx == (size_t)T)
                output_unit(T, 1, mt, mstride, yt, rt, row, ny, nx, e, &act, bias, mask);
            else
                output_unit(T, 0, mt, mstride, yt, rt, row, ny, nx, e, &act, bias, mask);
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

void nnf_nchwc_wino_output_avx2(const nnf_nchwc_wino *k, const float *m, size_t mstride, size_t t0,
                                size_t nt, float *y, const float *res, const nnf_epilogue *ep) {
    output_form(4, k, m, mstride, t0, nt, y, res, ep);
}

void nnf_nchwc_winof2_output_avx2(const nnf_nchwc_wino *k, const float *m, size_t mstride,
                                  size_t t0, size_t nt, float *y, const float *res,
                                  const nnf_epilogue *ep) {
    output_form(2, k, m, mstride, t0, nt, y, res, ep);
}

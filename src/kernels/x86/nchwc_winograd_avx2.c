/* The AVX2 transforms of the blocked Winograd F(4x4,3x3) (nchwc_winograd.c).
 *
 * Every vector is one pixel's 8 channels, so B^T d B and A^T m A are plain
 * lane-wise arithmetic on 36 vectors: no transposes (the NCHW kernel,
 * x86/winograd_avx2.c, transposes 4x4 blocks to put tiles into lanes). The
 * 1-D transforms are the NCHW kernel's (x86/winograd_avx2.h). */
#include "kernels/nchwc.h"
#include "kernels/x86/vmath_avx2.h"
#include "kernels/x86/winograd_avx2.h"

/* One tile's 6x6 patch of one block through B^T d B into its 36 matrices
 * at vt, vstride apart; INSIDE: every pixel inside the input (no tests).
 * Constant trips, unrolled (as loops GCC kept the patch on the stack and a
 * test per pixel: see x86/nchwc_winograd_avx512.c). */
static inline __attribute__((always_inline)) void
input_unit(const int INSIDE, const float *xc, size_t row, ptrdiff_t ih0, ptrdiff_t iw0, ptrdiff_t H,
           ptrdiff_t W, float *vt, size_t vstride) {
    __m256 e[6][6];
    /* down the columns, then along the rows: xi = a * 6 + b */
#pragma GCC unroll 6
    for (int c = 0; c < 6; c++) {
        __m256 col[6], o[6];
#pragma GCC unroll 6
        for (int r = 0; r < 6; r++) {
            ptrdiff_t ih = ih0 + r, iw = iw0 + c;
            col[r] = INSIDE || (ih >= 0 && ih < H && iw >= 0 && iw < W)
                         ? _mm256_loadu_ps(xc + ih * (ptrdiff_t)row + iw * NNF_NCHWC_B)
                         : _mm256_setzero_ps();
        }
        nnf_wino_bt6(col, o);
#pragma GCC unroll 6
        for (int a = 0; a < 6; a++)
            e[a][c] = o[a];
    }
#pragma GCC unroll 6
    for (int a = 0; a < 6; a++) {
        __m256 o[6];
        nnf_wino_bt6(e[a], o);
#pragma GCC unroll 6
        for (int b = 0; b < 6; b++)
            _mm256_storeu_ps(vt + (size_t)(a * 6 + b) * vstride, o[b]);
    }
}

void nnf_nchwc_wino_input_avx2(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt,
                               float *v, size_t vstride) {
    const nnf_conv2d_shape *s = &k->s;
    const size_t tw = (s->ow + 3) / 4, row = s->w * NNF_NCHWC_B, plane = s->h * row,
                 cb_n = k->c8 / NNF_NCHWC_B;
    const ptrdiff_t H = (ptrdiff_t)s->h, W = (ptrdiff_t)s->w;
    for (size_t t = 0; t < nt; t++) {
        size_t ty = (t0 + t) / tw, tx = (t0 + t) % tw;
        ptrdiff_t ih0 = (ptrdiff_t)(ty * 4) - (ptrdiff_t)s->pt,
                  iw0 = (ptrdiff_t)(tx * 4) - (ptrdiff_t)s->pl;
        int inside = ih0 >= 0 && iw0 >= 0 && ih0 + 6 <= H && iw0 + 6 <= W;
        for (size_t cb = 0; cb < cb_n; cb++) {
            const float *xc = x + cb * plane;
            /* the next tile's new columns (4 pixels, two lines) of its six
             * rows: 6 x c / 8 row streams, more than the hardware
             * prefetcher follows (ResNet-50's 64-channel 3x3s at 56x56
             * spent a sixth of their time here) */
            if (iw0 + 6 < W)
                for (int r = 0; r < 6; r++) {
                    ptrdiff_t ih = ih0 + r;
                    if (ih >= 0 && ih < H) {
                        const float *p = xc + (size_t)ih * row + (size_t)(iw0 + 6) * NNF_NCHWC_B;
                        _mm_prefetch((const char *)p, _MM_HINT_T0);
                        _mm_prefetch((const char *)(p + 2 * NNF_NCHWC_B), _MM_HINT_T0);
                    }
                }
            float *vt = v + t * k->c8 + cb * NNF_NCHWC_B;
            if (inside)
                input_unit(1, xc, row, ih0, iw0, H, W, vt, vstride);
            else
                input_unit(0, xc, row, ih0, iw0, H, W, vt, vstride);
        }
    }
}

/* One tile of one output block from its 36 matrices at mt, mstride apart:
 * A^T m A, the epilogue, ny x nx pixels stored at yt (FULL: 4 x 4,
 * constant trips, unrolled). */
static inline __attribute__((always_inline)) void
output_unit(const int FULL, const float *mt, size_t mstride, float *yt, const float *rt, size_t row,
            size_t ny, size_t nx, const nnf_epilogue *e, const nnf_activation *act, __m256 bias,
            __m256 mask) {
    /* down the columns, then along the rows */
    __m256 u[4][6];
#pragma GCC unroll 6
    for (int b = 0; b < 6; b++) {
        __m256 col[6], o[4];
#pragma GCC unroll 6
        for (int a = 0; a < 6; a++)
            col[a] = _mm256_loadu_ps(mt + (size_t)(a * 6 + b) * mstride);
        nnf_wino_at4(col, o);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            u[i][b] = o[i];
    }
    /* the next tile's output and residual rows (4 pixels, two lines each):
     * a tile writes (and reads) 4 rows of every output block, 4 x oc / 8
     * streams each, more than the hardware prefetcher follows. The
     * residual comes from L3 (YOLOv5's bottleneck input, two convs
     * earlier: its 64-channel 3x3s at 80x80 ran 8 % slower with the Add
     * fused than conv and Add apart, 4 % faster with these); the output
     * rows alone: ResNet-50 A/B 0.988, YOLOv5s 0.993. */
    const size_t NY = FULL ? 4 : ny, NX = FULL ? 4 : nx;
    for (size_t i = 0; i < NY; i++) {
        if (rt) {
            const float *r = rt + i * row;
            _mm_prefetch((const char *)(r + 4 * NNF_NCHWC_B), _MM_HINT_T0);
            _mm_prefetch((const char *)(r + 6 * NNF_NCHWC_B), _MM_HINT_T0);
        }
        __builtin_prefetch(yt + i * row + 4 * NNF_NCHWC_B, 1, 3);
        __builtin_prefetch(yt + i * row + 6 * NNF_NCHWC_B, 1, 3);
    }
    for (size_t i = 0; i < NY; i++) {
        __m256 o[4];
        nnf_wino_at4(u[i], o);
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
output_act(nnf_act_kind kind, const nnf_nchwc_wino *k, const float *m, size_t mstride, size_t t0,
           size_t nt, float *y, const float *res, const nnf_epilogue *e) {
    const nnf_conv2d_shape *s = &k->s;
    const size_t tw = (s->ow + 3) / 4, row = s->ow * NNF_NCHWC_B, plane = s->oh * row,
                 ob_n = k->oc8 / NNF_NCHWC_B;
    nnf_activation act = e->act;
    act.kind = kind;
    size_t tail = s->oc % NNF_NCHWC_B;
    for (size_t t = 0; t < nt; t++) {
        size_t ty = (t0 + t) / tw, tx = (t0 + t) % tw, oy0 = ty * 4, ox0 = tx * 4;
        size_t ny = s->oh - oy0 < 4 ? s->oh - oy0 : 4, nx = s->ow - ox0 < 4 ? s->ow - ox0 : 4;
        for (size_t ob = 0; ob < ob_n; ob++) {
            const float *mt = m + t * k->oc8 + ob * NNF_NCHWC_B;
            int last = ob + 1 == ob_n && tail;
            __m256 mask = _mm256_castsi256_ps(nnf_mask8(last ? tail : NNF_NCHWC_B));
            __m256 bias = _mm256_setzero_ps();
            if (e->bias)
                bias = last ? _mm256_maskload_ps(e->bias + ob * NNF_NCHWC_B, nnf_mask8(tail))
                            : _mm256_loadu_ps(e->bias + ob * NNF_NCHWC_B);
            size_t off0 = ob * plane + oy0 * row + ox0 * NNF_NCHWC_B;
            float *yt = y + off0;
            const float *rt = res ? res + off0 : NULL;
            if (ny == 4 && nx == 4)
                output_unit(1, mt, mstride, yt, rt, row, 4, 4, e, &act, bias, mask);
            else
                output_unit(0, mt, mstride, yt, rt, row, ny, nx, e, &act, bias, mask);
        }
    }
}

void nnf_nchwc_wino_output_avx2(const nnf_nchwc_wino *k, const float *m, size_t mstride, size_t t0,
                                size_t nt, float *y, const float *res, const nnf_epilogue *ep) {
    switch (ep->act.kind) {
#define K(kind)                                                                                    \
    case kind: output_act(kind, k, m, mstride, t0, nt, y, res, ep); return;
        NNF_ACT_KINDS(K)
#undef K
    }
    output_act(NNF_ACT_NONE, k, m, mstride, t0, nt, y, res, ep);
}

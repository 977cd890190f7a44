/* The AVX2 transforms of the blocked Winograd's stride-2 form (nchwc.h,
 * nchwc_winograd.c): one channel block per ymm, the computation of the
 * AVX-512 file (x86/nchwc_winograd_s2_avx512.c, which explains the form)
 * operation for operation, so the transforms give the same values on both
 * tiers (the GEMMs between them are each tier's own).
 *
 * A 4x4 output tile reads a 9x9 input patch p. Its even rows and columns
 * meet the kernel's rows and columns 0 and 2, its odd ones row and column
 * 1: with B^T the F(4,2) input transform the matrices are
 *   V00 = B^T p[even][even] B  (0..24), V01 = B^T p[even][odd]  (25 + k),
 *   V10 = p[odd][even] B       (30 + l), V11 = p[odd][odd]      (35)
 * and the output Y = A^T (M00 A + M01) + (M10 A + M11). */
#include "kernels/nchwc.h"
#include "kernels/x86/vmath_avx2.h"
#include "kernels/x86/winograd_avx2.h"

#include <string.h>

/* One tile's 9x9 patch of one block into its matrices (constant trips,
 * unrolled, each pixel loaded where it is used). */
static inline __attribute__((always_inline)) void
input_unit(const int INSIDE, const float *xc, size_t row, ptrdiff_t ih0, ptrdiff_t iw0, ptrdiff_t H,
           ptrdiff_t W, float *vt, const size_t *base, size_t ustride) {
    /* B^T down the even rows of every column: e[k][q] */
    __m256 e[5][9];
#pragma GCC unroll 9
    for (int q = 0; q < 9; q++) {
        __m256 col[5], o[5];
#pragma GCC unroll 5
        for (int a = 0; a < 5; a++)
            col[a] = nnf_wino_pixel8(INSIDE, xc, row, ih0 + 2 * a, iw0 + q, H, W);
        nnf_wino2_bt5(col, o);
#pragma GCC unroll 5
        for (int a = 0; a < 5; a++)
            e[a][q] = o[a];
    }
#pragma GCC unroll 5
    for (int a = 0; a < 5; a++) {
        __m256 ev[5] = {e[a][0], e[a][2], e[a][4], e[a][6], e[a][8]}, o[5];
        nnf_wino2_bt5(ev, o);
#pragma GCC unroll 5
        for (int b = 0; b < 5; b++)
            _mm256_storeu_ps(vt + base[a * 5 + b], o[b]);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
            _mm256_storeu_ps(vt + base[25 + a] + (size_t)c * ustride, e[a][2 * c + 1]);
    }
    /* the odd rows: B^T along their even columns, their odd ones as they are */
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        __m256 pr[9], o[5];
#pragma GCC unroll 9
        for (int q = 0; q < 9; q++)
            pr[q] = nnf_wino_pixel8(INSIDE, xc, row, ih0 + 2 * r + 1, iw0 + q, H, W);
        __m256 ev[5] = {pr[0], pr[2], pr[4], pr[6], pr[8]};
        nnf_wino2_bt5(ev, o);
#pragma GCC unroll 5
        for (int b = 0; b < 5; b++)
            _mm256_storeu_ps(vt + base[30 + b] + (size_t)r * ustride, o[b]);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
            _mm256_storeu_ps(vt + base[35] + (size_t)(r * 4 + c) * ustride, pr[2 * c + 1]);
    }
}

void nnf_nchwc_wino2_input_avx2(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt,
                                float *v, const size_t base[36], size_t ustride) {
    const nnf_conv2d_shape *s = &k->s;
    const size_t tw = (s->ow + 3) / 4, row = s->w * NNF_NCHWC_B, plane = s->h * row,
                 cb_n = k->c8 / NNF_NCHWC_B;
    const ptrdiff_t H = (ptrdiff_t)s->h, W = (ptrdiff_t)s->w;
    for (size_t t = 0; t < nt; t++) {
        size_t ty = (t0 + t) / tw, tx = (t0 + t) % tw;
        ptrdiff_t ih0 = (ptrdiff_t)(ty * 8) - (ptrdiff_t)s->pt,
                  iw0 = (ptrdiff_t)(tx * 8) - (ptrdiff_t)s->pl;
        int inside = ih0 >= 0 && iw0 >= 0 && ih0 + 9 <= H && iw0 + 9 <= W;
        for (size_t cb = 0; cb < cb_n; cb++) {
            const float *xc = x + cb * plane;
            float *vt = v + t * k->c8 + cb * NNF_NCHWC_B;
            if (inside)
                input_unit(1, xc, row, ih0, iw0, H, W, vt, base, ustride);
            else
                input_unit(0, xc, row, ih0, iw0, H, W, vt, base, ustride);
        }
    }
}

/* One tile of one output block: Y = A^T (M00 A + M01) + (M10 A + M11),
 * the epilogue, ny x nx pixels (FULL: 4 x 4) stored at yt, the padding
 * lanes of a partial last block zeroed (mask). */
static inline __attribute__((always_inline)) void
output_unit(const int FULL, const float *mt, const size_t *base, size_t ustride, float *yt,
            const float *rt, size_t row, size_t ny, size_t nx, const nnf_epilogue *e,
            const nnf_activation *act, __m256 bias, __m256 mask) {
    /* r[a][j] = (M00 A + M01)[a][j], then A^T down its columns */
    __m256 r[5][4], out[4][4];
#pragma GCC unroll 5
    for (int a = 0; a < 5; a++) {
        __m256 mv[5], o[4];
#pragma GCC unroll 5
        for (int b = 0; b < 5; b++)
            mv[b] = _mm256_loadu_ps(mt + base[a * 5 + b]);
        nnf_wino2_at4(mv, o);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            r[a][j] = _mm256_add_ps(o[j], _mm256_loadu_ps(mt + base[25 + a] + (size_t)j * ustride));
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m256 col[5] = {r[0][j], r[1][j], r[2][j], r[3][j], r[4][j]}, o[4];
        nnf_wino2_at4(col, o);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            out[i][j] = o[i];
    }
    /* + M10 A + M11, row by row */
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        __m256 mv[5], o[4];
#pragma GCC unroll 5
        for (int b = 0; b < 5; b++)
            mv[b] = _mm256_loadu_ps(mt + base[30 + b] + (size_t)i * ustride);
        nnf_wino2_at4(mv, o);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            out[i][j] = _mm256_add_ps(
                out[i][j], _mm256_add_ps(o[j], _mm256_loadu_ps(mt + base[35] +
                                                               (size_t)(i * 4 + j) * ustride)));
    }
    const size_t NY = FULL ? 4 : ny, NX = FULL ? 4 : nx;
    for (size_t i = 0; i < NY; i++)
        for (size_t q = 0; q < NX; q++) {
            size_t off = i * row + q * NNF_NCHWC_B;
            __m256 rv = rt ? _mm256_loadu_ps(rt + off) : _mm256_setzero_ps();
            __m256 val = nnf_ep8_apply(out[i][q], e, act, 1, bias, rt != NULL, rv);
            _mm256_storeu_ps(yt + off, _mm256_and_ps(val, mask));
        }
}

/* One activation kind known at compile time (nnf_act8's switch folds). */
static inline __attribute__((always_inline)) void
output_act(nnf_act_kind kind, const nnf_nchwc_wino *k, const float *m, const size_t base[36],
           size_t ustride, size_t t0, size_t nt, float *y, const float *res,
           const nnf_epilogue *e) {
    const nnf_conv2d_shape *s = &k->s;
    const size_t tw = (s->ow + 3) / 4, row = s->ow * NNF_NCHWC_B, plane = s->oh * row,
                 ob_n = k->oc8 / NNF_NCHWC_B;
    nnf_activation act = e->act;
    act.kind = kind;
    for (size_t t = 0; t < nt; t++) {
        size_t ty = (t0 + t) / tw, tx = (t0 + t) % tw, oy0 = ty * 4, ox0 = tx * 4;
        size_t ny = s->oh - oy0 < 4 ? s->oh - oy0 : 4, nx = s->ow - ox0 < 4 ? s->ow - ox0 : 4;
        for (size_t ob = 0; ob < ob_n; ob++) {
            const float *mt = m + t * k->oc8 + ob * NNF_NCHWC_B;
            __m256 mask, bias = nnf_block_bias8(e->bias, s->oc, ob, ob_n, &mask);
            size_t off0 = ob * plane + oy0 * row + ox0 * NNF_NCHWC_B;
            float *yt = y + off0;
            const float *rt = res ? res + off0 : NULL;
            if (ny == 4 && nx == 4)
                output_unit(1, mt, base, ustride, yt, rt, row, 4, 4, e, &act, bias, mask);
            else
                output_unit(0, mt, base, ustride, yt, rt, row, ny, nx, e, &act, bias, mask);
        }
    }
}

void nnf_nchwc_wino2_output_avx2(const nnf_nchwc_wino *k, const float *m, const size_t base[36],
                                 size_t ustride, size_t t0, size_t nt, float *y, const float *res,
                                 const nnf_epilogue *ep) {
    switch (ep->act.kind) {
#define K(kind)                                                                                    \
    case kind: output_act(kind, k, m, base, ustride, t0, nt, y, res, ep); return;
        NNF_ACT_KINDS(K)
#undef K
    }
    output_act(NNF_ACT_NONE, k, m, base, ustride, t0, nt, y, res, ep);
}

/* The AVX-512 transforms of the blocked Winograd's stride-2 form
 * (nchwc.h, nchwc_winograd.c): two channel blocks per zmm, as the
 * stride-1 ones (x86/nchwc_winograd_avx512.c).
 *
 * A 4x4 output tile reads a 9x9 input patch p (rows and columns from
 * 2 * the tile's first output - the padding). Its even rows 0, 2, .., 8
 * meet kernel rows 0 and 2, its odd rows 1, .., 7 kernel row 1; likewise
 * the columns. So with B^T the F(4,2) input transform (5 points):
 *   V00 = B^T p[even][even] B   (5x5: matrices 0..24, k * 5 + l)
 *   V01 = B^T p[even][odd]      (5x4: matrix 25 + k, unit = column)
 *   V10 = p[odd][even] B        (4x5: matrix 30 + l, unit = row)
 *   V11 = p[odd][odd]           (4x4: matrix 35, unit = row * 4 + column)
 * and after the GEMMs the output is
 *   Y = A^T (M00 A + M01) + (M10 A + M11)
 * before the epilogue. An odd last block runs with its upper half zero. */
#include "kernels/nchwc.h"
#include "kernels/x86/nchwc_pair_avx512.h"
#include "kernels/x86/vmath_avx512.h"
#include "kernels/x86/winograd_avx2.h"

NNF_WINO_1D(_16, __m512, _mm512_add_ps, _mm512_sub_ps, _mm512_mul_ps, _mm512_fmadd_ps,
            _mm512_fmsub_ps, _mm512_set1_ps)

/* One tile's 9x9 patch of two blocks into its matrices (constant trips,
 * unrolled, each pixel loaded where it is used: as loops over the whole
 * patch on the stack with a test per pixel, as GCC left them, the
 * transforms took as long as the GEMMs). */
static inline __attribute__((always_inline)) void
input_unit(const int BOTH, const int INSIDE, const float *xc, size_t row, size_t plane,
           ptrdiff_t ih0, ptrdiff_t iw0, ptrdiff_t H, ptrdiff_t W, float *vt, const size_t *base,
           size_t ustride) {
    /* B^T down the even rows of every column: e[k][q] */
    __m512 e[5][9];
#pragma GCC unroll 9
    for (int q = 0; q < 9; q++) {
        __m512 col[5], o[5];
#pragma GCC unroll 5
        for (int a = 0; a < 5; a++)
            col[a] = nnf_load_pixel_pair(BOTH, INSIDE, xc, row, plane, ih0 + 2 * a, iw0 + q, H, W);
        nnf_wino2_bt5_16(col, o);
#pragma GCC unroll 5
        for (int a = 0; a < 5; a++)
            e[a][q] = o[a];
    }
#pragma GCC unroll 5
    for (int a = 0; a < 5; a++) {
        __m512 ev[5] = {e[a][0], e[a][2], e[a][4], e[a][6], e[a][8]}, o[5];
        nnf_wino2_bt5_16(ev, o);
#pragma GCC unroll 5
        for (int b = 0; b < 5; b++)
            nnf_store_v_pair(BOTH, vt + base[a * 5 + b], o[b]);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
            nnf_store_v_pair(BOTH, vt + base[25 + a] + (size_t)c * ustride, e[a][2 * c + 1]);
    }
    /* the odd rows: B^T along their even columns, their odd ones as they are */
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        __m512 pr[9], o[5];
#pragma GCC unroll 9
        for (int q = 0; q < 9; q++)
            pr[q] =
                nnf_load_pixel_pair(BOTH, INSIDE, xc, row, plane, ih0 + 2 * r + 1, iw0 + q, H, W);
        __m512 ev[5] = {pr[0], pr[2], pr[4], pr[6], pr[8]};
        nnf_wino2_bt5_16(ev, o);
#pragma GCC unroll 5
        for (int b = 0; b < 5; b++)
            nnf_store_v_pair(BOTH, vt + base[30 + b] + (size_t)r * ustride, o[b]);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
            nnf_store_v_pair(BOTH, vt + base[35] + (size_t)(r * 4 + c) * ustride, pr[2 * c + 1]);
    }
}

void nnf_nchwc_wino2_input_avx512(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt,
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
        for (size_t cb = 0; cb < cb_n; cb += 2) {
            const float *xc = x + cb * plane;
            int both = cb + 1 < cb_n;
            float *vt = v + t * k->c8 + cb * NNF_NCHWC_B;
            if (inside && both)
                input_unit(1, 1, xc, row, plane, ih0, iw0, H, W, vt, base, ustride);
            else if (both)
                input_unit(1, 0, xc, row, plane, ih0, iw0, H, W, vt, base, ustride);
            else if (inside)
                input_unit(0, 1, xc, row, plane, ih0, iw0, H, W, vt, base, ustride);
            else
                input_unit(0, 0, xc, row, plane, ih0, iw0, H, W, vt, base, ustride);
        }
    }
}

/* Value v of two blocks' matrices (the second's when BOTH). */
static inline __attribute__((always_inline)) __m512 mval(const int BOTH, const float *p) {
    return BOTH ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(0x00ff, p);
}

/* One tile of two output blocks: Y = A^T (M00 A + M01) + (M10 A + M11),
 * the epilogue, ny x nx pixels (FULL: 4 x 4) stored at yt. */
static inline __attribute__((always_inline)) void
output_unit(const int FULL, const int BOTH, const float *mt, const size_t *base, size_t ustride,
            float *yt, const float *rt, size_t row, size_t plane, size_t ny, size_t nx,
            const nnf_epilogue *e, const nnf_activation *act, __m512 bias, __mmask16 keep) {
    /* r[a][j] = (M00 A + M01)[a][j], then A^T down its columns */
    __m512 r[5][4], out[4][4];
#pragma GCC unroll 5
    for (int a = 0; a < 5; a++) {
        __m512 mv[5], o[4];
#pragma GCC unroll 5
        for (int b = 0; b < 5; b++)
            mv[b] = mval(BOTH, mt + base[a * 5 + b]);
        nnf_wino2_at4_16(mv, o);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            r[a][j] = _mm512_add_ps(o[j], mval(BOTH, mt + base[25 + a] + (size_t)j * ustride));
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512 col[5] = {r[0][j], r[1][j], r[2][j], r[3][j], r[4][j]}, o[4];
        nnf_wino2_at4_16(col, o);
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            out[i][j] = o[i];
    }
    /* + M10 A + M11, row by row */
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        __m512 mv[5], o[4];
#pragma GCC unroll 5
        for (int b = 0; b < 5; b++)
            mv[b] = mval(BOTH, mt + base[30 + b] + (size_t)i * ustride);
        nnf_wino2_at4_16(mv, o);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            out[i][j] = _mm512_add_ps(
                out[i][j],
                _mm512_add_ps(o[j], mval(BOTH, mt + base[35] + (size_t)(i * 4 + j) * ustride)));
    }
    const size_t NY = FULL ? 4 : ny, NX = FULL ? 4 : nx;
    for (size_t i = 0; i < NY; i++)
        for (size_t q = 0; q < NX; q++) {
            size_t off = i * row + q * NNF_NCHWC_B;
            __m512 rv = rt ? nnf_load_pair(rt + off, plane, BOTH) : _mm512_setzero_ps();
            __m512 val = nnf_ep16_apply_act(out[i][q], e, act, 1, bias, rt != NULL, rv);
            nnf_store_pair(yt + off, plane, BOTH, _mm512_maskz_mov_ps(keep, val));
        }
}

/* One activation kind known at compile time (nnf_act16's switch folds). */
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
        int full = ny == 4 && nx == 4;
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
                output_unit(1, 1, mt, base, ustride, yt, rt, row, plane, ny, nx, e, &act, bias,
                            keep);
            else if (both)
                output_unit(0, 1, mt, base, ustride, yt, rt, row, plane, ny, nx, e, &act, bias,
                            keep);
            else
                output_unit(0, 0, mt, base, ustride, yt, rt, row, plane, ny, nx, e, &act, bias,
                            keep);
        }
    }
}

void nnf_nchwc_wino2_output_avx512(const nnf_nchwc_wino *k, const float *m, const size_t base[36],
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

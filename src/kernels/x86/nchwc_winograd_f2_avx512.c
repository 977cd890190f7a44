/* The AVX-512 transforms of the blocked Winograd's F(2x2,3x3) form
 * (nchwc.h, nchwc_winograd.c): two channel blocks per zmm, as the F(4x4,3x3)
 * ones (x86/nchwc_winograd_avx512.c). A 2x2 output tile reads a 4x4 input
 * patch (rows and columns from 2 * the tile's first output - the padding);
 * V = B^T d B, 16 matrices xi = a * 4 + b; Y = A^T M A, then the epilogue.
 * An odd last block runs with its upper half zero. */
#include "kernels/nchwc.h"
#include "kernels/x86/nchwc_pair_avx512.h"
#include "kernels/x86/vmath_avx512.h"

#include <string.h>

/* B^T of F(2,3) on points 0, 1, -1, inf (nnf_wino_f2_bt). */
static inline __attribute__((always_inline)) void bt4(const __m512 d[4], __m512 o[4]) {
    o[0] = _mm512_sub_ps(d[0], d[2]);
    o[1] = _mm512_add_ps(d[1], d[2]);
    o[2] = _mm512_sub_ps(d[2], d[1]);
    o[3] = _mm512_sub_ps(d[1], d[3]);
}

/* A^T (nnf_wino_f2_at). */
static inline __attribute__((always_inline)) void at2(const __m512 m[4], __m512 o[2]) {
    o[0] = _mm512_add_ps(_mm512_add_ps(m[0], m[1]), m[2]);
    o[1] = _mm512_sub_ps(_mm512_sub_ps(m[1], m[2]), m[3]);
}

void nnf_nchwc_winof2_input_avx512(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt,
                                   float *v, size_t vstride) {
    const nnf_conv2d_shape *s = &k->s;
    const size_t tw = (s->ow + 1) / 2, row = s->w * NNF_NCHWC_B, plane = s->h * row,
                 cb_n = k->c8 / NNF_NCHWC_B;
    const ptrdiff_t H = (ptrdiff_t)s->h, W = (ptrdiff_t)s->w;
    for (size_t t = 0; t < nt; t++) {
        size_t ty = (t0 + t) / tw, tx = (t0 + t) % tw;
        ptrdiff_t ih0 = (ptrdiff_t)(ty * 2) - (ptrdiff_t)s->pt,
                  iw0 = (ptrdiff_t)(tx * 2) - (ptrdiff_t)s->pl;
        int inside = ih0 >= 0 && iw0 >= 0 && ih0 + 4 <= H && iw0 + 4 <= W;
        for (size_t cb = 0; cb < cb_n; cb += 2) {
            const float *xc = x + cb * plane;
            int both = cb + 1 < cb_n;
            __m512 d[4][4], e[4][4];
            for (int r = 0; r < 4; r++)
                for (int c = 0; c < 4; c++) {
                    ptrdiff_t ih = ih0 + r, iw = iw0 + c;
                    d[r][c] = inside || (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                  ? nnf_load_pair(xc + (size_t)ih * row + (size_t)iw * NNF_NCHWC_B,
                                                  plane, both)
                                  : _mm512_setzero_ps();
                }
            /* down the columns, then along the rows: xi = a * 4 + b */
            for (int c = 0; c < 4; c++) {
                __m512 col[4] = {d[0][c], d[1][c], d[2][c], d[3][c]}, o[4];
                bt4(col, o);
                for (int a = 0; a < 4; a++)
                    e[a][c] = o[a];
            }
            float *vt = v + t * k->c8 + cb * NNF_NCHWC_B;
            __mmask16 km = both ? (__mmask16)0xffff : (__mmask16)0x00ff;
            for (int a = 0; a < 4; a++) {
                __m512 o[4];
                bt4(e[a], o);
                for (int b = 0; b < 4; b++)
                    _mm512_mask_storeu_ps(vt + (size_t)(a * 4 + b) * vstride, km, o[b]);
            }
        }
    }
}

/* One activation kind known at compile time (nnf_act16's switch folds). */
static inline __attribute__((always_inline)) void
output_act(nnf_act_kind kind, const nnf_nchwc_wino *k, const float *m, size_t mstride, size_t t0,
           size_t nt, float *y, const float *res, const nnf_epilogue *e) {
    const nnf_conv2d_shape *s = &k->s;
    const size_t tw = (s->ow + 1) / 2, row = s->ow * NNF_NCHWC_B, plane = s->oh * row,
                 ob_n = k->oc8 / NNF_NCHWC_B;
    nnf_activation act = e->act;
    act.kind = kind;
    size_t tail = s->oc % NNF_NCHWC_B;
    for (size_t t = 0; t < nt; t++) {
        size_t ty = (t0 + t) / tw, tx = (t0 + t) % tw, oy0 = ty * 2, ox0 = tx * 2;
        size_t ny = s->oh - oy0 < 2 ? s->oh - oy0 : 2, nx = s->ow - ox0 < 2 ? s->ow - ox0 : 2;
        for (size_t ob = 0; ob < ob_n; ob += 2) {
            const float *mt = m + t * k->oc8 + ob * NNF_NCHWC_B;
            int both = ob + 1 < ob_n;
            __mmask16 km = both ? (__mmask16)0xffff : (__mmask16)0x00ff;
            /* the lanes of real channels: block ob, then ob + 1 */
            __mmask16 keep = (__mmask16)(tail && ob + 1 == ob_n ? (1u << tail) - 1u : 0xffu);
            if (both)
                keep |= (__mmask16)((tail && ob + 2 == ob_n ? (1u << tail) - 1u : 0xffu) << 8);
            __m512 bias = _mm512_setzero_ps();
            if (e->bias)
                bias = _mm512_maskz_loadu_ps(keep, e->bias + ob * NNF_NCHWC_B);
            /* down the columns, then along the rows */
            __m512 u[2][4];
            for (int b = 0; b < 4; b++) {
                __m512 col[4], o[2];
                for (int a = 0; a < 4; a++)
                    col[a] = _mm512_maskz_loadu_ps(km, mt + (size_t)(a * 4 + b) * mstride);
                at2(col, o);
                u[0][b] = o[0];
                u[1][b] = o[1];
            }
            size_t off0 = ob * plane + oy0 * row + ox0 * NNF_NCHWC_B;
            for (size_t i = 0; i < ny; i++) {
                __m512 o[2];
                at2(u[i], o);
                for (size_t q = 0; q < nx; q++) {
                    size_t off = off0 + i * row + q * NNF_NCHWC_B;
                    __m512 r = res ? nnf_load_pair(res + off, plane, both) : _mm512_setzero_ps();
                    __m512 val = nnf_ep16_apply_act(o[q], e, &act, 1, bias, res != NULL, r);
                    nnf_store_pair(y + off, plane, both, _mm512_maskz_mov_ps(keep, val));
                }
            }
        }
    }
}

void nnf_nchwc_winof2_output_avx512(const nnf_nchwc_wino *k, const float *m, size_t mstride,
                                    size_t t0, size_t nt, float *y, const float *res,
                                    const nnf_epilogue *ep) {
    switch (ep->act.kind) {
#define K(kind)                                                                                    \
    case kind: output_act(kind, k, m, mstride, t0, nt, y, res, ep); return;
        NNF_ACT_KINDS(K)
#undef K
    }
    output_act(NNF_ACT_NONE, k, m, mstride, t0, nt, y, res, ep);
}

/* U = G g G^T for one panel (nnf_nchwc_wino_create): 8 output channels a
 * zmm of doubles, rounded once, each line streamed. */
void nnf_nchwc_winof2_weight_panel_avx512(const float *w, size_t stride, size_t m, size_t r,
                                          size_t k, float *const dst[16]) {
    _Alignas(64) double t[9][32];
    memset(t, 0, sizeof t);
    for (size_t kk = 0; kk < k; kk++) {
        for (size_t o = 0; o < m; o++)
            for (int q = 0; q < 9; q++)
                t[q][o] = w[o * stride + kk * 9 + (size_t)q];
        for (size_t o = 0; o < r; o += 8) {
            __m512d g[9], h[4][3];
            for (int q = 0; q < 9; q++)
                g[q] = _mm512_load_pd(&t[q][o]);
            /* h = G g (rows of G over the kernel's rows), then U = h G^T */
            for (int a = 0; a < 4; a++)
                for (int c = 0; c < 3; c++)
                    h[a][c] = _mm512_add_pd(
                        _mm512_add_pd(_mm512_mul_pd(_mm512_set1_pd(nnf_wino_f2_g[a][0]), g[c]),
                                      _mm512_mul_pd(_mm512_set1_pd(nnf_wino_f2_g[a][1]), g[3 + c])),
                        _mm512_mul_pd(_mm512_set1_pd(nnf_wino_f2_g[a][2]), g[6 + c]));
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++) {
                    __m512d u = _mm512_add_pd(
                        _mm512_add_pd(_mm512_mul_pd(h[a][0], _mm512_set1_pd(nnf_wino_f2_g[b][0])),
                                      _mm512_mul_pd(h[a][1], _mm512_set1_pd(nnf_wino_f2_g[b][1]))),
                        _mm512_mul_pd(h[a][2], _mm512_set1_pd(nnf_wino_f2_g[b][2])));
                    _mm256_stream_ps(dst[a * 4 + b] + kk * r + o, _mm512_cvtpd_ps(u));
                }
        }
    }
    _mm_sfence(); /* the streamed lines before anything reads them */
}

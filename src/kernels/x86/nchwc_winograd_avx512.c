/* The AVX-512 transforms of the blocked Winograd F(4x4,3x3)
 * (nchwc_winograd.c): x86/nchwc_winograd_avx2.c's on two channel blocks per
 * zmm. V and M hold a tile's channels contiguously ([xi][tile][c8]), so a
 * zmm of V or M is two blocks' 16 channels in one load or store; the input
 * and output keep their NCHWc8 planes, so each pixel's zmm is two 8-float
 * halves from two planes. The operations per lane are the AVX2 ones in the
 * same order (and exp16 is exp8 bit for bit), so the outputs are the same
 * bits. On Intel's two 512-bit ports the 8-wide transforms were 6.7 % of a
 * YOLOv5s run. An odd last block runs with its upper half zero. */
#include "kernels/nchwc.h"
#include "kernels/x86/nchwc_pair_avx512.h"
#include "kernels/x86/vmath_avx512.h"
#include "kernels/x86/winograd_avx2.h"

NNF_WINO_1D(_16, __m512, _mm512_add_ps, _mm512_sub_ps, _mm512_mul_ps, _mm512_fmadd_ps,
            _mm512_set1_ps)

void nnf_nchwc_wino_input_avx512(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt,
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
        for (size_t cb = 0; cb < cb_n; cb += 2) {
            const float *xc = x + cb * plane;
            int both = cb + 1 < cb_n;
            /* the next tile's new columns in both planes (see the AVX2 one) */
            if (iw0 + 6 < W)
                for (int r = 0; r < 6; r++) {
                    ptrdiff_t ih = ih0 + r;
                    if (ih >= 0 && ih < H) {
                        const float *p = xc + (size_t)ih * row + (size_t)(iw0 + 6) * NNF_NCHWC_B;
                        _mm_prefetch((const char *)p, _MM_HINT_T0);
                        _mm_prefetch((const char *)(p + 2 * NNF_NCHWC_B), _MM_HINT_T0);
                        if (both) {
                            _mm_prefetch((const char *)(p + plane), _MM_HINT_T0);
                            _mm_prefetch((const char *)(p + plane + 2 * NNF_NCHWC_B), _MM_HINT_T0);
                        }
                    }
                }
            __m512 d[6][6], e[6][6];
            for (int r = 0; r < 6; r++)
                for (int c = 0; c < 6; c++) {
                    ptrdiff_t ih = ih0 + r, iw = iw0 + c;
                    d[r][c] = inside || (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                  ? nnf_load_pair(xc + (size_t)ih * row + (size_t)iw * NNF_NCHWC_B,
                                                  plane, both)
                                  : _mm512_setzero_ps();
                }
            /* down the columns, then along the rows: xi = a * 6 + b */
            for (int c = 0; c < 6; c++) {
                __m512 col[6] = {d[0][c], d[1][c], d[2][c], d[3][c], d[4][c], d[5][c]}, o[6];
                nnf_wino_bt6_16(col, o);
                for (int a = 0; a < 6; a++)
                    e[a][c] = o[a];
            }
            float *vt = v + t * k->c8 + cb * NNF_NCHWC_B;
            __mmask16 km = both ? (__mmask16)0xffff : (__mmask16)0x00ff;
            for (int a = 0; a < 6; a++) {
                __m512 o[6];
                nnf_wino_bt6_16(e[a], o);
                for (int b = 0; b < 6; b++)
                    _mm512_mask_storeu_ps(vt + (size_t)(a * 6 + b) * vstride, km, o[b]);
            }
        }
    }
}

/* One activation kind known at compile time (nnf_act16's switch folds). */
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
        for (size_t ob = 0; ob < ob_n; ob += 2) {
            const float *mt = m + t * k->oc8 + ob * NNF_NCHWC_B;
            int both = ob + 1 < ob_n;
            /* the lanes of real channels: block ob, then ob + 1 */
            __mmask16 keep = (__mmask16)(tail && ob + 1 == ob_n ? (1u << tail) - 1u : 0xffu);
            if (both)
                keep |= (__mmask16)((tail && ob + 2 == ob_n ? (1u << tail) - 1u : 0xffu) << 8);
            __m512 bias = _mm512_setzero_ps();
            if (e->bias)
                bias = _mm512_maskz_loadu_ps(keep, e->bias + ob * NNF_NCHWC_B);
            /* down the columns, then along the rows */
            __m512 u[4][6];
            for (int b = 0; b < 6; b++) {
                __m512 col[6], o[4];
                for (int a = 0; a < 6; a++)
                    col[a] = _mm512_maskz_loadu_ps(both ? (__mmask16)0xffff : (__mmask16)0x00ff,
                                                   mt + (size_t)(a * 6 + b) * mstride);
                nnf_wino_at4_16(col, o);
                for (int i = 0; i < 4; i++)
                    u[i][b] = o[i];
            }
            size_t off0 = ob * plane + oy0 * row + ox0 * NNF_NCHWC_B;
            /* the next tile's output and residual rows (see the AVX2 one) */
            for (size_t i = 0; i < ny; i++)
                for (int h = 0; h < 1 + both; h++) {
                    size_t o = off0 + (size_t)h * plane + i * row;
                    if (res) {
                        _mm_prefetch((const char *)(res + o + 4 * NNF_NCHWC_B), _MM_HINT_T0);
                        _mm_prefetch((const char *)(res + o + 6 * NNF_NCHWC_B), _MM_HINT_T0);
                    }
                    __builtin_prefetch(y + o + 4 * NNF_NCHWC_B, 1, 3);
                    __builtin_prefetch(y + o + 6 * NNF_NCHWC_B, 1, 3);
                }
            for (size_t i = 0; i < ny; i++) {
                __m512 o[4];
                nnf_wino_at4_16(u[i], o);
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

void nnf_nchwc_wino_output_avx512(const nnf_nchwc_wino *k, const float *m, size_t mstride,
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

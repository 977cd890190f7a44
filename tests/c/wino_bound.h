/* Test helper: the Winograd F(4x4,3x3) error bound (test_conv_fast.c's
 * NCHW kernel and test_conv_nchwc.c's blocked one share it). */
#ifndef NNF_TESTS_WINO_BOUND_H
#define NNF_TESTS_WINO_BOUND_H

#include "kernels/conv_fast.h"
#include "kernels/nchwc.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

/* Winograd F(4x4,3x3) error bound. With U = G g G^T (rounded once from
 * double), V = B^T d B (float, a few adds/FMAs per direction), M = U.V summed
 * over C (the GEMM) and y = A^T M A (float), the rounding error of every
 * stage is a small multiple of u = 2^-24 times the same stage computed on
 * absolute values, so
 *   |y - y_exact| <= (C + c0) u sum_{k,l} |A^T|_{ik} |A^T|_{jl}
 *                    sum_c (|G||g||G^T|)_{kl} (|B^T||d||B|)_{kl}
 * with c0 bounded by the transforms' depth (3 + 3 for B, 1 for U, 3 + 3 for
 * A: c0 = 13); the check uses (C + 16) * 4u like the GEMM tests. This can
 * be far above the direct conv's bound: the transformed values grow
 * (|B^T| rows sum to 10, |A^T| to 18), which is the price of Winograd. */
typedef struct wino_mag {
    double *u; /* [oc][c][nn] */
    double *v; /* [n][tiles][c][nn] */
    size_t th, tw;
    int t, a;                  /* output tile edge (4 or 2), input patch edge (6 or 4) */
    const double *g, *bt, *at; /* a x 3, a x a, t x a */
} wino_mag;

/* F(4x4,3x3), or F(2x2,3x3) with f2 (the blocked kernel's form for small
 * maps, kernels/nchwc.h: |B^T| rows sum to 2, |A^T| to 3). */
static inline void wino_mag_init_form(wino_mag *m, const nnf_conv2d_shape *s, const float *x,
                                      const float *w, int f2) {
    m->t = f2 ? 2 : 4;
    m->a = m->t + 2;
    m->g = f2 ? &nnf_wino_f2_g[0][0] : &nnf_wino_g[0][0];
    m->bt = f2 ? &nnf_wino_f2_bt[0][0] : &nnf_wino_bt[0][0];
    m->at = f2 ? &nnf_wino_f2_at[0][0] : &nnf_wino_at[0][0];
    const int A = m->a, nn = A * A;
    m->th = (s->oh + (size_t)m->t - 1) / (size_t)m->t;
    m->tw = (s->ow + (size_t)m->t - 1) / (size_t)m->t;
    m->u = malloc(s->oc * s->c * (size_t)nn * sizeof(double));
    m->v = malloc(s->n * m->th * m->tw * s->c * (size_t)nn * sizeof(double));
    for (size_t i = 0; i < s->oc * s->c; i++)
        for (int k = 0; k < A; k++)
            for (int l = 0; l < A; l++) {
                double acc = 0;
                for (int a = 0; a < 3; a++)
                    for (int b = 0; b < 3; b++)
                        acc += fabs(m->g[k * 3 + a]) * fabs(w[i * 9 + (size_t)(a * 3 + b)]) *
                               fabs(m->g[l * 3 + b]);
                m->u[i * (size_t)nn + (size_t)(k * A + l)] = acc;
            }
    for (size_t b = 0; b < s->n; b++)
        for (size_t t = 0; t < m->th * m->tw; t++)
            for (size_t c = 0; c < s->c; c++) {
                double d[6][6];
                for (int i = 0; i < A; i++)
                    for (int j = 0; j < A; j++) {
                        ptrdiff_t ih =
                            (ptrdiff_t)((t / m->tw) * (size_t)m->t + (size_t)i) - (ptrdiff_t)s->pt;
                        ptrdiff_t iw =
                            (ptrdiff_t)((t % m->tw) * (size_t)m->t + (size_t)j) - (ptrdiff_t)s->pl;
                        d[i][j] =
                            ih < 0 || iw < 0 || ih >= (ptrdiff_t)s->h || iw >= (ptrdiff_t)s->w
                                ? 0.0
                                : fabs(x[((b * s->c + c) * s->h + (size_t)ih) * s->w + (size_t)iw]);
                    }
                double *o = m->v + ((b * m->th * m->tw + t) * s->c + c) * (size_t)nn;
                for (int k = 0; k < A; k++)
                    for (int l = 0; l < A; l++) {
                        double acc = 0;
                        for (int i = 0; i < A; i++)
                            for (int j = 0; j < A; j++)
                                acc += fabs(m->bt[k * A + i]) * d[i][j] * fabs(m->bt[l * A + j]);
                        o[k * A + l] = acc;
                    }
            }
}

static inline void wino_mag_init(wino_mag *m, const nnf_conv2d_shape *s, const float *x,
                                 const float *w) {
    wino_mag_init_form(m, s, x, w, 0);
}

static inline double wino_mag_at(const wino_mag *m, const nnf_conv2d_shape *s, size_t b, size_t o,
                                 size_t oh, size_t ow) {
    const int A = m->a, nn = A * A;
    size_t t = (oh / (size_t)m->t) * m->tw + ow / (size_t)m->t, i = oh % (size_t)m->t,
           j = ow % (size_t)m->t;
    const double *v = m->v + (b * m->th * m->tw + t) * s->c * (size_t)nn,
                 *u = m->u + o * s->c * (size_t)nn;
    double acc = 0;
    for (int k = 0; k < A; k++)
        for (int l = 0; l < A; l++) {
            double a =
                fabs(m->at[i * (size_t)A + (size_t)k]) * fabs(m->at[j * (size_t)A + (size_t)l]);
            if (a == 0)
                continue;
            double sum = 0;
            for (size_t c = 0; c < s->c; c++)
                sum += u[c * (size_t)nn + (size_t)(k * A + l)] *
                       v[c * (size_t)nn + (size_t)(k * A + l)];
            acc += a * sum;
        }
    return acc;
}

static inline void wino_mag_free(wino_mag *m) {
    free(m->u);
    free(m->v);
}

/* The same bound for the blocked kernel's stride-2 form (kernels/nchwc.h):
 * per input channel, the four phases' products on absolute values, each
 * through its transforms' absolute values (F(4,2): |B^T| rows sum to 6,
 * |A^T| to 11), summed; the depth adds the phases' two sums. */
typedef struct wino2_mag {
    double *u; /* [oc][c][36]: |U00| 25, |U01| 5, |U10| 5, |w11| */
    double *v; /* [n][tiles][c][81]: |V00| 5x5, |V01| 5x4, |V10| 4x5, |d11| 4x4 */
    size_t tw, tiles;
} wino2_mag;

static inline void wino2_mag_init(wino2_mag *m, const nnf_conv2d_shape *s, const float *x,
                                  const float *w) {
    m->tw = (s->ow + 3) / 4;
    m->tiles = ((s->oh + 3) / 4) * m->tw;
    m->u = malloc(s->oc * s->c * 36 * sizeof(double));
    m->v = malloc(s->n * m->tiles * s->c * 81 * sizeof(double));
    for (size_t i = 0; i < s->oc * s->c; i++) {
        const float *g = w + i * 9;
        double *u = m->u + i * 36;
        for (int k = 0; k < 5; k++) {
            for (int l = 0; l < 5; l++) {
                double acc = 0;
                for (int a = 0; a < 2; a++)
                    for (int b = 0; b < 2; b++)
                        acc += fabs(nnf_wino2_g[k][a]) * fabs(g[6 * a + 2 * b]) *
                               fabs(nnf_wino2_g[l][b]);
                u[k * 5 + l] = acc;
            }
            u[25 + k] = fabs(nnf_wino2_g[k][0]) * fabs(g[1]) + fabs(nnf_wino2_g[k][1]) * fabs(g[7]);
            u[30 + k] = fabs(nnf_wino2_g[k][0]) * fabs(g[3]) + fabs(nnf_wino2_g[k][1]) * fabs(g[5]);
        }
        u[35] = fabs(g[4]);
    }
    for (size_t b = 0; b < s->n; b++)
        for (size_t t = 0; t < m->tiles; t++)
            for (size_t c = 0; c < s->c; c++) {
                double d[9][9];
                for (int i = 0; i < 9; i++)
                    for (int j = 0; j < 9; j++) {
                        ptrdiff_t ih = (ptrdiff_t)((t / m->tw) * 8 + (size_t)i) - (ptrdiff_t)s->pt;
                        ptrdiff_t iw = (ptrdiff_t)((t % m->tw) * 8 + (size_t)j) - (ptrdiff_t)s->pl;
                        d[i][j] =
                            ih < 0 || iw < 0 || ih >= (ptrdiff_t)s->h || iw >= (ptrdiff_t)s->w
                                ? 0.0
                                : fabs(x[((b * s->c + c) * s->h + (size_t)ih) * s->w + (size_t)iw]);
                    }
                double *o = m->v + ((b * m->tiles + t) * s->c + c) * 81;
                for (int k = 0; k < 5; k++) {
                    for (int l = 0; l < 5; l++) {
                        double acc = 0;
                        for (int i = 0; i < 5; i++)
                            for (int j = 0; j < 5; j++)
                                acc += fabs(nnf_wino2_bt[k][i]) * d[2 * i][2 * j] *
                                       fabs(nnf_wino2_bt[l][j]);
                        o[k * 5 + l] = acc;
                    }
                    for (int j = 0; j < 4; j++) {
                        double acc = 0;
                        for (int i = 0; i < 5; i++)
                            acc += fabs(nnf_wino2_bt[k][i]) * d[2 * i][2 * j + 1];
                        o[25 + k * 4 + j] = acc;
                    }
                }
                for (int i = 0; i < 4; i++) {
                    for (int l = 0; l < 5; l++) {
                        double acc = 0;
                        for (int j = 0; j < 5; j++)
                            acc += d[2 * i + 1][2 * j] * fabs(nnf_wino2_bt[l][j]);
                        o[45 + i * 5 + l] = acc;
                    }
                    for (int j = 0; j < 4; j++)
                        o[65 + i * 4 + j] = d[2 * i + 1][2 * j + 1];
                }
            }
}

static inline double wino2_mag_at(const wino2_mag *m, const nnf_conv2d_shape *s, size_t b, size_t o,
                                  size_t oh, size_t ow) {
    size_t t = (oh / 4) * m->tw + ow / 4, i = oh % 4, j = ow % 4;
    const double *v = m->v + (b * m->tiles + t) * s->c * 81, *u = m->u + o * s->c * 36;
    double acc = 0;
    for (size_t c = 0; c < s->c; c++, v += 81, u += 36) {
        for (int k = 0; k < 5; k++) {
            double ak = fabs(nnf_wino2_at[i][k]);
            for (int l = 0; l < 5; l++)
                acc += ak * fabs(nnf_wino2_at[j][l]) * u[k * 5 + l] * v[k * 5 + l];
            acc += ak * u[25 + k] * v[25 + k * 4 + j];
            acc += fabs(nnf_wino2_at[j][k]) * u[30 + k] * v[45 + i * 5 + k];
        }
        acc += u[35] * v[65 + i * 4 + j];
    }
    return acc;
}

static inline void wino2_mag_free(wino2_mag *m) {
    free(m->u);
    free(m->v);
}

#endif

/* Test helper: the Winograd F(4x4,3x3) error bound (test_conv_fast.c's
 * NCHW kernel and test_conv_nchwc.c's blocked one share it). */
#ifndef NNF_TESTS_WINO_BOUND_H
#define NNF_TESTS_WINO_BOUND_H

#include "kernels/conv_fast.h"

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
    double *u; /* [oc][c][36] */
    double *v; /* [n][tiles][c][36] */
    size_t th, tw;
} wino_mag;

static inline void wino_mag_init(wino_mag *m, const nnf_conv2d_shape *s, const float *x,
                                 const float *w) {
    m->th = (s->oh + 3) / 4;
    m->tw = (s->ow + 3) / 4;
    m->u = malloc(s->oc * s->c * 36 * sizeof(double));
    m->v = malloc(s->n * m->th * m->tw * s->c * 36 * sizeof(double));
    for (size_t i = 0; i < s->oc * s->c; i++)
        for (int k = 0; k < 6; k++)
            for (int l = 0; l < 6; l++) {
                double acc = 0;
                for (int a = 0; a < 3; a++)
                    for (int b = 0; b < 3; b++)
                        acc += fabs(nnf_wino_g[k][a]) * fabs(w[i * 9 + a * 3 + b]) *
                               fabs(nnf_wino_g[l][b]);
                m->u[i * 36 + k * 6 + l] = acc;
            }
    for (size_t b = 0; b < s->n; b++)
        for (size_t t = 0; t < m->th * m->tw; t++)
            for (size_t c = 0; c < s->c; c++) {
                double d[6][6];
                for (int i = 0; i < 6; i++)
                    for (int j = 0; j < 6; j++) {
                        ptrdiff_t ih = (ptrdiff_t)((t / m->tw) * 4 + (size_t)i) - (ptrdiff_t)s->pt;
                        ptrdiff_t iw = (ptrdiff_t)((t % m->tw) * 4 + (size_t)j) - (ptrdiff_t)s->pl;
                        d[i][j] =
                            ih < 0 || iw < 0 || ih >= (ptrdiff_t)s->h || iw >= (ptrdiff_t)s->w
                                ? 0.0
                                : fabs(x[((b * s->c + c) * s->h + (size_t)ih) * s->w + (size_t)iw]);
                    }
                double *o = m->v + ((b * m->th * m->tw + t) * s->c + c) * 36;
                for (int k = 0; k < 6; k++)
                    for (int l = 0; l < 6; l++) {
                        double acc = 0;
                        for (int i = 0; i < 6; i++)
                            for (int j = 0; j < 6; j++)
                                acc += fabs(nnf_wino_bt[k][i]) * d[i][j] * fabs(nnf_wino_bt[l][j]);
                        o[k * 6 + l] = acc;
                    }
            }
}

static inline double wino_mag_at(const wino_mag *m, const nnf_conv2d_shape *s, size_t b, size_t o,
                                 size_t oh, size_t ow) {
    size_t t = (oh / 4) * m->tw + ow / 4, i = oh % 4, j = ow % 4;
    const double *v = m->v + (b * m->th * m->tw + t) * s->c * 36, *u = m->u + o * s->c * 36;
    double acc = 0;
    for (int k = 0; k < 6; k++)
        for (int l = 0; l < 6; l++) {
            double a = fabs(nnf_wino_at[i][k]) * fabs(nnf_wino_at[j][l]);
            if (a == 0)
                continue;
            double sum = 0;
            for (size_t c = 0; c < s->c; c++)
                sum += u[c * 36 + k * 6 + l] * v[c * 36 + k * 6 + l];
            acc += a * sum;
        }
    return acc;
}

static inline void wino_mag_free(wino_mag *m) {
    free(m->u);
    free(m->v);
}

#endif

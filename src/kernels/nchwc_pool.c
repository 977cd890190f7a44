/* MaxPool / AveragePool and the global pools on NCHWc8: the portable tier
 * and the drivers. The window rules are the reference kernel's
 * (kernels/ref/pool.c): taps clipped to the input, the average divided by
 * the taps inside the input, or with count_include_pad by the taps inside
 * the padded input (a ceil_mode window that runs past the end padding
 * counts only up to it). Max starts from the first tap and keeps a NaN only
 * when it is there, as the reference's "v > acc" does; the vector form is
 * max(v, acc), which returns acc when either is NaN. Padding lanes are
 * written as zeros (an empty max window would give -inf). */
#include "kernels/nchwc.h"

#include "kernels/x86/nchwc_avx2.h"

#include <math.h>

static void pool_rows_scalar(const nnf_nchwc_pool_shape *s, const float *x, float *y, size_t nc, size_t oh0,
                             size_t noh) {
    const size_t B = NNF_NCHWC_B;
    for (size_t oh = oh0; oh < oh0 + noh; oh++) {
        ptrdiff_t sh = (ptrdiff_t)(oh * s->sh) - (ptrdiff_t)s->pt;
        size_t h0, h1, ph0, ph1;
        nnf_nchwc_window_taps(sh, s->kh, s->dh, s->h, &h0, &h1);
        nnf_nchwc_window_taps(sh + (ptrdiff_t)s->pt, s->kh, s->dh, s->h + s->pt + s->pb, &ph0, &ph1);
        for (size_t ow = 0; ow < s->ow; ow++) {
            ptrdiff_t sw = (ptrdiff_t)(ow * s->sw) - (ptrdiff_t)s->pl;
            size_t w0, w1, pw0, pw1;
            nnf_nchwc_window_taps(sw, s->kw, s->dw, s->w, &w0, &w1);
            nnf_nchwc_window_taps(sw + (ptrdiff_t)s->pl, s->kw, s->dw, s->w + s->pl + s->pr, &pw0, &pw1);
            float acc[NNF_NCHWC_B];
            for (size_t l = 0; l < B; l++)
                acc[l] = s->is_max ? -INFINITY : 0.0f;
            int first = 1;
            for (size_t i = h0; i < h1; i++) {
                const float *xr = x + (size_t)(sh + (ptrdiff_t)(i * s->dh)) * s->w * B;
                for (size_t j = w0; j < w1; j++) {
                    const float *xp = xr + (size_t)(sw + (ptrdiff_t)(j * s->dw)) * B;
                    for (size_t l = 0; l < B; l++) {
                        if (!s->is_max)
                            acc[l] += xp[l];
                        else if (first || xp[l] > acc[l])
                            acc[l] = xp[l];
                    }
                    first = 0;
                }
            }
            if (!s->is_max) {
                size_t count = s->count_include_pad ? (ph1 - ph0) * (pw1 - pw0) : (h1 - h0) * (w1 - w0);
                for (size_t l = 0; l < B; l++)
                    acc[l] = count ? acc[l] / (float)count : 0.0f;
            }
            float *yp = y + (oh * s->ow + ow) * B;
            for (size_t l = 0; l < B; l++)
                yp[l] = l < nc ? acc[l] : 0.0f;
        }
    }
}

typedef struct pool_job {
    const nnf_nchwc_pool_shape *s;
    const float *x;
    float *y;
    size_t cb;
    nnf_isa isa;
} pool_job;

static void pool_task(void *ctx, size_t i, size_t j, size_t ni, size_t nj) {
    const pool_job *p = ctx;
    const nnf_nchwc_pool_shape *s = p->s;
    size_t in_plane = s->h * s->w * NNF_NCHWC_B, out_plane = s->oh * s->ow * NNF_NCHWC_B;
    for (size_t it = i; it < i + ni; it++) {
        size_t c0 = it % p->cb * NNF_NCHWC_B, nc = s->c - c0 < NNF_NCHWC_B ? s->c - c0 : NNF_NCHWC_B;
        if (p->isa >= NNF_ISA_AVX2)
            nnf_nchwc_pool_rows_avx2(s, p->x + it * in_plane, p->y + it * out_plane, nc, j, nj);
        else
            pool_rows_scalar(s, p->x + it * in_plane, p->y + it * out_plane, nc, j, nj);
    }
}

void nnf_nchwc_pool(const nnf_nchwc_pool_shape *s, const float *x, float *y, nnf_isa isa, nnf_threadpool *pool) {
    if (s->n == 0 || s->c == 0 || s->oh == 0 || s->ow == 0)
        return;
    pool_job p = {.s = s, .x = x, .y = y, .cb = nnf_nchwc_blocks(s->c), .isa = isa};
    size_t planes = s->n * p.cb, want = (size_t)nnf_threadpool_size(pool) * 4, rows = s->oh;
    if (planes < want) {
        size_t per_plane = (want + planes - 1) / planes;
        rows = (s->oh + per_plane - 1) / per_plane;
    }
    nnf_parallel_for_2d(pool, planes, s->oh, 1, rows ? rows : 1, pool_task, &p);
}

/* ---- global pools ---- */

/* Sums in double like the reference (a long 1-D plane loses bits in float);
 * max ignores NaN like the reference's "x > m" from -inf. */
static void global_block_scalar(const float *x, size_t hw, int is_max, size_t nc, float *y) {
    for (size_t l = 0; l < nc; l++) {
        if (is_max) {
            float m = -INFINITY;
            for (size_t p = 0; p < hw; p++)
                m = x[p * NNF_NCHWC_B + l] > m ? x[p * NNF_NCHWC_B + l] : m;
            y[l] = m;
        } else {
            double acc = 0.0;
            for (size_t p = 0; p < hw; p++)
                acc += x[p * NNF_NCHWC_B + l];
            y[l] = hw ? (float)(acc / (double)hw) : 0.0f;
        }
    }
}

typedef struct global_job {
    const float *x;
    float *y;
    size_t c, cb, hw;
    int is_max;
    nnf_isa isa;
} global_job;

static void global_task(void *ctx, size_t it) {
    const global_job *g = ctx;
    size_t b = it / g->cb, c0 = it % g->cb * NNF_NCHWC_B;
    size_t nc = g->c - c0 < NNF_NCHWC_B ? g->c - c0 : NNF_NCHWC_B;
    const float *x = g->x + it * g->hw * NNF_NCHWC_B;
    float *y = g->y + b * g->c + c0;
    if (g->isa >= NNF_ISA_AVX512)
        nnf_nchwc_global_block_avx512(x, g->hw, g->is_max, nc, y);
    else if (g->isa >= NNF_ISA_AVX2)
        nnf_nchwc_global_block_avx2(x, g->hw, g->is_max, nc, y);
    else
        global_block_scalar(x, g->hw, g->is_max, nc, y);
}

void nnf_nchwc_global_pool(const float *x, float *y, size_t n, size_t c, size_t hw, int is_max, nnf_isa isa,
                           nnf_threadpool *pool) {
    global_job g = {.x = x, .y = y, .c = c, .cb = nnf_nchwc_blocks(c), .hw = hw, .is_max = is_max, .isa = isa};
    nnf_parallel_for(pool, n * g.cb, global_task, &g);
}

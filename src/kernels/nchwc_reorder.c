/* NCHW <-> NCHWc8 reorders: the edges of every blocked region of a graph,
 * so they should run at memory speed. Work items are (image, channel block)
 * x a run of pixels; each item reads 8 planes and writes one block, which
 * keeps both sides streaming. The AVX2 tier transposes 8x8 tiles in
 * registers (x86/nchwc_avx2.c). */
#include "kernels/nchwc.h"

#include "kernels/x86/nchwc_avx2.h"

#include <string.h>

/* Pixels per work item: 1024 pixels x 8 channels is 32 KiB each way, big
 * enough to hide the per-item cost, small enough for two cores to share a
 * 7x7 layer's handful of blocks. */
#define REORDER_TILE 1024

typedef struct reorder_job {
    const float *x;
    float *y;
    size_t c, cb, hw;
    int to_nchw;
    nnf_isa isa;
} reorder_job;

static void from_tile_scalar(const float *x, size_t hw, size_t nc, size_t np, float *y) {
    for (size_t p = 0; p < np; p++) {
        for (size_t l = 0; l < nc; l++)
            y[p * NNF_NCHWC_B + l] = x[l * hw + p];
        for (size_t l = nc; l < NNF_NCHWC_B; l++)
            y[p * NNF_NCHWC_B + l] = 0.0f;
    }
}

static void to_tile_scalar(const float *x, size_t hw, size_t nc, size_t np, float *y) {
    for (size_t l = 0; l < nc; l++)
        for (size_t p = 0; p < np; p++)
            y[l * hw + p] = x[p * NNF_NCHWC_B + l];
}

void nnf_nchwc_to_cl_pixels(const float *x, size_t xblk, size_t cb0, size_t nb, size_t c, size_t np,
                            float *y, size_t plane, size_t cl, nnf_isa isa) {
    if (isa >= NNF_ISA_AVX2) {
        nnf_nchwc_to_cl_pixels_avx2(x, xblk, cb0, nb, c, np, y, plane, cl);
        return;
    }
    size_t c0 = cb0 * NNF_NCHWC_B, c1 = (cb0 + nb) * NNF_NCHWC_B < c ? (cb0 + nb) * NNF_NCHWC_B : c;
    for (size_t p = 0; p < np; p++)
        for (size_t ch = c0, a = c0 / cl, i = c0 % cl; ch < c1; ch++) {
            y[(a * plane + p) * cl + i] =
                x[(ch / NNF_NCHWC_B - cb0) * xblk + p * NNF_NCHWC_B + ch % NNF_NCHWC_B];
            if (++i == cl) {
                a++;
                i = 0;
            }
        }
}

void nnf_nchwc_to_nchw_block(const float *x, size_t hw, size_t nc, size_t np, float *y, nnf_isa isa) {
    if (isa >= NNF_ISA_AVX2)
        nnf_nchwc_to_nchw_tile_avx2(x, hw, nc, np, y);
    else
        to_tile_scalar(x, hw, nc, np, y);
}

void nnf_nchwc_from_nchw_block(const float *x, size_t hw, size_t nc, size_t np, float *y,
                               nnf_isa isa) {
    if (isa >= NNF_ISA_AVX2)
        nnf_nchwc_from_nchw_tile_avx2(x, hw, nc, np, y);
    else
        from_tile_scalar(x, hw, nc, np, y);
}

/* i: image * cb + block; j: first pixel of the run. */
static void reorder_task(void *ctx, size_t i, size_t j, size_t ni, size_t nj) {
    const reorder_job *r = ctx;
    for (size_t it = i; it < i + ni; it++) {
        size_t b = it / r->cb, blk = it % r->cb, c0 = blk * NNF_NCHWC_B;
        size_t nc = r->c - c0 < NNF_NCHWC_B ? r->c - c0 : NNF_NCHWC_B;
        size_t plain = (b * r->c + c0) * r->hw + j;
        size_t blocked = (it * r->hw + j) * NNF_NCHWC_B;
        if (r->to_nchw) {
            nnf_nchwc_to_nchw_block(r->x + blocked, r->hw, nc, nj, r->y + plain, r->isa);
        } else {
            nnf_nchwc_from_nchw_block(r->x + plain, r->hw, nc, nj, r->y + blocked, r->isa);
        }
    }
}

static void reorder_run(const float *x, float *y, size_t n, size_t c, size_t hw, int to_nchw, nnf_isa isa,
                        nnf_threadpool *pool) {
    if (n == 0 || c == 0 || hw == 0)
        return;
    reorder_job r = {.x = x, .y = y, .c = c, .cb = nnf_nchwc_blocks(c), .hw = hw, .to_nchw = to_nchw,
                     .isa = isa};
    nnf_parallel_for_2d(pool, n * r.cb, hw, 1, REORDER_TILE, reorder_task, &r);
}

void nnf_nchwc_from_nchw(const float *x, float *y, size_t n, size_t c, size_t hw, nnf_isa isa,
                         nnf_threadpool *pool) {
    reorder_run(x, y, n, c, hw, 0, isa, pool);
}

void nnf_nchwc_to_nchw(const float *x, float *y, size_t n, size_t c, size_t hw, nnf_isa isa,
                       nnf_threadpool *pool) {
    reorder_run(x, y, n, c, hw, 1, isa, pool);
}

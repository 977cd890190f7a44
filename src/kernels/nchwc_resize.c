/* Nearest Resize on NCHWc8: a gather of whole 8-channel pixels by the plan's
 * row and column tables, so every nearest mode and scale is the same loop.
 * Padding lanes are copied, and so stay zero. Work items are (image, block)
 * x a run of output rows. */
#include "kernels/nchwc.h"

#include "kernels/x86/nchwc_avx2.h"

#include <string.h>

typedef struct resize_job {
    const float *x;
    float *y;
    size_t ih, iw, oh, ow;
    const int32_t *rows, *cols;
    nnf_isa isa;
} resize_job;

static void resize_rows_scalar(const float *x, float *y, size_t iw, size_t ow, const int32_t *rows,
                               const int32_t *cols, size_t oh0, size_t noh) {
    for (size_t i = oh0; i < oh0 + noh; i++) {
        const float *xr = x + (size_t)rows[i] * iw * NNF_NCHWC_B;
        float *yr = y + i * ow * NNF_NCHWC_B;
        for (size_t j = 0; j < ow; j++)
            memcpy(yr + j * NNF_NCHWC_B, xr + (size_t)cols[j] * NNF_NCHWC_B, NNF_NCHWC_B * sizeof(float));
    }
}

static void resize_task(void *ctx, size_t i, size_t j, size_t ni, size_t nj) {
    const resize_job *r = ctx;
    size_t in_plane = r->ih * r->iw * NNF_NCHWC_B, out_plane = r->oh * r->ow * NNF_NCHWC_B;
    for (size_t it = i; it < i + ni; it++) {
        if (r->isa >= NNF_ISA_AVX2)
            nnf_nchwc_resize_rows_avx2(r->x + it * in_plane, r->y + it * out_plane, r->iw, r->ow, r->rows, r->cols,
                                       j, nj);
        else
            resize_rows_scalar(r->x + it * in_plane, r->y + it * out_plane, r->iw, r->ow, r->rows, r->cols, j, nj);
    }
}

void nnf_nchwc_resize_nearest(const float *x, float *y, size_t n, size_t c, size_t ih, size_t iw, size_t oh,
                              size_t ow, const int32_t *rows, const int32_t *cols, nnf_isa isa,
                              nnf_threadpool *pool) {
    if (n == 0 || c == 0 || oh == 0 || ow == 0)
        return;
    resize_job r = {.x = x, .y = y, .ih = ih, .iw = iw, .oh = oh, .ow = ow, .rows = rows, .cols = cols, .isa = isa};
    size_t planes = n * nnf_nchwc_blocks(c), want = (size_t)nnf_threadpool_size(pool) * 4, tile = oh;
    if (planes < want) {
        size_t per_plane = (want + planes - 1) / planes;
        tile = (oh + per_plane - 1) / per_plane;
    }
    nnf_parallel_for_2d(pool, planes, oh, 1, tile ? tile : 1, resize_task, &r);
}

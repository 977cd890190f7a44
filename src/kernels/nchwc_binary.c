/* Add / Sub / Mul of a blocked tensor and a per-channel operand on NCHWc8
 * (kernels/nchwc.h): the squeeze-and-excitation scale of EfficientNet and
 * MobileNetV3 blocks, y = x * sigmoid(conv(conv(GlobalAveragePool(x)))),
 * without reordering x out of the blocked layout and the product back in
 * (two reorders of the whole tensor a block, which the NCHW Mul needed).
 * Work items are (image, block) planes cut into runs of pixels; every value
 * is one operation whatever the split. */
#include "kernels/nchwc.h"

#include "kernels/eltwise_fast.h"
#include "kernels/x86/nchwc_avx2.h"

/* Pixels per work item: runs of about 64 KiB. */
#define CHANNEL_RUN_PIXELS 2048

static void channel_rows_scalar(int op, const float *x, const float *v, float *y, size_t np,
                                int v_first) {
    for (size_t p = 0; p < np; p++)
        for (size_t l = 0; l < NNF_NCHWC_B; l++) {
            float a = x[p * NNF_NCHWC_B + l], c = v[l];
            y[p * NNF_NCHWC_B + l] = op == NNF_EWB_MUL   ? a * c
                                     : op == NNF_EWB_ADD ? a + c
                                     : v_first           ? c - a
                                                         : a - c;
        }
}

typedef struct channel_job {
    int op, v_per_image, v_first;
    const float *x, *v;
    float *y;
    size_t cb, hw;
    nnf_isa isa;
} channel_job;

static void channel_task(void *ctx, size_t i, size_t j, size_t ni, size_t nj) {
    const channel_job *c = ctx;
    for (size_t it = i; it < i + ni; it++) {
        size_t at = (it * c->hw + j) * NNF_NCHWC_B;
        const float *v = c->v + (c->v_per_image ? it : it % c->cb) * NNF_NCHWC_B;
        if (c->isa >= NNF_ISA_AVX2)
            nnf_nchwc_channel_rows_avx2(c->op, c->x + at, v, c->y + at, nj, c->v_first);
        else
            channel_rows_scalar(c->op, c->x + at, v, c->y + at, nj, c->v_first);
    }
}

void nnf_nchwc_channel_binary(int op, const float *x, const float *v, float *y, size_t n, size_t cb,
                              size_t hw, int v_per_image, int v_first, nnf_isa isa,
                              nnf_threadpool *pool) {
    if (n == 0 || cb == 0 || hw == 0)
        return;
    channel_job c = {.op = op,
                     .v_per_image = v_per_image,
                     .v_first = v_first,
                     .x = x,
                     .v = v,
                     .y = y,
                     .cb = cb,
                     .hw = hw,
                     .isa = isa};
    /* small planes (7x7 maps) several to an item, leaving two items a thread */
    size_t planes = n * cb, per = hw < CHANNEL_RUN_PIXELS ? CHANNEL_RUN_PIXELS / hw : 1;
    size_t spread = planes / (2 * (size_t)nnf_threadpool_size(pool));
    per = per < spread ? per : spread ? spread : 1;
    nnf_parallel_for_2d(pool, planes, hw, per, CHANNEL_RUN_PIXELS, channel_task, &c);
}

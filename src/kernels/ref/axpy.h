/* The inner loops the reference conv and matmul kernels share. */
#ifndef NNF_KERNELS_REF_AXPY_H
#define NNF_KERNELS_REF_AXPY_H

#include <stdint.h>

/* y += a * x. Written out eight wide so that -O2's basic-block vectoriser
 * emits vector code: its loop vectoriser declines loops needing a remainder. */
static inline void axpy(int64_t n, float a, const float *restrict x, float *restrict y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        y[i] += a * x[i];
        y[i + 1] += a * x[i + 1];
        y[i + 2] += a * x[i + 2];
        y[i + 3] += a * x[i + 3];
        y[i + 4] += a * x[i + 4];
        y[i + 5] += a * x[i + 5];
        y[i + 6] += a * x[i + 6];
        y[i + 7] += a * x[i + 7];
    }
    for (; i < n; i++)
        y[i] += a * x[i];
}

static inline void axpy_strided(int64_t n, float a, const float *restrict x, int64_t sx, float *restrict y) {
    for (int64_t i = 0; i < n; i++)
        y[i] += a * x[i * sx];
}

#endif

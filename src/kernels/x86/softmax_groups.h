/* The SIMD tiers' softmax over rows in groups (x86/eltwise_avx2.c,
 * x86/eltwise_avx512.c): rows of n up to LIMIT long, R at a time from row r
 * on, each group through ROWS(x, y, n, log, next, R), an always-inline
 * function of constant R; next is the group after it (the kernel fetches its
 * lines as the group's exponential pass goes), NULL for the last one. The
 * tiers differ in their groups (AVX-512 8, 4, 2, 1; AVX2 4, 2, 1) and in the
 * registers ROWS holds them in. */
#ifndef NNF_KERNELS_X86_SOFTMAX_GROUPS_H
#define NNF_KERNELS_X86_SOFTMAX_GROUPS_H

#include <stddef.h>
#include <stdint.h> /* SIZE_MAX, the callers' last group */

#define NNF_SOFTMAX_GROUPS(ROWS, x, y, r, rows, n, log, R, LIMIT)                                  \
    do {                                                                                           \
        if ((n) <= (LIMIT))                                                                        \
            for (; (r) + (R) <= (rows); (r) += (R))                                                \
                ROWS((x) + (r) * (n), (y) + (r) * (n), (n), (log),                                 \
                     (r) + 2 * (R) <= (rows) ? (x) + ((r) + (R)) * (n) : NULL, (R));               \
    } while (0)

#endif

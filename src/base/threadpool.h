/* A persistent thread pool. The caller's thread takes part in every
 * parallel_for; workers spin briefly, then sleep on a condition variable, so an
 * idle pool burns no CPU. A NULL pool (or one of size 1) runs work inline on
 * the caller. Work is split into the same items for a given n and tile, so
 * results do not depend on timing. */
#ifndef NNF_BASE_THREADPOOL_H
#define NNF_BASE_THREADPOOL_H

#include "base/status.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nnf_threadpool nnf_threadpool;

/* threads: 0 = all online cores. threads == 1 yields *out = NULL (inline). */
nnf_status nnf_threadpool_create(int threads, nnf_threadpool **out);
void nnf_threadpool_destroy(nnf_threadpool *pool);
/* Number of threads that execute work, caller included (1 for NULL). */
int nnf_threadpool_size(const nnf_threadpool *pool);

/* fn(ctx, i) for i in [0, n). */
typedef void (*nnf_task_1d_fn)(void *ctx, size_t i);
void nnf_parallel_for(nnf_threadpool *pool, size_t n, nnf_task_1d_fn fn, void *ctx);

/* fn(ctx, i, j, ni, nj) over tiles: i in [0, range_i) step tile_i, j likewise;
 * ni/nj are the tile's extents (smaller at the edges). */
typedef void (*nnf_task_2d_fn)(void *ctx, size_t i, size_t j, size_t ni, size_t nj);
void nnf_parallel_for_2d(nnf_threadpool *pool, size_t range_i, size_t range_j, size_t tile_i,
                         size_t tile_j, nnf_task_2d_fn fn, void *ctx);

/* Accounting for the profiler: while on, every parallel job adds its wall
 * time times the pool's threads to thread_ns and each thread's time in its
 * items to busy_ns (cumulative, from the pool's creation; a few clock reads a
 * job). busy / thread over a span of jobs is how much of the threads' time
 * they worked; the rest they waited at the job's end for the slowest, or
 * joined late. Off by default. */
void nnf_threadpool_account(nnf_threadpool *pool, bool on);
void nnf_threadpool_usage(nnf_threadpool *pool, uint64_t *thread_ns, uint64_t *busy_ns);

/* Scratch slots for tasks: a task claims a free one of the n flags (as many
 * slots as threads, so one is free but for the instant between one task
 * ending and the next starting: it spins) and releases it when done. */
int nnf_slot_claim(atomic_int *busy, int n);
void nnf_slot_release(atomic_int *busy, int slot);

#endif

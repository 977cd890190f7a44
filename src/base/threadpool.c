/* Thread pool: workers park on a generation counter. A job is published by
 * bumping the generation; workers spin on it for a short while (so back-to-back
 * kernels of one inference do not pay a wake-up), then sleep on a condition
 * variable. Items are claimed from a shared atomic counter: which thread runs
 * an item varies, but the items (and so every result) do not. */
#include "base/threadpool.h"

#include "base/alloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

/* About 50-100 us of polling before a worker sleeps. */
#define NNF_SPIN_ITERS 4000

typedef struct job {
    nnf_task_1d_fn fn1;
    nnf_task_2d_fn fn2;
    void *ctx;
    size_t n;                       /* items */
    size_t range_i, range_j, tile_i, tile_j, tiles_j;
} job;

struct nnf_threadpool {
    int threads; /* caller included */
    pthread_t *workers;
    int n_workers;

    pthread_mutex_t submit; /* one job at a time when several threads share a pool */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_cond_t done;
    int sleepers;      /* workers waiting on wake (under lock) */
    bool caller_waits; /* the caller sleeps on done (under lock) */
    bool stop;

    atomic_uint_fast64_t generation;
    atomic_size_t next;    /* next unclaimed item */
    atomic_int remaining;  /* workers that have not finished the current job */
    job cur;
};

/* Set while a thread runs pool work, so a nested parallel_for runs inline
 * instead of deadlocking on the pool it is part of. */
static _Thread_local bool t_in_pool;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void run_item(const job *j, size_t idx) {
    if (j->fn1) {
        j->fn1(j->ctx, idx);
        return;
    }
    size_t ti = idx / j->tiles_j, tj = idx % j->tiles_j;
    size_t i = ti * j->tile_i, jj = tj * j->tile_j;
    size_t ni = j->range_i - i < j->tile_i ? j->range_i - i : j->tile_i;
    size_t nj = j->range_j - jj < j->tile_j ? j->range_j - jj : j->tile_j;
    j->fn2(j->ctx, i, jj, ni, nj);
}

static void drain(nnf_threadpool *p) {
    const job *j = &p->cur;
    for (;;) {
        size_t idx = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (idx >= j->n)
            break;
        run_item(j, idx);
    }
}

static void *worker_main(void *arg) {
    nnf_threadpool *p = arg;
    t_in_pool = true;
    uint_fast64_t seen = 0;
    for (;;) {
        uint_fast64_t gen = atomic_load_explicit(&p->generation, memory_order_acquire);
        for (int s = 0; gen == seen && s < NNF_SPIN_ITERS; s++) {
            cpu_relax();
            gen = atomic_load_explicit(&p->generation, memory_order_acquire);
        }
        if (gen == seen) {
            pthread_mutex_lock(&p->lock);
            while (!p->stop && (gen = atomic_load(&p->generation)) == seen) {
                p->sleepers++;
                pthread_cond_wait(&p->wake, &p->lock);
                p->sleepers--;
            }
            bool stop = p->stop;
            pthread_mutex_unlock(&p->lock);
            if (stop)
                return NULL;
        }
        seen = gen;
        drain(p);
        if (atomic_fetch_sub_explicit(&p->remaining, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->lock);
            if (p->caller_waits)
                pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->lock);
        }
    }
}

nnf_status nnf_threadpool_create(int threads, nnf_threadpool **out) {
    *out = NULL;
    if (threads < 0)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "thread count %d is negative", threads);
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n > 0 ? (int)n : 1;
    }
    if (threads == 1)
        return NNF_OK;
    nnf_threadpool *p = nnf_calloc(1, sizeof *p);
    if (!p)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for a thread pool");
    p->threads = threads;
    p->workers = nnf_calloc((size_t)threads - 1, sizeof *p->workers);
    if (!p->workers) {
        nnf_free(p);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for a thread pool of %d", threads);
    }
    pthread_mutex_init(&p->submit, NULL);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->remaining, 0);
    for (int i = 0; i < threads - 1; i++) {
        if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
            nnf_threadpool_destroy(p);
            return nnf_error(NNF_ERR_INTERNAL, "could not start worker thread %d of %d", i + 1,
                             threads);
        }
        p->n_workers++;
    }
    *out = p;
    return NNF_OK;
}

void nnf_threadpool_destroy(nnf_threadpool *p) {
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->n_workers; i++)
        pthread_join(p->workers[i], NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->submit);
    nnf_free(p->workers);
    nnf_free(p);
}

int nnf_threadpool_size(const nnf_threadpool *pool) { return pool ? pool->threads : 1; }

static void run_job(nnf_threadpool *p, const job *j) {
    pthread_mutex_lock(&p->submit);
    p->cur = *j;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store_explicit(&p->remaining, p->n_workers, memory_order_relaxed);
    /* Publishing under the lock pairs with the sleepers' re-check, so no
     * worker can miss the new generation between its check and its wait. */
    pthread_mutex_lock(&p->lock);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
    if (p->sleepers)
        pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);

    t_in_pool = true;
    drain(p);
    t_in_pool = false;

    for (int s = 0; atomic_load_explicit(&p->remaining, memory_order_acquire) > 0; s++) {
        if (s < NNF_SPIN_ITERS) {
            cpu_relax();
            continue;
        }
        pthread_mutex_lock(&p->lock);
        p->caller_waits = true;
        while (atomic_load_explicit(&p->remaining, memory_order_acquire) > 0)
            pthread_cond_wait(&p->done, &p->lock);
        p->caller_waits = false;
        pthread_mutex_unlock(&p->lock);
        break;
    }
    pthread_mutex_unlock(&p->submit);
}

void nnf_parallel_for(nnf_threadpool *pool, size_t n, nnf_task_1d_fn fn, void *ctx) {
    if (!pool || n <= 1 || t_in_pool) {
        for (size_t i = 0; i < n; i++)
            fn(ctx, i);
        return;
    }
    job j = {.fn1 = fn, .ctx = ctx, .n = n};
    run_job(pool, &j);
}

void nnf_parallel_for_2d(nnf_threadpool *pool, size_t range_i, size_t range_j, size_t tile_i,
                         size_t tile_j, nnf_task_2d_fn fn, void *ctx) {
    if (range_i == 0 || range_j == 0)
        return;
    if (tile_i == 0)
        tile_i = 1;
    if (tile_j == 0)
        tile_j = 1;
    size_t ti = (range_i + tile_i - 1) / tile_i, tj = (range_j + tile_j - 1) / tile_j;
    job j = {.fn2 = fn, .ctx = ctx, .n = ti * tj, .range_i = range_i, .range_j = range_j,
             .tile_i = tile_i, .tile_j = tile_j, .tiles_j = tj};
    if (!pool || j.n <= 1 || t_in_pool) {
        for (size_t idx = 0; idx < j.n; idx++)
            run_item(&j, idx);
        return;
    }
    run_job(pool, &j);
}

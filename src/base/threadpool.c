/* Thread pool. A job is published by opening a new epoch in one atomic word
 * that also counts the workers inside the job; workers spin on it for a while
 * (so the back-to-back kernels of one inference never pay a wake-up), then
 * sleep on a condition variable. The caller drains items too and, once every
 * item is claimed, closes the epoch and waits only for the workers that
 * joined: a worker that was asleep and wakes late finds the epoch closed and
 * does nothing, so a small job never waits for a wake-up. The items are cut
 * into one contiguous range per thread, each with its own counter: a thread
 * drains its own range first, then helps with the others'. Which thread runs
 * an item varies, the items (and so every result) do not. */
#include "base/threadpool.h"

#include "base/alloc.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long a worker polls for the next job before it sleeps. Long enough to
 * bridge the serial stretches between the parallel kernels of one inference
 * (a reference kernel, a small op run inline), short enough that an idle
 * pool stops burning CPU within a millisecond of the last run. */
#define NNF_SPIN_NS 1000000
/* Pure pause-spinning for the first part; after that each poll also yields,
 * so a spinning worker gives its core up to a runnable thread (the caller's
 * own thread on a loaded machine) instead of starving it. */
#define NNF_SPIN_HOT_NS 100000

/* state = epoch << 33 | closed << 32 | workers inside the job */
#define ST_COUNT_MASK 0xffffffffull
#define ST_CLOSED (1ull << 32)
#define ST_EPOCH_SHIFT 33

typedef struct job {
    nnf_task_1d_fn fn1;
    nnf_task_2d_fn fn2;
    void *ctx;
    size_t n; /* items */
    size_t range_i, range_j, tile_i, tile_j, tiles_j;
    bool account; /* time each thread's drain (nnf_threadpool_account, read once a job) */
} job;

/* One thread's range of the current job's items: [next, end) unclaimed.
 * With accounting on, the thread's time in the job's items (drain), or 0 if
 * it did not join (zeroed as the submitting thread adds it up). */
typedef struct range {
    _Alignas(64) atomic_size_t next;
    size_t end;
    uint64_t busy_ns;
} range;

typedef struct worker_arg {
    struct nnf_threadpool *p;
    int self; /* this worker's range: 1..threads-1 (the caller's is 0) */
} worker_arg;

struct nnf_threadpool {
    int threads; /* caller included */
    pthread_t *workers;
    worker_arg *args;
    int n_workers;
    range *ranges; /* threads of them */

    pthread_mutex_t submit; /* one job at a time when several threads share a pool */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_cond_t done;
    int sleepers;      /* workers waiting on wake (under lock) */
    bool caller_waits; /* the caller sleeps on done (under lock) */
    bool stop;
    job cur; /* written only while the epoch is closed with no worker inside */
    /* accounting (nnf_threadpool_account), written by the submitting thread
     * under `submit` */
    atomic_bool account;
    uint64_t jobs_ns, busy_ns;

    /* The hot word on its own cache line: workers poll it. */
    _Alignas(64) _Atomic uint64_t state;
    char pad_[64 - sizeof(uint64_t)];
};

/* Set while a thread runs pool work, so a nested parallel_for runs inline
 * instead of deadlocking on the pool it is part of. */
static _Thread_local bool t_in_pool;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One poll step of a spin that started at t0 (0: not started, set here).
 * Returns false once the spin budget is spent. */
static bool spin_step(uint64_t *t0, unsigned *polls) {
    cpu_relax();
    if ((++*polls & 63) != 0)
        return true;
    uint64_t t = now_ns();
    if (!*t0)
        *t0 = t;
    uint64_t dt = t - *t0;
    if (dt >= NNF_SPIN_NS)
        return false;
    if (dt >= NNF_SPIN_HOT_NS)
        sched_yield();
    return true;
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

/* Thread `self` drains its own range, then the others' in turn. Consecutive
 * kernels cut their items alike (rows, pixel chunks, tile blocks in order),
 * so a thread mostly reads what it wrote in the previous kernel, from its
 * own L2: with one shared counter the split point moved from kernel to
 * kernel and about half of each input came from the other core.
 * Items are claimed in runs that shrink as a range drains (a quarter of
 * what is left, down to one): one item a claim cost more than the items of
 * the small ops themselves (a 7x7 depthwise conv's 120 planes of 49
 * pixels), and a last long run would leave a helper nothing to take. */
static void drain(nnf_threadpool *p, int self) {
    const job *j = &p->cur;
    for (int k = 0; k < p->threads; k++) {
        range *r = &p->ranges[(self + k) % p->threads];
        for (;;) {
            size_t seen = atomic_load_explicit(&r->next, memory_order_relaxed);
            if (seen >= r->end)
                break;
            size_t run = (r->end - seen) / 4;
            run = run ? run : 1;
            size_t idx = atomic_fetch_add_explicit(&r->next, run, memory_order_relaxed);
            if (idx >= r->end)
                break;
            size_t end = r->end - idx < run ? r->end : idx + run;
            for (; idx < end; idx++)
                run_item(j, idx);
        }
    }
}

/* drain(), its time recorded in the thread's range when accounting. */
static void drain_timed(nnf_threadpool *p, int self, bool account) {
    if (!account) {
        drain(p, self);
        return;
    }
    uint64_t t0 = now_ns();
    drain(p, self);
    p->ranges[self].busy_ns = now_ns() - t0;
}

/* An open job this worker has not seen yet? */
static inline bool has_new_job(uint64_t s, uint64_t seen_epoch) {
    return !(s & ST_CLOSED) && (s >> ST_EPOCH_SHIFT) != seen_epoch;
}

static void *worker_main(void *arg) {
    nnf_threadpool *p = ((worker_arg *)arg)->p;
    const int self = ((worker_arg *)arg)->self;
    t_in_pool = true;
    uint64_t seen = 0;
    for (;;) {
        uint64_t s = atomic_load_explicit(&p->state, memory_order_acquire);
        uint64_t t0 = 0;
        unsigned polls = 0;
        while (!has_new_job(s, seen) && spin_step(&t0, &polls))
            s = atomic_load_explicit(&p->state, memory_order_acquire);
        if (!has_new_job(s, seen)) {
            pthread_mutex_lock(&p->lock);
            while (!p->stop && !has_new_job(s = atomic_load(&p->state), seen)) {
                p->sleepers++;
                pthread_cond_wait(&p->wake, &p->lock);
                p->sleepers--;
            }
            bool stop = p->stop;
            pthread_mutex_unlock(&p->lock);
            if (stop)
                return NULL;
        }
        seen = s >> ST_EPOCH_SHIFT;
        /* Join only while the epoch is still open: once the caller closes it,
         * p->cur may be rewritten for the next job. */
        bool joined = false;
        while (!(s & ST_CLOSED) && (s >> ST_EPOCH_SHIFT) == seen) {
            if (atomic_compare_exchange_weak_explicit(&p->state, &s, s + 1, memory_order_acquire,
                                                      memory_order_acquire)) {
                joined = true;
                break;
            }
        }
        if (!joined)
            continue;
        drain_timed(p, self, p->cur.account);
        uint64_t old = atomic_fetch_sub_explicit(&p->state, 1, memory_order_acq_rel);
        if ((old & ST_COUNT_MASK) == 1 && (old & ST_CLOSED)) {
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
    nnf_threadpool *p = nnf_malloc_aligned(sizeof *p);
    if (!p)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for a thread pool");
    memset(p, 0, sizeof *p);
    p->threads = threads;
    p->workers = nnf_calloc((size_t)threads - 1, sizeof *p->workers);
    p->args = nnf_calloc((size_t)threads - 1, sizeof *p->args);
    p->ranges = nnf_malloc_aligned((size_t)threads * sizeof *p->ranges);
    if (!p->workers || !p->args || !p->ranges) {
        nnf_free(p->workers);
        nnf_free(p->args);
        nnf_free_aligned(p->ranges);
        nnf_free_aligned(p);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for a thread pool of %d", threads);
    }
    for (int i = 0; i < threads; i++) {
        atomic_init(&p->ranges[i].next, 0);
        p->ranges[i].end = 0;
    }
    pthread_mutex_init(&p->submit, NULL);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    /* Epoch 0 closed: a worker starts with nothing to join. */
    atomic_init(&p->state, ST_CLOSED);
    atomic_init(&p->account, false);
    for (int i = 0; i < threads - 1; i++) {
        p->args[i] = (worker_arg){.p = p, .self = i + 1};
        if (pthread_create(&p->workers[i], NULL, worker_main, &p->args[i]) != 0) {
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
    nnf_free(p->args);
    nnf_free_aligned(p->ranges);
    nnf_free_aligned(p);
}

int nnf_threadpool_size(const nnf_threadpool *pool) {
    return pool ? pool->threads : 1;
}

static void run_job(nnf_threadpool *p, const job *j) {
    pthread_mutex_lock(&p->submit);
    /* The previous epoch is closed with no worker inside, so nobody reads cur. */
    p->cur = *j;
    /* read once: the workers that join time their drains by the job's copy */
    bool account = p->cur.account = atomic_load_explicit(&p->account, memory_order_relaxed);
    for (int r = 0; r < p->threads; r++) {
        atomic_store_explicit(&p->ranges[r].next, j->n * (size_t)r / (size_t)p->threads,
                              memory_order_relaxed);
        p->ranges[r].end = j->n * (size_t)(r + 1) / (size_t)p->threads;
    }
    uint64_t t_start = account ? now_ns() : 0;
    uint64_t epoch = (atomic_load_explicit(&p->state, memory_order_relaxed) >> ST_EPOCH_SHIFT) + 1;
    epoch &= (1ull << (64 - ST_EPOCH_SHIFT)) - 1;
    /* Only sleepers need the lock: publishing under it pairs with their
     * re-check, so none misses the epoch between its check and its wait. */
    pthread_mutex_lock(&p->lock);
    atomic_store_explicit(&p->state, epoch << ST_EPOCH_SHIFT, memory_order_release);
    if (p->sleepers)
        pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);

    t_in_pool = true;
    drain_timed(p, 0, account);
    t_in_pool = false;

    /* Every item is claimed: close the epoch, then wait for the workers that
     * joined to finish theirs. */
    uint64_t s = atomic_fetch_or_explicit(&p->state, ST_CLOSED, memory_order_acq_rel) | ST_CLOSED;
    uint64_t t0 = 0;
    unsigned polls = 0;
    while ((s & ST_COUNT_MASK) != 0) {
        if (spin_step(&t0, &polls)) {
            s = atomic_load_explicit(&p->state, memory_order_acquire);
            continue;
        }
        pthread_mutex_lock(&p->lock);
        p->caller_waits = true;
        while ((atomic_load_explicit(&p->state, memory_order_acquire) & ST_COUNT_MASK) != 0)
            pthread_cond_wait(&p->done, &p->lock);
        p->caller_waits = false;
        pthread_mutex_unlock(&p->lock);
        break;
    }
    if (account) {
        /* every joined worker left (acquire above): its busy_ns is written */
        p->jobs_ns += (now_ns() - t_start) * (uint64_t)p->threads;
        for (int r = 0; r < p->threads; r++) {
            p->busy_ns += p->ranges[r].busy_ns;
            p->ranges[r].busy_ns = 0; /* a thread that does not join the next job adds 0 */
        }
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
    job j = {.fn2 = fn,
             .ctx = ctx,
             .n = ti * tj,
             .range_i = range_i,
             .range_j = range_j,
             .tile_i = tile_i,
             .tile_j = tile_j,
             .tiles_j = tj};
    if (!pool || j.n <= 1 || t_in_pool) {
        for (size_t idx = 0; idx < j.n; idx++)
            run_item(&j, idx);
        return;
    }
    run_job(pool, &j);
}

void nnf_threadpool_account(nnf_threadpool *pool, bool on) {
    if (pool)
        atomic_store_explicit(&pool->account, on, memory_order_relaxed);
}

void nnf_threadpool_usage(nnf_threadpool *pool, uint64_t *thread_ns, uint64_t *busy_ns) {
    *thread_ns = *busy_ns = 0;
    if (!pool)
        return;
    pthread_mutex_lock(&pool->submit);
    *thread_ns = pool->jobs_ns;
    *busy_ns = pool->busy_ns;
    pthread_mutex_unlock(&pool->submit);
}

int nnf_slot_claim(atomic_int *busy, int n) {
    for (;;)
        for (int s = 0; s < n; s++)
            if (!atomic_load_explicit(&busy[s], memory_order_relaxed) &&
                !atomic_exchange_explicit(&busy[s], 1, memory_order_acquire))
                return s;
}

void nnf_slot_release(atomic_int *busy, int slot) {
    atomic_store_explicit(&busy[slot], 0, memory_order_release);
}

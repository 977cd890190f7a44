/* Thread pool: every item runs exactly once, 2-D tiles cover the range with
 * the right extents, many back-to-back jobs, nested calls run inline, the
 * NULL pool runs inline, create/destroy repeatedly, jobs published around
 * the spin-to-sleep boundary (late joiners must not run a closed job), an
 * idle pool burns no CPU, and the profiler's accounting of the threads' time. */
#include "base/threadpool.h"

#include "check.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct sum_ctx {
    atomic_uint_fast64_t sum;
    atomic_int *hits;
} sum_ctx;

static void add_item(void *ctx, size_t i) {
    sum_ctx *c = ctx;
    atomic_fetch_add(&c->sum, (uint_fast64_t)i);
    if (c->hits)
        atomic_fetch_add(&c->hits[i], 1);
}

typedef struct tile_ctx {
    size_t ri, rj, ti, tj;
    atomic_int *cells;
    atomic_int bad;
} tile_ctx;

static void tile_item(void *ctx, size_t i, size_t j, size_t ni, size_t nj) {
    tile_ctx *c = ctx;
    if (i % c->ti || j % c->tj || ni == 0 || nj == 0 || ni > c->ti || nj > c->tj ||
        (ni < c->ti && i + ni != c->ri) || (nj < c->tj && j + nj != c->rj))
        atomic_fetch_add(&c->bad, 1);
    for (size_t a = i; a < i + ni; a++)
        for (size_t b = j; b < j + nj; b++)
            atomic_fetch_add(&c->cells[a * c->rj + b], 1);
}

static nnf_threadpool *g_pool;
static atomic_int g_nested;

static void nested_inner(void *ctx, size_t i) {
    (void)ctx;
    (void)i;
    atomic_fetch_add(&g_nested, 1);
}

static void nested_outer(void *ctx, size_t i) {
    (void)ctx;
    (void)i;
    nnf_parallel_for(g_pool, 10, nested_inner, NULL);
}

static void check_pool(nnf_threadpool *pool, int expect_size) {
    CHECK(nnf_threadpool_size(pool) == expect_size);
    size_t sizes[] = {0, 1, 2, 3, 7, 64, 1000, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t n = sizes[s];
        sum_ctx c = {.hits = calloc(n ? n : 1, sizeof(atomic_int))};
        atomic_init(&c.sum, 0);
        nnf_parallel_for(pool, n, add_item, &c);
        CHECK_MSG(atomic_load(&c.sum) == (uint_fast64_t)(n ? n * (n - 1) / 2 : 0), "n=%zu", n);
        int once = 1;
        for (size_t i = 0; i < n; i++)
            once &= atomic_load(&c.hits[i]) == 1;
        CHECK_MSG(once, "every item exactly once, n=%zu", n);
        free(c.hits);
    }
    size_t shapes[][4] = {{1, 1, 1, 1},   {13, 7, 4, 3},  {64, 64, 16, 16},
                          {100, 3, 7, 5}, {5, 9, 10, 20}, {33, 1, 6, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        tile_ctx c = {
            .ri = shapes[s][0], .rj = shapes[s][1], .ti = shapes[s][2], .tj = shapes[s][3]};
        c.cells = calloc(c.ri * c.rj, sizeof(atomic_int));
        atomic_init(&c.bad, 0);
        nnf_parallel_for_2d(pool, c.ri, c.rj, c.ti, c.tj, tile_item, &c);
        int once = 1;
        for (size_t i = 0; i < c.ri * c.rj; i++)
            once &= atomic_load(&c.cells[i]) == 1;
        CHECK_MSG(once && atomic_load(&c.bad) == 0, "2-D tiles %zux%zu by %zux%zu", c.ri, c.rj,
                  c.ti, c.tj);
        free(c.cells);
    }
    /* many back-to-back jobs: exercises spin hand-off and the sleep path */
    uint64_t total = 0;
    for (int r = 0; r < 500; r++) {
        sum_ctx c = {.hits = NULL};
        atomic_init(&c.sum, 0);
        nnf_parallel_for(pool, (size_t)(r % 17) + 1, add_item, &c);
        total += atomic_load(&c.sum);
    }
    uint64_t want = 0;
    for (int r = 0; r < 500; r++) {
        uint64_t n = (uint64_t)(r % 17) + 1;
        want += n * (n - 1) / 2;
    }
    CHECK(total == want);
    g_pool = pool;
    atomic_store(&g_nested, 0);
    nnf_parallel_for(pool, 8, nested_outer, NULL);
    CHECK(atomic_load(&g_nested) == 80);
}

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Jobs separated by pauses around the workers' spin budget (~1 ms): some find
 * workers spinning, some asleep, some waking while the caller already closed
 * the job. Every item must still run exactly once, and only for its own job. */
static void check_spin_boundary(void) {
    nnf_threadpool *pool = NULL;
    CHECK(nnf_threadpool_create(3, &pool) == NNF_OK);
    int ok = 1;
    for (int r = 0; r < 60; r++) {
        size_t n = (size_t)(r % 5) + 2;
        atomic_int hits[8];
        for (size_t i = 0; i < 8; i++)
            atomic_init(&hits[i], 0);
        sum_ctx c = {.hits = hits};
        atomic_init(&c.sum, 0);
        nnf_parallel_for(pool, n, add_item, &c);
        for (size_t i = 0; i < 8; i++)
            ok &= atomic_load(&hits[i]) == (i < n);
        sleep_us(200 + (r % 7) * 250);
    }
    CHECK_MSG(ok, "items ran exactly once across spin/sleep hand-offs");
    nnf_threadpool_destroy(pool);
}

/* Idle workers must park: after a short settle, 100 ms of idleness may cost
 * a few milliseconds of polling, not a spinning core (100 ms per worker). */
static void check_idle_cpu(void) {
    nnf_threadpool *pool = NULL;
    CHECK(nnf_threadpool_create(3, &pool) == NNF_OK);
    sum_ctx c = {.hits = NULL};
    atomic_init(&c.sum, 0);
    nnf_parallel_for(pool, 1000, add_item, &c);
    sleep_us(20000);
    double t0 = cpu_seconds();
    sleep_us(100000);
    double used = cpu_seconds() - t0;
    CHECK_MSG(used < 0.02, "idle pool used %.1f ms of CPU in 100 ms", used * 1e3);
    nnf_threadpool_destroy(pool);
}

static void sleep_item(void *ctx, size_t i) {
    const long *us = ctx;
    sleep_us(us[i]);
}

static double wall_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* nnf_threadpool_usage: nothing counted while off; on, a job's busy time is
 * its items' time (at least what they slept) and at most the threads' time
 * (threads x its wall time, itself at most the call's); a job whose one
 * long item leaves the other thread waiting shows it: at most about half
 * its threads' time busy. */
static void check_accounting(void) {
    nnf_threadpool *pool = NULL;
    CHECK(nnf_threadpool_create(2, &pool) == NNF_OK);
    uint64_t th0, b0, th1, b1;
    long even[2] = {10000, 10000}, one[2] = {10000, 0};
    nnf_threadpool_usage(pool, &th0, &b0);
    nnf_parallel_for(pool, 2, sleep_item, even);
    nnf_threadpool_usage(pool, &th1, &b1);
    CHECK(th0 == 0 && b0 == 0 && th1 == 0 && b1 == 0);
    nnf_threadpool_account(pool, true);
    for (int r = 0; r < 2; r++) {
        long *us = r ? one : even;
        nnf_threadpool_usage(pool, &th0, &b0);
        double t0 = wall_ns();
        nnf_parallel_for(pool, 2, sleep_item, us);
        double wall = wall_ns() - t0;
        nnf_threadpool_usage(pool, &th1, &b1);
        double thread = (double)(th1 - th0), busy = (double)(b1 - b0);
        CHECK_MSG(busy >= (double)(us[0] + us[1]) * 1e3 && busy <= thread && thread <= 2 * wall,
                  "job %d: busy %.0f us, threads' time %.0f us, wall %.0f us", r, busy / 1e3,
                  thread / 1e3, wall / 1e3);
        if (r)
            CHECK_MSG(busy <= 0.6 * thread, "one long item: busy %.0f of %.0f us", busy / 1e3,
                      thread / 1e3);
    }
    nnf_threadpool_account(pool, false);
    nnf_threadpool_usage(pool, &th0, &b0);
    nnf_parallel_for(pool, 2, sleep_item, even);
    nnf_threadpool_usage(pool, &th1, &b1);
    CHECK(th1 == th0 && b1 == b0);
    nnf_threadpool_usage(NULL, &th1, &b1);
    CHECK(th1 == 0 && b1 == 0);
    nnf_threadpool_destroy(pool);
}

int main(void) {
    nnf_threadpool *pool = NULL;
    CHECK(nnf_threadpool_create(1, &pool) == NNF_OK && pool == NULL);
    check_pool(NULL, 1);
    CHECK(nnf_threadpool_create(-1, &pool) != NNF_OK);
    int counts[] = {2, 3, 4, 8};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        CHECK(nnf_threadpool_create(counts[i], &pool) == NNF_OK && pool != NULL);
        check_pool(pool, counts[i]);
        nnf_threadpool_destroy(pool);
    }
    /* sleep path: idle long enough for workers to park, then work again */
    CHECK(nnf_threadpool_create(3, &pool) == NNF_OK);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    sum_ctx c = {.hits = NULL};
    atomic_init(&c.sum, 0);
    nnf_parallel_for(pool, 100, add_item, &c);
    CHECK(atomic_load(&c.sum) == 4950);
    nnf_threadpool_destroy(pool);
    for (int r = 0; r < 50; r++) {
        CHECK(nnf_threadpool_create(2 + r % 3, &pool) == NNF_OK);
        nnf_threadpool_destroy(pool);
    }
    CHECK(nnf_threadpool_create(0, &pool) == NNF_OK);
    nnf_threadpool_destroy(pool);
    nnf_threadpool_destroy(NULL);
    check_spin_boundary();
    check_idle_cpu();
    check_accounting();
    TEST_MAIN_END();
}

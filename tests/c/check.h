/* A tiny test harness shared by the C tests: CHECK records a failure and goes
 * on; TEST_MAIN prints "N passed, N failed" and returns non-zero on failure. */
#ifndef NNF_TESTS_CHECK_H
#define NNF_TESTS_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int check_passed, check_failed;

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (cond) {                                                                        \
            check_passed++;                                                                \
        } else {                                                                           \
            check_failed++;                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);       \
        }                                                                                  \
    } while (0)

#define CHECK_MSG(cond, ...)                                                               \
    do {                                                                                   \
        if (cond) {                                                                        \
            check_passed++;                                                                \
        } else {                                                                           \
            check_failed++;                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
        }                                                                                  \
    } while (0)

#define CHECK_NEAR(a, b, tol) CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%g vs %g (tol %g)", (double)(a), (double)(b), (double)(tol))

/* Test data: one xorshift64 stream per test program (a program may reseed
 * check_rng before its first draw), uniform in [0, 1) at 53 bits. */
static uint64_t check_rng = 0x9E3779B97F4A7C15ull;
static inline double check_unit(void) {
    check_rng ^= check_rng << 13;
    check_rng ^= check_rng >> 7;
    check_rng ^= check_rng << 17;
    return (double)(check_rng >> 11) / 9007199254740992.0;
}
/* Soak runs: NNF_TEST_SOAK=N random cases (none by default: CI runs the fixed
 * cases), drawn from NNF_TEST_SEED (default 1), which reseeds check_rng.
 * check_soak_begin returns N; check_soak_end prints the closing line that
 * `make soak` collects: "soak: N <what> from seed S, F failed checks". */
static const char *check_soak_seed_str;
static int check_soak_failed_before;
static inline long check_soak_begin(void) {
    const char *e = getenv("NNF_TEST_SOAK");
    long count = e ? atol(e) : 0;
    if (count <= 0)
        return 0;
    check_soak_seed_str = getenv("NNF_TEST_SEED");
    uint64_t seed = check_soak_seed_str ? strtoull(check_soak_seed_str, NULL, 10) : 1;
    check_rng = 0x9E3779B97F4A7C15ull ^ seed * 0x2545F4914F6CDD1Dull;
    (void)check_unit();
    check_soak_failed_before = check_failed;
    return count;
}
static inline const char *check_soak_seed(void) {
    return check_soak_seed_str ? check_soak_seed_str : "1";
}
static inline void check_soak_end(long cases, const char *what) {
    printf("soak: %ld %s from seed %s, %d failed checks\n", cases, what, check_soak_seed(),
           check_failed - check_soak_failed_before);
}

/* uniform in [-1, 1) */
static inline float check_frand(void) {
    return (float)(check_unit() * 2.0 - 1.0);
}
/* n of them (malloc'd; at least one element) */
static inline float *check_rand_buf(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; p && i < n; i++)
        p[i] = check_frand();
    return p;
}

#define TEST_MAIN_END()                                                                    \
    do {                                                                                   \
        printf("%d passed, %d failed\n", check_passed, check_failed);                      \
        return check_failed ? 1 : 0;                                                       \
    } while (0)

#endif

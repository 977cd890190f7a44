/* The buffer heap of a session (src/base/fitheap.c): first fit by offset,
 * freed ranges merged with both neighbours, the top coming down when its
 * buffer goes, buffers 64-byte aligned and never overlapping, a buffer larger
 * than what is left of the range as a block of its own (reused best fit),
 * the heap without a range (as in sanitizer builds), allocation failures, and
 * a random sequence checked against a model of the offsets. */
#include "base/alloc.h"
#include "base/fitheap.h"

#include "check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KB ((size_t)1 << 10)
#define MB ((size_t)1 << 20)

static int aligned(const void *p) {
    return ((uintptr_t)p & 63) == 0;
}

static size_t off(const nnf_fitheap *h, const void *p) {
    return (size_t)((const unsigned char *)p - h->base);
}

static void check_first_fit(void) {
    nnf_fitheap h;
    nnf_fitheap_init(&h, 64 * MB);
    size_t ca, cb, cc, cd, ce;
    unsigned char *a = nnf_fitheap_get(&h, 100, &ca);
    if (!h.base) { /* no range here (sanitizer build): covered by check_blocks */
        nnf_fitheap_put(&h, a, ca);
        nnf_fitheap_destroy(&h);
        return;
    }
    unsigned char *b = nnf_fitheap_get(&h, 1000, &cb);
    unsigned char *c = nnf_fitheap_get(&h, 64, &cc);
    CHECK(a && b && c && aligned(a) && aligned(b) && aligned(c));
    CHECK_MSG(ca == 128 && cb == 1024 && cc == 64, "capacities %zu %zu %zu", ca, cb, cc);
    CHECK(off(&h, a) == 0 && off(&h, b) == 128 && off(&h, c) == 1152);
    CHECK(nnf_fitheap_span(&h) == 1216);
    /* a hole at b: a smaller buffer goes to its start, a larger one above c */
    nnf_fitheap_put(&h, b, cb);
    unsigned char *d = nnf_fitheap_get(&h, 256, &cd);
    CHECK(d == b);
    unsigned char *e = nnf_fitheap_get(&h, 2000, &ce);
    CHECK(off(&h, e) == 1216 && ce == 2048);
    /* a and d free: merged with each other and the rest of b's hole */
    nnf_fitheap_put(&h, a, ca);
    nnf_fitheap_put(&h, d, cd);
    CHECK_MSG(h.n_free == 1 && h.free[0].off == 0 && h.free[0].len == 1152, "%zu ranges", h.n_free);
    /* the top buffer goes: the top comes down to c's end */
    nnf_fitheap_put(&h, e, ce);
    CHECK(nnf_fitheap_span(&h) == 1216 && h.n_free == 1);
    /* c goes: everything is free and the top is back at 0 */
    nnf_fitheap_put(&h, c, cc);
    CHECK(nnf_fitheap_span(&h) == 0 && h.n_free == 0 && h.n_live == 0);
    /* the pages stay: a new buffer over them holds what was written there */
    unsigned char *f = nnf_fitheap_get(&h, 2 * MB, &ca);
    CHECK(f == h.base);
    memset(f, 0x5A, 2 * MB);
    nnf_fitheap_put(&h, f, ca);
    f = nnf_fitheap_get(&h, 2 * MB, &ca);
    CHECK(f && f[MB] == 0x5A && h.touched >= 2 * MB && nnf_fitheap_held(&h) == h.touched);
    nnf_fitheap_put(&h, f, ca);
    /* larger than what is left: a block of its own, kept and reused best fit */
    unsigned char *g = nnf_fitheap_get(&h, 80 * MB, &cb);
    CHECK(g && aligned(g) && (g < h.base || g >= h.base + h.reserved) && cb == 80 * MB);
    if (g)
        memset(g, 1, cb);
    nnf_fitheap_put(&h, g, cb);
    unsigned char *g2 = nnf_fitheap_get(&h, 70 * MB, &cc);
    CHECK(g2 == g && cc == 80 * MB);
    nnf_fitheap_put(&h, g2, cc);
    nnf_fitheap_destroy(&h);
    CHECK(h.base == NULL && h.n_blocks == 0);
}

/* No range: every buffer a block, reused best fit, none lost. */
static void check_blocks(void) {
    nnf_fitheap h;
    nnf_fitheap_init(&h, 0);
    size_t c[40];
    void *p[40];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 40; i++) {
            p[i] = nnf_fitheap_get(&h, (size_t)(i % 7 + 1) * 3 * KB + (size_t)i, &c[i]);
            CHECK(p[i] && aligned(p[i]) && c[i] >= (size_t)(i % 7 + 1) * 3 * KB + (size_t)i);
            if (p[i])
                memset(p[i], i, c[i]);
        }
        for (int i = 0; i < 40; i++)
            nnf_fitheap_put(&h, p[i], c[i]);
        CHECK(h.base == NULL && h.n_block_live == 0 && h.n_blocks == 40);
        size_t sum = 0;
        for (int i = 0; i < 40; i++)
            sum += c[i];
        CHECK_MSG(nnf_fitheap_held(&h) == sum, "held %zu, blocks %zu", nnf_fitheap_held(&h), sum);
    }
    nnf_fitheap_destroy(&h);
}

/* Random gets and puts, each buffer filled with its own byte and checked
 * before it goes (no two overlap); at the end the range is empty. */
static void check_random(int reserve_mb) {
    nnf_fitheap h;
    nnf_fitheap_init(&h, (size_t)reserve_mb * MB);
    enum { N = 64 };
    unsigned char *p[N] = {0};
    size_t cap[N] = {0}, want[N] = {0};
    uint32_t r = 12345;
    for (int step = 0; step < 4000; step++) {
        r = r * 1103515245u + 12345u;
        int i = (int)(r >> 8) % N;
        if (p[i]) {
            for (size_t k = 0; k < want[i]; k += 97)
                if (p[i][k] != (unsigned char)i) {
                    CHECK_MSG(0, "buffer %d overwritten at step %d", i, step);
                    break;
                }
            nnf_fitheap_put(&h, p[i], cap[i]);
            p[i] = NULL;
        } else {
            r = r * 1103515245u + 12345u;
            want[i] = (r >> 4) % (512 * KB) + 1;
            p[i] = nnf_fitheap_get(&h, want[i], &cap[i]);
            CHECK(p[i] && aligned(p[i]) && cap[i] >= want[i]);
            if (p[i])
                memset(p[i], i, want[i]);
        }
    }
    for (int i = 0; i < N; i++)
        nnf_fitheap_put(&h, p[i], cap[i]);
    CHECK(h.n_live == 0 && h.n_block_live == 0 && nnf_fitheap_span(&h) == 0);
    nnf_fitheap_destroy(&h);
}

/* Every allocation a get makes can fail: the get returns NULL and the heap
 * stays usable and leaks nothing. */
static void check_failures(void) {
    for (int n = 1; n <= 4; n++) {
        nnf_fitheap h;
        nnf_fitheap_init(&h, 16 * MB);
        size_t ca = 0, cb = 0, cc = 0;
        void *a = nnf_fitheap_get(&h, 1000, &ca);
        nnf_alloc_fail_after((uint64_t)n);
        void *b = nnf_fitheap_get(&h, 5000, &cb);
        void *c = nnf_fitheap_get(&h, 50 * MB, &cc); /* a block of its own */
        nnf_alloc_fail_after(0);
        nnf_fitheap_put(&h, a, ca);
        nnf_fitheap_put(&h, b, cb);
        nnf_fitheap_put(&h, c, cc);
        size_t cd;
        void *d = nnf_fitheap_get(&h, 3000, &cd);
        CHECK_MSG(d != NULL, "heap unusable after failure %d", n);
        nnf_fitheap_put(&h, d, cd);
        nnf_fitheap_destroy(&h);
    }
}

int main(void) {
    check_first_fit();
    check_blocks();
    check_random(64);
    check_random(2); /* most buffers do not fit: blocks of their own */
    check_random(0);
    check_failures();
    TEST_MAIN_END();
}

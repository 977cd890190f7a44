/* Aligned blocks and the load-time page bank (src/base/alloc.c): 64-byte
 * alignment at small and large sizes, with the bank closed and open; a freed
 * large block's pages serve the next one (they come with the old contents:
 * moved, not freshly faulted), across blocks of other sizes and with fresh
 * pages making up the rest; nesting; blocks made while it was open and
 * freed after it closed; allocation failure while it is open; the prefault
 * helper; a bank detached at close (a model's warm pages), adopted by a run
 * that fills a reserved range and its blocks from it, then freed. */
#include "base/alloc.h"

#include "check.h"

#include <stdint.h>
#include <string.h>

#define MB ((size_t)1 << 20)

/* Sanitizer builds keep every block on the heap: no bank (alloc.c). */
#if defined(__SANITIZE_ADDRESS__)
#define NO_BANK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define NO_BANK 1
#endif
#endif

static int aligned(const void *p) { return ((uintptr_t)p & 63) == 0; }

/* Writes the whole block and reads it back. */
static int round_trip(unsigned char *p, size_t n, unsigned char v) {
    memset(p, v, n);
    for (size_t i = 0; i < n; i += 4093)
        if (p[i] != v)
            return 0;
    return p[n - 1] == v;
}

static void check_sizes(void) {
    static const size_t sizes[] = {1, 63, 64, 65, 4096, MB - 65, MB - 64, MB, 3 * MB + 7};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        unsigned char *p = nnf_malloc_aligned(sizes[i]);
        CHECK_MSG(p && aligned(p), "size %zu", sizes[i]);
        if (p)
            CHECK_MSG(round_trip(p, sizes[i], (unsigned char)(i + 1)), "size %zu", sizes[i]);
        nnf_free_aligned(p);
    }
    nnf_free_aligned(NULL);
}

/* Does block p (n bytes) hold byte v from 4 KiB on (past the header page)? */
static int holds(const unsigned char *p, size_t n, unsigned char v) {
    for (size_t i = 4096; i < n; i += 4096)
        if (p[i] != v)
            return 0;
    return 1;
}

static void check_bank(void) {
    nnf_page_bank_open(0);
    nnf_page_bank_open(0); /* nested: the inner close keeps it open */
    unsigned char *a = nnf_malloc_aligned(4 * MB);
    CHECK(a && aligned(a) && round_trip(a, 4 * MB, 0xA5));
    nnf_page_bank_close();
    nnf_free_aligned(a);
    /* the next large block takes a's pages over, contents and all */
    unsigned char *b = nnf_malloc_aligned(2 * MB);
    CHECK(b && aligned(b));
#if !defined(__SANITIZE_ADDRESS__)
    if (b)
        CHECK_MSG(holds(b, 2 * MB, 0xA5), "a's pages were not moved into b");
#endif
    if (b)
        CHECK(round_trip(b, 2 * MB, 0x11));
    /* the rest of a's pages, then fresh ones: larger than what is banked */
    unsigned char *c = nnf_malloc_aligned(5 * MB);
    CHECK(c && aligned(c) && round_trip(c, 5 * MB, 0x22));
    if (b)
        CHECK(holds(b, 2 * MB, 0x11)); /* c did not take b's pages */
    nnf_free_aligned(b);
    nnf_free_aligned(c);
    /* two banked blocks make one */
    unsigned char *d = nnf_malloc_aligned(6 * MB + 12345);
    CHECK(d && aligned(d) && round_trip(d, 6 * MB + 12345, 0x33));
    /* small blocks stay on the heap while the bank is open */
    unsigned char *s = nnf_malloc_aligned(1000);
    CHECK(s && aligned(s) && round_trip(s, 1000, 0x44));
    nnf_free_aligned(s);
    /* an allocation failure while open leaves the bank usable */
    nnf_alloc_fail_after(1);
    CHECK(nnf_malloc_aligned(2 * MB) == NULL);
    unsigned char *e = nnf_malloc_aligned(2 * MB);
    CHECK(e && round_trip(e, 2 * MB, 0x55));
    nnf_free_aligned(e);
    nnf_page_bank_close();
    /* made while open, freed after: its mapping goes back */
    CHECK(d && holds(d, 6 * MB, 0x33));
    nnf_free_aligned(d);
    nnf_page_bank_close(); /* unbalanced: no effect */
    /* closed: large blocks come from the heap again */
    unsigned char *f = nnf_malloc_aligned(3 * MB);
    CHECK(f && aligned(f) && round_trip(f, 3 * MB, 0x66));
    nnf_free_aligned(f);
}

/* More freed blocks than the bank keeps track of: the extra ones go back. */
static void check_many(void) {
    enum { N = 300 };
    static unsigned char *p[N];
    nnf_page_bank_open(0);
    for (int i = 0; i < N; i++) {
        p[i] = nnf_malloc_aligned(MB);
        CHECK(p[i] != NULL);
        if (p[i])
            p[i][MB - 1] = (unsigned char)i;
    }
    for (int i = 0; i < N; i++)
        nnf_free_aligned(p[i]);
    unsigned char *big = nnf_malloc_aligned(64 * MB);
    CHECK(big && round_trip(big, 64 * MB, 0x77));
    nnf_free_aligned(big);
    nnf_page_bank_close();
}

/* With the prefault helper: blocks still come whole and writable, whether
 * the helper's pages, recycled ones or fresh ones fill them; close stops it. */
static void check_prefault(void) {
    for (int round = 0; round < 3; round++) {
        nnf_page_bank_open(1);
        unsigned char *p[8] = {0};
        for (int i = 0; i < 8; i++) {
            size_t n = (size_t)(i + 1) * MB + (size_t)i * 4099;
            p[i] = nnf_malloc_aligned(n);
            CHECK(p[i] && aligned(p[i]) && round_trip(p[i], n, (unsigned char)(0x80 + i)));
            if (i % 3 == 2) {
                nnf_free_aligned(p[i - 1]);
                p[i - 1] = NULL;
            }
        }
        for (int i = 0; i < 8; i++)
            nnf_free_aligned(p[i]);
        if (round == 1) {
            unsigned char *q = nnf_malloc_aligned(40 * MB); /* more than the helper keeps ahead */
            CHECK(q && round_trip(q, 40 * MB, 0x99));
            nnf_free_aligned(q);
        }
        nnf_page_bank_close();
    }
}

/* A detached bank: what a load left, for its model's first run. */
static void check_detach(void) {
    /* nested, or with nothing banked: nothing to detach */
    nnf_page_bank_open(0);
    nnf_page_bank_open(0);
    CHECK(nnf_page_bank_detach(SIZE_MAX) == NULL);
    CHECK(nnf_page_bank_detach(SIZE_MAX) == NULL);
    CHECK(nnf_page_bank_current() == NULL);
    for (int prefault = 0; prefault < 2; prefault++) {
        nnf_page_bank_open(prefault);
        unsigned char *a = nnf_malloc_aligned(3 * MB);
        CHECK(a && round_trip(a, 3 * MB, 0xB6));
        nnf_free_aligned(a);
        void *warm = nnf_page_bank_detach(SIZE_MAX);
        CHECK(nnf_page_bank_current() == NULL);
#ifdef NO_BANK
        CHECK(warm == NULL); /* nothing was banked */
        continue;
#endif
        CHECK(warm != NULL);
        /* closed: a large block comes from the heap, not from warm */
        unsigned char *h = nnf_malloc_aligned(2 * MB);
        CHECK(h && round_trip(h, 2 * MB, 0x12));
        void *own = nnf_page_bank_adopt(warm);
        CHECK(own == NULL);
        /* a reserved range's first pages are a's, contents and all; past
         * what the bank holds, fresh ones */
        size_t span = 8 * MB;
        unsigned char *r = nnf_reserve(span);
        if (r) {
            nnf_reserve_touch(r, 2 * MB);
            CHECK_MSG(prefault || holds(r, 2 * MB, 0xB6),
                      "a's pages were not moved into the range");
            nnf_reserve_touch(r + 2 * MB, 6 * MB);
            CHECK(round_trip(r, span, 0x34));
        }
        /* a load nested in the run opens and closes it: it stays adopted */
        nnf_page_bank_open(1);
        CHECK(nnf_page_bank_detach(SIZE_MAX) == NULL && nnf_page_bank_current() == warm);
        unsigned char *b = nnf_malloc_aligned(MB);
        CHECK(b && round_trip(b, MB, 0x56));
        nnf_page_bank_adopt(own);
        nnf_page_bank_free(warm);
        CHECK(b && holds(b, MB, 0x56)); /* made from warm, freed after it */
        nnf_free_aligned(b);
        nnf_unreserve(r, span);
        nnf_free_aligned(h);
    }
    /* keep: the oldest pages go back first, whole pages, the newest stay */
    nnf_page_bank_open(0);
    unsigned char *c = nnf_malloc_aligned(3 * MB), *d = nnf_malloc_aligned(MB);
    CHECK(c && d && round_trip(c, 3 * MB, 0xC7) && round_trip(d, MB, 0xD8));
    nnf_free_aligned(c);
    nnf_free_aligned(d);
    void *warm = nnf_page_bank_detach(MB + 100);
#ifdef NO_BANK
    CHECK(warm == NULL);
#else
    CHECK(warm != NULL);
    void *own = nnf_page_bank_adopt(warm);
    unsigned char *r = nnf_reserve(2 * MB);
    if (r) {
        nnf_reserve_touch(r, 2 * MB);
        CHECK_MSG(holds(r, MB, 0xD8), "the newest pages were not kept");
        CHECK_MSG(r[MB + 4096] != 0xC7 && r[MB + 4096] != 0xD8, "more than `keep` was kept");
        nnf_unreserve(r, 2 * MB);
    }
    nnf_page_bank_adopt(own);
    nnf_page_bank_free(warm);
#endif
    nnf_page_bank_open(0);
    CHECK(nnf_page_bank_detach(0) == NULL); /* nothing kept: none */
    nnf_page_bank_free(NULL);
}

int main(void) {
    check_sizes();
    check_bank();
    check_sizes();
    check_many();
    check_prefault();
    check_detach();
    TEST_MAIN_END();
}

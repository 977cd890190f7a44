#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* madvise, mremap */
#endif
#include "base/alloc.h"

#include "base/status.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static _Atomic uint64_t fail_countdown; /* 0 = off */
static _Atomic uint64_t alloc_count;

NNF_API uint64_t nnf_alloc_fail_after(uint64_t n) {
    uint64_t c = atomic_exchange(&alloc_count, 0);
    atomic_store(&fail_countdown, n);
    return c;
}

static int should_fail(void) {
    atomic_fetch_add(&alloc_count, 1);
    uint64_t c = atomic_load(&fail_countdown);
    if (c == 0)
        return 0;
    if (c == 1) {
        atomic_store(&fail_countdown, 0);
        return 1;
    }
    atomic_store(&fail_countdown, c - 1);
    return 0;
}

void *nnf_malloc(size_t size) {
    if (should_fail())
        return NULL;
    return malloc(size ? size : 1);
}

void *nnf_calloc(size_t count, size_t size) {
    size_t total;
    if (!nnf_mul_size(count, size, &total) || should_fail())
        return NULL;
    return calloc(1, total ? total : 1);
}

void *nnf_realloc(void *ptr, size_t size) {
    if (should_fail())
        return NULL;
    return realloc(ptr, size ? size : 1);
}

void nnf_free(void *ptr) { free(ptr); }

/* ---- aligned blocks and the load-time page bank ----------------------------
 *
 * Every aligned block sits 64 bytes after a header saying how it goes back:
 * to the heap, or, for a large block made while this thread's page bank is
 * open, to its own mapping. Loading a model writes each weight several times
 * into fresh memory (the importer's aligned copy, the folded copy, the packed
 * one) and frees the older copy as the next is made; a fresh page costs the
 * kernel (and the hypervisor) ten times what writing it does. While the bank
 * is open a freed mapping's pages are kept, and the next large block takes
 * them: in place where one kept range holds it whole (the smallest such),
 * else moved over with mremap (page tables move, no data is copied or
 * cleared): the whole load touches about as many fresh pages as the model
 * keeps. */

typedef struct block_header {
    /* 0: from the heap; BORROWED: someone else's memory; else the size of
     * its own mapping */
    size_t map_bytes;
    /* holders beyond the first (nnf_block_ref); nnf_free_aligned frees the
     * block when it drops the last */
    atomic_size_t more_refs;
} block_header;
#define BLOCK_HEADER NNF_BLOCK_HEADER
#define BORROWED SIZE_MAX
_Static_assert(sizeof(block_header) <= BLOCK_HEADER, "the header fits before the data");

static void block_init(block_header *h, size_t map_bytes) {
    h->map_bytes = map_bytes;
    atomic_init(&h->more_refs, 0);
}
/* Blocks from 64 KiB go to their own mapping while a bank is open: a model's
 * small weights too (YOLOv5s load 55 -> 48 ms against 1 MiB; 16 KiB measured
 * the same as 64). Outside a load, blocks from 1 MiB have their pages
 * faulted in when allocated. */
#define BANK_MIN_BYTES ((size_t)64 << 10)
#define BANK_RANGES 256

#if defined(__SANITIZE_ADDRESS__)
#define BANK_ENABLED 0 /* sanitizer builds keep every block on the checked heap */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define BANK_ENABLED 0
#endif
#endif
#if !defined(BANK_ENABLED) && defined(MREMAP_FIXED)
#define BANK_ENABLED 1
#endif
#ifndef BANK_ENABLED
#define BANK_ENABLED 0
#endif

typedef struct page_range {
    unsigned char *addr;
    size_t bytes;
} page_range;

/* The ranges of pages a thread's loads may reuse; shared with its prefault
 * helper (under mu). */
typedef struct page_bank {
    int depth;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the helper's: room below PREFAULT_AHEAD, or stop */
    int n;
    size_t banked; /* bytes in r[] */
    page_range r[BANK_RANGES];
    atomic_int stop;
    int helper_running;
    pthread_t helper;
} page_bank;

static _Thread_local page_bank *t_bank;

/* A helper keeps this much faulted-in memory banked ahead of the loading
 * thread, mapped and touched a chunk at a time. Touching pages (a fault each,
 * under the per-VMA lock) rather than MADV_POPULATE_WRITE (which holds the
 * mmap lock for the whole range) leaves the loader's mmap and mremap calls
 * free to run meanwhile. */
#define PREFAULT_AHEAD ((size_t)8 << 20)
#define PREFAULT_CHUNK ((size_t)2 << 20)

#if BANK_ENABLED
static void *prefault_main(void *arg) {
    page_bank *b = arg;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
#ifdef SYS_gettid
    /* the lowest priority: it faults pages in with the CPU the loaders leave
     * idle, not theirs. At the default one on a 2-core machine it took a
     * core from the two planning threads: loads at 2 threads (ab_builds
     * --load, both orders) YOLOv5s 1.07-1.08x faster at nice 19, ResNet-50
     * 1.05-1.09x, BERT-base (whose plans wait on page faults more) 1.01x */
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
#endif
    pthread_mutex_lock(&b->mu);
    while (!atomic_load(&b->stop)) {
        if (b->banked >= PREFAULT_AHEAD || b->n >= BANK_RANGES) {
            pthread_cond_wait(&b->wake, &b->mu);
            continue;
        }
        pthread_mutex_unlock(&b->mu);
        unsigned char *p = mmap(NULL, PREFAULT_CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED)
            for (size_t i = 0; i < PREFAULT_CHUNK && !atomic_load_explicit(&b->stop, memory_order_relaxed);
                 i += page)
                ((volatile unsigned char *)p)[i] = 0;
        pthread_mutex_lock(&b->mu);
        if (p == MAP_FAILED)
            break;
        if (atomic_load(&b->stop) || b->n >= BANK_RANGES) {
            munmap(p, PREFAULT_CHUNK);
            continue;
        }
        b->r[b->n++] = (page_range){p, PREFAULT_CHUNK};
        b->banked += PREFAULT_CHUNK;
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}
#endif

void nnf_page_bank_open(int prefault) {
    page_bank *b = t_bank;
    if (b) {
        b->depth++;
        return;
    }
    /* plain calloc: without a bank a load only runs slower, so this is not
     * an allocation-failure path of its own */
    b = calloc(1, sizeof *b);
    if (!b)
        return;
    if (pthread_mutex_init(&b->mu, NULL)) {
        free(b);
        return;
    }
    if (pthread_cond_init(&b->wake, NULL)) {
        pthread_mutex_destroy(&b->mu);
        free(b);
        return;
    }
    b->depth = 1;
    t_bank = b;
#if BANK_ENABLED
    if (prefault)
        b->helper_running = pthread_create(&b->helper, NULL, prefault_main, b) == 0;
#else
    (void)prefault;
#endif
}

void *nnf_page_bank_current(void) {
    return t_bank;
}

void *nnf_page_bank_adopt(void *bank) {
    page_bank *old = t_bank;
    t_bank = bank;
    return old;
}

static void stop_helper(page_bank *b) {
    if (!b->helper_running)
        return;
    pthread_mutex_lock(&b->mu);
    atomic_store(&b->stop, 1);
    pthread_cond_signal(&b->wake);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->helper, NULL);
    b->helper_running = 0;
}

void nnf_page_bank_free(void *bank) {
    page_bank *b = bank;
    if (!b)
        return;
    stop_helper(b);
    for (int i = 0; i < b->n; i++)
        munmap(b->r[i].addr, b->r[i].bytes);
    pthread_cond_destroy(&b->wake);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

void nnf_page_bank_close(void) {
    page_bank *b = t_bank;
    if (!b || --b->depth > 0)
        return;
    t_bank = NULL;
    nnf_page_bank_free(b);
}

void *nnf_page_bank_detach(size_t keep) {
    page_bank *b = t_bank;
    if (!b || --b->depth > 0)
        return NULL;
    t_bank = NULL;
    stop_helper(b);
    if (b->n == 0) {
        nnf_page_bank_free(b);
        return NULL;
    }
    /* the oldest ranges go back first (bank_fill takes the newest) */
    while (b->n > 0 && b->banked > keep) {
        page_range *r = &b->r[0];
        size_t cut = b->banked - keep < r->bytes ? b->banked - keep : r->bytes;
        cut &= ~(size_t)(sysconf(_SC_PAGESIZE) - 1);
        if (cut == 0)
            break;
        munmap(r->addr + r->bytes - cut, cut);
        r->bytes -= cut;
        b->banked -= cut;
        if (r->bytes == 0)
            memmove(b->r, b->r + 1, (size_t)--b->n * sizeof *b->r);
    }
    if (b->n == 0) {
        nnf_page_bank_free(b);
        return NULL;
    }
    b->depth = 1; /* a load nested in a run it serves opens and closes it: it stays */
    return b;
}

void nnf_populate(void *p, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
    /* pages faulted in now, in one call, not one page fault at a time on
     * first touch (EINVAL before Linux 5.14: they fault in on use) */
    uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
    uintptr_t e = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
    if (e > a)
        (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)bytes;
#endif
}

#if BANK_ENABLED
/* Move banked pages into [dst, dst + bytes) (page multiples); returns how
 * many bytes were filled. */
static size_t bank_fill(page_bank *b, unsigned char *dst, size_t bytes) {
    size_t filled = 0;
    pthread_mutex_lock(&b->mu);
    while (filled < bytes && b->n > 0) {
        page_range *r = &b->r[b->n - 1];
        size_t len = r->bytes < bytes - filled ? r->bytes : bytes - filled;
        if (mremap(r->addr, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst + filled) == MAP_FAILED)
            break; /* the rest is fresh pages */
        r->addr += len;
        r->bytes -= len;
        b->banked -= len;
        if (r->bytes == 0)
            b->n--;
        filled += len;
    }
    pthread_cond_signal(&b->wake);
    pthread_mutex_unlock(&b->mu);
    return filled;
}

/* The smallest banked range that holds `bytes` whole, its first `bytes`
 * taken in place: pages faulted in already, and no mapping made or moved
 * (at 2 threads each mremap is a TLB shootdown to the other planner). NULL
 * where no range is large enough. */
static unsigned char *bank_take(page_bank *b, size_t bytes) {
    pthread_mutex_lock(&b->mu);
    int best = -1;
    for (int i = 0; i < b->n; i++)
        if (b->r[i].bytes >= bytes && (best < 0 || b->r[i].bytes < b->r[best].bytes))
            best = i;
    unsigned char *p = NULL;
    if (best >= 0) {
        page_range *r = &b->r[best];
        p = r->addr;
        r->addr += bytes;
        r->bytes -= bytes;
        b->banked -= bytes;
        if (r->bytes == 0)
            memmove(r, r + 1, (size_t)(--b->n - best) * sizeof *r);
        pthread_cond_signal(&b->wake);
    }
    pthread_mutex_unlock(&b->mu);
    return p;
}

static void *map_block(size_t total) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes;
    if (!nnf_add_size(total, page - 1, &bytes))
        return NULL;
    bytes &= ~(page - 1);
    unsigned char *base = bank_take(t_bank, bytes);
    if (base) {
        block_init((block_header *)base, bytes);
        return base + BLOCK_HEADER;
    }
    base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    size_t filled = bank_fill(t_bank, base, bytes);
    nnf_populate(base + filled, bytes - filled);
    block_init((block_header *)base, bytes);
    return base + BLOCK_HEADER;
}
#endif

void *nnf_malloc_aligned(size_t size) {
    if (should_fail())
        return NULL;
    size_t total;
    if (!nnf_add_size(size, BLOCK_HEADER + 63, &total))
        return NULL;
    total &= ~(size_t)63;
#if BANK_ENABLED
    if (t_bank && total >= BANK_MIN_BYTES)
        return map_block(total);
#endif
    unsigned char *p = aligned_alloc(64, total);
    if (!p)
        return NULL;
    block_init((block_header *)p, 0);
    /* large blocks (tensors, scratch) are written whole soon after */
    if (total >= NNF_POPULATE_MIN_BYTES)
        nnf_populate(p, total);
    return p + BLOCK_HEADER;
}

void nnf_block_header_borrowed(void *header) {
    memset(header, 0, BLOCK_HEADER);
    ((block_header *)header)->map_bytes = BORROWED;
}

void *nnf_block_ref(void *ptr) {
    block_header *h = (block_header *)((unsigned char *)ptr - BLOCK_HEADER);
    if (h->map_bytes != BORROWED)
        atomic_fetch_add(&h->more_refs, 1);
    return ptr;
}

int nnf_block_is_borrowed(const void *p) {
    unsigned char h[BLOCK_HEADER], want[BLOCK_HEADER];
    memcpy(h, (const unsigned char *)p - BLOCK_HEADER, BLOCK_HEADER);
    nnf_block_header_borrowed(want);
    return memcmp(h, want, BLOCK_HEADER) == 0;
}

void nnf_free_aligned(void *ptr) {
    if (!ptr)
        return;
    block_header *h = (block_header *)((unsigned char *)ptr - BLOCK_HEADER);
    if (h->map_bytes == BORROWED || atomic_fetch_sub(&h->more_refs, 1) != 0)
        return; /* someone else's, or held by another */
    if (h->map_bytes == 0) {
        free(h);
        return;
    }
    page_bank *b = t_bank;
    if (b) {
        pthread_mutex_lock(&b->mu);
        int kept = b->n < BANK_RANGES;
        if (kept) {
            b->r[b->n++] = (page_range){(unsigned char *)h, h->map_bytes};
            b->banked += h->map_bytes;
        }
        pthread_mutex_unlock(&b->mu);
        if (kept)
            return;
    }
    munmap(h, h->map_bytes);
}

int nnf_alloc_fails(void) {
    return should_fail();
}

void *nnf_reserve(size_t bytes) {
#if BANK_ENABLED
    if (bytes == 0 || should_fail())
        return NULL;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
#else
    (void)bytes; /* sanitizer builds: every buffer a heap block the checks can see */
    return NULL;
#endif
}

void nnf_unreserve(void *p, size_t bytes) {
    if (p)
        munmap(p, bytes);
}

void nnf_reserve_touch(void *p, size_t bytes) {
    size_t filled = 0;
#if BANK_ENABLED
    if (t_bank)
        filled = bank_fill(t_bank, p, bytes);
#endif
    if (bytes - filled >= NNF_POPULATE_MIN_BYTES)
        nnf_populate((unsigned char *)p + filled, bytes - filled);
}

char *nnf_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = nnf_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

struct nnf_arena_chunk {
    nnf_arena_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void *nnf_arena_alloc(nnf_arena *a, size_t size) {
    size = (size + 15) & ~(size_t)15;
    if (size == 0)
        size = 16;
    nnf_arena_chunk *c = a->head;
    if (!c || c->size - c->used < size) {
        size_t cap = size > 65536 ? size : 65536;
        size_t bytes;
        if (!nnf_add_size(sizeof *c, cap, &bytes))
            return NULL;
        c = nnf_malloc(bytes);
        if (!c)
            return NULL;
        c->size = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += size;
    a->used_total += size;
    memset(p, 0, size);
    return p;
}

void *nnf_arena_calloc(nnf_arena *a, size_t count, size_t size) {
    size_t total;
    if (!nnf_mul_size(count, size, &total))
        return NULL;
    return nnf_arena_alloc(a, total);
}

char *nnf_arena_strndup(nnf_arena *a, const char *s, size_t n) {
    char *d = nnf_arena_alloc(a, n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

char *nnf_arena_strdup(nnf_arena *a, const char *s) { return nnf_arena_strndup(a, s, strlen(s)); }

void nnf_arena_free(nnf_arena *a) {
    nnf_arena_chunk *c = a->head;
    while (c) {
        nnf_arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
    a->used_total = 0;
}

/* ---- per-thread scratch -------------------------------------------------- */

typedef struct thread_scratch {
    float *p[NNF_SCRATCH_KINDS];
    size_t floats[NNF_SCRATCH_KINDS];
} thread_scratch;

static _Thread_local thread_scratch t_scratch;
static pthread_key_t g_scratch_key;
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;
static int g_scratch_key_ok;

/* The key's value is the exiting thread's own buffers. */
static void scratch_free_at_exit(void *v) {
    thread_scratch *t = v;
    for (int k = 0; k < NNF_SCRATCH_KINDS; k++) {
        nnf_free_aligned(t->p[k]);
        t->p[k] = NULL;
        t->floats[k] = 0;
    }
}

static void scratch_key_init(void) {
    g_scratch_key_ok = pthread_key_create(&g_scratch_key, scratch_free_at_exit) == 0;
}

float *nnf_thread_scratch(nnf_scratch_kind kind, size_t floats) {
    thread_scratch *t = &t_scratch;
    if (t->p[kind] && floats <= t->floats[kind])
        return t->p[kind];
    size_t bytes;
    if (!nnf_mul_size(floats ? floats : 1, sizeof(float), &bytes))
        return NULL;
    float *p = nnf_malloc_aligned(bytes);
    if (!p)
        return NULL;
    nnf_free_aligned(t->p[kind]);
    t->p[kind] = p;
    t->floats[kind] = floats;
    pthread_once(&g_scratch_once, scratch_key_init);
    if (g_scratch_key_ok)
        pthread_setspecific(g_scratch_key, t);
    return p;
}

void nnf_thread_scratch_release(nnf_scratch_kind kind) {
    nnf_free_aligned(t_scratch.p[kind]);
    t_scratch.p[kind] = NULL;
    t_scratch.floats[kind] = 0;
}

#define _DEFAULT_SOURCE /* madvise */
#include "base/alloc.h"

#include "base/status.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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

void *nnf_malloc_aligned(size_t size) {
    if (should_fail())
        return NULL;
    size_t rounded;
    if (!nnf_add_size(size, 63, &rounded))
        return NULL;
    rounded &= ~(size_t)63;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
#ifdef MADV_POPULATE_WRITE
    /* Large blocks (packed weights, folded weights, tensors) are written
     * whole soon after: their pages are faulted in now, in one call, not one
     * page fault at a time on first touch. */
    if (p && rounded >= ((size_t)1 << 20)) {
        uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
        uintptr_t e = ((uintptr_t)p + rounded) & ~(uintptr_t)4095;
        if (e > a)
            (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE); /* EINVAL before Linux 5.14 */
    }
#endif
    return p;
}

void nnf_free_aligned(void *ptr) { free(ptr); }

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

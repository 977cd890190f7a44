/* First fit by offset in one reserved range (see fitheap.h). */
#include "base/fitheap.h"

#include "base/alloc.h"
#include "base/status.h"

#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#define ALIGN ((size_t)64)

void nnf_fitheap_init(nnf_fitheap *h, size_t reserve) {
    memset(h, 0, sizeof *h);
    size_t page = (size_t)sysconf(_SC_PAGESIZE), w;
    h->want = nnf_add_size(reserve, page - 1, &w) ? w & ~(page - 1) : 0;
    h->no_range = h->want == 0;
}

size_t nnf_fitheap_span(const nnf_fitheap *h) {
    return h->top;
}

size_t nnf_fitheap_held(const nnf_fitheap *h) {
    return h->touched + h->block_bytes;
}

/* Room for the free ranges a put can leave: they are separated by live
 * buffers, so never more than the buffers in the range. Grown before a
 * buffer is handed out, so that a put never allocates. */
static int ensure_free_room(nnf_fitheap *h, size_t live) {
    if (h->cap_free >= live)
        return 1;
    size_t cap = h->cap_free ? h->cap_free * 2 : 64;
    cap = cap < live ? live : cap;
    nnf_fit_range *r = nnf_realloc(h->free, cap * sizeof *r);
    if (!r)
        return 0;
    h->free = r;
    h->cap_free = cap;
    return 1;
}

/* A range buffer of len bytes (a multiple of ALIGN), or NULL when it does not fit. */
static void *range_get(nnf_fitheap *h, size_t len) {
    if (!h->base && !h->no_range) {
        h->base = nnf_reserve(h->want);
        h->reserved = h->base ? h->want : 0;
        h->no_range = !h->base;
    }
    if (!h->base || !ensure_free_room(h, h->n_live + 1))
        return NULL;
    size_t off = h->top;
    size_t i = 0;
    while (i < h->n_free && h->free[i].len < len)
        i++;
    if (i < h->n_free) { /* the lowest free range it fits in */
        off = h->free[i].off;
        h->free[i].off += len;
        h->free[i].len -= len;
        if (h->free[i].len == 0) {
            memmove(h->free + i, h->free + i + 1, (h->n_free - i - 1) * sizeof *h->free);
            h->n_free--;
        }
    } else if (len <= h->reserved - h->top) {
        h->top += len;
    } else {
        return NULL;
    }
    size_t end = off + len;
    if (end > h->touched) {
        /* fresh pages: faulted in by one call, or moved in from the page
         * bank (alloc.h), not a fault per page */
        size_t page = (size_t)sysconf(_SC_PAGESIZE), to = (end + page - 1) & ~(page - 1);
        to = to < h->reserved ? to : h->reserved;
        nnf_reserve_touch(h->base + h->touched, to - h->touched);
        h->touched = to;
    }
    h->n_live++;
    return h->base + off;
}

static void range_put(nnf_fitheap *h, size_t off, size_t len) {
    size_t i = 0;
    while (i < h->n_free && h->free[i].off < off)
        i++;
    bool joins_prev = i > 0 && h->free[i - 1].off + h->free[i - 1].len == off;
    bool joins_next = i < h->n_free && off + len == h->free[i].off;
    if (joins_prev && joins_next) {
        h->free[i - 1].len += len + h->free[i].len;
        memmove(h->free + i, h->free + i + 1, (h->n_free - i - 1) * sizeof *h->free);
        h->n_free--;
    } else if (joins_prev) {
        h->free[i - 1].len += len;
    } else if (joins_next) {
        h->free[i].off = off;
        h->free[i].len += len;
    } else {
        memmove(h->free + i + 1, h->free + i, (h->n_free - i) * sizeof *h->free);
        h->free[i] = (nnf_fit_range){off, len};
        h->n_free++;
    }
    h->n_live--;
    /* a free range at the top goes back below it: the next buffer that does
     * not fit lower down starts there, and may be larger */
    if (h->n_free && h->free[h->n_free - 1].off + h->free[h->n_free - 1].len == h->top) {
        h->top = h->free[h->n_free - 1].off;
        h->n_free--;
    }
}

void *nnf_fitheap_get(nnf_fitheap *h, size_t bytes, size_t *capacity) {
    size_t len;
    if (!nnf_add_size(bytes ? bytes : 1, ALIGN - 1, &len))
        return NULL;
    len &= ~(ALIGN - 1);
    if (!h->no_range) {
        if (nnf_alloc_fails())
            return NULL;
        void *p = range_get(h, len);
        if (p) {
            *capacity = len;
            return p;
        }
    }
    /* a block of its own: the smallest kept one that holds it, or a new one */
    size_t best = h->n_blocks;
    for (size_t i = 0; i < h->n_blocks; i++)
        if (h->blocks[i].capacity >= bytes &&
            (best == h->n_blocks || h->blocks[i].capacity < h->blocks[best].capacity))
            best = i;
    if (best < h->n_blocks) {
        void *d = h->blocks[best].data;
        *capacity = h->blocks[best].capacity;
        h->blocks[best] = h->blocks[--h->n_blocks];
        h->n_block_live++;
        return d;
    }
    /* room to keep every block once it is freed, made now so that a put never allocates */
    if (h->cap_blocks < h->n_blocks + h->n_block_live + 1) {
        size_t cap = h->cap_blocks ? h->cap_blocks * 2 : 16;
        nnf_fit_block *b = nnf_realloc(h->blocks, cap * sizeof *b);
        if (!b)
            return NULL;
        h->blocks = b;
        h->cap_blocks = cap;
    }
    void *d = nnf_malloc_aligned(bytes);
    if (d) {
        *capacity = bytes;
        h->n_block_live++;
        h->block_bytes += bytes;
    }
    return d;
}

void nnf_fitheap_put(nnf_fitheap *h, void *data, size_t capacity) {
    if (!data)
        return;
    unsigned char *p = data;
    if (h->base && p >= h->base && p < h->base + h->reserved) {
        range_put(h, (size_t)(p - h->base), capacity);
        return;
    }
    h->n_block_live--;
    h->blocks[h->n_blocks++] = (nnf_fit_block){data, capacity}; /* room made by the get */
}

void nnf_fitheap_destroy(nnf_fitheap *h) {
    for (size_t i = 0; i < h->n_blocks; i++)
        nnf_free_aligned(h->blocks[i].data);
    nnf_free(h->blocks);
    nnf_free(h->free);
    nnf_unreserve(h->base, h->reserved);
    size_t want = h->want;
    memset(h, 0, sizeof *h);
    h->want = want;
    h->no_range = want == 0;
}

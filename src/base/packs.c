#include "base/packs.h"

#include "base/alloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nnf_packs {
    bool replay;
    pthread_mutex_t mu; /* recording: nodes are planned on several threads */
    nnf_pack_entry *e;
    size_t n, cap;
    bool sorted;
};

/* the node this thread plans, and where its blocks have got to */
static _Thread_local struct {
    nnf_packs *p;
    uint32_t node, seq;
    nnf_status failed;
    char message[160];
} t_ctx;

nnf_packs *nnf_packs_recorder(void) {
    nnf_packs *p = nnf_calloc(1, sizeof *p);
    if (p && pthread_mutex_init(&p->mu, NULL)) {
        nnf_free(p);
        p = NULL;
    }
    return p;
}

static int entry_cmp(const void *a, const void *b) {
    const nnf_pack_entry *x = a, *y = b;
    if (x->node != y->node)
        return x->node < y->node ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

nnf_status nnf_packs_replayer(const nnf_pack_entry *entries, size_t n, nnf_packs **out) {
    *out = NULL;
    nnf_packs *p = nnf_packs_recorder();
    if (!p || !(p->e = nnf_calloc(n ? n : 1, sizeof *p->e))) {
        nnf_packs_free(p);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for %zu packed blocks", n);
    }
    memcpy(p->e, entries, n * sizeof *entries);
    p->n = p->cap = n;
    p->replay = p->sorted = true;
    for (size_t i = 1; i < n; i++)
        if (entry_cmp(&p->e[i - 1], &p->e[i]) >= 0) {
            nnf_packs_free(p);
            return nnf_error(NNF_ERR_INVALID_MODEL, "packed blocks out of order at entry %zu", i);
        }
    *out = p;
    return NNF_OK;
}

void nnf_packs_free(nnf_packs *p) {
    if (!p)
        return;
    pthread_mutex_destroy(&p->mu);
    nnf_free(p->e);
    nnf_free(p);
}

const nnf_pack_entry *nnf_packs_entries(nnf_packs *p, size_t *n) {
    if (!p->sorted) {
        qsort(p->e, p->n, sizeof *p->e, entry_cmp);
        p->sorted = true;
    }
    *n = p->n;
    return p->e;
}

static const nnf_pack_entry *find(const nnf_packs *p, uint32_t node, uint32_t seq) {
    nnf_pack_entry key = {.node = node, .seq = seq};
    return p->n ? bsearch(&key, p->e, p->n, sizeof *p->e, entry_cmp) : NULL;
}

bool nnf_packs_has_node(const nnf_packs *p, int node) {
    if (!p || !p->replay || node < 0)
        return false;
    /* the node's first block, seq 0, exists when any does */
    return find(p, (uint32_t)node, 0) != NULL;
}

bool nnf_pack_replaying(void) {
    return nnf_packs_has_node(t_ctx.p, (int)t_ctx.node);
}

void nnf_packs_enter(nnf_packs *p, int node) {
    t_ctx.p = p;
    t_ctx.node = (uint32_t)node;
    t_ctx.seq = 0;
    t_ctx.failed = NNF_OK;
}

nnf_status nnf_packs_leave(void) {
    nnf_status st = t_ctx.failed;
    if (st != NNF_OK)
        nnf_error(st, "%s", t_ctx.message);
    t_ctx.p = NULL;
    return st;
}

void *nnf_pack_alloc(size_t bytes, bool *ready) {
    *ready = false;
    nnf_packs *p = t_ctx.p;
    if (!p)
        return nnf_malloc_aligned(bytes);
    uint32_t seq = t_ctx.seq++;
    if (p->replay) {
        const nnf_pack_entry *e = find(p, t_ctx.node, seq);
        if (e && e->bytes == bytes) {
            *ready = true;
            return (void *)e->data;
        }
        /* NULL, not a fresh block: the node's weights may not be ready to
         * pack (a folded BatchNorm's scale is not applied where the file
         * has the node's blocks); the load fails when the node's plan ends */
        if (t_ctx.failed == NNF_OK) {
            t_ctx.failed = NNF_ERR_INVALID_MODEL;
            snprintf(t_ctx.message, sizeof t_ctx.message,
                     "the compiled file's packed block %u of node %u is %s (%zu bytes wanted): "
                     "it was not made by this build with these options; compile it again",
                     (unsigned)seq, (unsigned)t_ctx.node, e ? "of another size" : "missing", bytes);
        }
        return NULL;
    }
    void *b = nnf_malloc_aligned(bytes);
    if (!b)
        return NULL;
    pthread_mutex_lock(&p->mu);
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        nnf_pack_entry *e = nnf_realloc(p->e, cap * sizeof *e);
        if (!e) {
            pthread_mutex_unlock(&p->mu);
            nnf_free_aligned(b);
            return NULL;
        }
        p->e = e;
        p->cap = cap;
    }
    p->e[p->n++] = (nnf_pack_entry){.node = t_ctx.node, .seq = seq, .data = b, .bytes = bytes};
    p->sorted = false;
    pthread_mutex_unlock(&p->mu);
    return b;
}

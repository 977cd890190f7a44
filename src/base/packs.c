#include "base/packs.h"

#include "base/alloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A block nodes share: what it is made of, and the store's reference. */
typedef struct shared_block {
    int value; /* the graph value packed */
    size_t params_bytes;
    unsigned char params[NNF_PACK_PARAMS_MAX];
    size_t bytes;
    void *data;    /* NULL while its maker allocates it, or when that failed */
    uint32_t node; /* its maker */
    bool made;     /* written (or its maker gave up) */
} shared_block;

struct nnf_packs {
    bool record, replay;
    pthread_mutex_t mu;  /* nodes are planned on several threads */
    pthread_cond_t made; /* a shared block was made */
    nnf_pack_entry *e;
    size_t n, cap;
    bool sorted;
    shared_block *s;
    size_t n_shared, cap_shared;
};

/* the node this thread plans, and where its blocks have got to */
static _Thread_local struct {
    nnf_packs *p;
    uint32_t node, seq;
    const nnf_pack_source *src;
    int n_src;
    bool makes_shared; /* the node made a shared block (which others may wait for) */
    nnf_status failed;
    char message[160];
} t_ctx;

nnf_packs *nnf_packs_sharer(void) {
    nnf_packs *p = nnf_calloc(1, sizeof *p);
    if (!p)
        return NULL;
    if (pthread_mutex_init(&p->mu, NULL)) {
        nnf_free(p);
        return NULL;
    }
    if (pthread_cond_init(&p->made, NULL)) {
        pthread_mutex_destroy(&p->mu);
        nnf_free(p);
        return NULL;
    }
    return p;
}

nnf_packs *nnf_packs_recorder(void) {
    nnf_packs *p = nnf_packs_sharer();
    if (p)
        p->record = true;
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
    nnf_packs *p = nnf_packs_sharer();
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
    for (size_t i = 0; i < p->n_shared; i++)
        nnf_free_aligned(p->s[i].data); /* the store's reference */
    pthread_cond_destroy(&p->made);
    pthread_mutex_destroy(&p->mu);
    nnf_free(p->s);
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

/* Room for one more element in *a (capacity *cap). */
static bool grow(void **a, size_t *cap, size_t size) {
    size_t n = *cap ? 2 * *cap : 64;
    void *e = nnf_realloc(*a, n * size);
    if (!e)
        return false;
    *a = e;
    *cap = n;
    return true;
}

/* Notes the node's block seq for the compiled file. Under p->mu. */
static bool record_locked(nnf_packs *p, uint32_t seq, const void *b, size_t bytes) {
    if (p->n == p->cap && !grow((void **)&p->e, &p->cap, sizeof *p->e))
        return false;
    p->e[p->n++] = (nnf_pack_entry){.node = t_ctx.node, .seq = seq, .data = b, .bytes = bytes};
    p->sorted = false;
    return true;
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

void nnf_packs_enter(nnf_packs *p, int node, const nnf_pack_source *src, int n_src) {
    t_ctx.p = p;
    t_ctx.node = (uint32_t)node;
    t_ctx.seq = 0;
    t_ctx.src = src;
    t_ctx.n_src = n_src;
    t_ctx.makes_shared = false;
    t_ctx.failed = NNF_OK;
}

/* Marks what the node made (all of it: its plan has ended, written or not)
 * and wakes the nodes that wait for it. Under p->mu. */
static void made_locked(nnf_packs *p, const void *block, bool all_of_node) {
    bool any = false;
    for (size_t i = 0; i < p->n_shared; i++) {
        shared_block *s = &p->s[i];
        if (!s->made && s->node == t_ctx.node && (all_of_node || s->data == block))
            any = s->made = true;
    }
    if (any)
        pthread_cond_broadcast(&p->made);
}

nnf_status nnf_packs_leave(void) {
    nnf_status st = t_ctx.failed;
    if (st != NNF_OK)
        nnf_error(st, "%s", t_ctx.message);
    nnf_packs *p = t_ctx.p;
    if (p && t_ctx.makes_shared) {
        pthread_mutex_lock(&p->mu);
        made_locked(p, NULL, true);
        pthread_mutex_unlock(&p->mu);
    }
    t_ctx.p = NULL;
    t_ctx.src = NULL;
    t_ctx.n_src = 0;
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
    if (!b || !p->record)
        return b;
    pthread_mutex_lock(&p->mu);
    bool kept = record_locked(p, seq, b, bytes);
    pthread_mutex_unlock(&p->mu);
    if (!kept) {
        nnf_free_aligned(b);
        return NULL;
    }
    return b;
}

/* The value of the node's constant input whose data is at src, or -1. */
static int source_value(const void *src) {
    for (int i = 0; src && i < t_ctx.n_src; i++)
        if (t_ctx.src[i].data == src)
            return t_ctx.src[i].value;
    return -1;
}

static bool same_block(const shared_block *s, int value, const void *params, size_t params_bytes,
                       size_t bytes) {
    return s->value == value && s->bytes == bytes && s->params_bytes == params_bytes &&
           !memcmp(s->params, params, params_bytes);
}

void *nnf_pack_alloc_shared(const void *src, const void *params, size_t params_bytes, size_t bytes,
                            bool *ready) {
    *ready = false;
    nnf_packs *p = t_ctx.p;
    int value = source_value(src);
    if (!p || p->replay || value < 0 || params_bytes > NNF_PACK_PARAMS_MAX)
        return nnf_pack_alloc(bytes, ready);
    uint32_t seq = t_ctx.seq++;
    pthread_mutex_lock(&p->mu);
    size_t i = 0;
    while (i < p->n_shared && !same_block(&p->s[i], value, params, params_bytes, bytes))
        i++;
    void *b = NULL;
    if (i < p->n_shared) { /* another node's: once it is made */
        while (!p->s[i].made)
            pthread_cond_wait(&p->made, &p->mu);
        if ((b = p->s[i].data)) {
            *ready = true;
            nnf_block_ref(b);
        }
    } else if (p->n_shared < p->cap_shared || grow((void **)&p->s, &p->cap_shared, sizeof *p->s)) {
        t_ctx.makes_shared = true;
        shared_block *s = &p->s[p->n_shared++];
        *s = (shared_block){
            .value = value, .params_bytes = params_bytes, .bytes = bytes, .node = t_ctx.node};
        memcpy(s->params, params, params_bytes);
        /* made outside the lock (a large block is faulted in); the table
         * may move meanwhile, its entries keep their places */
        pthread_mutex_unlock(&p->mu);
        b = nnf_malloc_aligned(bytes);
        pthread_mutex_lock(&p->mu);
        if (b) {
            p->s[i].data = nnf_block_ref(b); /* the store's reference */
        } else { /* nothing to wait for */
            p->s[i].made = true;
            pthread_cond_broadcast(&p->made);
        }
    }
    if (b && p->record && !record_locked(p, seq, b, bytes)) {
        nnf_free_aligned(b);
        b = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    return b;
}

void nnf_pack_made(const void *block) {
    nnf_packs *p = t_ctx.p;
    if (!p || !block || !t_ctx.makes_shared)
        return;
    pthread_mutex_lock(&p->mu);
    made_locked(p, block, false);
    pthread_mutex_unlock(&p->mu);
}

#include "plan/plan.h"

#include "base/alloc.h"
#include "base/log.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Live readers of each value (graph outputs count as readers). */
static int *count_readers(const nnf_graph *g) {
    int *uses = nnf_calloc((size_t)g->n_values + 1, sizeof(int));
    if (!uses)
        return NULL;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; !g->nodes[i].dead && k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0)
                uses[g->nodes[i].inputs[k]]++;
    for (int k = 0; k < g->n_outputs; k++)
        uses[g->outputs[k]]++;
    return uses;
}

/* Planning nodes on several threads: each thread takes the next node from
 * a queue until none is left, plans it into its own slot and releases what
 * that node alone packed; the first failure in topological order is the one
 * reported. The queue has the nodes with the most constant bytes first
 * (transforming and packing weights is most of a load), so the threads end
 * together: in topological order, taken in runs (nnf_parallel_for), one
 * thread still had a stride-2 Winograd transform of 9-15 ms to go when the
 * other ran out. */
typedef struct plan_job {
    nnf_graph *g;
    nnf_kernel_plan *plans;
    int *unpacked_readers; /* of each value: readers whose plans have not packed it (under mu) */
    bool release_packed;
    nnf_packs *packs;
    void *bank;         /* the loading thread's page bank, shared with the workers */
    pthread_mutex_t mu; /* releases (the graph's block list) and the failure */
    const int *queue;   /* positions in g->order, most constant bytes first */
    atomic_int next;    /* the queue's next entry */
    int failed_at;      /* position in g->order of the first failure, or INT_MAX */
    nnf_status failed;
    char message[NNF_ERROR_MAX];
} plan_job;

/* The node's inputs with a pending row scale (a folded BatchNormalization,
 * nnf_value.row_scale) become plain copies now, whether or not the node gets
 * a planned kernel: the packing that follows reads the copy from the caches,
 * and its pages go back to the page bank for the next node's. The node is
 * the value's only reader. */
static nnf_status apply_row_scales(plan_job *j, const nnf_node *n) {
    nnf_graph *g = j->g;
    for (int k = 0; k < n->n_inputs; k++) {
        int v = n->inputs[k];
        if (v < 0 || !g->values[v].row_scale || !g->values[v].data) /* released */
            continue;
        const nnf_value *val = &g->values[v];
        pthread_mutex_lock(&j->mu);
        float *block = nnf_graph_block_alloc(g, val->nbytes ? val->nbytes : 1);
        pthread_mutex_unlock(&j->mu);
        if (!block)
            return nnf_error(NNF_ERR_OUT_OF_MEMORY,
                             "node '%s' (%s): out of memory folding the BatchNormalization "
                             "scale into '%s' (%zu bytes)",
                             n->name, n->op_type, val->name, val->nbytes);
        nnf_value_scale_rows(g, val, block);
        pthread_mutex_lock(&j->mu);
        nnf_graph_set_value_block(g, v, block);
        pthread_mutex_unlock(&j->mu);
    }
    return NNF_OK;
}

/* Plans node g->order[oi]; NNF_OK when it needs no plan. */
static nnf_status plan_node(plan_job *j, int oi) {
    nnf_graph *g = j->g;
    int id = g->order[oi];
    const nnf_node *n = &g->nodes[id];
    if (n->dead)
        return NNF_OK;
    bool replay = nnf_packs_has_node(j->packs, id);
    if (!replay)
        NNF_CHECK(apply_row_scales(j, n));
    if (!n->op->plan || n->op->plan == nnf_plan_none || n->n_inputs > 64 || n->n_outputs > 64)
        return NNF_OK;
    nnf_tinfo in[64], out[64];
    bool known = true;
    for (int k = 0; k < n->n_inputs; k++) {
        nnf_value_tinfo(g, n->inputs[k], &in[k]);
        known &= !in[k].present || nnf_shape_known(&in[k].shape);
    }
    for (int k = 0; k < n->n_outputs; k++) {
        nnf_value_tinfo(g, n->outputs[k], &out[k]);
        known &= !out[k].present || nnf_shape_known(&out[k].shape);
    }
    if (!known && !n->op->plan_symbolic)
        return NNF_OK;
    nnf_pack_source src[64]; /* what its packers may share with other nodes */
    int n_src = 0;
    for (int k = 0; k < n->n_inputs; k++) {
        const nnf_value *val = n->inputs[k] >= 0 ? &g->values[n->inputs[k]] : NULL;
        if (val && val->data &&
            (val->kind == NNF_VALUE_INITIALIZER || val->kind == NNF_VALUE_CONSTANT))
            src[n_src++] = (nnf_pack_source){.data = val->data, .value = n->inputs[k]};
    }
    nnf_packs_enter(j->packs, id, src, n_src);
    nnf_status st = n->op->plan(n, in, out, &j->plans[id]);
    nnf_status packs = nnf_packs_leave(); /* a replayed block missing: its message */
    if (packs != NNF_OK && st == NNF_OK && j->plans[id].free_state) {
        j->plans[id].free_state(j->plans[id].state);
        memset(&j->plans[id], 0, sizeof j->plans[id]);
    }
    if (packs != NNF_OK || st != NNF_OK)
        return nnf_error_prefix(packs != NNF_OK ? packs : st, "planning node '%s' (%s)", n->name,
                                n->op_type);
    if (!j->plans[id].run)
        return replay ? apply_row_scales(j, n) : NNF_OK;
    NNF_LOG_DEBUG("node '%s' (%s): kernel %s", n->name, n->op_type, j->plans[id].name);
    /* a weight goes when the last of its readers has packed it (each into a
     * block of its own or one they share, base/packs.h); until then, where
     * it is read from the file, its pages go back (a later reader that packs
     * it otherwise faults them in again) */
    pthread_mutex_lock(&j->mu);
    for (int k = 0; j->release_packed && k < n->n_inputs && k < 32; k++) {
        int v = n->inputs[k];
        if (!(j->plans[id].packed_inputs >> k & 1) || v < 0)
            continue;
        if (--j->unpacked_readers[v] > 0)
            nnf_graph_drop_value_pages(g, v);
        else if (nnf_graph_release_value_data(g, v)) {
            NNF_LOG_TRACE("released the unpacked copy of '%s' (every reader packed it)",
                          g->values[v].name);
            g->values[v].packed_away = true; /* what a compiled file says it holds packed */
        }
    }
    pthread_mutex_unlock(&j->mu);
    /* what the replayed plan did not pack still needs its scale */
    return replay ? apply_row_scales(j, n) : NNF_OK;
}

static void plan_task(void *ctx, size_t thread) {
    plan_job *j = ctx;
    (void)thread;
    void *own = nnf_page_bank_adopt(j->bank);
    for (int q; (q = atomic_fetch_add(&j->next, 1)) < j->g->n_order;) {
        int oi = j->queue[q];
        nnf_status st = plan_node(j, oi);
        if (st == NNF_OK)
            continue;
        pthread_mutex_lock(&j->mu);
        if (oi < j->failed_at) {
            j->failed_at = oi;
            j->failed = st;
            snprintf(j->message, sizeof j->message, "%s", nnf_error_message());
        }
        pthread_mutex_unlock(&j->mu);
    }
    nnf_page_bank_adopt(own);
}

typedef struct plan_rank {
    size_t bytes; /* the node's constant inputs */
    int oi;       /* its position in g->order */
} plan_rank;

static int rank_cmp(const void *a, const void *b) {
    const plan_rank *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return (x->oi > y->oi) - (x->oi < y->oi);
}

/* The queue of plan_job: g->order's positions, most constant bytes first
 * (ties in topological order). NULL on OOM. */
static int *plan_queue(const nnf_graph *g) {
    plan_rank *rank = nnf_calloc((size_t)g->n_order + 1, sizeof *rank);
    int *queue = nnf_calloc((size_t)g->n_order + 1, sizeof *queue);
    if (!rank || !queue) {
        nnf_free(rank);
        nnf_free(queue);
        return NULL;
    }
    for (int oi = 0; oi < g->n_order; oi++) {
        const nnf_node *n = &g->nodes[g->order[oi]];
        rank[oi].oi = oi;
        for (int k = 0; k < n->n_inputs; k++) {
            const nnf_value *v = n->inputs[k] >= 0 ? &g->values[n->inputs[k]] : NULL;
            if (v && (v->kind == NNF_VALUE_INITIALIZER || v->kind == NNF_VALUE_CONSTANT))
                rank[oi].bytes += v->nbytes;
        }
    }
    qsort(rank, (size_t)g->n_order, sizeof *rank, rank_cmp);
    for (int q = 0; q < g->n_order; q++)
        queue[q] = rank[q].oi;
    nnf_free(rank);
    return queue;
}

nnf_status nnf_graph_plan(nnf_graph *g, bool release_packed, nnf_threadpool *pool, nnf_packs *packs,
                          nnf_kernel_plan **plans_out) {
    nnf_kernel_plan *plans = nnf_calloc((size_t)g->n_nodes + 1, sizeof *plans);
    int *unpacked = count_readers(g);
    /* a store of the load's own where the caller has none: nodes that pack
     * the same weight share its block */
    nnf_packs *own = packs ? NULL : nnf_packs_sharer();
    plan_job j = {.g = g,
                  .plans = plans,
                  .unpacked_readers = unpacked,
                  .release_packed = release_packed,
                  .packs = packs ? packs : own,
                  .bank = nnf_page_bank_current(),
                  .failed_at = INT_MAX};
    int threads = nnf_threadpool_size(pool);
    int *queue = threads > 1 ? plan_queue(g) : NULL;
    if (!plans || !unpacked || !j.packs || (threads > 1 && !queue) ||
        pthread_mutex_init(&j.mu, NULL)) {
        nnf_free(plans);
        nnf_free(unpacked);
        nnf_free(queue);
        nnf_packs_free(own);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory planning kernels");
    }
    if (threads > 1) {
        j.queue = queue;
        atomic_init(&j.next, 0);
        nnf_parallel_for(pool, (size_t)threads, plan_task, &j);
        nnf_free(queue);
    } else {
        for (int oi = 0; oi < g->n_order && j.failed_at == INT_MAX; oi++)
            if ((j.failed = plan_node(&j, oi)) != NNF_OK)
                j.failed_at = oi;
    }
    pthread_mutex_destroy(&j.mu);
    nnf_packs_free(own); /* the plans hold what they share */
    nnf_free(unpacked);
    if (j.failed_at != INT_MAX) {
        nnf_graph_plans_free(g, plans);
        if (threads > 1)
            nnf_error(j.failed, "%s", j.message);
        return j.failed;
    }
    *plans_out = plans;
    return NNF_OK;
}

void nnf_graph_plans_free(const nnf_graph *g, nnf_kernel_plan *plans) {
    if (!plans)
        return;
    for (int i = 0; i < g->n_nodes; i++)
        if (plans[i].free_state)
            plans[i].free_state(plans[i].state);
    nnf_free(plans);
}

/* Shape plans: a model whose inputs have symbolic dims leaves the nodes whose
 * ops plan for fixed shapes only (convolutions, pools, norms, the blocked
 * layout) to reference kernels. On the first run with a new set of input
 * shapes, the model is loaded again from its bytes with those shapes fixed,
 * as nnf_model_options.input_shapes would at load, and runs of those shapes
 * go to that model from then on (the session keeps an executor per shape
 * plan, session.c). This is OpenVINO's per-shape kernel cache or TensorRT's
 * optimisation profile made on demand; onnxruntime plans no shapes but its
 * kernels need none.
 *
 * Shape plans are made only where they pay: where the nodes the symbolic
 * plan left to reference kernels carry at least a tenth of the model's FLOPs
 * at unit extents (a CNN's convolutions; decided at load, model.c). Otherwise
 * (BERT's Transposes and ReduceMeans) the symbolic plan serves every shape:
 * a shape plan would cost a load and a second copy of the weights for little. */
#include "base/log.h"
#include "runtime/model.h"
#include "runtime/session.h"

#include <pthread.h>
#include <string.h>

typedef struct shape_plan {
    int64_t *key; /* per graph input: its rank, then its extents */
    size_t key_len;
    nnf_model *model;
} shape_plan;

struct nnf_shape_plans {
    pthread_mutex_t mu;
    int max, n;
    bool failed; /* a shape plan failed to load: the model's own plan serves all shapes */
    bool full_warned;
    shape_plan *plans;
};

nnf_status nnf_shape_plans_create(int max, nnf_shape_plans **out) {
    nnf_shape_plans *sp = nnf_calloc(1, sizeof *sp);
    if (sp)
        sp->plans = nnf_calloc((size_t)max, sizeof *sp->plans);
    if (!sp || !sp->plans || pthread_mutex_init(&sp->mu, NULL)) {
        if (sp)
            nnf_free(sp->plans);
        nnf_free(sp);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory");
    }
    sp->max = max;
    *out = sp;
    return NNF_OK;
}

void nnf_shape_plans_free(nnf_shape_plans *sp) {
    if (!sp)
        return;
    for (int i = 0; i < sp->n; i++) {
        nnf_model_destroy(sp->plans[i].model);
        nnf_free(sp->plans[i].key);
    }
    pthread_mutex_destroy(&sp->mu);
    nnf_free(sp->plans);
    nnf_free(sp);
}

static bool key_matches(const shape_plan *p, const nnf_graph *g, const nnf_buf *bufs) {
    size_t at = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        const nnf_buf *b = &bufs[g->inputs[i]];
        if (at + 1 + (size_t)b->rank > p->key_len || p->key[at] != b->rank ||
            memcmp(&p->key[at + 1], b->dims, sizeof(int64_t) * (size_t)b->rank))
            return false;
        at += 1 + (size_t)b->rank;
    }
    return at == p->key_len;
}

static int64_t *key_make(const nnf_graph *g, const nnf_buf *bufs, size_t *len) {
    size_t n = 0;
    for (int i = 0; i < g->n_inputs; i++)
        n += 1 + (size_t)bufs[g->inputs[i]].rank;
    int64_t *key = nnf_malloc((n ? n : 1) * sizeof *key);
    if (!key)
        return NULL;
    size_t at = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        const nnf_buf *b = &bufs[g->inputs[i]];
        key[at] = b->rank;
        memcpy(&key[at + 1], b->dims, sizeof(int64_t) * (size_t)b->rank);
        at += 1 + (size_t)b->rank;
    }
    *len = n;
    return key;
}

/* A node's FLOPs with every unknown extent taken as 1 (0 where a rank is
 * unknown): the load-time estimate of what waits for shapes. */
static double unit_cost(const nnf_graph *g, const nnf_node *n) {
    nnf_tinfo t[128];
    if (n->n_inputs > 64 || n->n_outputs > 64)
        return 0;
    for (int k = 0; k < n->n_inputs + n->n_outputs; k++) {
        nnf_value_tinfo(g, k < n->n_inputs ? n->inputs[k] : n->outputs[k - n->n_inputs], &t[k]);
        if (t[k].present && t[k].shape.rank < 0)
            return 0;
        for (int d = 0; d < t[k].shape.rank; d++)
            if (t[k].shape.dims[d] < 0)
                t[k].shape.dims[d] = 1;
    }
    double c = n->op->cost(n, t, t + n->n_inputs);
    return c > 0 ? c : 0;
}

double nnf_unplanned_share(const nnf_model *m) {
    const nnf_graph *g = m->graph;
    double total = 0, waiting = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead)
            continue;
        double c = unit_cost(g, &g->nodes[i]);
        total += c;
        waiting += m->unplanned && m->unplanned[i] ? c : 0;
    }
    return total > 0 ? waiting / total : 0;
}

/* Loads m for these shapes; NULL (and a message) where it fails. Called
 * with sp->mu held. */
static nnf_model *plan_for(const nnf_model *m, const nnf_buf *bufs) {
    const nnf_graph *g = m->graph;
    nnf_input_shape *shapes = nnf_calloc((size_t)g->n_inputs + 1, sizeof *shapes);
    if (!shapes)
        return NULL;
    for (int i = 0; i < g->n_inputs; i++) {
        const nnf_buf *b = &bufs[g->inputs[i]];
        shapes[i] = (nnf_input_shape){g->values[g->inputs[i]].name, b->rank, b->dims};
    }
    double t0 = nnf_now_us();
    nnf_model *shaped = NULL;
    nnf_status st = nnf_model_load_shaped(m, shapes, (size_t)g->n_inputs, &shaped);
    nnf_free(shapes);
    if (st != NNF_OK) {
        NNF_LOG_WARN("%s: planning for the run's input shapes failed, so the symbolic plan runs them: %s",
                     m->source, nnf_error_message());
        return NULL;
    }
    NNF_LOG_INFO("%s: planned for the run's input shapes in %.1f ms", m->source, (nnf_now_us() - t0) / 1e3);
    return shaped;
}

const nnf_model *nnf_model_for_shapes(const nnf_model *m, const nnf_buf *bufs) {
    nnf_shape_plans *sp = m->shape_plans;
    if (!sp)
        return m;
    const nnf_graph *g = m->graph;
    const nnf_model *use = m;
    pthread_mutex_lock(&sp->mu);
    for (int i = 0; i < sp->n && use == m; i++)
        if (key_matches(&sp->plans[i], g, bufs))
            use = sp->plans[i].model;
    if (use != m || sp->failed)
        goto done;
    if (sp->n == sp->max) {
        if (!sp->full_warned)
            NNF_LOG_WARN("%s: a new set of input shapes after %d planned ones: shapes not planned for run "
                         "on the symbolic plan (nodes waiting for shapes on reference kernels); "
                         "nnf_model_options.shape_plans allows more",
                         m->source, sp->max);
        sp->full_warned = true;
        goto done;
    }
    shape_plan p = {0};
    if (!(p.key = key_make(g, bufs, &p.key_len)))
        goto done;
    if (!(p.model = plan_for(m, bufs))) {
        nnf_free(p.key);
        sp->failed = true;
        goto done;
    }
    sp->plans[sp->n++] = p;
    use = p.model;
done:
    pthread_mutex_unlock(&sp->mu);
    return use;
}

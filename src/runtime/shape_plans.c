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
 * plan would leave to reference kernels carry at least a tenth of the
 * model's FLOPs at unit extents (a CNN's convolutions; decided at load,
 * model.c). The model is then only their template: no passes, no packed
 * weights. Otherwise (BERT's Transposes and ReduceMeans) the symbolic plan
 * serves every shape: its kernels take each run's extents, and a shape plan
 * would cost a load per set of shapes for little. */
#include "base/log.h"
#include "runtime/model.h"
#include "runtime/session.h"

#include <pthread.h>
#include <string.h>

struct nnf_shape_plans {
    pthread_mutex_t mu;
    int max, n;
    bool full_warned;
    nnf_model **plans;
};

nnf_status nnf_shape_plans_create(int max, nnf_shape_plans **out) {
    nnf_shape_plans *sp = nnf_calloc(1, sizeof *sp);
    if (!sp || pthread_mutex_init(&sp->mu, NULL)) {
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
    for (int i = 0; i < sp->n; i++)
        nnf_model_destroy(sp->plans[i]);
    pthread_mutex_destroy(&sp->mu);
    nnf_free(sp->plans);
    nnf_free(sp);
}

bool nnf_shape_plan_fits(const nnf_model *plan, const nnf_model *m, const nnf_buf *bufs) {
    const nnf_graph *g = m->graph, *pg = plan->graph;
    for (int i = 0; i < g->n_inputs; i++) {
        const nnf_shape *s = &pg->values[pg->inputs[i]].shape;
        const nnf_buf *b = &bufs[g->inputs[i]];
        if (s->rank != b->rank || memcmp(s->dims, b->dims, sizeof(int64_t) * (size_t)b->rank))
            return false;
    }
    return true;
}

/* m loaded again with the shapes in bufs fixed. */
static nnf_status plan_for(const nnf_model *m, const nnf_buf *bufs, nnf_model **out) {
    const nnf_graph *g = m->graph;
    nnf_input_shape *shapes = nnf_calloc((size_t)g->n_inputs + 1, sizeof *shapes);
    if (!shapes)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY,
                         "%s: out of memory planning for the run's input shapes", m->source);
    for (int i = 0; i < g->n_inputs; i++) {
        const nnf_buf *b = &bufs[g->inputs[i]];
        shapes[i] = (nnf_input_shape){g->values[g->inputs[i]].name, b->rank, b->dims};
    }
    double t0 = nnf_now_us();
    nnf_status st = nnf_model_load_shaped(m, shapes, (size_t)g->n_inputs, out);
    nnf_free(shapes);
    if (st != NNF_OK)
        return nnf_error_prefix(st, "planning for the run's input shapes");
    NNF_LOG_INFO("%s: planned for the run's input shapes in %.1f ms", m->source,
                 (nnf_now_us() - t0) / 1e3);
    return NNF_OK;
}

nnf_status nnf_model_for_shapes(const nnf_model *m, const nnf_buf *bufs, const nnf_model **use,
                                nnf_model **own) {
    nnf_shape_plans *sp = m->shape_plans;
    *use = m;
    *own = NULL;
    if (!sp)
        return NNF_OK;
    nnf_status st = NNF_OK;
    pthread_mutex_lock(&sp->mu);
    for (int i = 0; i < sp->n; i++)
        if (nnf_shape_plan_fits(sp->plans[i], m, bufs)) {
            *use = sp->plans[i];
            goto done;
        }
    if (sp->n < sp->max) {
        nnf_model *p = NULL, **grown = nnf_realloc(sp->plans, ((size_t)sp->n + 1) * sizeof *grown);
        if (!grown) {
            st = nnf_error(NNF_ERR_OUT_OF_MEMORY,
                           "%s: out of memory planning for the run's input shapes", m->source);
            goto done;
        }
        sp->plans = grown;
        if ((st = plan_for(m, bufs, &p)) == NNF_OK)
            *use = sp->plans[sp->n++] = p;
        goto done;
    }
    if (!sp->full_warned)
        NNF_LOG_WARN(
            "%s: a new set of input shapes after %d planned ones: a session plans each set of "
            "shapes beyond them for itself, on every change (nnf_model_options.shape_plans "
            "allows more)",
            m->source, sp->max);
    sp->full_warned = true;
    pthread_mutex_unlock(&sp->mu);
    /* out of the lock: other sessions go on with the shared plans */
    if ((st = plan_for(m, bufs, own)) == NNF_OK)
        *use = *own;
    return st;
done:
    pthread_mutex_unlock(&sp->mu);
    return st;
}

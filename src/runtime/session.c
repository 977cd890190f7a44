/* The executor: runs the model's nodes in topological order on the kernels
 * planned for them, allocating each intermediate when it is produced and
 * releasing it after its last reader. (The static memory plan replaces the
 * per-node allocation in a later step; the interface stays.) */
#include "runtime/session.h"

#include "base/log.h"
#include "format/npy.h"
#include "kernels/nchwc.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

NNF_API nnf_session_options nnf_session_options_default(void) {
    return (nnf_session_options){.struct_size = sizeof(nnf_session_options)};
}

double nnf_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

NNF_API const nnf_graph *nnf_model_graph(const nnf_model *m) { return m->graph; }

NNF_API const nnf_graph *nnf_session_graph(const nnf_session *s) {
    return s->last->model->graph;
}

/* Address space for the intermediate buffers: twice the sum of their sizes
 * (unknown extents taken as 1), so that a fixed-shape model's buffers fit
 * however they are placed, and at least 256 MiB for a model with symbolic
 * dims. Only touched pages cost memory; a buffer that does not fit is a block
 * of its own (base/fitheap.h). */
static size_t buffer_reserve(const nnf_graph *g) {
    size_t sum = 0;
    for (int v = 0; v < g->n_values; v++) {
        const nnf_value *val = &g->values[v];
        if (val->producer < 0 || val->shape.rank < 0)
            continue;
        size_t n = nnf_dtype_size(val->dtype), d;
        for (int i = 0; i < val->shape.rank; i++)
            if (!nnf_mul_size(n, val->shape.dims[i] > 0 ? (size_t)val->shape.dims[i] : 1, &n))
                return (size_t)16 << 30;
        if (!nnf_add_size(sum, n, &d))
            return (size_t)16 << 30;
        sum = d;
    }
    size_t floor = (size_t)256 << 20, cap = (size_t)16 << 30;
    sum = sum > cap / 2 ? cap : 2 * sum;
    return sum > floor ? sum : floor;
}

/* Lists v among the values a run binds or produces (once). fixed[v] is 2
 * for a listed value until bind_constants is done. */
static void list_run_value(nnf_session *s, int v) {
    if (v >= 0 && s->fixed[v] != 2) {
        s->fixed[v] = 2;
        s->run_values[s->n_run_values++] = v;
    }
}

/* Constants are visible as buffers pointing at their data, bound once: a run
 * clears only the values it binds or produces (run_values: the graph's
 * inputs, among them any initializer the caller may override, and every
 * output of a live node, whatever its kind; a fused graph keeps the values
 * of the nodes it absorbed, which no run touches). */
static void bind_constants(nnf_session *s) {
    const nnf_graph *g = s->model->graph;
    for (int v = 0; v < g->n_values; v++) {
        const nnf_value *val = &g->values[v];
        s->fixed[v] = val->kind == NNF_VALUE_INITIALIZER || val->kind == NNF_VALUE_CONSTANT;
    }
    s->n_run_values = 0;
    for (int i = 0; i < g->n_inputs; i++)
        list_run_value(s, g->inputs[i]);
    for (int oi = 0; oi < g->n_order; oi++) {
        const nnf_node *n = &g->nodes[g->order[oi]];
        for (int k = 0; k < n->n_outputs && !n->dead; k++)
            list_run_value(s, n->outputs[k]);
    }
    for (int v = 0; v < g->n_values; v++) {
        if (s->fixed[v] != 1) {
            s->fixed[v] = 0;
            continue;
        }
        const nnf_value *val = &g->values[v];
        nnf_buf *b = &s->bufs[v];
        static int64_t empty;
        b->dtype = val->dtype;
        b->rank = val->shape.rank;
        memcpy(b->dims, val->shape.dims, sizeof b->dims);
        b->numel = (size_t)nnf_shape_numel(&val->shape);
        b->data = val->data ? (void *)val->data : &empty;
    }
}

static bool shape_concrete(const nnf_value *v) {
    if (v->shape.rank < 0 || v->dtype == NNF_DTYPE_UNDEFINED)
        return false;
    for (int d = 0; d < v->shape.rank; d++)
        if (v->shape.dims[d] < 0)
            return false;
    return true;
}

static bool shapes_static(const nnf_graph *g, const nnf_node *n) {
    for (int k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0 && !shape_concrete(&g->values[n->inputs[k]]))
            return false;
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0 && !shape_concrete(&g->values[n->outputs[k]]))
            return false;
    return true;
}

/* A session over model; on `pool` when given (borrowed), else on its own. */
static nnf_status session_new(const nnf_model *model, const nnf_session_options *opts,
                              nnf_threadpool *pool, nnf_session **out) {
    nnf_session *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory creating a session");
    const nnf_graph *g = model->graph;
    nnf_status st = NNF_OK;
    s->model = model;
    s->last = s;
    s->n_values = g->n_values;
    s->opts = nnf_session_options_default();
    if (opts)
        memcpy(&s->opts, opts, opts->struct_size < sizeof s->opts ? opts->struct_size : sizeof s->opts);
    s->opts.struct_size = sizeof s->opts;
    s->inject_node = -1;
    s->t0_us = nnf_now_us();
    nnf_fitheap_init(&s->heap, buffer_reserve(g));
    size_t nv = (size_t)g->n_values + 1;
    s->last_use = nnf_calloc(nv, sizeof *s->last_use);
    s->bufs = nnf_calloc(nv, sizeof *s->bufs);
    s->owned = nnf_calloc(nv, 1);
    s->capacity = nnf_calloc(nv, sizeof *s->capacity);
    s->outputs = nnf_calloc((size_t)g->n_outputs + 1, sizeof *s->outputs);
    s->output_shapes = nnf_calloc((size_t)g->n_outputs + 1, sizeof *s->output_shapes);
    s->fixed = nnf_calloc(nv, 1);
    s->run_values = nnf_calloc(nv, sizeof *s->run_values);
    s->static_shapes = nnf_calloc((size_t)g->n_nodes + 1, 1);
    if (!s->last_use || !s->bufs || !s->owned || !s->capacity || !s->outputs || !s->output_shapes ||
        !s->fixed || !s->run_values || !s->static_shapes) {
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory creating a session");
        goto fail;
    }
    if (s->opts.reference_kernels && model->shape_plans && !model->plans) {
        st = nnf_error(
            NNF_ERR_INVALID_ARGUMENT,
            "%s: reference_kernels needs the model's weights as imported, and this one plans for "
            "its input shapes at run time: load it with keep_unpacked_weights or at opt_level 0",
            model->source);
        goto fail;
    }
    /* a reference-kernel session needs the weights its nodes read unpacked
     * (a BN fold releases the unfolded ones, which nothing reads any more;
     * a GEMM's B that plans packed from where the file has it unaligned was
     * not copied aligned, model.c) */
    for (int oi = 0; oi < g->n_order; oi++) {
        const nnf_node *n = &g->nodes[g->order[oi]];
        for (int k = 0; k < n->n_inputs; k++) {
            if (n->inputs[k] < 0)
                continue;
            s->last_use[n->inputs[k]] = oi;
            const nnf_value *w = &g->values[n->inputs[k]];
            if (s->opts.reference_kernels &&
                (w->released || (w->misaligned && !nnf_node_reads_bytewise(n, k)))) {
                st = nnf_error(
                    NNF_ERR_INVALID_ARGUMENT,
                    "%s: reference_kernels needs the unpacked weights ('%s' lives only packed): "
                    "load the model with keep_unpacked_weights or at opt_level 0",
                    model->source, w->name);
                goto fail;
            }
        }
    }
    for (int k = 0; k < g->n_outputs; k++)
        s->last_use[g->outputs[k]] = INT32_MAX;
    bind_constants(s);
    for (int i = 0; i < g->n_nodes; i++)
        s->static_shapes[i] = shapes_static(g, &g->nodes[i]);
    s->borrowed_pool = pool;
    s->pool = pool;
    if (!pool && (st = nnf_threadpool_create(s->opts.threads, &s->pool)) != NNF_OK)
        goto fail;
    /* the profile's busy time per node; a pool shared with other sessions
     * stays counting (a few clock reads a job), and their jobs at the same
     * time would mix into this one's figures */
    if (s->opts.profile)
        nnf_threadpool_account(s->pool, true);
    /* the model's kernel plans are shared; a reference-only session ignores them */
    s->plans = s->opts.reference_kernels ? NULL : model->plans;
    st = nnf_concat_in_place_plan(s);
    if (st != NNF_OK)
        goto fail;
    *out = s;
    return NNF_OK;
fail:
    nnf_session_destroy(s);
    return st;
}

NNF_API nnf_status nnf_session_create(const nnf_model *model, const nnf_session_options *opts,
                                      nnf_session **out) {
    if (!model || !out)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT,
                         "nnf_session_create: model and session_out are required");
    *out = NULL;
    return session_new(model, opts, NULL, out);
}

static void release(nnf_session *s, int v) {
    if (s->fixed[v])
        return; /* bound once (bind_constants) */
    if (s->owned[v]) {
        nnf_fitheap_put(&s->heap, s->bufs[v].data, s->capacity[v]);
        s->live_bytes -= s->bufs[v].numel * nnf_dtype_size(s->bufs[v].dtype);
    }
    s->owned[v] = 0;
    memset(&s->bufs[v], 0, sizeof s->bufs[v]);
}

static void release_all(nnf_session *s) {
    for (int i = 0; i < s->n_run_values; i++)
        release(s, s->run_values[i]);
}

NNF_API void nnf_session_destroy(nnf_session *s) {
    if (!s)
        return;
    if (s->bufs && s->owned && s->fixed && s->run_values)
        release_all(s);
    nnf_fitheap_destroy(&s->heap);
    nnf_free(s->capacity);
    nnf_free_aligned(s->logical);
    for (int i = 0; i < s->n_shaped; i++) {
        nnf_session_destroy(s->shaped[i].session);
        if (s->shaped[i].own)
            nnf_model_destroy((nnf_model *)s->shaped[i].model);
    }
    nnf_free(s->shaped);
    if (!s->borrowed_pool)
        nnf_threadpool_destroy(s->pool);
    nnf_free(s->last_use);
    nnf_free(s->slice_of);
    nnf_free(s->slice_off);
    nnf_free(s->concat_in_place);
    nnf_free(s->bufs);
    nnf_free(s->owned);
    nnf_free(s->fixed);
    nnf_free(s->run_values);
    nnf_free(s->static_shapes);
    nnf_free(s->outputs);
    nnf_free(s->output_shapes);
    nnf_free(s->events);
    nnf_free(s);
}

NNF_API const char *nnf_session_last_error(const nnf_session *s) { return s ? s->error : ""; }

static nnf_status session_fail(nnf_session *s, nnf_status st) {
    snprintf(s->error, sizeof s->error, "%s", nnf_error_message());
    return st;
}

static nnf_status bind_inputs(nnf_session *s, const nnf_tensor *inputs, size_t count) {
    const nnf_graph *g = s->model->graph;
    const char *src = s->model->source;
    for (int i = 0; i < g->n_inputs; i++) {
        int v = g->inputs[i];
        const nnf_value *val = &g->values[v];
        const nnf_tensor *t = NULL;
        for (size_t k = 0; k < count && !t; k++)
            if (inputs[k].name && !strcmp(inputs[k].name, val->name))
                t = &inputs[k];
        if (!t && (size_t)i < count && !inputs[i].name)
            t = &inputs[i];
        if (!t)
            return nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: input '%s' was not given", src, val->name);
        if (val->dtype != NNF_DTYPE_UNDEFINED && t->dtype != val->dtype)
            return nnf_error(NNF_ERR_SHAPE, "%s: input '%s' must be %s, got %s", src, val->name,
                             nnf_dtype_name(val->dtype), nnf_dtype_name(t->dtype));
        if (t->rank < 0 || t->rank > NNF_MAX_RANK || (t->rank > 0 && !t->shape))
            return nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: input '%s' has an invalid rank %d", src, val->name, t->rank);
        if (val->shape.rank >= 0 && t->rank != val->shape.rank)
            return nnf_error(NNF_ERR_SHAPE, "%s: input '%s' must have rank %d, got %d", src, val->name,
                             val->shape.rank, t->rank);
        nnf_buf *b = &s->bufs[v];
        b->dtype = t->dtype;
        b->rank = t->rank;
        size_t numel = 1;
        for (int d = 0; d < t->rank; d++) {
            if (t->shape[d] < 0 || !nnf_mul_size(numel, (size_t)t->shape[d], &numel))
                return nnf_error(NNF_ERR_SHAPE, "%s: input '%s' has an invalid extent %lld in dim %d", src,
                                 val->name, (long long)t->shape[d], d);
            if (val->shape.rank >= 0 && val->shape.dims[d] >= 0 && val->shape.dims[d] != t->shape[d]) {
                char want[128];
                return nnf_error(NNF_ERR_SHAPE, "%s: input '%s' must have shape %s, got %lld in dim %d", src,
                                 val->name, nnf_shape_str(&val->shape, want, sizeof want),
                                 (long long)t->shape[d], d);
            }
            b->dims[d] = t->shape[d];
        }
        b->numel = numel;
        if (!t->data && numel)
            return nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: input '%s' has no data", src, val->name);
        b->data = t->data;
    }
    return NNF_OK;
}

static void buf_tinfo(const nnf_buf *b, nnf_tinfo *t) {
    memset(t, 0, sizeof *t);
    t->present = true;
    t->dtype = b->dtype;
    t->shape.rank = b->rank;
    memcpy(t->shape.dims, b->dims, sizeof b->dims);
    t->data = b->data;
}

static bool plan_matches(const nnf_graph *g, const nnf_node *n, nnf_buf *const *in) {
    for (int k = 0; k < n->n_inputs; k++) {
        if (!in[k])
            continue;
        /* a rank or extent unknown at load (an NNF_OP_SYM plan) is the run's */
        const nnf_shape *s = &g->values[n->inputs[k]].shape;
        if (s->rank >= 0 && s->rank != in[k]->rank)
            return false;
        for (int d = 0; d < s->rank; d++)
            if (s->dims[d] >= 0 && s->dims[d] != in[k]->dims[d])
                return false;
    }
    return true;
}

static nnf_status record_event(nnf_session *s, int node, double t0, double t1, const char *kernel,
                               int over_input, double busy_us) {
    if (s->n_events == s->cap_events) {
        size_t cap = s->cap_events ? s->cap_events * 2 : 256;
        nnf_profile_event *e = nnf_realloc(s->events, cap * sizeof *e);
        if (!e)
            return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory recording the profile");
        s->events = e;
        s->cap_events = cap;
    }
    s->events[s->n_events++] =
        (nnf_profile_event){node, t0 - s->t0_us, t1 - t0, kernel, over_input, busy_us};
    return NNF_OK;
}

static bool dump_selected(const char *filter, const nnf_node *n) {
    if (!filter || !filter[0])
        return true;
    size_t ln = strlen(n->name), lo = strlen(n->op_type);
    for (const char *p = filter; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if ((l == ln && !strncmp(p, n->name, l)) || (l == lo && !strncmp(p, n->op_type, l)))
            return true;
        p += l + (e ? 1 : 0);
    }
    return false;
}

static nnf_status dump_output(nnf_session *s, const nnf_node *n, const nnf_value *v, const nnf_buf *b) {
    char safe[256], path[4096];
    nnf_npy_safe_name(v->name, safe, sizeof safe);
    snprintf(path, sizeof path, "%s/%s.npy", s->opts.dump_dir, safe);
    nnf_status st = nnf_npy_write(path, b->dtype, b->rank, b->dims, b->data);
    return st == NNF_OK ? st : nnf_error_prefix(st, "dumping node '%s' (%s)", n->name, n->op_type);
}

/* Hooks and dumps see a blocked twin (nnf_value.blocked_of) as the logical
 * value it holds: its name, its shape, its elements in NCHW order. */
static nnf_status logical_view(nnf_session *s, const nnf_node *n, const nnf_value **v, const nnf_buf **b,
                               nnf_buf *tmp) {
    const nnf_graph *g = s->model->graph;
    if ((*v)->blocked_of < 0)
        return NNF_OK;
    const nnf_value *lv = &g->values[(*v)->blocked_of];
    *tmp = **b;
    tmp->dims[1] = lv->shape.dims[1];
    tmp->numel = (size_t)(tmp->dims[0] * tmp->dims[1] * tmp->dims[2] * tmp->dims[3]);
    if (tmp->numel > s->logical_cap) {
        size_t bytes;
        float *p = nnf_mul_size(tmp->numel, sizeof(float), &bytes) ? nnf_malloc_aligned(bytes) : NULL;
        if (!p)
            return nnf_node_error(n, NNF_ERR_OUT_OF_MEMORY, "out of memory unblocking '%s' for a hook", lv->name);
        nnf_free_aligned(s->logical);
        s->logical = p;
        s->logical_cap = tmp->numel;
    }
    nnf_nchwc_to_nchw((*b)->data, s->logical, (size_t)tmp->dims[0], (size_t)tmp->dims[1],
                      (size_t)(tmp->dims[2] * tmp->dims[3]), NNF_ISA_SCALAR, NULL);
    tmp->data = s->logical;
    *v = lv;
    *b = tmp;
    return NNF_OK;
}

/* A view op whose input dies here hands its buffer on instead of copying it
 * (not for graph outputs, whose buffers the caller reads after the run). */
static bool can_alias(const nnf_session *s, const nnf_node *n, int oi) {
    if (!nnf_is_view_op(n) || n->n_inputs < 1 || n->inputs[0] < 0 || n->outputs[0] < 0)
        return false;
    for (int k = 1; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0)
            return false; /* Dropout's mask */
    int v = n->inputs[0], y = n->outputs[0];
    for (int k = 1; k < n->n_inputs; k++)
        if (n->inputs[k] == v)
            return false;
    if (s->slice_of[y] >= 0) /* both in one in-place Concat's output, at one place */
        return s->slice_of[v] == s->slice_of[y] && s->slice_off[v] == s->slice_off[y];
    return s->owned[v] && s->last_use[v] == oi && s->last_use[y] != INT32_MAX;
}

/* The input (its index in the node) whose buffer output 0 of a planned
 * kernel takes, among those its plan allows (in_place_inputs), or -1: the
 * input dies here, the session owns its buffer and it holds output 0's
 * bytes, no other input of the node is the same value, and output 0 is not
 * a graph output (the caller reads those after the run). Reference kernels
 * never run in place. runtime/schedule.c simulates this rule and can_alias
 * when it picks the node order: a change here belongs there too. */
static int in_place_source(const nnf_session *s, const nnf_node *n, int oi, const nnf_kernel_plan *p,
                           bool fast, size_t bytes) {
    if (!fast || !p->in_place_inputs || s->last_use[n->outputs[0]] == INT32_MAX)
        return -1;
    for (int ki = 0; ki < n->n_inputs && ki < 32; ki++) {
        int v = n->inputs[ki], twice = 0;
        if (!(p->in_place_inputs >> ki & 1u) || v < 0 || !s->owned[v] || s->last_use[v] != oi)
            continue;
        for (int k = 0; k < n->n_inputs; k++)
            twice |= k != ki && n->inputs[k] == v;
        const nnf_buf *b = &s->bufs[v];
        if (!twice && b->numel * nnf_dtype_size(b->dtype) == bytes && s->capacity[v] >= bytes)
            return ki;
    }
    return -1;
}

/* The buffer of an in-place Concat's output, taken when its first input is
 * produced, with the shape inferred at load (checked when the Concat runs). */
static nnf_status concat_buffer(nnf_session *s, const nnf_node *n, int cv) {
    if (s->owned[cv])
        return NNF_OK;
    const nnf_value *val = &s->model->graph->values[cv];
    nnf_buf *b = &s->bufs[cv];
    size_t numel = (size_t)nnf_shape_numel(&val->shape), bytes = numel * nnf_dtype_size(val->dtype);
    b->data = nnf_fitheap_get(&s->heap, bytes, &s->capacity[cv]);
    if (!b->data)
        return nnf_node_error(n, NNF_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes for Concat output '%s'",
                              bytes, val->name);
    b->dtype = val->dtype;
    b->rank = val->shape.rank;
    memcpy(b->dims, val->shape.dims, sizeof b->dims);
    b->numel = numel;
    s->owned[cv] = 1;
    s->live_bytes += bytes;
    if (s->live_bytes > s->peak_bytes)
        s->peak_bytes = s->live_bytes;
    return NNF_OK;
}

/* A run-time shape that differs from the one the in-place Concat was planned
 * with (shape inference and a kernel disagree): an internal error, never a
 * wrong result. */
static nnf_status in_place_mismatch(const nnf_session *s, const nnf_node *n, int v) {
    return nnf_node_error(n, NNF_ERR_INTERNAL,
                          "'%s' has a run-time shape other than the one its in-place Concat was planned with",
                          s->model->graph->values[v].name);
}

static nnf_status run_node(nnf_session *s, int oi) {
    const nnf_graph *g = s->model->graph;
    int id = g->order[oi];
    const nnf_node *n = &g->nodes[id];
    nnf_buf *in[64], *out[64];
    nnf_tinfo tin[64], tout[64];
    if (n->n_inputs > 64 || n->n_outputs > 64)
        return nnf_node_error(n, NNF_ERR_UNSUPPORTED, "more than 64 inputs or outputs");
    for (int k = 0; k < n->n_inputs; k++) {
        int v = n->inputs[k];
        if (v < 0) {
            in[k] = NULL;
            memset(&tin[k], 0, sizeof tin[k]);
            tin[k].shape.rank = -1;
            continue;
        }
        in[k] = &s->bufs[v];
        buf_tinfo(in[k], &tin[k]);
    }
    for (int k = 0; k < n->n_outputs; k++) {
        memset(&tout[k], 0, sizeof tout[k]);
        tout[k].present = n->outputs[k] >= 0;
        tout[k].shape.rank = -1;
    }
    static const nnf_kernel_plan none;
    const nnf_kernel_plan *p = s->plans ? &s->plans[id] : &none;
    bool fast = p->run && plan_matches(g, n, in);
    if (fast && s->static_shapes[id]) { /* the shapes the load inferred */
        for (int k = 0; k < n->n_outputs; k++)
            if (tout[k].present) {
                tout[k].dtype = g->values[n->outputs[k]].dtype;
                tout[k].shape = g->values[n->outputs[k]].shape;
            }
    } else {
        NNF_CHECK(n->op->infer(n, tin, tout));
    }
    bool alias = can_alias(s, n, oi), in_place = s->concat_in_place[id];
    int over_input = -1;
    for (int k = 0; k < n->n_outputs; k++) {
        int v = n->outputs[k];
        if (v < 0) {
            out[k] = NULL;
            continue;
        }
        int64_t numel = nnf_shape_numel(&tout[k].shape);
        size_t es = nnf_dtype_size(tout[k].dtype), bytes;
        if (numel < 0 || !es || !nnf_mul_size((size_t)numel, es, &bytes))
            return nnf_node_error(n, NNF_ERR_INTERNAL, "output %d has no concrete shape or dtype at run time", k);
        if (in_place) { /* its inputs already fill the buffer */
            nnf_buf *b = &s->bufs[v];
            if (!s->owned[v] || b->numel != (size_t)numel || b->dtype != tout[k].dtype || b->rank != tout[k].shape.rank ||
                memcmp(b->dims, tout[k].shape.dims, sizeof(int64_t) * (size_t)b->rank))
                return in_place_mismatch(s, n, v);
            for (int i = 0; i < n->n_inputs; i++)
                if ((char *)s->bufs[n->inputs[i]].data != (char *)b->data + s->slice_off[n->inputs[i]])
                    return in_place_mismatch(s, n, n->inputs[i]);
            out[k] = b;
            continue;
        }
        release(s, v);
        nnf_buf *b = &s->bufs[v];
        b->dtype = tout[k].dtype;
        b->rank = tout[k].shape.rank;
        memcpy(b->dims, tout[k].shape.dims, sizeof b->dims);
        b->numel = (size_t)numel;
        int cv = s->slice_of[v];
        if (cv >= 0) { /* produced straight into its slice of a Concat's output */
            const nnf_value *cval = &g->values[cv];
            NNF_CHECK(concat_buffer(s, n, cv));
            if (b->dtype != cval->dtype || numel != nnf_shape_numel(&g->values[v].shape))
                return in_place_mismatch(s, n, v);
            b->data = (char *)s->bufs[cv].data + s->slice_off[v];
            out[k] = b;
            continue;
        }
        int iv = -1;
        if (k == 0 && alias)
            iv = n->inputs[0];
        else if (k == 0 && (over_input = in_place_source(s, n, oi, p, fast, bytes)) >= 0)
            iv = n->inputs[over_input];
        if (iv >= 0) { /* a view, or a kernel writing over its input */
            b->data = s->bufs[iv].data;
            s->capacity[v] = s->capacity[iv];
            s->owned[iv] = 0; /* ownership moves to the output */
            s->owned[v] = 1;
            out[k] = b;
            continue;
        }
        b->data = nnf_fitheap_get(&s->heap, bytes, &s->capacity[v]);
        if (!b->data)
            return nnf_node_error(n, NNF_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes for output %d", bytes, k);
        s->owned[v] = 1;
        s->live_bytes += bytes;
        if (s->live_bytes > s->peak_bytes)
            s->peak_bytes = s->live_bytes;
        out[k] = b;
    }
    if (!fast)
        for (int k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0 && g->values[n->inputs[k]].released)
                return nnf_node_error(n, NNF_ERR_SHAPE,
                                      "run-time shapes differ from the ones its kernel was planned and its weights "
                                      "packed for at load (load with keep_unpacked_weights to allow this)");
    nnf_kctx ctx = {.pool = s->pool, .state = fast ? p->state : NULL};
    uint64_t pool0 = 0, busy0 = 0, pool1, busy1;
    if (s->opts.profile)
        nnf_threadpool_usage(s->pool, &pool0, &busy0);
    double t0 = s->opts.profile ? nnf_now_us() : 0;
    nnf_status st = alias || in_place ? NNF_OK : fast ? p->run(n, in, out, &ctx) : n->op->ref(n, in, out, &ctx);
    if (st != NNF_OK)
        return st;
    if (s->opts.profile) {
        double t1 = nnf_now_us();
        nnf_threadpool_usage(s->pool, &pool1, &busy1);
        /* the caller's time outside the jobs counts as one thread working */
        double jobs_us = (double)(pool1 - pool0) / 1e3 / nnf_threadpool_size(s->pool);
        double outside = t1 - t0 - jobs_us;
        NNF_CHECK(record_event(s, id, t0, t1,
                               alias      ? "view"
                               : in_place ? "in_place"
                               : fast     ? p->name
                                          : "ref",
                               over_input,
                               (double)(busy1 - busy0) / 1e3 + (outside > 0 ? outside : 0)));
    }
    if (id == s->inject_node && out[0] && out[0]->dtype == NNF_DTYPE_FLOAT32)
        for (size_t i = 0; i < out[0]->numel; i++)
            ((float *)out[0]->data)[i] += s->inject_delta;
    for (int k = 0; k < n->n_outputs; k++) {
        if (!out[k])
            continue;
        const nnf_value *v = &g->values[n->outputs[k]];
        const nnf_buf *b = out[k];
        bool dump = s->opts.dump_dir && dump_selected(s->opts.dump_filter, n);
        nnf_buf tmp;
        const nnf_value *raw_v = v;
        const nnf_buf *raw_b = b;
        if ((s->hook && s->hook_logical) || dump)
            NNF_CHECK(logical_view(s, n, &v, &b, &tmp));
        if (s->hook)
            s->hook(s->hook_user, n, k, s->hook_logical ? v : raw_v, s->hook_logical ? b : raw_b);
        if (dump)
            NNF_CHECK(dump_output(s, n, v, b));
    }
    NNF_LOG_TRACE("ran node '%s' (%s) with %s", n->name, n->op_type, fast ? p->name : "reference kernel");
    for (int k = 0; k < n->n_inputs; k++) {
        int v = n->inputs[k];
        if (v >= 0 && s->last_use[v] == oi)
            release(s, v);
    }
    return NNF_OK;
}

/* The node of s's graph that stands for node `node` of parent's (by name,
 * or the node that absorbed it): a shaped session's graph went through the
 * passes apart. -1 if none. */
static int same_node(const nnf_session *parent, const nnf_session *s, int node) {
    const nnf_graph *pg = parent->model->graph;
    if (node < 0 || node >= pg->n_nodes)
        return -1;
    return nnf_graph_find_node(s->model->graph, pg->nodes[node].name, strlen(pg->nodes[node].name));
}

/* Drops the session's own shape plan: a run with other shapes came. */
static void drop_own_plan(nnf_session *s) {
    for (int i = 0; i < s->n_shaped; i++)
        if (s->shaped[i].own) {
            nnf_session_destroy(s->shaped[i].session);
            nnf_model_destroy((nnf_model *)s->shaped[i].model);
            s->shaped[i] = s->shaped[--s->n_shaped];
            s->last = s;
            return;
        }
}

/* The executor for the shape plan of the bound inputs' shapes, made (with
 * the plan, where need be) on first use. */
static nnf_status shaped_session(nnf_session *s, nnf_session **out) {
    for (int i = 0; i < s->n_shaped; i++)
        if (nnf_shape_plan_fits(s->shaped[i].model, s->model, s->bufs)) {
            *out = s->shaped[i].session;
            return NNF_OK;
        }
    drop_own_plan(s); /* its memory goes before a new plan's comes */
    struct nnf_shaped_session *grown =
        nnf_realloc(s->shaped, ((size_t)s->n_shaped + 1) * sizeof *grown);
    if (!grown)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory creating a session",
                         s->model->source);
    s->shaped = grown;
    const nnf_model *model;
    nnf_model *own;
    NNF_CHECK(nnf_model_for_shapes(s->model, s->bufs, &model, &own));
    nnf_session *run = NULL;
    nnf_status st = session_new(model, &s->opts, s->pool, &run);
    if (st != NNF_OK) {
        nnf_model_destroy(own);
        return st;
    }
    s->shaped[s->n_shaped++] = (struct nnf_shaped_session){model, run, own != NULL};
    run->t0_us = s->t0_us;
    nnf_session_set_hook(run, s->hook, s->hook_user, s->hook_logical);
    nnf_session_inject_error(run, same_node(s, run, s->inject_node), s->inject_delta);
    *out = run;
    return NNF_OK;
}

/* A model with shape plans runs each set of input shapes on its plan. */
static nnf_status run_shaped(nnf_session *s, const nnf_tensor *inputs, size_t count,
                             const nnf_tensor **outputs_out, size_t *count_out) {
    nnf_session *run = NULL;
    nnf_status st = shaped_session(s, &run);
    release_all(s); /* the inputs bound to find the shapes */
    if (st != NNF_OK)
        return session_fail(s, st);
    s->last = run;
    st = nnf_session_run(run, inputs, count, outputs_out, count_out);
    snprintf(s->error, sizeof s->error, "%s", run->error);
    return st;
}

static nnf_status session_run(nnf_session *s, const nnf_tensor *inputs, size_t count,
                              const nnf_tensor **outputs_out, size_t *count_out);

/* The model's first run on this thread takes the pages its load left
 * faulted in (model.h, warm_pages) for the buffers and scratch it makes:
 * fresh pages cost this VM ~1 us each to fault in, and ResNet-50's first
 * run faulted in 10 MB. What the run does not take is given back after it. */
NNF_API nnf_status nnf_session_run(nnf_session *s, const nnf_tensor *inputs, size_t count,
                                   const nnf_tensor **outputs_out, size_t *count_out) {
    void *warm = s ? nnf_model_take_warm_pages(s->model) : NULL;
    if (!warm)
        return session_run(s, inputs, count, outputs_out, count_out);
    void *own = nnf_page_bank_adopt(warm);
    nnf_status st = session_run(s, inputs, count, outputs_out, count_out);
    nnf_page_bank_adopt(own);
    nnf_page_bank_free(warm);
    return st;
}

static nnf_status session_run(nnf_session *s, const nnf_tensor *inputs, size_t count,
                              const nnf_tensor **outputs_out, size_t *count_out) {
    if (!s)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "nnf_session_run: session is NULL");
    if ((!inputs && count) || !outputs_out || !count_out) {
        nnf_error(NNF_ERR_INVALID_ARGUMENT, "nnf_session_run: outputs_out and output_count_out are required");
        return session_fail(s, NNF_ERR_INVALID_ARGUMENT);
    }
    const nnf_graph *g = s->model->graph;
    nnf_status st = NNF_OK;
    release_all(s);
    st = bind_inputs(s, inputs, count);
    if (st != NNF_OK)
        goto fail;
    s->last = s;
    if (!s->opts.reference_kernels && s->model->shape_plans)
        return run_shaped(s, inputs, count, outputs_out, count_out);
    for (int oi = 0; oi < g->n_order; oi++) {
        if (g->nodes[g->order[oi]].dead)
            continue;
        st = run_node(s, oi);
        if (st != NNF_OK) {
            nnf_error_prefix(st, "%s", s->model->source);
            goto fail;
        }
    }
    for (int k = 0; k < g->n_outputs; k++) {
        int v = g->outputs[k];
        const nnf_buf *b = &s->bufs[v];
        memcpy(s->output_shapes[k], b->dims, sizeof s->output_shapes[k]);
        s->outputs[k] = (nnf_tensor){.name = g->values[v].name, .dtype = b->dtype, .rank = b->rank,
                                     .shape = s->output_shapes[k], .data = b->data};
    }
    *outputs_out = s->outputs;
    *count_out = (size_t)g->n_outputs;
    s->error[0] = 0;
    return NNF_OK;
fail:
    release_all(s);
    return session_fail(s, st);
}

/* Profile events, memory figures: those of the executor the last run ran on. */
NNF_API void nnf_session_profile(const nnf_session *s, const nnf_profile_event **events, size_t *count) {
    *events = s->last->events;
    *count = s->last->n_events;
}

NNF_API void nnf_session_profile_reset(nnf_session *s) {
    s->n_events = 0;
    for (int i = 0; i < s->n_shaped; i++)
        s->shaped[i].session->n_events = 0;
}

NNF_API void nnf_session_set_hook(nnf_session *s, nnf_output_hook hook, void *user, bool logical) {
    s->hook = hook;
    s->hook_user = user;
    s->hook_logical = logical;
    for (int i = 0; i < s->n_shaped; i++)
        nnf_session_set_hook(s->shaped[i].session, hook, user, logical);
}

NNF_API void nnf_session_inject_error(nnf_session *s, int node, float delta) {
    s->inject_node = node;
    s->inject_delta = delta;
    for (int i = 0; i < s->n_shaped; i++)
        nnf_session_inject_error(s->shaped[i].session, same_node(s, s->shaped[i].session, node),
                                 delta);
}

NNF_API size_t nnf_session_buffers_held(const nnf_session *s) {
    return s ? nnf_fitheap_held(&s->last->heap) : 0;
}

NNF_API void nnf_session_memory(const nnf_session *s, size_t *live_out, size_t *peak_out) {
    if (live_out)
        *live_out = s ? s->last->live_bytes : 0;
    if (peak_out)
        *peak_out = s ? s->last->peak_bytes : 0;
}

/* Runs one operator both ways the runtime can: through a plan function (the
 * optimised kernel it picks, if any) and through the reference kernel, on the
 * same inputs, so a test compares the two. Like ref_op_harness.h, the node is
 * built in a one-node graph and goes through op->init and op->infer first. */
#ifndef NNF_TESTS_FAST_OP_HARNESS_H
#define NNF_TESTS_FAST_OP_HARNESS_H

#include "check.h"

#include "base/cpu.h"
#include "base/threadpool.h"
#include "ops/op.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F_MAX_IN 8
#define F_MAX_OUT 3

typedef struct f_in {
    nnf_dtype dtype;
    int rank;
    int64_t dims[NNF_MAX_RANK];
    const void *data;
    int absent;
    int constant; /* the plan sees the data (an initialiser) */
} f_in;

typedef struct f_res {
    nnf_status status; /* init/infer/plan/run failure, else NNF_OK */
    int planned;       /* the plan chose a kernel */
    char name[64];
    nnf_dtype dtype[F_MAX_OUT];
    size_t numel[F_MAX_OUT];
    void *fast[F_MAX_OUT], *ref[F_MAX_OUT];
    int n_out;
} f_res;

static inline void f_free(f_res *r) {
    for (int k = 0; k < F_MAX_OUT; k++) {
        free(r->fast[k]);
        free(r->ref[k]);
        r->fast[k] = r->ref[k] = NULL;
    }
}

static inline nnf_attr f_int(const char *name, int64_t v) {
    return (nnf_attr){.name = name, .type = NNF_ATTR_INT, .i = v};
}
static inline nnf_attr f_float(const char *name, float v) {
    return (nnf_attr){.name = name, .type = NNF_ATTR_FLOAT, .f = v};
}
static inline nnf_attr f_ints(const char *name, const int64_t *v, int n) {
    return (nnf_attr){.name = name, .type = NNF_ATTR_INTS, .ints = v, .count = n};
}
static inline nnf_attr f_str(const char *name, const char *v) {
    return (nnf_attr){.name = name, .type = NNF_ATTR_STRING, .s = v, .s_len = strlen(v)};
}

/* Runs with output 0 over an input, over all f_run calls (tests check that
 * the in-place path was exercised). */
static int f_in_place_total;

/* plan_fn NULL: the op table's plan. n_out outputs (the first n_out of the op). */
static inline f_res f_run(const char *op, int opset, nnf_attr *attrs, int n_attrs, const f_in *ins,
                          int n_in, int n_out, nnf_plan_fn plan_fn, nnf_threadpool *pool) {
    f_res r = {.status = NNF_OK, .n_out = n_out};
    nnf_graph *g = NULL;
    nnf_tinfo tin[F_MAX_IN], tout[F_MAX_OUT];
    nnf_buf bin[F_MAX_IN], bfast[F_MAX_OUT], bref[F_MAX_OUT];
    nnf_buf *pin[F_MAX_IN], *pfast[F_MAX_OUT], *pref[F_MAX_OUT];
    int vin[F_MAX_IN], vout[F_MAX_OUT];
    nnf_kernel_plan plan = {0};
    memset(tin, 0, sizeof tin);
    memset(tout, 0, sizeof tout);
    if (nnf_graph_create(&g) != NNF_OK)
        abort();
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        vin[i] = ins[i].absent ? NNF_NO_VALUE : nnf_graph_value(g, name);
    }
    for (int k = 0; k < n_out; k++) {
        char name[16];
        snprintf(name, sizeof name, "out%d", k);
        vout[k] = nnf_graph_value(g, name);
    }
    int id = nnf_graph_add_node(g, "n0", op, "", vin, n_in, vout, n_out);
    nnf_node *node = &g->nodes[id];
    node->opset = opset;
    node->attrs = attrs;
    node->n_attrs = n_attrs;
    node->op = nnf_op_find("", op, opset, NULL);
    if (!node->op) {
        r.status = NNF_ERR_UNSUPPORTED;
        goto done;
    }
    if ((r.status = node->op->init(node, &g->arena)) != NNF_OK)
        goto done;
    for (int i = 0; i < n_in; i++) {
        tin[i].present = !ins[i].absent;
        tin[i].dtype = ins[i].dtype;
        tin[i].shape.rank = ins[i].absent ? -1 : ins[i].rank;
        for (int d = 0; d < ins[i].rank; d++)
            tin[i].shape.dims[d] = ins[i].dims[d];
        tin[i].data = ins[i].constant ? ins[i].data : NULL;
    }
    for (int k = 0; k < n_out; k++) {
        tout[k].present = true;
        tout[k].shape.rank = -1;
    }
    if ((r.status = node->op->infer(node, tin, tout)) != NNF_OK)
        goto done;
    if ((r.status = (plan_fn ? plan_fn : node->op->plan)(node, tin, tout, &plan)) != NNF_OK)
        goto done;
    r.planned = plan.run != NULL;
    if (plan.name)
        snprintf(r.name, sizeof r.name, "%s", plan.name);
    for (int i = 0; i < n_in; i++) {
        pin[i] = NULL;
        if (ins[i].absent)
            continue;
        bin[i].dtype = ins[i].dtype;
        bin[i].rank = ins[i].rank;
        bin[i].numel = 1;
        for (int d = 0; d < ins[i].rank; d++) {
            bin[i].dims[d] = ins[i].dims[d];
            bin[i].numel *= (size_t)ins[i].dims[d];
        }
        bin[i].data = (void *)ins[i].data;
        pin[i] = &bin[i];
    }
    /* an output extent known only at run time (axes from a non-constant
     * input): the buffers cannot be sized from the planned shape (-1 would
     * wrap the count), so the case ends here, planned or not, nothing run */
    for (int k = 0; k < n_out; k++)
        for (int d = 0; d < tout[k].shape.rank; d++)
            if (tout[k].shape.dims[d] < 0) {
                r.n_out = 0;
                goto done;
            }
    for (int k = 0; k < n_out; k++) {
        nnf_buf *b[2] = {&bfast[k], &bref[k]};
        size_t es = nnf_dtype_size(tout[k].dtype), n = 1;
        for (int d = 0; d < tout[k].shape.rank; d++)
            n *= (size_t)tout[k].shape.dims[d];
        for (int w = 0; w < 2; w++) {
            b[w]->dtype = tout[k].dtype;
            b[w]->rank = tout[k].shape.rank;
            memcpy(b[w]->dims, tout[k].shape.dims, sizeof b[w]->dims);
            b[w]->numel = n;
            /* poison, so an element a kernel forgets shows up */
            b[w]->data = malloc(n * es + 16);
            memset(b[w]->data, 0x7f, n * es + 16);
        }
        r.dtype[k] = tout[k].dtype;
        r.numel[k] = n;
        r.fast[k] = bfast[k].data;
        r.ref[k] = bref[k].data;
        pfast[k] = &bfast[k];
        pref[k] = &bref[k];
    }
    nnf_kctx rctx = {.pool = pool};
    if ((r.status = node->op->ref(node, pin, pref, &rctx)) != NNF_OK)
        goto done;
    if (plan.run) {
        nnf_kctx fctx = {.pool = pool, .state = plan.state};
        r.status = plan.run(node, pin, pfast, &fctx);
        /* each input the plan may overwrite (in_place_inputs), as the
         * runtime runs it when that input dies at the node: output 0 in a
         * copy of the input must come out with the same bytes */
        size_t ob = n_out > 0 ? r.numel[0] * nnf_dtype_size(r.dtype[0]) : 0;
        for (int i = 0; r.status == NNF_OK && n_out > 0 && i < n_in; i++) {
            if (!(plan.in_place_inputs >> i & 1u) || !pin[i] ||
                pin[i]->numel * nnf_dtype_size(pin[i]->dtype) != ob)
                continue;
            nnf_buf io = bfast[0], keep = bin[i];
            io.data = malloc(ob + 16);
            memcpy(io.data, pin[i]->data, ob);
            bin[i].data = io.data;
            nnf_buf *pio[F_MAX_OUT];
            memcpy(pio, pfast, sizeof pio);
            pio[0] = &io;
            r.status = plan.run(node, pin, pio, &fctx);
            if (r.status == NNF_OK && memcmp(io.data, r.fast[0], ob)) {
                fprintf(stderr, "%s [%s]: output over input %d differs\n", op, r.name, i);
                r.status = NNF_ERR_INTERNAL;
            }
            bin[i] = keep;
            free(io.data);
            f_in_place_total++;
        }
    }
done:
    if (r.status != NNF_OK)
        fprintf(stderr, "%s (opset %d): %s\n", op, opset, nnf_last_error());
    if (plan.free_state)
        plan.free_state(plan.state);
    nnf_graph_destroy(g);
    return r;
}

/* Largest |fast - ref| / (abs_tol + rel_tol * |ref|) over output k; NaN must
 * meet NaN and infinities must be equal. > 1 fails. Prints the worst. */
static inline double f_err(const f_res *r, int k, double abs_tol, double rel_tol,
                           const char *what) {
    if (r->status != NNF_OK || !r->planned || r->dtype[k] != NNF_DTYPE_FLOAT32)
        return INFINITY;
    const float *f = r->fast[k], *e = r->ref[k];
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < r->numel[k]; i++) {
        double q;
        if (isnan(e[i]) || isnan(f[i]))
            q = isnan(e[i]) && isnan(f[i]) ? 0 : INFINITY;
        else if (isinf(e[i]) || isinf(f[i]))
            q = e[i] == f[i] ? 0 : INFINITY;
        else {
            double d = fabs((double)f[i] - (double)e[i]),
                   t = abs_tol + rel_tol * fabs((double)e[i]);
            q = d == 0 ? 0 : (t > 0 ? d / t : INFINITY);
        }
        if (q > worst) {
            worst = q;
            at = i;
        }
    }
    if (worst > 1)
        fprintf(stderr, "  %s [%s]: element %zu fast %.9g ref %.9g\n", what, r->name, at, f[at],
                e[at]);
    return worst;
}

/* Bytes equal (any dtype). */
static inline int f_same_bytes(const f_res *r, int k) {
    return r->status == NNF_OK && r->planned &&
           !memcmp(r->fast[k], r->ref[k], r->numel[k] * nnf_dtype_size(r->dtype[k]));
}

/* A float32 input of the given shape (data borrowed). */
static inline f_in f32_in(const float *data, int rank, const int64_t *dims, int constant) {
    f_in t = {.dtype = NNF_DTYPE_FLOAT32, .rank = rank, .data = data, .constant = constant};
    for (int i = 0; i < rank; i++)
        t.dims[i] = dims[i];
    return t;
}

static inline size_t numel_of(int rank, const int64_t *dims) {
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= (size_t)dims[i];
    return n;
}

static inline float f_rand(float lo, float hi) {
    return lo + (hi - lo) * (float)check_unit();
}
static inline float *f_rand_buf(size_t n, float lo, float hi) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = f_rand(lo, hi);
    return p;
}

/* Put NaN, infinities, signed zeros, a denormal and large values at every
 * stride-th element (from offset), so every size sees some. */
static inline void f_specials(float *p, size_t n, size_t stride, size_t offset) {
    static const float sp[] = {NAN,    INFINITY, -INFINITY, -0.0f, 0.0f,
                               1e-40f, 100.0f,   -100.0f,   88.5f, -95.0f};
    size_t j = 0;
    for (size_t i = offset; i < n; i += stride)
        p[i] = sp[j++ % (sizeof sp / sizeof sp[0])];
}

#endif

/* Runs one operator through the op table the way the runtime does: a
 * one-node graph, op->init, op->infer, then the reference kernel on buffers
 * of the inferred shapes. Shared by the reference-kernel tests. */
#ifndef NNF_TESTS_REF_OP_HARNESS_H
#define NNF_TESTS_REF_OP_HARNESS_H

#include "ops/op.h"

#include <stdlib.h>
#include <string.h>

typedef struct h_in {
    nnf_dtype dtype;
    int rank;
    int64_t dims[NNF_MAX_RANK];
    const void *data;
    int absent;     /* an omitted optional input */
    int data_known; /* infer sees the contents (a constant) */
} h_in;

typedef struct h_out {
    nnf_status status; /* the first failing step's status, else NNF_OK */
    const char *stage; /* "find", "init", "infer" or "ref" when status != OK */
    nnf_dtype dtype;
    nnf_shape shape; /* as inferred */
    void *data;      /* malloc'd; free with h_free */
    size_t numel;
} h_out;

static inline nnf_attr h_int(const char *name, int64_t v) {
    return (nnf_attr){.name = name, .type = NNF_ATTR_INT, .i = v};
}
static inline nnf_attr h_float(const char *name, float v) {
    return (nnf_attr){.name = name, .type = NNF_ATTR_FLOAT, .f = v};
}
static inline nnf_attr h_str(const char *name, const char *v) {
    return (nnf_attr){.name = name, .type = NNF_ATTR_STRING, .s = v, .s_len = strlen(v)};
}
static inline nnf_attr h_ints(const char *name, const int64_t *v, int n) {
    return (nnf_attr){.name = name, .type = NNF_ATTR_INTS, .ints = v, .count = n};
}

static inline void h_free(h_out *o) {
    free(o->data);
    o->data = NULL;
}

/* Run op (default domain) at opset with the given attributes and inputs.
 * Only the first output is returned. When infer_only is set the kernel is
 * not run. */
static inline h_out h_run_ex(const char *op, int opset, nnf_attr *attrs, int n_attrs,
                             const h_in *ins, int n_in, int infer_only) {
    h_out r = {.status = NNF_OK};
    nnf_graph *g = NULL;
    nnf_tinfo tin[8];
    nnf_tinfo tout[1];
    nnf_buf bin[8], bout;
    nnf_buf *pin[8];
    nnf_buf *pout[1] = {&bout};
    int vin[8], vout[1];
    memset(tin, 0, sizeof tin);
    memset(tout, 0, sizeof tout);
    if (nnf_graph_create(&g) != NNF_OK)
        abort();
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        vin[i] = ins[i].absent ? NNF_NO_VALUE : nnf_graph_value(g, name);
    }
    vout[0] = nnf_graph_value(g, "out0");
    int id = nnf_graph_add_node(g, "n0", op, "", vin, n_in, vout, 1);
    nnf_node *node = &g->nodes[id];
    node->opset = opset;
    node->attrs = attrs;
    node->n_attrs = n_attrs;
    node->op = nnf_op_find("", op, opset, NULL);
    if (!node->op) {
        r.status = NNF_ERR_UNSUPPORTED;
        r.stage = "find";
        goto done;
    }
    if ((r.status = node->op->init(node, &g->arena)) != NNF_OK) {
        r.stage = "init";
        goto done;
    }
    for (int i = 0; i < n_in; i++) {
        tin[i].present = !ins[i].absent;
        tin[i].dtype = ins[i].dtype;
        tin[i].shape.rank = ins[i].rank;
        for (int d = 0; d < ins[i].rank; d++)
            tin[i].shape.dims[d] = ins[i].dims[d];
        tin[i].data = ins[i].data_known ? ins[i].data : NULL;
    }
    if ((r.status = node->op->infer(node, tin, tout)) != NNF_OK) {
        r.stage = "infer";
        goto done;
    }
    r.dtype = tout[0].dtype;
    r.shape = tout[0].shape;
    if (infer_only)
        goto done;
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
    bout.dtype = r.dtype;
    bout.rank = r.shape.rank;
    bout.numel = 1;
    for (int d = 0; d < r.shape.rank; d++) {
        bout.dims[d] = r.shape.dims[d];
        bout.numel *= (size_t)r.shape.dims[d];
    }
    /* poison, so an element the kernel forgets to write shows up */
    bout.data = malloc(bout.numel * nnf_dtype_size(r.dtype) + 1);
    memset(bout.data, 0x7f, bout.numel * nnf_dtype_size(r.dtype) + 1);
    nnf_kctx ctx = {0};
    if ((r.status = node->op->ref(node, pin, pout, &ctx)) != NNF_OK)
        r.stage = "ref";
    r.data = bout.data;
    r.numel = bout.numel;
done:
    if (r.status != NNF_OK && getenv("H_VERBOSE"))
        fprintf(stderr, "%s %s: %s\n", op, r.stage, nnf_last_error());
    nnf_graph_destroy(g);
    return r;
}

static inline h_out h_run(const char *op, int opset, nnf_attr *attrs, int n_attrs, const h_in *ins,
                          int n_in) {
    return h_run_ex(op, opset, attrs, n_attrs, ins, n_in, 0);
}

/* Compare a float32 result to expectations; NaN matches NaN. */
static inline int h_match_f32(const h_out *o, const float *want, size_t n, double tol) {
    if (o->status != NNF_OK || o->dtype != NNF_DTYPE_FLOAT32 || o->numel != n)
        return 0;
    const float *y = o->data;
    for (size_t i = 0; i < n; i++) {
        if (isnan(want[i]) && isnan(y[i]))
            continue;
        if (isinf(want[i]) && want[i] == y[i])
            continue;
        if (!(fabs((double)y[i] - (double)want[i]) <= tol * (1.0 + fabs((double)want[i])))) {
            fprintf(stderr, "  element %zu: got %.9g want %.9g\n", i, y[i], want[i]);
            return 0;
        }
    }
    return 1;
}

static inline int h_match_bytes(const h_out *o, nnf_dtype t, const void *want, size_t n) {
    if (o->status != NNF_OK || o->dtype != t || o->numel != n)
        return 0;
    return n == 0 || !memcmp(o->data, want, n * nnf_dtype_size(t));
}

static inline int h_shape_is(const h_out *o, int rank, const int64_t *dims) {
    if (o->shape.rank != rank)
        return 0;
    for (int i = 0; i < rank; i++)
        if (o->shape.dims[i] != dims[i])
            return 0;
    return 1;
}

#endif

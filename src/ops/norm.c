/* Normalisation operators: BatchNormalization (inference), Instance-, Layer-,
 * Group- and LpNormalization. Attributes, shape inference, cost. */
#include "ops/norm.h"
#include "ops/op.h"

static const nnf_tinfo *opt_in(const nnf_node *node, const nnf_tinfo *in, int i) {
    return i < node->n_inputs && in[i].present ? &in[i] : NULL;
}

static nnf_status norm_alloc(nnf_node *node, nnf_arena *arena, nnf_norm_params **out) {
    nnf_norm_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    if (!p)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for attributes");
    p->epsilon = nnf_attr_float(node, "epsilon", 1e-5f);
    if (!(p->epsilon >= 0.0f))
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute epsilon must be non-negative");
    node->params = p;
    *out = p;
    return NNF_OK;
}

static nnf_status check_f32(const nnf_node *node, const nnf_tinfo *in, int n) {
    for (int i = 0; i < n && i < node->n_inputs; i++)
        if (in[i].present && in[i].dtype != NNF_DTYPE_FLOAT32 && in[i].dtype != NNF_DTYPE_UNDEFINED)
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input %d has dtype %s; only float32 is supported",
                                  i, nnf_dtype_name(in[i].dtype));
    return NNF_OK;
}

/* A 1-D per-channel parameter of extent c (when both are known). */
static nnf_status check_vector(const nnf_node *node, const nnf_tinfo *t, const char *what, int64_t c) {
    if (!t || t->shape.rank < 0)
        return NNF_OK;
    if (t->shape.rank != 1 || (c >= 0 && t->shape.dims[0] >= 0 && t->shape.dims[0] != c))
        return nnf_node_error(node, NNF_ERR_SHAPE, "input %s must have shape [%lld]", what, (long long)c);
    return NNF_OK;
}

static int64_t channels(const nnf_tinfo *x) { return x->shape.rank >= 2 ? x->shape.dims[1] : -1; }

/* ---- BatchNormalization ---------------------------------------------------- */

nnf_status nnf_batchnorm_init(NNF_INIT_ARGS) {
    nnf_norm_params *p = NULL;
    NNF_CHECK(norm_alloc(node, arena, &p));
    if (nnf_attr_int(node, "training_mode", 0) != 0)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                              "attribute training_mode = 1: only inference BatchNormalization is supported");
    /* before opset 14 the training form is told by its extra outputs */
    int used = 0;
    for (int k = 1; k < node->n_outputs; k++)
        used += node->outputs[k] >= 0;
    if (used)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                              "running mean/variance outputs requested: training-mode BatchNormalization is not "
                              "supported");
    if (node->opset < 9 && nnf_attr_int(node, "spatial", 1) != 1)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "attribute spatial = 0 (per-element statistics) is not supported");
    return NNF_OK;
}

nnf_status nnf_batchnorm_infer(NNF_INFER_ARGS) {
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(check_f32(node, in, 5));
    if (x->shape.rank >= 0 && x->shape.rank < 2)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input has rank %d; needs (N, C, ...)", x->shape.rank);
    static const char *names[] = {"", "scale", "B", "mean", "var"};
    for (int i = 1; i < 5; i++)
        NNF_CHECK(check_vector(node, opt_in(node, in, i), names[i], channels(x)));
    out[0].dtype = NNF_DTYPE_FLOAT32;
    out[0].shape = x->shape;
    return NNF_OK;
}

/* ---- InstanceNormalization ---------------------------------------------- */

nnf_status nnf_instancenorm_init(NNF_INIT_ARGS) {
    nnf_norm_params *p = NULL;
    return norm_alloc(node, arena, &p);
}

nnf_status nnf_instancenorm_infer(NNF_INFER_ARGS) {
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(check_f32(node, in, 3));
    if (x->shape.rank >= 0 && x->shape.rank < 3)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input has rank %d; needs (N, C, D1, ...)",
                              x->shape.rank);
    NNF_CHECK(check_vector(node, &in[1], "scale", channels(x)));
    NNF_CHECK(check_vector(node, &in[2], "B", channels(x)));
    out[0].dtype = NNF_DTYPE_FLOAT32;
    out[0].shape = x->shape;
    return NNF_OK;
}

/* ---- LayerNormalization --------------------------------------------------- */

nnf_status nnf_layernorm_init(NNF_INIT_ARGS) {
    nnf_norm_params *p = NULL;
    NNF_CHECK(norm_alloc(node, arena, &p));
    p->axis = nnf_attr_int(node, "axis", -1);
    return NNF_OK;
}

/* Scale/B must broadcast (numpy, one way) to the normalised trailing shape. */
static nnf_status check_trailing(const nnf_node *node, const nnf_tinfo *t, const char *what,
                                 const nnf_shape *x, int axis) {
    if (!t || t->shape.rank < 0)
        return NNF_OK;
    int inner = x->rank - axis;
    if (t->shape.rank > inner)
        return nnf_node_error(node, NNF_ERR_SHAPE, "input %s has rank %d; the normalised shape has rank %d",
                              what, t->shape.rank, inner);
    for (int i = 0; i < t->shape.rank; i++) {
        int64_t d = t->shape.dims[i], xd = x->dims[x->rank - t->shape.rank + i];
        if (d >= 0 && xd >= 0 && d != 1 && d != xd)
            return nnf_node_error(node, NNF_ERR_SHAPE, "input %s does not broadcast to the normalised shape", what);
    }
    return NNF_OK;
}

nnf_status nnf_layernorm_infer(NNF_INFER_ARGS) {
    const nnf_norm_params *p = node->params;
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(check_f32(node, in, 3));
    for (int k = 0; k < node->n_outputs; k++) {
        out[k].dtype = NNF_DTYPE_FLOAT32;
        out[k].shape.rank = -1;
    }
    out[0].shape = x->shape;
    if (x->shape.rank < 0)
        return NNF_OK;
    int axis;
    NNF_CHECK(nnf_norm_axis(node, p->axis, x->shape.rank, &axis));
    NNF_CHECK(check_trailing(node, &in[1], "Scale", &x->shape, axis));
    NNF_CHECK(check_trailing(node, opt_in(node, in, 2), "B", &x->shape, axis));
    nnf_shape stat = x->shape;
    for (int i = axis; i < stat.rank; i++) {
        stat.dims[i] = 1;
        stat.dim_names[i] = NULL;
    }
    for (int k = 1; k < node->n_outputs; k++)
        out[k].shape = stat;
    return NNF_OK;
}

/* ---- GroupNormalization --------------------------------------------------- */

nnf_status nnf_groupnorm_init(NNF_INIT_ARGS) {
    nnf_norm_params *p = NULL;
    NNF_CHECK(norm_alloc(node, arena, &p));
    const nnf_attr *a = nnf_node_attr(node, "num_groups");
    if (!a)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute num_groups is required");
    p->num_groups = nnf_attr_int(node, "num_groups", 1);
    if (p->num_groups < 1)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute num_groups must be positive");
    p->per_channel = node->opset >= 21;
    return NNF_OK;
}

nnf_status nnf_groupnorm_infer(NNF_INFER_ARGS) {
    const nnf_norm_params *p = node->params;
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(check_f32(node, in, 3));
    if (x->shape.rank >= 0 && x->shape.rank < 3)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input has rank %d; needs (N, C, D1, ...)",
                              x->shape.rank);
    int64_t c = channels(x);
    if (c >= 0 && c % p->num_groups)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%lld channels do not split into %lld groups", (long long)c,
                              (long long)p->num_groups);
    int64_t want = p->per_channel ? c : p->num_groups;
    NNF_CHECK(check_vector(node, &in[1], "scale", want));
    NNF_CHECK(check_vector(node, &in[2], "bias", want));
    out[0].dtype = NNF_DTYPE_FLOAT32;
    out[0].shape = x->shape;
    return NNF_OK;
}

/* ---- LpNormalization ------------------------------------------------------ */

nnf_status nnf_lpnorm_init(NNF_INIT_ARGS) {
    nnf_norm_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    if (!p)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for attributes");
    p->axis = nnf_attr_int(node, "axis", -1);
    int64_t pv = nnf_attr_int(node, "p", 2);
    if (pv != 1 && pv != 2)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute p = %lld; ONNX allows only 1 or 2",
                              (long long)pv);
    p->p = (int)pv;
    node->params = p;
    return NNF_OK;
}

nnf_status nnf_lpnorm_infer(NNF_INFER_ARGS) {
    const nnf_norm_params *p = node->params;
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(check_f32(node, in, 1));
    if (x->shape.rank >= 0) {
        int axis;
        NNF_CHECK(nnf_norm_axis(node, p->axis, x->shape.rank, &axis));
    }
    out[0].dtype = NNF_DTYPE_FLOAT32;
    out[0].shape = x->shape;
    return NNF_OK;
}

/* Per element: BatchNorm a multiply-add; the statistics norms two passes of
 * a few operations each, then the affine. */
double nnf_norm_cost(NNF_COST_ARGS) {
    int64_t n = nnf_shape_numel(&in[0].shape);
    if (n < 0)
        return 0.0;
    return (double)n * (!node->op_type || node->op_type[0] == 'B' ? 2.0 : 8.0);
}

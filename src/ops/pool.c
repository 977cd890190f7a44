/* MaxPool, AveragePool, LpPool and their Global forms: attributes, shape
 * inference, cost. The window arithmetic is Conv's (conv.h). */
#include "ops/conv.h"

#include <string.h>

static nnf_status pool_init(nnf_node *node, nnf_arena *arena, nnf_conv_params **out) {
    nnf_conv_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    if (!p)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for attributes");
    NNF_CHECK(nnf_conv_parse_window(node, p));
    if (!nnf_node_attr(node, "kernel_shape") || p->kernel[0] <= 0)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute kernel_shape is required");
    p->ceil_mode = (int)nnf_attr_int(node, "ceil_mode", 0);
    if (p->ceil_mode != 0 && p->ceil_mode != 1)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute ceil_mode must be 0 or 1");
    node->params = p;
    *out = p;
    return NNF_OK;
}

nnf_status nnf_maxpool_init(NNF_INIT_ARGS) {
    nnf_conv_params *p = NULL;
    NNF_CHECK(pool_init(node, arena, &p));
    int64_t so = nnf_attr_int(node, "storage_order", 0);
    if (so != 0 && so != 1)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute storage_order must be 0 or 1");
    p->storage_order = (int)so;
    return NNF_OK;
}

nnf_status nnf_avgpool_init(NNF_INIT_ARGS) {
    nnf_conv_params *p = NULL;
    NNF_CHECK(pool_init(node, arena, &p));
    int64_t cip = nnf_attr_int(node, "count_include_pad", 0);
    if (cip != 0 && cip != 1)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute count_include_pad must be 0 or 1");
    p->count_include_pad = (int)cip;
    return NNF_OK;
}

nnf_status nnf_lppool_init(NNF_INIT_ARGS) {
    nnf_conv_params *p = NULL;
    NNF_CHECK(pool_init(node, arena, &p));
    p->p = nnf_attr_int(node, "p", 2);
    if (p->p < 1)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "attribute p = %lld; only p >= 1 is supported",
                              (long long)p->p);
    return NNF_OK;
}

static nnf_status check_x(const nnf_node *node, const nnf_tinfo *x, int min_rank) {
    if (x->dtype != NNF_DTYPE_FLOAT32 && x->dtype != NNF_DTYPE_UNDEFINED)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input X has dtype %s; only float32 is supported",
                              nnf_dtype_name(x->dtype));
    if (x->shape.rank >= 0 && x->shape.rank < min_rank)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input has rank %d; needs at least %d (N, C, spatial)",
                              x->shape.rank, min_rank);
    return NNF_OK;
}

/* MaxPool, AveragePool, LpPool. */
nnf_status nnf_pool_infer(NNF_INFER_ARGS) {
    const nnf_conv_params *p = node->params;
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(check_x(node, x, 3));
    for (int k = 0; k < node->n_outputs; k++) {
        out[k].dtype = k == 0 ? NNF_DTYPE_FLOAT32 : NNF_DTYPE_INT64;
        out[k].shape.rank = -1;
    }
    int rank = x->shape.rank;
    if (rank < 0)
        return NNF_OK;
    if (rank - 2 != p->spatial)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input has %d spatial axes but kernel_shape %d",
                              rank - 2, p->spatial);
    nnf_shape s = x->shape;
    int64_t pb[NNF_MAX_SPATIAL], pe[NNF_MAX_SPATIAL];
    int known = 1;
    for (int i = 0; i < p->spatial; i++) {
        s.dim_names[2 + i] = NULL;
        known &= x->shape.dims[2 + i] >= 0;
    }
    if (known) {
        NNF_CHECK(nnf_conv_resolve_pads(p, x->shape.dims + 2, pb, pe));
    } else {
        memcpy(pb, p->pads_begin, sizeof pb);
        memcpy(pe, p->pads_end, sizeof pe);
    }
    NNF_CHECK(nnf_conv_out_spatial(node, p, x->shape.dims + 2, pb, pe, s.dims + 2));
    for (int k = 0; k < node->n_outputs; k++)
        out[k].shape = s;
    return NNF_OK;
}

double nnf_pool_cost(NNF_COST_ARGS) {
    const nnf_conv_params *p = node->params;
    int64_t n = nnf_shape_numel(&out[0].shape);
    if (n < 0)
        return 0.0;
    double taps = 1.0;
    for (int i = 0; i < p->spatial; i++)
        taps *= (double)p->kernel[i];
    return (double)n * taps;
}

nnf_status nnf_global_pool_infer(NNF_INFER_ARGS) {
    const nnf_tinfo *x = &in[0];
    NNF_CHECK(check_x(node, x, 3));
    out[0].dtype = NNF_DTYPE_FLOAT32;
    out[0].shape = x->shape;
    for (int i = 2; i < x->shape.rank; i++) {
        out[0].shape.dims[i] = 1;
        out[0].shape.dim_names[i] = NULL;
    }
    return NNF_OK;
}

double nnf_global_pool_cost(NNF_COST_ARGS) {
    int64_t n = nnf_shape_numel(&in[0].shape);
    return n < 0 ? 0.0 : (double)n;
}

nnf_status nnf_global_lppool_init(NNF_INIT_ARGS) {
    nnf_conv_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    if (!p)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for attributes");
    p->p = nnf_attr_int(node, "p", 2);
    if (p->p < 1)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "attribute p = %lld; only p >= 1 is supported",
                              (long long)p->p);
    p->residual_input = -1;
    node->params = p;
    return NNF_OK;
}

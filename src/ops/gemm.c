/* Gemm and MatMul: attributes, shape inference, cost. */
#include "ops/op.h"
#include "ops/params.h"

static const nnf_tinfo *opt_in(const nnf_node *node, const nnf_tinfo *in, int i) {
    return i < node->n_inputs && in[i].present ? &in[i] : NULL;
}

static nnf_status check_f32(const nnf_node *node, const nnf_tinfo *in, int n) {
    for (int i = 0; i < n && i < node->n_inputs; i++)
        if (in[i].present && in[i].dtype != NNF_DTYPE_FLOAT32 && in[i].dtype != NNF_DTYPE_UNDEFINED)
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input %d has dtype %s; only float32 is supported",
                                  i, nnf_dtype_name(in[i].dtype));
    return NNF_OK;
}

static nnf_status gemm_alloc(nnf_node *node, nnf_arena *arena, nnf_gemm_params **out) {
    nnf_gemm_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    if (!p)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for attributes");
    p->alpha = 1.0f;
    p->beta = 1.0f;
    p->act.kind = NNF_ACT_NONE;
    p->residual_input = -1;
    p->bias_input = -1;
    node->params = p;
    *out = p;
    return NNF_OK;
}

/* Shape checks of a fused residual: it must broadcast one way to the output. */
static nnf_status check_residual(const nnf_node *node, int index, const nnf_tinfo *in, const nnf_shape *y) {
    if (index < 0)
        return NNF_OK;
    const nnf_tinfo *r = opt_in(node, in, index);
    if (!r)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "fused residual input %d is missing", index);
    if (r->dtype != NNF_DTYPE_FLOAT32 && r->dtype != NNF_DTYPE_UNDEFINED)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "fused residual has dtype %s", nnf_dtype_name(r->dtype));
    if (r->shape.rank < 0 || y->rank < 0)
        return NNF_OK;
    if (r->shape.rank > y->rank)
        return nnf_node_error(node, NNF_ERR_SHAPE, "fused residual has rank %d above the output's %d",
                              r->shape.rank, y->rank);
    for (int i = 0; i < r->shape.rank; i++) {
        int64_t d = r->shape.dims[i], yd = y->dims[y->rank - r->shape.rank + i];
        if (d >= 0 && yd >= 0 && d != 1 && d != yd)
            return nnf_node_error(node, NNF_ERR_SHAPE, "fused residual does not broadcast to the output");
    }
    return NNF_OK;
}

/* ---- Gemm ------------------------------------------------------------------- */

nnf_status nnf_gemm_init(NNF_INIT_ARGS) {
    nnf_gemm_params *p = NULL;
    NNF_CHECK(gemm_alloc(node, arena, &p));
    p->trans_a = nnf_attr_int(node, "transA", 0) != 0;
    p->trans_b = nnf_attr_int(node, "transB", 0) != 0;
    p->alpha = nnf_attr_float(node, "alpha", 1.0f);
    p->beta = nnf_attr_float(node, "beta", 1.0f);
    return NNF_OK;
}

nnf_status nnf_gemm_infer(NNF_INFER_ARGS) {
    const nnf_gemm_params *p = node->params;
    const nnf_tinfo *a = &in[0], *b = &in[1], *c = opt_in(node, in, 2);
    NNF_CHECK(check_f32(node, in, 3));
    if ((a->shape.rank >= 0 && a->shape.rank != 2) || (b->shape.rank >= 0 && b->shape.rank != 2))
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "A and B must be matrices (rank 2), got ranks %d and %d",
                              a->shape.rank, b->shape.rank);
    nnf_shape y = {.rank = 2, .dims = {-1, -1}};
    int64_t ka = -1, kb = -1;
    if (a->shape.rank == 2) {
        y.dims[0] = a->shape.dims[p->trans_a ? 1 : 0];
        y.dim_names[0] = a->shape.dim_names[p->trans_a ? 1 : 0];
        ka = a->shape.dims[p->trans_a ? 0 : 1];
    }
    if (b->shape.rank == 2) {
        y.dims[1] = b->shape.dims[p->trans_b ? 0 : 1];
        y.dim_names[1] = b->shape.dim_names[p->trans_b ? 0 : 1];
        kb = b->shape.dims[p->trans_b ? 1 : 0];
    }
    if (ka >= 0 && kb >= 0 && ka != kb)
        return nnf_node_error(node, NNF_ERR_SHAPE, "inner dimensions differ: A gives K=%lld, B gives K=%lld",
                              (long long)ka, (long long)kb);
    if (c && c->shape.rank >= 0) {
        if (c->shape.rank > 2)
            return nnf_node_error(node, NNF_ERR_SHAPE, "C has rank %d; it must broadcast to (M, N)", c->shape.rank);
        for (int i = 0; i < c->shape.rank; i++) {
            int64_t d = c->shape.dims[i], yd = y.dims[2 - c->shape.rank + i];
            if (d >= 0 && yd >= 0 && d != 1 && d != yd)
                return nnf_node_error(node, NNF_ERR_SHAPE, "C does not broadcast to (%lld, %lld)",
                                      (long long)y.dims[0], (long long)y.dims[1]);
        }
    }
    NNF_CHECK(check_residual(node, p->residual_input, in, &y));
    out[0].dtype = NNF_DTYPE_FLOAT32;
    out[0].shape = y;
    return NNF_OK;
}

double nnf_gemm_cost(NNF_COST_ARGS) {
    const nnf_gemm_params *p = node->params;
    int64_t n = nnf_shape_numel(&out[0].shape);
    if (n < 0 || in[0].shape.rank != 2)
        return 0.0;
    int64_t k = in[0].shape.dims[p->trans_a ? 0 : 1];
    return k < 0 ? 0.0 : 2.0 * (double)n * (double)k;
}

/* ---- MatMul --------------------------------------------------------------- */

nnf_status nnf_matmul_init(NNF_INIT_ARGS) {
    nnf_gemm_params *p = NULL;
    NNF_CHECK(gemm_alloc(node, arena, &p));
    p->beta = 0.0f;
    return NNF_OK;
}

/* Input s as the product reads it (a folded Transpose applied). */
static nnf_tinfo matmul_operand(const nnf_gemm_params *p, int s, const nnf_tinfo *in) {
    nnf_tinfo t = *in;
    t.shape = nnf_matmul_operand_shape(p, s, &in->shape);
    return t;
}

nnf_status nnf_matmul_infer(NNF_INFER_ARGS) {
    const nnf_gemm_params *p = node->params;
    const nnf_tinfo ta = matmul_operand(p, 0, &in[0]), tb = matmul_operand(p, 1, &in[1]);
    const nnf_tinfo *a = &ta, *b = &tb;
    NNF_CHECK(check_f32(node, in, 2));
    out[0].dtype = NNF_DTYPE_FLOAT32;
    out[0].shape.rank = -1;
    if (a->shape.rank == 0 || b->shape.rank == 0)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "MatMul operands cannot be scalars");
    if (a->shape.rank < 0 || b->shape.rank < 0)
        return NNF_OK;
    /* numpy: a 1-D A is a row (1, K), a 1-D B a column (K, 1); the added axis is dropped */
    int ra = a->shape.rank, rb = b->shape.rank;
    int64_t m = ra >= 2 ? a->shape.dims[ra - 2] : 1, ka = a->shape.dims[ra - 1];
    int64_t kb = rb >= 2 ? b->shape.dims[rb - 2] : b->shape.dims[0], n = rb >= 2 ? b->shape.dims[rb - 1] : 1;
    if (ka >= 0 && kb >= 0 && ka != kb)
        return nnf_node_error(node, NNF_ERR_SHAPE, "inner dimensions differ: A has K=%lld, B has K=%lld",
                              (long long)ka, (long long)kb);
    nnf_shape ba = {.rank = ra > 2 ? ra - 2 : 0}, bb = {.rank = rb > 2 ? rb - 2 : 0}, bo;
    for (int i = 0; i < ba.rank; i++) {
        ba.dims[i] = a->shape.dims[i];
        ba.dim_names[i] = a->shape.dim_names[i];
    }
    for (int i = 0; i < bb.rank; i++) {
        bb.dims[i] = b->shape.dims[i];
        bb.dim_names[i] = b->shape.dim_names[i];
    }
    nnf_status st = nnf_broadcast_shape(&ba, &bb, &bo);
    if (st != NNF_OK)
        return nnf_node_error(node, st, "batch dimensions do not broadcast");
    if (bo.rank + 2 > NNF_MAX_RANK)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "output rank exceeds %d", NNF_MAX_RANK);
    nnf_shape y = bo;
    if (ra >= 2) {
        y.dims[y.rank] = m;
        y.dim_names[y.rank++] = a->shape.dim_names[ra - 2];
    }
    if (rb >= 2) {
        y.dims[y.rank] = n;
        y.dim_names[y.rank++] = b->shape.dim_names[rb - 1];
    }
    NNF_CHECK(check_residual(node, p->residual_input, in, &y));
    NNF_CHECK(check_residual(node, p->bias_input, in, &y));
    out[0].shape = y;
    return NNF_OK;
}

double nnf_matmul_cost(NNF_COST_ARGS) {
    int64_t n = nnf_shape_numel(&out[0].shape);
    const nnf_tinfo ta = matmul_operand(node->params, 0, &in[0]);
    const nnf_shape *a = &ta.shape;
    if (n < 0 || a->rank < 1 || a->dims[a->rank - 1] < 0)
        return 0.0;
    return 2.0 * (double)n * (double)a->dims[a->rank - 1];
}

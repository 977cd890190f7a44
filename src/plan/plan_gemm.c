/* Plans for Gemm and MatMul: pick the tier's GEMM, prepack a constant B,
 * and map C / a fused residual / the activation onto the epilogue. Cases the
 * epilogue cannot express leave plan->run NULL (reference kernel). */
#include "plan/kernels.h"

#include "base/alloc.h"

#include <string.h>

nnf_gemm_choice nnf_gemm_choose(int64_t m, int64_t n, int64_t k, int64_t a_batch, int64_t b_batch,
                                int b_const, nnf_isa isa) {
    nnf_gemm_choice c = {0};
    if (m < 0 || n < 0 || k < 0 || a_batch < 1 || b_batch < 1)
        return c;
    c.cfg = nnf_gemm_cfg_whole(isa);
    c.flatten = b_batch == 1 && a_batch > 1;
    /* Packing B costs K*N once; worth it when it is reused across calls, i.e.
     * always for a constant 2-D B. */
    c.prepack_b = b_const && b_batch == 1 && n > 0 && k > 0;
    return c;
}

enum { BIAS_NONE, BIAS_OWN, BIAS_INPUT, C_AS_RESIDUAL };

typedef struct mm_state {
    const nnf_gemm_cfg *cfg;
    nnf_gemm_packed *pb;
    int is_gemm;
    int trans_a, trans_b;
    float alpha, beta;
    int bias_mode;
    nnf_bias_kind bias_kind;
    float *bias_own;
    int bias_input;     /* input index holding a per-row/col bias (BIAS_INPUT) */
    int residual_input; /* full-shaped residual, or -1 */
    nnf_activation act;
    int flatten;
    char name[64];
} mm_state;

static void mm_state_free(void *p) {
    mm_state *s = p;
    if (!s)
        return;
    nnf_gemm_packed_destroy(s->pb);
    nnf_free(s->bias_own);
    nnf_free(s);
}

static int64_t numel(const nnf_shape *s) {
    return nnf_shape_numel(s);
}

/* The epilogue shared by every batch; residual/bias pointers set per call. */
static nnf_epilogue base_ep(const mm_state *s, nnf_buf *const *in) {
    nnf_epilogue e = nnf_epilogue_default();
    e.alpha = s->alpha;
    e.act = s->act;
    if (s->bias_mode == BIAS_OWN) {
        e.bias_kind = s->bias_kind;
        e.bias = s->bias_own;
    } else if (s->bias_mode == BIAS_INPUT) {
        e.bias_kind = s->bias_kind;
        e.bias = in[s->bias_input]->data;
    }
    return e;
}

/* A batched MatMul whose batch axes broadcast: batch bi of Y reads A and B
 * at offsets from its multi-index (stride 0 on a broadcast axis). */
typedef struct mm_batch {
    const float *a, *b, *res;
    float *y;
    const nnf_gemm_src *bsrc; /* a packed B shared by every batch, or NULL */
    int br;
    int64_t m, n, k;
    size_t lda, ldb; /* row strides, or column strides where ta / tb (read transposed) */
    int ta, tb;
    int64_t ydims[NNF_MAX_RANK], a_bs[NNF_MAX_RANK], b_bs[NNF_MAX_RANK], r_bs[NNF_MAX_RANK];
} mm_batch;

static void mm_batch_at(const void *ctx, size_t index, nnf_gemm_src *a, nnf_gemm_src *b, float **c,
                        const float **residual) {
    const mm_batch *t = ctx;
    int64_t bi = (int64_t)index, rem = bi, aoff = 0, boff = 0, roff = 0;
    for (int d = t->br - 1; d >= 0; d--) {
        int64_t idx = rem % t->ydims[d];
        rem /= t->ydims[d];
        aoff += idx * t->a_bs[d];
        boff += idx * t->b_bs[d];
        roff += idx * t->r_bs[d];
    }
    *a = nnf_gemm_src_matrix(t->a + aoff, t->lda, t->ta);
    *b = t->bsrc ? *t->bsrc : nnf_gemm_src_matrix(t->b + boff, t->ldb, t->tb);
    *c = t->y + bi * t->m * t->n;
    *residual = t->res ? t->res + roff : NULL;
}

/* plan/kernels.h. At load on known shapes, at run time on the run's (mm_run:
 * what the pass matched by name on symbolic dims). */
bool nnf_mm_residual_layout(nnf_dtype dt, int rr, const int64_t *rd, int yr, const int64_t *yd,
                            bool rows_last, nnf_mm_residual *l) {
    if (dt != NNF_DTYPE_FLOAT32 || rr < 1 || rr > yr)
        return false;
    int64_t stride = 1;
    l->full = true;
    for (int k = yr - 1; k >= 0; k--) {
        int i = k - (yr - rr);
        int64_t d = i >= 0 ? rd[i] : 1;
        if (d < 0 || yd[k] < 0 || (d != yd[k] && (d != 1 || k == yr - 1)))
            return false;
        l->bs[k] = d == yd[k] ? stride : 0;
        l->full = l->full && (d == yd[k] || yd[k] == 1);
        stride *= d;
    }
    if (!rows_last || yr < 2)
        return l->full; /* rows N apart, as the caller set ld */
    l->ld = (size_t)l->bs[yr - 2];
    return true;
}

/* plan/kernels.h */
bool nnf_mm_matrix_of(int64_t rs, int64_t cs, size_t *ld, int *trans) {
    if (cs == 1) {
        *ld = (size_t)rs;
        *trans = 0;
        return true;
    }
    *ld = (size_t)cs;
    *trans = 1;
    return rs == 1;
}

static nnf_status mm_run(NNF_KERNEL_ARGS) {
    const mm_state *s = ctx->state;
    const nnf_buf *a = in[0], *b = in[1], *y = out[0];
    if (a->dtype != NNF_DTYPE_FLOAT32 || b->dtype != NNF_DTYPE_FLOAT32)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "%s takes float32 operands", s->name);
    int ra = a->rank, rb = b->rank;
    int64_t m, k, n;
    /* MatMul: the operands as the product reads them (a folded Transpose's
     * view), their matrices' strides */
    int64_t ad[NNF_MAX_RANK] = {0}, as[NNF_MAX_RANK] = {0}, bd[NNF_MAX_RANK] = {0},
            bs[NNF_MAX_RANK] = {0};
    size_t lda = 0, ldb = 0;
    int ta = 0, tb = 0;
    if (s->is_gemm) {
        m = a->dims[s->trans_a ? 1 : 0];
        k = a->dims[s->trans_a ? 0 : 1];
        n = b->dims[s->trans_b ? 0 : 1];
    } else {
        nnf_matmul_operand(node->params, 0, ra, a->dims, ad, as);
        nnf_matmul_operand(node->params, 1, rb, b->dims, bd, bs);
        m = ra >= 2 ? ad[ra - 2] : 1;
        k = ad[ra - 1];
        n = rb >= 2 ? bd[rb - 1] : 1;
        if (!nnf_mm_matrix_of(ra >= 2 ? as[ra - 2] : k, as[ra - 1], &lda, &ta) ||
            !nnf_mm_matrix_of(rb >= 2 ? bs[rb - 2] : 1, rb >= 2 ? bs[rb - 1] : 1, &ldb, &tb))
            return nnf_node_error(node, NNF_ERR_INTERNAL,
                                  "%s: a transposed operand without a unit-stride axis", s->name);
    }
    int64_t ybatch = m * n > 0 ? (int64_t)y->numel / (m * n) : 0;
    if (m * n == 0 || (size_t)(ybatch * m * n) != y->numel)
        return (size_t)(ybatch * m * n) == y->numel
                   ? NNF_OK
                   : nnf_node_error(node, NNF_ERR_SHAPE, "%s: output does not fit the operands",
                                    s->name);
    if (s->pb && (s->pb->k != (size_t)k || s->pb->mn != (size_t)n))
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: B is %lldx%lld, planned %zux%zu", s->name,
                              (long long)k, (long long)n, s->pb->k, s->pb->mn);
    nnf_epilogue e = base_ep(s, in);
    const float *res = NULL;
    nnf_mm_residual rl = {.ld = (size_t)n, .full = true}; /* the rest zero */
    if (s->residual_input >= 0) {
        const nnf_buf *r = in[s->residual_input];
        bool rows = !s->is_gemm && ra >= 2 && rb >= 2;
        if (!nnf_mm_residual_layout(r->dtype, r->rank, r->dims, y->rank, y->dims, rows, &rl))
            return nnf_node_error(node, NNF_ERR_SHAPE,
                                  "%s: the fused residual is not shaped like the output (inputs "
                                  "that disagree on a symbolic dim the model names alike?)",
                                  s->name);
        res = r->data;
    } else if (s->bias_mode == C_AS_RESIDUAL)
        res = in[2]->data;
    if (res) {
        e.residual_scale = s->bias_mode == C_AS_RESIDUAL ? s->beta : 1.0f;
    }
    nnf_gemm_src bsrc = s->pb        ? nnf_gemm_src_packed(s->pb)
                        : s->is_gemm ? nnf_gemm_src_matrix(b->data, s->trans_b ? (size_t)k : (size_t)n,
                                                           s->trans_b)
                                     : nnf_gemm_src_matrix(b->data, ldb, tb);
    /* A's batches flattened into M (a 2-D B) read a residual as one matrix:
     * one that broadcasts over the batches runs them one by one */
    if (s->is_gemm || ybatch == 1 || (s->flatten && rl.full)) {
        size_t mm = (size_t)(m * ybatch);
        nnf_gemm_src asrc =
            s->is_gemm ? nnf_gemm_src_matrix(a->data, s->trans_a ? (size_t)m : (size_t)k, s->trans_a)
                       : nnf_gemm_src_matrix(a->data, lda, ta);
        e.residual = res;
        e.ld_residual = rl.ld;
        nnf_status st = nnf_gemm_run(s->cfg, mm, (size_t)n, (size_t)k, &asrc, &bsrc, y->data,
                                     (size_t)n, &e, ctx->pool);
        return st == NNF_OK ? st : nnf_error_prefix(st, "node %s (%s)", node->name, node->op_type);
    }
    /* Batched with broadcast: walk the output's batch axes. */
    int br = y->rank - (ra >= 2) - (rb >= 2);
    int bra = ra > 2 ? ra - 2 : 0, brb = rb > 2 ? rb - 2 : 0;
    int64_t a_bs[NNF_MAX_RANK], b_bs[NNF_MAX_RANK];
    for (int d = br - 1; d >= 0; d--) {
        int ia = d - (br - bra), ib = d - (br - brb);
        int64_t da = ia >= 0 ? ad[ia] : 1, db = ib >= 0 ? bd[ib] : 1;
        if ((da != y->dims[d] && da != 1) || (db != y->dims[d] && db != 1))
            return nnf_node_error(node, NNF_ERR_SHAPE, "%s: batch axis %d does not broadcast",
                                  s->name, d);
        a_bs[d] = da == 1 ? 0 : as[ia];
        b_bs[d] = db == 1 ? 0 : bs[ib];
    }
    mm_batch bt = {.a = a->data,
                   .b = b->data,
                   .y = y->data,
                   .res = res,
                   .bsrc = s->pb ? &bsrc : NULL,
                   .br = br,
                   .m = m,
                   .n = n,
                   .k = k,
                   .lda = lda,
                   .ldb = ldb,
                   .ta = ta,
                   .tb = tb};
    for (int d = 0; d < br; d++) {
        bt.ydims[d] = y->dims[d];
        bt.a_bs[d] = a_bs[d];
        bt.b_bs[d] = b_bs[d];
        bt.r_bs[d] = rl.bs[d];
    }
    e.ld_residual = rl.ld;
    nnf_status st = nnf_gemm_run_batch(s->cfg, (size_t)ybatch, (size_t)m, (size_t)n, (size_t)k,
                                       mm_batch_at, &bt, (size_t)n, &e, ctx->pool);
    return st == NNF_OK ? st : nnf_error_prefix(st, "node %s (%s)", node->name, node->op_type);
}

/* A fused residual the epilogue can take, on shapes known at load. */
static bool residual_known(const nnf_tinfo *r, const nnf_tinfo *y, bool rows_last) {
    nnf_mm_residual l;
    return nnf_shape_known(&r->shape) &&
           nnf_mm_residual_layout(r->dtype, r->shape.rank, r->shape.dims, y->shape.rank,
                                  y->shape.dims, rows_last, &l);
}

/* A fused bias the epilogue can take per column: float32, N values along
 * Y's last axis. */
static int column_bias(const nnf_tinfo *b, int64_t n) {
    return b->dtype == NNF_DTYPE_FLOAT32 && numel(&b->shape) == n && b->shape.rank >= 1 &&
           b->shape.dims[b->shape.rank - 1] == n;
}

static nnf_status plan_common(const nnf_node *node, const nnf_tinfo *in, const nnf_tinfo *out,
                              nnf_kernel_plan *plan, int is_gemm) {
    const nnf_gemm_params *p = node->params;
    nnf_tinfo la = in[0], lb = in[1]; /* the operands as the product reads them */
    const nnf_tinfo *a = &la, *b = &lb;
    nnf_status st = NNF_OK;
    if (!p || a->dtype != NNF_DTYPE_FLOAT32 || b->dtype != NNF_DTYPE_FLOAT32)
        return NNF_OK;
    /* a constant 2-D B transposed as a whole (a tied LM head's Transpose of
     * the token embedding, left to fold_transpose at load): packed from the
     * constant, read transposed */
    bool b_transposed =
        (p->permuted & 2u) && in[1].data && in[1].shape.rank == 2 && p->perm[1][0] == 1;
    if (p->permuted) {
        /* folded Transposes: their views read in place at the run's strides,
         * never packed, never flattened */
        la.shape = nnf_matmul_operand_shape(p, 0, &in[0].shape);
        lb.shape = nnf_matmul_operand_shape(p, 1, &in[1].shape);
        if (p->permuted & 1u)
            la.data = NULL;
        if ((p->permuted & 2u) && !b_transposed)
            lb.data = NULL;
    }
    /* Shapes not all known at load (symbolic dims, NNF_OP_SYM): M, K, N and
     * the batch axes come from the run, which checks them. A constant 2-D B
     * is packed now (K and N are its own) and A's leading axes are flattened
     * into M; any other B is read unpacked, for MatMul only. The epilogue
     * takes what needs no run-time extent (a column bias of B's N, the
     * activation) and a residual the pass matched to Y by its dims' names
     * (or that broadcasts over Y's batches and rows), whose extents the run
     * checks. */
    bool fixed = nnf_shape_known(&a->shape) && nnf_shape_known(&b->shape) &&
                 nnf_shape_known(&out[0].shape);
    int ra = a->shape.rank, rb = b->shape.rank;
    int64_t m, k, n, a_batch = 1, b_batch = 1;
    if (!fixed) {
        if (b->data && nnf_shape_known(&b->shape) && rb == 2) {
            k = b->shape.dims[is_gemm && p->trans_b ? 1 : 0];
            n = b->shape.dims[is_gemm && p->trans_b ? 0 : 1];
        } else if (!b->data && !is_gemm && p->bias_input < 0) {
            k = n = 1; /* placeholders */
        } else {
            return NNF_OK;
        }
        m = 1; /* a placeholder */
    } else if (ra < 1 || rb < 1) {
        return NNF_OK;
    } else if (is_gemm) {
        if (ra != 2 || rb != 2)
            return NNF_OK;
        m = a->shape.dims[p->trans_a ? 1 : 0];
        k = a->shape.dims[p->trans_a ? 0 : 1];
        n = b->shape.dims[p->trans_b ? 0 : 1];
    } else {
        m = ra >= 2 ? a->shape.dims[ra - 2] : 1;
        k = a->shape.dims[ra - 1];
        n = rb >= 2 ? b->shape.dims[rb - 1] : 1;
        for (int i = 0; i + 2 < ra; i++)
            a_batch *= a->shape.dims[i];
        for (int i = 0; i + 2 < rb; i++)
            b_batch *= b->shape.dims[i];
    }
    nnf_gemm_choice ch = nnf_gemm_choose(m, n, k, a_batch, b_batch, b->data != NULL, nnf_cpu_isa());
    if (!ch.cfg)
        return NNF_OK;
    mm_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a GEMM plan");
    s->cfg = ch.cfg;
    s->is_gemm = is_gemm;
    s->trans_a = is_gemm && p->trans_a;
    s->trans_b = is_gemm && p->trans_b;
    s->alpha = p->alpha; /* MatMul: a scale fused by fuse_scale, else 1 */
    s->beta = is_gemm ? p->beta : 0.0f;
    s->act = p->act;
    /* a 2-D B: A's leading axes are rows (of a contiguous A) */
    s->flatten = (ch.flatten || (!fixed && b->data)) && !(p->permuted & 1u);
    s->residual_input = -1;
    s->bias_input = -1;

    if (p->residual_input >= 0) {
        /* symbolic: the pass matched the residual's dims to Y's by name; the
         * run checks its extents (mm_run) */
        const nnf_tinfo *r = &in[p->residual_input];
        if (p->residual_input >= node->n_inputs || !r->present ||
            !(fixed ? residual_known(r, &out[0], !is_gemm && ra >= 2 && rb >= 2)
                    : r->dtype == NNF_DTYPE_FLOAT32))
            goto keep_reference;
        s->residual_input = p->residual_input;
    }
    if (!is_gemm && p->bias_input >= 0) {
        if (p->bias_input >= node->n_inputs || !in[p->bias_input].present ||
            !column_bias(&in[p->bias_input], n))
            goto keep_reference;
        s->bias_mode = BIAS_INPUT;
        s->bias_kind = NNF_BIAS_PER_COL;
        s->bias_input = p->bias_input;
    }
    if (is_gemm && node->n_inputs > 2 && in[2].present && p->beta != 0.0f) {
        const nnf_tinfo *c = &in[2];
        int64_t cn = numel(&c->shape);
        int rc = c->shape.rank;
        if (c->dtype != NNF_DTYPE_FLOAT32 || cn < 0 || s->bias_mode != BIAS_NONE)
            goto keep_reference;
        nnf_bias_kind kind;
        if (!fixed && cn != 1 && !(cn == n && c->shape.dims[rc - 1] == n))
            goto keep_reference; /* a C that needs M */
        if (fixed && cn == m * n && (rc == 2 || m == 1 || n == 1) &&
            !(m == 1 && n == 1 && rc < 2)) {
            if (s->residual_input >= 0)
                goto keep_reference;
            s->bias_mode = C_AS_RESIDUAL;
            goto planned_c;
        } else if (cn == 1) {
            kind = NNF_BIAS_PER_COL; /* filled with beta*c below */
        } else if (cn == n && c->shape.dims[rc - 1] == n) {
            kind = NNF_BIAS_PER_COL;
        } else if (fixed && cn == m && rc == 2 && c->shape.dims[0] == m &&
                   c->shape.dims[1] == 1) {
            kind = NNF_BIAS_PER_ROW;
        } else {
            goto keep_reference;
        }
        s->bias_kind = kind;
        if (c->data) {
            size_t len = kind == NNF_BIAS_PER_COL ? (size_t)n : (size_t)m;
            s->bias_own = nnf_calloc(len ? len : 1, sizeof(float));
            if (!s->bias_own) {
                st = nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a GEMM bias");
                goto fail;
            }
            const float *cd = c->data;
            for (size_t i = 0; i < len; i++)
                s->bias_own[i] = p->beta * cd[cn == 1 ? 0 : i];
            s->bias_mode = BIAS_OWN;
        } else if (cn != 1 && p->beta == 1.0f) {
            s->bias_mode = BIAS_INPUT;
            s->bias_input = 2;
        } else {
            goto keep_reference;
        }
    }
planned_c:
    if (ch.prepack_b) {
        int tb = s->trans_b || b_transposed;
        st = nnf_gemm_pack_b(s->cfg, (size_t)k, (size_t)n, b->data, tb ? (size_t)k : (size_t)n, tb,
                             &s->pb);
        if (st != NNF_OK) {
            st = nnf_error_prefix(st, "node %s (%s): packing B", node->name, node->op_type);
            goto fail;
        }
    }
    /* the kernel its shape takes: a product too small for the AMX GEMM
     * runs on the tier's FMA tiles */
    const char *kname = s->cfg->name;
    if (s->cfg->amx) {
        size_t rows = (size_t)m * (size_t)(s->flatten ? a_batch : 1);
        if (!fixed || s->trans_a || (!s->pb && s->trans_b) ||
            !nnf_gemm_amx_shape(rows, (size_t)n, (size_t)k))
            kname = nnf_gemm_cfg_for(s->cfg->isa)->name;
    }
    snprintf(s->name, sizeof s->name, "%s%s", kname, s->pb ? "_packed_b" : "");
    plan->name = s->name;
    plan->run = mm_run;
    plan->state = s;
    plan->free_state = mm_state_free;
    if (s->pb)
        plan->packed_inputs = 1u << 1; /* B is packed; mm_run reads only its dims */
    return NNF_OK;
keep_reference:
    mm_state_free(s);
    return NNF_OK;
fail:
    mm_state_free(s);
    return st;
}

nnf_status nnf_plan_gemm(NNF_PLAN_ARGS) {
    return plan_common(node, in, out, plan, 1);
}

nnf_status nnf_plan_matmul(NNF_PLAN_ARGS) {
    return plan_common(node, in, out, plan, 0);
}

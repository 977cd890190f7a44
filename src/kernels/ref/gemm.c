/* Reference Gemm and MatMul, float32.
 *
 * Both reduce to Y[b] = A[b] x B[b] over broadcast batches with A(i,k) and
 * B(k,j) read through strides, so transposition is only a stride swap. Rows
 * of Y are computed in blocks of ROWS: for each k, the row B(k, :) is added
 * into each row of the block (inner loop contiguous over j when B is not
 * transposed), so B is streamed once per block rather than once per row.
 * Then the epilogue: Y = act(alpha * AB + beta * C + residual). Work is split
 * over (batch, row block), independent of the thread count. */
#include "kernels/ref/activation.h"
#include "kernels/ref/axpy.h"
#include "ops/op.h"
#include "ops/params.h"

#include <string.h>

enum { ROWS = 4 };

typedef struct mm_job {
    const float *a, *b, *c, *res;
    float *y;
    int64_t m, n, k;
    int64_t a_rs, a_cs, b_rs, b_cs; /* A(i,k) = a[i*a_rs + k*a_cs], B(k,j) = b[k*b_rs + j*b_cs] */
    int64_t c_rs, c_cs;             /* C(i,j), 0 strides where broadcast */
    /* batch: bdims of the output's leading axes; a/b element offsets per batch axis */
    int batch_rank;
    int64_t bdims[NNF_MAX_RANK], a_bs[NNF_MAX_RANK], b_bs[NNF_MAX_RANK];
    int64_t mblocks;
    /* residual addressed over the output's full shape */
    int y_rank;
    int64_t y_dims[NNF_MAX_RANK], res_st[NNF_MAX_RANK];
    float alpha, beta;
    const nnf_activation *act;
} mm_job;


/* Offset in a broadcast operand (strides st over dims) of flat element f. */
static int64_t bcast_offset(int64_t f, const int64_t *dims, const int64_t *st, int rank) {
    int64_t off = 0;
    for (int i = rank - 1; i >= 0; i--) {
        off += (f % dims[i]) * st[i];
        f /= dims[i];
    }
    return off;
}

static void mm_block(void *ctx, size_t t) {
    const mm_job *j = ctx;
    int64_t batch = (int64_t)t / j->mblocks, i0 = ((int64_t)t % j->mblocks) * ROWS;
    int64_t rows = j->m - i0 < ROWS ? j->m - i0 : ROWS;
    const float *a = j->a, *b = j->b;
    {
        int64_t f = batch;
        for (int d = j->batch_rank - 1; d >= 0; d--) {
            int64_t idx = f % j->bdims[d];
            f /= j->bdims[d];
            a += idx * j->a_bs[d];
            b += idx * j->b_bs[d];
        }
    }
    float *y = j->y + (batch * j->m + i0) * j->n;
    memset(y, 0, (size_t)(rows * j->n) * sizeof *y);
    for (int64_t k = 0; k < j->k; k++) {
        const float *brow = b + k * j->b_rs;
        for (int64_t r = 0; r < rows; r++) {
            float av = a[(i0 + r) * j->a_rs + k * j->a_cs];
            if (j->b_cs == 1)
                axpy(j->n, av, brow, y + r * j->n);
            else
                axpy_strided(j->n, av, brow, j->b_cs, y + r * j->n);
        }
    }
    for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * j->n;
        int64_t i = i0 + r;
        if (j->alpha != 1.0f)
            for (int64_t c = 0; c < j->n; c++)
                yr[c] *= j->alpha;
        if (j->c && j->beta != 0.0f)
            for (int64_t c = 0; c < j->n; c++)
                yr[c] += j->beta * j->c[i * j->c_rs + c * j->c_cs];
        if (j->res) {
            int64_t f0 = (batch * j->m + i) * j->n;
            int64_t off = bcast_offset(f0, j->y_dims, j->res_st, j->y_rank);
            int64_t step = j->n > 1 ? j->res_st[j->y_rank - 1] : 0;
            for (int64_t c = 0; c < j->n; c++)
                yr[c] += j->res[off + c * step];
        }
        if (j->act && j->act->kind != NNF_ACT_NONE)
            for (int64_t c = 0; c < j->n; c++)
                yr[c] = nnf_act_apply(j->act, yr[c]);
    }
}

/* Strides of operand t aligned to the trailing axes of dims (rank), 0 where
 * t has extent 1 or lacks the axis. Fails when t does not broadcast. */
static int bcast_strides(const nnf_buf *t, const int64_t *dims, int rank, int64_t *st) {
    if (t->rank > rank)
        return 0;
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        int ti = i - (rank - t->rank);
        if (ti < 0) {
            st[i] = 0;
            continue;
        }
        if (t->dims[ti] != 1 && t->dims[ti] != dims[i])
            return 0;
        st[i] = t->dims[ti] == 1 ? 0 : s;
        s *= t->dims[ti];
    }
    return 1;
}

static nnf_status set_residual(const nnf_node *node, mm_job *j, nnf_buf *const *in, const nnf_buf *y,
                               int index) {
    j->y_rank = y->rank;
    memcpy(j->y_dims, y->dims, sizeof j->y_dims);
    if (index < 0)
        return NNF_OK;
    const nnf_buf *r = index < node->n_inputs ? in[index] : NULL;
    if (!r || r->dtype != NNF_DTYPE_FLOAT32 || !bcast_strides(r, y->dims, y->rank, j->res_st))
        return nnf_node_error(node, NNF_ERR_SHAPE, "fused residual must be float32 and broadcast to the output");
    j->res = r->data;
    return NNF_OK;
}

static nnf_status check_f32(const nnf_node *node, nnf_buf *const *in, int n) {
    for (int i = 0; i < n && i < node->n_inputs; i++)
        if (in[i] && in[i]->dtype != NNF_DTYPE_FLOAT32)
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input %d has dtype %s; the kernel takes float32",
                                  i, nnf_dtype_name(in[i]->dtype));
    return NNF_OK;
}

static void mm_run(mm_job *j, nnf_kctx *ctx, int64_t batches) {
    j->mblocks = (j->m + ROWS - 1) / ROWS;
    if (j->n == 0 || batches == 0 || j->m == 0)
        return;
    nnf_parallel_for(ctx->pool, (size_t)(batches * j->mblocks), mm_block, j);
}

nnf_status nnf_gemm_ref(NNF_KERNEL_ARGS) {
    const nnf_gemm_params *p = node->params;
    const nnf_buf *a = in[0], *b = in[1], *c = node->n_inputs > 2 ? in[2] : NULL, *y = out[0];
    NNF_CHECK(check_f32(node, in, 3));
    if (a->rank != 2 || b->rank != 2 || y->rank != 2)
        return nnf_node_error(node, NNF_ERR_SHAPE, "A, B and Y must be matrices");
    mm_job j = {.a = a->data, .b = b->data, .y = y->data, .alpha = p->alpha, .beta = p->beta, .act = &p->act};
    j.m = a->dims[p->trans_a ? 1 : 0];
    j.k = a->dims[p->trans_a ? 0 : 1];
    j.n = b->dims[p->trans_b ? 0 : 1];
    if (b->dims[p->trans_b ? 1 : 0] != j.k || y->dims[0] != j.m || y->dims[1] != j.n)
        return nnf_node_error(node, NNF_ERR_SHAPE, "A, B and Y shapes do not agree");
    j.a_rs = p->trans_a ? 1 : a->dims[1];
    j.a_cs = p->trans_a ? a->dims[1] : 1;
    j.b_rs = p->trans_b ? 1 : b->dims[1];
    j.b_cs = p->trans_b ? b->dims[1] : 1;
    if (c) {
        int64_t st[2];
        if (!bcast_strides(c, y->dims, 2, st))
            return nnf_node_error(node, NNF_ERR_SHAPE, "C does not broadcast to (%lld, %lld)", (long long)j.m,
                                  (long long)j.n);
        j.c = c->data;
        j.c_rs = st[0];
        j.c_cs = st[1];
    }
    NNF_CHECK(set_residual(node, &j, in, y, p->residual_input));
    mm_run(&j, ctx, 1);
    return NNF_OK;
}

nnf_status nnf_matmul_ref(NNF_KERNEL_ARGS) {
    const nnf_gemm_params *p = node->params;
    const nnf_buf *a = in[0], *b = in[1], *y = out[0];
    NNF_CHECK(check_f32(node, in, 2));
    if (a->rank < 1 || b->rank < 1)
        return nnf_node_error(node, NNF_ERR_SHAPE, "MatMul operands cannot be scalars");
    mm_job j = {.a = a->data, .b = b->data, .y = y->data, .alpha = p->alpha, .act = &p->act};
    int ra = a->rank, rb = b->rank;
    /* the operands as the product reads them: a folded Transpose's view */
    int64_t ad[NNF_MAX_RANK], as[NNF_MAX_RANK], bd[NNF_MAX_RANK], bs[NNF_MAX_RANK];
    nnf_matmul_operand(p, 0, ra, a->dims, ad, as);
    nnf_matmul_operand(p, 1, rb, b->dims, bd, bs);
    j.m = ra >= 2 ? ad[ra - 2] : 1;
    j.k = ad[ra - 1];
    j.n = rb >= 2 ? bd[rb - 1] : 1;
    if ((rb >= 2 ? bd[rb - 2] : bd[0]) != j.k)
        return nnf_node_error(node, NNF_ERR_SHAPE, "inner dimensions differ");
    j.a_rs = ra >= 2 ? as[ra - 2] : j.k;
    j.a_cs = as[ra - 1];
    j.b_rs = rb >= 2 ? bs[rb - 2] : bs[0];
    j.b_cs = rb >= 2 ? bs[rb - 1] : 1;
    /* batch axes: the output's leading y->rank - (ra>=2) - (rb>=2) axes */
    int br = y->rank - (ra >= 2) - (rb >= 2);
    int bra = ra > 2 ? ra - 2 : 0, brb = rb > 2 ? rb - 2 : 0;
    if (br < 0 || br < bra || br < brb)
        return nnf_node_error(node, NNF_ERR_SHAPE, "output rank %d does not fit the operands", y->rank);
    j.batch_rank = br;
    int64_t batches = 1;
    for (int d = br - 1; d >= 0; d--) {
        int ia = d - (br - bra), ib = d - (br - brb);
        int64_t da = ia >= 0 ? ad[ia] : 1, db = ib >= 0 ? bd[ib] : 1, dy = y->dims[d];
        if ((da != dy && da != 1) || (db != dy && db != 1))
            return nnf_node_error(node, NNF_ERR_SHAPE, "batch axis %d does not broadcast", d);
        j.bdims[d] = dy;
        j.a_bs[d] = da == 1 ? 0 : as[ia];
        j.b_bs[d] = db == 1 ? 0 : bs[ib];
        batches *= dy;
    }
    if (p->bias_input >= 0) {
        /* a fused bias row [.., N]: added before the residual, as the Add
         * nodes it replaced did */
        const nnf_buf *bias = p->bias_input < node->n_inputs ? in[p->bias_input] : NULL;
        if (!bias || bias->dtype != NNF_DTYPE_FLOAT32 || (int64_t)bias->numel != j.n)
            return nnf_node_error(node, NNF_ERR_SHAPE, "fused bias must be %lld float32 values", (long long)j.n);
        j.c = bias->data;
        j.c_rs = 0;
        j.c_cs = 1;
        j.beta = 1.0f;
    }
    NNF_CHECK(set_residual(node, &j, in, y, p->residual_input));
    mm_run(&j, ctx, batches);
    return NNF_OK;
}

/* nnfuse::Attention's plan (ops/attention.h): P = Softmax(alpha * Q·Kᵀ +
 * bias + mask), Y = P·V, a block of query rows at a time.
 *
 * A task is one batch entry (an image's head) or, when there are fewer of
 * them than twice the threads, a share of its row blocks. It packs Kᵀ and V
 * once into its thread's scratch as the GEMM's B panels, then for each block
 * of mq query rows: the scores' GEMM (scale, bias and mask in its epilogue)
 * into an mq x T buffer, a causal Where's selection, the Softmax over its
 * rows in place, and the GEMM of
 * those rows with V straight into Y. mq keeps the block within 256 KB, so
 * the scores stay in L2 between the three steps; run apart, the three nodes
 * wrote and read batch x S x T floats twice through memory (Whisper's 1500
 * frames x 8 heads: 72 MB a layer, and its Softmax alone took a tenth of
 * the layer's time).
 *
 * The plan fixes the kernels; the extents, strides and block come from each
 * run's shapes (a model with a symbolic batch and sequence fuses too).
 *
 * The values are the three nodes' on the same tier: each GEMM element sums
 * its products in an order fixed by K's blocks alone (kernels/gemm.h), the
 * Softmax is the same row kernel, and the blocks start at multiples of mq
 * whatever the thread count. */
#include "plan/kernels.h"

#include "base/alloc.h"
#include "kernels/eltwise_fast.h"
#include "ops/attention.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* floats of scores a block holds at most (256 KB) */
#define BLOCK_FLOATS ((size_t)1 << 16)

typedef struct att_state {
    const nnf_gemm_cfg *cfg;
    const nnf_ew_kernels *ew;
    float alpha;
    int bias_input, residual_input; /* -1: none */
    int where_cond, scores_first;   /* ops/attention.h; where_cond -1: no Where */
    char name[64];
} att_state;

/* One run's geometry. */
typedef struct att_geo {
    size_t count, s, t, dh, dv, mq; /* batch entries; Q S x dh, Kᵀ dh x T, V T x dv */
    int br;                         /* batch axes */
    int64_t bdims[NNF_MAX_RANK], q_bs[NNF_MAX_RANK], k_bs[NNF_MAX_RANK], v_bs[NNF_MAX_RANK],
        r_bs[NNF_MAX_RANK], c_bs[NNF_MAX_RANK];
    /* matrices' ld; Q's, the mask's and the Where's condition's row strides */
    size_t q_ld, k_ld, v_ld, q_rs, r_ld, c_ld;
    int q_t, k_t, v_t;
    size_t pk_floats, pv_floats, s_floats;
} att_geo;

typedef struct att_job {
    const att_state *s;
    const att_geo *g;
    const float *q, *k, *v, *bias, *res;
    const uint8_t *cond; /* the Where's condition (bool), or NULL */
    float fill;          /* the Where's other operand */
    float *y;
    size_t parts, part_rows;
    atomic_int failed;
} att_job;

static size_t min_size(size_t a, size_t b) {
    return a < b ? a : b;
}

static size_t round16(size_t n) {
    return (n + 15) & ~(size_t)15;
}

static void att_task(void *ctx, size_t i) {
    att_job *j = ctx;
    const att_state *s = j->s;
    const att_geo *g = j->g;
    size_t bi = i / j->parts, r0 = i % j->parts * j->part_rows,
           r1 = min_size(r0 + j->part_rows, g->s);
    if (r0 >= r1)
        return;
    int64_t rem = (int64_t)bi, qo = 0, ko = 0, vo = 0, ro = 0, co = 0;
    for (int d = g->br - 1; d >= 0; d--) {
        int64_t idx = rem % g->bdims[d];
        rem /= g->bdims[d];
        qo += idx * g->q_bs[d];
        ko += idx * g->k_bs[d];
        vo += idx * g->v_bs[d];
        ro += idx * g->r_bs[d];
        co += idx * g->c_bs[d];
    }
    float *buf =
        nnf_thread_scratch(NNF_SCRATCH_ATTENTION, g->pk_floats + g->pv_floats + g->s_floats);
    if (!buf) {
        atomic_store(&j->failed, 1);
        return;
    }
    nnf_gemm_packed pk, pv;
    nnf_gemm_packed_view(s->cfg, NNF_GEMM_B, g->t, g->dh, buf, &pk);
    nnf_gemm_packed_view(s->cfg, NNF_GEMM_B, g->dv, g->t, buf + g->pk_floats, &pv);
    pk.cached = pv.cached = true;
    float *scores = buf + g->pk_floats + g->pv_floats;
    nnf_gemm_src src = nnf_gemm_src_matrix(j->k + ko, g->k_ld, g->k_t);
    nnf_gemm_pack_slice(s->cfg, &pk, 0, g->t, &src);
    src = nnf_gemm_src_matrix(j->v + vo, g->v_ld, g->v_t);
    nnf_gemm_pack_slice(s->cfg, &pv, 0, g->dv, &src);
    nnf_gemm_src kp = nnf_gemm_src_packed(&pk), vp = nnf_gemm_src_packed(&pv);
    uint32_t fill; /* the Where's constant, as select32 copies it */
    memcpy(&fill, &j->fill, sizeof fill);
    nnf_epilogue e = nnf_epilogue_default();
    e.alpha = s->alpha;
    if (j->bias) {
        e.bias_kind = NNF_BIAS_PER_COL;
        e.bias = j->bias;
    }
    for (size_t q0 = r0; q0 < r1; q0 += g->mq) {
        size_t m = min_size(g->mq, r1 - q0);
        nnf_gemm_src qs = nnf_gemm_src_matrix(j->q + qo + q0 * g->q_rs, g->q_ld, g->q_t);
        if (j->res) {
            e.residual = j->res + ro + q0 * g->r_ld;
            e.ld_residual = g->r_ld;
        }
        if (nnf_gemm_run(s->cfg, m, g->t, g->dh, &qs, &kp, scores, g->t, &e, NULL) != NNF_OK) {
            atomic_store(&j->failed, 1);
            return;
        }
        if (j->cond) /* the Where: the scores where the condition says, else the constant */
            for (size_t i = 0; i < m; i++) {
                const uint8_t *c = j->cond + co + (q0 + i) * g->c_ld;
                uint32_t *row = (uint32_t *)(scores + i * g->t);
                if (s->scores_first)
                    s->ew->select32(c, 1, row, 1, &fill, 0, row, g->t);
                else
                    s->ew->select32(c, 1, &fill, 0, row, 1, row, g->t);
            }
        s->ew->softmax(scores, scores, m, g->t, 0);
        nnf_gemm_src ps = nnf_gemm_src_matrix(scores, g->t, 0);
        float *y = j->y + (bi * g->s + q0) * g->dv;
        if (nnf_gemm_run(s->cfg, m, g->dv, g->t, &ps, &vp, y, g->dv, NULL, NULL) != NNF_OK) {
            atomic_store(&j->failed, 1);
            return;
        }
    }
}

/* The run's geometry from its buffers; false where they do not make one
 * (the caller reports it). */
static bool geometry(const nnf_node *node, const att_state *st, nnf_buf *const *in,
                     const nnf_buf *y, att_geo *g) {
    const nnf_attention_params *p = node->params;
    const nnf_buf *q = in[0], *k = in[1], *v = in[node->n_inputs - 1];
    int r = q->rank;
    if (r < 2 || k->rank != r || v->rank != r || y->rank != r)
        return false;
    int64_t qd[NNF_MAX_RANK], qs[NNF_MAX_RANK], kd[NNF_MAX_RANK], ks[NNF_MAX_RANK],
        vd[NNF_MAX_RANK], vs[NNF_MAX_RANK], sd[NNF_MAX_RANK];
    nnf_matmul_operand(&p->qk, 0, r, q->dims, qd, qs);
    nnf_matmul_operand(&p->qk, 1, r, k->dims, kd, ks);
    nnf_matmul_operand(&p->pv, 1, r, v->dims, vd, vs);
    memset(g, 0, sizeof *g);
    g->count = 1;
    g->s = (size_t)qd[r - 2];
    g->dh = (size_t)qd[r - 1];
    g->t = (size_t)kd[r - 1];
    g->dv = (size_t)vd[r - 1];
    g->br = r - 2;
    g->q_rs = (size_t)qs[r - 2];
    if (kd[r - 2] != qd[r - 1] || vd[r - 2] != kd[r - 1] || y->dims[r - 2] != qd[r - 2] ||
        y->dims[r - 1] != vd[r - 1] || !nnf_mm_matrix_of(qs[r - 2], qs[r - 1], &g->q_ld, &g->q_t) ||
        !nnf_mm_matrix_of(ks[r - 2], ks[r - 1], &g->k_ld, &g->k_t) ||
        !nnf_mm_matrix_of(vs[r - 2], vs[r - 1], &g->v_ld, &g->v_t))
        return false;
    for (int d = 0; d < g->br; d++) {
        if (qd[d] != kd[d] || qd[d] != vd[d] || qd[d] != y->dims[d])
            return false;
        g->bdims[d] = sd[d] = qd[d];
        g->q_bs[d] = qs[d];
        g->k_bs[d] = ks[d];
        g->v_bs[d] = vs[d];
        g->count *= (size_t)qd[d];
    }
    sd[r - 2] = qd[r - 2];
    sd[r - 1] = kd[r - 1];
    if (st->residual_input >= 0) {
        const nnf_buf *m = in[st->residual_input];
        nnf_mm_residual l;
        if (!m || !nnf_mm_residual_layout(m->dtype, m->rank, m->dims, r, sd, true, &l))
            return false;
        g->r_ld = l.ld;
        memcpy(g->r_bs, l.bs, sizeof g->r_bs);
    }
    if (st->where_cond >= 0) {
        const nnf_buf *c = in[st->where_cond], *f = in[st->where_cond + 1];
        nnf_mm_residual l; /* laid out as a mask is: the dtype aside */
        if (!c || !f || c->dtype != NNF_DTYPE_BOOL || f->dtype != NNF_DTYPE_FLOAT32 ||
            f->numel != 1 ||
            !nnf_mm_residual_layout(NNF_DTYPE_FLOAT32, c->rank, c->dims, r, sd, true, &l))
            return false;
        g->c_ld = l.ld;
        memcpy(g->c_bs, l.bs, sizeof g->c_bs);
    }
    if (st->bias_input >= 0 &&
        (!in[st->bias_input] || in[st->bias_input]->dtype != NNF_DTYPE_FLOAT32 ||
         in[st->bias_input]->numel != g->t))
        return false;
    if (!g->t || !g->dh)
        return true; /* att_run hands these to the reference kernel */
    size_t mr = st->cfg->mr, fit = BLOCK_FLOATS / g->t / mr * mr;
    g->mq = min_size(g->s, fit > mr ? fit : mr);
    size_t pk = nnf_gemm_packed_floats(st->cfg, NNF_GEMM_B, g->t, g->dh),
           pv = nnf_gemm_packed_floats(st->cfg, NNF_GEMM_B, g->dv, g->t), sc;
    if (!pk || !pv || !nnf_mul_size(g->mq, g->t, &sc) || sc > ((size_t)1 << 40))
        return false;
    g->pk_floats = round16(pk);
    g->pv_floats = round16(pv);
    g->s_floats = round16(sc);
    return true;
}

static nnf_status att_run(NNF_KERNEL_ARGS) {
    const att_state *s = ctx->state;
    att_geo g;
    int nv = node->n_inputs - 1;
    if (!geometry(node, s, in, out[0], &g))
        return nnf_node_error(node, NNF_ERR_SHAPE,
                              "%s: Q, K, V and the mask do not make an attention (batch axes that "
                              "disagree on a symbolic dim the model names alike?)",
                              s->name);
    if (!g.count || !g.s || !g.dv)
        return NNF_OK;
    if (!g.t || !g.dh) /* no keys, or empty dot products: the three ops' own kernels */
        return nnf_attention_ref(node, in, out, ctx);
    att_job j = {.s = s,
                 .g = &g,
                 .q = in[0]->data,
                 .k = in[1]->data,
                 .v = in[nv]->data,
                 .bias = s->bias_input >= 0 ? in[s->bias_input]->data : NULL,
                 .res = s->residual_input >= 0 ? in[s->residual_input]->data : NULL,
                 .cond = s->where_cond >= 0 ? in[s->where_cond]->data : NULL,
                 .fill = s->where_cond >= 0 ? *(const float *)in[s->where_cond + 1]->data : 0.0f,
                 .y = out[0]->data,
                 .parts = 1};
    size_t threads = ctx->pool ? (size_t)nnf_threadpool_size(ctx->pool) : 1;
    size_t blocks = (g.s + g.mq - 1) / g.mq;
    if (threads > 1 && g.count < 2 * threads)
        j.parts = min_size(blocks, (2 * threads + g.count - 1) / g.count);
    j.part_rows = (blocks + j.parts - 1) / j.parts * g.mq;
    atomic_init(&j.failed, 0);
    nnf_parallel_for(ctx->pool, g.count * j.parts, att_task, &j);
    if (atomic_load(&j.failed))
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY,
                              "%s: out of memory for a block of scores", s->name);
    return NNF_OK;
}

static void att_free(void *p) {
    nnf_free(p);
}

nnf_status nnf_plan_attention(NNF_PLAN_ARGS) {
    const nnf_attention_params *p = node->params;
    int nv = node->n_inputs - 1, r = in[0].shape.rank;
    att_state st = {.cfg = nnf_gemm_cfg_for(nnf_cpu_isa()),
                    .ew = nnf_ew_kernels_for(nnf_cpu_isa()),
                    .bias_input = -1,
                    .residual_input = -1};
    if (!p || r < 2 || in[1].shape.rank != r || in[nv].shape.rank != r || !st.cfg || !st.ew ||
        !st.ew->softmax || !st.ew->select32)
        return NNF_OK;
    for (int i = 0; i < node->n_inputs; i++)
        if (!in[i].present ||
            in[i].dtype != (i == p->where_cond ? NNF_DTYPE_BOOL : NNF_DTYPE_FLOAT32))
            return NNF_OK;
    st.alpha = p->qk.alpha;
    st.where_cond = p->where_cond;
    st.scores_first = p->scores_first;
    st.bias_input = p->qk.bias_input;
    st.residual_input = p->qk.residual_input;
    const char *gn = st.cfg->name;
    snprintf(st.name, sizeof st.name, "f32_attention_%s",
             strncmp(gn, "f32_gemm_", 9) ? gn : gn + 9);
    att_state *s = nnf_malloc(sizeof *s);
    if (!s)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for an attention plan");
    *s = st;
    plan->name = s->name;
    plan->run = att_run;
    plan->state = s;
    plan->free_state = att_free;
    return NNF_OK;
}

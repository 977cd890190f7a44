/* Einsum of two float32 operands as one batched GEMM.
 *
 * Each label takes a role: batch (in both operands and the output), M (the
 * first operand and the output), N (the second and the output) or K (both
 * operands, summed over). The product runs as count = prod(batch) GEMMs of
 * M x K by K x N. Every tensor is read or written in place, as a strided
 * view, where its two groups of labels each merge into one axis (their
 * strides nest in the group's order) and one of the two has unit stride:
 * the GEMM takes a row stride and a transpose flag for each operand, the
 * batch offsets come from each tensor's own strides, so attention's
 * "bhqd,bhkd->bhqk", "bqhd,bkhd->bhqk" and a projection "bsd,hd->bsh" run
 * with no copy. Where the output's N labels are not its unit-stride axis but
 * its M labels are, the operands swap (C^T = B^T A^T). A tensor that is no
 * such view goes through a contiguous copy in the canonical order ([batch][M]
 * [K], [batch][K][N], [batch][M][N]). A constant second operand with no
 * batch labels is packed at load, as MatMul's B.
 *
 * The reference kernel keeps: one operand or more than two, a label
 * repeated within a term (a diagonal), a label summed in one operand only, a
 * contracted label that broadcasts, and other dtypes. The layout is worked
 * out at load on known shapes, else for each run (symbolic extents). */
#include "kernels/eltwise_fast.h"
#include "ops/tensor_common.h"
#include "plan/kernels.h"

#include "base/alloc.h"
#include "base/cpu.h"

#include <string.h>

enum { ROLE_NONE, ROLE_BATCH, ROLE_M, ROLE_N, ROLE_K };

/* One tensor as the product reads (an operand) or writes it (the output). */
typedef struct es_view {
    bool copy; /* through a contiguous copy in the canonical order */
    /* the copy's axes in canonical order, with the tensor's strides */
    int rank;
    int64_t dims[NNF_MAX_RANK], str[NNF_MAX_RANK];
    size_t floats;
    /* the matrix (of the tensor, or of its copy) and each batch label's
     * stride in it (0 where the tensor broadcasts along it) */
    size_t ld;
    int trans;
    int64_t bs[NNF_MAX_RANK];
} es_view;

typedef struct es_layout {
    size_t m, n, k, count;
    int nb;
    int64_t bdims[NNF_MAX_RANK];
    int ia, ib; /* the inputs the GEMM reads as its A (m x k) and B (k x n) */
    es_view a, b, c;
} es_layout;

typedef struct es_state {
    const nnf_gemm_cfg *cfg;
    nnf_gemm_packed *pb; /* a constant B shared by every batch */
    bool fixed;          /* lay worked out at load */
    es_layout lay;
    char name[64];
} es_state;

/* A tensor's stride and extent for each label (0 and 1 where it has none). */
typedef struct es_tensor {
    int64_t str[NNF_EINSUM_MAX_LABELS], ext[NNF_EINSUM_MAX_LABELS];
} es_tensor;

static bool tensor_of(int rank, const int *labels, const int64_t *dims, es_tensor *t) {
    for (int l = 0; l < NNF_EINSUM_MAX_LABELS; l++) {
        t->str[l] = 0;
        t->ext[l] = 1;
    }
    int64_t st = 1;
    for (int k = rank - 1; k >= 0; k--) {
        int l = labels[k];
        if (t->str[l] || t->ext[l] != 1 || dims[k] < 0)
            return false; /* a repeated label (a diagonal) */
        t->str[l] = dims[k] == 1 ? 0 : st;
        t->ext[l] = dims[k];
        st *= dims[k];
    }
    return true;
}

/* Labels g[0..n) of extent > 1 merged into one axis of tensor t: false
 * unless their strides nest in that order; *str is the innermost's, or -1
 * where the group spans one element (any stride serves). */
static bool merge(const es_tensor *t, const int *g, int n, const int64_t *extent, int64_t *str) {
    int64_t inner = -1, span = 1;
    for (int i = n - 1; i >= 0; i--) {
        int l = g[i];
        if (extent[l] == 1)
            continue;
        if (t->ext[l] != extent[l])
            return false; /* broadcast along an M, N or K label */
        if (inner < 0)
            inner = t->str[l];
        else if (t->str[l] != inner * span)
            return false;
        span *= extent[l];
    }
    *str = inner;
    return true;
}

/* The matrix whose rows are group r and columns group c: rows ld apart
 * (columns unit-stride) or read transposed (rows unit-stride). */
static bool matrix(const es_tensor *t, const int *r, int nr, const int *c, int nc,
                   const int64_t *extent, size_t cols, size_t *ld, int *trans) {
    int64_t rs, cs;
    if (!merge(t, r, nr, extent, &rs) || !merge(t, c, nc, extent, &cs))
        return false;
    if (cs <= 1) {
        *ld = rs < 0 ? (cols ? cols : 1) : (size_t)rs;
        *trans = 0;
        return true;
    }
    if (rs <= 1) {
        *ld = (size_t)cs;
        *trans = 1;
        return true;
    }
    return false;
}

/* The canonical copy of tensor t: its batch labels, then groups r and c,
 * contiguous; the batch strides of the copy. */
static bool canonical(const es_tensor *t, const es_layout *L, const int *blab, const int *r, int nr,
                      const int *c, int nc, es_view *v) {
    int ax = 0;
    size_t floats = 1;
    const int *groups[3] = {blab, r, c};
    int counts[3] = {L->nb, nr, nc};
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < counts[g]; i++) {
            if (ax == NNF_MAX_RANK)
                return false;
            v->dims[ax] = t->ext[groups[g][i]];
            v->str[ax++] = t->str[groups[g][i]];
            if (!nnf_mul_size(floats, (size_t)t->ext[groups[g][i]], &floats))
                return false;
        }
    v->rank = ax;
    v->floats = floats;
    v->copy = true;
    size_t st = floats;
    for (int i = 0; i < L->nb; i++) {
        st /= (size_t)t->ext[blab[i]];
        v->bs[i] = t->ext[blab[i]] == 1 ? 0 : (int64_t)st;
    }
    return true;
}

/* The layout for operands of dims da, db and output dy; false where the
 * reference kernel must run. */
static bool layout(const nnf_einsum_plan *pl, const int64_t *const dims[3], es_layout *L) {
    const int *labels[3] = {pl->in_label[0], pl->in_label[1], pl->out_label};
    int ranks[3] = {pl->in_rank[0], pl->in_rank[1], pl->out_rank};
    es_tensor t[3];
    for (int i = 0; i < 3; i++)
        if (!tensor_of(ranks[i], labels[i], dims[i], &t[i]))
            return false;
    int role[NNF_EINSUM_MAX_LABELS] = {0};
    bool seen[3][NNF_EINSUM_MAX_LABELS] = {{false}};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < ranks[i]; k++)
            seen[i][labels[i][k]] = true;
    int64_t extent[NNF_EINSUM_MAX_LABELS];
    for (int l = 0; l < pl->n_labels; l++) {
        bool a = seen[0][l], b = seen[1][l], o = seen[2][l];
        extent[l] = t[0].ext[l] > t[1].ext[l] ? t[0].ext[l] : t[1].ext[l];
        role[l] = a && b ? (o ? ROLE_BATCH : ROLE_K) : !o ? ROLE_NONE : a ? ROLE_M : ROLE_N;
        if (role[l] == ROLE_NONE && extent[l] != 1)
            return false; /* summed in one operand only */
        if (role[l] == ROLE_K && t[0].ext[l] != t[1].ext[l])
            return false; /* a contracted label that broadcasts */
        if (o && t[2].ext[l] != extent[l])
            return false;
    }
    /* batch, M and N labels in the output's order, K in the first operand's */
    int blab[NNF_MAX_RANK], mlab[NNF_MAX_RANK], nlab[NNF_MAX_RANK], klab[NNF_MAX_RANK];
    int nm = 0, nn = 0, nk = 0;
    memset(L, 0, sizeof *L);
    L->m = L->n = L->k = L->count = 1;
    for (int j = 0; j < pl->out_rank; j++) {
        int l = pl->out_label[j];
        size_t e = (size_t)extent[l];
        if (role[l] == ROLE_BATCH) {
            L->bdims[L->nb] = extent[l];
            blab[L->nb++] = l;
            L->count *= e;
        } else if (role[l] == ROLE_M) {
            mlab[nm++] = l;
            L->m *= e;
        } else {
            nlab[nn++] = l;
            L->n *= e;
        }
    }
    for (int k = 0; k < ranks[0]; k++)
        if (role[labels[0][k]] == ROLE_K) {
            klab[nk++] = labels[0][k];
            L->k *= (size_t)extent[labels[0][k]];
        }
    /* the output: N unit-stride, else swapped (M unit-stride), else a copy */
    int64_t ms, ns;
    bool m_ok = merge(&t[2], mlab, nm, extent, &ms), n_ok = merge(&t[2], nlab, nn, extent, &ns);
    bool swap = m_ok && n_ok && ns > 1 && ms <= 1;
    const int *rows = swap ? nlab : mlab, *cols = swap ? mlab : nlab;
    int nr = swap ? nn : nm, nc = swap ? nm : nn;
    L->ia = swap;
    L->ib = !swap;
    if (swap) {
        size_t m = L->m;
        L->m = L->n;
        L->n = m;
    }
    es_view *v[3] = {&L->a, &L->b, &L->c};
    const es_tensor *tv[3] = {&t[L->ia], &t[L->ib], &t[2]};
    const int *g0[3] = {rows, klab, rows}, *g1[3] = {klab, cols, cols};
    int n0[3] = {nr, nk, nr}, n1[3] = {nk, nc, nc};
    size_t inner[3] = {L->k, L->n, L->n};
    for (int i = 0; i < 3; i++) {
        if (matrix(tv[i], g0[i], n0[i], g1[i], n1[i], extent, inner[i], &v[i]->ld, &v[i]->trans) &&
            (i < 2 || !v[i]->trans)) {
            for (int b = 0; b < L->nb; b++)
                v[i]->bs[b] = tv[i]->str[blab[b]];
            continue;
        }
        if (!canonical(tv[i], L, blab, g0[i], n0[i], g1[i], n1[i], v[i]))
            return false;
        v[i]->ld = inner[i];
        v[i]->trans = 0;
    }
    return true;
}

/* ---- run --------------------------------------------------------------- */

/* dst[i] = src[i] over `dims`, each side at its own strides (elements):
 * whole rows where both sides' last axis is unit-stride, tiles of the
 * tier's transpose where the copy is a 2-D transpose, else element by
 * element along the rows. */
typedef struct es_copy_job {
    const float *src;
    float *dst;
    int rank;
    int64_t dims[NNF_MAX_RANK], sstr[NNF_MAX_RANK], dstr[NNF_MAX_RANK];
    void (*transpose)(const float *x, size_t ldx, float *y, size_t ldy, size_t rows, size_t cols);
} es_copy_job;

static void copy_rows(void *p, size_t first, size_t count) {
    const es_copy_job *j = p;
    int r = j->rank;
    int64_t inner = j->dims[r - 1], si = j->sstr[r - 1], di = j->dstr[r - 1];
    for (size_t row = first; row < first + count; row++) {
        size_t rem = row;
        int64_t so = 0, dof = 0;
        for (int d = r - 2; d >= 0; d--) {
            int64_t idx = (int64_t)(rem % (size_t)j->dims[d]);
            rem /= (size_t)j->dims[d];
            so += idx * j->sstr[d];
            dof += idx * j->dstr[d];
        }
        const float *s = j->src + so;
        float *o = j->dst + dof;
        if (si == 1 && di == 1) {
            memcpy(o, s, (size_t)inner * sizeof(float));
        } else {
            for (int64_t e = 0; e < inner; e++)
                o[e * di] = s[e * si];
        }
    }
}

#define ES_TILE 64

/* A 2-D transpose (rank 2: the source's rows are the destination's
 * columns) in tiles of ES_TILE x ES_TILE. */
static void copy_tiles(void *p, size_t first, size_t count) {
    const es_copy_job *j = p;
    size_t rows = (size_t)j->dims[0], cols = (size_t)j->dims[1];
    size_t rt = (rows + ES_TILE - 1) / ES_TILE;
    for (size_t t = first; t < first + count; t++) {
        size_t r0 = t % rt * ES_TILE, c0 = t / rt * ES_TILE;
        size_t nr = rows - r0 < ES_TILE ? rows - r0 : ES_TILE;
        size_t nc = cols - c0 < ES_TILE ? cols - c0 : ES_TILE;
        j->transpose(j->src + r0 * (size_t)j->sstr[0] + c0, (size_t)j->sstr[0],
                     j->dst + c0 * (size_t)j->dstr[1] + r0, (size_t)j->dstr[1], nr, nc);
    }
}

/* Between a tensor and its canonical copy (contiguous): to_copy gathers the
 * tensor into it, else the copy is scattered out to the tensor. Axes of one
 * element go, and neighbours that nest on both sides merge first. */
static void copy_view(const es_view *v, const float *src, float *dst, bool to_copy,
                      nnf_threadpool *pool) {
    int64_t contig[NNF_MAX_RANK], st = 1;
    for (int d = v->rank - 1; d >= 0; d--) {
        contig[d] = st;
        st *= v->dims[d];
    }
    es_copy_job j = {.src = src, .dst = dst};
    const int64_t *ss = to_copy ? v->str : contig, *ds = to_copy ? contig : v->str;
    for (int d = 0; d < v->rank; d++) {
        if (v->dims[d] == 1)
            continue;
        int r = j.rank;
        if (r && j.sstr[r - 1] == ss[d] * v->dims[d] && j.dstr[r - 1] == ds[d] * v->dims[d]) {
            j.dims[r - 1] *= v->dims[d];
            j.sstr[r - 1] = ss[d];
            j.dstr[r - 1] = ds[d];
            continue;
        }
        j.dims[r] = v->dims[d];
        j.sstr[r] = ss[d];
        j.dstr[r] = ds[d];
        j.rank++;
    }
    if (j.rank == 0) {
        dst[0] = src[0];
        return;
    }
    if (j.rank == 2 && j.sstr[1] == 1 && j.dstr[0] == 1) {
        j.transpose = nnf_ew_kernels_for(nnf_cpu_isa())->transpose;
        size_t tiles = (((size_t)j.dims[0] + ES_TILE - 1) / ES_TILE) *
                       (((size_t)j.dims[1] + ES_TILE - 1) / ES_TILE);
        nnf_ew_parallel_ranges(pool, tiles, 4, copy_tiles, &j);
        return;
    }
    size_t row_bytes = (size_t)j.dims[j.rank - 1] * sizeof(float);
    nnf_ew_parallel_ranges(pool, v->floats / (size_t)j.dims[j.rank - 1],
                           row_bytes >= 16384 ? 1 : 16384 / row_bytes, copy_rows, &j);
}

typedef struct es_batch {
    const es_layout *L;
    const float *a, *b;
    float *c;
    const nnf_gemm_src *bsrc; /* packed */
} es_batch;

static void es_at(const void *ctx, size_t index, nnf_gemm_src *a, nnf_gemm_src *b, float **c,
                  const float **residual) {
    const es_batch *t = ctx;
    const es_layout *L = t->L;
    int64_t rem = (int64_t)index, ao = 0, bo = 0, co = 0;
    for (int d = L->nb - 1; d >= 0; d--) {
        int64_t idx = rem % L->bdims[d];
        rem /= L->bdims[d];
        ao += idx * L->a.bs[d];
        bo += idx * L->b.bs[d];
        co += idx * L->c.bs[d];
    }
    *a = nnf_gemm_src_matrix(t->a + ao, L->a.ld, L->a.trans);
    *b = t->bsrc ? *t->bsrc : nnf_gemm_src_matrix(t->b + bo, L->b.ld, L->b.trans);
    *c = t->c + co;
    *residual = NULL;
}

static nnf_status run_reference(NNF_KERNEL_ARGS) {
    nnf_kctx ref = {.pool = ctx->pool};
    return node->op->ref(node, in, out, &ref);
}

static nnf_status es_run(NNF_KERNEL_ARGS) {
    const es_state *s = ctx->state;
    es_layout run;
    const es_layout *L = &s->lay;
    if (in[0]->dtype != NNF_DTYPE_FLOAT32 || in[1]->dtype != NNF_DTYPE_FLOAT32)
        return run_reference(node, in, out, ctx);
    if (!s->fixed) {
        int ranks[2] = {in[0]->rank, in[1]->rank};
        const int64_t *dims[2] = {in[0]->dims, in[1]->dims};
        nnf_einsum_plan pl;
        NNF_CHECK(nnf_einsum_resolve(node, 2, ranks, dims, &pl));
        const int64_t *all[3] = {in[0]->dims, in[1]->dims, out[0]->dims};
        if (pl.out_rank != out[0]->rank || !layout(&pl, all, &run))
            return run_reference(node, in, out, ctx);
        L = &run;
    }
    float *y = out[0]->data;
    if (!out[0]->numel)
        return NNF_OK;
    if (L->k == 0) {
        memset(y, 0, out[0]->numel * sizeof(float)); /* sums over nothing */
        return NNF_OK;
    }
    if (L->count * L->m * L->n != out[0]->numel)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: the output does not fit the operands",
                              s->name);
    size_t scratch = 0, off[3];
    const es_view *v[3] = {&L->a, &L->b, &L->c};
    for (int i = 0; i < 3; i++) {
        off[i] = scratch;
        if (v[i]->copy && !(i == 1 && s->pb) && !nnf_add_size(scratch, v[i]->floats, &scratch))
            return nnf_node_error(node, NNF_ERR_SHAPE, "%s: operands too large", s->name);
    }
    float *buf = NULL;
    if (scratch && !(buf = nnf_thread_scratch(NNF_SCRATCH_EINSUM, scratch)))
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY,
                              "%s: out of memory for %zu floats of operand copies", s->name,
                              scratch);
    es_batch bt = {.L = L, .a = in[L->ia]->data, .b = in[L->ib]->data, .c = y};
    if (L->a.copy) {
        copy_view(&L->a, bt.a, buf + off[0], true, ctx->pool);
        bt.a = buf + off[0];
    }
    if (L->b.copy && !s->pb) {
        copy_view(&L->b, bt.b, buf + off[1], true, ctx->pool);
        bt.b = buf + off[1];
    }
    if (L->c.copy)
        bt.c = buf + off[2];
    nnf_gemm_src packed = s->pb ? nnf_gemm_src_packed(s->pb) : (nnf_gemm_src){0};
    bt.bsrc = s->pb ? &packed : NULL;
    nnf_status st;
    if (L->count == 1) {
        nnf_gemm_src a, b;
        float *c;
        const float *res;
        es_at(&bt, 0, &a, &b, &c, &res);
        st = nnf_gemm_run(s->cfg, L->m, L->n, L->k, &a, &b, c, L->c.ld, NULL, ctx->pool);
    } else {
        st = nnf_gemm_run_batch(s->cfg, L->count, L->m, L->n, L->k, es_at, &bt, L->c.ld, NULL,
                                ctx->pool);
    }
    if (st != NNF_OK)
        return nnf_error_prefix(st, "node %s (%s)", node->name, node->op_type);
    if (L->c.copy)
        copy_view(&L->c, bt.c, y, false, ctx->pool);
    return NNF_OK;
}

static void es_free(void *p) {
    es_state *s = p;
    if (s)
        nnf_gemm_packed_destroy(s->pb);
    nnf_free(s);
}

nnf_status nnf_plan_einsum(NNF_PLAN_ARGS) {
    if (node->n_inputs != 2 || !in[0].present || !in[1].present ||
        in[0].dtype != NNF_DTYPE_FLOAT32 || in[1].dtype != NNF_DTYPE_FLOAT32 ||
        in[0].shape.rank < 0 || in[1].shape.rank < 0 || out[0].shape.rank < 0)
        return NNF_OK;
    int ranks[2] = {in[0].shape.rank, in[1].shape.rank};
    const int64_t *dims[2] = {in[0].shape.dims, in[1].shape.dims};
    nnf_einsum_plan pl;
    if (nnf_einsum_resolve(node, 2, ranks, dims, &pl) != NNF_OK)
        return NNF_OK; /* the reference kernel reports it */
    es_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a kernel plan");
    s->fixed = nnf_shape_known(&in[0].shape) && nnf_shape_known(&in[1].shape) &&
               nnf_shape_known(&out[0].shape);
    const int64_t *all[3] = {in[0].shape.dims, in[1].shape.dims, out[0].shape.dims};
    if (s->fixed && !layout(&pl, all, &s->lay)) {
        nnf_free(s);
        return NNF_OK;
    }
    const es_layout *L = &s->lay;
    int ib = s->fixed ? L->ib : 1;
    bool b_shared = s->fixed;
    for (int d = 0; s->fixed && d < L->nb; d++)
        b_shared &= L->b.bs[d] == 0;
    nnf_gemm_choice ch = nnf_gemm_choose(s->fixed ? (int64_t)L->m : 1, s->fixed ? (int64_t)L->n : 1,
                                         s->fixed ? (int64_t)L->k : 1, 1, 1,
                                         b_shared && in[ib].data != NULL, nnf_cpu_isa());
    s->cfg = ch.cfg;
    if (!s->cfg) {
        nnf_free(s);
        return NNF_OK;
    }
    nnf_status st = NNF_OK;
    if (ch.prepack_b && L->k && L->n) {
        /* the constant B once for every batch: its canonical copy first
         * where it is no matrix view */
        const float *b = in[ib].data;
        float *tmp = NULL;
        if (L->b.copy) {
            size_t bytes;
            if (!nnf_mul_size(L->b.floats, sizeof(float), &bytes) ||
                !(tmp = nnf_malloc_aligned(bytes))) {
                es_free(s);
                return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for Einsum's B");
            }
            copy_view(&L->b, b, tmp, true, NULL);
            b = tmp;
        }
        st = nnf_gemm_pack_b(s->cfg, L->k, L->n, b, L->b.ld, L->b.trans, &s->pb);
        nnf_free_aligned(tmp);
        if (st != NNF_OK) {
            es_free(s);
            return nnf_error_prefix(st, "node %s (%s): packing B", node->name, node->op_type);
        }
        plan->packed_inputs = 1u << ib;
    }
    /* the name says where a tensor goes through a copy (known shapes) */
    bool copies = s->fixed && (L->a.copy || L->b.copy || L->c.copy);
    snprintf(s->name, sizeof s->name, "einsum_%s%s%s", copies ? "copy_" : "", s->cfg->name,
             s->pb ? "_packed_b" : "");
    plan->name = s->name;
    plan->run = es_run;
    plan->state = s;
    plan->free_state = es_free;
    return NNF_OK;
}

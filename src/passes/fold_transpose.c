/* Transpose → MatMul operand: the MatMul reads the Transpose's input in
 * place, at the permuted strides (nnf_gemm_params.perm), and the Transpose
 * goes. BERT's attention splits Q, K and V into heads with a Transpose each
 * ([B, S, H, D] → [B, H, S, D]; K once more to [B, H, D, S]): four copies
 * of the activations a layer, which the batched GEMM's packing reads as
 * cheaply strided.
 *
 * The GEMM reads a matrix with unit stride along its rows or along its
 * columns (read transposed), so the fold needs the input's last axis to
 * become one of the operand's last two; batch axes may come from anywhere.
 * A chain of Transposes composes (K's two). Symbolic dims too: the plan
 * reads a folded operand in place at the run's extents, never packed or
 * flattened. Only a Transpose this MatMul alone reads (one of a constant is
 * folded at load).
 *
 * First, a Transpose that moves only axes of extent 1 (the others keep
 * their order) leaves every element where it is: it becomes a view of its
 * input (nnf_transpose_params.view), not a copy, and a MatMul reading it
 * reads a contiguous operand. torch's nn.MultiheadAttention (batch first)
 * swaps batch and sequence around its in-projection: ViT-B/16's [1, 197,
 * 768] to [197, 1, 768], folded, made the MatMul 197 products of one row
 * each (each reading all 7 MB of packed weights: 12.6 against ORT's 3.0 ms),
 * not one GEMM of 197 rows. */
#include "passes/pass.h"

#include "kernels/eltwise_fast.h"
#include "ops/params.h"
#include "ops/tensor_common.h"

/* t moves only axes of extent 1 (known at load; a symbolic axis counts as
 * longer): its input's other axes reduce to one run in their order, the
 * Transpose kernel's plain copy (nnf_perm_reduce). */
static bool keeps_order(const nnf_graph *g, const nnf_node *t) {
    const nnf_transpose_params *tp = t->params;
    int u = t->inputs[0], perm[NNF_MAX_RANK];
    if (u < 0 || !tp)
        return false;
    const nnf_shape *sh = &g->values[u].shape;
    int r = sh->rank;
    if (r < 0 || (tp->n_perm != 0 && tp->n_perm != r))
        return false;
    for (int i = 0; i < r; i++)
        perm[i] = tp->n_perm ? tp->perm[i] : r - 1 - i;
    nnf_perm_reduced red;
    nnf_perm_reduce(r, sh->dims, perm, &red);
    return red.rank <= 1;
}

/* The Transpose producing MatMul mm's input s, when it can fold: sets
 * perm_out to the composition (operand axis i = t's input axis perm_out[i]). */
static nnf_node *foldable(nnf_pass_ctx *ctx, const nnf_node *mm, int s, int8_t *perm_out) {
    const nnf_graph *g = ctx->graph;
    const nnf_gemm_params *gp = mm->params;
    int v = mm->inputs[s];
    nnf_node *t = nnf_pass_producer(ctx, v);
    if (!nnf_pass_is_op(t, "Transpose") || t->n_inputs != 1 || t->outputs[0] != v ||
        ctx->uses[v] != 1 || !t->params || ((const nnf_transpose_params *)t->params)->view)
        return NULL;
    int u = t->inputs[0];
    if (u < 0)
        return NULL;
    const nnf_value *uv = &g->values[u], *vv = &g->values[v];
    int r = uv->shape.rank;
    if (uv->dtype != NNF_DTYPE_FLOAT32 || r < 2 || r != vv->shape.rank)
        return NULL;
    const nnf_transpose_params *tp = t->params;
    if (tp->n_perm != 0 && tp->n_perm != r)
        return NULL;
    int8_t cur[NNF_MAX_RANK];
    int last = -1;
    for (int i = 0; i < r; i++) {
        int c = gp->permuted >> s & 1u ? gp->perm[s][i] : i; /* v's axis */
        int w = tp->n_perm ? tp->perm[c] : r - 1 - c;        /* u's axis */
        cur[i] = (int8_t)w;
        if (w == r - 1)
            last = i;
    }
    if (last < r - 2)
        return NULL; /* the contiguous axis would be a batch axis */
    for (int i = 0; i < r; i++)
        perm_out[i] = cur[i];
    return t;
}

nnf_status nnf_pass_fold_transpose(nnf_pass_ctx *ctx) {
    nnf_graph *g = ctx->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        nnf_node *t = &g->nodes[i];
        if (!t->dead && nnf_pass_is_op(t, "Transpose") && t->n_inputs == 1 && keeps_order(g, t)) {
            ((nnf_transpose_params *)t->params)->view = true;
            ctx->fusions++;
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        nnf_node *mm = &g->nodes[i];
        nnf_gemm_params *gp = mm->params;
        if (!nnf_pass_is_op(mm, "MatMul") || mm->n_inputs < 2 || !gp)
            continue;
        for (int s = 0; s < 2; s++) {
            int8_t perm[NNF_MAX_RANK];
            nnf_node *t;
            while ((t = foldable(ctx, mm, s, perm))) {
                int v = mm->inputs[s], u = t->inputs[0], r = g->values[u].shape.rank;
                for (int k = 0; k < r; k++)
                    gp->perm[s][k] = perm[k];
                gp->permuted |= 1u << s;
                mm->inputs[s] = u;
                ctx->uses[v]--;
                NNF_CHECK(nnf_pass_merge_names(ctx, mm, t));
                t->dead = true;
                ctx->fusions++;
            }
        }
    }
    return NNF_OK;
}

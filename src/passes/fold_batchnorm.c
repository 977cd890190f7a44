/* Conv / ConvTranspose → BatchNormalization (inference) folds into the
 * convolution:
 *   W'[m] = W[m] · s[m],  b'[m] = (b[m] − mean[m]) · s[m] + beta[m],
 *   s[m]  = gamma[m] / sqrt(var[m] + epsilon)
 * where W[m] is output channel m's weights: rows of a Conv's W (OC x ...),
 * a ConvTranspose's W[c, j] for c in group m / (OC / group) and j = m mod
 * OC / group (C x OC / group x ...).
 * The epsilon goes inside the square root, exactly as BN computes it (the
 * seed's first debugging lesson: forgetting it costs > 1e-3 of accuracy). */
#include "passes/pass.h"

#include "ops/norm.h"
#include "ops/params.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* s[m] = gamma[m] / sqrt(var[m] + epsilon) */
static float bn_scale(const nnf_norm_params *bp, const float *gamma, const float *var, int64_t o) {
    return gamma[o] / sqrtf(var[o] + bp->epsilon);
}

static nnf_status fold_one(nnf_pass_ctx *ctx, nnf_node *bn, nnf_node *conv) {
    nnf_graph *g = ctx->graph;
    const nnf_norm_params *bp = bn->params;
    int wv = conv->inputs[1], bv = conv->n_inputs > 2 ? conv->inputs[2] : NNF_NO_VALUE;
    const nnf_value *wval = &g->values[wv];
    /* The weights are scaled later, row by row, where the Conv alone reads
     * them and they are plain float data (nnf_value.row_scale: the plan
     * applies it right before it packs them, so the folded copy does not
     * go out to memory and back); otherwise here. The eager fold reads the
     * weights byte-wise: they may still be misaligned in the file
     * (import.c). */
    bool transposed = !strcmp(conv->op_type, "ConvTranspose");
    bool defer = !transposed && ctx->uses[wv] == 1 &&
                 (wval->kind == NNF_VALUE_INITIALIZER || wval->kind == NNF_VALUE_CONSTANT) &&
                 wval->data && wval->dtype == NNF_DTYPE_FLOAT32 && nnf_shape_known(&wval->shape);
    const unsigned char *w = defer ? NULL : nnf_pass_const_f32_bytes(g, wv);
    const float *b = bv >= 0 ? nnf_pass_const_f32(g, bv) : NULL;
    const float *gamma = nnf_pass_const_f32(g, bn->inputs[1]);
    const float *beta = nnf_pass_const_f32(g, bn->inputs[2]);
    const float *mean = nnf_pass_const_f32(g, bn->inputs[3]);
    const float *var = nnf_pass_const_f32(g, bn->inputs[4]);
    if ((!defer && !w) || (bv >= 0 && !b) || !gamma || !beta || !mean || !var)
        return NNF_OK;
    nnf_shape wshape = wval->shape;
    if (wshape.rank < 3)
        return NNF_OK;
    /* transposed: m = group x OC / group, each (c, j) block of taps */
    int64_t group = transposed ? ((const nnf_conv_params *)conv->params)->group : 1;
    int64_t rows = wshape.dims[0], mg = transposed ? wshape.dims[1] : 1;
    if (transposed && (group < 1 || rows % group))
        return NNF_OK;
    int64_t m = transposed ? mg * group : rows;
    int64_t nrows = rows * mg, per = nnf_shape_numel(&wshape) / (nrows ? nrows : 1);
    const nnf_value *params[4] = {&g->values[bn->inputs[1]], &g->values[bn->inputs[2]],
                                  &g->values[bn->inputs[3]], &g->values[bn->inputs[4]]};
    for (int i = 0; i < 4; i++)
        if (nnf_shape_numel(&params[i]->shape) != m)
            return NNF_OK;
    if (bv >= 0 && nnf_shape_numel(&g->values[bv].shape) != m)
        return NNF_OK;
    char name[300];
    int nwv = wv;
    float *nw = NULL, *nb, *scale = NULL;
    if (defer) {
        /* a second fold into the same weights multiplies the scale */
        scale = (float *)wval->row_scale;
        if (!scale && !(scale = nnf_graph_block_alloc(g, (size_t)(m ? m : 1) * sizeof(float))))
            return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory folding '%s' into '%s'",
                             bn->name, conv->name);
        for (int64_t o = 0; o < m; o++)
            scale[o] = wval->row_scale ? scale[o] * bn_scale(bp, gamma, var, o)
                                       : bn_scale(bp, gamma, var, o);
        g->values[wv].row_scale = scale;
    } else {
        snprintf(name, sizeof name, "%s.weight_bn_folded", conv->name);
        nwv = nnf_pass_new_const_over(ctx, wv, name, &wshape, &nw); /* may be w's own block */
    }
    nnf_shape bshape = {.rank = 1, .dims = {m}};
    snprintf(name, sizeof name, "%s.bias_bn_folded", conv->name);
    int nbv = nwv >= 0 ? nnf_pass_new_const(g, name, &bshape, &nb) : -1;
    if (nwv < 0 || nbv < 0)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory folding '%s' into '%s'", bn->name, conv->name);
    /* w and b still point at their data (blocks do not move with the value
     * array); nw may be w itself */
    for (int64_t r = 0; nw && r < nrows; r++) { /* row r: (c, j) of W, or m of a Conv */
        int64_t o = transposed ? r / mg / (rows / group) * mg + r % mg : r;
        float s = bn_scale(bp, gamma, var, o);
        for (int64_t i = 0; i < per; i++) {
            float x;
            memcpy(&x, w + (size_t)(r * per + i) * sizeof x, sizeof x);
            nw[r * per + i] = x * s;
        }
    }
    for (int64_t o = 0; o < m; o++)
        nb[o] = ((b ? b[o] : 0.0f) - mean[o]) * bn_scale(bp, gamma, var, o) + beta[o];
    NNF_CHECK(nnf_pass_resize_inputs(conv, 3));
    conv->inputs[1] = nwv;
    conv->inputs[2] = nbv;
    /* the unfolded weights go now, so old and new copies never all coexist */
    if (nwv != wv && --ctx->uses[wv] == 0)
        nnf_graph_release_value_data(g, wv);
    if (bv >= 0 && --ctx->uses[bv] == 0)
        nnf_graph_release_value_data(g, bv);
    NNF_CHECK(nnf_pass_merge_names(ctx, conv, bn));
    nnf_pass_take_output(ctx, conv, 0, bn->outputs[0]);
    bn->dead = true;
    ctx->fusions++;
    return NNF_OK;
}

nnf_status nnf_pass_fold_batchnorm(nnf_pass_ctx *ctx) {
    nnf_graph *g = ctx->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        nnf_node *bn = &g->nodes[i];
        if (bn->dead || strcmp(bn->op_type, "BatchNormalization") || bn->domain[0] || bn->n_inputs < 5)
            continue;
        /* training-mode outputs (running mean/var) must not be in use */
        bool extra = false;
        for (int k = 1; k < bn->n_outputs; k++)
            extra |= bn->outputs[k] >= 0 && ctx->uses[bn->outputs[k]] > 0;
        nnf_node *conv = nnf_pass_producer(ctx, bn->inputs[0]);
        if (extra || !conv ||
            (strcmp(conv->op_type, "Conv") && strcmp(conv->op_type, "ConvTranspose")) ||
            conv->domain[0] || ctx->uses[bn->inputs[0]] != 1)
            continue;
        const nnf_conv_params *cp = conv->params;
        if (cp->act.kind != NNF_ACT_NONE || cp->residual_input >= 0)
            continue;
        NNF_CHECK(fold_one(ctx, bn, conv));
    }
    return NNF_OK;
}

/* A pointwise blocked Conv whose output only a depthwise blocked Conv reads
 * becomes one ConvPwDw node (ops/nchwc.h, kernels/nchwc_pw_dw.c): the
 * expanded tensor of a MobileNet block is then produced a few rows at a
 * time into a buffer that stays in L2, and never written whole. Runs after
 * layout_nchwc (-O3), on its blocked convs; the depthwise node takes the
 * pointwise one's input and weights and keeps its own name. */
#include "passes/pass.h"

#include "ops/nchwc.h"
#include "ops/op.h"

#include <string.h>

static bool blocked_conv(const nnf_node *n) {
    return !n->dead && !strcmp(n->domain, "nnfuse.nchwc") && !strcmp(n->op_type, "Conv") &&
           n->n_outputs == 1 && ((const nnf_nchwc_params *)n->params)->in_blocked &&
           !((const nnf_nchwc_params *)n->params)->out_plain &&
           ((const nnf_nchwc_params *)n->params)->conv.residual_input < 0;
}

/* Constant 4-D weight of a conv: its shape, or NULL. */
static const nnf_shape *weight(const nnf_graph *g, const nnf_node *n) {
    int w = n->n_inputs > 1 ? n->inputs[1] : -1;
    if (w < 0 || !g->values[w].data || g->values[w].shape.rank != 4)
        return NULL;
    for (int k = 2; k < n->n_inputs; k++) /* a bias, if any, constant too */
        if (n->inputs[k] >= 0 && !g->values[n->inputs[k]].data)
            return NULL;
    return &g->values[w].shape;
}

/* A 2-D conv: its attributes imply two spatial axes, or none (kernel_shape,
 * strides, pads all defaulted: the 4-D weight decides). */
static bool two_d(const nnf_conv_params *p) {
    return p->spatial == 0 || p->spatial == 2;
}

static bool pointwise(const nnf_graph *g, const nnf_node *n) {
    const nnf_conv_params *p = &((const nnf_nchwc_params *)n->params)->conv;
    const nnf_shape *w = weight(g, n);
    if (!w || !two_d(p) || p->group != 1 || w->dims[2] != 1 || w->dims[3] != 1 ||
        p->auto_pad != NNF_AUTO_PAD_NOTSET)
        return false;
    for (int i = 0; i < 2; i++)
        if (p->strides[i] != 1 || p->pads_begin[i] || p->pads_end[i])
            return false;
    return true;
}

static bool depthwise(const nnf_graph *g, const nnf_node *n) {
    const nnf_conv_params *p = &((const nnf_nchwc_params *)n->params)->conv;
    const nnf_shape *w = weight(g, n);
    return w && two_d(p) && w->dims[1] == 1 && p->group == w->dims[0];
}

nnf_status nnf_pass_fuse_pw_dw(nnf_pass_ctx *ctx) {
    nnf_graph *g = ctx->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        nnf_node *dw = &g->nodes[i];
        if (!blocked_conv(dw) || !depthwise(g, dw))
            continue;
        int mid = dw->inputs[0];
        nnf_node *pw = nnf_pass_producer(ctx, mid);
        if (!pw || !blocked_conv(pw) || !pointwise(g, pw) || ctx->uses[mid] != 1 ||
            g->values[pw->inputs[1]].shape.dims[0] != g->values[dw->inputs[1]].shape.dims[0])
            continue;
        nnf_nchwc_params *p = nnf_arena_calloc(&g->arena, 1, sizeof *p);
        if (!p)
            return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory fusing '%s' into '%s'", pw->name,
                             dw->name);
        const nnf_nchwc_params *pp = pw->params, *dp = dw->params;
        *p = *pp;
        p->dw = dp->conv;
        int in[5] = {pw->inputs[0], pw->inputs[1], pw->n_inputs > 2 ? pw->inputs[2] : NNF_NO_VALUE,
                     dw->inputs[1], dw->n_inputs > 2 ? dw->inputs[2] : NNF_NO_VALUE};
        NNF_CHECK(nnf_pass_resize_inputs(dw, 5));
        memcpy(dw->inputs, in, sizeof in);
        dw->op_type = "ConvPwDw";
        dw->op = nnf_op_find("nnfuse.nchwc", "ConvPwDw", 1, NULL);
        dw->params = p;
        NNF_CHECK(nnf_pass_merge_names(ctx, dw, pw));
        g->values[mid].producer = -1;
        pw->dead = true;
        ctx->uses[mid] = 0;
        ctx->fusions++;
    }
    return NNF_OK;
}

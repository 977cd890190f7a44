/* A blocked Conv that writes NCHW (out_plain) and whose output only a
 * Transpose to channel-last reads, directly (0, 2, 3, 1: NHWC) or through a
 * Reshape splitting the channels into groups ([N, C, H, W] -> [N, A, G, H,
 * W], then (0, 1, 3, 4, 2): a detection head's [N, anchors, H, W, outputs]),
 * writes the Transpose's output itself: its tiles' results leave their
 * per-thread buffer in that layout (kernels/nchwc.h, nnf_nchwc_conv_run_cl)
 * instead of as NCHW planes that a Transpose then read and wrote once more
 * (YOLOv5s's three heads: 1.2 ms of transposes on 1 thread, the 80x80
 * one's [3, 85, 6400] -> [3, 6400, 85] alone 0.96). The Reshape and the
 * Transpose go; the Conv takes the Transpose's output value. Runs after
 * layout_nchwc (-O3), which decides out_plain. */
#include "passes/pass.h"

#include "ops/nchwc.h"
#include "ops/tensor_common.h"

#include <string.h>

/* The dense kernel's plain output only (nnf_nchwc_plain_out_ok: group 1 or
 * groups of whole blocks): a depthwise conv between NCHW tensors
 * (nnf_nchwc_dw_run_plain) writes NCHW planes and no other layout, and
 * given a channel-last output it ran the reference kernel (ConvNeXt's 7x7s
 * before a Transpose to NHWC, 12x slower). oc: the conv's output channels. */
static bool plain_conv(const nnf_node *n, int v, int64_t oc) {
    const nnf_nchwc_params *p = n ? n->params : NULL;
    return p && !n->dead && !strcmp(n->domain, "nnfuse.nchwc") && !strcmp(n->op_type, "Conv") &&
           n->n_outputs == 1 && n->outputs[0] == v && p->out_plain && !p->out_group &&
           p->conv.residual_input < 0 && !(p->conv.group > 1 && p->conv.group == oc);
}

static bool perm_is(const nnf_node *t, int rank, const int *want) {
    const nnf_transpose_params *tp = t->params;
    if (!tp || tp->n_perm != rank)
        return false;
    for (int i = 0; i < rank; i++)
        if (tp->perm[i] != want[i])
            return false;
    return true;
}

nnf_status nnf_pass_fuse_conv_transpose(nnf_pass_ctx *ctx) {
    static const int nhwc[4] = {0, 2, 3, 1}, grouped[5] = {0, 1, 3, 4, 2};
    nnf_graph *g = ctx->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        nnf_node *t = &g->nodes[i];
        if (!nnf_pass_is_op(t, "Transpose") || t->n_inputs != 1 || t->n_outputs != 1 ||
            t->inputs[0] < 0 || t->outputs[0] < 0 || ctx->uses[t->inputs[0]] != 1)
            continue;
        int v = t->inputs[0], u = v;
        nnf_node *r = nnf_pass_producer(ctx, v), *conv = r;
        if (nnf_pass_is_op(r, "Reshape")) {
            if (r->n_inputs < 1 || (u = r->inputs[0]) < 0 || ctx->uses[u] != 1 ||
                r->outputs[0] != v)
                continue;
            conv = nnf_pass_producer(ctx, u);
        } else {
            r = NULL;
        }
        const nnf_shape *cs = &g->values[u].shape, *rs = &g->values[v].shape;
        if (cs->rank != 4 || !nnf_shape_known(cs) || !plain_conv(conv, u, cs->dims[1]))
            continue;
        int64_t group;
        if (!r) {
            if (!perm_is(t, 4, nhwc))
                continue;
            group = cs->dims[1];
        } else {
            /* [N, C, H, W] -> [N, A, G, H, W], A G = C */
            if (rs->rank != 5 || !nnf_shape_known(rs) || !perm_is(t, 5, grouped) ||
                rs->dims[0] != cs->dims[0] || rs->dims[1] * rs->dims[2] != cs->dims[1] ||
                rs->dims[3] != cs->dims[2] || rs->dims[4] != cs->dims[3] || rs->dims[2] <= 0)
                continue;
            group = rs->dims[2];
        }
        nnf_nchwc_params *p = nnf_arena_calloc(&g->arena, 1, sizeof *p);
        if (!p)
            return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory fusing '%s' into '%s'", t->name,
                             conv->name);
        *p = *(const nnf_nchwc_params *)conv->params;
        p->out_group = group;
        p->out_nhwc = r == NULL;
        conv->params = p;
        nnf_pass_take_output(ctx, conv, 0, t->outputs[0]);
        if (r) {
            NNF_CHECK(nnf_pass_merge_names(ctx, conv, r));
            g->values[v].producer = -1;
            r->dead = true;
        }
        NNF_CHECK(nnf_pass_merge_names(ctx, conv, t));
        t->dead = true;
        ctx->uses[u] = ctx->uses[v] = 0;
        ctx->fusions++;
    }
    return NNF_OK;
}

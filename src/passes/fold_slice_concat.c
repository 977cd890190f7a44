/* A Concat one of whose inputs is a Slice of a tensor X shaped like the
 * Concat's output, cut along the Concat's axis only and at the very place
 * that input takes in the output, becomes nnfuse::SliceAssign(X, the other
 * inputs) (ops/slice_assign.c): X with the other inputs written over their
 * windows. YOLOv5s's heads concatenate [xy, wh, Slice(y, 4:85)] along the
 * last axis of y's shape: the Slice copied 81 of every 85 floats of the
 * head's largest tensor and the Concat copied them again (0.9 ms on 1
 * thread); now where y dies at the node its buffer becomes the output and
 * only xy and wh are written. The Slice goes (its output read by the Concat
 * alone). Shapes known at load only. */
#include "passes/pass.h"

#include "ops/op.h"
#include "ops/tensor_common.h"

#include <string.h>

/* Where Slice s starts along axis when it cuts only that axis of its
 * static input, with step 1, to its static output's extent. */
static bool axis_window(const nnf_graph *g, const nnf_node *s, int axis, int64_t *start) {
    const nnf_shape *xs = &g->values[s->inputs[0]].shape, *ys = &g->values[s->outputs[0]].shape;
    if (!nnf_shape_known(xs) || !nnf_shape_known(ys) || xs->rank != ys->rank || axis >= xs->rank ||
        s->n_inputs > 5)
        return false;
    nnf_tinfo in[5];
    for (int k = 0; k < s->n_inputs; k++)
        nnf_value_tinfo(g, s->inputs[k], &in[k]);
    nnf_slice_plan sp;
    if (!nnf_slice_plan_known(s, in, &sp))
        return false;
    for (int d = 0; d < xs->rank; d++)
        if (sp.step[d] != 1 || sp.count[d] != ys->dims[d] ||
            (d != axis && (sp.start[d] != 0 || sp.count[d] != xs->dims[d])))
            return false;
    *start = sp.start[axis];
    return true;
}

static nnf_status fold(nnf_pass_ctx *ctx, nnf_node *c) {
    nnf_graph *g = ctx->graph;
    const nnf_axis_params *ap = c->params;
    int y = c->n_outputs == 1 ? c->outputs[0] : -1;
    if (!ap || y < 0 || c->n_inputs > 64)
        return NNF_OK;
    const nnf_shape *ys = &g->values[y].shape;
    if (!nnf_shape_known(ys) || ys->rank < 1 || ap->axis < -ys->rank || ap->axis >= ys->rank)
        return NNF_OK;
    int axis = (int)(ap->axis < 0 ? ap->axis + ys->rank : ap->axis), pick = -1;
    int64_t at = 0, pick_len = 0;
    for (int k = 0; k < c->n_inputs; k++) {
        int v = c->inputs[k];
        if (v < 0 || !nnf_shape_known(&g->values[v].shape) || g->values[v].shape.rank != ys->rank)
            return NNF_OK;
        int64_t len = g->values[v].shape.dims[axis], start;
        nnf_node *s = nnf_pass_producer(ctx, v);
        int x = s ? s->inputs[0] : -1;
        if (nnf_pass_is_op(s, "Slice") && s->outputs[0] == v && ctx->uses[v] == 1 && x >= 0 &&
            g->values[x].shape.rank == ys->rank &&
            !memcmp(g->values[x].shape.dims, ys->dims, sizeof(int64_t) * (size_t)ys->rank) &&
            g->values[x].dtype == g->values[y].dtype && axis_window(g, s, axis, &start) &&
            start == at && len > pick_len) {
            pick = k;
            pick_len = len;
        }
        at += len;
    }
    if (pick < 0)
        return NNF_OK;
    nnf_node *s = nnf_pass_producer(ctx, c->inputs[pick]);
    nnf_slice_assign_params *p = nnf_arena_calloc(&g->arena, 1, sizeof *p);
    int64_t *starts = nnf_arena_calloc(&g->arena, (size_t)c->n_inputs, sizeof *starts);
    if (!p || !starts)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory folding '%s' into '%s'", s->name,
                         c->name);
    /* inputs: X, then the others in order, each with its window's start */
    int sliced = c->inputs[pick], n = 1;
    at = 0;
    int *in = c->inputs, keep[64];
    memcpy(keep, in, sizeof(int) * (size_t)c->n_inputs);
    in[0] = s->inputs[0];
    for (int k = 0; k < c->n_inputs; k++) {
        int64_t len = g->values[keep[k]].shape.dims[axis];
        if (k != pick) {
            starts[n - 1] = at;
            in[n++] = keep[k];
        }
        at += len;
    }
    p->axis = axis;
    p->starts = starts;
    c->op_type = "SliceAssign";
    c->domain = "nnfuse";
    c->op = nnf_op_find("nnfuse", "SliceAssign", 1, NULL);
    c->opset = 1;
    c->params = p;
    NNF_CHECK(nnf_pass_merge_names(ctx, c, s));
    g->values[sliced].producer = -1;
    s->dead = true;
    ctx->uses[sliced] = 0;
    ctx->fusions++;
    return NNF_OK;
}

nnf_status nnf_pass_fold_slice_concat(nnf_pass_ctx *ctx) {
    nnf_graph *g = ctx->graph;
    for (int i = 0; i < g->n_nodes; i++)
        if (nnf_pass_is_op(&g->nodes[i], "Concat"))
            NNF_CHECK(fold(ctx, &g->nodes[i]));
    return NNF_OK;
}

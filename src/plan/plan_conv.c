/* Plans for Conv and ConvTranspose on NCHW. Conv: 1-D/2-D float32 with
 * constant weights goes to kernels/conv_fast (1x1 GEMM, implicit-im2col
 * GEMM, Winograd F(4x4,3x3), depthwise), 3-D to kernels/conv3d (an
 * implicit-im2col GEMM). ConvTranspose: 1-D/2-D float32 with constant
 * weights goes to kernels/conv_transpose (GEMM + col2im), and so does 3-D
 * where the depth's taps tile the output depth (a 3D U-Net's 2x2x2 stride
 * 2). Everything else (other 3-D ConvTransposes, non-constant weights,
 * residuals that broadcast) keeps the reference kernel. */
#include "plan/kernels.h"

#include "base/alloc.h"
#include "kernels/conv3d.h"
#include "kernels/conv_transpose.h"
#include "ops/conv.h"

/* A Conv's kernel (k, or v for 3-D) or a ConvTranspose's (t). */
typedef struct conv_state {
    nnf_conv_kernel *k;
    nnf_convt_kernel *t;
    nnf_conv3d_kernel *v;
    int has_bias;
} conv_state;

static void conv_state_free(void *p) {
    conv_state *s = p;
    if (!s)
        return;
    nnf_conv_kernel_destroy(s->k);
    nnf_convt_kernel_destroy(s->t);
    nnf_conv3d_kernel_destroy(s->v);
    nnf_free(s);
}

nnf_status nnf_conv_run_epilogue(const nnf_node *node, nnf_buf *const *in, int has_bias,
                                 const nnf_conv_params *cp, size_t oc, size_t y_numel, nnf_epilogue *e) {
    *e = nnf_epilogue_default();
    e->act = cp->act;
    if (has_bias && node->n_inputs > 2 && in[2]) {
        if (in[2]->numel != oc)
            return nnf_node_error(node, NNF_ERR_SHAPE, "bias has %zu elements for %zu output channels",
                                  in[2]->numel, oc);
        e->bias_kind = NNF_BIAS_PER_ROW;
        e->bias = in[2]->data;
    }
    if (cp->residual_input >= 0) {
        const nnf_buf *r = in[cp->residual_input];
        if (!r || r->numel != y_numel)
            return nnf_node_error(node, NNF_ERR_SHAPE, "fused residual must be shaped like the output");
        e->residual = r->data;
        e->residual_after_act = cp->residual_after_act;
    }
    return NNF_OK;
}

static nnf_status conv3d_run(NNF_KERNEL_ARGS) {
    const conv_state *s = ctx->state;
    const nnf_conv3d_shape *sh = &s->v->s;
    const nnf_buf *x = in[0], *y = out[0];
    size_t xn = sh->n * sh->c * sh->d * sh->h * sh->w,
           yn = sh->n * sh->oc * sh->od * sh->oh * sh->ow;
    if (x->numel != xn || y->numel != yn || x->dims[0] != (int64_t)sh->n)
        return nnf_node_error(node, NNF_ERR_SHAPE,
                              "%s: input or output shape differs from the plan", s->v->name);
    nnf_epilogue e;
    NNF_CHECK(nnf_conv_run_epilogue(node, in, s->has_bias, node->params, sh->oc, yn, &e));
    nnf_status st = nnf_conv3d_kernel_run(s->v, x->data, y->data, &e, ctx->pool);
    return st == NNF_OK ? st : nnf_error_prefix(st, "node %s (%s)", node->name, node->op_type);
}

static nnf_status conv_run(NNF_KERNEL_ARGS) {
    const conv_state *s = ctx->state;
    const nnf_conv2d_shape *sh = s->k ? &s->k->s : &s->t->s;
    const nnf_buf *x = in[0], *y = out[0];
    size_t d = s->t ? s->t->d : 1, od = s->t ? s->t->d * s->t->kd : 1;
    size_t xn = sh->n * sh->c * d * sh->h * sh->w, yn = sh->n * sh->oc * od * sh->oh * sh->ow;
    if (x->numel != xn || y->numel != yn || x->dims[0] != (int64_t)sh->n)
        return nnf_node_error(node, NNF_ERR_SHAPE,
                              "%s: input or output shape differs from the plan",
                              s->k ? s->k->name : s->t->name);
    nnf_epilogue e;
    NNF_CHECK(nnf_conv_run_epilogue(node, in, s->has_bias, node->params, sh->oc, yn, &e));
    nnf_status st = s->k ? nnf_conv_kernel_run(s->k, x->data, y->data, &e, ctx->pool)
                         : nnf_convt_kernel_run(s->t, x->data, y->data, &e, ctx->pool);
    return st == NNF_OK ? st : nnf_error_prefix(st, "node %s (%s)", node->name, node->op_type);
}

/* The state a plan fills: has_bias from the node's third input. */
static conv_state *state_new(const nnf_node *node, const nnf_tinfo *in) {
    conv_state *st = nnf_calloc(1, sizeof *st);
    if (st)
        st->has_bias = node->n_inputs > 2 && in[2].present;
    return st;
}

/* Hands st to the plan once its kernel is made (rc NNF_OK), else frees it
 * and reports rc against the node. */
static nnf_status plan_take(const nnf_node *node, nnf_kernel_plan *plan, conv_state *st,
                            nnf_status rc, nnf_kernel_fn run) {
    if (rc != NNF_OK) {
        conv_state_free(st);
        return nnf_error_prefix(rc, "node %s (%s)", node->name, node->op_type);
    }
    plan->name = st->k ? st->k->name : st->t ? st->t->name : st->v->name;
    plan->run = run;
    plan->state = st;
    plan->free_state = conv_state_free;
    plan->packed_inputs = 1u << 1; /* every kernel copies or packs W; run reads only the state */
    return NNF_OK;
}

/* The 2-D shape of a 1-D (as H = 1) or 2-D conv or transposed conv: input
 * extents xd, kernel from the weight's trailing dims wd, output yd, oc
 * output channels, strides and dilations of p, start pads pb. */
static nnf_conv2d_shape shape_2d(int sp, const int64_t *xd, const int64_t *wd, const int64_t *yd,
                                 size_t oc, const nnf_conv_params *p, const int64_t *pb) {
    int h = sp == 2;
    return (nnf_conv2d_shape){
        .n = (size_t)xd[0], .c = (size_t)xd[1], .h = h ? (size_t)xd[2] : 1,
        .w = (size_t)xd[1 + sp], .oc = oc, .group = (size_t)p->group,
        .kh = h ? (size_t)wd[2] : 1, .kw = (size_t)wd[1 + sp],
        .sh = h ? (size_t)p->strides[0] : 1, .sw = (size_t)p->strides[sp - 1],
        .dh = h ? (size_t)p->dilations[0] : 1, .dw = (size_t)p->dilations[sp - 1],
        .pt = h ? (size_t)pb[0] : 0, .pl = (size_t)pb[sp - 1],
        .oh = h ? (size_t)yd[2] : 1, .ow = (size_t)yd[1 + sp]};
}

/* Float32 input, constant weight and output of known shapes, 1-D to 3-D
 * (ranks agreeing with the attributes): the spatial rank, else 0. */
static int plannable(const nnf_node *node, const nnf_tinfo *in, const nnf_tinfo *out) {
    const nnf_conv_params *p = node->params;
    const nnf_tinfo *x = &in[0], *w = &in[1], *y = &out[0];
    if (!p || x->dtype != NNF_DTYPE_FLOAT32 || w->dtype != NNF_DTYPE_FLOAT32 || !w->data ||
        !nnf_shape_known(&x->shape) || !nnf_shape_known(&w->shape) || !nnf_shape_known(&y->shape))
        return 0;
    int sp = x->shape.rank - 2;
    if (sp < 1 || sp > 3 || w->shape.rank != x->shape.rank || y->shape.rank != x->shape.rank ||
        (p->spatial && p->spatial != sp))
        return 0;
    return sp;
}

/* A 3-D conv (p with its kernel from the weight, pb the start pads). */
static nnf_status plan_conv3d(const nnf_node *node, const nnf_tinfo *in, const nnf_tinfo *out,
                              nnf_kernel_plan *plan, const nnf_conv_params *p, const int64_t *pb) {
    const int64_t *xd = in[0].shape.dims, *wd = in[1].shape.dims, *yd = out[0].shape.dims;
    nnf_conv3d_shape s = {.n = (size_t)xd[0],
                          .c = (size_t)xd[1],
                          .d = (size_t)xd[2],
                          .h = (size_t)xd[3],
                          .w = (size_t)xd[4],
                          .oc = (size_t)wd[0],
                          .group = (size_t)p->group,
                          .kd = (size_t)wd[2],
                          .kh = (size_t)wd[3],
                          .kw = (size_t)wd[4],
                          .sd = (size_t)p->strides[0],
                          .sh = (size_t)p->strides[1],
                          .sw = (size_t)p->strides[2],
                          .dd = (size_t)p->dilations[0],
                          .dh = (size_t)p->dilations[1],
                          .dw = (size_t)p->dilations[2],
                          .pf = (size_t)pb[0],
                          .pt = (size_t)pb[1],
                          .pl = (size_t)pb[2],
                          .od = (size_t)yd[2],
                          .oh = (size_t)yd[3],
                          .ow = (size_t)yd[4]};
    if (!nnf_conv3d_fits(&s))
        return NNF_OK;
    conv_state *st = state_new(node, in);
    if (!st)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a conv plan");
    return plan_take(node, plan, st,
                     nnf_conv3d_kernel_create(&s, nnf_cpu_isa(), in[1].data, &st->v), conv3d_run);
}

nnf_status nnf_plan_conv(NNF_PLAN_ARGS) {
    const nnf_conv_params *p = node->params;
    const nnf_tinfo *x = &in[0], *w = &in[1], *y = &out[0];
    int sp = plannable(node, in, out);
    if (!sp)
        return NNF_OK;
    /* kernel extents come from the weight (kernel_shape is optional) */
    nnf_conv_params lp = nnf_conv_effective(p, x->shape.rank, w->shape.dims);
    p = &lp;
    int64_t pb[NNF_MAX_SPATIAL], pe[NNF_MAX_SPATIAL];
    NNF_CHECK(nnf_conv_resolve_pads(p, x->shape.dims + 2, pb, pe));
    const int64_t *xd = x->shape.dims, *wd = w->shape.dims, *yd = y->shape.dims;
    if (wd[1] * p->group != xd[1] || yd[1] != wd[0] || yd[0] != xd[0])
        return NNF_OK;
    if (p->residual_input >= 0) {
        const nnf_tinfo *r = p->residual_input < node->n_inputs ? &in[p->residual_input] : NULL;
        if (!r || !r->present || r->dtype != NNF_DTYPE_FLOAT32 ||
            nnf_shape_numel(&r->shape) != nnf_shape_numel(&y->shape))
            return NNF_OK;
    }
    if (sp == 3)
        return plan_conv3d(node, in, out, plan, p, pb);
    nnf_conv2d_shape s = shape_2d(sp, xd, wd, yd, (size_t)wd[0], p, pb);
    nnf_isa isa = nnf_cpu_isa();
    nnf_conv_algo algo = nnf_conv_select(&s, isa);
    if (algo == NNF_CONV_ALGO_NONE)
        return NNF_OK;
    conv_state *st = state_new(node, in);
    if (!st)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a conv plan");
    return plan_take(node, plan, st, nnf_conv_kernel_create(&s, algo, isa, w->data, &st->k),
                     conv_run);
}

/* ---- ConvTranspose -------------------------------------------------------- */

nnf_status nnf_plan_conv_transpose(NNF_PLAN_ARGS) {
    const nnf_conv_params *p = node->params;
    const nnf_tinfo *x = &in[0], *w = &in[1], *y = &out[0];
    int sp = plannable(node, in, out);
    if (!sp || p->residual_input >= 0)
        return NNF_OK;
    nnf_conv_params lp = nnf_conv_effective(p, x->shape.rank, w->shape.dims);
    p = &lp;
    int64_t pb[NNF_MAX_SPATIAL], pe[NNF_MAX_SPATIAL], o[NNF_MAX_SPATIAL];
    NNF_CHECK(nnf_conv_transpose_resolve(node, p, x->shape.dims + 2, pb, pe, o));
    const int64_t *xd = x->shape.dims, *wd = w->shape.dims, *yd = y->shape.dims;
    for (int i = 0; i < sp; i++)
        if (o[i] != yd[2 + i] || pb[i] < 0)
            return NNF_OK;
    /* 3-D: the depth's taps must tile it (kernel = stride, dilation 1, no
     * padding or output padding: output depth D kd), each output plane one
     * 2-D transposed conv of an input plane; the rest as 2-D */
    size_t d = 1, kd = 1;
    if (sp == 3) {
        if (p->kernel[0] != p->strides[0] || p->dilations[0] != 1 || pb[0] != 0 ||
            p->kernel[0] < 1 || yd[2] % p->kernel[0] || yd[2] / p->kernel[0] != xd[2])
            return NNF_OK;
        d = (size_t)xd[2];
        kd = (size_t)p->kernel[0];
    }
    int lead = sp == 3;
    nnf_conv_params hw = *p;
    for (int i = 0; i + lead < sp; i++) {
        hw.kernel[i] = p->kernel[i + lead];
        hw.strides[i] = p->strides[i + lead];
        hw.dilations[i] = p->dilations[i + lead];
    }
    int64_t xhw[2 + 2] = {xd[0], xd[1], xd[2 + lead], xd[sp + 1]},
                    yhw[2 + 2] = {yd[0], yd[1], yd[2 + lead], yd[sp + 1]},
                    whw[2 + 2] = {wd[0], wd[1], wd[2 + lead], wd[sp + 1]};
    /* W is C x OC/group x kernel */
    nnf_conv2d_shape s =
        shape_2d(sp - lead, xhw, whw, yhw, (size_t)(wd[1] * p->group), &hw, pb + lead);
    if (wd[0] != xd[1] || yd[1] != (int64_t)s.oc || yd[0] != xd[0] || !nnf_convt_fits(&s))
        return NNF_OK;
    conv_state *st = state_new(node, in);
    if (!st)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY,
                              "out of memory for a ConvTranspose plan");
    return plan_take(node, plan, st,
                     nnf_convt_kernel_create_3d(&s, d, kd, nnf_cpu_isa(), w->data, &st->t),
                     conv_run);
}

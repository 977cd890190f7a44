/* Plans for the NCHWc8 internal operators (ops/nchwc.h): each binds the
 * blocked kernel of kernels/nchwc.h for the planned shapes. The tier is the
 * one in force at load (AVX2 kernels where the CPU has them, else the
 * portable ones); shapes that differ at run time fall back to the reference
 * kernels like every other plan. */
#include "plan/kernels.h"

#include "base/alloc.h"
#include "kernels/eltwise_fast.h"
#include "kernels/nchwc.h"
#include "kernels/resize_fast.h"
#include "ops/conv.h"
#include "ops/nchwc.h"

#include <stdio.h>
#include <string.h>

static nnf_isa blocked_isa(void) { return nnf_cpu_isa() >= NNF_ISA_AVX2 ? NNF_ISA_AVX2 : NNF_ISA_SCALAR; }

static bool known_f32(const nnf_tinfo *t, int rank) {
    return t->present && t->dtype == NNF_DTYPE_FLOAT32 && t->shape.rank == rank && nnf_shape_known(&t->shape);
}

static nnf_status plan_oom(const nnf_node *node) {
    return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a kernel plan");
}

/* The run-time operands still have the planned element counts. */
static nnf_status check_planned(const nnf_node *node, nnf_buf *const *in, nnf_buf *const *out, size_t x_numel,
                                size_t y_numel, const char *kernel) {
    if (in[0]->numel != x_numel || out[0]->numel != y_numel)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: shapes differ from the plan", kernel);
    return NNF_OK;
}

static nnf_status bind(nnf_kernel_plan *plan, const char *name, nnf_kernel_fn run, void *state,
                       void (*free_state)(void *)) {
    plan->name = name;
    plan->run = run;
    plan->state = state;
    plan->free_state = free_state;
    return NNF_OK;
}

/* ---- reorders --------------------------------------------------------- */

typedef struct reorder_state {
    size_t n, c, hw, in_numel, out_numel;
    nnf_isa isa;
    char name[40];
} reorder_state;

static nnf_status reorder_to_run(NNF_KERNEL_ARGS) {
    const reorder_state *s = ctx->state;
    NNF_CHECK(check_planned(node, in, out, s->in_numel, s->out_numel, s->name));
    nnf_nchwc_from_nchw(in[0]->data, out[0]->data, s->n, s->c, s->hw, s->isa, ctx->pool);
    return NNF_OK;
}

static nnf_status reorder_from_run(NNF_KERNEL_ARGS) {
    const reorder_state *s = ctx->state;
    NNF_CHECK(check_planned(node, in, out, s->in_numel, s->out_numel, s->name));
    nnf_nchwc_to_nchw(in[0]->data, out[0]->data, s->n, s->c, s->hw, s->isa, ctx->pool);
    return NNF_OK;
}

/* plain: the NCHW side of the reorder, which has the logical channels */
static nnf_status plan_reorder(const nnf_node *node, const nnf_tinfo *x, const nnf_tinfo *y, const nnf_tinfo *plain,
                               nnf_kernel_fn run, const char *what, nnf_kernel_plan *plan) {
    if (!known_f32(x, 4) || !known_f32(y, 4))
        return NNF_OK;
    reorder_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return plan_oom(node);
    const int64_t *d = plain->shape.dims;
    s->n = (size_t)d[0];
    s->c = (size_t)d[1];
    s->hw = (size_t)(d[2] * d[3]);
    s->in_numel = (size_t)nnf_shape_numel(&x->shape);
    s->out_numel = (size_t)nnf_shape_numel(&y->shape);
    s->isa = blocked_isa();
    snprintf(s->name, sizeof s->name, "f32_reorder_%s_%s", what, nnf_isa_name(s->isa));
    return bind(plan, s->name, run, s, nnf_free);
}

nnf_status nnf_plan_reorder_to_nchwc(NNF_PLAN_ARGS) {
    return plan_reorder(node, &in[0], &out[0], &in[0], reorder_to_run, "to_nchwc8", plan);
}

nnf_status nnf_plan_reorder_from_nchwc(NNF_PLAN_ARGS) {
    return plan_reorder(node, &in[0], &out[0], &out[0], reorder_from_run, "from_nchwc8", plan);
}

/* ---- conv ------------------------------------------------------------- */

typedef struct conv_state {
    nnf_nchwc_conv *dense;
    nnf_nchwc_dw *dw;
    nnf_nchwc_gconv *gconv;
    nnf_nchwc_wino *wino;
    const nnf_conv2d_shape *s;
    size_t x_numel, y_numel;
    int has_bias;
    int out_plain;  /* the dense conv writes NCHW */
    size_t out_group; /* ... channel-last in groups of out_group (0: NCHW) */
    char name[96];    /* the kernel's, "+nchw_out" when out_plain ("+nhwc_out" channel-last) */
} conv_state;

static void conv_state_free(void *p) {
    conv_state *s = p;
    if (!s)
        return;
    nnf_nchwc_conv_destroy(s->dense);
    nnf_nchwc_dw_destroy(s->dw);
    nnf_nchwc_gconv_destroy(s->gconv);
    nnf_nchwc_wino_destroy(s->wino);
    nnf_free(s);
}

static nnf_status conv_run(NNF_KERNEL_ARGS) {
    const conv_state *s = ctx->state;
    NNF_CHECK(check_planned(node, in, out, s->x_numel, s->y_numel, s->name));
    nnf_epilogue e;
    const nnf_nchwc_params *p = node->params;
    NNF_CHECK(nnf_conv_run_epilogue(node, in, s->has_bias, &p->conv, s->s->oc, s->y_numel, &e));
    nnf_status st =
        s->out_group ? nnf_nchwc_conv_run_cl(s->dense, in[0]->data, out[0]->data, &e, s->out_group,
                                             ctx->pool)
        : s->gconv   ? nnf_nchwc_gconv_run(s->gconv, in[0]->data, out[0]->data, &e, ctx->pool)
        : s->out_plain && s->dw
            ? nnf_nchwc_dw_run_plain(s->dw, in[0]->data, out[0]->data, &e, ctx->pool)
        : s->out_plain ? nnf_nchwc_conv_run_nchw(s->dense, in[0]->data, out[0]->data, &e, ctx->pool)
        : s->dense     ? nnf_nchwc_conv_run(s->dense, in[0]->data, out[0]->data, &e, ctx->pool)
        : s->wino      ? nnf_nchwc_wino_run(s->wino, in[0]->data, out[0]->data, &e, ctx->pool)
                       : nnf_nchwc_dw_run(s->dw, in[0]->data, out[0]->data, &e, ctx->pool);
    return st == NNF_OK ? st : nnf_error_prefix(st, "node %s (%s)", node->name, node->op_type);
}

/* The logical 2-D conv shape of a Conv node (NCHW view: x has the logical
 * channel count); false when the fast kernels do not take it. Shared with
 * the layout pass, which asks the same question before it blocks a conv. */
bool nnf_nchwc_conv_shape(const nnf_conv_params *cp, const int64_t *xd, const int64_t *wd, const int64_t *yd,
                          nnf_conv2d_shape *s) {
    if (cp->spatial && cp->spatial != 2)
        return false;
    nnf_conv_params p = nnf_conv_effective(cp, 4, wd);
    int64_t pb[2], pe[2];
    if (nnf_conv_resolve_pads(&p, xd + 2, pb, pe) != NNF_OK) {
        nnf_error_clear();
        return false;
    }
    *s = (nnf_conv2d_shape){
        .n = (size_t)xd[0], .c = (size_t)(wd[1] * p.group), .h = (size_t)xd[2], .w = (size_t)xd[3],
        .oc = (size_t)wd[0], .group = (size_t)p.group, .kh = (size_t)wd[2], .kw = (size_t)wd[3],
        .sh = (size_t)p.strides[0], .sw = (size_t)p.strides[1], .dh = (size_t)p.dilations[0],
        .dw = (size_t)p.dilations[1], .pt = (size_t)pb[0], .pl = (size_t)pb[1], .oh = (size_t)yd[2],
        .ow = (size_t)yd[3]};
    return nnf_nchwc_conv_supported(s) || nnf_nchwc_dw_supported(s) || nnf_nchwc_gconv_supported(s);
}

nnf_status nnf_plan_nchwc_conv(NNF_PLAN_ARGS) {
    const nnf_nchwc_params *p = node->params;
    const nnf_tinfo *x = &in[0], *w = &in[1], *y = &out[0];
    int cl5 = p->out_plain && p->out_group && !p->out_nhwc;
    if (!known_f32(x, 4) || !known_f32(w, 4) || !w->data || !known_f32(y, cl5 ? 5 : 4))
        return NNF_OK;
    nnf_conv2d_shape s;
    /* the NCHW extents of a channel-last output ([N, C / G, H, W, G] or
     * [N, H, W, C]) */
    const int64_t *d = y->shape.dims;
    int64_t yd[4] = {d[0], d[1], d[2], d[3]};
    if (cl5) {
        yd[1] = d[1] * d[4];
        yd[2] = d[2];
        yd[3] = d[3];
    } else if (p->out_plain && p->out_group) {
        yd[1] = d[3];
        yd[2] = d[1];
        yd[3] = d[2];
    }
    if (!nnf_nchwc_conv_shape(&p->conv, x->shape.dims, w->shape.dims, yd, &s))
        return NNF_OK;
    conv_state *st = nnf_calloc(1, sizeof *st);
    if (!st)
        return plan_oom(node);
    /* the tier in force, not blocked_isa(): the dense conv has AVX-512
     * tiles and the Winograd an AVX-512 GEMM (the layout pass decided on
     * the same tier); the depthwise kernel runs AVX2 on both */
    nnf_isa isa = nnf_cpu_isa();
    /* an NCHW output: the dense kernel (the layout pass asks
     * nnf_nchwc_plain_out_ok before it sets out_plain), or the depthwise
     * kernel between NCHW tensors (nnf_nchwc_dw_plain_ok), which reads
     * NCHW only then */
    bool plain_ok = nnf_nchwc_dw_supported(&s)
                        ? !p->in_blocked && !p->out_group && p->conv.residual_input < 0 &&
                              nnf_nchwc_dw_plain_ok(&s)
                        : nnf_nchwc_plain_out_ok(&s, p->in_blocked, isa);
    /* the grouped conv of narrow groups: blocked in and out, a residual
     * before the activation at most */
    bool gconv = nnf_nchwc_gconv_supported(&s);
    if ((p->out_plain && !plain_ok) ||
        (!p->in_blocked && !p->out_plain && nnf_nchwc_dw_supported(&s)) ||
        (gconv && (!p->in_blocked || p->out_plain ||
                   (p->conv.residual_input >= 0 && p->conv.residual_after_act)))) {
        conv_state_free(st);
        return NNF_OK; /* the reference kernel runs it */
    }
    st->out_plain = p->out_plain;
    st->out_group = p->out_plain ? (size_t)p->out_group : 0;
    nnf_status rc =
        nnf_nchwc_dw_supported(&s) ? nnf_nchwc_dw_create(&s, isa, w->data, &st->dw)
        : gconv                    ? nnf_nchwc_gconv_create(&s, isa, w->data, &st->gconv)
        : p->in_blocked && nnf_nchwc_wino_wins(&s, isa)
            ? nnf_nchwc_wino_create(&s, isa, w->data, &st->wino)
            : nnf_nchwc_conv_create(&s, p->in_blocked,
                                    nnf_nchwc_conv_tier(&s, p->conv.act.kind, isa, nnf_cpu_get()),
                                    w->data, &st->dense);
    if (rc != NNF_OK) {
        conv_state_free(st);
        return nnf_error_prefix(rc, "node %s (%s)", node->name, node->op_type);
    }
    st->s = st->dense   ? &st->dense->s
            : st->wino  ? &st->wino->s
            : st->gconv ? &st->gconv->s
                        : &st->dw->s;
    st->x_numel = (size_t)nnf_shape_numel(&x->shape);
    st->y_numel = (size_t)nnf_shape_numel(&y->shape);
    st->has_bias = node->n_inputs > 2 && in[2].present;
    plan->packed_inputs = 1u << 1; /* W packed into the kernel; run reads only the state */
    /* a bottleneck's last 1x1 (+ residual + ReLU) writes over its residual
     * when that dies here: no new output buffer, and its lines are already
     * in cache (ResNet-50's 64 -> 256 at 56x56: 1.93 -> 1.70 ms); not
     * with the residual after the activation, which the second pass adds
     * after the tiles have stored over it */
    if (st->dense && p->conv.residual_input >= 0 && !p->conv.residual_after_act &&
        nnf_nchwc_conv_one_pass(st->dense))
        plan->in_place_inputs = 1u << p->conv.residual_input;
    snprintf(st->name, sizeof st->name, "%s%s",
             st->dense   ? st->dense->name
             : st->wino  ? st->wino->name
             : st->gconv ? st->gconv->name
                         : st->dw->name,
             st->out_group   ? "+nhwc_out"
             : st->out_plain ? "+nchw_out"
                             : "");
    return bind(plan, st->name, conv_run, st, conv_state_free);
}

/* ---- pointwise -> depthwise, fused ------------------------------------- */

typedef struct pw_dw_state {
    nnf_nchwc_conv *pw;
    nnf_nchwc_dw *dw;
    size_t x_numel, mid_numel, y_numel;
    int bias_pw, bias_dw;
    char name[96];
} pw_dw_state;

static void pw_dw_state_free(void *p) {
    pw_dw_state *s = p;
    if (!s)
        return;
    nnf_nchwc_conv_destroy(s->pw);
    nnf_nchwc_dw_destroy(s->dw);
    nnf_free(s);
}

static nnf_status pw_dw_run(NNF_KERNEL_ARGS) {
    const pw_dw_state *s = ctx->state;
    NNF_CHECK(check_planned(node, in, out, s->x_numel, s->y_numel, s->name));
    nnf_node n1, n2;
    nnf_nchwc_params p1, p2;
    nnf_nchwc_pw_dw_split(node, &n1, &p1, &n2, &p2);
    nnf_buf *const in2[3] = {NULL, in[3], in[4]};
    nnf_epilogue e1, e2;
    NNF_CHECK(nnf_conv_run_epilogue(&n1, in, s->bias_pw, &p1.conv, s->pw->s.oc, s->mid_numel, &e1));
    NNF_CHECK(nnf_conv_run_epilogue(&n2, in2, s->bias_dw, &p2.conv, s->dw->s.oc, s->y_numel, &e2));
    nnf_status st =
        nnf_nchwc_pw_dw_run(s->pw, s->dw, in[0]->data, out[0]->data, &e1, &e2, ctx->pool);
    return st == NNF_OK ? st : nnf_error_prefix(st, "node %s (%s)", node->name, node->op_type);
}

nnf_status nnf_plan_nchwc_pw_dw(NNF_PLAN_ARGS) {
    const nnf_tinfo *x = &in[0], *w1 = &in[1], *w2 = &in[3], *y = &out[0];
    if (!known_f32(x, 4) || !known_f32(w1, 4) || !w1->data || !known_f32(w2, 4) || !w2->data ||
        !known_f32(y, 4))
        return NNF_OK;
    nnf_node n1, n2;
    nnf_nchwc_params p1, p2;
    nnf_nchwc_pw_dw_split(node, &n1, &p1, &n2, &p2);
    /* the logical shapes: x and the pointwise output with their weights' channel counts */
    int64_t xd[4], md[4], yd[4];
    memcpy(xd, x->shape.dims, sizeof xd);
    memcpy(yd, y->shape.dims, sizeof yd);
    xd[1] = w1->shape.dims[1];
    md[0] = xd[0], md[1] = w1->shape.dims[0], md[2] = xd[2], md[3] = xd[3];
    nnf_conv2d_shape s1, s2;
    if (!nnf_nchwc_conv_shape(&p1.conv, xd, w1->shape.dims, md, &s1) ||
        !nnf_nchwc_conv_shape(&p2.conv, md, w2->shape.dims, yd, &s2))
        return NNF_OK;
    pw_dw_state *st = nnf_calloc(1, sizeof *st);
    if (!st)
        return plan_oom(node);
    nnf_isa isa = nnf_cpu_isa();
    nnf_status rc = nnf_nchwc_conv_create(
        &s1, 1, nnf_nchwc_conv_tier(&s1, p1.conv.act.kind, isa, nnf_cpu_get()), w1->data, &st->pw);
    if (rc == NNF_OK)
        rc = nnf_nchwc_dw_create(&s2, isa, w2->data, &st->dw);
    if (rc != NNF_OK || !nnf_nchwc_pw_dw_supported(st->pw, st->dw)) {
        pw_dw_state_free(st);
        if (rc == NNF_OK)
            return NNF_OK; /* the reference kernel runs it */
        return nnf_error_prefix(rc, "node %s (%s)", node->name, node->op_type);
    }
    st->x_numel = (size_t)nnf_shape_numel(&x->shape);
    st->mid_numel = s1.n * nnf_nchwc_blocks(s1.oc) * NNF_NCHWC_B * s1.oh * s1.ow;
    st->y_numel = (size_t)nnf_shape_numel(&y->shape);
    st->bias_pw = in[2].present;
    st->bias_dw = in[4].present;
    snprintf(st->name, sizeof st->name, "%s+%s", st->pw->name, st->dw->name);
    plan->packed_inputs = 1u << 1 | 1u << 3;
    return bind(plan, st->name, pw_dw_run, st, pw_dw_state_free);
}

/* ---- pools ------------------------------------------------------------ */

typedef struct pool_state {
    nnf_nchwc_pool_shape s;
    size_t x_numel, y_numel;
    nnf_isa isa;
    char name[40];
} pool_state;

static nnf_status pool_run(NNF_KERNEL_ARGS) {
    const pool_state *s = ctx->state;
    NNF_CHECK(check_planned(node, in, out, s->x_numel, s->y_numel, s->name));
    nnf_nchwc_pool(&s->s, in[0]->data, out[0]->data, s->isa, ctx->pool);
    return NNF_OK;
}

nnf_status nnf_plan_nchwc_pool(NNF_PLAN_ARGS) {
    const nnf_conv_params *p = node->params;
    const nnf_tinfo *x = &in[0], *y = &out[0];
    if (!known_f32(x, 4) || !known_f32(y, 4) || p->spatial != 2)
        return NNF_OK;
    int64_t pb[2], pe[2];
    if (nnf_conv_resolve_pads(p, x->shape.dims + 2, pb, pe) != NNF_OK) {
        nnf_error_clear();
        return NNF_OK;
    }
    pool_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return plan_oom(node);
    const int64_t *xd = x->shape.dims, *yd = y->shape.dims;
    bool is_max = !strcmp(node->op_type, "MaxPool");
    s->s = (nnf_nchwc_pool_shape){
        .n = (size_t)xd[0], .c = (size_t)xd[1], .h = (size_t)xd[2], .w = (size_t)xd[3],
        .kh = (size_t)p->kernel[0], .kw = (size_t)p->kernel[1], .sh = (size_t)p->strides[0],
        .sw = (size_t)p->strides[1], .dh = (size_t)p->dilations[0], .dw = (size_t)p->dilations[1],
        .pt = (size_t)pb[0], .pl = (size_t)pb[1], .pb = (size_t)pe[0], .pr = (size_t)pe[1],
        .oh = (size_t)yd[2], .ow = (size_t)yd[3], .is_max = is_max, .count_include_pad = p->count_include_pad};
    s->x_numel = (size_t)nnf_shape_numel(&x->shape);
    s->y_numel = (size_t)nnf_shape_numel(&y->shape);
    s->isa = blocked_isa();
    snprintf(s->name, sizeof s->name, "f32_%spool_nchwc8_%s", is_max ? "max" : "avg", nnf_isa_name(s->isa));
    return bind(plan, s->name, pool_run, s, nnf_free);
}

static nnf_status global_pool_run(NNF_KERNEL_ARGS) {
    const pool_state *s = ctx->state;
    NNF_CHECK(check_planned(node, in, out, s->x_numel, s->y_numel, s->name));
    nnf_nchwc_global_pool(in[0]->data, out[0]->data, s->s.n, s->s.c, s->s.h * s->s.w, s->s.is_max, s->isa,
                          ctx->pool);
    return NNF_OK;
}

nnf_status nnf_plan_nchwc_global_pool(NNF_PLAN_ARGS) {
    const nnf_tinfo *x = &in[0], *y = &out[0];
    if (!known_f32(x, 4) || !known_f32(y, 4))
        return NNF_OK;
    pool_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return plan_oom(node);
    bool is_max = !strcmp(node->op_type, "GlobalMaxPool");
    s->s = (nnf_nchwc_pool_shape){.n = (size_t)x->shape.dims[0], .c = (size_t)y->shape.dims[1],
                                  .h = (size_t)x->shape.dims[2], .w = (size_t)x->shape.dims[3], .is_max = is_max};
    s->x_numel = (size_t)nnf_shape_numel(&x->shape);
    s->y_numel = (size_t)nnf_shape_numel(&y->shape);
    s->isa = is_max ? blocked_isa() : nnf_cpu_isa(); /* the average has an AVX-512 form */
    snprintf(s->name, sizeof s->name, "f32_global_%spool_nchwc8_%s", is_max ? "max" : "avg", nnf_isa_name(s->isa));
    return bind(plan, s->name, global_pool_run, s, nnf_free);
}

/* ---- nearest resize --------------------------------------------------- */

typedef struct resize_state {
    nnf_resize_tables t;
    size_t n, c, x_numel, y_numel;
    nnf_isa isa;
    char name[40];
} resize_state;

static void resize_state_free(void *p) {
    resize_state *s = p;
    if (s)
        nnf_resize_tables_free(&s->t);
    nnf_free(s);
}

static nnf_status resize_run(NNF_KERNEL_ARGS) {
    const resize_state *s = ctx->state;
    NNF_CHECK(check_planned(node, in, out, s->x_numel, s->y_numel, s->name));
    nnf_nchwc_resize_nearest(in[0]->data, out[0]->data, s->n, s->c, (size_t)s->t.ih, (size_t)s->t.iw,
                             (size_t)s->t.oh, (size_t)s->t.ow, s->t.hidx, s->t.widx, s->isa, ctx->pool);
    return NNF_OK;
}

nnf_status nnf_plan_nchwc_resize(NNF_PLAN_ARGS) {
    const nnf_tinfo *x = &in[0], *y = &out[0];
    if (!known_f32(x, 4) || !known_f32(y, 4))
        return NNF_OK;
    resize_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return plan_oom(node);
    nnf_status st = nnf_resize_tables_for(node, in, out, &s->t);
    if (st != NNF_OK || s->t.kind != NNF_RSZ_NEAREST) {
        resize_state_free(s);
        return st;
    }
    s->n = (size_t)x->shape.dims[0];
    s->c = (size_t)x->shape.dims[1];
    s->x_numel = (size_t)nnf_shape_numel(&x->shape);
    s->y_numel = (size_t)nnf_shape_numel(&y->shape);
    s->isa = blocked_isa();
    snprintf(s->name, sizeof s->name, "f32_resize_nearest_nchwc8_%s", nnf_isa_name(s->isa));
    return bind(plan, s->name, resize_run, s, resize_state_free);
}

/* ---- Add / Sub / Mul with a per-channel operand ------------------------ */

typedef struct channel_state {
    int op, v_input, v_per_image;
    size_t n, cb, hw, numel[3]; /* x, v, y as planned */
    nnf_isa isa;
    char name[48];
} channel_state;

static nnf_status channel_run(NNF_KERNEL_ARGS) {
    const channel_state *s = ctx->state;
    const nnf_buf *x = in[1 - s->v_input], *v = in[s->v_input];
    if (x->numel != s->numel[0] || v->numel != s->numel[1] || out[0]->numel != s->numel[2])
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: shapes differ from the plan", s->name);
    nnf_nchwc_channel_binary(s->op, x->data, v->data, out[0]->data, s->n, s->cb, s->hw,
                             s->v_per_image, s->v_input == 0, s->isa, ctx->pool);
    return NNF_OK;
}

nnf_status nnf_plan_nchwc_binary(NNF_PLAN_ARGS) {
    const nnf_tinfo *y = &out[0];
    if (!known_f32(&in[0], 4) || !known_f32(&in[1], 4) || !known_f32(y, 4))
        return NNF_OK;
    const int64_t *yd = y->shape.dims;
    int v_input = nnf_nchwc_channel_operand(in[0].shape.dims, in[1].shape.dims, yd);
    int op = !strcmp(node->op_type, "Add")   ? NNF_EWB_ADD
             : !strcmp(node->op_type, "Sub") ? NNF_EWB_SUB
             : !strcmp(node->op_type, "Mul") ? NNF_EWB_MUL
                                             : -1;
    if (v_input < 0 || op < 0 || yd[1] % NNF_NCHWC_B)
        return NNF_OK;
    channel_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return plan_oom(node);
    s->op = op;
    s->v_input = v_input;
    s->n = (size_t)yd[0];
    s->cb = (size_t)yd[1] / NNF_NCHWC_B;
    s->hw = (size_t)(yd[2] * yd[3]);
    s->v_per_image = in[v_input].shape.dims[0] == yd[0] && yd[0] > 1;
    s->numel[0] = (size_t)nnf_shape_numel(&in[1 - v_input].shape);
    s->numel[1] = (size_t)nnf_shape_numel(&in[v_input].shape);
    s->numel[2] = (size_t)nnf_shape_numel(&y->shape);
    s->isa = blocked_isa();
    snprintf(s->name, sizeof s->name, "f32_%s_per_channel_nchwc8_%s", node->op_type,
             nnf_isa_name(s->isa));
    return bind(plan, s->name, channel_run, s, nnf_free);
}

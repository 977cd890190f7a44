/* The NCHWc8 internal operators (ops/nchwc.h): attributes, inference and
 * reference kernels. A reference kernel reorders its blocked operands to
 * NCHW with the reorders' portable tier, runs the ONNX op's reference kernel and
 * reorders the result back, so every blocked kernel is tested against the
 * same oracle as its NCHW counterpart. */
#include "ops/nchwc.h"

#include "base/alloc.h"
#include "kernels/nchwc.h"
#include "ops/op.h"

#include <string.h>

static const nnf_nchwc_params *params(const nnf_node *node) { return node->params; }

/* x must be a known-rank 4-D float32 tensor. */
static nnf_status check_4d(const nnf_node *node, const nnf_tinfo *x) {
    if (x->dtype != NNF_DTYPE_FLOAT32 || x->shape.rank != 4)
        return nnf_node_error(node, NNF_ERR_SHAPE, "input must be a 4-D float32 tensor");
    return NNF_OK;
}

nnf_status nnf_reorder_to_nchwc_infer(NNF_INFER_ARGS) {
    NNF_CHECK(check_4d(node, &in[0]));
    out[0].dtype = NNF_DTYPE_FLOAT32;
    out[0].shape = in[0].shape;
    if (out[0].shape.dims[1] >= 0)
        out[0].shape.dims[1] = nnf_nchwc_round(out[0].shape.dims[1]);
    out[0].shape.dim_names[1] = NULL;
    return NNF_OK;
}

/* [N, C8, H, W] blocked -> [N, c, H, W] with c <= C8 channels. */
static nnf_status check_blocked_channels(const nnf_node *node, const nnf_shape *x, int64_t c) {
    if (c < 1 || (x->dims[1] >= 0 && (x->dims[1] % 8 || nnf_nchwc_round(c) != x->dims[1])))
        return nnf_node_error(node, NNF_ERR_SHAPE, "a blocked input of %lld channels cannot hold %lld",
                              (long long)x->dims[1], (long long)c);
    return NNF_OK;
}

nnf_status nnf_reorder_from_nchwc_infer(NNF_INFER_ARGS) {
    NNF_CHECK(check_4d(node, &in[0]));
    NNF_CHECK(check_blocked_channels(node, &in[0].shape, params(node)->channels));
    out[0].dtype = NNF_DTYPE_FLOAT32;
    out[0].shape = in[0].shape;
    out[0].shape.dims[1] = params(node)->channels;
    return NNF_OK;
}

nnf_status nnf_nchwc_global_pool_infer(NNF_INFER_ARGS) {
    NNF_CHECK(nnf_reorder_from_nchwc_infer(node, in, out));
    out[0].shape.dims[2] = out[0].shape.dims[3] = 1;
    out[0].shape.dim_names[2] = out[0].shape.dim_names[3] = NULL;
    return NNF_OK;
}

/* NCHW [N, C, H, W] as the channel-last layout of out_group: [N, C / G,
 * H, W, G], or [N, H, W, C] (out_nhwc). */
static nnf_status cl_shape(const nnf_node *node, nnf_shape *s) {
    const nnf_nchwc_params *p = params(node);
    nnf_shape t = *s;
    int64_t g = p->out_group, c = t.dims[1];
    if (t.rank != 4 || g <= 0 || c < 0 || c % g || (p->out_nhwc && g != c))
        return nnf_node_error(node, NNF_ERR_SHAPE, "%lld output channels are not groups of %lld",
                              (long long)c, (long long)g);
    if (p->out_nhwc) {
        int from[4] = {0, 2, 3, 1};
        for (int d = 0; d < 4; d++) {
            s->dims[d] = t.dims[from[d]];
            s->dim_names[d] = t.dim_names[from[d]];
        }
        return NNF_OK;
    }
    s->rank = 5;
    s->dims[1] = c / g;
    s->dims[4] = g;
    s->dim_names[1] = s->dim_names[4] = NULL;
    return NNF_OK;
}

/* The Conv the node stands for, seen in NCHW: input 0 with the weight's
 * channel count, residual (if any) unblocked; output channels rounded up
 * unless out_plain, channel-last when out_group. */
nnf_status nnf_nchwc_conv_infer(NNF_INFER_ARGS) {
    const nnf_nchwc_params *p = params(node);
    NNF_CHECK(check_4d(node, &in[0]));
    if (in[1].shape.rank != 4)
        return nnf_node_error(node, NNF_ERR_SHAPE, "the weight must be 4-D");
    nnf_tinfo t[4];
    int n = node->n_inputs < 4 ? node->n_inputs : 4;
    memcpy(t, in, (size_t)n * sizeof t[0]);
    int64_t c = in[1].shape.dims[1] * p->conv.group, oc = in[1].shape.dims[0];
    if (p->in_blocked) {
        NNF_CHECK(check_blocked_channels(node, &in[0].shape, c));
        t[0].shape.dims[1] = c;
        t[0].data = NULL;
    }
    if (p->conv.residual_input >= 0 && p->conv.residual_input < n) {
        NNF_CHECK(check_blocked_channels(node, &in[p->conv.residual_input].shape, oc));
        t[p->conv.residual_input].shape.dims[1] = oc;
        t[p->conv.residual_input].data = NULL;
    }
    NNF_CHECK(nnf_conv_infer(node, t, out));
    if (!p->out_plain && out[0].shape.rank == 4 && out[0].shape.dims[1] >= 0)
        out[0].shape.dims[1] = nnf_nchwc_round(out[0].shape.dims[1]);
    if (p->out_plain && p->out_group)
        NNF_CHECK(cl_shape(node, &out[0].shape));
    return NNF_OK;
}

double nnf_nchwc_conv_cost(NNF_COST_ARGS) {
    double full = nnf_conv_cost(node, in, out);
    int64_t oc = in[1].shape.rank == 4 ? in[1].shape.dims[0] : -1;
    return oc > 0 ? full * (double)oc / (double)nnf_nchwc_round(oc) : full;
}

/* ---- reference kernels ------------------------------------------------- */

/* Blocked <-> plain through the reorders' portable tier (kernels/nchwc.h),
 * the one implementation of the layout; test_nchwc checks it against loops. */
static void unblock(const float *x, float *y, int64_t n, int64_t c, int64_t hw, nnf_kctx *ctx) {
    nnf_nchwc_to_nchw(x, y, (size_t)n, (size_t)c, (size_t)hw, NNF_ISA_SCALAR, ctx->pool);
}

static void block(const float *x, float *y, int64_t n, int64_t c, int64_t hw, nnf_kctx *ctx) {
    nnf_nchwc_from_nchw(x, y, (size_t)n, (size_t)c, (size_t)hw, NNF_ISA_SCALAR, ctx->pool);
}

/* A new float buffer of a 4-D buffer's geometry with c channels (a plain
 * twin of a blocked operand, or the blocked output of a ConvPwDw's first
 * conv); its size is checked for overflow. */
static nnf_status plain_like(const nnf_node *node, const nnf_buf *b, int64_t c, nnf_buf *out) {
    *out = *b;
    out->dims[1] = c;
    size_t bytes = sizeof(float);
    for (int d = 0; d < 4; d++)
        if (out->dims[d] < 0 || !nnf_mul_size(bytes, (size_t)out->dims[d], &bytes))
            return nnf_node_error(node, NNF_ERR_SHAPE, "an operand of %lld channels is too large",
                                  (long long)c);
    out->numel = bytes / sizeof(float);
    if (!(out->data = nnf_malloc(bytes ? bytes : 1)))
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY,
                              "out of memory for a reference kernel's operand");
    return NNF_OK;
}

static nnf_status check_buf_4d(const nnf_node *node, const nnf_buf *b, int blocked, int64_t c) {
    if (!b || b->dtype != NNF_DTYPE_FLOAT32 || b->rank != 4 || (blocked && b->dims[1] != nnf_nchwc_round(c)) ||
        (!blocked && b->dims[1] != c))
        return nnf_node_error(node, NNF_ERR_SHAPE, "operand is not a %s float32 tensor of %lld channels",
                              blocked ? "blocked" : "4-D", (long long)c);
    return NNF_OK;
}

nnf_status nnf_reorder_to_nchwc_ref(NNF_KERNEL_ARGS) {
    const nnf_buf *x = in[0];
    NNF_CHECK(check_buf_4d(node, x, 0, x->dims[1]));
    block(x->data, out[0]->data, x->dims[0], x->dims[1], x->dims[2] * x->dims[3], ctx);
    return NNF_OK;
}

nnf_status nnf_reorder_from_nchwc_ref(NNF_KERNEL_ARGS) {
    const nnf_buf *x = in[0];
    int64_t c = params(node)->channels;
    NNF_CHECK(check_buf_4d(node, x, 1, c));
    unblock(x->data, out[0]->data, x->dims[0], c, x->dims[2] * x->dims[3], ctx);
    return NNF_OK;
}

/* Run the NCHW reference `ref` with operands `blocked_in` (indices into in,
 * -1 ends) unblocked to their channel counts `chans`, and block output 0
 * (out_c channels) unless out_plain. */
static nnf_status wrap_ref(const nnf_node *node, nnf_buf *const *in, nnf_buf *const *out, nnf_kctx *ctx,
                           nnf_kernel_fn ref, const int *blocked_in, const int64_t *chans, int64_t out_c,
                           int out_plain) {
    nnf_buf tmp_in[4], tmp_out;
    nnf_buf *pin[64], *pout[1] = {out[0]};
    int n = node->n_inputs < 64 ? node->n_inputs : 64, made = 0;
    nnf_status st = NNF_OK;
    memcpy(pin, in, (size_t)n * sizeof pin[0]);
    memset(&tmp_out, 0, sizeof tmp_out);
    for (int k = 0; k < 4 && blocked_in[k] >= 0; k++) {
        const nnf_buf *b = in[blocked_in[k]];
        if ((st = check_buf_4d(node, b, 1, chans[k])) != NNF_OK ||
            (st = plain_like(node, b, chans[k], &tmp_in[k])) != NNF_OK)
            goto done;
        made = k + 1;
        unblock(b->data, tmp_in[k].data, b->dims[0], chans[k], b->dims[2] * b->dims[3], ctx);
        pin[blocked_in[k]] = &tmp_in[k];
    }
    if (!out_plain) {
        if ((st = check_buf_4d(node, out[0], 1, out_c)) != NNF_OK ||
            (st = plain_like(node, out[0], out_c, &tmp_out)) != NNF_OK)
            goto done;
        pout[0] = &tmp_out;
    }
    if ((st = ref(node, pin, pout, ctx)) == NNF_OK && !out_plain)
        block(tmp_out.data, out[0]->data, out[0]->dims[0], out_c, out[0]->dims[2] * out[0]->dims[3], ctx);
done:
    for (int k = 0; k < made; k++)
        nnf_free(tmp_in[k].data);
    nnf_free(out_plain ? NULL : tmp_out.data);
    return st;
}

nnf_status nnf_nchwc_conv_ref(NNF_KERNEL_ARGS) {
    const nnf_nchwc_params *p = params(node);
    if (!in[1] || in[1]->rank != 4)
        return nnf_node_error(node, NNF_ERR_SHAPE, "the weight must be 4-D");
    int64_t c = in[1]->dims[1] * p->conv.group, oc = in[1]->dims[0];
    int idx[3] = {-1, -1, -1}, k = 0;
    int64_t ch[2] = {0};
    if (p->in_blocked) {
        idx[k] = 0;
        ch[k++] = c;
    }
    if (p->conv.residual_input >= 0) {
        idx[k] = p->conv.residual_input;
        ch[k++] = oc;
    }
    if (!p->out_group)
        return wrap_ref(node, in, out, ctx, nnf_conv_ref, idx, ch, oc, p->out_plain);
    /* channel-last: the NCHW result, then each group's [G, HW] plane
     * transposed to [HW, G] */
    nnf_buf t = *out[0], *pt[1] = {&t};
    t.rank = 4;
    if (in[0]->rank != 4 || out[0]->rank != (p->out_nhwc ? 4 : 5))
        return nnf_node_error(node, NNF_ERR_SHAPE, "the output is not channel-last");
    int64_t n = out[0]->dims[0], hw = p->out_nhwc ? out[0]->dims[1] * out[0]->dims[2]
                                                  : out[0]->dims[2] * out[0]->dims[3];
    t.dims[0] = n;
    t.dims[1] = oc;
    t.dims[2] = p->out_nhwc ? out[0]->dims[1] : out[0]->dims[2];
    t.dims[3] = p->out_nhwc ? out[0]->dims[2] : out[0]->dims[3];
    if (!(t.data = nnf_malloc(out[0]->numel * sizeof(float) + 1)))
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY,
                              "out of memory for a reference kernel's operand");
    nnf_status st = wrap_ref(node, in, pt, ctx, nnf_conv_ref, idx, ch, oc, 1);
    const float *src = t.data;
    float *dst = out[0]->data;
    int64_t g = p->out_group;
    for (int64_t a = 0; st == NNF_OK && a < n * (oc / g); a++)
        for (int64_t i = 0; i < g; i++)
            for (int64_t q = 0; q < hw; q++)
                dst[(a * hw + q) * g + i] = src[(a * g + i) * hw + q];
    nnf_free(t.data);
    return st;
}

void nnf_nchwc_pw_dw_split(const nnf_node *node, nnf_node *n1, nnf_nchwc_params *p1, nnf_node *n2,
                           nnf_nchwc_params *p2) {
    const nnf_nchwc_params *p = params(node);
    *n1 = *n2 = *node;
    *p1 = *p2 = *p;
    p1->in_blocked = p2->in_blocked = 1;
    p1->out_plain = p2->out_plain = 0;
    p2->conv = p->dw;
    n1->params = p1;
    n2->params = p2;
    n1->n_inputs = n2->n_inputs = 3;
}

/* The pointwise conv's output (blocked), from its inputs in[0..2]. */
static nnf_status pw_dw_mid(const nnf_node *n1, const nnf_tinfo *in, nnf_tinfo *mid) {
    memset(mid, 0, sizeof *mid);
    mid->present = true;
    mid->shape.rank = -1;
    return nnf_nchwc_conv_infer(n1, in, mid);
}

nnf_status nnf_nchwc_pw_dw_infer(NNF_INFER_ARGS) {
    nnf_node n1, n2;
    nnf_nchwc_params p1, p2;
    nnf_nchwc_pw_dw_split(node, &n1, &p1, &n2, &p2);
    nnf_tinfo t[3];
    NNF_CHECK(pw_dw_mid(&n1, in, &t[0]));
    t[1] = in[3];
    t[2] = in[4];
    return nnf_nchwc_conv_infer(&n2, t, out);
}

double nnf_nchwc_pw_dw_cost(NNF_COST_ARGS) {
    nnf_node n1, n2;
    nnf_nchwc_params p1, p2;
    nnf_nchwc_pw_dw_split(node, &n1, &p1, &n2, &p2);
    nnf_tinfo t[3];
    if (pw_dw_mid(&n1, in, &t[0]) != NNF_OK) {
        nnf_error_clear();
        return 0;
    }
    t[1] = in[3];
    t[2] = in[4];
    return nnf_nchwc_conv_cost(&n1, in, &t[0]) + nnf_nchwc_conv_cost(&n2, t, out);
}

/* The two reference convs, the pointwise output in a buffer of its own. */
nnf_status nnf_nchwc_pw_dw_ref(NNF_KERNEL_ARGS) {
    nnf_node n1, n2;
    nnf_nchwc_params p1, p2;
    nnf_nchwc_pw_dw_split(node, &n1, &p1, &n2, &p2);
    if (!in[0] || in[0]->rank != 4 || !in[1] || in[1]->rank != 4)
        return nnf_node_error(node, NNF_ERR_SHAPE,
                              "the input and the pointwise weight must be 4-D");
    nnf_buf mid; /* the pointwise output: x's geometry, the blocked output channels */
    NNF_CHECK(plain_like(node, in[0], nnf_nchwc_round(in[1]->dims[0]), &mid));
    nnf_buf *pm = &mid, *in2[3] = {&mid, in[3], in[4]};
    nnf_status st = nnf_nchwc_conv_ref(&n1, in, &pm, ctx);
    if (st == NNF_OK)
        st = nnf_nchwc_conv_ref(&n2, in2, out, ctx);
    nnf_free(mid.data);
    return st;
}

/* Pools and Resize see the padded channels as channels: zero in, zero out. */
static nnf_status wrap_padded(NNF_KERNEL_ARGS, nnf_kernel_fn ref) {
    int idx[2] = {0, -1};
    int64_t ch[1] = {in[0]->dims[1]};
    return wrap_ref(node, in, out, ctx, ref, idx, ch, in[0]->dims[1], 0);
}

nnf_status nnf_nchwc_maxpool_ref(NNF_KERNEL_ARGS) { return wrap_padded(node, in, out, ctx, nnf_maxpool_ref); }
nnf_status nnf_nchwc_avgpool_ref(NNF_KERNEL_ARGS) { return wrap_padded(node, in, out, ctx, nnf_avgpool_ref); }
nnf_status nnf_nchwc_resize_ref(NNF_KERNEL_ARGS) { return wrap_padded(node, in, out, ctx, nnf_resize_ref); }

static nnf_status global_ref(NNF_KERNEL_ARGS, nnf_kernel_fn ref) {
    int idx[2] = {0, -1};
    int64_t ch[1] = {params(node)->channels};
    return wrap_ref(node, in, out, ctx, ref, idx, ch, ch[0], 1);
}

nnf_status nnf_nchwc_global_avgpool_ref(NNF_KERNEL_ARGS) {
    return global_ref(node, in, out, ctx, nnf_global_avgpool_ref);
}
nnf_status nnf_nchwc_global_maxpool_ref(NNF_KERNEL_ARGS) {
    return global_ref(node, in, out, ctx, nnf_global_maxpool_ref);
}

int nnf_nchwc_channel_operand(const int64_t *a, const int64_t *b, const int64_t *y) {
    const int64_t *in[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        const int64_t *x = in[1 - k], *v = in[k];
        if (!memcmp(x, y, 4 * sizeof(int64_t)) && y[2] * y[3] > 1 && (v[0] == 1 || v[0] == y[0]) &&
            v[1] == y[1] && v[2] == 1 && v[3] == 1)
            return k;
    }
    return -1;
}

/* Add / Sub / Mul with a per-channel operand: both operands and the output
 * at their padded channel counts (zero op zero is zero in the padding
 * lanes), through the ONNX op's reference kernel, whose broadcasting takes
 * the [N or 1, C8, 1, 1] operand. */
nnf_status nnf_nchwc_binary_ref(NNF_KERNEL_ARGS) {
    if (!in[0] || !in[1] || in[0]->rank != 4 || in[1]->rank != 4 || out[0]->rank != 4)
        return nnf_node_error(node, NNF_ERR_SHAPE, "a blocked %s takes 4-D operands",
                              node->op_type);
    int idx[3] = {0, 1, -1};
    int64_t ch[2] = {in[0]->dims[1], in[1]->dims[1]};
    return wrap_ref(node, in, out, ctx, nnf_binary_ref, idx, ch, out[0]->dims[1], 0);
}

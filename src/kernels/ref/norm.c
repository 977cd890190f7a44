/* Reference normalisation kernels, float32. Statistics are accumulated in
 * double (two passes: mean, then centred variance), which makes these the
 * accurate side of any comparison with a single-pass float kernel. */
#include "ops/norm.h"
#include "ops/op.h"

#include <math.h>
#include <string.h>

static nnf_status check_f32(const nnf_node *node, nnf_buf *const *in, int n) {
    for (int i = 0; i < n && i < node->n_inputs; i++)
        if (in[i] && in[i]->dtype != NNF_DTYPE_FLOAT32)
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input %d has dtype %s; the kernel takes float32",
                                  i, nnf_dtype_name(in[i]->dtype));
    return NNF_OK;
}

static const nnf_buf *opt_buf(const nnf_node *node, nnf_buf *const *in, int i) {
    return i < node->n_inputs ? in[i] : NULL;
}

/* Mean and 1/sqrt(var + eps) of n values. */
static void moments(const float *x, size_t n, float eps, double *mean_out, double *inv_std_out) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    double mean = n ? s / (double)n : 0.0, v = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - mean;
        v += d * d;
    }
    v = n ? v / (double)n : 0.0;
    *mean_out = mean;
    *inv_std_out = 1.0 / sqrt(v + (double)eps);
}

/* ---- BatchNormalization ---------------------------------------------------- */

typedef struct affine_job {
    const float *x;
    float *y;
    const float *a, *b; /* per channel: y = x * a[c] + b[c] */
    size_t plane, c;
} affine_job;

static void affine_plane(void *ctx, size_t i) {
    const affine_job *j = ctx;
    size_t c = i % j->c;
    const float *x = j->x + i * j->plane;
    float *y = j->y + i * j->plane;
    float a = j->a[c], b = j->b[c];
    for (size_t k = 0; k < j->plane; k++)
        y[k] = x[k] * a + b;
}

nnf_status nnf_batchnorm_ref(NNF_KERNEL_ARGS) {
    const nnf_norm_params *p = node->params;
    const nnf_buf *x = in[0], *y = out[0];
    float *ab = NULL;
    nnf_status st = check_f32(node, in, 5);
    if (st != NNF_OK)
        goto fail;
    if (x->rank < 2 || y->numel != x->numel) {
        st = nnf_node_error(node, NNF_ERR_SHAPE, "input needs rank >= 2 and the output its shape");
        goto fail;
    }
    size_t c = (size_t)x->dims[1];
    for (int i = 1; i < 5; i++)
        if (in[i]->numel != c) {
            st = nnf_node_error(node, NNF_ERR_SHAPE, "input %d has %zu elements for %zu channels", i,
                                in[i]->numel, c);
            goto fail;
        }
    ab = nnf_calloc(2 * c + 1, sizeof *ab);
    if (!ab) {
        st = nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory");
        goto fail;
    }
    const float *scale = in[1]->data, *bias = in[2]->data, *mean = in[3]->data, *var = in[4]->data;
    for (size_t k = 0; k < c; k++) {
        ab[k] = scale[k] / sqrtf(var[k] + p->epsilon);
        ab[c + k] = bias[k] - mean[k] * ab[k];
    }
    size_t planes = (size_t)x->dims[0] * c;
    affine_job j = {.x = x->data, .y = y->data, .a = ab, .b = ab + c, .plane = planes ? x->numel / planes : 0,
                    .c = c};
    nnf_parallel_for(ctx->pool, planes, affine_plane, &j);
fail:
    nnf_free(ab);
    return st;
}

/* ---- InstanceNormalization / GroupNormalization ---------------------------- */

typedef struct group_job {
    const float *x, *scale, *bias;
    float *y;
    float eps;
    size_t c, groups, plane; /* plane = spatial elements per channel */
    int per_channel;         /* scale/bias indexed by channel (else by group) */
} group_job;

static void group_norm_one(void *ctx, size_t i) {
    const group_job *j = ctx;
    size_t cpg = j->c / j->groups, g = i % j->groups, len = cpg * j->plane;
    const float *x = j->x + i * len;
    float *y = j->y + i * len;
    double mean, inv;
    moments(x, len, j->eps, &mean, &inv);
    for (size_t k = 0; k < cpg; k++) {
        size_t pi = j->per_channel ? g * cpg + k : g;
        double a = j->scale[pi] * inv, b = j->bias[pi] - mean * a;
        for (size_t e = 0; e < j->plane; e++)
            y[k * j->plane + e] = (float)(x[k * j->plane + e] * a + b);
    }
}

static nnf_status group_run(const nnf_node *node, nnf_buf *const *in, nnf_buf *const *out, nnf_kctx *ctx,
                            size_t groups, int per_channel) {
    const nnf_norm_params *p = node->params;
    const nnf_buf *x = in[0];
    NNF_CHECK(check_f32(node, in, 3));
    if (x->rank < 3 || out[0]->numel != x->numel)
        return nnf_node_error(node, NNF_ERR_SHAPE, "input needs rank >= 3 and the output its shape");
    size_t c = (size_t)x->dims[1], n = (size_t)x->dims[0];
    if (!groups || c % groups)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%zu channels do not split into %zu groups", c, groups);
    size_t want = per_channel ? c : groups;
    if (in[1]->numel != want || in[2]->numel != want)
        return nnf_node_error(node, NNF_ERR_SHAPE, "scale and bias need %zu elements", want);
    group_job j = {.x = x->data, .scale = in[1]->data, .bias = in[2]->data, .y = out[0]->data,
                   .eps = p->epsilon, .c = c, .groups = groups,
                   .plane = n && c ? x->numel / (n * c) : 0, .per_channel = per_channel};
    nnf_parallel_for(ctx->pool, n * groups, group_norm_one, &j);
    return NNF_OK;
}

nnf_status nnf_instancenorm_ref(NNF_KERNEL_ARGS) {
    if (in[0]->rank < 2)
        return nnf_node_error(node, NNF_ERR_SHAPE, "input needs rank >= 3");
    return group_run(node, in, out, ctx, (size_t)in[0]->dims[1], 1);
}

nnf_status nnf_groupnorm_ref(NNF_KERNEL_ARGS) {
    const nnf_norm_params *p = node->params;
    return group_run(node, in, out, ctx, (size_t)p->num_groups, p->per_channel);
}

/* ---- LayerNormalization ---------------------------------------------------- */

typedef struct layer_job {
    const float *x, *scale, *bias;
    float *y, *mean, *inv_std;
    float eps;
    size_t inner;
} layer_job;

static void layer_row(void *ctx, size_t r) {
    const layer_job *j = ctx;
    const float *x = j->x + r * j->inner;
    float *y = j->y + r * j->inner;
    double mean, inv;
    moments(x, j->inner, j->eps, &mean, &inv);
    for (size_t k = 0; k < j->inner; k++) {
        float v = (float)((x[k] - mean) * inv) * j->scale[k];
        y[k] = j->bias ? v + j->bias[k] : v;
    }
    if (j->mean)
        j->mean[r] = (float)mean;
    if (j->inv_std)
        j->inv_std[r] = (float)inv;
}

/* Expand t (numpy-broadcastable to dims[0..rank)) into a dense array of
 * prod(dims) elements, or return t's data when it already is one. */
static nnf_status expand_trailing(const nnf_node *node, const nnf_buf *t, const int64_t *dims, int rank,
                                  size_t count, const float **out, float **owned) {
    *owned = NULL;
    if (t->numel == count) {
        *out = t->data;
        return NNF_OK;
    }
    if (t->rank > rank)
        return nnf_node_error(node, NNF_ERR_SHAPE, "scale/bias rank exceeds the normalised shape");
    int64_t st[NNF_MAX_RANK] = {0}, s = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        int a = rank - t->rank + i;
        if (t->dims[i] != 1 && t->dims[i] != dims[a])
            return nnf_node_error(node, NNF_ERR_SHAPE, "scale/bias does not broadcast to the normalised shape");
        st[a] = t->dims[i] == 1 ? 0 : s;
        s *= t->dims[i];
    }
    float *e = nnf_malloc((count ? count : 1) * sizeof *e);
    if (!e)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory");
    const float *src = t->data;
    for (size_t k = 0; k < count; k++) {
        size_t rem = k;
        int64_t off = 0;
        for (int a = rank - 1; a >= 0; a--) {
            off += (int64_t)(rem % (size_t)dims[a]) * st[a];
            rem /= (size_t)dims[a];
        }
        e[k] = src[off];
    }
    *out = e;
    *owned = e;
    return NNF_OK;
}

nnf_status nnf_layernorm_ref(NNF_KERNEL_ARGS) {
    const nnf_norm_params *p = node->params;
    const nnf_buf *x = in[0], *b = opt_buf(node, in, 2);
    float *own_s = NULL, *own_b = NULL;
    int axis;
    nnf_status st = check_f32(node, in, 3);
    if (st != NNF_OK)
        goto fail;
    if ((st = nnf_norm_axis(node, p->axis, x->rank, &axis)) != NNF_OK)
        goto fail;
    size_t inner = 1;
    for (int i = axis; i < x->rank; i++)
        inner *= (size_t)x->dims[i];
    size_t rows = inner ? x->numel / inner : 0;
    layer_job j = {.x = x->data, .y = out[0]->data, .eps = p->epsilon, .inner = inner};
    if ((st = expand_trailing(node, in[1], x->dims + axis, x->rank - axis, inner, &j.scale, &own_s)) != NNF_OK)
        goto fail;
    if (b && (st = expand_trailing(node, b, x->dims + axis, x->rank - axis, inner, &j.bias, &own_b)) != NNF_OK)
        goto fail;
    for (int k = 1; k < node->n_outputs && k < 3; k++) {
        if (!out[k])
            continue;
        if (out[k]->numel != rows || out[k]->dtype != NNF_DTYPE_FLOAT32) {
            st = nnf_node_error(node, NNF_ERR_SHAPE, "output %d must hold one float per normalised row", k);
            goto fail;
        }
        if (k == 1)
            j.mean = out[k]->data;
        else
            j.inv_std = out[k]->data;
    }
    nnf_parallel_for(ctx->pool, rows, layer_row, &j);
fail:
    nnf_free(own_s);
    nnf_free(own_b);
    return st;
}

/* ---- LpNormalization ------------------------------------------------------- */

typedef struct lp_job {
    const float *x;
    float *y;
    size_t axis_len, inner; /* inner = elements after the axis */
    int p;
} lp_job;

void nnf_lpnorm_line(const float *x, float *y, size_t n, size_t ld, int p) {
    double s = 0.0;
    for (size_t k = 0; k < n; k++) {
        double v = x[k * ld];
        s += p == 1 ? fabs(v) : v * v;
    }
    double norm = p == 1 ? s : sqrt(s);
    /* a zero vector stays zero rather than becoming NaN; a NaN norm (a NaN
     * in the line) gives NaNs (onnxruntime) */
    for (size_t k = 0; k < n; k++)
        y[k * ld] = norm != 0.0 ? (float)(x[k * ld] / norm) : 0.0f;
}

static void lp_outer(void *ctx, size_t o) {
    const lp_job *j = ctx;
    const float *x = j->x + o * j->axis_len * j->inner;
    float *y = j->y + o * j->axis_len * j->inner;
    for (size_t i = 0; i < j->inner; i++)
        nnf_lpnorm_line(x + i, y + i, j->axis_len, j->inner, j->p);
}

nnf_status nnf_lpnorm_ref(NNF_KERNEL_ARGS) {
    const nnf_norm_params *p = node->params;
    const nnf_buf *x = in[0];
    NNF_CHECK(check_f32(node, in, 1));
    int axis;
    NNF_CHECK(nnf_norm_axis(node, p->axis, x->rank, &axis));
    size_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++)
        outer *= (size_t)x->dims[i];
    for (int i = axis + 1; i < x->rank; i++)
        inner *= (size_t)x->dims[i];
    lp_job j = {.x = x->data, .y = out[0]->data, .axis_len = (size_t)x->dims[axis], .inner = inner, .p = p->p};
    nnf_parallel_for(ctx->pool, outer, lp_outer, &j);
    return NNF_OK;
}

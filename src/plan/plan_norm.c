/* Plans for LayerNormalization (normalised axes trailing, dense scale/bias),
 * inference BatchNormalization (constant statistics folded at plan time
 * into one scale and shift per channel, as the reference computes them, so
 * both give the same floats), Instance/GroupNormalization (each group's
 * channels normalised together, a group per task) and LpNormalization
 * (rows, or positions of an inner axis side by side). Other forms keep the
 * reference kernel. */
#include "kernels/eltwise_fast.h"
#include "kernels/stream.h"

#include "base/alloc.h"
#include "base/cpu.h"
#include "ops/norm.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#define GRAIN_FLOATS 16384

typedef struct ln_state {
    const nnf_ew_kernels *k;
    float eps;
    size_t rows, n; /* rows: 0 when the leading extents are symbolic (the run's) */
    int axis;
    char name[48];
} ln_state;

typedef struct ln_job {
    const ln_state *s;
    const float *x, *scale, *bias;
    float *y, *mean, *inv;
} ln_job;

static void ln_rows(void *p, size_t first, size_t count) {
    const ln_job *j = p;
    size_t n = j->s->n;
    for (size_t r = first; r < first + count; r++)
        j->s->k->layernorm(j->x + r * n, j->y + r * n, n, j->scale, j->bias, j->s->eps,
                           j->mean ? j->mean + r : NULL, j->inv ? j->inv + r : NULL);
}

/* The run's rows of n: the plan's, or (symbolic) x's leading extents, its
 * normalised ones checked against n. */
static size_t ln_rows_of(const ln_state *s, const nnf_buf *x) {
    if (s->rows)
        return s->rows;
    size_t n = 1;
    for (int i = s->axis; i < x->rank; i++)
        n *= (size_t)x->dims[i];
    return s->axis < x->rank && n == s->n ? x->numel / s->n : SIZE_MAX;
}

static nnf_status ln_run(NNF_KERNEL_ARGS) {
    const ln_state *s = ctx->state;
    const nnf_buf *x = in[0], *b = node->n_inputs > 2 ? in[2] : NULL;
    size_t rows = ln_rows_of(s, x);
    if (x->dtype != NNF_DTYPE_FLOAT32 || rows == SIZE_MAX || x->numel != rows * s->n ||
        out[0]->numel != x->numel || !in[1] || in[1]->numel != s->n ||
        in[1]->dtype != NNF_DTYPE_FLOAT32 ||
        (b && (b->numel != s->n || b->dtype != NNF_DTYPE_FLOAT32)))
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: shapes do not match the plan", s->name);
    ln_job j = {s, x->data, in[1]->data, b ? b->data : NULL, out[0]->data, NULL, NULL};
    for (int k = 1; k < node->n_outputs && k < 3; k++) {
        if (!out[k])
            continue;
        if (out[k]->numel != rows || out[k]->dtype != NNF_DTYPE_FLOAT32)
            return nnf_node_error(node, NNF_ERR_SHAPE, "%s: output %d must hold one float per row",
                                  s->name, k);
        if (k == 1)
            j.mean = out[k]->data;
        else
            j.inv = out[k]->data;
    }
    nnf_ew_parallel_ranges(ctx->pool, rows, s->n >= GRAIN_FLOATS ? 1 : GRAIN_FLOATS / s->n, ln_rows,
                           &j);
    return NNF_OK;
}

static void state_free(void *p) {
    nnf_free(p);
}

static int f32_dense(const nnf_tinfo *t, int64_t n) {
    return t->present && t->dtype == NNF_DTYPE_FLOAT32 && nnf_shape_known(&t->shape) &&
           nnf_shape_numel(&t->shape) == n;
}

/* NNF_OP_SYM: the normalised extents must be known at load; the leading
 * ones (a symbolic batch and sequence) may come from the run. */
nnf_status nnf_plan_layernorm(NNF_PLAN_ARGS) {
    const nnf_norm_params *p = node->params;
    const nnf_shape *sh = &in[0].shape;
    if (!p || in[0].dtype != NNF_DTYPE_FLOAT32 || sh->rank < 1 || p->axis < -sh->rank ||
        p->axis >= sh->rank)
        return NNF_OK;
    int axis = (int)(p->axis < 0 ? p->axis + sh->rank : p->axis);
    int64_t n = 1;
    for (int i = axis; i < sh->rank; i++) {
        if (sh->dims[i] < 0)
            return NNF_OK;
        n *= sh->dims[i];
    }
    bool known = nnf_shape_known(sh);
    if (n <= 0 || (known && nnf_shape_numel(sh) <= 0))
        return NNF_OK;
    /* scale/bias that broadcast (fewer elements) keep the reference's expansion */
    if (!f32_dense(&in[1], n) || (node->n_inputs > 2 && in[2].present && !f32_dense(&in[2], n)))
        return NNF_OK;
    ln_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a kernel plan");
    s->k = nnf_ew_kernels_for(nnf_cpu_isa());
    s->eps = p->epsilon;
    s->n = (size_t)n;
    s->rows = known ? (size_t)(nnf_shape_numel(sh) / n) : 0;
    s->axis = axis;
    snprintf(s->name, sizeof s->name, "f32_layernorm_%s", s->k->suffix);
    plan->name = s->name;
    plan->run = ln_run;
    plan->state = s;
    plan->free_state = state_free;
    plan->in_place_inputs = 1u; /* a row's last pass reads x[i], then writes y[i] */
    return NNF_OK;
}

/* ---- BatchNormalization ------------------------------------------------------------ */

typedef struct bn_state {
    const nnf_ew_kernels *k;
    size_t c;
    float *a, *b; /* y = x * a[c] + b[c]; one allocation, a first */
    char name[48];
} bn_state;

static void bn_free(void *p) {
    bn_state *s = p;
    if (!s)
        return;
    nnf_free(s->a);
    nnf_free(s);
}

static nnf_status bn_run(NNF_KERNEL_ARGS) {
    const bn_state *s = ctx->state;
    const nnf_buf *x = in[0];
    if (x->dtype != NNF_DTYPE_FLOAT32 || x->rank < 2 || (size_t)x->dims[1] != s->c ||
        out[0]->numel != x->numel)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: shapes do not match the plan", s->name);
    size_t planes = (size_t)x->dims[0] * s->c;
    if (planes == 0)
        return NNF_OK;
    nnf_ew_affine_run(s->k, x->data, out[0]->data, x->numel, x->numel / planes, s->c, s->a, s->b,
                      ctx->pool);
    return NNF_OK;
}

nnf_status nnf_plan_batchnorm(NNF_PLAN_ARGS) {
    const nnf_norm_params *p = node->params;
    const nnf_shape *sh = &in[0].shape;
    if (!p || node->n_inputs != 5 || in[0].dtype != NNF_DTYPE_FLOAT32 || !nnf_shape_known(sh) ||
        sh->rank < 2 || nnf_shape_numel(sh) <= 0)
        return NNF_OK;
    for (int k = 1; k < node->n_outputs; k++)
        if (out[k].present)
            return NNF_OK;
    int64_t c = sh->dims[1];
    for (int k = 1; k < 5; k++)
        if (!f32_dense(&in[k], c) || !in[k].data)
            return NNF_OK;
    bn_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a kernel plan");
    s->a = nnf_calloc(2 * (size_t)c, sizeof(float));
    if (!s->a) {
        bn_free(s);
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a kernel plan");
    }
    s->b = s->a + c;
    s->c = (size_t)c;
    const float *scale = in[1].data, *bias = in[2].data, *mean = in[3].data, *var = in[4].data;
    for (int64_t k = 0; k < c; k++) {
        s->a[k] = scale[k] / sqrtf(var[k] + p->epsilon);
        s->b[k] = bias[k] - mean[k] * s->a[k];
    }
    s->k = nnf_ew_kernels_for(nnf_cpu_isa());
    snprintf(s->name, sizeof s->name, "f32_batchnorm_%s", s->k->suffix);
    plan->name = s->name;
    plan->run = bn_run;
    plan->state = s;
    plan->free_state = bn_free;
    plan->in_place_inputs = 1u; /* element-wise */
    return NNF_OK;
}

/* ---- InstanceNormalization / GroupNormalization -------------------------------------- */

typedef struct gn_state {
    const nnf_ew_kernels *k;
    float eps;
    size_t n, c, groups, plane;
    size_t step; /* scale/bias: 1 per channel, 0 per group */
    char name[48];
} gn_state;

typedef struct gn_job {
    const gn_state *s;
    const float *x, *scale, *bias;
    float *y;
    bool stream;
} gn_job;

static void gn_group(void *p, size_t i) {
    const gn_job *j = p;
    const gn_state *s = j->s;
    size_t cpg = s->c / s->groups, g = i % s->groups, len = cpg * s->plane;
    /* per channel: the group's first channel's pair; per group: the group's */
    size_t first = s->step ? g * cpg : g;
    float *y = j->y + i * len, *buf = NULL;
    /* a streamed output (kernels/stream.h): the group normalized into a
     * buffer in L2 and copied out (written directly when it does not fit) */
    if (j->stream && len * sizeof *y <= nnf_cpu_get()->l2 / 2)
        buf = nnf_thread_scratch(NNF_SCRATCH_STREAM, len);
    s->k->groupnorm(j->x + i * len, buf ? buf : y, cpg, s->plane, j->scale + first, j->bias + first,
                    s->step, s->eps);
    if (buf) {
        nnf_stream_copy(y, buf, len * sizeof *y);
        nnf_stream_fence();
    }
}

static nnf_status gn_run(NNF_KERNEL_ARGS) {
    const gn_state *s = ctx->state;
    const nnf_buf *x = in[0];
    size_t pairs = s->step ? s->c : s->groups;
    if (x->dtype != NNF_DTYPE_FLOAT32 || x->numel != s->n * s->c * s->plane ||
        out[0]->numel != x->numel || in[1]->dtype != NNF_DTYPE_FLOAT32 ||
        in[2]->dtype != NNF_DTYPE_FLOAT32 || in[1]->numel != pairs || in[2]->numel != pairs)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: shapes do not match the plan", s->name);
    gn_job j = {s,
                x->data,
                in[1]->data,
                in[2]->data,
                out[0]->data,
                out[0]->data != x->data && nnf_stream_output(x->numel * sizeof(float))};
    nnf_parallel_for(ctx->pool, s->n * s->groups, gn_group, &j);
    return NNF_OK;
}

/* groups: the channels' split; step 1: scale/bias per channel, 0: per group */
static nnf_status plan_group(NNF_PLAN_ARGS, int64_t groups, size_t step, const char *what) {
    const nnf_norm_params *p = node->params;
    const nnf_shape *sh = &in[0].shape;
    if (!p || in[0].dtype != NNF_DTYPE_FLOAT32 || !nnf_shape_known(sh) || sh->rank < 3 ||
        nnf_shape_numel(sh) <= 0 || node->n_inputs < 3)
        return NNF_OK;
    int64_t c = sh->dims[1];
    if (groups < 1 || c % groups || !f32_dense(&in[1], step ? c : groups) ||
        !f32_dense(&in[2], step ? c : groups))
        return NNF_OK;
    gn_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a kernel plan");
    s->k = nnf_ew_kernels_for(nnf_cpu_isa());
    s->eps = p->epsilon;
    s->n = (size_t)sh->dims[0];
    s->c = (size_t)c;
    s->groups = (size_t)groups;
    s->plane = (size_t)(nnf_shape_numel(sh) / (sh->dims[0] * c));
    s->step = step;
    snprintf(s->name, sizeof s->name, "f32_%s_%s", what, s->k->suffix);
    plan->name = s->name;
    plan->run = gn_run;
    plan->state = s;
    plan->free_state = state_free;
    plan->in_place_inputs = 1u; /* a group's last pass reads x[i], then writes y[i] */
    return NNF_OK;
}

nnf_status nnf_plan_instancenorm(NNF_PLAN_ARGS) {
    const nnf_shape *sh = &in[0].shape;
    return plan_group(node, in, out, plan, sh->rank >= 2 ? sh->dims[1] : 0, 1, "instancenorm");
}

nnf_status nnf_plan_groupnorm(NNF_PLAN_ARGS) {
    const nnf_norm_params *p = node->params;
    return p ? plan_group(node, in, out, plan, p->num_groups, p->per_channel ? 1 : 0, "groupnorm")
             : NNF_OK;
}

/* ---- LpNormalization ------------------------------------------------------------------ */

#define LP_COLS 64 /* positions of an inner axis normalised side by side */

typedef struct lp_state {
    const nnf_ew_kernels *k;
    size_t outer, n, inner; /* lines of n values inner apart (1: rows) */
    int p;
    char name[48];
} lp_state;

typedef struct lp_job {
    const lp_state *s;
    const float *x;
    float *y;
} lp_job;

/* A norm whose float reciprocal x is scaled by; 0 where it would lose
 * digits (below 1e-30, a zero norm included: the line takes the reference's
 * division). A NaN or infinite norm scales by NaN or 0, as dividing does. */
static float lp_scale(double norm) {
    return norm >= 1e-30 || norm != norm ? (float)(1.0 / norm) : 0.0f;
}

/* Rows along the last axis: the tier's |x| or x * x sum, then x times the
 * norm's reciprocal (within an ulp of the reference's x / norm). */
static void lp_rows(void *p, size_t first, size_t count) {
    const lp_job *j = p;
    const lp_state *s = j->s;
    for (size_t r = first; r < first + count; r++) {
        const float *x = j->x + r * s->n;
        float *y = j->y + r * s->n;
        double sum = nnf_ew_row_sum(s->k, x, s->n, s->p == 1 ? NNF_SUM_ABS : NNF_SUM_SQUARE);
        float a = lp_scale(s->p == 1 ? sum : sqrt(sum));
        if (a == 0.0f)
            nnf_lpnorm_line(x, y, s->n, 1, s->p);
        else
            s->k->binary(NNF_EWB_MUL, NNF_EW_VS, x, &a, y, s->n);
    }
}

/* Along an inner axis: items of LP_COLS positions of one outer index, their
 * norms from the tier's column reduction, each line of positions scaled. */
static void lp_cols(void *p, size_t first, size_t count) {
    const lp_job *j = p;
    const lp_state *s = j->s;
    size_t blocks = (s->inner + LP_COLS - 1) / LP_COLS;
    float a[LP_COLS];
    for (size_t it = first; it < first + count; it++) {
        size_t o = it / blocks, c0 = it % blocks * LP_COLS;
        size_t cols = s->inner - c0 < LP_COLS ? s->inner - c0 : LP_COLS;
        const float *x = j->x + o * s->n * s->inner + c0;
        float *y = j->y + o * s->n * s->inner + c0;
        s->k->reduce_cols(x, s->n, s->inner, cols, s->p == 1 ? NNF_REDUCE_L1 : NNF_REDUCE_L2, a);
        int tiny = 0;
        for (size_t c = 0; c < cols; c++) {
            a[c] = lp_scale(a[c]);
            tiny |= a[c] == 0.0f;
        }
        if (!tiny) {
            for (size_t k = 0; k < s->n; k++)
                s->k->binary(NNF_EWB_MUL, NNF_EW_VV, x + k * s->inner, a, y + k * s->inner, cols);
            continue;
        }
        /* line by line (y may be x) */
        for (size_t c = 0; c < cols; c++) {
            if (a[c] == 0.0f)
                nnf_lpnorm_line(x + c, y + c, s->n, s->inner, s->p);
            else
                for (size_t k = 0; k < s->n; k++)
                    y[k * s->inner + c] = x[k * s->inner + c] * a[c];
        }
    }
}

static nnf_status lp_run(NNF_KERNEL_ARGS) {
    const lp_state *s = ctx->state;
    size_t numel = s->outer * s->n * s->inner;
    if (in[0]->dtype != NNF_DTYPE_FLOAT32 || in[0]->numel != numel || out[0]->numel != numel)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: shapes do not match the plan", s->name);
    lp_job j = {s, in[0]->data, out[0]->data};
    if (s->inner == 1) {
        nnf_ew_parallel_ranges(ctx->pool, s->outer, s->n >= GRAIN_FLOATS ? 1 : GRAIN_FLOATS / s->n,
                               lp_rows, &j);
    } else {
        size_t items = s->outer * ((s->inner + LP_COLS - 1) / LP_COLS);
        size_t per = s->n * LP_COLS;
        nnf_ew_parallel_ranges(ctx->pool, items, per >= GRAIN_FLOATS ? 1 : GRAIN_FLOATS / per,
                               lp_cols, &j);
    }
    return NNF_OK;
}

nnf_status nnf_plan_lpnorm(NNF_PLAN_ARGS) {
    const nnf_norm_params *p = node->params;
    const nnf_shape *sh = &in[0].shape;
    (void)out;
    if (!p || in[0].dtype != NNF_DTYPE_FLOAT32 || !nnf_shape_known(sh) || sh->rank < 1 ||
        nnf_shape_numel(sh) <= 0 || p->axis < -sh->rank || p->axis >= sh->rank ||
        (p->p != 1 && p->p != 2))
        return NNF_OK;
    int axis = (int)(p->axis < 0 ? p->axis + sh->rank : p->axis);
    lp_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a kernel plan");
    s->k = nnf_ew_kernels_for(nnf_cpu_isa());
    s->p = p->p;
    s->n = (size_t)sh->dims[axis];
    s->inner = 1;
    for (int i = axis + 1; i < sh->rank; i++)
        s->inner *= (size_t)sh->dims[i];
    s->outer = (size_t)nnf_shape_numel(sh) / (s->n * s->inner);
    snprintf(s->name, sizeof s->name, "f32_lpnorm%d_%s_%s", s->p,
             s->inner == 1 ? "lastaxis" : "inneraxis", s->k->suffix);
    plan->name = s->name;
    plan->run = lp_run;
    plan->state = s;
    plan->free_state = state_free;
    plan->in_place_inputs = 1u; /* a line is read whole (its norm) before it is written */
    return NNF_OK;
}

/* Plans for the element-wise, softmax, reduction and data-movement ops:
 * recognise the shapes the fast kernels cover (float32, the broadcast
 * patterns of nnf_ew_bcast_classify, softmax and reductions over the last
 * axes, transposes that reduce to a row copy or a batched 2-D transpose,
 * concatenation), record the tier's kernel table, and leave plan->run NULL
 * for everything else so the reference kernel runs. A plan's state is
 * read-only after planning. */
#include "kernels/eltwise_fast.h"

#include "base/alloc.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/tensor_common.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Work items per thread hand-off: rows or bytes adding up to about 64 KB. */
#define GRAIN_FLOATS 16384
#define GRAIN_BYTES (256 * 1024)

typedef struct ew_state {
    const nnf_ew_kernels *k;
    nnf_ew_unary u;  /* unary ops, Clip, Pow with a constant exponent */
    nnf_ew_binop op; /* binary ops */
    nnf_ew_bcast bc;
    int kind;       /* softmax: 0, 1 log, 2 hardmax; reduce: nnf_reduce_kind */
    size_t rows, n; /* softmax / reduce: rows of n */
    size_t inner;   /* softmax along an inner axis: n values inner apart (1: rows) */
    /* planned with shapes unknown at load (symbolic dims): the broadcast
     * pattern, or softmax's rows, come from the run's shapes */
    bool symbolic;
    int axis, coerce_2d; /* softmax, when symbolic */
    char name[64];
} ew_state;

static void state_free(void *p) {
    nnf_free(p);
}

static ew_state *state_new(const nnf_node *node, nnf_status *st) {
    ew_state *s = nnf_calloc(1, sizeof *s);
    *st =
        s ? NNF_OK : nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a kernel plan");
    if (s)
        s->k = nnf_ew_kernels_for(nnf_cpu_isa());
    return s;
}

static void plan_set(nnf_kernel_plan *plan, ew_state *s, nnf_kernel_fn run) {
    plan->name = s->name;
    plan->run = run;
    plan->state = s;
    plan->free_state = state_free;
}

static int f32_present(const nnf_tinfo *t) {
    return t->present && t->dtype == NNF_DTYPE_FLOAT32;
}

/* The reference kernel, for a symbolic plan whose run-time shapes its fast
 * kernel does not cover. */
static nnf_status run_reference(NNF_KERNEL_ARGS) {
    nnf_kctx ref = {.pool = ctx->pool};
    return node->op->ref(node, in, out, &ref);
}

static nnf_shape shape_of(const nnf_buf *b) {
    nnf_shape s = {.rank = b->rank};
    memcpy(s.dims, b->dims, sizeof(int64_t) * (size_t)b->rank);
    return s;
}

static int f32_known(const nnf_tinfo *t) {
    return t->present && t->dtype == NNF_DTYPE_FLOAT32 && nnf_shape_known(&t->shape) &&
           nnf_shape_numel(&t->shape) > 0;
}

static const char *unop_name(nnf_ew_unop op) {
    static const char *names[NNF_EWU_COUNT] = {
        "relu",     "leaky_relu", "clip",       "sigmoid",      "tanh",       "exp",
        "erf",      "gelu_erf",   "gelu_tanh",  "hard_sigmoid", "hard_swish", "sqrt",
        "neg",      "abs",        "reciprocal", "floor",        "ceil",       "round",
        "softsign", "square",     "pow_half",   "pow_int"};
    return op < NNF_EWU_COUNT ? names[op] : "?";
}

static nnf_status check_same_numel(const nnf_node *node, const ew_state *s, const nnf_buf *x,
                                   const nnf_buf *y) {
    if (x->dtype != NNF_DTYPE_FLOAT32 || y->dtype != NNF_DTYPE_FLOAT32 || x->numel != y->numel)
        return nnf_node_error(node, NNF_ERR_SHAPE,
                              "%s: input and output must be float32 of %zu elements", s->name,
                              y->numel);
    return NNF_OK;
}

/* ---- unary, Clip ---------------------------------------------------------------- */

static nnf_status unary_run(NNF_KERNEL_ARGS) {
    const ew_state *s = ctx->state;
    NNF_CHECK(check_same_numel(node, s, in[0], out[0]));
    if (!out[0]->numel) /* an empty run of a symbolic plan */
        return NNF_OK;
    nnf_ew_unary_run(s->k, &s->u, in[0]->data, out[0]->data, out[0]->numel, ctx->pool);
    return NNF_OK;
}

static int map_unop(const nnf_unary_params *p, nnf_ew_unary *u) {
    u->alpha = p->alpha;
    u->beta = p->beta;
    switch (p->op) {
    case NNF_UN_RELU: u->op = NNF_EWU_RELU; return 1;
    case NNF_UN_LEAKY_RELU: u->op = NNF_EWU_LEAKY_RELU; return 1;
    case NNF_UN_SIGMOID: u->op = NNF_EWU_SIGMOID; return 1;
    case NNF_UN_HARD_SIGMOID: u->op = NNF_EWU_HARD_SIGMOID; return 1;
    case NNF_UN_HARD_SWISH: u->op = NNF_EWU_HARD_SWISH; return 1;
    case NNF_UN_TANH: u->op = NNF_EWU_TANH; return 1;
    case NNF_UN_GELU: u->op = p->alpha != 0.0f ? NNF_EWU_GELU_TANH : NNF_EWU_GELU_ERF; return 1;
    case NNF_UN_ERF: u->op = NNF_EWU_ERF; return 1;
    case NNF_UN_EXP: u->op = NNF_EWU_EXP; return 1;
    case NNF_UN_SQRT: u->op = NNF_EWU_SQRT; return 1;
    case NNF_UN_RECIPROCAL: u->op = NNF_EWU_RECIPROCAL; return 1;
    case NNF_UN_NEG: u->op = NNF_EWU_NEG; return 1;
    case NNF_UN_ABS: u->op = NNF_EWU_ABS; return 1;
    case NNF_UN_FLOOR: u->op = NNF_EWU_FLOOR; return 1;
    case NNF_UN_CEIL: u->op = NNF_EWU_CEIL; return 1;
    case NNF_UN_ROUND: u->op = NNF_EWU_ROUND; return 1;
    case NNF_UN_SOFTSIGN: u->op = NNF_EWU_SOFTSIGN; return 1;
    default: return 0;
    }
}

nnf_status nnf_plan_unary(NNF_PLAN_ARGS) {
    const nnf_unary_params *p = node->params;
    nnf_ew_unary u;
    nnf_status st;
    /* element-wise over the run's element count: symbolic shapes too */
    if (!p || !f32_present(&in[0]) || out[0].dtype != NNF_DTYPE_FLOAT32 || !map_unop(p, &u) ||
        (nnf_shape_known(&in[0].shape) && !f32_known(&in[0])))
        return NNF_OK;
    ew_state *s = state_new(node, &st);
    if (!s)
        return st;
    s->u = u;
    snprintf(s->name, sizeof s->name, "f32_%s_%s", unop_name(u.op), s->k->suffix);
    plan_set(plan, s, unary_run);
    plan->in_place_inputs = 1u; /* element i read, then written */
    return NNF_OK;
}

/* A constant scalar bound, read as the reference reads it; 0 = not usable. */
static int clip_bound(const nnf_node *node, const nnf_tinfo *in, int k, float *v) {
    if (k >= node->n_inputs || !in[k].present)
        return 1;
    if (!in[k].data || in[k].dtype != NNF_DTYPE_FLOAT32 || !nnf_shape_known(&in[k].shape))
        return 0;
    int64_t n = nnf_shape_numel(&in[k].shape);
    if (n == 1)
        *v = *(const float *)in[k].data;
    return n <= 1;
}

nnf_status nnf_plan_clip(NNF_PLAN_ARGS) {
    const nnf_clip_params *p = node->params;
    nnf_status st;
    if (!p || !f32_known(&in[0]) || out[0].dtype != NNF_DTYPE_FLOAT32)
        return NNF_OK;
    float lo = p->min, hi = p->max;
    if (p->bounds_from_inputs && (!clip_bound(node, in, 1, &lo) || !clip_bound(node, in, 2, &hi)))
        return NNF_OK;
    ew_state *s = state_new(node, &st);
    if (!s)
        return st;
    s->u = (nnf_ew_unary){NNF_EWU_CLIP, lo, hi};
    snprintf(s->name, sizeof s->name, "f32_clip_%s", s->k->suffix);
    plan_set(plan, s, unary_run);
    plan->in_place_inputs = 1u;
    return NNF_OK;
}

/* ---- binary ----------------------------------------------------------------------- */

static nnf_status binary_run(NNF_KERNEL_ARGS) {
    const ew_state *s = ctx->state;
    nnf_ew_bcast bc = s->bc;
    if (s->symbolic && in[0] && in[1]) {
        if (!out[0]->numel)
            return NNF_OK;
        nnf_shape a = shape_of(in[0]), b = shape_of(in[1]), y = shape_of(out[0]);
        bc = nnf_ew_bcast_classify(&a, &b, &y);
        if (bc.kind == NNF_EWBC_NONE || (s->op == NNF_EWB_PRELU && bc.small_is_a))
            return run_reference(node, in, out, ctx);
    }
    if (!in[0] || !in[1] || out[0]->numel != bc.numel || out[0]->dtype != NNF_DTYPE_FLOAT32)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: operands do not match the plan", s->name);
    nnf_ew_binary_run(s->k, s->op, &bc, in[0]->data, in[1]->data, out[0]->data, ctx->pool);
    return NNF_OK;
}

static nnf_status pow_run(NNF_KERNEL_ARGS) {
    const ew_state *s = ctx->state;
    NNF_CHECK(check_same_numel(node, s, in[0], out[0]));
    nnf_ew_unary_run(s->k, &s->u, in[0]->data, out[0]->data, out[0]->numel, ctx->pool);
    return NNF_OK;
}

/* Pow with a constant scalar exponent of 2, 0.5 or another integer (GELU's
 * tanh form exports x^3) is a unary op. */
static int pow_unary(const nnf_tinfo *a, const nnf_tinfo *b, const nnf_tinfo *y, nnf_ew_unop *op,
                     float *n) {
    if (!b->present || !b->data || !nnf_shape_known(&b->shape) || nnf_shape_numel(&b->shape) != 1)
        return 0;
    /* Y is A's shape: known equal, or (symbolic dims) an exponent of no
     * higher rank than A's */
    if (nnf_shape_known(&a->shape) && nnf_shape_known(&y->shape)
            ? nnf_shape_numel(&a->shape) != nnf_shape_numel(&y->shape)
            : a->shape.rank < 0 || b->shape.rank > a->shape.rank)
        return 0;
    double e;
    if (b->dtype == NNF_DTYPE_FLOAT32)
        e = *(const float *)b->data;
    else if (b->dtype == NNF_DTYPE_INT32 || b->dtype == NNF_DTYPE_INT64)
        e = (double)nnf_tinfo_int(b, 0);
    else
        return 0;
    if (e == 2.0)
        *op = NNF_EWU_SQUARE;
    else if (e == 0.5)
        *op = NNF_EWU_POW_HALF;
    else if (e == floor(e) && e != 0.0 && e != 1.0 && fabs(e) <= NNF_EW_POW_INT_MAX)
        *op = NNF_EWU_POW_INT;
    else
        return 0;
    *n = (float)e;
    return 1;
}

/* Sum / Max / Min of three or more inputs: folded through the binary driver
 * as the reference folds them, y = x0 op x1, then y = y op xk. */
static nnf_status fold_run(NNF_KERNEL_ARGS) {
    const ew_state *s = ctx->state;
    for (int k = 0; k < node->n_inputs; k++)
        if (!in[k] || in[k]->dtype != NNF_DTYPE_FLOAT32 || in[k]->numel != s->bc.numel ||
            out[0]->numel != s->bc.numel)
            return nnf_node_error(node, NNF_ERR_SHAPE, "%s: operands do not match the plan",
                                  s->name);
    nnf_ew_binary_run(s->k, s->op, &s->bc, in[0]->data, in[1]->data, out[0]->data, ctx->pool);
    for (int k = 2; k < node->n_inputs; k++)
        nnf_ew_binary_run(s->k, s->op, &s->bc, out[0]->data, in[k]->data, out[0]->data, ctx->pool);
    return NNF_OK;
}

/* Variadic Sum / Max / Min of float32 inputs all of the output's known shape. */
/* The row kernels' op for a binary operator; false for those without one. */
static bool ew_binop_of(nnf_binop op, nnf_ew_binop *out) {
    switch (op) {
    case NNF_BIN_ADD: *out = NNF_EWB_ADD; return true;
    case NNF_BIN_SUB: *out = NNF_EWB_SUB; return true;
    case NNF_BIN_MUL: *out = NNF_EWB_MUL; return true;
    case NNF_BIN_DIV: *out = NNF_EWB_DIV; return true;
    case NNF_BIN_MAX: *out = NNF_EWB_MAX; return true;
    case NNF_BIN_MIN: *out = NNF_EWB_MIN; return true;
    case NNF_BIN_PRELU: *out = NNF_EWB_PRELU; return true;
    default: return false;
    }
}

static nnf_status plan_fold(const nnf_node *node, const nnf_tinfo *in, const nnf_tinfo *out,
                            nnf_kernel_plan *plan, nnf_ew_binop op, const char *name) {
    nnf_status st;
    for (int k = 0; k < node->n_inputs; k++)
        if (!f32_known(&in[k]) || !nnf_shape_known(&out[0].shape) ||
            nnf_shape_numel(&in[k].shape) != nnf_shape_numel(&out[0].shape))
            return NNF_OK;
    nnf_ew_bcast bc = nnf_ew_bcast_classify(&out[0].shape, &out[0].shape, &out[0].shape);
    if (bc.kind != NNF_EWBC_SAME)
        return NNF_OK;
    ew_state *s = state_new(node, &st);
    if (!s)
        return st;
    s->op = op;
    s->bc = bc;
    snprintf(s->name, sizeof s->name, "f32_%s%d_fold_%s", name, node->n_inputs, s->k->suffix);
    plan_set(plan, s, fold_run);
    /* the first pass reads x0 and x1 at the output's index before writing
     * it; the later ones read the output and xk (k >= 2 must not alias) */
    plan->in_place_inputs = 3u;
    return NNF_OK;
}

nnf_status nnf_plan_binary(NNF_PLAN_ARGS) {
    const nnf_binary_params *p = node->params;
    nnf_status st;
    static const char *names[NNF_EWB_COUNT] = {"add", "sub", "mul", "div", "max", "min", "prelu"};
    nnf_ew_binop op = NNF_EWB_ADD;
    bool mapped = p && ew_binop_of(p->op, &op);
    if (mapped && node->n_inputs > 2 && !p->mean && out[0].dtype == NNF_DTYPE_FLOAT32 &&
        (op == NNF_EWB_ADD || op == NNF_EWB_MAX || op == NNF_EWB_MIN))
        return plan_fold(node, in, out, plan, op, op == NNF_EWB_ADD ? "sum" : names[op]);
    if (!p || node->n_inputs != 2 || p->mean || (p->legacy && p->legacy_broadcast) ||
        !f32_present(&in[0]) || !in[1].present || out[0].dtype != NNF_DTYPE_FLOAT32)
        return NNF_OK;
    /* shapes unknown at load: the broadcast pattern is classified per run */
    bool symbolic = !nnf_shape_known(&in[0].shape) || !nnf_shape_known(&in[1].shape) ||
                    !nnf_shape_known(&out[0].shape);
    if (!symbolic && !f32_known(&in[0]))
        return NNF_OK;
    if (p->op == NNF_BIN_POW) {
        nnf_ew_unop uop;
        float e;
        if (!pow_unary(&in[0], &in[1], &out[0], &uop, &e))
            return NNF_OK;
        ew_state *s = state_new(node, &st);
        if (!s)
            return st;
        s->u = (nnf_ew_unary){uop, e, 0.0f};
        snprintf(s->name, sizeof s->name, "f32_pow_%s_%s",
                 uop == NNF_EWU_SQUARE     ? "2"
                 : uop == NNF_EWU_POW_HALF ? "half"
                                           : "int",
                 s->k->suffix);
        plan_set(plan, s, pow_run);
        plan->in_place_inputs = 1u;
        return NNF_OK;
    }
    if (!mapped || in[1].dtype != NNF_DTYPE_FLOAT32)
        return NNF_OK;
    nnf_ew_bcast bc = {0};
    if (!symbolic) {
        bc = nnf_ew_bcast_classify(&in[0].shape, &in[1].shape, &out[0].shape);
        /* PRelu's slope broadcasts to X, never the other way */
        if (bc.kind == NNF_EWBC_NONE || (op == NNF_EWB_PRELU && bc.small_is_a))
            return NNF_OK;
    }
    ew_state *s = state_new(node, &st);
    if (!s)
        return st;
    s->op = op;
    s->bc = bc;
    s->symbolic = symbolic;
    snprintf(s->name, sizeof s->name, "f32_%s_%s_%s", names[op],
             symbolic ? "runtime" : nnf_ew_bcast_name(bc.kind), s->k->suffix);
    plan_set(plan, s, binary_run);
    /* an operand as large as the output is read at the output's index, just
     * before that element is written; a broadcast one is read again. With
     * shapes unknown at load either may be broadcast, and the session's run
     * decides: it gives the output an input's buffer only when that input
     * holds as many bytes as the output, and an operand whose every extent
     * is 1 or the output's has the output's element count only when none
     * is broadcast (the reference kernel, for a pattern the fast one does
     * not cover, reads it at the output's index too). */
    for (int k = 0; k < 2; k++)
        if (symbolic || nnf_shape_numel(&in[k].shape) == nnf_shape_numel(&out[0].shape))
            plan->in_place_inputs |= 1u << k;
    return NNF_OK;
}

/* ---- Where ------------------------------------------------------------------------ */

static void where_row(const void *ctx, size_t n, void *out, const void *const *in,
                      const ptrdiff_t *st) {
    const nnf_ew_kernels *k = ctx;
    k->select32(in[0], (size_t)st[0], in[1], (size_t)st[1], in[2], (size_t)st[2], out, n);
}

static nnf_status where_run(NNF_KERNEL_ARGS) {
    const ew_state *s = ctx->state;
    if (!in[0] || !in[1] || !in[2] || in[0]->dtype != NNF_DTYPE_BOOL ||
        nnf_dtype_size(in[1]->dtype) != 4 || in[2]->dtype != in[1]->dtype ||
        out[0]->dtype != in[1]->dtype)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: operands do not match the plan", s->name);
    nnf_bcast_in ops[3] = {nnf_bcast_operand(in[0]), nnf_bcast_operand(in[1]),
                           nnf_bcast_operand(in[2])};
    nnf_ref_broadcast(out[0], 3, ops, where_row, s->k);
    return NNF_OK;
}

/* Where on 4-byte elements (float32, int32, uint32): the reference's
 * broadcast walk (shapes known or not), each run through the tier's
 * select32 instead of an element at a time (an attention mask over
 * [8, 12, 128, 128] 1.55 -> 0.12 ms on Zen 5, ORT 0.67). */
nnf_status nnf_plan_where(NNF_PLAN_ARGS) {
    nnf_status st;
    if (node->n_inputs != 3 || !in[0].present || in[0].dtype != NNF_DTYPE_BOOL ||
        nnf_dtype_size(out[0].dtype) != 4)
        return NNF_OK;
    ew_state *s = state_new(node, &st);
    if (!s)
        return st;
    snprintf(s->name, sizeof s->name, "where32_%s", s->k->suffix);
    plan_set(plan, s, where_run);
    return NNF_OK;
}

/* ---- softmax ---------------------------------------------------------------------- */

typedef struct rows_job {
    const ew_state *s;
    const float *x;
    float *y;
} rows_job;

/* Hardmax's row: 1 at the first maximum, 0 elsewhere. The reference scans
 * from -inf (NaN never wins), as the ArgMax kernel does from x[0], except
 * that a NaN x[0] keeps ArgMax's index 0: such a row is scanned here. */
static void hardmax_row(const nnf_ew_kernels *k, const float *x, float *y, size_t n) {
    int64_t arg = 0;
    if (x[0] == x[0]) {
        arg = k->arg_row(x, n, 1, 0);
    } else {
        float mx = -INFINITY;
        for (size_t i = 0; i < n; i++)
            if (x[i] > mx) {
                mx = x[i];
                arg = (int64_t)i;
            }
    }
    memset(y, 0, n * sizeof *y);
    y[arg] = 1.0f;
}

static void softmax_rows(void *p, size_t first, size_t count) {
    const rows_job *j = p;
    size_t n = j->s->n;
    if (j->s->kind == 2) {
        for (size_t r = first; r < first + count; r++)
            hardmax_row(j->s->k, j->x + r * n, j->y + r * n, n);
        return;
    }
    j->s->k->softmax(j->x + first * n, j->y + first * n, count, n, j->s->kind);
}

static size_t row_grain(size_t n) {
    return n >= GRAIN_FLOATS ? 1 : GRAIN_FLOATS / n;
}

/* Positions along an inner axis handled by one item (eight vectors). */
#define SOFTMAX_COLS 64

/* Along an inner axis: items of SOFTMAX_COLS positions of one outer index
 * (s->rows outer indices, s->n values apart by s->inner). */
static void softmax_cols(void *p, size_t first, size_t count) {
    const rows_job *j = p;
    const ew_state *s = j->s;
    size_t blocks = (s->inner + SOFTMAX_COLS - 1) / SOFTMAX_COLS;
    for (size_t it = first; it < first + count; it++) {
        size_t o = it / blocks, c0 = it % blocks * SOFTMAX_COLS;
        size_t cols = s->inner - c0 < SOFTMAX_COLS ? s->inner - c0 : SOFTMAX_COLS;
        size_t off = o * s->n * s->inner + c0;
        s->k->softmax_cols(j->x + off, j->y + off, s->n, s->inner, cols, s->kind);
    }
}

/* The split of a softmax over shape sh at axis (rank known): rows of *n
 * (*inner 1: the axis and any later ones of extent 1, or every later axis
 * where opset < 13 flattens them), else *n values *inner apart (an inner
 * axis, opset 13+); *outer the rest. */
static void softmax_split(const nnf_shape *sh, int axis, int coerce_2d, size_t *outer, size_t *n,
                          size_t *inner) {
    *outer = *inner = 1;
    *n = (size_t)sh->dims[axis];
    for (int i = 0; i < axis; i++)
        *outer *= (size_t)sh->dims[i];
    for (int i = axis + 1; i < sh->rank; i++)
        *(coerce_2d ? n : inner) *= (size_t)sh->dims[i];
}

static nnf_status softmax_run(NNF_KERNEL_ARGS) {
    const ew_state *s = ctx->state;
    NNF_CHECK(check_same_numel(node, s, in[0], out[0]));
    ew_state at = *s;
    if (s->symbolic) { /* the split from the run's shape */
        nnf_shape x = shape_of(in[0]);
        if (x.rank <= s->axis || !in[0]->numel)
            return run_reference(node, in, out, ctx);
        softmax_split(&x, s->axis, s->coerce_2d, &at.rows, &at.n, &at.inner);
    }
    if (at.rows * at.n * at.inner != out[0]->numel)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: %zu elements, planned %zu x %zu x %zu",
                              s->name, out[0]->numel, at.rows, at.n, at.inner);
    rows_job j = {&at, in[0]->data, out[0]->data};
    if (at.inner == 1) {
        nnf_ew_parallel_ranges(ctx->pool, at.rows, row_grain(at.n), softmax_rows, &j);
    } else {
        size_t items = at.rows * ((at.inner + SOFTMAX_COLS - 1) / SOFTMAX_COLS);
        nnf_ew_parallel_ranges(ctx->pool, items, row_grain(at.n * SOFTMAX_COLS), softmax_cols, &j);
    }
    return NNF_OK;
}

nnf_status nnf_plan_softmax(NNF_PLAN_ARGS) {
    const nnf_softmax_params *p = node->params;
    nnf_status st;
    /* symbolic dims: the rank must be known (it places the axis) */
    if (!p || !f32_present(&in[0]) || in[0].shape.rank < 1)
        return NNF_OK;
    const nnf_shape *sh = &in[0].shape;
    bool symbolic = !nnf_shape_known(sh);
    if (!symbolic && nnf_shape_numel(sh) <= 0)
        return NNF_OK;
    int axis;
    if (p->axis < -sh->rank || p->axis >= sh->rank)
        return NNF_OK; /* the reference kernel reports it */
    axis = (int)(p->axis < 0 ? p->axis + sh->rank : p->axis);
    ew_state *s = state_new(node, &st);
    if (!s)
        return st;
    s->kind = p->kind == NNF_HARDMAX ? 2 : p->kind == NNF_LOG_SOFTMAX;
    s->symbolic = symbolic;
    s->axis = axis;
    s->coerce_2d = p->coerce_2d;
    if (!symbolic)
        softmax_split(sh, axis, p->coerce_2d, &s->rows, &s->n, &s->inner);
    if (s->kind == 2 && (symbolic || s->inner != 1)) { /* Hardmax: rows of known shapes only */
        state_free(s);
        return NNF_OK;
    }
    snprintf(s->name, sizeof s->name, "f32_%s_%s_%s",
             s->kind == 2 ? "hardmax"
             : s->kind    ? "logsoftmax"
                          : "softmax",
             symbolic        ? "axis"
             : s->inner == 1 ? "lastaxis"
                             : "inneraxis",
             s->k->suffix);
    plan_set(plan, s, softmax_run);
    /* per row (or position): x read for the max (and sum), then y[i] written
     * from x[i] (not where a symbolic plan may hand the run to the reference
     * kernel) */
    plan->in_place_inputs = symbolic ? 0u : 1u;
    return NNF_OK;
}

/* ---- reductions over the last axes -------------------------------------------------- */

static void reduce_rows(void *p, size_t first, size_t count) {
    const rows_job *j = p;
    const ew_state *s = j->s;
    for (size_t r = first; r < first + count; r++) {
        const float *x = j->x + r * s->n;
        switch (s->kind) {
        case NNF_REDUCE_MAX: j->y[r] = s->k->max(x, s->n, 1); break;
        case NNF_REDUCE_MIN: j->y[r] = s->k->min(x, s->n); break;
        default:
            j->y[r] = nnf_reduce_finish(
                s->kind, nnf_ew_row_sum(s->k, x, s->n, nnf_reduce_sum_of(s->kind)), s->n);
        }
    }
}

/* Along inner axes: items of SOFTMAX_COLS positions of one outer index. */
static void reduce_cols(void *p, size_t first, size_t count) {
    const rows_job *j = p;
    const ew_state *s = j->s;
    size_t blocks = (s->inner + SOFTMAX_COLS - 1) / SOFTMAX_COLS;
    for (size_t it = first; it < first + count; it++) {
        size_t o = it / blocks, c0 = it % blocks * SOFTMAX_COLS;
        size_t cols = s->inner - c0 < SOFTMAX_COLS ? s->inner - c0 : SOFTMAX_COLS;
        s->k->reduce_cols(j->x + o * s->n * s->inner + c0, s->n, s->inner, cols, s->kind,
                          j->y + o * s->inner + c0);
    }
}

static nnf_status reduce_run(NNF_KERNEL_ARGS) {
    const ew_state *s = ctx->state;
    if (in[0]->dtype != NNF_DTYPE_FLOAT32 || in[0]->numel != s->rows * s->n * s->inner ||
        out[0]->numel != s->rows * s->inner)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: shapes do not match the plan", s->name);
    rows_job j = {s, in[0]->data, out[0]->data};
    if (s->inner == 1) {
        nnf_ew_parallel_ranges(ctx->pool, s->rows, row_grain(s->n), reduce_rows, &j);
    } else {
        size_t items = s->rows * ((s->inner + SOFTMAX_COLS - 1) / SOFTMAX_COLS);
        nnf_ew_parallel_ranges(ctx->pool, items, row_grain(s->n * SOFTMAX_COLS), reduce_cols, &j);
    }
    return NNF_OK;
}

nnf_status nnf_plan_reduce(NNF_PLAN_ARGS) {
    const nnf_reduce_params *p = node->params;
    nnf_status st;
    if (!p || !f32_known(&in[0]) || out[0].dtype != NNF_DTYPE_FLOAT32 ||
        (!nnf_reduce_is_sum((int)p->kind) && p->kind != NNF_REDUCE_MAX &&
         p->kind != NNF_REDUCE_MIN))
        return NNF_OK;
    const nnf_shape *sh = &in[0].shape;
    unsigned char mask[NNF_MAX_RANK];
    const void *axes = NULL;
    nnf_dtype adt = NNF_DTYPE_INT64;
    int64_t n_axes = 0;
    if (p->axes_from_input && node->n_inputs > 1 && in[1].present) {
        /* axes computed at run time could differ from what the plan saw */
        if (!in[1].data || !nnf_shape_known(&in[1].shape))
            return NNF_OK;
        axes = in[1].data;
        adt = in[1].dtype;
        n_axes = nnf_shape_numel(&in[1].shape);
    }
    if (nnf_reduce_mask(node, p, sh->rank, axes, adt, n_axes, mask) != NNF_OK) {
        nnf_error_clear(); /* the reference kernel reports it when the node runs */
        return NNF_OK;
    }
    /* the reduced axes (ignoring extent 1) must be one block: trailing (rows
     * of n) or followed by kept axes (n values `inner` apart) */
    size_t n = 1, inner = 1;
    int seen = 0;
    for (int i = 0; i < sh->rank; i++) {
        if (sh->dims[i] == 1)
            continue;
        if (mask[i]) {
            if (inner > 1)
                return NNF_OK; /* a second block */
            seen = 1;
            n *= (size_t)sh->dims[i];
        } else if (seen) {
            inner *= (size_t)sh->dims[i];
        }
    }
    ew_state *s = state_new(node, &st);
    if (!s)
        return st;
    static const char *names[] = {
        [NNF_REDUCE_SUM] = "sum",        [NNF_REDUCE_MEAN] = "mean",
        [NNF_REDUCE_MAX] = "max",        [NNF_REDUCE_MIN] = "min",
        [NNF_REDUCE_L1] = "l1",          [NNF_REDUCE_L2] = "l2",
        [NNF_REDUCE_LOG_SUM] = "logsum", [NNF_REDUCE_SUM_SQUARE] = "sumsquare"};
    s->kind = (int)p->kind;
    s->n = n;
    s->inner = inner;
    s->rows = (size_t)nnf_shape_numel(sh) / (n * inner);
    snprintf(s->name, sizeof s->name, "f32_reduce_%s_%s_%s", names[p->kind],
             inner == 1 ? "lastaxes" : "inneraxes", s->k->suffix);
    plan_set(plan, s, reduce_run);
    return NNF_OK;
}

/* ---- Transpose ------------------------------------------------------------------------ */

enum { TR_COPY, TR_ROWS, TR_2D };

typedef struct tr_state {
    const nnf_ew_kernels *k;
    int mode;
    size_t es;
    /* the permutation, and whether the kernel is picked per run (symbolic) */
    int rank, perm[NNF_MAX_RANK];
    bool symbolic;
    nnf_perm_reduced r;
    /* TR_ROWS: output rows of `inner` elements; outer axes of the output with
     * their input strides (elements) */
    int no;
    int64_t odims[NNF_MAX_RANK], ostr[NNF_MAX_RANK];
    size_t inner, rows;
    /* TR_2D: batch of R x C matrices */
    size_t batch, R, C;
    char name[64];
} tr_state;

typedef struct tr_job {
    const tr_state *s;
    const char *x;
    char *y;
} tr_job;

static void tr_copy(void *p, size_t first, size_t count) {
    const tr_job *j = p;
    memcpy(j->y + first, j->x + first, count);
}

static void tr_rows(void *p, size_t first, size_t count) {
    const tr_job *j = p;
    const tr_state *s = j->s;
    int64_t idx[NNF_MAX_RANK], off = 0;
    size_t rem = first, bytes = s->inner * s->es;
    for (int d = s->no - 1; d >= 0; d--) {
        idx[d] = (int64_t)(rem % (size_t)s->odims[d]);
        rem /= (size_t)s->odims[d];
        off += idx[d] * s->ostr[d];
    }
    for (size_t r = first; r < first + count; r++) {
        memcpy(j->y + r * bytes, j->x + (size_t)off * s->es, bytes);
        for (int d = s->no - 1; d >= 0; d--) {
            off += s->ostr[d];
            if (++idx[d] < s->odims[d])
                break;
            off -= s->ostr[d] * s->odims[d];
            idx[d] = 0;
        }
    }
}

/* 64 x 64 tiles: both the 16 KB read and the 16 KB written stay in L1/L2 */
#define TR_TILE 64

static void tr_2d(void *p, size_t first, size_t count) {
    const tr_job *j = p;
    const tr_state *s = j->s;
    size_t rt = (s->R + TR_TILE - 1) / TR_TILE, ct = (s->C + TR_TILE - 1) / TR_TILE;
    for (size_t t = first; t < first + count; t++) {
        /* the row tiles of one column tile one after another: each output
         * row is then written whole before the next column tile (YOLOv5s's
         * 85 x 6400 detect head, rows in tiles of 64 and 21, wrote its 2.2
         * MB output in two passes, the second finding the lines gone) */
        size_t b = t / (rt * ct), rc = t % (rt * ct);
        size_t r0 = rc % rt * TR_TILE, c0 = rc / rt * TR_TILE;
        size_t nr = s->R - r0 < TR_TILE ? s->R - r0 : TR_TILE;
        size_t nc = s->C - c0 < TR_TILE ? s->C - c0 : TR_TILE;
        const float *x = (const float *)j->x + b * s->R * s->C + r0 * s->C + c0;
        float *y = (float *)j->y + b * s->R * s->C + c0 * s->R + r0;
        s->k->transpose(x, s->C, y, s->R, nr, nc);
    }
}

/* The kernel for a transpose of `dims` by perm: the axes that stay
 * together merged (nnf_perm_reduce), then a plain copy, a copy of whole
 * rows, or a batched 2-D transpose of 4-byte elements; false for any other. */
static bool tr_classify(tr_state *s, int rank, const int64_t *dims, const int *perm) {
    nnf_perm_reduced r;
    nnf_perm_reduce(rank, dims, perm, &r);
    if (r.rank <= 1)
        s->mode = TR_COPY;
    else if (r.perm[r.rank - 1] == r.rank - 1)
        s->mode = TR_ROWS;
    else if (s->es == 4 && ((r.rank == 2 && r.perm[0] == 1) ||
                            (r.rank == 3 && r.perm[0] == 0 && r.perm[1] == 2 && r.perm[2] == 1)))
        s->mode = TR_2D;
    else
        return false;
    s->r = r;
    if (s->mode == TR_ROWS) {
        int64_t istr[NNF_MAX_RANK], st = 1;
        for (int i = r.rank - 1; i >= 0; i--) {
            istr[i] = st;
            st *= r.dims[i];
        }
        s->inner = (size_t)r.dims[r.rank - 1];
        s->no = r.rank - 1;
        s->rows = 1;
        for (int k = 0; k < s->no; k++) {
            s->odims[k] = r.dims[r.perm[k]];
            s->ostr[k] = istr[r.perm[k]];
            s->rows *= (size_t)s->odims[k];
        }
    } else if (s->mode == TR_2D) {
        s->batch = r.rank == 3 ? (size_t)r.dims[0] : 1;
        s->R = (size_t)r.dims[r.rank - 2];
        s->C = (size_t)r.dims[r.rank - 1];
    }
    return true;
}

static nnf_status transpose_run(NNF_KERNEL_ARGS) {
    const tr_state *s = ctx->state;
    tr_state run;
    if (s->symbolic) {
        /* the run's extents pick the kernel; a form it does not cover (or a
         * zero extent) takes the reference */
        run = *s;
        if (in[0]->rank != s->rank || !in[0]->numel ||
            !tr_classify(&run, s->rank, in[0]->dims, s->perm))
            return run_reference(node, in, out, ctx);
        s = &run;
    }
    if (in[0]->numel != out[0]->numel || nnf_dtype_size(in[0]->dtype) != s->es)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: shapes do not match the plan", s->name);
    tr_job j = {s, in[0]->data, out[0]->data};
    switch (s->mode) {
    case TR_COPY:
        nnf_ew_parallel_ranges(ctx->pool, in[0]->numel * s->es, GRAIN_BYTES, tr_copy, &j);
        break;
    case TR_ROWS: {
        size_t bytes = s->inner * s->es;
        nnf_ew_parallel_ranges(ctx->pool, s->rows, bytes >= GRAIN_BYTES ? 1 : GRAIN_BYTES / bytes,
                               tr_rows, &j);
        break;
    }
    default: {
        size_t tiles =
            s->batch * ((s->R + TR_TILE - 1) / TR_TILE) * ((s->C + TR_TILE - 1) / TR_TILE);
        nnf_ew_parallel_ranges(ctx->pool, tiles, 16, tr_2d, &j);
        break;
    }
    }
    return NNF_OK;
}

static void tr_free(void *p) {
    nnf_free(p);
}

/* NNF_OP_SYM: with a known rank but symbolic extents (BERT's heads split
 * from a dynamic batch and sequence) the kernel is picked per run. */
nnf_status nnf_plan_transpose(NNF_PLAN_ARGS) {
    const nnf_transpose_params *p = node->params;
    const nnf_shape *sh = &in[0].shape;
    bool known = nnf_shape_known(sh);
    if (!p || !in[0].present || sh->rank < 0 || (known && nnf_shape_numel(sh) <= 0) ||
        (p->n_perm && p->n_perm != sh->rank))
        return NNF_OK;
    size_t es = nnf_dtype_size(in[0].dtype);
    if (!es)
        return NNF_OK;
    tr_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a kernel plan");
    s->k = nnf_ew_kernels_for(nnf_cpu_isa());
    s->es = es;
    s->rank = sh->rank;
    for (int k = 0; k < sh->rank; k++)
        s->perm[k] = p->n_perm ? (int)p->perm[k] : sh->rank - 1 - k;
    s->symbolic = !known;
    if (known && !tr_classify(s, sh->rank, sh->dims, s->perm)) {
        nnf_free(s);
        return NNF_OK;
    }
    static const char *names[] = {"copy", "rows", "2d"};
    if (known)
        snprintf(s->name, sizeof s->name, "transpose_%s_%s", names[s->mode],
                 s->mode == TR_2D ? s->k->suffix : "memcpy");
    else
        snprintf(s->name, sizeof s->name, "transpose_%s", s->k->suffix);
    plan->name = s->name;
    plan->run = transpose_run;
    plan->state = s;
    plan->free_state = tr_free;
    return NNF_OK;
}

/* ---- Cast between float32 and float16 ------------------------------------------------ */

typedef struct cast_job {
    const ew_state *s;
    const void *x;
    void *y;
} cast_job;

static void cast_range(void *p, size_t first, size_t count) {
    const cast_job *j = p;
    if (j->s->kind)
        j->s->k->to_f16((const float *)j->x + first, (uint16_t *)j->y + first, count);
    else
        j->s->k->from_f16((const uint16_t *)j->x + first, (float *)j->y + first, count);
}

static nnf_status cast_run(NNF_KERNEL_ARGS) {
    const ew_state *s = ctx->state;
    nnf_dtype from = s->kind ? NNF_DTYPE_FLOAT32 : NNF_DTYPE_FLOAT16;
    nnf_dtype to = s->kind ? NNF_DTYPE_FLOAT16 : NNF_DTYPE_FLOAT32;
    if (in[0]->dtype != from || out[0]->dtype != to || in[0]->numel != out[0]->numel)
        return nnf_node_error(node, NNF_ERR_SHAPE,
                              "%s: input and output must be %s and %s of %zu "
                              "elements",
                              s->name, nnf_dtype_name(from), nnf_dtype_name(to), out[0]->numel);
    cast_job j = {s, in[0]->data, out[0]->data};
    nnf_ew_parallel_ranges(ctx->pool, out[0]->numel, GRAIN_FLOATS, cast_range, &j);
    return NNF_OK;
}

/* Cast and CastLike between float32 and float16, over the run's element
 * count (symbolic shapes too); the vector tiers' conversions need F16C. */
nnf_status nnf_plan_cast(NNF_PLAN_ARGS) {
    nnf_dtype from = in[0].dtype, to = out[0].dtype;
    bool to_f16 = from == NNF_DTYPE_FLOAT32 && to == NNF_DTYPE_FLOAT16;
    if (!in[0].present || !(to_f16 || (from == NNF_DTYPE_FLOAT16 && to == NNF_DTYPE_FLOAT32)))
        return NNF_OK;
    nnf_status st;
    ew_state *s = state_new(node, &st);
    if (!s)
        return st;
    if (!nnf_cpu_get()->f16c)
        s->k = nnf_ew_kernels_for(NNF_ISA_SCALAR);
    s->kind = to_f16;
    snprintf(s->name, sizeof s->name, "cast_%s_%s", to_f16 ? "f32_f16" : "f16_f32", s->k->suffix);
    plan_set(plan, s, cast_run);
    return NNF_OK;
}

/* ---- ArgMax / ArgMin ------------------------------------------------------------------ */

typedef struct arg_job {
    const ew_state *s;
    const nnf_argminmax_params *p;
    const float *x;
    int64_t *y;
    size_t n, inner, blocks; /* blocks: of ARG_COLS positions an outer index (inner > 1) */
} arg_job;

/* Positions of the axis' neighbours handled by one item: 64 (eight vectors). */
#define ARG_COLS 64

static void arg_range(void *ctx, size_t first, size_t count) {
    const arg_job *j = ctx;
    const nnf_ew_kernels *k = j->s->k;
    for (size_t it = first; it < first + count; it++) {
        if (j->inner == 1) {
            j->y[it] = k->arg_row(j->x + it * j->n, j->n, j->p->is_max, j->p->select_last_index);
            continue;
        }
        size_t o = it / j->blocks, c0 = it % j->blocks * ARG_COLS;
        size_t cols = j->inner - c0 < ARG_COLS ? j->inner - c0 : ARG_COLS;
        k->arg_cols(j->x + o * j->n * j->inner + c0, j->n, j->inner, cols, j->p->is_max,
                    j->p->select_last_index, j->y + o * j->inner + c0);
    }
}

static nnf_status argminmax_run(NNF_KERNEL_ARGS) {
    const ew_state *s = ctx->state;
    const nnf_argminmax_params *p = node->params;
    const nnf_buf *x = in[0];
    int axis;
    NNF_CHECK(nnf_norm_axis(node, p->axis, x->rank, &axis));
    size_t outer = 1, inner = 1, n = (size_t)x->dims[axis];
    for (int i = 0; i < x->rank; i++) {
        if (i < axis)
            outer *= (size_t)x->dims[i];
        else if (i > axis)
            inner *= (size_t)x->dims[i];
    }
    /* the vector kernel counts positions in 32-bit lanes */
    if (x->dtype != NNF_DTYPE_FLOAT32 || n == 0 || n > INT32_MAX || !out[0]->numel)
        return run_reference(node, in, out, ctx);
    arg_job j = {s, p, x->data, out[0]->data, n, inner, (inner + ARG_COLS - 1) / ARG_COLS};
    size_t items = inner == 1 ? outer : outer * j.blocks;
    size_t per = inner == 1 ? n : n * ARG_COLS;
    nnf_ew_parallel_ranges(ctx->pool, items, per >= GRAIN_FLOATS ? 1 : GRAIN_FLOATS / per,
                           arg_range, &j);
    return NNF_OK;
}

/* float32 ArgMax / ArgMin along any axis (symbolic shapes too: the run's
 * extents split the work); other dtypes keep the reference kernel. */
nnf_status nnf_plan_argminmax(NNF_PLAN_ARGS) {
    if (!node->params || !f32_present(&in[0]) || in[0].shape.rank < 1)
        return NNF_OK;
    nnf_status st;
    ew_state *s = state_new(node, &st);
    if (!s)
        return st;
    const nnf_argminmax_params *p = node->params;
    snprintf(s->name, sizeof s->name, "f32_%s_%s", p->is_max ? "argmax" : "argmin", s->k->suffix);
    plan_set(plan, s, argminmax_run);
    return NNF_OK;
}

/* ---- Concat and Split ----------------------------------------------------------------- */

/* Concat and Split move pieces of rows: the whole tensor (Concat's output,
 * Split's input) as rows of wrow bytes, one per outer index, part i taking
 * bytes [off[i], off[i + 1]) of each. A job copies the whole tensor's bytes
 * [first, end) from the parts (Concat) or to them (Split, `scatter`). */
typedef struct pieces_job {
    char *whole;
    size_t wrow;
    nnf_buf *const *parts; /* width 0 (off[i] == off[i + 1]) where absent */
    const size_t *off;     /* n + 1 byte offsets of each part inside a row */
    int n;
    bool scatter;
} pieces_job;

/* memcpy of a constant size compiles to moves: YOLO's heads concatenate
 * runs of 2 floats */
static inline void copy_run(char *d, const char *s, size_t n) {
    switch (n) {
    case 4: memcpy(d, s, 4); break;
    case 8: memcpy(d, s, 8); break;
    case 12: memcpy(d, s, 12); break;
    case 16: memcpy(d, s, 16); break;
    default: memcpy(d, s, n); break;
    }
}

/* n bytes between the whole tensor at w and part i's row o at offset at. */
static inline void piece(const pieces_job *j, char *w, int i, size_t o, size_t at, size_t n) {
    char *p = (char *)j->parts[i]->data + o * (j->off[i + 1] - j->off[i]) + at;
    if (j->scatter)
        copy_run(p, w, n);
    else
        copy_run(w, p, n);
}

/* Whole-tensor bytes [first, end) that lie in one row o: piece by piece. */
static void pieces_part(const pieces_job *j, size_t first, size_t end) {
    while (first < end) {
        size_t o = first / j->wrow, w = first % j->wrow;
        int i = 0;
        while (w >= j->off[i + 1]) /* empty parts have off[i] == off[i + 1] */
            i++;
        size_t len = j->off[i + 1] - w < end - first ? j->off[i + 1] - w : end - first;
        piece(j, j->whole + first, i, o, w - j->off[i], len);
        first += len;
    }
}

static void pieces_range(void *p, size_t first, size_t count) {
    const pieces_job *j = p;
    size_t end = first + count, wrow = j->wrow;
    size_t r0 = (first + wrow - 1) / wrow, r1 = end / wrow; /* whole rows [r0, r1) */
    if (r0 >= r1) {
        pieces_part(j, first, end);
        return;
    }
    pieces_part(j, first, r0 * wrow);
    for (size_t o = r0; o < r1; o++)
        for (int i = 0; i < j->n; i++)
            if (j->off[i + 1] > j->off[i])
                piece(j, j->whole + o * wrow + j->off[i], i, o, 0, j->off[i + 1] - j->off[i]);
    pieces_part(j, r1 * wrow, end);
}

typedef struct concat_state {
    int axis;
    char name[32];
} concat_state;

static nnf_status concat_run(NNF_KERNEL_ARGS) {
    const concat_state *s = ctx->state;
    nnf_buf *y = out[0];
    size_t es = nnf_dtype_size(y->dtype), outer = 1, inner = 1, stack[17], *off = stack;
    nnf_status st = NNF_OK;
    for (int i = 0; i < s->axis; i++)
        outer *= (size_t)y->dims[i];
    for (int i = s->axis + 1; i < y->rank; i++)
        inner *= (size_t)y->dims[i];
    if (node->n_inputs + 1 > 17 && !(off = nnf_calloc((size_t)node->n_inputs + 1, sizeof *off)))
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory");
    off[0] = 0;
    for (int i = 0; i < node->n_inputs; i++) {
        if (!in[i] || in[i]->rank != y->rank || nnf_dtype_size(in[i]->dtype) != es) {
            st = nnf_node_error(node, NNF_ERR_SHAPE, "%s: input %d does not match the output",
                                s->name, i);
            goto fail;
        }
        off[i + 1] = off[i] + (size_t)in[i]->dims[s->axis] * inner * es;
    }
    size_t yrow = (size_t)y->dims[s->axis] * inner * es;
    if (off[node->n_inputs] != yrow || outer * yrow != y->numel * es) {
        st = nnf_node_error(node, NNF_ERR_SHAPE, "%s: inputs do not fill the output", s->name);
        goto fail;
    }
    pieces_job j = {y->data, yrow, in, off, node->n_inputs, false};
    if (yrow)
        nnf_ew_parallel_ranges(ctx->pool, outer * yrow, GRAIN_BYTES, pieces_range, &j);
fail:
    if (off != stack)
        nnf_free(off);
    return st;
}

nnf_status nnf_plan_concat(NNF_PLAN_ARGS) {
    const nnf_axis_params *p = node->params;
    const nnf_shape *sh = &out[0].shape;
    if (!p || !nnf_shape_known(sh) || sh->rank < 1 || !nnf_dtype_size(out[0].dtype) ||
        p->axis < -sh->rank || p->axis >= sh->rank)
        return NNF_OK;
    for (int i = 0; i < node->n_inputs; i++)
        if (!in[i].present || !nnf_shape_known(&in[i].shape) || in[i].shape.rank != sh->rank)
            return NNF_OK;
    concat_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a kernel plan");
    s->axis = (int)(p->axis < 0 ? p->axis + sh->rank : p->axis);
    snprintf(s->name, sizeof s->name, "concat_memcpy");
    plan->name = s->name;
    plan->run = concat_run;
    plan->state = s;
    plan->free_state = tr_free;
    return NNF_OK;
}

/* ---- Split ------------------------------------------------------------------------ */

static nnf_status split_run(NNF_KERNEL_ARGS) {
    const nnf_split_params *p = node->params;
    const nnf_buf *x = in[0];
    int axis;
    NNF_CHECK(nnf_norm_axis(node, p->axis, x->rank, &axis));
    size_t es = nnf_dtype_size(x->dtype), outer = 1, inner = 1, stack[17], *off = stack;
    for (int i = 0; i < axis; i++)
        outer *= (size_t)x->dims[i];
    for (int i = axis + 1; i < x->rank; i++)
        inner *= (size_t)x->dims[i];
    if (node->n_outputs + 1 > 17 && !(off = nnf_calloc((size_t)node->n_outputs + 1, sizeof *off)))
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory");
    nnf_status st = NNF_OK;
    size_t xrow = (size_t)x->dims[axis] * inner * es;
    off[0] = 0;
    for (int i = 0; i < node->n_outputs; i++) {
        const nnf_buf *y = nnf_kout(node, out, i);
        off[i + 1] = off[i] + (y ? (size_t)y->dims[axis] * inner * es : 0);
        if (off[i + 1] > xrow) {
            st = nnf_node_error(node, NNF_ERR_INTERNAL, "outputs exceed the input");
            goto fail;
        }
    }
    pieces_job j = {x->data, xrow, out, off, node->n_outputs, true};
    if (xrow && outer)
        nnf_ew_parallel_ranges(ctx->pool, outer * xrow, GRAIN_BYTES, pieces_range, &j);
fail:
    if (off != stack)
        nnf_free(off);
    return st;
}

/* Split copies pieces of rows, in parallel over the input's bytes (the run's
 * extents: symbolic shapes too). */
nnf_status nnf_plan_split(NNF_PLAN_ARGS) {
    (void)out;
    if (!node->params || !in[0].present || in[0].shape.rank < 1 || !nnf_dtype_size(in[0].dtype))
        return NNF_OK;
    plan->name = "split_memcpy";
    plan->run = split_run;
    return NNF_OK;
}

/* ---- SliceAssign (ops/slice_assign.c) ----------------------------------------------- */

static nnf_status slice_assign_run(NNF_KERNEL_ARGS) {
    return nnf_slice_assign_run(node, in, out, ctx->pool);
}

nnf_status nnf_plan_slice_assign(NNF_PLAN_ARGS) {
    (void)node, (void)in, (void)out;
    plan->name = "slice_assign_memcpy";
    plan->run = slice_assign_run;
    /* y over x: the base's elements outside the windows are already there */
    plan->in_place_inputs = 1u;
    return NNF_OK;
}

/* ---- Slice ------------------------------------------------------------------------- */

/* A slice with constant starts/ends/axes/steps is rows of `run` elements,
 * contiguous in both tensors: the inner axes the slice keeps whole, plus the
 * innermost cut axis when its step is 1. The outer axes are walked with
 * their input strides (negative for negative steps). */
typedef struct slice_state {
    size_t es, in_numel, out_numel, run, rows;
    size_t grain; /* rows a thread takes at least */
    int no;
    int64_t odims[NNF_MAX_RANK], ostr[NNF_MAX_RANK], base;
    char name[32];
} slice_state;

typedef struct slice_job {
    const slice_state *s;
    const char *x;
    char *y;
} slice_job;

/* Rows of a fixed byte count: memcpy of a constant size compiles to moves,
 * and YOLO's heads slice runs of 2 floats. */
#define SLICE_ROWS(BYTES)                                                                          \
    for (size_t r = first; r < first + count; r++) {                                               \
        memcpy(y + r * (BYTES), x + off * (int64_t)s->es, (BYTES));                                \
        for (int d = s->no - 1; d >= 0; d--) {                                                     \
            off += s->ostr[d];                                                                     \
            if (++idx[d] < s->odims[d])                                                            \
                break;                                                                             \
            off -= s->ostr[d] * s->odims[d];                                                       \
            idx[d] = 0;                                                                            \
        }                                                                                          \
    }

static void slice_rows(void *p, size_t first, size_t count) {
    const slice_job *j = p;
    const slice_state *s = j->s;
    const char *x = j->x;
    char *y = j->y;
    int64_t idx[NNF_MAX_RANK], off = s->base;
    size_t rem = first, bytes = s->run * s->es;
    for (int d = s->no - 1; d >= 0; d--) {
        idx[d] = (int64_t)(rem % (size_t)s->odims[d]);
        rem /= (size_t)s->odims[d];
        off += idx[d] * s->ostr[d];
    }
    switch (bytes) {
    case 4: SLICE_ROWS(4); break;
    case 8: SLICE_ROWS(8); break;
    case 12: SLICE_ROWS(12); break;
    case 16: SLICE_ROWS(16); break;
    default: SLICE_ROWS(bytes); break;
    }
}

static nnf_status slice_run(NNF_KERNEL_ARGS) {
    const slice_state *s = ctx->state;
    if (in[0]->numel != s->in_numel || out[0]->numel != s->out_numel ||
        nnf_dtype_size(in[0]->dtype) != s->es)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: shapes do not match the plan", s->name);
    slice_job j = {s, in[0]->data, out[0]->data};
    nnf_ew_parallel_ranges(ctx->pool, s->rows, s->grain, slice_rows, &j);
    return NNF_OK;
}

nnf_status nnf_plan_slice(NNF_PLAN_ARGS) {
    const nnf_shape *xs = &in[0].shape, *ys = &out[0].shape;
    size_t es = nnf_dtype_size(in[0].dtype);
    if (!node->params || !es || !nnf_shape_known(xs) || !nnf_shape_known(ys) ||
        xs->rank != ys->rank || xs->rank < 1 || nnf_shape_numel(ys) <= 0)
        return NNF_OK;
    nnf_slice_plan sp;
    if (!nnf_slice_plan_known(node, in, &sp))
        return NNF_OK;
    for (int d = 0; d < xs->rank; d++)
        if (sp.count[d] != ys->dims[d])
            return NNF_OK;
    slice_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a kernel plan");
    int64_t istr[NNF_MAX_RANK], st = 1;
    for (int d = xs->rank - 1; d >= 0; d--) {
        istr[d] = st;
        st *= xs->dims[d];
        s->base += sp.start[d] * istr[d];
    }
    int d = xs->rank - 1;
    s->run = 1;
    while (d >= 0 && sp.step[d] == 1 && sp.count[d] == xs->dims[d]) /* whole axes */
        s->run *= (size_t)sp.count[d--];
    if (d >= 0 && sp.step[d] == 1)
        s->run *= (size_t)sp.count[d--];
    s->rows = 1;
    for (int k = 0; k <= d; k++) {
        if (sp.count[k] == 1)
            continue;
        s->odims[s->no] = sp.count[k];
        s->ostr[s->no++] = sp.step[k] * istr[k];
        s->rows *= (size_t)sp.count[k];
    }
    s->es = es;
    /* a row costs a cache line at least: YOLOv5s's heads slice 2 floats
     * from each 85-float row, and as 8 bytes a row their 19200 rows were
     * one thread's grain (0.24 ms, the other thread idle) */
    size_t bytes = s->run * es < 64 ? 64 : s->run * es;
    s->grain = bytes >= GRAIN_BYTES ? 1 : GRAIN_BYTES / bytes;
    s->in_numel = (size_t)nnf_shape_numel(xs);
    s->out_numel = (size_t)nnf_shape_numel(ys);
    snprintf(s->name, sizeof s->name, "slice_rows_memcpy");
    plan->name = s->name;
    plan->run = slice_run;
    plan->state = s;
    plan->free_state = tr_free;
    return NNF_OK;
}

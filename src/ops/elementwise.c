/* Definitions (init, infer, cost) of the element-wise, activation and
 * softmax operators. Their reference kernels are in kernels/ref/binary.c,
 * unary.c and softmax.c; the typed parameters in ops/elementwise.h. */
#include "ops/elementwise.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- shared helpers --------------------------------------------------- */

static double numel_or_zero(const nnf_tinfo *t) {
    int64_t n = nnf_shape_numel(&t->shape);
    return n < 0 ? 0.0 : (double)n;
}

static nnf_status need_input(const nnf_node *node, const nnf_tinfo *in, int i) {
    if (i >= node->n_inputs || !in[i].present)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input %d is required", i);
    return NNF_OK;
}

static nnf_status bad_dtype(const nnf_node *node, int i, nnf_dtype t) {
    return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "input %d has unsupported type %s", i,
                          nnf_dtype_name(t));
}

static int is_f32_i32_i64(nnf_dtype t) {
    return t == NNF_DTYPE_FLOAT32 || t == NNF_DTYPE_INT32 || t == NNF_DTYPE_INT64;
}

static nnf_status broadcast(const nnf_node *node, const nnf_shape *a, const nnf_shape *b,
                            nnf_shape *out) {
    nnf_status s = nnf_broadcast_shape(a, b, out);
    if (s != NNF_OK)
        return nnf_error_prefix(s, "node '%s' (%s)", node->name, node->op_type);
    return NNF_OK;
}

/* ---- binary and variadic ---------------------------------------------- */

static const struct {
    const char *name;
    nnf_binop op;
    int mean;
} binary_ops[] = {
    {"Add", NNF_BIN_ADD, 0},
    {"Sum", NNF_BIN_ADD, 0},
    {"Mean", NNF_BIN_ADD, 1},
    {"Sub", NNF_BIN_SUB, 0},
    {"Mul", NNF_BIN_MUL, 0},
    {"Div", NNF_BIN_DIV, 0},
    {"Pow", NNF_BIN_POW, 0},
    {"Max", NNF_BIN_MAX, 0},
    {"Min", NNF_BIN_MIN, 0},
    {"Mod", NNF_BIN_MOD, 0},
    {"PRelu", NNF_BIN_PRELU, 0},
    {"Equal", NNF_BIN_EQUAL, 0},
    {"Less", NNF_BIN_LESS, 0},
    {"Greater", NNF_BIN_GREATER, 0},
    {"LessOrEqual", NNF_BIN_LESS_EQUAL, 0},
    {"GreaterOrEqual", NNF_BIN_GREATER_EQUAL, 0},
    {"And", NNF_BIN_AND, 0},
    {"Or", NNF_BIN_OR, 0},
    {"Xor", NNF_BIN_XOR, 0},
    {"BitShift", NNF_BIN_SHIFT_LEFT, 0},
};

/* Ops whose opset-1..6 form used the legacy broadcast/axis attributes. */
static int has_legacy_broadcast(const char *name) {
    static const char *const names[] = {"Add", "Sub", "Mul",   "Div",  "Pow",    "And",
                                        "Or",  "Xor", "Equal", "Less", "Greater"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i]))
            return 1;
    return 0;
}

static int is_predicate(nnf_binop op) {
    return op >= NNF_BIN_EQUAL && op <= NNF_BIN_XOR;
}

nnf_status nnf_binary_init(NNF_INIT_ARGS) {
    nnf_binary_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    if (!p)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory");
    size_t i = 0;
    while (i < sizeof binary_ops / sizeof binary_ops[0] &&
           strcmp(binary_ops[i].name, node->op_type))
        i++;
    if (i == sizeof binary_ops / sizeof binary_ops[0])
        return nnf_node_error(node, NNF_ERR_INTERNAL, "not a binary operator");
    p->op = binary_ops[i].op;
    p->mean = binary_ops[i].mean;
    if (p->op == NNF_BIN_MOD) {
        int64_t f = nnf_attr_int(node, "fmod", 0);
        if (f != 0 && f != 1)
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "attribute fmod=%lld is not 0 or 1",
                                  (long long)f);
        p->fmod = (int)f;
    }
    if (!strcmp(node->op_type, "BitShift")) {
        const char *dir = nnf_attr_string(node, "direction", "");
        if (!strcmp(dir, "RIGHT"))
            p->op = NNF_BIN_SHIFT_RIGHT;
        else if (strcmp(dir, "LEFT"))
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                                  "attribute direction='%s' is not LEFT or RIGHT", dir);
    }
    if (node->opset < 7 && has_legacy_broadcast(node->op_type)) {
        p->legacy = 1;
        p->legacy_broadcast = (int)nnf_attr_int(node, "broadcast", 0);
        p->legacy_axis = nnf_attr_int(node, "axis", -1);
        if (nnf_node_attr(node, "axis") && p->legacy_axis < 0)
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "attribute axis=%lld is negative",
                                  (long long)p->legacy_axis);
    }
    node->params = p;
    return NNF_OK;
}

/* Opset < 7: without broadcast=1 the shapes must match; with it B is
 * broadcast to A, and the result always has A's shape. */
static nnf_status legacy_shape(const nnf_node *node, const nnf_binary_params *p, const nnf_shape *a,
                               const nnf_shape *b, nnf_shape *out) {
    *out = *a;
    if (a->rank < 0 || b->rank < 0)
        return NNF_OK;
    nnf_shape bb = *b;
    if (p->legacy_broadcast && p->legacy_axis >= 0) {
        int r = (int)(a->rank - p->legacy_axis);
        if (p->legacy_axis > a->rank || r < b->rank)
            return nnf_node_error(node, NNF_ERR_SHAPE, "B (rank %d) does not fit A at axis %lld",
                                  b->rank, (long long)p->legacy_axis);
        for (int i = b->rank; i < r; i++) {
            bb.dims[i] = 1;
            bb.dim_names[i] = NULL;
        }
        bb.rank = r;
    }
    if (!p->legacy_broadcast && a->rank != b->rank)
        return nnf_node_error(node, NNF_ERR_SHAPE, "ranks %d and %d differ without broadcast=1",
                              a->rank, b->rank);
    nnf_shape s;
    NNF_CHECK(broadcast(node, a, &bb, &s));
    for (int i = 0; i < s.rank; i++)
        if (s.rank != a->rank || (s.dims[i] >= 0 && a->dims[i] >= 0 && s.dims[i] != a->dims[i]))
            return nnf_node_error(node, NNF_ERR_SHAPE, "B does not broadcast to A's shape");
    return NNF_OK;
}

nnf_status nnf_binary_infer(NNF_INFER_ARGS) {
    const nnf_binary_params *p = node->params;
    int n = node->n_inputs;
    for (int k = 0; k < n; k++)
        NNF_CHECK(need_input(node, in, k));
    nnf_dtype t0 = in[0].dtype;
    nnf_dtype t1 = n > 1 ? in[1].dtype : t0;
    if (!nnf_ref_binary_row(p, t0, t1))
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "no kernel for input types %s and %s",
                              nnf_dtype_name(t0), nnf_dtype_name(t1));
    if (p->mean && t0 != NNF_DTYPE_FLOAT32)
        return bad_dtype(node, 0, t0);
    for (int k = 2; k < n; k++)
        if (in[k].dtype != t0)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "input %d is %s, input 0 is %s", k,
                                  nnf_dtype_name(in[k].dtype), nnf_dtype_name(t0));
    out[0].dtype = is_predicate(p->op) ? NNF_DTYPE_BOOL : t0;
    if (p->legacy && n == 2)
        return legacy_shape(node, p, &in[0].shape, &in[1].shape, &out[0].shape);
    nnf_shape s = in[0].shape;
    for (int k = 1; k < n; k++)
        NNF_CHECK(broadcast(node, &s, &in[k].shape, &s));
    if (p->op == NNF_BIN_PRELU && s.rank >= 0 && in[0].shape.rank >= 0) {
        /* slope broadcasts to X, never X to slope */
        const nnf_shape *x = &in[0].shape;
        for (int i = 0; i < s.rank; i++)
            if (s.rank != x->rank || (s.dims[i] >= 0 && x->dims[i] >= 0 && s.dims[i] != x->dims[i]))
                return nnf_node_error(node, NNF_ERR_SHAPE, "slope does not broadcast to X");
        s = *x;
    }
    out[0].shape = s;
    return NNF_OK;
}

double nnf_binary_cost(NNF_COST_ARGS) {
    const nnf_binary_params *p = node->params;
    double per = p && p->op == NNF_BIN_POW ? 8.0 : 1.0;
    int folds = node->n_inputs > 1 ? node->n_inputs - 1 : 1;
    return numel_or_zero(&out[0]) * per * folds;
}

/* ---- Where ------------------------------------------------------------ */

nnf_status nnf_where_infer(NNF_INFER_ARGS) {
    for (int k = 0; k < 3; k++)
        NNF_CHECK(need_input(node, in, k));
    if (in[0].dtype != NNF_DTYPE_BOOL)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "condition is %s, not bool",
                              nnf_dtype_name(in[0].dtype));
    if (in[1].dtype != in[2].dtype)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "X is %s but Y is %s",
                              nnf_dtype_name(in[1].dtype), nnf_dtype_name(in[2].dtype));
    size_t es = nnf_dtype_size(in[1].dtype);
    if (es != 1 && es != 2 && es != 4 && es != 8)
        return bad_dtype(node, 1, in[1].dtype);
    out[0].dtype = in[1].dtype;
    nnf_shape s;
    NNF_CHECK(broadcast(node, &in[0].shape, &in[1].shape, &s));
    NNF_CHECK(broadcast(node, &s, &in[2].shape, &out[0].shape));
    return NNF_OK;
}

double nnf_where_cost(NNF_COST_ARGS) {
    return numel_or_zero(&out[0]);
}

/* ---- unary ------------------------------------------------------------ */

/* Which dtypes a unary op takes beyond float32. */
enum { UN_F32 = 1, UN_INT = 2, UN_BOOL_ONLY = 4, UN_TO_BOOL = 8 };

static const struct {
    const char *name;
    nnf_unop op;
    int types;
    float flops; /* per element, for cost */
} unary_ops[] = {
    {"Relu", NNF_UN_RELU, UN_F32 | UN_INT, 1},
    {"LeakyRelu", NNF_UN_LEAKY_RELU, UN_F32, 2},
    {"Elu", NNF_UN_ELU, UN_F32, 4},
    {"Selu", NNF_UN_SELU, UN_F32, 5},
    {"Celu", NNF_UN_CELU, UN_F32, 5},
    {"ThresholdedRelu", NNF_UN_THRESHOLDED_RELU, UN_F32, 1},
    {"Sigmoid", NNF_UN_SIGMOID, UN_F32, 4},
    {"HardSigmoid", NNF_UN_HARD_SIGMOID, UN_F32, 3},
    {"HardSwish", NNF_UN_HARD_SWISH, UN_F32, 4},
    {"Tanh", NNF_UN_TANH, UN_F32, 4},
    {"Softplus", NNF_UN_SOFTPLUS, UN_F32, 6},
    {"Softsign", NNF_UN_SOFTSIGN, UN_F32, 3},
    {"Mish", NNF_UN_MISH, UN_F32, 10},
    {"Gelu", NNF_UN_GELU, UN_F32, 8},
    {"Erf", NNF_UN_ERF, UN_F32, 4},
    {"Exp", NNF_UN_EXP, UN_F32, 4},
    {"Log", NNF_UN_LOG, UN_F32, 4},
    {"Sqrt", NNF_UN_SQRT, UN_F32, 2},
    {"Reciprocal", NNF_UN_RECIPROCAL, UN_F32, 1},
    {"Neg", NNF_UN_NEG, UN_F32 | UN_INT, 1},
    {"Abs", NNF_UN_ABS, UN_F32 | UN_INT, 1},
    {"Floor", NNF_UN_FLOOR, UN_F32, 1},
    {"Ceil", NNF_UN_CEIL, UN_F32, 1},
    {"Round", NNF_UN_ROUND, UN_F32, 1},
    {"Sign", NNF_UN_SIGN, UN_F32 | UN_INT, 1},
    {"Sin", NNF_UN_SIN, UN_F32, 4},
    {"Cos", NNF_UN_COS, UN_F32, 4},
    {"Tan", NNF_UN_TAN, UN_F32, 4},
    {"Asin", NNF_UN_ASIN, UN_F32, 4},
    {"Acos", NNF_UN_ACOS, UN_F32, 4},
    {"Atan", NNF_UN_ATAN, UN_F32, 4},
    {"Sinh", NNF_UN_SINH, UN_F32, 4},
    {"Cosh", NNF_UN_COSH, UN_F32, 4},
    {"Asinh", NNF_UN_ASINH, UN_F32, 4},
    {"Acosh", NNF_UN_ACOSH, UN_F32, 4},
    {"Atanh", NNF_UN_ATANH, UN_F32, 4},
    {"Not", NNF_UN_NOT, UN_BOOL_ONLY, 1},
    {"IsNaN", NNF_UN_ISNAN, UN_F32 | UN_TO_BOOL, 1},
    {"IsInf", NNF_UN_ISINF, UN_F32 | UN_TO_BOOL, 1},
};

static int unary_index(const char *name) {
    for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++)
        if (!strcmp(unary_ops[i].name, name))
            return (int)i;
    return -1;
}

nnf_status nnf_unary_init(NNF_INIT_ARGS) {
    int idx = unary_index(node->op_type);
    if (idx < 0)
        return nnf_node_error(node, NNF_ERR_INTERNAL, "not a unary operator");
    nnf_unary_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    if (!p)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory");
    p->op = unary_ops[idx].op;
    switch (p->op) {
    case NNF_UN_LEAKY_RELU: p->alpha = nnf_attr_float(node, "alpha", 0.01f); break;
    case NNF_UN_ELU:
    case NNF_UN_CELU:
    case NNF_UN_THRESHOLDED_RELU: p->alpha = nnf_attr_float(node, "alpha", 1.0f); break;
    case NNF_UN_SELU:
        p->alpha = nnf_attr_float(node, "alpha", 1.67326319217681884765625f);
        p->gamma = nnf_attr_float(node, "gamma", 1.05070102214813232421875f);
        break;
    case NNF_UN_HARD_SIGMOID:
        p->alpha = nnf_attr_float(node, "alpha", 0.2f);
        p->beta = nnf_attr_float(node, "beta", 0.5f);
        break;
    case NNF_UN_GELU: {
        const char *approx = nnf_attr_string(node, "approximate", "none");
        if (!strcmp(approx, "tanh"))
            p->alpha = 1.0f;
        else if (strcmp(approx, "none"))
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                                  "attribute approximate='%s' is not 'none' or 'tanh'", approx);
        break;
    }
    case NNF_UN_ISINF:
        p->detect_negative = (int)nnf_attr_int(node, "detect_negative", 1);
        p->detect_positive = (int)nnf_attr_int(node, "detect_positive", 1);
        break;
    default: break;
    }
    if (p->op == NNF_UN_CELU && p->alpha == 0.0f)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute alpha must not be 0");
    node->params = p;
    return NNF_OK;
}

nnf_status nnf_unary_infer(NNF_INFER_ARGS) {
    NNF_CHECK(need_input(node, in, 0));
    int idx = unary_index(node->op_type);
    int types = idx >= 0 ? unary_ops[idx].types : 0;
    nnf_dtype t = in[0].dtype;
    int ok = (t == NNF_DTYPE_FLOAT32 && (types & UN_F32)) ||
             ((t == NNF_DTYPE_INT32 || t == NNF_DTYPE_INT64) && (types & UN_INT)) ||
             (t == NNF_DTYPE_BOOL && (types & UN_BOOL_ONLY));
    if (!ok)
        return bad_dtype(node, 0, t);
    out[0].dtype = (types & UN_TO_BOOL) ? NNF_DTYPE_BOOL : t;
    out[0].shape = in[0].shape;
    return NNF_OK;
}

double nnf_unary_cost(NNF_COST_ARGS) {
    int idx = unary_index(node->op_type);
    return numel_or_zero(&out[0]) * (idx >= 0 ? unary_ops[idx].flops : 1.0);
}

/* ---- Clip ------------------------------------------------------------- */

nnf_status nnf_clip_init(NNF_INIT_ARGS) {
    nnf_clip_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    if (!p)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory");
    if (node->opset < 11) {
        /* the attribute defaults are the float range, not infinity */
        p->min = nnf_attr_float(node, "min", -FLT_MAX);
        p->max = nnf_attr_float(node, "max", FLT_MAX);
    } else {
        p->bounds_from_inputs = 1;
        p->min = -INFINITY;
        p->max = INFINITY;
    }
    node->params = p;
    return NNF_OK;
}

nnf_status nnf_clip_infer(NNF_INFER_ARGS) {
    NNF_CHECK(need_input(node, in, 0));
    nnf_dtype t = in[0].dtype;
    if (t != NNF_DTYPE_FLOAT32 && !(node->opset >= 13 && is_f32_i32_i64(t)))
        return bad_dtype(node, 0, t);
    for (int k = 1; k < node->n_inputs && k < 3; k++) {
        if (!in[k].present)
            continue;
        if (in[k].dtype != t)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "bound input %d is %s, input is %s",
                                  k, nnf_dtype_name(in[k].dtype), nnf_dtype_name(t));
        int64_t n = nnf_shape_numel(&in[k].shape);
        if (n > 1)
            return nnf_node_error(node, NNF_ERR_SHAPE, "bound input %d is not a scalar", k);
    }
    out[0].dtype = t;
    out[0].shape = in[0].shape;
    return NNF_OK;
}

double nnf_clip_cost(NNF_COST_ARGS) {
    return 2.0 * numel_or_zero(&out[0]);
}

/* ---- Softmax, LogSoftmax, Hardmax -------------------------------------- */

nnf_status nnf_softmax_init(NNF_INIT_ARGS) {
    nnf_softmax_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    if (!p)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory");
    if (!strcmp(node->op_type, "LogSoftmax"))
        p->kind = NNF_LOG_SOFTMAX;
    else if (!strcmp(node->op_type, "Hardmax"))
        p->kind = NNF_HARDMAX;
    else
        p->kind = NNF_SOFTMAX;
    p->coerce_2d = node->opset < 13;
    p->axis = nnf_attr_int(node, "axis", p->coerce_2d ? 1 : -1);
    node->params = p;
    return NNF_OK;
}

nnf_status nnf_softmax_infer(NNF_INFER_ARGS) {
    const nnf_softmax_params *p = node->params;
    NNF_CHECK(need_input(node, in, 0));
    if (in[0].dtype != NNF_DTYPE_FLOAT32)
        return bad_dtype(node, 0, in[0].dtype);
    if (in[0].shape.rank > 0) {
        int axis;
        NNF_CHECK(nnf_norm_axis(node, p->axis, in[0].shape.rank, &axis));
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = in[0].shape;
    return NNF_OK;
}

double nnf_softmax_cost(NNF_COST_ARGS) {
    return 6.0 * numel_or_zero(&out[0]);
}

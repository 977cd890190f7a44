/* Typed parameters of the element-wise, activation and softmax operators,
 * shared by their definitions (ops/elementwise.c) and reference kernels
 * (kernels/ref/). init fills them from the node's attributes; kernels never
 * read attributes themselves. */
#ifndef NNF_OPS_ELEMENTWISE_H
#define NNF_OPS_ELEMENTWISE_H

#include "kernels/ref/broadcast.h"
#include "ops/op.h"

typedef enum nnf_binop {
    NNF_BIN_ADD = 0, /* also Sum */
    NNF_BIN_SUB,
    NNF_BIN_MUL,
    NNF_BIN_DIV, /* integers truncate toward zero; x/0 gives 0 instead of trapping */
    NNF_BIN_POW,
    NNF_BIN_MAX,
    NNF_BIN_MIN,
    NNF_BIN_MOD, /* fmod=0: sign of the divisor (Python, floats too as in Mod-28); fmod=1: C fmod */
    NNF_BIN_PRELU, /* x < 0 ? slope * x : x; slope broadcasts to x only */
    NNF_BIN_EQUAL,
    NNF_BIN_LESS,
    NNF_BIN_GREATER,
    NNF_BIN_LESS_EQUAL,
    NNF_BIN_GREATER_EQUAL,
    NNF_BIN_AND,
    NNF_BIN_OR,
    NNF_BIN_XOR,
    NNF_BIN_SHIFT_LEFT, /* BitShift-28 semantics, signed types included */
    NNF_BIN_SHIFT_RIGHT,
} nnf_binop;

/* Add, Sub, ..., Sum, Mean, Max, Min (variadic: folded left to right). */
typedef struct nnf_binary_params {
    nnf_binop op;
    int fmod;
    int mean; /* Mean: the folded sum is divided by the input count */
    /* Opsets before 7 broadcast B to A only when broadcast=1, aligning B's
     * first dim with A's dim `legacy_axis` (-1 = align trailing dims). */
    int legacy;
    int legacy_broadcast;
    int64_t legacy_axis;
} nnf_binary_params;

typedef enum nnf_unop {
    NNF_UN_RELU = 0,
    NNF_UN_LEAKY_RELU,       /* alpha */
    NNF_UN_ELU,              /* alpha */
    NNF_UN_SELU,             /* alpha, gamma */
    NNF_UN_CELU,             /* alpha */
    NNF_UN_THRESHOLDED_RELU, /* alpha */
    NNF_UN_SIGMOID,
    NNF_UN_HARD_SIGMOID, /* alpha, beta */
    NNF_UN_HARD_SWISH,
    NNF_UN_TANH,
    NNF_UN_SOFTPLUS,
    NNF_UN_SOFTSIGN,
    NNF_UN_MISH,
    NNF_UN_GELU, /* approximate: tanh when alpha != 0 */
    NNF_UN_ERF,
    NNF_UN_EXP,
    NNF_UN_LOG,
    NNF_UN_SQRT,
    NNF_UN_RECIPROCAL,
    NNF_UN_NEG,
    NNF_UN_ABS,
    NNF_UN_FLOOR,
    NNF_UN_CEIL,
    NNF_UN_ROUND, /* half to even */
    NNF_UN_SIGN,
    NNF_UN_SIN,
    NNF_UN_COS,
    NNF_UN_TAN,
    NNF_UN_ASIN,
    NNF_UN_ACOS,
    NNF_UN_ATAN,
    NNF_UN_SINH,
    NNF_UN_COSH,
    NNF_UN_ASINH,
    NNF_UN_ACOSH,
    NNF_UN_ATANH,
    NNF_UN_NOT,   /* bool */
    NNF_UN_ISNAN, /* float32 -> bool */
    NNF_UN_ISINF, /* float32 -> bool; detect_negative/positive */
} nnf_unop;

typedef struct nnf_unary_params {
    nnf_unop op;
    float alpha, beta, gamma;
    int detect_negative, detect_positive;
} nnf_unary_params;

/* Clip: bounds from attributes (opset < 11) or from optional inputs 1 and 2. */
typedef struct nnf_clip_params {
    int bounds_from_inputs;
    float min, max;
} nnf_clip_params;

typedef enum nnf_softmax_kind {
    NNF_SOFTMAX = 0,
    NNF_LOG_SOFTMAX,
    NNF_HARDMAX,
} nnf_softmax_kind;

/* Opsets before 13 flatten the input to 2D at `axis` and normalise each row
 * (coerce_2d); from 13 the normalisation runs along `axis` only. */
typedef struct nnf_softmax_params {
    nnf_softmax_kind kind;
    int64_t axis;
    int coerce_2d;
} nnf_softmax_params;

/* The row function of a binary op for these input dtypes (NULL when the
 * combination is not supported); infer uses it to validate dtypes. */
nnf_bcast_row_fn nnf_ref_binary_row(const nnf_binary_params *p, nnf_dtype a, nnf_dtype b);

#endif

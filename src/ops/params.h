/* Typed attribute structs shared between an operator's definition (ops/),
 * its reference kernel (kernels/ref/) and its optimised kernels and plans.
 * Structs used by one op only live next to that op. */
#ifndef NNF_OPS_PARAMS_H
#define NNF_OPS_PARAMS_H

#include "ir/graph.h"

#include <stdint.h>

/* An activation applied as a kernel epilogue (set by fusion passes; NONE from import). */
typedef enum nnf_act_kind {
    NNF_ACT_NONE = 0,
    NNF_ACT_RELU,
    NNF_ACT_CLIP,        /* min(max(x, alpha), beta): ReLU6 is alpha=0, beta=6 */
    NNF_ACT_LEAKY_RELU,  /* alpha = slope */
    NNF_ACT_SIGMOID,
    NNF_ACT_SILU,        /* x * sigmoid(x) */
    NNF_ACT_TANH,
    NNF_ACT_HARD_SIGMOID, /* max(0, min(1, alpha*x + beta)) */
    NNF_ACT_HARD_SWISH,   /* x * max(0, min(1, x/6 + 1/2)) */
    NNF_ACT_GELU_ERF,     /* 0.5x(1+erf(x/sqrt2)) */
    NNF_ACT_GELU_TANH,    /* 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))) */
} nnf_act_kind;

/* X(kind) for every nnf_act_kind: kernels that instantiate one epilogue per
 * activation at compile time switch over this list. */
#define NNF_ACT_KINDS(X)                                                                           \
    X(NNF_ACT_NONE)                                                                                \
    X(NNF_ACT_RELU)                                                                                \
    X(NNF_ACT_CLIP)                                                                                \
    X(NNF_ACT_LEAKY_RELU)                                                                          \
    X(NNF_ACT_SIGMOID)                                                                             \
    X(NNF_ACT_SILU)                                                                                \
    X(NNF_ACT_TANH)                                                                                \
    X(NNF_ACT_HARD_SIGMOID)                                                                        \
    X(NNF_ACT_HARD_SWISH)                                                                          \
    X(NNF_ACT_GELU_ERF)                                                                            \
    X(NNF_ACT_GELU_TANH)

typedef struct nnf_activation {
    nnf_act_kind kind;
    float alpha, beta;
} nnf_activation;

typedef enum nnf_auto_pad {
    NNF_AUTO_PAD_NOTSET = 0,
    NNF_AUTO_PAD_SAME_UPPER,
    NNF_AUTO_PAD_SAME_LOWER,
    NNF_AUTO_PAD_VALID,
} nnf_auto_pad;

#define NNF_MAX_SPATIAL 3

/* Conv, ConvTranspose, MaxPool, AveragePool, LpPool. Arrays hold `spatial`
 * entries. kernel[] is 0 until known (Conv takes it from the weight shape).
 * When auto_pad != NOTSET the explicit pads are ignored and resolved from the
 * input shape with nnf_conv_resolve_pads. */
typedef struct nnf_conv_params {
    int spatial;
    int64_t kernel[NNF_MAX_SPATIAL];
    int64_t strides[NNF_MAX_SPATIAL];
    int64_t dilations[NNF_MAX_SPATIAL];
    int64_t pads_begin[NNF_MAX_SPATIAL];
    int64_t pads_end[NNF_MAX_SPATIAL];
    nnf_auto_pad auto_pad;
    int64_t group;
    /* ConvTranspose */
    int64_t output_padding[NNF_MAX_SPATIAL];
    int64_t output_shape[NNF_MAX_SPATIAL];
    int has_output_shape;
    /* pools */
    int ceil_mode;
    int count_include_pad;
    int storage_order;
    int64_t p; /* LpPool */
    /* epilogue (Conv only): activation after bias; residual input index or -1 */
    nnf_activation act;
    int residual_input; /* a fused Add's other operand, as node input index; -1 = none */
    int residual_after_act; /* y = act(conv + bias) + residual, else act(conv + bias + residual) */
} nnf_conv_params;

/* Gemm / MatMul. */
typedef struct nnf_gemm_params {
    int trans_a, trans_b;
    float alpha, beta;
    nnf_activation act;
    int residual_input; /* -1 = none */
    int bias_input;     /* MatMul: a fused constant bias row [N], added before the residual; -1 = none */
    /* MatMul: operand s (0: A, 1: B) is input s transposed by perm[s] when
     * bit s of `permuted` is set (a Transpose folded by fold_transpose): its
     * dims[i] are the input's dims[perm[s][i]], read in place at the input's
     * strides. */
    unsigned permuted;
    int8_t perm[2][NNF_MAX_RANK];
} nnf_gemm_params;

/* The shape of MatMul operand s as the product reads it, from input s's. */
static inline nnf_shape nnf_matmul_operand_shape(const nnf_gemm_params *p, int s,
                                                 const nnf_shape *in) {
    nnf_shape t = *in;
    if (p && (p->permuted >> s & 1u))
        for (int i = 0; i < in->rank; i++) {
            t.dims[i] = in->dims[p->perm[s][i]];
            t.dim_names[i] = in->dim_names[p->perm[s][i]];
        }
    return t;
}

/* MatMul operand s as the product reads it, from input s's dims (rank r):
 * its dims and its strides in floats (the input contiguous). */
static inline void nnf_matmul_operand(const nnf_gemm_params *p, int s, int r, const int64_t *dims,
                                      int64_t *ldims, int64_t *lstrides) {
    int64_t st[NNF_MAX_RANK], acc = 1;
    for (int i = r - 1; i >= 0; i--) {
        st[i] = acc;
        acc *= dims[i];
    }
    for (int i = 0; i < r; i++) {
        int j = p && (p->permuted >> s & 1u) ? p->perm[s][i] : i;
        ldims[i] = dims[j];
        lstrides[i] = st[j];
    }
}

#endif

/* Scalar activation formulas, one definition each. The unary operators'
 * reference kernels inline these, and GEMM/conv epilogues reach them through
 * nnf_act_apply, so a fused and an unfused graph compute the same numbers.
 *
 * NaN inputs propagate (as numpy does) wherever the formula allows it. */
#ifndef NNF_KERNELS_REF_ACTIVATION_H
#define NNF_KERNELS_REF_ACTIVATION_H

#include "ops/params.h"

#include <math.h>

static inline float nnf_f32_relu(float x) {
    return x < 0.0f ? 0.0f : x;
}

static inline float nnf_f32_leaky_relu(float x, float alpha) {
    return x < 0.0f ? alpha * x : x;
}

/* Clip: min(max(x, lo), hi); when lo > hi every value becomes hi (ONNX). */
static inline float nnf_f32_clip(float x, float lo, float hi) {
    if (x < lo)
        x = lo;
    if (x > hi)
        x = hi;
    return x;
}

/* Split by sign so exp never overflows: large |x| saturates to 0 or 1. */
static inline float nnf_f32_sigmoid(float x) {
    if (x >= 0.0f)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

static inline float nnf_f32_silu(float x) {
    return x * nnf_f32_sigmoid(x);
}

static inline float nnf_f32_tanh(float x) {
    return tanhf(x);
}

static inline float nnf_f32_hard_sigmoid(float x, float alpha, float beta) {
    float y = alpha * x + beta;
    return y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
}

static inline float nnf_f32_hard_swish(float x) {
    return x * nnf_f32_hard_sigmoid(x, 1.0f / 6.0f, 0.5f);
}

static inline float nnf_f32_gelu_erf(float x) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

static inline float nnf_f32_gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

static inline float nnf_f32_elu(float x, float alpha) {
    return x < 0.0f ? alpha * expm1f(x) : x;
}

static inline float nnf_f32_selu(float x, float alpha, float gamma) {
    return x <= 0.0f ? gamma * alpha * expm1f(x) : gamma * x;
}

/* max(0,x) + min(0, alpha*(exp(x/alpha)-1)), which for alpha > 0 is a select. */
static inline float nnf_f32_celu(float x, float alpha) {
    return x > 0.0f ? x : alpha * expm1f(x / alpha);
}

static inline float nnf_f32_thresholded_relu(float x, float alpha) {
    return x > alpha ? x : 0.0f;
}

/* log(1 + e^x) without overflow for large x. */
static inline float nnf_f32_softplus(float x) {
    return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}

static inline float nnf_f32_softsign(float x) {
    return x / (1.0f + fabsf(x));
}

static inline float nnf_f32_mish(float x) {
    return x * tanhf(nnf_f32_softplus(x));
}

/* Apply an epilogue activation to one value. NNF_ACT_NONE returns x. */
float nnf_act_apply(const nnf_activation *act, float x);

#endif

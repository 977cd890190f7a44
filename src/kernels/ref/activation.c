/* The epilogue entry point over the shared scalar formulas. */
#include "kernels/ref/activation.h"

float nnf_act_apply(const nnf_activation *act, float x) {
    switch (act->kind) {
    case NNF_ACT_NONE: return x;
    case NNF_ACT_RELU: return nnf_f32_relu(x);
    case NNF_ACT_CLIP: return nnf_f32_clip(x, act->alpha, act->beta);
    case NNF_ACT_LEAKY_RELU: return nnf_f32_leaky_relu(x, act->alpha);
    case NNF_ACT_SIGMOID: return nnf_f32_sigmoid(x);
    case NNF_ACT_SILU: return nnf_f32_silu(x);
    case NNF_ACT_TANH: return nnf_f32_tanh(x);
    case NNF_ACT_HARD_SIGMOID: return nnf_f32_hard_sigmoid(x, act->alpha, act->beta);
    case NNF_ACT_HARD_SWISH: return nnf_f32_hard_swish(x);
    case NNF_ACT_GELU_ERF: return nnf_f32_gelu_erf(x);
    case NNF_ACT_GELU_TANH: return nnf_f32_gelu_tanh(x);
    }
    return x;
}

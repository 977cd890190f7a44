/* The common conv/GEMM epilogues in a few instructions: alpha = 1, a bias,
 * a residual added before the activation, and an activation that is a clamp
 * (none, ReLU, Clip/ReLU6). Anything else goes through nnf_ep8. Decided once
 * per kernel call, so the per-vector work carries no switch and no call.
 * NaN propagates as in nnf_act8: the value is the second operand of min/max. */
#ifndef NNF_KERNELS_X86_EP_FAST_AVX2_H
#define NNF_KERNELS_X86_EP_FAST_AVX2_H

#include "kernels/x86/vmath_avx2.h"

#include <math.h>

typedef struct nnf_ep_fast {
    int clamp_only; /* the fast form applies */
    int clamp;      /* lo/hi are not both infinite */
    int bias;       /* add the bias vector (adding 0 would turn -0 into +0) */
    __m256 lo, hi;
} nnf_ep_fast;

static inline nnf_ep_fast nnf_ep_fast_init(const nnf_epilogue *e) {
    nnf_ep_fast f = {.clamp_only = 0, .clamp = 0};
    if (!nnf_epilogue_clamp_only(e))
        return f;
    float lo = -INFINITY, hi = INFINITY;
    switch (e->act.kind) {
    case NNF_ACT_NONE: break;
    case NNF_ACT_RELU: lo = 0.0f; break;
    case NNF_ACT_CLIP:
        lo = e->act.alpha;
        hi = e->act.beta;
        break;
    default: return f;
    }
    f.clamp_only = 1;
    f.bias = e->bias_kind != NNF_BIAS_NONE;
    f.clamp = lo != -INFINITY || hi != INFINITY;
    f.lo = _mm256_set1_ps(lo);
    f.hi = _mm256_set1_ps(hi);
    return f;
}

/* v + bias (already a vector: broadcast per row, or loaded per column) +
 * residual (NULL: none; loaded whole when full, else under mask), clamped. */
static inline __attribute__((always_inline)) __m256 nnf_ep_fast8(const nnf_ep_fast *f, __m256 v,
                                                                 __m256 bias, const float *res,
                                                                 int full, __m256i mask) {
    if (f->bias)
        v = _mm256_add_ps(v, bias);
    if (res)
        v = _mm256_add_ps(v, full ? _mm256_loadu_ps(res) : _mm256_maskload_ps(res, mask));
    if (f->clamp)
        v = _mm256_min_ps(f->hi, _mm256_max_ps(f->lo, v));
    return v;
}

#endif

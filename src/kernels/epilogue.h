/* The post-ops a GEMM or convolution applies to its output tile while the
 * tile is still in registers: what operator fusion buys.
 *
 *   y = alpha * (A·B) + bias[row or col]
 *   y = y + residual_scale * R        (when residual && !residual_after_act)
 *   y = act(y)
 *   y = y + residual_scale * R        (when residual && residual_after_act)
 *
 * R is a matrix shaped like C with its own row stride. Every pointer is
 * borrowed for the duration of the kernel call. */
#ifndef NNF_KERNELS_EPILOGUE_H
#define NNF_KERNELS_EPILOGUE_H

#include "kernels/ref/activation.h"
#include "ops/params.h"

#include <stddef.h>

typedef enum nnf_bias_kind {
    NNF_BIAS_NONE = 0,
    NNF_BIAS_PER_ROW, /* bias[i] for row i of C (conv: per output channel) */
    NNF_BIAS_PER_COL, /* bias[j] for column j of C (Gemm/MatMul bias) */
} nnf_bias_kind;

typedef struct nnf_epilogue {
    float alpha;
    nnf_bias_kind bias_kind;
    const float *bias;
    nnf_activation act;
    const float *residual; /* NULL = none */
    size_t ld_residual;
    float residual_scale;
    int residual_after_act;
} nnf_epilogue;

static inline nnf_epilogue nnf_epilogue_default(void) {
    nnf_epilogue e = {.alpha = 1.0f, .residual_scale = 1.0f};
    return e;
}

/* The epilogue of image b's group g of a conv with oc output channels, ocg
 * a group, plane output values a channel: the group's biases and its
 * residual block, a row a channel. */
static inline nnf_epilogue nnf_epilogue_at_group(const nnf_epilogue *ep, size_t oc, size_t ocg,
                                                 size_t plane, size_t b, size_t g) {
    nnf_epilogue e = *ep;
    if (e.bias)
        e.bias += g * ocg;
    if (e.residual) {
        e.residual += (b * oc + g * ocg) * plane;
        e.ld_residual = plane;
    }
    return e;
}

/* Nothing to apply: alpha 1, no bias, activation or residual. Drivers pass
 * NULL to the tiles instead (a plain GEMM 256^3 spent 6 % of its time
 * applying this one per row on AVX-512). */
static inline int nnf_epilogue_is_identity(const nnf_epilogue *e) {
    return e->alpha == 1.0f && e->bias_kind == NNF_BIAS_NONE && e->act.kind == NNF_ACT_NONE &&
           !e->residual;
}

/* The epilogue is a bias, an unscaled residual before the activation and a
 * clamp at most (alpha 1; no activation, ReLU or Clip): what the SIMD
 * kernels apply in registers (x86/ep_fast_avx2.h). */
static inline int nnf_epilogue_clamp_only(const nnf_epilogue *e) {
    return e && e->alpha == 1.0f &&
           !(e->residual && (e->residual_after_act || e->residual_scale != 1.0f)) &&
           (e->act.kind == NNF_ACT_NONE || e->act.kind == NNF_ACT_RELU ||
            e->act.kind == NNF_ACT_CLIP);
}

/* An activation of many dependent operations (an exp, erf or tanh and a
 * division): the SIMD tiles apply it to all their vectors side by side,
 * not row by row behind each other (x86/gemm_avx512.c, ep_tile_flat16). */
static inline int nnf_act_heavy(nnf_act_kind kind) {
    return kind == NNF_ACT_SIGMOID || kind == NNF_ACT_SILU || kind == NNF_ACT_TANH ||
           kind == NNF_ACT_GELU_ERF || kind == NNF_ACT_GELU_TANH;
}

/* What one microkernel call sees: C's tile is (m, n) at c. */
typedef struct nnf_tile_ep {
    int accumulate;           /* add the tile's current contents (K blocks after the first) */
    const nnf_epilogue *ep;   /* NULL except on the last K block */
    const float *bias;        /* ep->bias advanced to the tile's first row or column */
    const float *residual;    /* ep->residual advanced to the tile's origin */
    /* bytes past the B panel at which the kernel prefetches as it reads it
     * (0: its own distance) */
    ptrdiff_t b_prefetch;
    /* a contiguous run of lines (the next block of packed weights) the
     * kernel prefetches into L2 spread over its K loop, where the tier's
     * cfg says its kernel does (gemm.h, ukernel_prefetches) */
    const char *pf_next;
    size_t pf_lines;
} nnf_tile_ep;

/* The epilogue on one value at (row i, col j) of the tile, with the shared
 * reference formulas: the scalar tier and the oracle in tests use this. */
static inline float nnf_epilogue_scalar(const nnf_tile_ep *t, size_t i, size_t j, float acc) {
    const nnf_epilogue *e = t->ep;
    float y = e->alpha * acc;
    if (e->bias_kind == NNF_BIAS_PER_ROW)
        y += t->bias[i];
    else if (e->bias_kind == NNF_BIAS_PER_COL)
        y += t->bias[j];
    float r = t->residual ? e->residual_scale * t->residual[i * e->ld_residual + j] : 0.0f;
    if (t->residual && !e->residual_after_act)
        y += r;
    y = nnf_act_apply(&e->act, y);
    if (t->residual && e->residual_after_act)
        y += r;
    return y;
}

#endif

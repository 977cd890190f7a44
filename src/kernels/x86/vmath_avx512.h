/* AVX-512 versions of x86/vmath_avx2.h: the same polynomials on 16 lanes, so
 * the same error bounds hold. Included only by *_avx512.c files. */
#ifndef NNF_KERNELS_X86_VMATH_AVX512_H
#define NNF_KERNELS_X86_VMATH_AVX512_H

#include "kernels/epilogue.h"
#include "kernels/vmath.h"

#include "kernels/x86/avx512_intrin.h"

/* exp(S x) of a clamped x, S = +1 or -1 (a constant): n = round(S x log2 e),
 * r = S x - n ln 2 in two steps, then the polynomial. With S = -1 the
 * operations carry -r instead of r, every sign folded into an FMA's form
 * (fmadd for fnmadd, fnmadd for fmadd, fmsub for the last fmadd): each
 * rounds the negation of the same value, so exp(-x) is bit for bit
 * nnf_exp16 of -x, one operation shorter (no negation). */
static inline __attribute__((always_inline)) __m512 exp16_clamped(__m512 x, const int S) {
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(S * 1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 c1 = _mm512_set1_ps(0.693359375f), c2 = _mm512_set1_ps(-2.12194440e-4f);
    __m512 r = S > 0 ? _mm512_fnmadd_ps(n, c1, x) : _mm512_fmadd_ps(n, c1, x);
    r = S > 0 ? _mm512_fnmadd_ps(n, c2, r) : _mm512_fmadd_ps(n, c2, r);
    __m512 p = _mm512_set1_ps(NNF_EXP_Q4);
    const float q[4] = {NNF_EXP_Q3, NNF_EXP_Q2, NNF_EXP_Q1, NNF_EXP_Q0};
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        p = S > 0 ? _mm512_fmadd_ps(p, r, _mm512_set1_ps(q[i]))
                  : _mm512_fnmadd_ps(p, r, _mm512_set1_ps(q[i]));
    p = S > 0 ? _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r) : _mm512_fmsub_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    /* p * 2^n in one operation where AVX2 builds 2^n's bits (convert, add
     * the bias, shift) and multiplies: n is whole and in [-126, 127], so
     * the product is the same, bit for bit (checked on every 61st float),
     * and the exp three operations shorter (2.83 -> 2.33-2.65 ns a vector
     * on Intel, where zmm operations share two ports: the SiLU of every
     * YOLOv5s conv) */
    return _mm512_scalef_ps(p, n);
}

/* exp(x) for x <= 88 (or NaN): nnf_exp16 without its upper clamp, the
 * same results there (softmax's x - max <= 0). */
static inline __m512 nnf_exp16_upto88(__m512 x) {
    return exp16_clamped(_mm512_max_ps(_mm512_set1_ps(-87.33654f), x), 1);
}

static inline __m512 nnf_exp16(__m512 x) {
    return nnf_exp16_upto88(_mm512_min_ps(_mm512_set1_ps(88.0f), x));
}

/* exp(-x): nnf_exp16(-x)'s values without the negation. */
static inline __m512 nnf_exp_neg16(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(87.33654f), x);
    return exp16_clamped(_mm512_max_ps(_mm512_set1_ps(-88.0f), x), -1);
}

static inline __m512 nnf_sigmoid16(__m512 x) {
    __m512 one = _mm512_set1_ps(1.0f);
    return _mm512_div_ps(one, _mm512_add_ps(one, nnf_exp_neg16(x)));
}

/* x / (1 + exp(-x)): one division, as on AVX2, where x * sigmoid(x) also
 * multiplies (3.78 against 4.03-4.16 ns a vector with the negation; the
 * divider, 2.8 ns a vector alone here, and the exp's 16 operations on the
 * two zmm ports overlap) */
static inline __m512 nnf_silu16(__m512 x) {
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), nnf_exp_neg16(x)));
}

static inline __m512 nnf_tanh16(__m512 x) {
    __m512 lim = _mm512_set1_ps(7.90531110763549805f);
    x = _mm512_min_ps(lim, x);
    x = _mm512_max_ps(_mm512_sub_ps(_mm512_setzero_ps(), lim), x);
    __m512 x2 = _mm512_mul_ps(x, x);
    __m512 p = _mm512_set1_ps(-2.76076847742355e-16f);
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(2.00018790482477e-13f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-8.60467152213735e-11f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(5.12229709037114e-08f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(1.48572235717979e-05f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(6.37261928875436e-04f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(4.89352455891786e-03f));
    p = _mm512_mul_ps(p, x);
    __m512 q = _mm512_set1_ps(1.19825839466702e-06f);
    q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(1.18534705686654e-04f));
    q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(2.26843463243900e-03f));
    q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(4.89352518554385e-03f));
    return _mm512_div_ps(p, q);
}

static inline __m512 nnf_erf16(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(4.0f), x);
    x = _mm512_max_ps(_mm512_set1_ps(-4.0f), x);
    __m512 x2 = _mm512_mul_ps(x, x);
    __m512 p = _mm512_set1_ps(-2.72614225801306e-10f);
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(2.77068142495902e-08f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-2.10102402082508e-06f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-5.69250639462346e-05f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-7.34990630326855e-04f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-2.95459980854025e-03f));
    p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(-1.60960333262415e-02f));
    p = _mm512_mul_ps(p, x);
    __m512 q = _mm512_set1_ps(-1.45660718464996e-05f);
    q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(-2.13374055278905e-04f));
    q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(-1.68282697438203e-03f));
    q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(-7.37332916720468e-03f));
    q = _mm512_fmadd_ps(q, x2, _mm512_set1_ps(-1.42647390514189e-02f));
    return _mm512_div_ps(p, q);
}

static inline __m512 nnf_hard_sigmoid16(__m512 x, float alpha, float beta) {
    __m512 y = _mm512_fmadd_ps(x, _mm512_set1_ps(alpha), _mm512_set1_ps(beta));
    y = _mm512_max_ps(_mm512_setzero_ps(), y);
    return _mm512_min_ps(_mm512_set1_ps(1.0f), y);
}

static inline __m512 nnf_act16(__m512 v, const nnf_activation *a) {
    switch (a->kind) {
    case NNF_ACT_NONE: return v;
    case NNF_ACT_RELU: return _mm512_max_ps(_mm512_setzero_ps(), v);
    case NNF_ACT_CLIP:
        return _mm512_min_ps(_mm512_set1_ps(a->beta), _mm512_max_ps(_mm512_set1_ps(a->alpha), v));
    case NNF_ACT_LEAKY_RELU: {
        __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
        return _mm512_mask_mul_ps(v, neg, v, _mm512_set1_ps(a->alpha));
    }
    case NNF_ACT_SIGMOID: return nnf_sigmoid16(v);
    case NNF_ACT_SILU: return nnf_silu16(v);
    case NNF_ACT_TANH: return nnf_tanh16(v);
    case NNF_ACT_HARD_SIGMOID: return nnf_hard_sigmoid16(v, a->alpha, a->beta);
    case NNF_ACT_HARD_SWISH: return _mm512_mul_ps(v, nnf_hard_sigmoid16(v, 1.0f / 6.0f, 0.5f));
    case NNF_ACT_GELU_ERF: {
        __m512 e = nnf_erf16(_mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752f)));
        __m512 h = _mm512_mul_ps(v, _mm512_set1_ps(0.5f));
        return _mm512_fmadd_ps(h, e, h);
    }
    case NNF_ACT_GELU_TANH: {
        __m512 v3 = _mm512_mul_ps(_mm512_mul_ps(v, v), v);
        __m512 in = _mm512_fmadd_ps(v3, _mm512_set1_ps(0.044715f), v);
        __m512 th = nnf_tanh16(_mm512_mul_ps(in, _mm512_set1_ps(0.79788456080286536f)));
        __m512 h = _mm512_mul_ps(v, _mm512_set1_ps(0.5f));
        return _mm512_fmadd_ps(h, th, h);
    }
    }
    return v;
}

static inline __mmask16 nnf_mask16(size_t n) {
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
}

/* The epilogue's order on one vector whose bias and residual are loaded
 * (nnf_ep8_apply's, on 16 lanes); act may be a copy with its kind known at
 * compile time. */
static inline __attribute__((always_inline)) __m512
nnf_ep16_apply_act(__m512 v, const nnf_epilogue *e, const nnf_activation *act, int has_bias,
                   __m512 bias, int has_res, __m512 res) {
    if (e->alpha != 1.0f)
        v = _mm512_mul_ps(v, _mm512_set1_ps(e->alpha));
    if (has_bias)
        v = _mm512_add_ps(v, bias);
    if (has_res) {
        if (e->residual_scale != 1.0f)
            res = _mm512_mul_ps(res, _mm512_set1_ps(e->residual_scale));
        if (!e->residual_after_act)
            v = _mm512_add_ps(v, res);
    }
    v = nnf_act16(v, act);
    if (has_res && e->residual_after_act)
        v = _mm512_add_ps(v, res);
    return v;
}

static inline __attribute__((always_inline)) __m512
nnf_ep16_apply(__m512 v, const nnf_epilogue *e, int has_bias, __m512 bias, int has_res,
               __m512 res) {
    return nnf_ep16_apply_act(v, e, &e->act, has_bias, bias, has_res, res);
}

/* The epilogue on 16 values at row r, columns [col, col + 16) of the tile. */
static inline __m512 nnf_ep16(__m512 v, const nnf_tile_ep *t, size_t r, size_t col, __mmask16 k) {
    const nnf_epilogue *e = t->ep;
    __m512 bias = _mm512_setzero_ps(), res = _mm512_setzero_ps();
    if (e->bias_kind == NNF_BIAS_PER_ROW)
        bias = _mm512_set1_ps(t->bias[r]);
    else if (e->bias_kind == NNF_BIAS_PER_COL)
        bias = _mm512_maskz_loadu_ps(k, t->bias + col);
    if (t->residual)
        res = _mm512_maskz_loadu_ps(k, t->residual + r * e->ld_residual + col);
    return nnf_ep16_apply(v, e, e->bias_kind != NNF_BIAS_NONE, bias, t->residual != NULL, res);
}

#endif

/* AVX2+FMA vector math and epilogue helpers: included only by *_avx2.c files
 * (which are compiled with -mavx2 -mfma).
 *
 * Accuracy, measured by tests/c/test_gemm.c against double-precision libm over
 * a dense sweep (the test asserts these bounds):
 *   exp      x in [-87, 88]   max rel error 8.1e-8 (degree-6 polynomial; test bound 3e-7)
 *   sigmoid  x in [-30, 30]   max abs error 8.9e-8 (1/(1+exp(-x)); bound 2e-7)
 *   tanh     x in [-12, 12]   max abs error 2.6e-7 (Eigen's 13/6 rational; bound 4e-7)
 *   erf      x in [-6, 6]     max abs error 3.3e-7 (Eigen's 13/8 rational; bound 4e-7)
 *   silu     x in [-30, 30]   max rel error 1.7e-7 (nnf_silu8_fast, every SiLU of the
 *            tier; bound 3e-7)
 * Outside those ranges the functions saturate (tanh/erf reach +-1 within
 * 1e-6, sigmoid 0 or 1, exp clamps to [1.2e-38, 1.7e38]).
 * NaN in gives NaN out for every function: each clamp puts the input second
 * in min/max, which is the operand x86 returns when one is NaN. */
#ifndef NNF_KERNELS_X86_VMATH_AVX2_H
#define NNF_KERNELS_X86_VMATH_AVX2_H

#include "kernels/epilogue.h"
#include "kernels/vmath.h"

#include <immintrin.h>

/* The exp-based functions work on n vectors step by step across them
 * (nnf_exp8_n): each vector's chain is ~25 dependent operations, and one
 * vector at a time the out-of-order window overlapped only a few chains,
 * leaving the FMA pipes idle (SiLU: 14.8 cycles per vector alone, 11.2 four
 * side by side). Each vector gets the same operations in the same order
 * either way, so the results do not depend on n. Callers pass a constant
 * n (4 keeps every chain in registers); the 1-vector forms are n = 1. */
#define NNF_EACH(j, n) _Pragma("GCC unroll 16") for (int j = 0; j < (n); j++)

/* exp(x) = 2^n e^r with n = round(x log2 e): r = x - n ln 2 in two steps
 * (Cody-Waite), e^r = 1 + r + r^2 q(r) with q of degree 4 fitted for the
 * least relative error on |r| <= ln 2 / 2 (3.6e-9 with float coefficients,
 * below the float rounding of the steps around it; Cephes' degree-5 q was
 * one FMA more for the same measured error). p[j] = e^r; the caller scales
 * by 2^n. */
static inline __attribute__((always_inline)) void nnf_exp8_reduced_n(const __m256 *x,
                                                                     const __m256 *k, __m256 *p,
                                                                     int n) {
    __m256 r[16];
    NNF_EACH(j, n) {
        r[j] = _mm256_fnmadd_ps(k[j], _mm256_set1_ps(0.693359375f), x[j]);
        r[j] = _mm256_fnmadd_ps(k[j], _mm256_set1_ps(-2.12194440e-4f), r[j]);
        p[j] = _mm256_fmadd_ps(_mm256_set1_ps(NNF_EXP_Q4), r[j], _mm256_set1_ps(NNF_EXP_Q3));
    }
    NNF_EACH(j, n) p[j] = _mm256_fmadd_ps(p[j], r[j], _mm256_set1_ps(NNF_EXP_Q2));
    NNF_EACH(j, n) p[j] = _mm256_fmadd_ps(p[j], r[j], _mm256_set1_ps(NNF_EXP_Q1));
    NNF_EACH(j, n) p[j] = _mm256_fmadd_ps(p[j], r[j], _mm256_set1_ps(NNF_EXP_Q0));
    NNF_EACH(j, n) {
        p[j] = _mm256_fmadd_ps(p[j], _mm256_mul_ps(r[j], r[j]), r[j]);
        p[j] = _mm256_add_ps(p[j], _mm256_set1_ps(1.0f));
    }
}

static inline __attribute__((always_inline)) __m256 nnf_exp8_reduced(__m256 x, __m256 k) {
    __m256 p;
    nnf_exp8_reduced_n(&x, &k, &p, 1);
    return p;
}

static inline __attribute__((always_inline)) void nnf_exp8_n(__m256 *x, int n) {
    __m256 k[16], p[16];
    NNF_EACH(j, n) {
        /* 2^n stays a normal number for n in [-126, 127] */
        __m256 v = _mm256_min_ps(_mm256_set1_ps(88.0f), x[j]);
        x[j] = _mm256_max_ps(_mm256_set1_ps(-87.33654f), v);
        k[j] = _mm256_round_ps(_mm256_mul_ps(x[j], _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    nnf_exp8_reduced_n(x, k, p, n);
    NNF_EACH(j, n) {
        __m256i e = _mm256_slli_epi32(
            _mm256_add_epi32(_mm256_cvtps_epi32(k[j]), _mm256_set1_epi32(127)), 23);
        x[j] = _mm256_mul_ps(p[j], _mm256_castsi256_ps(e));
    }
}

static inline __m256 nnf_exp8(__m256 x) {
    nnf_exp8_n(&x, 1);
    return x;
}

/* 1 / (1 + exp(-x)) */
static inline __attribute__((always_inline)) void nnf_sigmoid8_n(__m256 *x, int n) {
    __m256 one = _mm256_set1_ps(1.0f);
    NNF_EACH(j, n) x[j] = _mm256_sub_ps(_mm256_setzero_ps(), x[j]);
    nnf_exp8_n(x, n);
    NNF_EACH(j, n) x[j] = _mm256_div_ps(one, _mm256_add_ps(one, x[j]));
}

static inline __m256 nnf_sigmoid8(__m256 x) {
    nnf_sigmoid8_n(&x, 1);
    return x;
}

/* x * sigmoid(x) = x / (1 + exp(-x)), one division (relative error under
 * 3e-7). A reciprocal estimate with a Newton step instead (an earlier
 * machine's vdivps took half of the SiLU epilogue) is four operations on
 * the FMA pipes where the division is one on the divider: on Zen 4 the
 * division form ran 10-15 % faster (~8.5 against ~9.5 cycles a vector,
 * four side by side). SiLU is the epilogue of every YOLOv5 conv (the GEMM
 * and NCHWc conv epilogues use this). Saturates like the AVX-512 tier:
 * x -> -inf gives x / 1.7e38 (-0 to -6e-9 for finite x; -inf at -inf) and
 * NaN stays NaN. */
static inline __attribute__((always_inline)) void nnf_silu8_fast_n(__m256 *x, int n) {
    __m256 one = _mm256_set1_ps(1.0f), d[16];
    NNF_EACH(j, n) d[j] = _mm256_sub_ps(_mm256_setzero_ps(), x[j]);
    nnf_exp8_n(d, n);
    NNF_EACH(j, n) x[j] = _mm256_div_ps(x[j], _mm256_add_ps(one, d[j]));
}

static inline __attribute__((always_inline)) __m256 nnf_silu8_fast(__m256 x) {
    nnf_silu8_fast_n(&x, 1);
    return x;
}

static inline __m256 nnf_tanh8(__m256 x) {
    __m256 lim = _mm256_set1_ps(7.90531110763549805f);
    x = _mm256_min_ps(lim, x);
    x = _mm256_max_ps(_mm256_sub_ps(_mm256_setzero_ps(), lim), x);
    __m256 x2 = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(-2.76076847742355e-16f);
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(2.00018790482477e-13f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-8.60467152213735e-11f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(5.12229709037114e-08f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(1.48572235717979e-05f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(6.37261928875436e-04f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(4.89352455891786e-03f));
    p = _mm256_mul_ps(p, x);
    __m256 q = _mm256_set1_ps(1.19825839466702e-06f);
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(1.18534705686654e-04f));
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(2.26843463243900e-03f));
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(4.89352518554385e-03f));
    return _mm256_div_ps(p, q);
}

static inline __m256 nnf_erf8(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(4.0f), x);
    x = _mm256_max_ps(_mm256_set1_ps(-4.0f), x);
    __m256 x2 = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(-2.72614225801306e-10f);
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(2.77068142495902e-08f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-2.10102402082508e-06f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-5.69250639462346e-05f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-7.34990630326855e-04f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-2.95459980854025e-03f));
    p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-1.60960333262415e-02f));
    p = _mm256_mul_ps(p, x);
    __m256 q = _mm256_set1_ps(-1.45660718464996e-05f);
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-2.13374055278905e-04f));
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-1.68282697438203e-03f));
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-7.37332916720468e-03f));
    q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(-1.42647390514189e-02f));
    return _mm256_div_ps(p, q);
}

static inline __m256 nnf_hard_sigmoid8(__m256 x, float alpha, float beta) {
    __m256 y = _mm256_fmadd_ps(x, _mm256_set1_ps(alpha), _mm256_set1_ps(beta));
    y = _mm256_max_ps(_mm256_setzero_ps(), y);
    return _mm256_min_ps(_mm256_set1_ps(1.0f), y);
}

static inline __m256 nnf_act8(__m256 v, const nnf_activation *a) {
    switch (a->kind) {
    case NNF_ACT_NONE: return v;
    case NNF_ACT_RELU: return _mm256_max_ps(_mm256_setzero_ps(), v);
    case NNF_ACT_CLIP:
        return _mm256_min_ps(_mm256_set1_ps(a->beta), _mm256_max_ps(_mm256_set1_ps(a->alpha), v));
    case NNF_ACT_LEAKY_RELU: {
        __m256 neg = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ);
        return _mm256_blendv_ps(v, _mm256_mul_ps(v, _mm256_set1_ps(a->alpha)), neg);
    }
    case NNF_ACT_SIGMOID: return nnf_sigmoid8(v);
    case NNF_ACT_SILU: return nnf_silu8_fast(v);
    case NNF_ACT_TANH: return nnf_tanh8(v);
    case NNF_ACT_HARD_SIGMOID: return nnf_hard_sigmoid8(v, a->alpha, a->beta);
    case NNF_ACT_HARD_SWISH: return _mm256_mul_ps(v, nnf_hard_sigmoid8(v, 1.0f / 6.0f, 0.5f));
    case NNF_ACT_GELU_ERF: {
        __m256 e = nnf_erf8(_mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f)));
        __m256 h = _mm256_mul_ps(v, _mm256_set1_ps(0.5f));
        return _mm256_fmadd_ps(h, e, h);
    }
    case NNF_ACT_GELU_TANH: {
        __m256 v3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
        __m256 in = _mm256_fmadd_ps(v3, _mm256_set1_ps(0.044715f), v);
        __m256 th = nnf_tanh8(_mm256_mul_ps(in, _mm256_set1_ps(0.79788456080286536f)));
        __m256 h = _mm256_mul_ps(v, _mm256_set1_ps(0.5f));
        return _mm256_fmadd_ps(h, th, h);
    }
    }
    return v;
}

static inline __m256i nnf_mask8(size_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Output block ob of ob_n 8-channel blocks holding oc channels (the last
 * one's lanes past oc are padding): *keep has its real lanes set; returns
 * its bias, zeros past oc, or zeros when there is no bias. */
static inline __m256 nnf_block_bias8(const float *bias, size_t oc, size_t ob, size_t ob_n,
                                     __m256 *keep) {
    size_t tail = oc % 8;
    int last = ob + 1 == ob_n && tail;
    *keep = _mm256_castsi256_ps(nnf_mask8(last ? tail : 8));
    if (!bias)
        return _mm256_setzero_ps();
    return last ? _mm256_maskload_ps(bias + ob * 8, nnf_mask8(tail))
                : _mm256_loadu_ps(bias + ob * 8);
}

/* The epilogue's order on one vector whose bias and residual are loaded:
 * alpha, the bias (when has_bias: adding 0 would turn -0 into +0), the
 * residual times its scale before the activation or after it. Shared by
 * the GEMM tile (nnf_ep8) and the kernels that load their own operands. */
static inline __attribute__((always_inline)) __m256
nnf_ep8_apply(__m256 v, const nnf_epilogue *e, const nnf_activation *act, int has_bias,
              __m256 bias, int has_res, __m256 res) {
    if (e->alpha != 1.0f)
        v = _mm256_mul_ps(v, _mm256_set1_ps(e->alpha));
    if (has_bias)
        v = _mm256_add_ps(v, bias);
    if (has_res) {
        if (e->residual_scale != 1.0f)
            res = _mm256_mul_ps(res, _mm256_set1_ps(e->residual_scale));
        if (!e->residual_after_act)
            v = _mm256_add_ps(v, res);
    }
    v = nnf_act8(v, act);
    if (has_res && e->residual_after_act)
        v = _mm256_add_ps(v, res);
    return v;
}

/* The epilogue on 8 values at row r, columns [col, col + 8) of the tile;
 * mask covers the valid columns (all when full). */
static inline __m256 nnf_ep8(__m256 v, const nnf_tile_ep *t, size_t r, size_t col, int full,
                             __m256i mask) {
    const nnf_epilogue *e = t->ep;
    __m256 bias = _mm256_setzero_ps(), res = _mm256_setzero_ps();
    if (e->bias_kind == NNF_BIAS_PER_ROW)
        bias = _mm256_set1_ps(t->bias[r]);
    else if (e->bias_kind == NNF_BIAS_PER_COL)
        bias = full ? _mm256_loadu_ps(t->bias + col) : _mm256_maskload_ps(t->bias + col, mask);
    if (t->residual) {
        const float *rp = t->residual + r * e->ld_residual + col;
        res = full ? _mm256_loadu_ps(rp) : _mm256_maskload_ps(rp, mask);
    }
    return nnf_ep8_apply(v, e, &e->act, e->bias_kind != NNF_BIAS_NONE, bias, t->residual != NULL,
                         res);
}

#endif

/* AVX2+FMA row kernels of the element-wise ops, softmax, reductions and the
 * 8x8 transpose. Loops run two vectors per step and finish with one masked
 * vector, so any n (including 1) touches only [0, n). Each op's formula is a
 * static inline function of the vector (and broadcast constants), expanded by
 * one loop macro with the op switch outside the loop. */
#include "base/cpu.h"
#include "kernels/eltwise_fast.h"
#include "kernels/vmath.h"
#include "kernels/x86/softmax_groups.h"
#include "kernels/x86/transpose_avx2.h"
#include "kernels/x86/vmath_avx2.h"
#include "ops/reduce.h"

#include <math.h>
#include <string.h>

typedef struct uconst {
    __m256 alpha, beta;
} uconst;

static inline __m256 u_relu(__m256 v, const uconst *c) {
    (void)c;
    return _mm256_max_ps(_mm256_setzero_ps(), v); /* NaN is the second operand: kept */
}
static inline __m256 u_leaky(__m256 v, const uconst *c) {
    __m256 neg = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ);
    return _mm256_blendv_ps(v, _mm256_mul_ps(v, c->alpha), neg);
}
/* x < lo ? lo : x, then > hi ? hi : x; NaN passes both */
static inline __m256 u_clip(__m256 v, const uconst *c) {
    return _mm256_min_ps(c->beta, _mm256_max_ps(c->alpha, v));
}
static inline __m256 u_tanh(__m256 v, const uconst *c) {
    (void)c;
    return nnf_tanh8(v);
}
/* nnf_exp8 clamps to [-87.3, 88] so that 2^n stays normal; outside that
 * exp(x) = exp(x/2)^2 gives +inf above 88.72 and gradual underflow below. */
static inline __m256 u_exp(__m256 v, const uconst *c) {
    (void)c;
    __m256 e = nnf_exp8(v);
    __m256 far = _mm256_or_ps(_mm256_cmp_ps(v, _mm256_set1_ps(88.0f), _CMP_GT_OQ),
                              _mm256_cmp_ps(v, _mm256_set1_ps(-87.0f), _CMP_LT_OQ));
    if (!_mm256_testz_ps(far, far)) {
        __m256 h = nnf_exp8(_mm256_mul_ps(v, _mm256_set1_ps(0.5f)));
        e = _mm256_blendv_ps(e, _mm256_mul_ps(h, h), far);
    }
    return e;
}
static inline __m256 u_erf(__m256 v, const uconst *c) {
    (void)c;
    return nnf_erf8(v);
}
static inline __m256 u_gelu_erf(__m256 v, const uconst *c) {
    (void)c;
    __m256 e = nnf_erf8(_mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f)));
    __m256 h = _mm256_mul_ps(v, _mm256_set1_ps(0.5f));
    return _mm256_fmadd_ps(h, e, h);
}
static inline __m256 u_gelu_tanh(__m256 v, const uconst *c) {
    (void)c;
    __m256 v3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
    __m256 in = _mm256_fmadd_ps(v3, _mm256_set1_ps(0.044715f), v);
    __m256 th = nnf_tanh8(_mm256_mul_ps(in, _mm256_set1_ps(0.79788456080286536f)));
    __m256 h = _mm256_mul_ps(v, _mm256_set1_ps(0.5f));
    return _mm256_fmadd_ps(h, th, h);
}
/* mul then add (not fmadd): the reference's rounding, so results match exactly */
static inline __m256 hsig(__m256 v, __m256 a, __m256 b) {
    __m256 y = _mm256_add_ps(_mm256_mul_ps(v, a), b);
    y = _mm256_max_ps(_mm256_setzero_ps(), y);
    return _mm256_min_ps(_mm256_set1_ps(1.0f), y);
}
static inline __m256 u_hard_sigmoid(__m256 v, const uconst *c) {
    return hsig(v, c->alpha, c->beta);
}
static inline __m256 u_hard_swish(__m256 v, const uconst *c) {
    (void)c;
    return _mm256_mul_ps(v, hsig(v, _mm256_set1_ps(1.0f / 6.0f), _mm256_set1_ps(0.5f)));
}
static inline __m256 u_sqrt(__m256 v, const uconst *c) {
    (void)c;
    return _mm256_sqrt_ps(v);
}
static inline __m256 u_neg(__m256 v, const uconst *c) {
    (void)c;
    return _mm256_xor_ps(v, _mm256_set1_ps(-0.0f));
}
static inline __m256 u_abs(__m256 v, const uconst *c) {
    (void)c;
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}
static inline __m256 u_recip(__m256 v, const uconst *c) {
    (void)c;
    return _mm256_div_ps(_mm256_set1_ps(1.0f), v);
}
static inline __m256 u_floor(__m256 v, const uconst *c) {
    (void)c;
    return _mm256_round_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
}
static inline __m256 u_ceil(__m256 v, const uconst *c) {
    (void)c;
    return _mm256_round_ps(v, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC);
}
static inline __m256 u_round(__m256 v, const uconst *c) {
    (void)c;
    return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline __m256 u_softsign(__m256 v, const uconst *c) {
    (void)c;
    __m256 d = _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v));
    return _mm256_div_ps(v, d);
}
static inline __m256 u_square(__m256 v, const uconst *c) {
    (void)c;
    return _mm256_mul_ps(v, v);
}
/* powf(x, 0.5): +0 for -0 (sqrt gives -0) and +inf for -inf (sqrt gives NaN) */
static inline __m256 u_pow_half(__m256 v, const uconst *c) {
    (void)c;
    __m256 s = _mm256_add_ps(_mm256_sqrt_ps(v), _mm256_setzero_ps());
    __m256 ninf = _mm256_cmp_ps(v, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ);
    return _mm256_blendv_ps(s, _mm256_set1_ps(INFINITY), ninf);
}

/* powf(x, n) for an integer n (0 < |n| <= NNF_EW_POW_INT_MAX, in alpha):
 * x^|n| by squaring in double, 1 / it for n < 0, rounded to float once
 * (each product's relative error 2^-53, far under a float's ulp; the
 * specials follow: NaN stays, 0^-n is +-inf with x's sign for odd n). */
static inline __m256d pow_int4(__m256d x, int m, bool neg) {
    __m256d r = _mm256_set1_pd(1.0);
    for (; m; m >>= 1) {
        if (m & 1)
            r = _mm256_mul_pd(r, x);
        x = _mm256_mul_pd(x, x);
    }
    return neg ? _mm256_div_pd(_mm256_set1_pd(1.0), r) : r;
}
static inline __m256 u_pow_int(__m256 v, const uconst *c) {
    int n = (int)_mm256_cvtss_f32(c->alpha), m = n < 0 ? -n : n;
    __m256d lo = pow_int4(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), m, n < 0);
    __m256d hi = pow_int4(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), m, n < 0);
    return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
}

#define UN_LOOP(F)                                                                                 \
    do {                                                                                           \
        size_t i = 0;                                                                              \
        for (; i + 16 <= n; i += 16) {                                                             \
            __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);                   \
            _mm256_storeu_ps(y + i, F(v0, &c));                                                    \
            _mm256_storeu_ps(y + i + 8, F(v1, &c));                                                \
        }                                                                                          \
        for (; i + 8 <= n; i += 8)                                                                 \
            _mm256_storeu_ps(y + i, F(_mm256_loadu_ps(x + i), &c));                                \
        if (i < n) {                                                                               \
            __m256i m = nnf_mask8(n - i);                                                          \
            _mm256_maskstore_ps(y + i, m, F(_mm256_maskload_ps(x + i, m), &c));                    \
        }                                                                                          \
    } while (0);                                                                                   \
    break

void nnf_ew_unary_avx2(const nnf_ew_unary *u, const float *x, float *y, size_t n) {
    const uconst c = {_mm256_set1_ps(u->alpha), _mm256_set1_ps(u->beta)};
    switch (u->op) {
    case NNF_EWU_RELU: UN_LOOP(u_relu);
    case NNF_EWU_LEAKY_RELU: UN_LOOP(u_leaky);
    case NNF_EWU_CLIP: UN_LOOP(u_clip);
    case NNF_EWU_SIGMOID: /* four vectors side by side (nnf_sigmoid8_n) */
        nnf_vmath_avx2(NNF_VM_SIGMOID, x, y, n);
        break;
    case NNF_EWU_TANH: UN_LOOP(u_tanh);
    case NNF_EWU_EXP: UN_LOOP(u_exp);
    case NNF_EWU_ERF: UN_LOOP(u_erf);
    case NNF_EWU_GELU_ERF: UN_LOOP(u_gelu_erf);
    case NNF_EWU_GELU_TANH: UN_LOOP(u_gelu_tanh);
    case NNF_EWU_HARD_SIGMOID: UN_LOOP(u_hard_sigmoid);
    case NNF_EWU_HARD_SWISH: UN_LOOP(u_hard_swish);
    case NNF_EWU_SQRT: UN_LOOP(u_sqrt);
    case NNF_EWU_NEG: UN_LOOP(u_neg);
    case NNF_EWU_ABS: UN_LOOP(u_abs);
    case NNF_EWU_RECIPROCAL: UN_LOOP(u_recip);
    case NNF_EWU_FLOOR: UN_LOOP(u_floor);
    case NNF_EWU_CEIL: UN_LOOP(u_ceil);
    case NNF_EWU_ROUND: UN_LOOP(u_round);
    case NNF_EWU_SOFTSIGN: UN_LOOP(u_softsign);
    case NNF_EWU_SQUARE: UN_LOOP(u_square);
    case NNF_EWU_POW_HALF: UN_LOOP(u_pow_half);
    case NNF_EWU_POW_INT: UN_LOOP(u_pow_int);
    case NNF_EWU_COUNT: break;
    }
}

/* ---- binary ----------------------------------------------------------------------- */

static inline __m256 b_add(__m256 p, __m256 q) {
    return _mm256_add_ps(p, q);
}
static inline __m256 b_sub(__m256 p, __m256 q) {
    return _mm256_sub_ps(p, q);
}
static inline __m256 b_mul(__m256 p, __m256 q) {
    return _mm256_mul_ps(p, q);
}
static inline __m256 b_div(__m256 p, __m256 q) {
    return _mm256_div_ps(p, q);
}
/* maxps gives p > q ? p : q (q when either is NaN); a NaN p is put back */
static inline __m256 b_max(__m256 p, __m256 q) {
    return _mm256_blendv_ps(_mm256_max_ps(p, q), p, _mm256_cmp_ps(p, p, _CMP_UNORD_Q));
}
static inline __m256 b_min(__m256 p, __m256 q) {
    return _mm256_blendv_ps(_mm256_min_ps(p, q), p, _mm256_cmp_ps(p, p, _CMP_UNORD_Q));
}
static inline __m256 b_prelu(__m256 p, __m256 q) {
    __m256 neg = _mm256_cmp_ps(p, _mm256_setzero_ps(), _CMP_LT_OQ);
    return _mm256_blendv_ps(p, _mm256_mul_ps(q, p), neg);
}

#define LDA(i) (mode == NNF_EW_SV ? sa : _mm256_loadu_ps(a + (i)))
#define LDB(i) (mode == NNF_EW_VS ? sb : _mm256_loadu_ps(b + (i)))

/* The mode is a loop invariant; the compiler unswitches these three loops. */
#define BIN_LOOP(F)                                                                                \
    do {                                                                                           \
        size_t i = 0;                                                                              \
        for (; i + 16 <= n; i += 16) {                                                             \
            __m256 r0 = F(LDA(i), LDB(i)), r1 = F(LDA(i + 8), LDB(i + 8));                         \
            _mm256_storeu_ps(y + i, r0);                                                           \
            _mm256_storeu_ps(y + i + 8, r1);                                                       \
        }                                                                                          \
        for (; i + 8 <= n; i += 8)                                                                 \
            _mm256_storeu_ps(y + i, F(LDA(i), LDB(i)));                                            \
        if (i < n) {                                                                               \
            __m256i m = nnf_mask8(n - i);                                                          \
            __m256 p = mode == NNF_EW_SV ? sa : _mm256_maskload_ps(a + i, m);                      \
            __m256 q = mode == NNF_EW_VS ? sb : _mm256_maskload_ps(b + i, m);                      \
            _mm256_maskstore_ps(y + i, m, F(p, q));                                                \
        }                                                                                          \
    } while (0);                                                                                   \
    break

void nnf_ew_binary_avx2(nnf_ew_binop op, nnf_ew_mode mode, const float *a, const float *b, float *y,
                        size_t n) {
    const __m256 sa = _mm256_set1_ps(a[0]), sb = _mm256_set1_ps(b[0]);
    switch (op) {
    case NNF_EWB_ADD: BIN_LOOP(b_add);
    case NNF_EWB_SUB: BIN_LOOP(b_sub);
    case NNF_EWB_MUL: BIN_LOOP(b_mul);
    case NNF_EWB_DIV: BIN_LOOP(b_div);
    case NNF_EWB_MAX: BIN_LOOP(b_max);
    case NNF_EWB_MIN: BIN_LOOP(b_min);
    case NNF_EWB_PRELU: BIN_LOOP(b_prelu);
    case NNF_EWB_COUNT: break;
    }
}

/* x * a + b as mul then add: BatchNormalization's reference rounding */
void nnf_ew_affine_avx2(const float *x, float *y, size_t n, float a, float b) {
    const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 r0 = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), va), vb);
        __m256 r1 = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), va), vb);
        _mm256_storeu_ps(y + i, r0);
        _mm256_storeu_ps(y + i + 8, r1);
    }
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), va), vb));
    if (i < n) {
        __m256i m = nnf_mask8(n - i);
        _mm256_maskstore_ps(y + i, m,
                            _mm256_add_ps(_mm256_mul_ps(_mm256_maskload_ps(x + i, m), va), vb));
    }
}

/* ---- reductions --------------------------------------------------------------------- */

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float hmax8(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float hmin8(__m256 v) {
    __m128 s = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_min_ps(s, _mm_movehl_ps(s, s));
    s = _mm_min_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Blocks of 256 summed in four float vectors, blocks carried in double: the
 * float error stays that of a 32-term sum whatever n is. */
/* x, |x| or x * x of a vector (of a constant once inlined). */
static inline __m256 sum_term(__m256 v, nnf_ew_sum_of of) {
    if (of == NNF_SUM_ABS)
        return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
    return of == NNF_SUM_SQUARE ? _mm256_mul_ps(v, v) : v;
}

static inline __attribute__((always_inline)) double sum_of(const float *x, size_t n,
                                                           nnf_ew_sum_of of) {
    double total = 0.0;
    size_t i = 0;
    while (i < n) {
        size_t end = n - i > 256 ? i + 256 : n;
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        for (; i + 32 <= end; i += 32) {
            s0 = _mm256_add_ps(s0, sum_term(_mm256_loadu_ps(x + i), of));
            s1 = _mm256_add_ps(s1, sum_term(_mm256_loadu_ps(x + i + 8), of));
            s2 = _mm256_add_ps(s2, sum_term(_mm256_loadu_ps(x + i + 16), of));
            s3 = _mm256_add_ps(s3, sum_term(_mm256_loadu_ps(x + i + 24), of));
        }
        for (; i + 8 <= end; i += 8)
            s0 = _mm256_add_ps(s0, sum_term(_mm256_loadu_ps(x + i), of));
        if (i < end) {
            s1 = _mm256_add_ps(s1, sum_term(_mm256_maskload_ps(x + i, nnf_mask8(end - i)), of));
            i = end;
        }
        total += (double)hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    }
    return total;
}

double nnf_ew_sum_avx2(const float *x, size_t n, nnf_ew_sum_of of) {
    switch (of) {
    case NNF_SUM_ABS: return sum_of(x, n, NNF_SUM_ABS);
    case NNF_SUM_SQUARE: return sum_of(x, n, NNF_SUM_SQUARE);
    default: return sum_of(x, n, NNF_SUM_X);
    }
}

float nnf_ew_max_avx2(const float *x, size_t n, int nan_wins) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 m0 = ninf, m1 = ninf, bad = _mm256_setzero_ps();
    size_t i = 0;
    /* maxps(x, m) keeps m when x is NaN, so NaNs are skipped and counted apart */
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        m0 = _mm256_max_ps(v0, m0);
        m1 = _mm256_max_ps(v1, m1);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(v0, v1, _CMP_UNORD_Q));
    }
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        m0 = _mm256_max_ps(v, m0);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    if (i < n) {
        __m256i mk = nnf_mask8(n - i);
        __m256 v = _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + i, mk), _mm256_castsi256_ps(mk));
        m0 = _mm256_max_ps(v, m0);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    if (nan_wins && !_mm256_testz_ps(bad, bad))
        return NAN;
    return hmax8(_mm256_max_ps(m0, m1));
}

float nnf_ew_min_avx2(const float *x, size_t n) {
    const __m256 pinf = _mm256_set1_ps(INFINITY);
    __m256 m0 = pinf, bad = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        m0 = _mm256_min_ps(v, m0);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    if (i < n) {
        __m256i mk = nnf_mask8(n - i);
        __m256 v = _mm256_blendv_ps(pinf, _mm256_maskload_ps(x + i, mk), _mm256_castsi256_ps(mk));
        m0 = _mm256_min_ps(v, m0);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    if (!_mm256_testz_ps(bad, bad))
        return NAN;
    return hmin8(m0);
}

/* ---- softmax -------------------------------------------------------------------------- */

/* nnf_exp8 for arguments x - max <= 0 (or NaN): no upper clamp, and the
 * integer part rounded by adding 1.5 * 2^23 + 127 to the rounded product,
 * which leaves n + 127 in the low mantissa bits (the same round-to-nearest
 * of the same product as nnf_exp8's round, so the same results) and saves
 * the round, convert and add. */
static inline __m256 exp8_nonpos(__m256 x) {
    const __m256 magic = _mm256_set1_ps(12583039.0f); /* 0x4B40007F */
    x = _mm256_max_ps(_mm256_set1_ps(-87.33654f), x);
    __m256 t = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), magic);
    __m256 n = _mm256_sub_ps(t, magic);
    __m256 p = nnf_exp8_reduced(x, n);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23)));
}

/* R rows of n (R a constant): the max, exp(x - max) stored and summed,
 * the scale (LogSoftmax: the sum only, then (x - max) - log(sum)), each pass
 * over the R rows side by side. One row at a time, each row's max, sum and
 * reciprocal were reduction chains the next pass waited on, and the max
 * pass a call of its own. Every row sums its exponentials in R = 1's order
 * (16 at a time into two vectors, an 8 into the first, the tail into the
 * second), so the grouping changes no value. maxps(x, m) keeps m when x is
 * NaN: the max skips NaNs, as nnf_ew_max_avx2(x, n, 0) does, and a NaN
 * anywhere gives a NaN row, an all -inf row NaN, as in the reference. The
 * exponential pass fetches the next group's lines as it goes. */
static inline __attribute__((always_inline)) void
softmax_rows(const float *x, float *y, size_t n, int log, const float *next, const int R) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 vm[4], s0[4], s1[4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        vm[r] = ninf;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            vm[r] = _mm256_max_ps(_mm256_loadu_ps(x + r * n + i), vm[r]);
    __m256i mk = nnf_mask8(n - i);
    if (i < n)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            vm[r] = _mm256_max_ps(_mm256_blendv_ps(ninf, _mm256_maskload_ps(x + r * n + i, mk),
                                                   _mm256_castsi256_ps(mk)),
                                  vm[r]);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        vm[r] = _mm256_set1_ps(hmax8(vm[r]));
        s0[r] = s1[r] = _mm256_setzero_ps();
    }
    for (i = 0; i + 16 <= n; i += 16)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const float *xr = x + r * n + i;
            if (next)
                _mm_prefetch((const char *)(next + r * n + i), _MM_HINT_T0);
            __m256 e0 = exp8_nonpos(_mm256_sub_ps(_mm256_loadu_ps(xr), vm[r]));
            __m256 e1 = exp8_nonpos(_mm256_sub_ps(_mm256_loadu_ps(xr + 8), vm[r]));
            if (!log) {
                _mm256_storeu_ps(y + r * n + i, e0);
                _mm256_storeu_ps(y + r * n + i + 8, e1);
            }
            s0[r] = _mm256_add_ps(s0[r], e0);
            s1[r] = _mm256_add_ps(s1[r], e1);
        }
    if (i + 8 <= n) {
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m256 e = exp8_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + r * n + i), vm[r]));
            if (!log)
                _mm256_storeu_ps(y + r * n + i, e);
            s0[r] = _mm256_add_ps(s0[r], e);
        }
        i += 8;
    }
    if (i < n)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m256 e = exp8_nonpos(_mm256_sub_ps(_mm256_maskload_ps(x + r * n + i, mk), vm[r]));
            e = _mm256_and_ps(e, _mm256_castsi256_ps(mk));
            if (!log)
                _mm256_maskstore_ps(y + r * n + i, mk, e);
            s1[r] = _mm256_add_ps(s1[r], e);
        }
        /* LogSoftmax: (x - max) - log(sum), not x - (max + log(sum)): the first
         * subtraction is exact near the max, where the result is small */
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        float sum = hsum8(_mm256_add_ps(s0[r], s1[r]));
        s0[r] = _mm256_set1_ps(log ? logf(sum) : 1.0f / sum);
    }
    for (i = 0; i + 8 <= n; i += 8)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            float *yr = y + r * n + i;
            __m256 v =
                log ? _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + r * n + i), vm[r]), s0[r])
                    : _mm256_mul_ps(_mm256_loadu_ps(yr), s0[r]);
            _mm256_storeu_ps(yr, v);
        }
    if (i < n)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            float *yr = y + r * n + i;
            __m256 v = log ? _mm256_sub_ps(
                                 _mm256_sub_ps(_mm256_maskload_ps(x + r * n + i, mk), vm[r]), s0[r])
                           : _mm256_mul_ps(_mm256_maskload_ps(yr, mk), s0[r]);
            _mm256_maskstore_ps(yr, mk, v);
        }
}

/* Rows of up to 1024 in fours and up to 4096 in pairs (their passes stay in
 * L1), the rest one by one. Against one by one on Zen 3 (ab_builds, 1
 * thread): the fused attention alone 0.97x the time over Whisper's 8 x 1500
 * x 1500, 0.97x over BERT's 12 x 128 x 128, 0.99x over ViT's 12 x 197 x
 * 197; a lone Softmax of 12 x 128 x 128 (768 KB) 0.81x, of 42 rows of 1500
 * 0.97x. Rows streaming from memory (more than eight L2s of them) go one by
 * one, each first fetching a row's worth of lines two rows and at least 4
 * KiB ahead: the hardware prefetcher had left a 512-long softmax over 12
 * MiB waiting a fifth of its time in the max pass (1 thread 5.5-6.1 -> 4.6
 * ms; one row ahead 4.6-5.0, four 4.7). In groups, with their fetches
 * along the exponential pass, at the group's start or along the max pass,
 * that softmax ran 1.14-1.39x the time: four rows in and four out are more
 * streams than the prefetcher follows. */
void nnf_ew_softmax_avx2(const float *x, float *y, size_t rows, size_t n, int log) {
    size_t r = 0, total = rows * n;
    if (total / 8 > nnf_cpu_get()->l2 / sizeof(float)) {
        size_t ahead = 2 * n > 1024 ? 2 * n : 1024;
        for (; r < rows; r++) {
            size_t from = r * n + ahead, to = from + n < total ? from + n : total;
            for (size_t i = from; i < to; i += 16)
                _mm_prefetch((const char *)(x + i), _MM_HINT_T0);
            softmax_rows(x + r * n, y + r * n, n, log, NULL, 1);
        }
        return;
    }
    NNF_SOFTMAX_GROUPS(softmax_rows, x, y, r, rows, n, log, 4, 1024);
    NNF_SOFTMAX_GROUPS(softmax_rows, x, y, r, rows, n, log, 2, 4096);
    NNF_SOFTMAX_GROUPS(softmax_rows, x, y, r, rows, n, log, 1, SIZE_MAX);
}

/* Along an inner axis, eight positions a vector: the max over the axis
 * (maxps passes over NaNs, as the row kernel's max does), the exponentials
 * stored and summed (Softmax) or summed (LogSoftmax), then the scaling or
 * (x - max) - log(sum); the tail positions take the scalar formulas. */
void nnf_ew_softmax_cols_avx2(const float *x, float *y, size_t n, size_t ld, size_t cols, int log) {
    size_t j = 0;
    for (; j + 8 <= cols; j += 8) {
        __m256 m = _mm256_set1_ps(-INFINITY);
        for (size_t k = 0; k < n; k++)
            m = _mm256_max_ps(_mm256_loadu_ps(x + k * ld + j), m);
        __m256 s = _mm256_setzero_ps();
        for (size_t k = 0; k < n; k++) {
            __m256 e = exp8_nonpos(_mm256_sub_ps(_mm256_loadu_ps(x + k * ld + j), m));
            if (!log)
                _mm256_storeu_ps(y + k * ld + j, e);
            s = _mm256_add_ps(s, e);
        }
        if (!log) {
            const __m256 inv = _mm256_div_ps(_mm256_set1_ps(1.0f), s);
            for (size_t k = 0; k < n; k++)
                _mm256_storeu_ps(y + k * ld + j,
                                 _mm256_mul_ps(_mm256_loadu_ps(y + k * ld + j), inv));
            continue;
        }
        float sums[8];
        _mm256_storeu_ps(sums, s);
        for (int l = 0; l < 8; l++)
            sums[l] = logf(sums[l]);
        const __m256 ls = _mm256_loadu_ps(sums);
        for (size_t k = 0; k < n; k++)
            _mm256_storeu_ps(y + k * ld + j,
                             _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + k * ld + j), m), ls));
    }
    for (; j < cols; j++)
        nnf_ew_softmax_line_scalar(x + j, y + j, n, ld, log);
}

/* Reductions along an inner axis, eight positions a vector: sums (of x,
 * |x| or x * x) in two vectors of doubles, as the reference carries them,
 * Max / Min taking a value that compares better or is the first NaN; the
 * tail positions take the scalar rules. */
void nnf_ew_reduce_cols_avx2(const float *x, size_t n, size_t ld, size_t cols, int kind, float *y) {
    size_t j = 0;
    for (; j + 8 <= cols; j += 8) {
        if (nnf_reduce_is_sum(kind)) {
            nnf_ew_sum_of of = nnf_reduce_sum_of(kind);
            const __m256d sign = _mm256_set1_pd(-0.0);
            __m256d lo = _mm256_setzero_pd(), hi = lo;
            for (size_t k = 0; k < n; k++) {
                __m256 v = _mm256_loadu_ps(x + k * ld + j);
                __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
                __m256d b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
                if (of == NNF_SUM_ABS) {
                    a = _mm256_andnot_pd(sign, a);
                    b = _mm256_andnot_pd(sign, b);
                } else if (of == NNF_SUM_SQUARE) {
                    a = _mm256_mul_pd(a, a);
                    b = _mm256_mul_pd(b, b);
                }
                lo = _mm256_add_pd(lo, a);
                hi = _mm256_add_pd(hi, b);
            }
            double s[8];
            _mm256_storeu_pd(s, lo);
            _mm256_storeu_pd(s + 4, hi);
            for (int l = 0; l < 8; l++)
                y[j + l] = nnf_reduce_finish(kind, s[l], n);
            continue;
        }
        int is_max = kind == NNF_REDUCE_MAX;
        __m256 m = _mm256_loadu_ps(x + j);
        for (size_t k = 1; k < n; k++) {
            __m256 v = _mm256_loadu_ps(x + k * ld + j);
            __m256 better =
                is_max ? _mm256_cmp_ps(v, m, _CMP_GT_OQ) : _mm256_cmp_ps(v, m, _CMP_LT_OQ);
            __m256 first_nan = _mm256_andnot_ps(_mm256_cmp_ps(m, m, _CMP_UNORD_Q),
                                                _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            m = _mm256_blendv_ps(m, v, _mm256_or_ps(better, first_nan));
        }
        _mm256_storeu_ps(y + j, m);
    }
    for (; j < cols; j++)
        y[j] = nnf_ew_reduce_line_scalar(x + j, n, ld, kind);
}

/* ---- transpose ------------------------------------------------------------------------ */

/* Only bits move, so any 4-byte type goes through the float registers. */
void nnf_transpose_avx2(const float *x, size_t ldx, float *y, size_t ldy, size_t rows,
                        size_t cols) {
    size_t r8 = rows & ~(size_t)7, c8 = cols & ~(size_t)7;
    for (size_t r = 0; r < r8; r += 8) {
        for (size_t c = 0; c < c8; c += 8)
            nnf_tr8x8_avx2(x + r * ldx + c, ldx, y + c * ldy + r, ldy);
        for (size_t c = c8; c < cols; c++)
            for (size_t k = r; k < r + 8; k++)
                y[c * ldy + k] = x[k * ldx + c];
    }
    for (size_t c = 0; c < cols; c++)
        for (size_t k = r8; k < rows; k++)
            y[c * ldy + k] = x[k * ldx + c];
}

/* F16C's conversions round to nearest even and keep NaN payloads (a
 * float's top mantissa bits, quieted), as nnf_f32_to_f16 and nnf_f16_to_f32
 * do; the tails go through the same instructions on a padded vector. */
void nnf_ew_to_f16_avx2(const float *x, uint16_t *y, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        float in[8] = {0};
        uint16_t out[8];
        memcpy(in, x + i, (n - i) * sizeof(float));
        _mm_storeu_si128((__m128i *)(void *)out,
                         _mm256_cvtps_ph(_mm256_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT));
        memcpy(y + i, out, (n - i) * sizeof(uint16_t));
    }
}

void nnf_ew_from_f16_avx2(const uint16_t *x, float *y, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(x + i))));
    if (i < n) {
        uint16_t in[8] = {0};
        float out[8];
        memcpy(in, x + i, (n - i) * sizeof(uint16_t));
        _mm256_storeu_ps(out, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)in)));
        memcpy(y + i, out, (n - i) * sizeof(float));
    }
}

/* ArgMax / ArgMin over a contiguous row: the extreme of the row's non-NaN
 * values first (maxps / minps with the running value second keep it when
 * the row's value is NaN), then the first (or, with last, the final) index
 * holding it; a NaN at index 0 keeps index 0, as the reference's strict
 * comparisons do, and so does a row with no other candidate. Values that
 * compare equal (-0 and +0) tie, as there. */
int64_t nnf_ew_arg_row_avx2(const float *x, size_t n, int is_max, int last) {
    if (isnan(x[0]))
        return 0;
    __m256 m = _mm256_set1_ps(x[0]);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        m = is_max ? _mm256_max_ps(v, m) : _mm256_min_ps(v, m);
    }
    float e[8];
    _mm256_storeu_ps(e, m);
    float best = e[0];
    for (int l = 1; l < 8; l++)
        best = is_max ? (e[l] > best ? e[l] : best) : (e[l] < best ? e[l] : best);
    for (; i < n; i++)
        best = is_max ? (x[i] > best ? x[i] : best) : (x[i] < best ? x[i] : best);
    if (last) {
        for (size_t k = n; k-- > 0;)
            if (x[k] == best)
                return (int64_t)k;
    } else {
        for (size_t k = 0; k < n; k++)
            if (x[k] == best)
                return (int64_t)k;
    }
    return 0;
}

/* Eight positions a vector: each lane is the reference's loop on its own
 * line (strictly better, or equal with last; NaN compares false); the tail
 * positions run that loop. */
void nnf_ew_arg_cols_avx2(const float *x, size_t n, size_t ld, size_t cols, int is_max, int last,
                          int64_t *y) {
    size_t j = 0;
    for (; j + 8 <= cols; j += 8) {
        __m256 b = _mm256_loadu_ps(x + j);
        __m256i idx = _mm256_setzero_si256();
        for (size_t k = 1; k < n; k++) {
            __m256 a = _mm256_loadu_ps(x + k * ld + j);
            __m256 win = is_max ? _mm256_cmp_ps(a, b, _CMP_GT_OQ) : _mm256_cmp_ps(a, b, _CMP_LT_OQ);
            if (last)
                win = _mm256_or_ps(win, _mm256_cmp_ps(a, b, _CMP_EQ_OQ));
            b = _mm256_blendv_ps(b, a, win);
            idx = _mm256_castps_si256(_mm256_blendv_ps(
                _mm256_castsi256_ps(idx), _mm256_castsi256_ps(_mm256_set1_epi32((int)k)), win));
        }
        int32_t r[8];
        _mm256_storeu_si256((__m256i *)(void *)r, idx);
        for (int l = 0; l < 8; l++)
            y[j + (size_t)l] = r[l];
    }
    for (; j < cols; j++)
        y[j] = nnf_ew_arg_line_scalar(x + j, n, ld, is_max, last);
}

/* Eight elements a step; the condition bytes widened to lane masks, the
 * broadcast operands (stride 0) set once. */
void nnf_ew_select32_avx2(const uint8_t *c, size_t cs, const uint32_t *a, size_t as,
                          const uint32_t *b, size_t bs, uint32_t *y, size_t n) {
    const __m256i zero = _mm256_setzero_si256();
    const __m256i a0 = _mm256_set1_epi32((int)a[0]), b0 = _mm256_set1_epi32((int)b[0]);
    const __m256i m0 = _mm256_set1_epi32(c[0] ? -1 : 0);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i m = m0;
        if (cs) {
            __m256i cv = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(c + i)));
            m = _mm256_andnot_si256(_mm256_cmpeq_epi32(cv, zero), _mm256_set1_epi32(-1));
        }
        __m256i va = as ? _mm256_loadu_si256((const __m256i *)(a + i)) : a0;
        __m256i vb = bs ? _mm256_loadu_si256((const __m256i *)(b + i)) : b0;
        _mm256_storeu_si256((__m256i *)(y + i), _mm256_blendv_epi8(vb, va, m));
    }
    if (i < n)
        nnf_ew_select32_scalar(c + i * cs, cs, a + i * as, as, b + i * bs, bs, y + i, n - i);
}

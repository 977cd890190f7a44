/* AVX-512 row kernels where sixteen lanes pay: the common activations, the
 * binary ops, the per-channel affine, softmax and sums. Same formulas and
 * operand orders as eltwise_avx2.c (so the same NaN behaviour and error
 * bounds); ops not written here go to the AVX2 kernels. Tails use masked
 * loads and stores. Tested natively where the CPU has AVX-512, and through
 * SIMDe elsewhere (`make test-avx512`, x86/avx512_intrin.h). */
#include "kernels/eltwise_fast.h"
#include "kernels/x86/softmax_groups.h"
#include "kernels/x86/vmath_avx512.h"

#include <math.h>

static inline __m512 hsig16(__m512 v, __m512 a, __m512 b) {
    __m512 y = _mm512_add_ps(_mm512_mul_ps(v, a), b);
    y = _mm512_max_ps(_mm512_setzero_ps(), y);
    return _mm512_min_ps(_mm512_set1_ps(1.0f), y);
}

static inline __m512 exp_full16(__m512 v) {
    __m512 e = nnf_exp16(v);
    __mmask16 far = _mm512_cmp_ps_mask(v, _mm512_set1_ps(88.0f), _CMP_GT_OQ) |
                    _mm512_cmp_ps_mask(v, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
    if (far) {
        __m512 h = nnf_exp16(_mm512_mul_ps(v, _mm512_set1_ps(0.5f)));
        e = _mm512_mask_mul_ps(e, far, h, h);
    }
    return e;
}

static inline __m512 un16(const nnf_ew_unary *u, __m512 v, __m512 a, __m512 b) {
    switch (u->op) {
    case NNF_EWU_RELU: return _mm512_max_ps(_mm512_setzero_ps(), v);
    case NNF_EWU_LEAKY_RELU:
        return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), v, a);
    case NNF_EWU_CLIP: return _mm512_min_ps(b, _mm512_max_ps(a, v));
    case NNF_EWU_SIGMOID: return nnf_sigmoid16(v);
    case NNF_EWU_TANH: return nnf_tanh16(v);
    case NNF_EWU_EXP: return exp_full16(v);
    case NNF_EWU_ERF: return nnf_erf16(v);
    case NNF_EWU_GELU_ERF: {
        __m512 e = nnf_erf16(_mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752f)));
        __m512 h = _mm512_mul_ps(v, _mm512_set1_ps(0.5f));
        return _mm512_fmadd_ps(h, e, h);
    }
    case NNF_EWU_HARD_SIGMOID: return hsig16(v, a, b);
    case NNF_EWU_HARD_SWISH:
        return _mm512_mul_ps(v, hsig16(v, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f)));
    case NNF_EWU_SQRT: return _mm512_sqrt_ps(v);
    case NNF_EWU_NEG: return _mm512_sub_ps(_mm512_set1_ps(-0.0f), v);
    case NNF_EWU_SQUARE: return _mm512_mul_ps(v, v);
    case NNF_EWU_RECIPROCAL: return _mm512_div_ps(_mm512_set1_ps(1.0f), v);
    default: return v;
    }
}

void nnf_ew_unary_avx512(const nnf_ew_unary *u, const float *x, float *y, size_t n) {
    switch (u->op) {
    case NNF_EWU_RELU:
    case NNF_EWU_LEAKY_RELU:
    case NNF_EWU_CLIP:
    case NNF_EWU_SIGMOID:
    case NNF_EWU_TANH:
    case NNF_EWU_EXP:
    case NNF_EWU_ERF:
    case NNF_EWU_GELU_ERF:
    case NNF_EWU_HARD_SIGMOID:
    case NNF_EWU_HARD_SWISH:
    case NNF_EWU_SQRT:
    case NNF_EWU_NEG:
    case NNF_EWU_SQUARE:
    case NNF_EWU_RECIPROCAL: break;
    default: nnf_ew_unary_avx2(u, x, y, n); return;
    }
    const __m512 a = _mm512_set1_ps(u->alpha), b = _mm512_set1_ps(u->beta);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, un16(u, _mm512_loadu_ps(x + i), a, b));
    if (i < n) {
        __mmask16 k = nnf_mask16(n - i);
        _mm512_mask_storeu_ps(y + i, k, un16(u, _mm512_maskz_loadu_ps(k, x + i), a, b));
    }
}

static inline __m512 bin16(nnf_ew_binop op, __m512 p, __m512 q) {
    switch (op) {
    case NNF_EWB_ADD: return _mm512_add_ps(p, q);
    case NNF_EWB_SUB: return _mm512_sub_ps(p, q);
    case NNF_EWB_MUL: return _mm512_mul_ps(p, q);
    case NNF_EWB_DIV: return _mm512_div_ps(p, q);
    case NNF_EWB_MAX:
        return _mm512_mask_mov_ps(_mm512_max_ps(p, q), _mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q), p);
    case NNF_EWB_MIN:
        return _mm512_mask_mov_ps(_mm512_min_ps(p, q), _mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q), p);
    case NNF_EWB_PRELU:
        return _mm512_mask_mul_ps(p, _mm512_cmp_ps_mask(p, _mm512_setzero_ps(), _CMP_LT_OQ), q, p);
    case NNF_EWB_COUNT: break;
    }
    return p;
}

void nnf_ew_binary_avx512(nnf_ew_binop op, nnf_ew_mode mode, const float *a, const float *b,
                          float *y, size_t n) {
    const __m512 sa = _mm512_set1_ps(a[0]), sb = _mm512_set1_ps(b[0]);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 p = mode == NNF_EW_SV ? sa : _mm512_loadu_ps(a + i);
        __m512 q = mode == NNF_EW_VS ? sb : _mm512_loadu_ps(b + i);
        _mm512_storeu_ps(y + i, bin16(op, p, q));
    }
    if (i < n) {
        __mmask16 k = nnf_mask16(n - i);
        __m512 p = mode == NNF_EW_SV ? sa : _mm512_maskz_loadu_ps(k, a + i);
        __m512 q = mode == NNF_EW_VS ? sb : _mm512_maskz_loadu_ps(k, b + i);
        _mm512_mask_storeu_ps(y + i, k, bin16(op, p, q));
    }
}

void nnf_ew_affine_avx512(const float *x, float *y, size_t n, float a, float b) {
    const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), va), vb));
    if (i < n) {
        __mmask16 k = nnf_mask16(n - i);
        _mm512_mask_storeu_ps(
            y + i, k, _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), va), vb));
    }
}

static inline __m512 sum_term(__m512 v, nnf_ew_sum_of of) {
    if (of == NNF_SUM_ABS)
        return _mm512_abs_ps(v);
    return of == NNF_SUM_SQUARE ? _mm512_mul_ps(v, v) : v;
}

static inline __attribute__((always_inline)) double sum_of(const float *x, size_t n,
                                                           nnf_ew_sum_of of) {
    double total = 0.0;
    size_t i = 0;
    while (i < n) {
        size_t end = n - i > 256 ? i + 256 : n;
        __m512 s0 = _mm512_setzero_ps(), s1 = s0;
        for (; i + 32 <= end; i += 32) {
            s0 = _mm512_add_ps(s0, sum_term(_mm512_loadu_ps(x + i), of));
            s1 = _mm512_add_ps(s1, sum_term(_mm512_loadu_ps(x + i + 16), of));
        }
        for (; i < end; i += 16)
            s0 = _mm512_add_ps(s0, sum_term(_mm512_maskz_loadu_ps(nnf_mask16(end - i), x + i), of));
        i = end;
        total += (double)_mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    }
    return total;
}

/* x, |x| or x * x in float blocks of 256 (as the AVX2 tier sums them). */
double nnf_ew_sum_avx512(const float *x, size_t n, nnf_ew_sum_of of) {
    switch (of) {
    case NNF_SUM_ABS: return sum_of(x, n, NNF_SUM_ABS);
    case NNF_SUM_SQUARE: return sum_of(x, n, NNF_SUM_SQUARE);
    default: return sum_of(x, n, NNF_SUM_X);
    }
}

/* R rows of n (R a constant): max, exp(x - max) stored and summed, scale
 * (LogSoftmax: the sum only, then x - max - log(sum)), each pass over the R
 * rows side by side. One row at a time, BERT's rows of 128 ran at about half
 * the rate the operations allow: each row's max, sum and reciprocal are
 * reduction chains the next pass waits on. Each row sees the operations of
 * R = 1 in the same order, so the grouping changes no value. A NaN anywhere
 * gives a NaN row, an all -inf row NaN, as in the reference. */
static inline __attribute__((always_inline)) void
softmax_rows(const float *x, float *y, size_t n, int log, const float *next, const int R) {
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
    __m512 vm[8], s[8];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        vm[r] = ninf;
    /* maxps(x, m) keeps m when x is NaN: NaNs are skipped, as nnf_ew_max_avx2(x, n, 0) does */
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = nnf_mask16(n - i);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            vm[r] = _mm512_max_ps(_mm512_mask_loadu_ps(ninf, k, x + r * n + i), vm[r]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        vm[r] = _mm512_set1_ps(_mm512_reduce_max_ps(vm[r]));
        s[r] = _mm512_setzero_ps();
    }
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = nnf_mask16(n - i);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            if (next)
                _mm_prefetch((const char *)(next + r * n + i), _MM_HINT_T0);
            __m512 e = nnf_exp16_upto88(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + r * n + i), vm[r]));
            e = _mm512_maskz_mov_ps(k, e);
            if (!log)
                _mm512_mask_storeu_ps(y + r * n + i, k, e);
            s[r] = _mm512_add_ps(s[r], e);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        float sum = _mm512_reduce_add_ps(s[r]);
        s[r] = _mm512_set1_ps(log ? logf(sum) : 1.0f / sum);
    }
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = nnf_mask16(n - i);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512 v = log ? _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + r * n + i), vm[r]), s[r])
                           : _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + r * n + i), s[r]);
            _mm512_mask_storeu_ps(y + r * n + i, k, v);
        }
    }
}

/* Rows of up to 1024 in eights, up to 2048 in fours and up to 4096 in pairs
 * (their passes stay in L1; Whisper's 1500 scores a row one by one took
 * 6.9 ms a layer against 5.7 in fours), the rest one by one. The exponential pass, the longest,
 * fetches the next rows' lines as it goes (line for line, the same rows' worth): their max pass had
 * waited on memory. */
void nnf_ew_softmax_avx512(const float *x, float *y, size_t rows, size_t n, int log) {
    size_t r = 0;
    NNF_SOFTMAX_GROUPS(softmax_rows, x, y, r, rows, n, log, 8, 1024);
    NNF_SOFTMAX_GROUPS(softmax_rows, x, y, r, rows, n, log, 4, 2048);
    NNF_SOFTMAX_GROUPS(softmax_rows, x, y, r, rows, n, log, 2, 4096);
    NNF_SOFTMAX_GROUPS(softmax_rows, x, y, r, rows, n, log, 1, SIZE_MAX);
}

/* AVX2 spans of 2-D pooling: eight output columns per vector. Stride 1 loads
 * the taps directly; stride 2 loads sixteen inputs and keeps the even ones;
 * other strides run the scalar loop. Taps are visited kh-major and MaxPool
 * starts from the first tap, as the reference does, so results (NaN
 * included) are bit-identical to it. */
#include "kernels/eltwise_fast.h"
#include "kernels/x86/vmath_avx2.h"

#include <math.h>

static void span_scalar(const nnf_pool_span *s, const float *x, float *y, size_t n) {
    for (size_t o = 0; o < n; o++) {
        const float *w = x + o * s->stride;
        float acc = s->is_max ? -INFINITY : 0.0f;
        int first = 1;
        for (size_t h = 0; h < s->nh; h++)
            for (size_t k = 0; k < s->kw; k++) {
                float v = w[h * s->row_step + k * s->dw];
                if (s->is_max) {
                    if (v > acc || first)
                        acc = v;
                    first = 0;
                } else {
                    acc += v;
                }
            }
        if (!s->is_max)
            acc = s->divisor > 0.0f ? acc / s->divisor : 0.0f;
        y[o] = acc;
    }
}

/* Eight stride-2 outputs: the even elements of p[0..15]. */
static inline __m256 load_even(const float *p) {
    __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
    __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
}

static inline __m256 finish(const nnf_pool_span *s, __m256 acc) {
    if (s->is_max)
        return acc;
    if (!(s->divisor > 0.0f))
        return _mm256_setzero_ps();
    return _mm256_div_ps(acc, _mm256_set1_ps(s->divisor));
}

void nnf_pool_span_avx2(const nnf_pool_span *s, const float *x, float *y, size_t n) {
    if ((s->stride != 1 && s->stride != 2) || s->nh == 0 || s->kw == 0) {
        span_scalar(s, x, y, n);
        return;
    }
    size_t o = 0;
    if (s->stride == 1) {
        for (; o < n; o += 8) {
            size_t left = n - o;
            __m256i m = nnf_mask8(left < 8 ? left : 8);
            const float *w = x + o;
            __m256 acc = s->is_max ? _mm256_maskload_ps(w, m) : _mm256_setzero_ps();
            for (size_t h = 0; h < s->nh; h++)
                for (size_t k = 0; k < s->kw; k++) {
                    if (s->is_max && h == 0 && k == 0)
                        continue;
                    __m256 v = _mm256_maskload_ps(w + h * s->row_step + k * s->dw, m);
                    acc = s->is_max ? _mm256_max_ps(v, acc) : _mm256_add_ps(acc, v);
                }
            _mm256_maskstore_ps(y + o, m, finish(s, acc));
        }
        return;
    }
    /* stride 2: the sixteenth load is one past the last tap of output o + 7,
     * inside the input while output o + 8 exists */
    for (; o + 8 < n; o += 8) {
        const float *w = x + 2 * o;
        __m256 acc = s->is_max ? load_even(w) : _mm256_setzero_ps();
        for (size_t h = 0; h < s->nh; h++)
            for (size_t k = 0; k < s->kw; k++) {
                if (s->is_max && h == 0 && k == 0)
                    continue;
                __m256 v = load_even(w + h * s->row_step + k * s->dw);
                acc = s->is_max ? _mm256_max_ps(v, acc) : _mm256_add_ps(acc, v);
            }
        _mm256_storeu_ps(y + o, finish(s, acc));
    }
    span_scalar(s, x + 2 * o, y + o, n - o);
}

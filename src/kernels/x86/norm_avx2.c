/* AVX2+FMA LayerNormalization row and Instance/GroupNormalization group:
 * two passes for the statistics (the mean about x[0], then the sums of x - q
 * and (x - q)^2 about that estimate q, each in float blocks carried in
 * double) and one for the output. The mean is summed relative to a pivot
 * near it and applied as a float pair (hi + lo), so the statistics keep
 * their low bits when |mean| is much larger than the spread. */
#include "kernels/eltwise_fast.h"
#include "kernels/x86/vmath_avx2.h"

#include <math.h>

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __m256 centre(__m256 v, __m256 hi, __m256 lo) {
    return _mm256_sub_ps(_mm256_sub_ps(v, hi), lo);
}

/* sum of (x - p) in float blocks of 256 carried in double: with p = x[0] the
 * float sums stay at the size of the spread, not of the mean */
static double shifted_sum(const float *x, size_t n, float p) {
    const __m256 vp = _mm256_set1_ps(p);
    double total = 0.0;
    size_t i = 0;
    while (i < n) {
        size_t end = n - i > 256 ? i + 256 : n;
        __m256 s0 = _mm256_setzero_ps(), s1 = s0;
        for (; i + 16 <= end; i += 16) {
            s0 = _mm256_add_ps(s0, _mm256_sub_ps(_mm256_loadu_ps(x + i), vp));
            s1 = _mm256_add_ps(s1, _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vp));
        }
        for (; i + 8 <= end; i += 8)
            s0 = _mm256_add_ps(s0, _mm256_sub_ps(_mm256_loadu_ps(x + i), vp));
        if (i < end) {
            __m256i m = nnf_mask8(end - i);
            __m256 d = _mm256_sub_ps(_mm256_maskload_ps(x + i, m), vp);
            s1 = _mm256_add_ps(s1, _mm256_and_ps(d, _mm256_castsi256_ps(m)));
            i = end;
        }
        total += (double)hsum8(_mm256_add_ps(s0, s1));
    }
    return total;
}

/* Sums of x - q and of (x - q)^2, in float blocks of 256 carried in
 * double. */
static void centred_sums(const float *x, size_t n, float q, double *s1_out, double *s2_out) {
    const __m256 vq = _mm256_set1_ps(q);
    double s1 = 0.0, s2 = 0.0;
    size_t i = 0;
    while (i < n) {
        size_t end = n - i > 256 ? i + 256 : n;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
        for (; i + 16 <= end; i += 16) {
            __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vq);
            __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vq);
            a0 = _mm256_add_ps(a0, d0);
            a1 = _mm256_add_ps(a1, d1);
            b0 = _mm256_fmadd_ps(d0, d0, b0);
            b1 = _mm256_fmadd_ps(d1, d1, b1);
        }
        for (; i + 8 <= end; i += 8) {
            __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vq);
            a0 = _mm256_add_ps(a0, d);
            b0 = _mm256_fmadd_ps(d, d, b0);
        }
        if (i < end) {
            __m256i m = nnf_mask8(end - i);
            __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vq),
                                     _mm256_castsi256_ps(m));
            a1 = _mm256_add_ps(a1, d);
            b1 = _mm256_fmadd_ps(d, d, b1);
            i = end;
        }
        s1 += (double)hsum8(_mm256_add_ps(a0, a1));
        s2 += (double)hsum8(_mm256_add_ps(b0, b1));
    }
    *s1_out = s1;
    *s2_out = s2;
}

/* The statistics of a row: the mean as a float pair (hi + lo) and
 * 1 / sqrt(var + eps). The mean is first estimated about x[0] (finite, else
 * 0: an infinite x[0] made inf - inf); the second pass sums x - q and
 * (x - q)^2 about that estimate q, so that an outlying x[0] does not set the
 * size of the float block sums (a 768 row in [-3, 3] starting at 100 lost
 * 1e-5 of its mean about x[0] alone), and var = E(x - q)^2 - (E(x - q))^2,
 * whose second term is tiny beside the first with q that near the mean (it
 * was a third pass about hi + lo; the second pass reads the row from L1 or
 * L2). */
static float row_stats(const float *x, size_t n, float eps, float *fhi_out, float *flo_out) {
    float p = isfinite(x[0]) ? x[0] : 0.0f;
    double mean = (double)p + shifted_sum(x, n, p) / (double)n, var = NAN;
    if (isfinite(mean)) {
        float q = (float)mean;
        double s1, s2;
        centred_sums(x, n, q, &s1, &s2);
        double d = s1 / (double)n;
        mean = (double)q + d;
        var = s2 / (double)n - d * d;
        var = var > 0.0 ? var : 0.0;
    }
    float fhi = (float)mean, flo = isfinite(mean) ? (float)(mean - (double)fhi) : 0.0f;
    *fhi_out = fhi;
    *flo_out = flo;
    return (float)(1.0 / sqrt(var + (double)eps));
}

void nnf_ew_layernorm_avx2(const float *x, float *y, size_t n, const float *scale,
                           const float *bias, float eps, float *mean_out, float *inv_out) {
    float fhi, flo, inv = row_stats(x, n, eps, &fhi, &flo);
    const __m256 hi = _mm256_set1_ps(fhi), lo = _mm256_set1_ps(flo), vi = _mm256_set1_ps(inv);
    size_t i;
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 t = _mm256_mul_ps(centre(_mm256_loadu_ps(x + i), hi, lo), vi);
        __m256 r = bias ? _mm256_fmadd_ps(t, _mm256_loadu_ps(scale + i), _mm256_loadu_ps(bias + i))
                        : _mm256_mul_ps(t, _mm256_loadu_ps(scale + i));
        _mm256_storeu_ps(y + i, r);
    }
    if (i < n) {
        __m256i m = nnf_mask8(n - i);
        __m256 t = _mm256_mul_ps(centre(_mm256_maskload_ps(x + i, m), hi, lo), vi);
        __m256 r = bias ? _mm256_fmadd_ps(t, _mm256_maskload_ps(scale + i, m),
                                          _mm256_maskload_ps(bias + i, m))
                        : _mm256_mul_ps(t, _mm256_maskload_ps(scale + i, m));
        _mm256_maskstore_ps(y + i, m, r);
    }
    if (mean_out)
        *mean_out = fhi;
    if (inv_out)
        *inv_out = inv;
}

/* The statistics of the whole group, then per segment y = (x - hi - lo)
 * (inv scale) + bias, the segment's factor formed once. */
void nnf_ew_groupnorm_avx2(const float *x, float *y, size_t segs, size_t len, const float *scale,
                           const float *bias, size_t step, float eps) {
    float fhi, flo, inv = row_stats(x, segs * len, eps, &fhi, &flo);
    const __m256 hi = _mm256_set1_ps(fhi), lo = _mm256_set1_ps(flo);
    for (size_t k = 0; k < segs; k++) {
        const float *xs = x + k * len;
        float *ys = y + k * len;
        const __m256 a = _mm256_set1_ps(inv * scale[k * step]), b = _mm256_set1_ps(bias[k * step]);
        size_t i = 0;
        for (; i + 16 <= len; i += 16) {
            __m256 t0 = centre(_mm256_loadu_ps(xs + i), hi, lo);
            __m256 t1 = centre(_mm256_loadu_ps(xs + i + 8), hi, lo);
            _mm256_storeu_ps(ys + i, _mm256_fmadd_ps(t0, a, b));
            _mm256_storeu_ps(ys + i + 8, _mm256_fmadd_ps(t1, a, b));
        }
        for (; i + 8 <= len; i += 8)
            _mm256_storeu_ps(ys + i,
                             _mm256_fmadd_ps(centre(_mm256_loadu_ps(xs + i), hi, lo), a, b));
        for (; i < len; i++) /* no masked store: segments follow each other */
            ys[i] = fmaf((xs[i] - fhi) - flo, inv * scale[k * step], bias[k * step]);
    }
}

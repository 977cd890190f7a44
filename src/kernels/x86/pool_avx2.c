/* AVX2 spans of 1-D, 2-D and 3-D pooling: eight output columns per vector.
 * Stride 1 loads the taps directly; stride 2 loads sixteen inputs and keeps
 * the even ones, or the even and the odd ones for two taps (the last block
 * of a span with masks; vmaskmov is slow on some cores, so only there);
 * other strides run the scalar loop. Taps are visited kh-major and MaxPool
 * starts from the first tap, as the reference does, so results (NaN
 * included) are bit-identical to it. */
#include "kernels/eltwise_fast.h"
#include "kernels/x86/vmath_avx2.h"

#include <math.h>

/* Eight stride-2 outputs: the even elements of p[0..15] (masked loads only
 * for a span's last block: vmaskmov is slow on some cores). */
static inline __m256 load_even(const float *p, int full, __m256i m0, __m256i m1) {
    __m256 a = full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m0);
    __m256 b = full ? _mm256_loadu_ps(p + 8) : _mm256_maskload_ps(p + 8, m1);
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

/* One row of stride-2 taps into acc (lanes in the shuffle's order);
 * `first` (MaxPool's first row): acc starts from the row's first tap. */
static inline __attribute__((always_inline)) __m256 row_s2(const nnf_pool_span *s, const float *row,
                                                           int full, const __m256i *mk, __m256 acc,
                                                           int is_max, int first) {
    size_t k = 0;
    for (; s->dw == 1 && k + 1 < s->kw; k += 2) {
        __m256 a = full ? _mm256_loadu_ps(row + k) : _mm256_maskload_ps(row + k, mk[2]);
        __m256 b = full ? _mm256_loadu_ps(row + k + 8) : _mm256_maskload_ps(row + k + 8, mk[3]);
        __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
        __m256 od = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
        if (is_max) {
            acc = first && k == 0 ? e : _mm256_max_ps(e, acc);
            acc = _mm256_max_ps(od, acc);
        } else {
            acc = _mm256_add_ps(_mm256_add_ps(acc, e), od);
        }
    }
    for (; k < s->kw; k++) {
        const float *p = row + k * s->dw;
        __m256 a = full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mk[0]);
        __m256 b = full ? _mm256_loadu_ps(p + 8) : _mm256_maskload_ps(p + 8, mk[1]);
        __m256 e = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
        acc = is_max ? (first && k == 0 ? e : _mm256_max_ps(e, acc)) : _mm256_add_ps(acc, e);
    }
    return acc;
}

static inline __attribute__((always_inline)) void span_s2(const nnf_pool_span *s, const float *x,
                                                          float *y, size_t n, int is_max) {
    for (size_t o = 0; o < n; o += 8) {
        size_t m = n - o < 8 ? n - o : 8, need = 2 * m - 1;
        int full = o + 8 < n; /* the 16th element exists: it is output o + 8's first */
        /* the last block's masks: one tap's 2m - 1 elements, a pair's 2m */
        __m256i mk[4] = {_mm256_setzero_si256()};
        if (!full) {
            mk[0] = nnf_mask8(need < 8 ? need : 8);
            mk[1] = nnf_mask8(need > 8 ? need - 8 : 0);
            mk[2] = nnf_mask8(need + 1 < 8 ? need + 1 : 8);
            mk[3] = nnf_mask8(need + 1 > 8 ? need + 1 - 8 : 0);
        }
        const float *w = x + 2 * o;
        __m256 acc = row_s2(s, w, full, mk, _mm256_setzero_ps(), is_max, is_max);
        for (size_t d = 0; d < s->nd; d++)
            for (size_t h = d ? 0 : 1; h < s->nh; h++)
                acc = row_s2(s, w + d * s->plane_step + h * s->row_step, full, mk, acc, is_max, 0);
        acc =
            _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(acc), _MM_SHUFFLE(3, 1, 2, 0)));
        if (m == 8)
            _mm256_storeu_ps(y + o, finish(s, acc));
        else
            _mm256_maskstore_ps(y + o, nnf_mask8(m), finish(s, acc));
    }
}

void nnf_pool_span_avx2(const nnf_pool_span *s, const float *x, float *y, size_t n) {
    if ((s->stride != 1 && s->stride != 2) || s->nd == 0 || s->nh == 0 || s->kw == 0) {
        nnf_pool_span_scalar(s, x, y, n);
        return;
    }
    size_t o = 0;
    if (s->stride == 1) {
        for (; o < n; o += 8) {
            size_t left = n - o;
            int full = left >= 8;
            __m256i m = nnf_mask8(full ? 8 : left);
            const float *w = x + o;
            __m256 acc = !s->is_max ? _mm256_setzero_ps()
                         : full     ? _mm256_loadu_ps(w)
                                    : _mm256_maskload_ps(w, m);
            for (size_t d = 0; d < s->nd; d++)
                for (size_t h = 0; h < s->nh; h++)
                    for (size_t k = 0; k < s->kw; k++) {
                        if (s->is_max && d == 0 && h == 0 && k == 0)
                            continue;
                        const float *p = w + d * s->plane_step + h * s->row_step + k * s->dw;
                        __m256 v = full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
                        acc = s->is_max ? _mm256_max_ps(v, acc) : _mm256_add_ps(acc, v);
                    }
            if (full)
                _mm256_storeu_ps(y + o, finish(s, acc));
            else
                _mm256_maskstore_ps(y + o, m, finish(s, acc));
        }
        return;
    }
    /* stride 2: m outputs need 2m - 1 inputs per tap (2m for a pair);
     * masks keep the loads of the last block inside them. Taps kw and kw + 1
     * (dilation 1) come from one pair of loads, the even and the odd
     * elements, and the lanes stay in the shuffle's order (0 2 8 10 4 6 12
     * 14) until the block is done: a tap costs a shuffle, where it cost two
     * loads, a shuffle and a permute (a 3D U-Net's 2x2x2 MaxPool 1.84 ->
     * 1.49 ms). Each lane sees the taps in the same order as before. */
    if (s->is_max)
        span_s2(s, x, y, n, 1);
    else
        span_s2(s, x, y, n, 0);
}

/* ---- separable MaxPool, W stride 1 or 2 (see nnf_pool_rowmax in eltwise_fast.h) ---- */

void nnf_pool_rowmax_avx2(const float *xp, size_t n, size_t kw, size_t sw, float *rm) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    if (sw == 1) {
        for (size_t o = 0; o < n; o += 8) {
            __m256 acc = ninf;
            for (size_t k = 0; k < kw; k++)
                acc = _mm256_max_ps(_mm256_loadu_ps(xp + o + k), acc);
            _mm256_storeu_ps(rm + o, acc);
        }
        return;
    }
    /* stride 2: tap k of outputs o..o+7 is the even (k even) or odd (k odd)
     * elements of xp[o * 2 + k - k % 2, + 16): one in-lane shuffle of two
     * loads, shared by taps 2j and 2j + 1. The shuffles leave the outputs in
     * the order 0 1 4 5 2 3 6 7 in every tap alike, so one permute per block
     * restores it after the maxima. */
    for (size_t o = 0; o < n; o += 8) {
        __m256 acc = ninf;
        for (size_t k = 0; k < kw; k += 2) {
            const float *p = xp + 2 * o + k;
            __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
            acc = _mm256_max_ps(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)), acc);
            if (k + 1 < kw)
                acc = _mm256_max_ps(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)), acc);
        }
        _mm256_storeu_ps(rm + o, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(acc),
                                                                        _MM_SHUFFLE(3, 1, 2, 0))));
    }
}

/* Window o's first tap is row[o * sw - lead], clamped into [0, w). */
static inline __m256 colmax8(const float *const *rows, size_t nrows, const float *row, size_t lead,
                             size_t sw, size_t w, size_t o, int block_inside) {
    __m256 acc = _mm256_loadu_ps(rows[0] + o);
    for (size_t r = 1; r < nrows; r++)
        acc = _mm256_max_ps(_mm256_loadu_ps(rows[r] + o), acc);
    __m256 f;
    /* the loads below read row[c .. c + 8 * sw) */
    if (block_inside && o * sw >= lead && o * sw - lead + 8 * sw <= w) {
        const float *p = row + o * sw - lead;
        f = sw == 1 ? _mm256_loadu_ps(p)
                    : load_even(p, 1, _mm256_setzero_si256(), _mm256_setzero_si256());
    } else {
        float t[8];
        for (size_t i = 0; i < 8; i++) {
            size_t c = (o + i) * sw;
            t[i] = row[c < lead ? 0 : (c - lead < w ? c - lead : w - 1)];
        }
        f = _mm256_loadu_ps(t);
    }
    return _mm256_blendv_ps(acc, f, _mm256_cmp_ps(f, f, _CMP_UNORD_Q));
}

void nnf_pool_colmax_avx2(const float *const *rows, size_t nrows, const float *row, size_t lead,
                          size_t sw, size_t w, float *y, size_t n) {
    if (n < 8) {
        float t[8];
        _mm256_storeu_ps(t, colmax8(rows, nrows, row, lead, sw, w, 0, 0));
        for (size_t o = 0; o < n; o++)
            y[o] = t[o];
        return;
    }
    size_t o = 0;
    for (; o + 8 <= n; o += 8)
        _mm256_storeu_ps(y + o, colmax8(rows, nrows, row, lead, sw, w, o, 1));
    if (o < n) /* the last block overlaps the one before: it rewrites equal values */
        _mm256_storeu_ps(y + n - 8, colmax8(rows, nrows, row, lead, sw, w, n - 8, 1));
}

/* Implicit im2col packer, AVX2: fills GEMM B panels (kc x r, r a multiple
 * of 8) straight from an NCHW input. Work goes in groups of 8 panel lanes
 * (8 consecutive output pixels). A group inside one output row reads its 8
 * inputs of every tap as one contiguous vector (stride 1) or two vectors
 * de-interleaved (stride 2); groups that cross an output row, touch the
 * padding or have another stride use a masked gather. The scalar packer
 * spent 30-45 % of a 3x3 / 7x7 conv with few output channels in per-element
 * index arithmetic and branches. */
#include "kernels/conv_fast.h"

#include <immintrin.h>
#include <stdint.h>

enum { GCHUNK = 64 };

/* Even elements of x[0..16): x[0], x[2], ..., x[14]. */
static inline __m256 load_even16(const float *x) {
    __m256 lo = _mm256_loadu_ps(x), hi = _mm256_loadu_ps(x + 8);
    __m256 even = _mm256_shuffle_ps(lo, hi, 0x88); /* lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6 */
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xd8));
}

typedef struct group_info {
    size_t off;     /* floats from dst to the group's row 0 */
    int32_t ih, iw; /* first lane's input origin before the tap offset */
    int contiguous; /* 8 lanes in one output row, stride 1 or 2 */
} group_info;

void nnf_im2col_pack_avx2(const void *vctx, size_t n0, size_t nc, size_t k0, size_t kc, size_t r,
                          float *dst) {
    const nnf_im2col_ctx *c = vctx;
    const nnf_conv2d_shape *s = c->s;
    const size_t taps = s->kh * s->kw, plane = s->h * s->w, sw = s->sw;
    const int32_t h = (int32_t)s->h, w = (int32_t)s->w, span = sw == 1 ? 8 : 16;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i vh = _mm256_set1_epi32(h), vw = _mm256_set1_epi32(w),
                  neg1 = _mm256_set1_epi32(-1);
    const __m256i lane_sw = _mm256_mullo_epi32(lane, _mm256_set1_epi32((int32_t)sw));
    size_t groups = (nc + r - 1) / r * (r / 8);
    group_info gi[GCHUNK];
    int32_t ihl[GCHUNK][8], iwl[GCHUNK][8], nvalid[GCHUNK];
    /* k outer: each k reads a run of one input row (a few rows) in order,
     * which the hardware prefetcher follows; panel-first walked 100 channel
     * planes per group and waited on every line. */
    for (size_t g0 = 0; g0 < groups; g0 += GCHUNK) {
        size_t gn = groups - g0 < GCHUNK ? groups - g0 : GCHUNK;
        for (size_t g = 0; g < gn; g++) {
            size_t pos = (g0 + g) * 8, p = pos / r;
            size_t valid = pos >= nc ? 0 : nc - pos < 8 ? nc - pos : 8;
            gi[g].off = p * kc * r + (pos % r);
            nvalid[g] = (int32_t)valid;
            size_t oh0 = (n0 + pos) / s->ow, ow0 = (n0 + pos) % s->ow;
            gi[g].ih = (int32_t)(oh0 * s->sh);
            gi[g].iw = (int32_t)(ow0 * sw);
            gi[g].contiguous = valid == 8 && ow0 + 8 <= s->ow && (sw == 1 || sw == 2);
            for (size_t q = 0; q < 8; q++) {
                size_t n = n0 + pos + (q < valid ? q : 0);
                ihl[g][q] = (int32_t)((n / s->ow) * s->sh);
                iwl[g][q] = (int32_t)((n % s->ow) * sw);
            }
        }
        for (size_t kk = 0; kk < kc; kk++) {
            size_t k = k0 + kk, tap = k % taps;
            const float *xc = c->planes ? c->planes[k / taps] : c->x + (k / taps) * plane;
            int32_t dh = (int32_t)((tap / s->kw) * s->dh) - (int32_t)s->pt;
            int32_t dw = (int32_t)((tap % s->kw) * s->dw) - (int32_t)s->pl;
            float *drow = dst + kk * r;
            /* the next k's run (another plane, or another row of this one)
             * starts cold: fetch it a few k ahead, a line per 16 lanes */
            if (!xc) { /* a plane of zeros (conv3d.c's depth padding) */
                for (size_t g = 0; g < gn; g++)
                    _mm256_storeu_ps(drow + gi[g].off, _mm256_setzero_ps());
                continue;
            }
            if (kk + 4 < kc) {
                size_t kp = k + 4, tp = kp % taps;
                const float *xp = c->planes ? c->planes[kp / taps] : c->x + (kp / taps) * plane;
                int32_t ph = (int32_t)((tp / s->kw) * s->dh) - (int32_t)s->pt;
                int32_t pw = (int32_t)((tp % s->kw) * s->dw) - (int32_t)s->pl;
                for (size_t g = 0; g < gn && xp; g += 2) {
                    int32_t ih = gi[g].ih + ph, iw = gi[g].iw + pw;
                    if (ih >= 0 && ih < h && iw >= 0 && iw < w)
                        _mm_prefetch((const char *)(xp + (size_t)ih * s->w + (size_t)iw),
                                     _MM_HINT_T0);
                }
            }
            for (size_t g = 0; g < gn; g++) {
                float *d = drow + gi[g].off;
                __m256 v;
                if (gi[g].contiguous) {
                    int32_t ih = gi[g].ih + dh, iw = gi[g].iw + dw;
                    if (ih < 0 || ih >= h) {
                        v = _mm256_setzero_ps();
                    } else if (iw >= 0 && iw + span <= w) {
                        const float *src = xc + (size_t)ih * s->w + (size_t)iw;
                        v = sw == 1 ? _mm256_loadu_ps(src) : load_even16(src);
                    } else if (sw == 1 && iw > -8 && iw < w) {
                        /* a row's edge: the lanes inside are one run, a masked
                         * load (masked lanes are not read; a gather cost ~4x) */
                        __m256i iwv = _mm256_add_epi32(_mm256_set1_epi32(iw), lane);
                        __m256i m = _mm256_and_si256(_mm256_cmpgt_epi32(iwv, neg1),
                                                     _mm256_cmpgt_epi32(vw, iwv));
                        v = _mm256_maskload_ps(xc + (ptrdiff_t)ih * w + iw, m);
                    } else {
                        __m256i iwv = _mm256_add_epi32(_mm256_set1_epi32(iw), lane_sw);
                        __m256i m = _mm256_and_si256(_mm256_cmpgt_epi32(iwv, neg1),
                                                     _mm256_cmpgt_epi32(vw, iwv));
                        __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(ih * w), iwv);
                        v = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), xc, idx,
                                                     _mm256_castsi256_ps(m), 4);
                    }
                } else if (!nvalid[g]) {
                    v = _mm256_setzero_ps();
                } else {
                    /* lanes across output rows or a partial group */
                    __m256i ihv = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)ihl[g]),
                                                   _mm256_set1_epi32(dh));
                    __m256i iwv = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)iwl[g]),
                                                   _mm256_set1_epi32(dw));
                    __m256i m = _mm256_and_si256(_mm256_and_si256(_mm256_cmpgt_epi32(ihv, neg1),
                                                                  _mm256_cmpgt_epi32(vh, ihv)),
                                                 _mm256_and_si256(_mm256_cmpgt_epi32(iwv, neg1),
                                                                  _mm256_cmpgt_epi32(vw, iwv)));
                    m = _mm256_and_si256(m, _mm256_cmpgt_epi32(_mm256_set1_epi32(nvalid[g]), lane));
                    __m256i idx = _mm256_add_epi32(_mm256_mullo_epi32(ihv, vw), iwv);
                    v = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), xc, idx,
                                                 _mm256_castsi256_ps(m), 4);
                }
                _mm256_storeu_ps(d, v);
            }
        }
    }
}

/* d0[i] = src[2 i], d1[i] = src[2 i + 1] for i < n: the stride-2 phase
 * split of one input row (conv_strided.c), 8 pairs per step. */
void nnf_split_row2_avx2(const float *src, size_t n, float *d0, float *d1) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 lo = _mm256_loadu_ps(src + 2 * i), hi = _mm256_loadu_ps(src + 2 * i + 8);
        __m256 ev = _mm256_shuffle_ps(lo, hi, 0x88), od = _mm256_shuffle_ps(lo, hi, 0xdd);
        _mm256_storeu_ps(d0 + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xd8)));
        _mm256_storeu_ps(d1 + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xd8)));
    }
    for (; i < n; i++) {
        d0[i] = src[2 * i];
        d1[i] = src[2 * i + 1];
    }
}

/* Two NCHWc8 channel blocks in one zmm, for the AVX-512 tiers' blocked
 * kernels (the dense conv tiles, the Winograd transforms, the depthwise
 * pairs): a pixel's
 * 8 channels of block p in the low half, of the block one plane further in
 * the high half. */
#ifndef NNF_KERNELS_X86_NCHWC_PAIR_AVX512_H
#define NNF_KERNELS_X86_NCHWC_PAIR_AVX512_H

#include "kernels/x86/avx512_intrin.h"

#include <stddef.h>

/* The second half zero when there is no second block. */
static inline __m512 nnf_load_pair(const float *p, size_t plane, int both) {
    __m512 v = _mm512_castps256_ps512(_mm256_loadu_ps(p));
    return _mm512_insertf32x8(v, both ? _mm256_loadu_ps(p + plane) : _mm256_setzero_ps(), 1);
}

/* Pixel (ih, iw) of the pair at xc (rows `row` floats apart), zeros outside
 * an H x W input unless inside says the pixel is in (the Winograd
 * transforms: constant flags, so no test where the patch is inside). */
static inline __attribute__((always_inline)) __m512
nnf_load_pixel_pair(int both, int inside, const float *xc, size_t row, size_t plane, ptrdiff_t ih,
                    ptrdiff_t iw, ptrdiff_t H, ptrdiff_t W) {
    return inside || (ih >= 0 && ih < H && iw >= 0 && iw < W)
               ? nnf_load_pair(xc + ih * (ptrdiff_t)row + iw * 8, plane, both)
               : _mm512_setzero_ps();
}

/* A zmm of V (two blocks' channels of one tile) at d: the low half only
 * when there is no second block. */
static inline __attribute__((always_inline)) void nnf_store_v_pair(int both, float *d, __m512 v) {
    if (both)
        _mm512_storeu_ps(d, v);
    else
        _mm512_mask_storeu_ps(d, 0x00ff, v);
}

/* v's high half (the second block). */
static inline __m256 nnf_pair_high(__m512 v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

/* a's low half, then b's. */
static inline __m512 nnf_pair_join(__m512 a, __m512 b) {
    return _mm512_insertf32x8(a, _mm512_castps512_ps256(b), 1);
}

static inline void nnf_store_pair(float *p, size_t plane, int both, __m512 v) {
    _mm256_storeu_ps(p, _mm512_castps512_ps256(v));
    if (both)
        _mm256_storeu_ps(p + plane, nnf_pair_high(v));
}

/* The real lanes of output blocks ob, ob + 1 of ob_n blocks holding oc
 * channels: block ob's low 8 (fewer in the last block), then ob + 1's. */
static inline __mmask16 nnf_pair_keep(size_t oc, size_t ob, size_t ob_n) {
    size_t tail = oc % 8;
    __mmask16 keep = (__mmask16)(tail && ob + 1 == ob_n ? (1u << tail) - 1u : 0xffu);
    if (ob + 1 < ob_n)
        keep |= (__mmask16)((tail && ob + 2 == ob_n ? (1u << tail) - 1u : 0xffu) << 8);
    return keep;
}

#endif

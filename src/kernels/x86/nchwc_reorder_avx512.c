/* AVX-512 tiles of the NCHW <-> NCHWc8 reorders (nchwc_reorder.c): 16
 * pixels of one block at a time, a 16 x 8 transpose in eight zmm.
 *
 * A zmm of the blocked side is two pixels' 8 channels; one of the plain
 * side is 16 pixels of one channel plane, a whole cache line when the
 * pixel offset is a multiple of 16. Element (pixel i, channel c) sits in
 * register i / 2, lane 8 (i % 2) + c of the blocked side and in register
 * c, lane i of the plain one: the transpose exchanges the three register
 * bits with three lane bits, one per round of vpermt2ps over the register
 * pairs that differ in that bit (24 two-source permutes per 128 floats,
 * where the AVX2 tier's 8 x 8 transposes take 48 shuffles and store
 * 32-byte halves of lines to eight planes). The last np % 16 pixels go to
 * the AVX2 tile. */
#include "kernels/x86/avx512_intrin.h"
#include "kernels/x86/nchwc_avx2.h"

/* One round: registers r and r | bit (for every r without bit) become the
 * elements a lo / hi index picks from the pair (indices >= 16: the second
 * register). */
static inline __attribute__((always_inline)) void round_(__m512 v[8], int bit, __m512i lo, __m512i hi) {
    for (int r = 0; r < 8; r++) {
        if (r & bit)
            continue;
        __m512 a = v[r], b = v[r | bit];
        v[r] = _mm512_permutex2var_ps(a, lo, b);
        v[r | bit] = _mm512_permutex2var_ps(a, hi, b);
    }
}

/* Blocked to plain: each round deinterleaves the pair (even lanes of both,
 * then odd), moving a channel bit into the register number. */
static inline __attribute__((always_inline)) void to_planes(__m512 v[8]) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    round_(v, 1, even, odd);
    round_(v, 2, even, odd);
    round_(v, 4, even, odd);
}

/* Plain to blocked: the inverse, a pixel bit into the register number per
 * round. */
static inline __attribute__((always_inline)) void to_blocks(__m512 v[8]) {
    const __m512i lo = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29);
    const __m512i hi = _mm512_setr_epi32(2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
    const __m512i lo2 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const __m512i hi2 = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
    round_(v, 1, lo, hi);
    round_(v, 2, lo, hi);
    round_(v, 4, lo2, hi2);
}

void nnf_nchwc_from_nchw_tile_avx512(const float *x, size_t hw, size_t nc, size_t np, float *y) {
    size_t p = 0;
    for (; p + 16 <= np; p += 16) {
        __m512 v[8];
        for (size_t l = 0; l < 8; l++)
            v[l] = l < nc ? _mm512_loadu_ps(x + l * hw + p) : _mm512_setzero_ps();
        to_blocks(v);
        for (int r = 0; r < 8; r++)
            _mm512_storeu_ps(y + p * NNF_NCHWC_B + 16 * r, v[r]);
    }
    if (p < np)
        nnf_nchwc_from_nchw_tile_avx2(x + p, hw, nc, np - p, y + p * NNF_NCHWC_B);
}

void nnf_nchwc_to_nchw_tile_avx512(const float *x, size_t hw, size_t nc, size_t np, float *y) {
    size_t p = 0;
    for (; p + 16 <= np; p += 16) {
        __m512 v[8];
        for (int r = 0; r < 8; r++)
            v[r] = _mm512_loadu_ps(x + p * NNF_NCHWC_B + 16 * r);
        to_planes(v);
        for (size_t l = 0; l < nc; l++)
            _mm512_storeu_ps(y + l * hw + p, v[l]);
    }
    if (p < np)
        nnf_nchwc_to_nchw_tile_avx2(x + p * NNF_NCHWC_B, hw, nc, np - p, y + p);
}

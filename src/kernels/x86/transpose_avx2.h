/* Register transposes on ymm, shared by the AVX2 transpose kernel, the GEMM
 * packers of both SIMD tiers (AVX-512 machines run these too), the NCHWc8
 * reorders and the channel-interleaved depthwise kernel. Only bits move, so
 * any 4-byte type goes through them. */
#ifndef NNF_KERNELS_X86_TRANSPOSE_AVX2_H
#define NNF_KERNELS_X86_TRANSPOSE_AVX2_H

#include <immintrin.h>
#include <stddef.h>

/* r[0..7] (rows) -> r[0..7] (columns): the 8x8 register transpose. */
static inline __attribute__((always_inline)) void nnf_tr8_regs_avx2(__m256 r[8]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* y[c * ldy + r] = x[r * ldx + c] for r, c < 8. */
static inline void nnf_tr8x8_avx2(const float *x, size_t ldx, float *y, size_t ldy) {
    __m256 r[8];
#pragma GCC unroll 8
    for (size_t i = 0; i < 8; i++)
        r[i] = _mm256_loadu_ps(x + i * ldx);
    nnf_tr8_regs_avx2(r);
#pragma GCC unroll 8
    for (size_t c = 0; c < 8; c++)
        _mm256_storeu_ps(y + c * ldy, r[c]);
}

/* y[c * ldy + r] = x[r * ldx + c] for r < 6, c < 8: six rows of a GEMM's A
 * into eight k-steps of a packed panel. */
static inline void nnf_tr6x8_avx2(const float *x, size_t ldx, float *y, size_t ldy) {
    __m256 r0 = _mm256_loadu_ps(x), r1 = _mm256_loadu_ps(x + ldx);
    __m256 r2 = _mm256_loadu_ps(x + 2 * ldx), r3 = _mm256_loadu_ps(x + 3 * ldx);
    __m256 r4 = _mm256_loadu_ps(x + 4 * ldx), r5 = _mm256_loadu_ps(x + 5 * ldx);
    /* t0 = r0[0] r1[0] r0[1] r1[1] | r0[4] r1[4] r0[5] r1[5] ... */
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    /* s0 = rows 0-3 of c = 0 | c = 4, s1: c = 1 | 5, s2: 2 | 6, s3: 3 | 7 */
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee);
    __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee);
    __m128 t4l = _mm256_castps256_ps128(t4), t4h = _mm256_extractf128_ps(t4, 1);
    __m128 t5l = _mm256_castps256_ps128(t5), t5h = _mm256_extractf128_ps(t5, 1);
    _mm_storeu_ps(y, _mm256_castps256_ps128(s0));
    _mm_storel_pi((__m64 *)(y + 4), t4l);
    _mm_storeu_ps(y + ldy, _mm256_castps256_ps128(s1));
    _mm_storeh_pi((__m64 *)(y + ldy + 4), t4l);
    _mm_storeu_ps(y + 2 * ldy, _mm256_castps256_ps128(s2));
    _mm_storel_pi((__m64 *)(y + 2 * ldy + 4), t5l);
    _mm_storeu_ps(y + 3 * ldy, _mm256_castps256_ps128(s3));
    _mm_storeh_pi((__m64 *)(y + 3 * ldy + 4), t5l);
    _mm_storeu_ps(y + 4 * ldy, _mm256_extractf128_ps(s0, 1));
    _mm_storel_pi((__m64 *)(y + 4 * ldy + 4), t4h);
    _mm_storeu_ps(y + 5 * ldy, _mm256_extractf128_ps(s1, 1));
    _mm_storeh_pi((__m64 *)(y + 5 * ldy + 4), t4h);
    _mm_storeu_ps(y + 6 * ldy, _mm256_extractf128_ps(s2, 1));
    _mm_storel_pi((__m64 *)(y + 6 * ldy + 4), t5h);
    _mm_storeu_ps(y + 7 * ldy, _mm256_extractf128_ps(s3, 1));
    _mm_storeh_pi((__m64 *)(y + 7 * ldy + 4), t5h);
}

/* y[c * ldy + r] = x[r * ldx + c] for c < 8 and r < w (w <= 8), zeros for
 * the rows r >= rows (nothing read there): eight k-steps of w positions of a
 * short panel, its missing rows the panel's zero padding. */
static inline void nnf_tr8x8_part_avx2(const float *x, size_t ldx, size_t rows, float *y,
                                       size_t ldy, size_t w) {
    __m256 r[8];
#pragma GCC unroll 8
    for (size_t i = 0; i < 8; i++)
        r[i] = i < rows ? _mm256_loadu_ps(x + i * ldx) : _mm256_setzero_ps();
    nnf_tr8_regs_avx2(r);
    __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)w), lanes);
#pragma GCC unroll 8
    for (size_t c = 0; c < 8; c++)
        _mm256_maskstore_ps(y + c * ldy, keep, r[c]);
}

/* A GEMM's A (row-major) into panels of R = 8 i or 8 i + 6 rows, [k][R] each
 * (the same for a B read transposed, rows its columns, into R = nr column
 * panels):
 * eight k-steps of a panel at a time through the register transposes (each
 * k's R values leave as vector stores, not R scalar ones strided by R: the
 * portable packer cost 8-9 % of a 1024^3 GEMM), a short panel's missing rows
 * as zeros; the k tail element by element, zeros past its rows. */
static inline __attribute__((always_inline)) void nnf_pack_a_panels_avx2(
    const float *base, size_t ld, size_t mn0, size_t mnc, size_t k0, size_t kc, float *dst,
    size_t R) {
    for (size_t p = 0; p < mnc; p += R, dst += kc * R) {
        size_t rows = mnc - p < R ? mnc - p : R, kk = 0;
        const float *r0 = base + (mn0 + p) * ld + k0;
        if (rows == R)
            for (; kk + 8 <= kc; kk += 8) {
                size_t q = 0;
                for (; q + 8 <= R; q += 8)
                    nnf_tr8x8_avx2(r0 + q * ld + kk, ld, dst + kk * R + q, R);
                if (q < R)
                    nnf_tr6x8_avx2(r0 + q * ld + kk, ld, dst + kk * R + q, R);
            }
        else
            /* a short panel (gemm.c, tail_split: BERT's M = 128 ends in two
             * of 8, a Winograd conv's 49 tiles in one of 7): eight rows at a
             * time through the transpose, the rows past the panel's as its
             * zero padding. Element by element, the 7-row panels of
             * ResNet-50's 14x14 Winograd GEMMs took 7.6 % of the conv, and
             * a whole BERT-base run on AVX-512 3 %. */
            for (; kk + 8 <= kc; kk += 8)
                for (size_t q = 0; q < R; q += 8) {
                    size_t w = R - q < 8 ? R - q : 8, in = rows > q ? rows - q : 0;
                    /* no address formed past the panel's rows */
                    nnf_tr8x8_part_avx2(in ? r0 + q * ld + kk : r0, ld, in, dst + kk * R + q, R, w);
                }
        for (; kk < kc; kk++)
            for (size_t q = 0; q < R; q++)
                dst[kk * R + q] = q < rows ? r0[q * ld + kk] : 0.0f;
    }
}

#endif

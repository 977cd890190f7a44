/* The global average pool's block sums on the AVX-512 tier (nchwc_pool.c):
 * a pixel's 8 channels widened to one zmm of doubles and added, four
 * pixels' chains side by side, where the AVX2 tier widens each half apart
 * (two conversions and two additions a pixel: EfficientNet's squeeze-and-
 * excitation pools ran at 0.57-0.78 of ONNX Runtime's float sums). Sums in
 * double like the reference; only the order of the additions differs from
 * the AVX2 tier's. The max pool's is the AVX2 tier's. */
#include "kernels/x86/avx512_intrin.h"
#include "kernels/x86/nchwc_avx2.h"

#include <string.h>

#define B NNF_NCHWC_B

void nnf_nchwc_global_block_avx512(const float *x, size_t hw, int is_max, size_t nc, float *y) {
    if (is_max) {
        nnf_nchwc_global_block_avx2(x, hw, is_max, nc, y);
        return;
    }
    __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    size_t p = 0;
    for (; p + 4 <= hw; p += 4) {
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_loadu_ps(x + p * B)));
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_loadu_ps(x + (p + 1) * B)));
        a2 = _mm512_add_pd(a2, _mm512_cvtps_pd(_mm256_loadu_ps(x + (p + 2) * B)));
        a3 = _mm512_add_pd(a3, _mm512_cvtps_pd(_mm256_loadu_ps(x + (p + 3) * B)));
    }
    for (; p < hw; p++)
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_loadu_ps(x + p * B)));
    __m512d s = _mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3));
    float out[B];
    _mm256_storeu_ps(
        out, _mm512_cvtpd_ps(_mm512_mul_pd(s, _mm512_set1_pd(hw ? 1.0 / (double)hw : 0.0))));
    memcpy(y, out, nc * sizeof(float));
}

/* The AVX-512 intrinsics, for the *_avx512.c files (and only them).
 *
 * A normal build takes them from the compiler: the files are compiled with
 * -mavx512f/bw/dq/vl and run only where CPUID reports AVX-512. A build
 * configured with -DNNF_EMULATE_AVX512=ON (`make test-avx512`) takes them
 * from SIMDe (Debian's libsimde-dev), which implements each one with AVX2
 * instructions: the same AVX-512 source then runs, lane for lane, on a
 * machine without AVX-512, so its tests run where no AVX-512 CPU is at hand.
 * Each emulated FMA is a hardware FMA on 8 lanes, so results are those of
 * the real instructions. */
#ifndef NNF_KERNELS_X86_AVX512_INTRIN_H
#define NNF_KERNELS_X86_AVX512_INTRIN_H

#ifdef NNF_AVX512_EMULATED
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include <stdint.h>

/* The intrinsics SIMDe 0.7.4 lacks, lane by lane with the instruction's
 * semantics: masked lanes are neither read nor written (so no fault past
 * an array's end), the conversion rounds as the hardware does (MXCSR,
 * through the AVX2 instruction), the sum adds in GCC's reduction order. */
static inline __m512 nnf_emu_maskz_loadu_ps(__mmask16 k, const void *p) {
    float v[16] = {0};
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1)
            v[i] = ((const float *)p)[i];
    return _mm512_loadu_ps(v);
}
static inline void nnf_emu_mask_storeu_ps(void *p, __mmask16 k, __m512 a) {
    float v[16];
    _mm512_storeu_ps(v, a);
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1)
            ((float *)p)[i] = v[i];
}
static inline __m512i nnf_emu_cvtps_epi32(__m512 a) {
    float v[16];
    int32_t r[16];
    _mm512_storeu_ps(v, a);
    _mm256_storeu_si256((__m256i *)r, _mm256_cvtps_epi32(_mm256_loadu_ps(v)));
    _mm256_storeu_si256((__m256i *)(r + 8), _mm256_cvtps_epi32(_mm256_loadu_ps(v + 8)));
    return _mm512_loadu_si512(r);
}
static inline float nnf_emu_reduce_add_ps(__m512 a) {
    float v[16], t[8], u[4];
    _mm512_storeu_ps(v, a);
    for (int i = 0; i < 8; i++)
        t[i] = v[i + 8] + v[i];
    for (int i = 0; i < 4; i++)
        u[i] = t[i + 4] + t[i];
    return (u[0] + u[2]) + (u[1] + u[3]);
}
static inline __m512 nnf_emu_mask_loadu_ps(__m512 src, __mmask16 k, const void *p) {
    float v[16];
    _mm512_storeu_ps(v, src);
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1)
            v[i] = ((const float *)p)[i];
    return _mm512_loadu_ps(v);
}
/* maxps(a, b): b where unordered or equal; the tree of GCC's reduction */
static inline float nnf_emu_max(float a, float b) {
    return a > b ? a : b;
}
static inline float nnf_emu_reduce_max_ps(__m512 a) {
    float v[16], t[8], u[4];
    _mm512_storeu_ps(v, a);
    for (int i = 0; i < 8; i++)
        t[i] = nnf_emu_max(v[i + 8], v[i]);
    for (int i = 0; i < 4; i++)
        u[i] = nnf_emu_max(t[i + 4], t[i]);
    return nnf_emu_max(nnf_emu_max(u[0], u[2]), nnf_emu_max(u[1], u[3]));
}
/* a * 2^floor(b) rounded once, subnormal results kept (SIMDe's flushes
 * them and goes through exp2): the hardware's for finite a and b */
static inline __m512 nnf_emu_scalef_ps(__m512 a, __m512 b) {
    float x[16], e[16];
    _mm512_storeu_ps(x, a);
    _mm512_storeu_ps(e, b);
    for (int i = 0; i < 16; i++)
        x[i] = __builtin_ldexpf(x[i], (int)__builtin_floorf(e[i]));
    return _mm512_loadu_ps(x);
}
/* 8 doubles to 8 floats, rounded as MXCSR says (through the AVX instruction) */
static inline __m256 nnf_emu_cvtpd_ps(__m512d a) {
    double v[8];
    _mm512_storeu_pd(v, a);
    return _mm256_set_m128(_mm256_cvtpd_ps(_mm256_loadu_pd(v + 4)), _mm256_cvtpd_ps(_mm256_loadu_pd(v)));
}
/* 8 floats to 8 doubles (exact) */
static inline __m512d nnf_emu_cvtps_pd(__m256 a) {
    double v[8];
    _mm256_storeu_pd(v, _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
    _mm256_storeu_pd(v + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
    return _mm512_loadu_pd(v);
}
/* valignd: lanes imm.. of the 32-lane concatenation a:b (b the low half) */
static inline __m512i nnf_emu_alignr_epi32(__m512i a, __m512i b, int imm) {
    int32_t v[32], r[16];
    _mm512_storeu_si512(v, b);
    _mm512_storeu_si512(v + 16, a);
    for (int i = 0; i < 16; i++)
        r[i] = v[i + (imm & 15)];
    return _mm512_loadu_si512(r);
}
#undef _mm512_alignr_epi32
#define _mm512_alignr_epi32 nnf_emu_alignr_epi32
#undef _mm512_scalef_ps
#define _mm512_scalef_ps nnf_emu_scalef_ps
#undef _mm512_cvtpd_ps
#define _mm512_cvtpd_ps nnf_emu_cvtpd_ps
#undef _mm512_cvtps_pd
#define _mm512_cvtps_pd nnf_emu_cvtps_pd
#define _mm512_maskz_loadu_ps nnf_emu_maskz_loadu_ps
#define _mm512_mask_storeu_ps nnf_emu_mask_storeu_ps
#define _mm512_cvtps_epi32 nnf_emu_cvtps_epi32
#define _mm512_reduce_add_ps nnf_emu_reduce_add_ps
#define _mm512_mask_loadu_ps nnf_emu_mask_loadu_ps
#define _mm512_reduce_max_ps nnf_emu_reduce_max_ps
#else
#include <immintrin.h>
#endif

#endif

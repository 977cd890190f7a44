/* f32_gemm_6x16_avx2: the AVX2+FMA microkernel, and the AVX2 array math.
 *
 * Tile: 6 rows x 16 columns = 12 ymm accumulators; per k, two loads of B and
 * six broadcasts of A feed 12 FMAs (two FMA ports: 6 cycles per k, enough
 * independent chains to cover the 4-5 cycle FMA latency). Panels come from
 * gemm.c's packers: a is kc x 6, b is kc x 16, both contiguous. */
#include "kernels/gemm.h"
#include "kernels/vmath.h"
#include "kernels/x86/vmath_avx2.h"

static inline void store_row(float *cr, __m256 v0, __m256 v1, size_t r, size_t n,
                             __m256i m0, __m256i m1, const nnf_tile_ep *t) {
    int full = n == 16;
    if (t->accumulate) {
        if (full) {
            v0 = _mm256_add_ps(v0, _mm256_loadu_ps(cr));
            v1 = _mm256_add_ps(v1, _mm256_loadu_ps(cr + 8));
        } else {
            v0 = _mm256_add_ps(v0, _mm256_maskload_ps(cr, m0));
            v1 = _mm256_add_ps(v1, _mm256_maskload_ps(cr + 8, m1));
        }
    }
    if (t->ep) {
        v0 = nnf_ep8(v0, t, r, 0, full || n >= 8, m0);
        v1 = nnf_ep8(v1, t, r, 8, full, m1);
    }
    if (full) {
        _mm256_storeu_ps(cr, v0);
        _mm256_storeu_ps(cr + 8, v1);
    } else {
        _mm256_maskstore_ps(cr, m0, v0);
        _mm256_maskstore_ps(cr + 8, m1, v1);
    }
}

void nnf_gemm_ukernel_6x16_avx2(size_t kc, const float *a, const float *b, float *c, size_t ldc,
                                size_t m, size_t n, const nnf_tile_ep *t) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
#define NNF_K_STEP(off)                                                                        \
    do {                                                                                       \
        __m256 b0 = _mm256_loadu_ps(b + 16 * (off)), b1 = _mm256_loadu_ps(b + 16 * (off) + 8); \
        __m256 av = _mm256_broadcast_ss(a + 6 * (off) + 0);                                    \
        c00 = _mm256_fmadd_ps(av, b0, c00);                                                    \
        c01 = _mm256_fmadd_ps(av, b1, c01);                                                    \
        av = _mm256_broadcast_ss(a + 6 * (off) + 1);                                           \
        c10 = _mm256_fmadd_ps(av, b0, c10);                                                    \
        c11 = _mm256_fmadd_ps(av, b1, c11);                                                    \
        av = _mm256_broadcast_ss(a + 6 * (off) + 2);                                           \
        c20 = _mm256_fmadd_ps(av, b0, c20);                                                    \
        c21 = _mm256_fmadd_ps(av, b1, c21);                                                    \
        av = _mm256_broadcast_ss(a + 6 * (off) + 3);                                           \
        c30 = _mm256_fmadd_ps(av, b0, c30);                                                    \
        c31 = _mm256_fmadd_ps(av, b1, c31);                                                    \
        av = _mm256_broadcast_ss(a + 6 * (off) + 4);                                           \
        c40 = _mm256_fmadd_ps(av, b0, c40);                                                    \
        c41 = _mm256_fmadd_ps(av, b1, c41);                                                    \
        av = _mm256_broadcast_ss(a + 6 * (off) + 5);                                           \
        c50 = _mm256_fmadd_ps(av, b0, c50);                                                    \
        c51 = _mm256_fmadd_ps(av, b1, c51);                                                    \
    } while (0)
    size_t k = 0;
    for (; k + 4 <= kc; k += 4, a += 24, b += 64) {
        _mm_prefetch((const char *)(b + 256), _MM_HINT_T0);
        NNF_K_STEP(0);
        NNF_K_STEP(1);
        _mm_prefetch((const char *)(b + 288), _MM_HINT_T0);
        NNF_K_STEP(2);
        NNF_K_STEP(3);
    }
    for (; k < kc; k++, a += 6, b += 16)
        NNF_K_STEP(0);
#undef NNF_K_STEP

    __m256i m0 = nnf_mask8(n), m1 = nnf_mask8(n > 8 ? n - 8 : 0);
    store_row(c, c00, c01, 0, n, m0, m1, t);
    if (m > 1)
        store_row(c + ldc, c10, c11, 1, n, m0, m1, t);
    if (m > 2)
        store_row(c + 2 * ldc, c20, c21, 2, n, m0, m1, t);
    if (m > 3)
        store_row(c + 3 * ldc, c30, c31, 3, n, m0, m1, t);
    if (m > 4)
        store_row(c + 4 * ldc, c40, c41, 4, n, m0, m1, t);
    if (m > 5)
        store_row(c + 5 * ldc, c50, c51, 5, n, m0, m1, t);
}

static inline __m256 vm8(nnf_vm_fn fn, __m256 x) {
    switch (fn) {
    case NNF_VM_EXP: return nnf_exp8(x);
    case NNF_VM_SIGMOID: return nnf_sigmoid8(x);
    case NNF_VM_TANH: return nnf_tanh8(x);
    case NNF_VM_ERF: return nnf_erf8(x);
    }
    return x;
}

void nnf_vmath_avx2(nnf_vm_fn fn, const float *x, float *y, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, vm8(fn, _mm256_loadu_ps(x + i)));
    if (i < n) {
        __m256i m = nnf_mask8(n - i);
        _mm256_maskstore_ps(y + i, m, vm8(fn, _mm256_maskload_ps(x + i, m)));
    }
}

void nnf_act_array_avx2(const nnf_activation *act, const float *x, float *y, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, nnf_act8(_mm256_loadu_ps(x + i), act));
    if (i < n) {
        __m256i m = nnf_mask8(n - i);
        _mm256_maskstore_ps(y + i, m, nnf_act8(_mm256_maskload_ps(x + i, m), act));
    }
}

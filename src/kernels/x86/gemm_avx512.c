/* f32_gemm_14x32_avx512: the AVX-512 microkernel, and the AVX-512 array math.
 *
 * Tile: 14 rows x 32 columns = 28 zmm accumulators, 2 for B, 1 broadcast: 31
 * of the 32 registers. Per k: two loads of B, 14 broadcasts, 28 FMAs. Panels
 * are kc x 14 (A) and kc x 32 (B), contiguous. The build host may lack
 * AVX-512: the file must compile everywhere, and it runs only where CPUID
 * reports AVX-512 F/BW/DQ/VL, or in the SIMDe test build (avx512_intrin.h). */
#include "kernels/gemm.h"
#include "kernels/vmath.h"
#include "kernels/x86/ep_fast_avx2.h"
#include "kernels/x86/gemv_block.h"
#ifndef NNF_AVX512_EMULATED
#include "kernels/x86/gemm_direct_avx512.h"
#endif
#include "kernels/x86/transpose_avx2.h"
#include "kernels/x86/vmath_avx512.h"

/* The tile's epilogue decided once (nnf_ep_fast: alpha 1, a bias, a
 * residual before a clamp), in nnf_ep16's order, so the same values.
 * Through nnf_ep16 and nnf_act16 per vector (a call each, their tests
 * and switch) the epilogue was 14 % of a 64 -> 256 1x1 conv. */
typedef struct ep_tile16 {
    nnf_ep_fast f;   /* of the epilogue with alpha 1: alpha is applied first */
    int scaled;      /* alpha != 1: the values times alpha before the rest */
    int per_row;     /* the bias is per row (else per column: bc0, bc1) */
    __m512 alpha;
    __m512 bc0, bc1; /* the per-column bias of the tile's 32 columns */
    __m512 lo, hi;
} ep_tile16;

static inline __attribute__((always_inline)) void store_row16(float *cr, __m512 v0, __m512 v1,
                                                              size_t r, __mmask16 k0, __mmask16 k1,
                                                              const nnf_tile_ep *t,
                                                              const ep_tile16 *et) {
    if (t->accumulate) {
        v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(k0, cr));
        v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(k1, cr + 16));
    }
    if (t->ep && et->f.clamp_only) {
        if (et->scaled) {
            v0 = _mm512_mul_ps(v0, et->alpha);
            v1 = _mm512_mul_ps(v1, et->alpha);
        }
        if (et->f.bias) {
            __m512 b0 = et->per_row ? _mm512_set1_ps(t->bias[r]) : et->bc0;
            __m512 b1 = et->per_row ? b0 : et->bc1;
            v0 = _mm512_add_ps(v0, b0);
            v1 = _mm512_add_ps(v1, b1);
        }
        if (t->residual) {
            const float *res = t->residual + r * t->ep->ld_residual;
            v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(k0, res));
            v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(k1, res + 16));
        }
        if (et->f.clamp) {
            v0 = _mm512_min_ps(et->hi, _mm512_max_ps(et->lo, v0));
            v1 = _mm512_min_ps(et->hi, _mm512_max_ps(et->lo, v1));
        }
    } else if (t->ep) {
        v0 = nnf_ep16(v0, t, r, 0, k0);
        v1 = nnf_ep16(v1, t, r, 16, k1);
    }
    _mm512_mask_storeu_ps(cr, k0, v0);
    _mm512_mask_storeu_ps(cr + 16, k1, v1);
}

/* An epilogue with a heavy activation (nnf_act_heavy: GELU, SiLU, Sigmoid,
 * Tanh) and no residual after it, its kind a constant: the m rows'
 * pre-activation values first (nnf_ep16 with the activation left out), then
 * the activation on every vector of the tile, four side by side. Row by row
 * (nnf_ep16 on two vectors, a switch on the kind each) each row's ~20
 * dependent operations of an erf ran behind the last: BERT's 128 x 768 x
 * 3072 with GELU took 0.45 ms more than without it (8 %). The operations on
 * each value are nnf_ep16's, in its order: the same results. */
static inline __attribute__((always_inline)) void ep_tile_act16(nnf_act_kind kind, __m512 *v,
                                                                float *c, size_t ldc, size_t m,
                                                                __mmask16 k0, __mmask16 k1,
                                                                const nnf_tile_ep *t) {
    nnf_activation act = t->ep->act;
    act.kind = kind;
    nnf_epilogue pre = *t->ep;
    pre.act.kind = NNF_ACT_NONE;
    nnf_tile_ep tp = *t;
    tp.ep = &pre;
    for (size_t r = 0; r < m; r++)
        for (int h = 0; h < 2; h++) {
            __mmask16 k = h ? k1 : k0;
            __m512 x = v[2 * r + h];
            if (t->accumulate)
                x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(k, c + r * ldc + 16 * h));
            v[2 * r + h] = nnf_ep16(x, &tp, r, 16 * (size_t)h, k);
        }
    for (size_t i = 0; i < 2 * m; i += 4) {
        v[i] = nnf_act16(v[i], &act);
        v[i + 1] = nnf_act16(v[i + 1], &act);
        v[i + 2] = nnf_act16(v[i + 2], &act);
        v[i + 3] = nnf_act16(v[i + 3], &act);
    }
    for (size_t r = 0; r < m; r++) {
        _mm512_mask_storeu_ps(c + r * ldc, k0, v[2 * r]);
        _mm512_mask_storeu_ps(c + r * ldc + 16, k1, v[2 * r + 1]);
    }
}

/* Whether the tile's epilogue takes ep_tile_flat16 (a heavy kind is never
 * the fast clamp-only one). */
static inline int tile_act_path(const nnf_tile_ep *t) {
    return t->ep && nnf_act_heavy(t->ep->act.kind) && !(t->residual && t->ep->residual_after_act);
}

/* v: 2 x 14 vectors (rows past m unused, 2 m rounded up to 4 of them
 * computed); the kinds nnf_act_heavy names. */
static __attribute__((flatten, noinline)) void ep_tile_flat16(__m512 *v, float *c, size_t ldc,
                                                              size_t m, __mmask16 k0, __mmask16 k1,
                                                              const nnf_tile_ep *t) {
    switch (t->ep->act.kind) {
    case NNF_ACT_SIGMOID: ep_tile_act16(NNF_ACT_SIGMOID, v, c, ldc, m, k0, k1, t); return;
    case NNF_ACT_SILU: ep_tile_act16(NNF_ACT_SILU, v, c, ldc, m, k0, k1, t); return;
    case NNF_ACT_TANH: ep_tile_act16(NNF_ACT_TANH, v, c, ldc, m, k0, k1, t); return;
    case NNF_ACT_GELU_ERF: ep_tile_act16(NNF_ACT_GELU_ERF, v, c, ldc, m, k0, k1, t); return;
    case NNF_ACT_GELU_TANH: ep_tile_act16(NNF_ACT_GELU_TANH, v, c, ldc, m, k0, k1, t); return;
    default: ep_tile_act16(NNF_ACT_NONE, v, c, ldc, m, k0, k1, t); return; /* not reached */
    }
}

/* The tile's m rows of C (32 columns each) into L1: see gemm_avx2.c, C
 * comes back on every K block. */
static inline void prefetch_c_rows(const float *c, size_t ldc, size_t m) {
    for (size_t r = 0; r < m; r++) {
        _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + r * ldc + 31), _MM_HINT_T0);
    }
}

static inline __attribute__((always_inline)) ep_tile16 ep_tile_init(const nnf_tile_ep *t,
                                                                    __mmask16 k0, __mmask16 k1) {
    /* alpha (an attention's scale) in registers too: nnf_ep16 multiplies by
     * it before anything else */
    nnf_epilogue unscaled;
    const nnf_epilogue *e = t->ep;
    if (e && e->alpha != 1.0f) {
        unscaled = *e;
        unscaled.alpha = 1.0f;
        e = &unscaled;
    }
    ep_tile16 et = {.f = nnf_ep_fast_init(e)};
    if (t->ep && et.f.clamp_only) {
        et.scaled = t->ep->alpha != 1.0f;
        et.alpha = _mm512_set1_ps(t->ep->alpha);
        et.per_row = t->ep->bias_kind == NNF_BIAS_PER_ROW;
        if (et.f.bias && !et.per_row) {
            et.bc0 = _mm512_maskz_loadu_ps(k0, t->bias);
            et.bc1 = _mm512_maskz_loadu_ps(k1, t->bias + 16);
        }
        et.lo = _mm512_set1_ps(_mm256_cvtss_f32(et.f.lo));
        et.hi = _mm512_set1_ps(_mm256_cvtss_f32(et.f.hi));
    }
    return et;
}

/* The tile's first RR rows (RR a constant, so the rows past it vanish):
 * each row costs one k step of two FMAs whether it is wanted or not, and a
 * block's last panel is often short (BERT's M = 128 is 9 panels of 14 and
 * one of 2, or with tail_split 8 of 14 and two of 8; YOLOv5s's 255-channel
 * head 18 of 14 and one of 3). Likewise NB zmm columns (1 or 2): a last
 * panel of at most 16 columns computes 16, not 32 (a 14x14 map's 196
 * pixels are 6 panels of 32 and one of 4). Every element gets one FMA per
 * k in k order whichever form computes it, so the values do not depend on
 * it. */
static inline __attribute__((always_inline)) void
tile_rows(size_t kc, const float *a, const float *b, float *c, size_t ldc, size_t m, size_t n,
          const nnf_tile_ep *t, const int RR, const int NB) {
#define Z(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = _mm512_setzero_ps()
    Z(0); Z(1); Z(2); Z(3); Z(4); Z(5); Z(6); Z(7); Z(8); Z(9); Z(10); Z(11); Z(12); Z(13);
#undef Z
#define R(r)                                                                                       \
    if (RR > r) {                                                                                  \
        __m512 av = _mm512_set1_ps(a[r]);                                                          \
        c##r##0 = _mm512_fmadd_ps(av, b0, c##r##0);                                                \
        if (NB > 1)                                                                                \
            c##r##1 = _mm512_fmadd_ps(av, b1, c##r##1);                                            \
    }
    prefetch_c_rows(c, ldc, m);
    /* the next block's lines (t->pf_next), one every `every` k steps */
    const char *pf = t->pf_next;
    size_t pf_left = t->pf_lines, every = pf_left && kc > pf_left ? kc / pf_left : 1;
    size_t until = every;
    for (size_t k = 0; k < kc; k++, a += 14, b += 32) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = NB > 1 ? _mm512_loadu_ps(b + 16) : b0;
        /* both lines of B's row 16 k steps on: one prefetch a step left
         * every other line to the hardware (BERT-base 0.93 with both) */
        _mm_prefetch((const char *)(b + 512), _MM_HINT_T0);
        if (NB > 1)
            _mm_prefetch((const char *)(b + 528), _MM_HINT_T0);
        if (pf_left && --until == 0) {
            _mm_prefetch(pf, _MM_HINT_T1);
            pf += 64;
            pf_left--;
            until = every;
        }
        R(0); R(1); R(2); R(3); R(4); R(5); R(6); R(7); R(8); R(9); R(10); R(11); R(12); R(13);
    }
#undef R
    for (; pf_left; pf_left--, pf += 64) /* more lines than k steps */
        _mm_prefetch(pf, _MM_HINT_T1);
    __mmask16 k0 = nnf_mask16(n), k1 = nnf_mask16(n > 16 ? n - 16 : 0);
    ep_tile16 et = ep_tile_init(t, k0, k1);
    if (tile_act_path(t)) {
        __m512 v[28];
#define V(r) v[2 * r] = c##r##0, v[2 * r + 1] = c##r##1
        V(0), V(1), V(2), V(3), V(4), V(5), V(6), V(7), V(8), V(9), V(10), V(11), V(12), V(13);
#undef V
        ep_tile_flat16(v, c, ldc, m < (size_t)RR ? m : (size_t)RR, k0, k1, t);
        return;
    }
#define S(r)                                                                                       \
    do {                                                                                           \
        if (RR > r && m > r)                                                                       \
            store_row16(c + r * ldc, c##r##0, c##r##1, r, k0, k1, t, &et);                         \
    } while (0)
    S(0); S(1); S(2); S(3); S(4); S(5); S(6); S(7); S(8); S(9); S(10); S(11); S(12); S(13);
#undef S
}

/* Panels of 1-3 rows take the 4-row form: fewer than 8 accumulator chains
 * leave the two FMA pipes waiting on the 4-cycle latency (gemm_avx2.c). */
void nnf_gemm_ukernel_14x32_avx512(size_t kc, const float *a, const float *b, float *c,
                                   size_t ldc, size_t m, size_t n, const nnf_tile_ep *t) {
    if (n <= 16) {
        switch (m) {
        case 1:
        case 2:
        case 3:
        case 4: tile_rows(kc, a, b, c, ldc, m, n, t, 4, 1); return;
        case 5:
        case 6:
        case 7:
        case 8: tile_rows(kc, a, b, c, ldc, m, n, t, 8, 1); return;
        default: tile_rows(kc, a, b, c, ldc, m, n, t, 14, 1); return;
        }
    }
    switch (m) {
    case 1:
    case 2:
    case 3:
    case 4: tile_rows(kc, a, b, c, ldc, m, n, t, 4, 2); return;
    case 5: tile_rows(kc, a, b, c, ldc, m, n, t, 5, 2); return;
    case 6: tile_rows(kc, a, b, c, ldc, m, n, t, 6, 2); return;
    case 7: tile_rows(kc, a, b, c, ldc, m, n, t, 7, 2); return;
    case 8: tile_rows(kc, a, b, c, ldc, m, n, t, 8, 2); return;
    case 9: tile_rows(kc, a, b, c, ldc, m, n, t, 9, 2); return;
    case 10: tile_rows(kc, a, b, c, ldc, m, n, t, 10, 2); return;
    case 11: tile_rows(kc, a, b, c, ldc, m, n, t, 11, 2); return;
    case 12: tile_rows(kc, a, b, c, ldc, m, n, t, 12, 2); return;
    case 13: tile_rows(kc, a, b, c, ldc, m, n, t, 13, 2); return;
    default: tile_rows(kc, a, b, c, ldc, m, n, t, 14, 2); return;
    }
}

#ifndef NNF_AVX512_EMULATED
/* A full 14-row panel with A read in place (x86/gemm_direct_avx512.h):
 * the same sums as tile_rows' 14 x 32 form, the same epilogue. */
void nnf_gemm_ukernel_direct_14x32_avx512(size_t kc, const float *a, size_t lda, const float *b,
                                          float *c, size_t ldc, size_t n, const nnf_tile_ep *t) {
    prefetch_c_rows(c, ldc, 14);
    __m512 acc[28];
    size_t take = t->pf_lines < kc / 4 ? t->pf_lines : kc / 4;
    nnf_gemm_direct_k14_avx512(kc, a, lda, b, acc, t->pf_next, take);
    for (const char *pf = t->pf_next + take * 64; take < t->pf_lines; take++, pf += 64)
        _mm_prefetch(pf, _MM_HINT_T1); /* more lines than iterations */
    __mmask16 k0 = nnf_mask16(n), k1 = nnf_mask16(n > 16 ? n - 16 : 0);
    ep_tile16 et = ep_tile_init(t, k0, k1);
    if (tile_act_path(t)) {
        ep_tile_flat16(acc, c, ldc, 14, k0, k1, t);
        return;
    }
    for (size_t r = 0; r < 14; r++)
        store_row16(c + r * ldc, acc[2 * r], acc[2 * r + 1], r, k0, k1, t, &et);
}
#endif

/* M = 1 against packed B, 32-column panels (x86/gemv_block.h). Through the
 * 14-row microkernel, ResNet-50's classifier (2048 -> 1000, 8 MB of weights
 * from memory) computed 4 rows for 1 and ran 0.79 ms against ORT's 0.57.
 * Two panels at a time (two streams of B from memory): on the Intel Xeon,
 * caches swept before each run (bench_kernels --cold, medians of 6
 * alternations), ResNet-50's classifier 0.637 -> 0.533 ms, MobileNetV2's
 * 0.352 -> 0.308; four panels with two k steps each were no faster. */
NNF_GEMV_BLOCK2(nnf_gemv_block_32_avx512, __m512, 16, _mm512_loadu_ps, _mm512_storeu_ps,
                _mm512_set1_ps, _mm512_fmadd_ps)

/* A's rows into 14-row panels (rows 0-7 and 8-13 through the ymm
 * transposes): the portable packer was 9 % of a 1024^3 GEMM on this tier. */
void nnf_gemm_pack_a14_avx512(const float *base, size_t ld, size_t mn0, size_t mnc, size_t k0,
                              size_t kc, float *dst) {
    nnf_pack_a_panels_avx2(base, ld, mn0, mnc, k0, kc, dst, 14);
}

/* B read transposed into 32-column panels (four 8x8 transposes a step). */
void nnf_gemm_pack_b32_avx512(const float *base, size_t ld, size_t mn0, size_t mnc, size_t k0,
                              size_t kc, float *dst) {
    nnf_pack_a_panels_avx2(base, ld, mn0, mnc, k0, kc, dst, 32);
}

static inline __m512 vm16(nnf_vm_fn fn, __m512 x) {
    switch (fn) {
    case NNF_VM_EXP: return nnf_exp16(x);
    case NNF_VM_SIGMOID: return nnf_sigmoid16(x);
    case NNF_VM_TANH: return nnf_tanh16(x);
    case NNF_VM_ERF: return nnf_erf16(x);
    case NNF_VM_SILU: return nnf_silu16(x);
    }
    return x;
}

void nnf_vmath_avx512(nnf_vm_fn fn, const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = nnf_mask16(n - i);
        _mm512_mask_storeu_ps(y + i, k, vm16(fn, _mm512_maskz_loadu_ps(k, x + i)));
    }
}

void nnf_act_array_avx512(const nnf_activation *act, const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = nnf_mask16(n - i);
        _mm512_mask_storeu_ps(y + i, k, nnf_act16(_mm512_maskz_loadu_ps(k, x + i), act));
    }
}

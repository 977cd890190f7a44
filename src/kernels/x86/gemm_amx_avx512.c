/* f32_gemm_amx_bf16x6: the AVX-512 tier's f32 GEMM on AMX tiles.
 *
 * An AMX tile multiply (TDPBF16PS) takes 16 x 32 bf16 of A and 32 x 16 of B
 * (pairs of k side by side, "VNNI") into 16 x 16 f32 sums, 8192 products in
 * ~16 cycles: 12x the f32 FMAs of the two AVX-512 pipes. Each product of
 * two bf16 is exact in f32 (8 x 8 significant bits), and the hardware adds a
 * multiply's 32 products to the old sum more precisely than f32 adds in
 * turn, rounding about once (measured: see the emulation below). So an f32
 * operand split exactly into three bf16 parts, x = x0 + x1 + x2 (x0 = x
 * rounded to bf16, x1 = the rest rounded, x2 = what is left: 8 + 8 + 8
 * significant bits), gives the f32 product as nine bf16 products; the three
 * smallest (x1 y2, x2 y1, x2 y2) are below 2^-23 |xy| together, the rounding
 * of one f32 product, and are left out: six tile multiplies a 32-deep step
 * ("bf16x6", Henry et al. 2019). The result is not the FMA tiles' bits but
 * as close to the exact product or closer (tests/c/test_gemm.c, test_amx:
 * largest error over sum |ab| 8-9.5e-8 against their 1.0-1.7e-7).
 *
 * Eight tiles: the sums of two 16 x 16 output tiles side by side, A0-A2 of
 * their 16 rows, and B0-B2 of one of them at a time. Per K block of KB
 * (inside a packed B's kc) and block of MB rows x NCH columns, A and B are
 * split once into 1 KiB step tiles (MB x KB x 6 and KB x NCH x 6 bytes) and
 * the partial sums live in a block of tiles (MB x NCH x 4): ~1.1 MiB that
 * stays in L2, while a pair of column tiles' B (24 KiB) serves every 16 rows
 * from L1. B's next block is fetched from memory a few lines a step. Values
 * the split cannot carry (NaN, Inf, |x| >= 2^127, or under 2^-100 but not 0:
 * the tiles flush bf16 subnormals, and a part past bf16's range) send the
 * GEMM to the FMA tiles: nnf_gemm_amx_values checks A on every call and a
 * packed B once (its amx_values).
 *
 * The emulation build (NNF_AVX512_EMULATED) runs the same code with each
 * tile instruction a C loop, so every machine tests the splitting, the
 * layouts and the tails. */
#include "kernels/gemm.h"

#include "base/alloc.h"
#include "kernels/x86/vmath_avx512.h"

#include <stdint.h>
#include <string.h>

#ifndef NNF_AVX512_EMULATED
#include <immintrin.h>

typedef struct tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

static void amx_begin(void) {
    tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.colsb[i] = 64;
        c.rows[i] = 16;
    }
    _tile_loadconfig(&c);
}
#define AMX_END() _tile_release()
#define AMX_ZERO(t) _tile_zero(t)
#define AMX_LOAD(t, p, stride) _tile_loadd(t, p, stride)
#define AMX_STORE(t, p, stride) _tile_stored(t, p, stride)
#define AMX_DP(c, a, b) _tile_dpbf16ps(c, a, b)
#else
/* The tiles as C arrays, each instruction a loop. TDPBF16PS is emulated
 * as the hardware measures: its 32 products and the old sum added with
 * more precision than f32 and rounded once (on a Xeon with AMX: within
 * 2.3e-6 of the exact sum where one rounding is 1.9e-6 off, and f32 adds
 * in turn 2.3e-5). */
static _Thread_local union {
    uint16_t h[16][32];
    float f[16][16];
} emu_tile[8];

static void amx_begin(void) {}
#define AMX_END() ((void)0)
static void emu_zero(int t) {
    memset(&emu_tile[t], 0, sizeof emu_tile[t]);
}
static void emu_load(int t, const void *p, size_t stride) {
    for (int r = 0; r < 16; r++)
        memcpy(emu_tile[t].h[r], (const char *)p + r * stride, 64);
}
static void emu_store(int t, void *p, size_t stride) {
    for (int r = 0; r < 16; r++)
        memcpy((char *)p + r * stride, emu_tile[t].h[r], 64);
}
static float bf(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static void emu_dp(int c, int a, int b) {
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            double s = emu_tile[c].f[m][n];
            for (int kp = 0; kp < 16; kp++) {
                s += (double)bf(emu_tile[a].h[m][2 * kp]) * bf(emu_tile[b].h[kp][2 * n]);
                s += (double)bf(emu_tile[a].h[m][2 * kp + 1]) * bf(emu_tile[b].h[kp][2 * n + 1]);
            }
            emu_tile[c].f[m][n] = (float)s;
        }
}
#define AMX_ZERO(t) emu_zero(t)
#define AMX_LOAD(t, p, stride) emu_load(t, p, stride)
#define AMX_STORE(t, p, stride) emu_store(t, p, stride)
#define AMX_DP(c, a, b) emu_dp(c, a, b)
#endif

/* ---- values the split carries -------------------------------------------- */

/* Lanes of x (under mask k) that are NaN, Inf, at or above 2^127, or
 * nonzero under 2^-100. */
static inline __mmask16 unsplittable(__mmask16 k, __m512 x) {
    __m512i a = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
    /* a >= 0 as a signed integer: the comparisons SIMDe has */
    __mmask16 big = _mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(0x7effffff));
    __mmask16 tiny = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(27 << 23), a);
    __mmask16 zero = _mm512_cmpeq_epi32_mask(a, _mm512_setzero_si512());
    return k & (big | (tiny & (__mmask16)~zero));
}

/* Whether rows [0, rows) of cols floats (row stride ld) all split. */
static bool rows_split(const float *p, size_t ld, size_t rows, size_t cols) {
    __mmask16 bad = 0;
    for (size_t r = 0; r < rows && !bad; r++) {
        const float *q = p + r * ld;
        size_t c = 0;
        for (; c + 16 <= cols; c += 16)
            bad |= unsplittable(0xffff, _mm512_loadu_ps(q + c));
        if (c < cols) {
            __mmask16 k = nnf_mask16(cols - c);
            bad |= unsplittable(k, _mm512_maskz_loadu_ps(k, q + c));
        }
    }
    return !bad;
}

/* ---- the split ----------------------------------------------------------- */

/* x rounded to bf16 (to nearest, ties to even), as an f32 bit pattern. */
static inline __m512i round_bf16(__m512i x) {
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    x = _mm512_add_epi32(x, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
    return _mm512_and_si512(x, _mm512_set1_epi32((int)0xffff0000u));
}

/* x = p[0] + p[1] + p[2], each a bf16 value in f32's high half (exact: each
 * subtraction takes off the leading bits of what is left). */
static inline void split3(__m512 x, __m512i p[3]) {
    p[0] = round_bf16(_mm512_castps_si512(x));
    __m512 r = _mm512_sub_ps(x, _mm512_castsi512_ps(p[0]));
    p[1] = round_bf16(_mm512_castps_si512(r));
    /* at most 8 significant bits are left: a bf16 as it is */
    p[2] = _mm512_castps_si512(_mm512_sub_ps(r, _mm512_castsi512_ps(p[1])));
}

static inline __m256i to_bf16(__m512i p) {
#ifndef NNF_AVX512_EMULATED
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(p, 16));
#else /* SIMDe 0.7.4 has no vpmovdw */
    uint32_t v[16];
    uint16_t h[16];
    _mm512_storeu_si512((void *)v, p);
    for (int i = 0; i < 16; i++)
        h[i] = (uint16_t)(v[i] >> 16);
    return _mm256_loadu_si256((const __m256i *)h);
#endif
}

/* ---- the driver ---------------------------------------------------------- */

/* Blocking (the head comment). */
#define KB 128
#define MB 256
#define NCH 512
#define TILE 512 /* uint16 in a 16 x 32 bf16 tile, floats in two 16 x 16 */

typedef struct amx_job {
    size_t n, k, kc;
    const nnf_gemm_src *a, *b;
    float *c;
    size_t ldc;
    const nnf_epilogue *ep; /* NULL: none */
    atomic_int failed;
} amx_job;

/* B's rows [k0, k0 + kb) (inside one K block of a packed B) x `groups`
 * column tiles from col0 into bq: tile (g, step, part) at ((g * steps +
 * step) * 3 + part) * TILE, 16 rows of (k, k + 1) pairs; rows past kb and
 * columns past N are 0. */
static void split_b(const amx_job *j, size_t k0, size_t kb, size_t col0, size_t groups,
                    size_t steps, uint16_t *bq) {
    const nnf_gemm_src *b = j->b;
    const nnf_gemm_packed *p = b->packed;
    size_t pc = 0, kcb = 0;
    if (p) {
        pc = k0 / p->kc * p->kc;
        kcb = p->k - pc < p->kc ? p->k - pc : p->kc;
    }
    for (size_t g = 0; g < groups; g++) {
        size_t col = col0 + g * 16;
        __mmask16 k = col < j->n ? nnf_mask16(j->n - col) : 0;
        const float *src =
            !k  ? NULL
            : p ? p->data + pc * p->mn_pad + (col & ~(size_t)31) * kcb + (k0 - pc) * 32 + (col & 16)
                : b->data + k0 * b->ld + col;
        size_t ld = p ? 32 : b->ld;
        if (p) /* panels padded with zeros */
            k = k ? 0xffff : 0;
        uint16_t *d = bq + g * steps * 3 * TILE;
        for (size_t kk = 0; kk < steps * 32; kk += 2, d += 32) {
            __mmask16 k0m = kk < kb ? k : 0, k1m = kk + 1 < kb ? k : 0;
            __m512 x0 = _mm512_maskz_loadu_ps(k0m, k0m ? src + kk * ld : (const float *)bq);
            __m512 x1 = _mm512_maskz_loadu_ps(k1m, k1m ? src + (kk + 1) * ld : (const float *)bq);
            __m512i p0[3], p1[3];
            split3(x0, p0);
            split3(x1, p1);
            if (kk % 32 == 0 && kk)
                d += 2 * TILE;          /* the next step's tiles */
            for (int q = 0; q < 3; q++) /* (k, k + 1): low halves k's bf16, high halves k + 1's */
                _mm512_store_si512(
                    (void *)(d + q * TILE),
                    _mm512_mask_blend_epi16(0x55555555, p1[q], _mm512_srli_epi32(p0[q], 16)));
        }
    }
}

/* A's rows [row0, row0 + rows) x k [k0, k0 + kb) into aq: tile (row block,
 * step, part) at ((rb * steps + step) * 3 + part) * TILE (rows past `rows`
 * and k past kb: 0). */
static void split_a(const amx_job *j, size_t row0, size_t rows, size_t k0, size_t kb, size_t steps,
                    uint16_t *aq) {
    const nnf_gemm_src *a = j->a;
    size_t padded = (rows + 15) & ~(size_t)15;
    for (size_t r = 0; r < padded; r++) {
        const float *src = r < rows ? a->data + (row0 + r) * a->ld + k0 : a->data;
        for (size_t kk = 0; kk < steps * 32; kk += 16) {
            __mmask16 k = r < rows && kk < kb ? nnf_mask16(kb - kk) : 0;
            __m512i p[3];
            split3(_mm512_maskz_loadu_ps(k, k ? src + kk : src), p);
            uint16_t *d = aq + ((r / 16 * steps + kk / 32) * 3) * TILE + (r % 16) * 32 + kk % 32;
            for (int q = 0; q < 3; q++)
                _mm256_store_si256((__m256i *)(d + q * TILE), to_bf16(p[q]));
        }
    }
}

/* The f32 source of B's block [k0, k0 + kb) x [col0, col0 + cols) as runs
 * of lines, fetched into L2 a few lines a step while the block before it is
 * multiplied: in a model the weights come from memory. Unfetched, split_b
 * waited on them (BERT-base 1.18x slower than the FMA tiles); fetched in a
 * burst per tile pair, the prefetches waited on line-fill buffers (1.07x). */
typedef struct pf_runs {
    const char *run;            /* the run being fetched */
    size_t stride, lines, runs; /* bytes between runs, lines a run, runs */
    size_t line, left;          /* the next line in the run, runs left after it */
} pf_runs;

static void pf_plan(pf_runs *f, const amx_job *j, size_t k0, size_t kb, size_t col0, size_t cols) {
    const nnf_gemm_packed *p = j->b->packed;
    if (p) {
        size_t pc = k0 / p->kc * p->kc, kcb = p->k - pc < p->kc ? p->k - pc : p->kc;
        size_t c0 = col0 & ~(size_t)31; /* panels of 32 columns */
        f->run = (const char *)(p->data + pc * p->mn_pad + c0 * kcb + (k0 - pc) * 32);
        f->stride = 32 * kcb * sizeof(float);
        f->lines = kb * 32 * sizeof(float) / 64;
        f->runs = (col0 + cols - c0 + 31) / 32;
    } else {
        f->run = (const char *)(j->b->data + k0 * j->b->ld + col0);
        f->stride = j->b->ld * sizeof(float);
        f->lines = (cols * sizeof(float) + 63) / 64;
        f->runs = kb;
    }
    f->line = 0;
    f->left = f->runs - 1;
}

/* The next n lines, if any are left. */
static inline void pf_some(pf_runs *f, size_t n) {
    for (; n && f->run; n--) {
        _mm_prefetch(f->run + f->line * 64, _MM_HINT_T1);
        if (++f->line == f->lines) {
            f->line = 0;
            f->run = f->left-- ? f->run + f->stride : NULL;
        }
    }
}

/* One step's six products of a column tile into sum tile C: A0 B0, A1 B0,
 * A2 B0, A0 B1, A1 B1, A0 B2 (A in tiles 2-4, B loaded into 5-7). */
#define STEP6(C, bt)                                                                               \
    do {                                                                                           \
        AMX_LOAD(5, (bt), 64);                                                                     \
        AMX_LOAD(6, (bt) + TILE, 64);                                                              \
        AMX_LOAD(7, (bt) + 2 * TILE, 64);                                                          \
        AMX_DP(C, 2, 5);                                                                           \
        AMX_DP(C, 3, 5);                                                                           \
        AMX_DP(C, 4, 5);                                                                           \
        AMX_DP(C, 2, 6);                                                                           \
        AMX_DP(C, 3, 6);                                                                           \
        AMX_DP(C, 2, 7);                                                                           \
    } while (0)

/* Sum tiles cs[0], cs[TILE] (two column tiles of one row block) over a K
 * block: started from zero (first) or from cs, stored back to cs. */
static void tile_pair(const uint16_t *aq, const uint16_t *bq0, const uint16_t *bq1, size_t steps,
                      float *cs, int first, pf_runs *pf, size_t per_step) {
    if (first) {
        AMX_ZERO(0);
        AMX_ZERO(1);
    } else {
        AMX_LOAD(0, cs, 64);
        AMX_LOAD(1, cs + 256, 64);
    }
    for (size_t st = 0; st < steps; st++) {
        const uint16_t *a = aq + st * 3 * TILE;
        AMX_LOAD(2, a, 64);
        AMX_LOAD(3, a + TILE, 64);
        AMX_LOAD(4, a + 2 * TILE, 64);
        STEP6(0, bq0 + st * 3 * TILE);
        pf_some(pf, per_step);
        STEP6(1, bq1 + st * 3 * TILE);
    }
    AMX_STORE(0, cs, 64);
    AMX_STORE(1, cs + 256, 64);
}

/* c's rows [row, row + rows) x [col, col + cols) (at most 16 x 16) from the
 * sum tile s, through the epilogue. */
static void finish(const amx_job *j, const float *s, size_t row, size_t rows, size_t col,
                   size_t cols) {
    __mmask16 k = nnf_mask16(cols);
    nnf_tile_ep t = {.ep = j->ep};
    if (t.ep) {
        const nnf_epilogue *e = t.ep;
        t.bias = e->bias_kind == NNF_BIAS_PER_ROW   ? e->bias + row
                 : e->bias_kind == NNF_BIAS_PER_COL ? e->bias + col
                                                    : NULL;
        t.residual = e->residual ? e->residual + row * e->ld_residual + col : NULL;
    }
    for (size_t r = 0; r < rows; r++) {
        __m512 v = _mm512_load_ps(s + 16 * r);
        if (t.ep)
            v = nnf_ep16(v, &t, r, 0, k);
        _mm512_mask_storeu_ps(j->c + (row + r) * j->ldc + col, k, v);
    }
}

static void amx_task(void *ctx, size_t i0, size_t j0, size_t mi, size_t nj) {
    amx_job *j = ctx;
    const size_t steps_max = KB / 32;
    size_t bq_h = NCH / 16 * steps_max * 3 * TILE, aq_h = MB / 16 * steps_max * 3 * TILE;
    size_t cs_f = MB / 16 * NCH / 16 * 256;
    float *buf = nnf_thread_scratch(NNF_SCRATCH_AMX, (bq_h + aq_h) / 2 + cs_f);
    if (!buf) {
        atomic_store(&j->failed, 1);
        return;
    }
    uint16_t *bq = (uint16_t *)buf, *aq = bq + bq_h;
    float *cs = (float *)(aq + aq_h);
    amx_begin();
    for (size_t jc = j0; jc < j0 + nj; jc += NCH) {
        size_t cols = j0 + nj - jc < NCH ? j0 + nj - jc : NCH;
        size_t groups = (cols + 31) / 32 * 2; /* whole pairs: a last lone tile pairs with zeros */
        for (size_t ic = i0; ic < i0 + mi; ic += MB) {
            size_t rows = i0 + mi - ic < MB ? i0 + mi - ic : MB, blocks = (rows + 15) / 16;
            /* K blocks of KB inside the packed operand's blocks of kc */
            for (size_t k0 = 0, kb; k0 < j->k; k0 += kb) {
                size_t kend = (k0 / j->kc + 1) * j->kc;
                kend = kend < j->k ? kend : j->k;
                kb = kend - k0 < KB ? kend - k0 : KB;
                size_t steps = (kb + 31) / 32;
                split_b(j, k0, kb, jc, groups, steps, bq);
                split_a(j, ic, rows, k0, kb, steps, aq);
                /* the B block after this one: the next K block, or the
                 * next columns' first */
                pf_runs f = {0};
                size_t calls = groups / 2 * blocks;
                if (k0 + kb < j->k) {
                    size_t k1 = k0 + kb, e1 = (k1 / j->kc + 1) * j->kc;
                    e1 = e1 < j->k ? e1 : j->k;
                    pf_plan(&f, j, k1, e1 - k1 < KB ? e1 - k1 : KB, jc, cols);
                } else if (jc + NCH < j0 + nj && ic + MB >= i0 + mi) {
                    size_t c1 = j0 + nj - jc - NCH;
                    pf_plan(&f, j, 0, j->kc < KB ? j->kc : KB, jc + NCH, c1 < NCH ? c1 : NCH);
                }
                size_t per = f.run ? (f.lines * f.runs + calls * steps - 1) / (calls * steps) : 0;
                int first = k0 == 0, last = k0 + kb == j->k;
                for (size_t g = 0; g < groups; g += 2)
                    for (size_t rb = 0; rb < blocks; rb++) {
                        float *c = cs + (rb * groups + g) * 256;
                        tile_pair(aq + rb * steps * 3 * TILE, bq + g * steps * 3 * TILE,
                                  bq + (g + 1) * steps * 3 * TILE, steps, c, first, &f, per);
                        if (!last)
                            continue;
                        size_t row = ic + rb * 16, rr = ic + rows - row < 16 ? ic + rows - row : 16;
                        for (size_t h = 0; h < 2; h++) {
                            size_t col = jc + (g + h) * 16;
                            if (col < jc + cols)
                                finish(j, c + h * 256, row, rr, col,
                                       jc + cols - col < 16 ? jc + cols - col : 16);
                        }
                    }
            }
        }
    }
    AMX_END();
}

static _Atomic size_t g_min_work = NNF_GEMM_AMX_MIN_WORK;

size_t nnf_gemm_amx_force_min_work(size_t work) {
    return atomic_exchange(&g_min_work, work);
}

bool nnf_gemm_amx_shape(size_t m, size_t n, size_t k) {
    size_t mn, mnk;
    return m >= NNF_GEMM_AMX_MIN_M && n >= 16 && k >= 16 &&
           (!nnf_mul_size(m, n, &mn) || !nnf_mul_size(mn, k, &mnk) ||
            mnk >= atomic_load(&g_min_work));
}

bool nnf_gemm_amx_fits(size_t m, size_t n, size_t k, const nnf_gemm_src *a, const nnf_gemm_src *b) {
    return nnf_gemm_amx_shape(m, n, k) && a->data && !a->packed && !a->pack && !a->trans &&
           !b->pack && !b->trans &&
           (b->packed ? b->packed->r == 32 && b->packed->tail_from >= b->packed->mn
                      : b->data != NULL);
}

bool nnf_gemm_amx_values(size_t m, size_t n, size_t k, const nnf_gemm_src *a,
                         const nnf_gemm_src *b) {
    if (!rows_split(a->data, a->ld, m, k))
        return false;
    if (!b->packed)
        return rows_split(b->data, b->ld, k, n);
    /* a packed B is checked once: 1 splits, 2 does not */
    nnf_gemm_packed *p = (nnf_gemm_packed *)b->packed;
    int v = atomic_load(&p->amx_values);
    if (!v) {
        v = rows_split(p->data, 0, 1, p->k * p->mn_pad) ? 1 : 2;
        atomic_store(&p->amx_values, v);
    }
    return v == 1;
}

nnf_status nnf_gemm_amx_run(size_t m, size_t n, size_t k, size_t kc, const nnf_gemm_src *a,
                            const nnf_gemm_src *b, float *c, size_t ldc, const nnf_epilogue *ep,
                            size_t ti, size_t tj, nnf_threadpool *pool) {
    amx_job j = {.n = n, .k = k, .kc = kc, .a = a, .b = b, .c = c, .ldc = ldc};
    j.ep = ep && !nnf_epilogue_is_identity(ep) ? ep : NULL;
    atomic_init(&j.failed, 0);
    nnf_parallel_for_2d(pool, m, n, ti, tj, amx_task, &j);
    if (atomic_load(&j.failed))
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for AMX GEMM scratch");
    return NNF_OK;
}

/* GEMM driver: tier configuration, packing, cache blocking and threading.
 * The microkernels live in the tier files (x86/gemm_avx2.c, ...) and the
 * portable one at the end of this file. */
#include "kernels/gemm.h"

#include "base/alloc.h"
#include "base/packs.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* ---- configurations ------------------------------------------------------ */

static void gemv_block_8_scalar(size_t kcb, const float *a, size_t a_stride, const float *b,
                                size_t np, float *st);

static nnf_gemm_cfg g_cfgs[3], g_amx_cfg;
static pthread_once_t g_cfg_once = PTHREAD_ONCE_INIT;

static size_t clamp_size(size_t v, size_t lo, size_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* Loop order (see gemm_task): the mr x kc micropanel of A stays in L1 while
 * the microkernel walks along a row of C tiles, the kc x nc block of B stays
 * in L2 for every micropanel of A, and C is streamed row by row (sequential,
 * so the hardware prefetcher keeps up; a column-of-tiles walk touched 2 x mr
 * pages per tile and stalled on every one when K is short, as in a 1x1 conv
 * with 64 input channels and a fused residual).
 * kc: the A micropanel takes up to two thirds of L1 (B's panel streams
 * through the rest, a line per k step it reads once). At a third, AVX-512's
 * 14-row panel got kc = 288 (48 KiB L1d): GEMM 1024 ran 4 passes over C at
 * 208 GFLOP/s, 84 % of the FMA peak; at kc = 512, 2 passes and 215 (87 %),
 * 1.07x on 2 threads, BERT's 128-row GEMMs 1.01-1.03x. Models in one
 * process (ab_builds, both orders): BERT-base and ResNet-50 even, YOLOv5s
 * 1 % faster. The 6-row AVX2 panel gets 512 too (448 before on a 32 KiB L1);
 * nc: the kc x nc block of B about half of L2; mc bounds the packed A block,
 * which need not stay in any cache (each micropanel is read once per nc
 * block), so it is large: B is packed once per mc block. */
static void size_blocks(nnf_gemm_cfg *c, const nnf_cpu *cpu) {
    c->kc = clamp_size(cpu->l1d * 2 / 3 / (c->mr * sizeof(float)), 64, 512) & ~(size_t)7;
    size_t nc = clamp_size(cpu->l2 / 2 / (c->kc * sizeof(float)), c->nr * 4, 4096);
    c->nc = nc - nc % c->nr;
    size_t mc = 1024 + c->mr - 1;
    c->mc = mc - mc % c->mr;
}

static void init_cfgs(void) {
    const nnf_cpu *cpu = nnf_cpu_get();
    g_cfgs[NNF_ISA_SCALAR] = (nnf_gemm_cfg){.name = "f32_gemm_4x8_scalar",
                                            .isa = NNF_ISA_SCALAR,
                                            .mr = 4,
                                            .nr = 8,
                                            .ukernel = nnf_gemm_ukernel_4x8_scalar,
                                            .gemv_block = gemv_block_8_scalar};
    g_cfgs[NNF_ISA_AVX2] = (nnf_gemm_cfg){.name = "f32_gemm_6x16_avx2",
                                          .isa = NNF_ISA_AVX2,
                                          .mr = 6,
                                          .nr = 16,
                                          .ukernel = nnf_gemm_ukernel_6x16_avx2,
                                          .ukernel_direct = nnf_gemm_ukernel_direct_6x16_avx2,
                                          .direct_panels = 4,
                                          .pack_a_rows = nnf_gemm_pack_a6_avx2,
                                          .pack_b_cols = nnf_gemm_pack_b16_avx2,
                                          .gemv_block = nnf_gemv_block_16_avx2,
                                          .ukernel_rebalance = 1};
    g_cfgs[NNF_ISA_AVX512] = (nnf_gemm_cfg){.name = "f32_gemm_14x32_avx512",
                                            .isa = NNF_ISA_AVX512,
                                            .mr = 14,
                                            .nr = 32,
                                            .ukernel = nnf_gemm_ukernel_14x32_avx512,
#ifndef NNF_AVX512_EMULATED
                                            .ukernel_direct = nnf_gemm_ukernel_direct_14x32_avx512,
                                            .direct_panels = 16,
#endif
                                            .pack_a_rows = nnf_gemm_pack_a14_avx512,
                                            .pack_b_cols = nnf_gemm_pack_b32_avx512,
                                            .gemv_block = nnf_gemv_block_32_avx512,
                                            .ukernel_rebalance = 1,
                                            .ukernel_prefetches = 1};
    for (int i = 0; i < 3; i++)
        size_blocks(&g_cfgs[i], cpu);
    g_amx_cfg = g_cfgs[NNF_ISA_AVX512];
    g_amx_cfg.name = "f32_gemm_amx_bf16x6";
    g_amx_cfg.amx = 1;
}

const nnf_gemm_cfg *nnf_gemm_cfg_for(nnf_isa isa) {
    pthread_once(&g_cfg_once, init_cfgs);
    nnf_isa max = nnf_cpu_get()->max_isa;
    if (isa > max)
        isa = max;
    return &g_cfgs[isa];
}

const nnf_gemm_cfg *nnf_gemm_cfg_whole(nnf_isa isa) {
    const nnf_gemm_cfg *c = nnf_gemm_cfg_for(isa);
    return c->isa == NNF_ISA_AVX512 && nnf_cpu_get()->amx ? &g_amx_cfg : c;
}

size_t nnf_gemm_kc(const nnf_gemm_cfg *cfg, size_t k) {
    /* K = 1024 with kc = 336 would leave a last block of 16: split K into
     * equal blocks instead (each costs a pass over C). */
    if (k <= cfg->kc)
        return cfg->kc;
    size_t blocks = (k + cfg->kc - 1) / cfg->kc;
    size_t kc = ((k + blocks - 1) / blocks + 7) & ~(size_t)7;
    return kc < cfg->kc ? kc : cfg->kc;
}

/* The K block of a packed B of k x n: nnf_gemm_kc's, but a B larger than the
 * last-level cache (a language model's head: GPT-2's 768 x 50257, 154 MB)
 * streams from memory on every run, and so does its C (M x N: 25.7 MB for
 * 128 tokens), which every K block after the first reads and writes again.
 * There K goes in the fewest equal blocks whose A micropanel still fits L1
 * (GPT-2's head: one block of 768, 43 KB of A against 48 KB of L1d; 42.0 ->
 * 38.3 ms on 1 thread, 21.5 -> 20.0 on 2, bench_kernels --model; its FFN's
 * 768 x 3072, in cache, ran the same either way). */
static size_t kc_for_b(const nnf_gemm_cfg *cfg, size_t k, size_t n) {
    const nnf_cpu *cpu = nnf_cpu_get();
    size_t most = cpu->l1d / (cfg->mr * sizeof(float)) & ~(size_t)7, floats;
    if (cfg->amx || k <= cfg->kc || most <= cfg->kc ||
        (nnf_mul_size(k, n, &floats) && floats <= cpu->l3 / sizeof(float)))
        return nnf_gemm_kc(cfg, k);
    size_t blocks = (k + most - 1) / most;
    return ((k + blocks - 1) / blocks + 7) & ~(size_t)7;
}

/* ---- packing ------------------------------------------------------------- */

/* Element (mn, k) of a strided operand lies at base[k * ld + mn] ("k-major":
 * B as stored, A transposed) or base[mn * ld + k] ("mn-major"). */
static int src_kmajor(nnf_gemm_side side, const nnf_gemm_src *s) {
    return side == NNF_GEMM_A ? s->trans : !s->trans;
}

/* k outer, panels inner: the source is read row by row (sequential, so the
 * hardware prefetcher streams it; a panel-first walk touched a new page per
 * k when ld is large, as in a 1x1 conv's input), the writes land in the
 * L2-sized destination block. Constant-width copies compile to vector moves.
 * Every read is a copy of bytes, so the source may sit at any address (a
 * GEMM's B left in the model file, nnf_gemm_pack_b). */
#define DEFINE_PACK_KMAJOR(R)                                                                      \
    static void pack_kmajor_##R(const void *base, size_t ld, size_t mn0, size_t mnc, size_t k0,    \
                                size_t kc, float *dst) {                                           \
        const size_t row = ld * sizeof(float), width = R * sizeof(float);                          \
        size_t full = mnc / R, tail = mnc % R;                                                     \
        for (size_t k8 = 0; k8 < kc; k8 += 8) {                                                    \
            size_t rows = kc - k8 < 8 ? kc - k8 : 8;                                               \
            const unsigned char *s =                                                               \
                (const unsigned char *)base + (k0 + k8) * row + mn0 * sizeof(float);               \
            float *d = dst + k8 * R;                                                               \
            for (size_t p = 0; p < full; p++, s += width, d += kc * R)                             \
                for (size_t kk = 0; kk < rows; kk++)                                               \
                    __builtin_memcpy(d + kk * R, s + kk * row, width);                             \
            for (size_t kk = 0; tail && kk < rows; kk++) {                                         \
                memcpy(d + kk * R, s + kk * row, tail * sizeof(float));                            \
                memset(d + kk * R + tail, 0, (R - tail) * sizeof(float));                          \
            }                                                                                      \
        }                                                                                          \
    }
DEFINE_PACK_KMAJOR(8)
DEFINE_PACK_KMAJOR(16)
DEFINE_PACK_KMAJOR(32)

static void pack_kmajor_any(const void *base, size_t ld, size_t mn0, size_t mnc, size_t k0,
                            size_t kc, size_t r, float *dst) {
    for (size_t p = 0; p < mnc; p += r) {
        size_t w = mnc - p < r ? mnc - p : r;
        const unsigned char *s = (const unsigned char *)base + (k0 * ld + mn0 + p) * sizeof(float);
        for (size_t kk = 0; kk < kc; kk++, s += ld * sizeof(float), dst += r) {
            memcpy(dst, s, w * sizeof(float));
            memset(dst + w, 0, (r - w) * sizeof(float));
        }
    }
}

/* Reads run along k (contiguous); writes stride by r within an L1-sized panel. */
static void pack_mnmajor(const float *base, size_t ld, size_t mn0, size_t mnc, size_t k0, size_t kc,
                         size_t r, float *dst) {
    for (size_t p = 0; p < mnc; p += r, dst += kc * r) {
        size_t w = mnc - p < r ? mnc - p : r;
        for (size_t q = 0; q < w; q++) {
            const float *s = base + (mn0 + p + q) * ld + k0;
            float *d = dst + q;
            for (size_t kk = 0; kk < kc; kk++)
                d[kk * r] = s[kk];
        }
        for (size_t q = w; q < r; q++)
            for (size_t kk = 0; kk < kc; kk++)
                dst[kk * r + q] = 0.0f;
    }
}

static void pack_block(const nnf_gemm_cfg *cfg, nnf_gemm_side side, const nnf_gemm_src *s,
                       size_t mn0, size_t mnc, size_t k0, size_t kc, size_t r, float *dst) {
    if (s->pack) {
        s->pack(s->pack_ctx, mn0, mnc, k0, kc, r, dst);
    } else if (src_kmajor(side, s)) {
        switch (r) {
        case 8: pack_kmajor_8(s->data, s->ld, mn0, mnc, k0, kc, dst); break;
        case 16: pack_kmajor_16(s->data, s->ld, mn0, mnc, k0, kc, dst); break;
        case 32: pack_kmajor_32(s->data, s->ld, mn0, mnc, k0, kc, dst); break;
        default: pack_kmajor_any(s->data, s->ld, mn0, mnc, k0, kc, r, dst); break;
        }
    } else if (side == NNF_GEMM_A && r == cfg->mr && cfg->pack_a_rows) {
        cfg->pack_a_rows(s->data, s->ld, mn0, mnc, k0, kc, dst);
    } else if (side == NNF_GEMM_B && r == cfg->nr && cfg->pack_b_cols) {
        cfg->pack_b_cols(s->data, s->ld, mn0, mnc, k0, kc, dst);
    } else {
        pack_mnmajor(s->data, s->ld, mn0, mnc, k0, kc, r, dst);
    }
}

/* What a packed operand is made of, for nnf_pack_alloc_shared: the source
 * (one of the planned node's weights) and how it is read and laid out. */
typedef struct pack_share {
    const void *src;
    struct {
        const nnf_gemm_cfg *cfg;
        size_t mn, k, ld;
        int side, trans;
    } params;
} pack_share;

/* nnf_gemm_packed_create_n; share: a block other nodes' plans may share */
static nnf_status packed_make(const nnf_gemm_cfg *cfg, nnf_gemm_side side, size_t mn, size_t k,
                              size_t n, const pack_share *share, nnf_gemm_packed **out) {
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    size_t floats = nnf_gemm_packed_floats(cfg, side, mn, k), stride, total;
    /* each operand at a multiple of 16 floats: 64-byte aligned as the first */
    if (!floats || !nnf_add_size(floats, 15, &stride) ||
        !nnf_mul_size(stride & ~(size_t)15, n, &total) ||
        !nnf_mul_size(total, sizeof(float), &total))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "GEMM operand of %zu x %zu is too large", mn, k);
    stride &= ~(size_t)15;
    bool ready = false;
    for (size_t i = 0; i < n; i++) {
        nnf_gemm_packed *p = out[i] = nnf_calloc(1, sizeof *p);
        if (i == 0 && p)
            p->data = share ? nnf_pack_alloc_shared(share->src, &share->params,
                                                    sizeof share->params, total, &ready)
                            : nnf_pack_alloc(total, &ready);
        if (!p || !out[0]->data) {
            for (size_t j = 0; j <= i; j++) { /* out[0]'s data first: the others only point */
                nnf_gemm_packed_destroy(out[j]);
                out[j] = NULL;
            }
            return nnf_error(NNF_ERR_OUT_OF_MEMORY,
                             "out of memory packing %zu operand(s) of %zu x %zu (%zu bytes)", n, mn,
                             k, total);
        }
        nnf_gemm_packed_view(cfg, side, mn, k, out[0]->data + i * stride, p);
        p->owns_data = i == 0;
        p->ready = ready;
    }
    return NNF_OK;
}

size_t nnf_gemm_packed_floats(const nnf_gemm_cfg *cfg, nnf_gemm_side side, size_t mn, size_t k) {
    size_t r = side == NNF_GEMM_A ? cfg->mr : cfg->nr, floats;
    if (!nnf_add_size(mn, r - 1, &floats) || !nnf_mul_size(floats - floats % r, k ? k : 1, &floats))
        return 0;
    return floats;
}

void nnf_gemm_packed_view(const nnf_gemm_cfg *cfg, nnf_gemm_side side, size_t mn, size_t k,
                          float *data, nnf_gemm_packed *p) {
    size_t r = side == NNF_GEMM_A ? cfg->mr : cfg->nr;
    memset(p, 0, sizeof *p);
    p->data = data;
    p->side = side;
    p->mn = mn;
    p->k = k;
    p->kc = side == NNF_GEMM_B ? kc_for_b(cfg, k, mn) : nnf_gemm_kc(cfg, k);
    p->r = r;
    p->mn_pad = (mn + r - 1) / r * r;
    p->tail_from = mn;
    p->tail = r;
}

nnf_status nnf_gemm_packed_create_n(const nnf_gemm_cfg *cfg, nnf_gemm_side side, size_t mn,
                                    size_t k, size_t n, nnf_gemm_packed **out) {
    return packed_make(cfg, side, mn, k, n, NULL, out);
}

nnf_status nnf_gemm_packed_create(const nnf_gemm_cfg *cfg, nnf_gemm_side side, size_t mn, size_t k,
                                  nnf_gemm_packed **out) {
    return packed_make(cfg, side, mn, k, 1, NULL, out);
}

void nnf_gemm_packed_zero_outside(nnf_gemm_packed *p, size_t mn_valid, size_t k_valid) {
    const size_t r = p->r;
    if (p->ready)
        return;
    for (size_t pc = 0; pc < p->k; pc += p->kc) {
        size_t kcb = p->k - pc < p->kc ? p->k - pc : p->kc;
        for (size_t m0 = 0; m0 < p->mn_pad; m0 += r) {
            float *panel = p->data + pc * p->mn_pad + m0 * kcb;
            size_t cols = mn_valid > m0 ? (mn_valid - m0 < r ? mn_valid - m0 : r) : 0;
            for (size_t kk = 0; kk < kcb; kk++)
                if (pc + kk >= k_valid)
                    memset(panel + kk * r, 0, r * sizeof(float));
                else if (cols < r)
                    memset(panel + kk * r + cols, 0, (r - cols) * sizeof(float));
        }
    }
}

/* Fills p (mn x k, made by nnf_gemm_packed_create) from src, unless its
 * blocks were replayed from a compiled file (p->ready). */
static void pack_whole(const nnf_gemm_cfg *cfg, nnf_gemm_side side, const nnf_gemm_src *src,
                       size_t mn, size_t k, nnf_gemm_packed *p) {
    for (size_t pc = 0; pc < k && mn && !p->ready; pc += p->kc) {
        size_t kcb = k - pc < p->kc ? k - pc : p->kc;
        pack_block(cfg, side, src, 0, mn, pc, kcb, p->r, p->data + pc * p->mn_pad);
    }
}

void nnf_gemm_pack_slice(const nnf_gemm_cfg *cfg, nnf_gemm_packed *p, size_t mn0, size_t mnc,
                         const nnf_gemm_src *src) {
    for (size_t pc = 0; pc < p->k && mnc && !p->ready; pc += p->kc) {
        size_t kcb = p->k - pc < p->kc ? p->k - pc : p->kc;
        pack_block(cfg, p->side, src, 0, mnc, pc, kcb, p->r, p->data + pc * p->mn_pad + mn0 * kcb);
    }
}

nnf_status nnf_gemm_pack(const nnf_gemm_cfg *cfg, nnf_gemm_side side, const nnf_gemm_src *src,
                         size_t mn, size_t k, nnf_gemm_packed **out) {
    nnf_gemm_packed *p;
    NNF_CHECK(nnf_gemm_packed_create(cfg, side, mn, k, &p));
    pack_whole(cfg, side, src, mn, k, p);
    *out = p;
    return NNF_OK;
}

nnf_status nnf_gemm_pack_b(const nnf_gemm_cfg *cfg, size_t k, size_t n, const void *b, size_t ldb,
                           int trans_b, nnf_gemm_packed **out) {
    /* the block another node's plan packed from the same weight the same
     * way, where one did (a weight several layers share) */
    pack_share share = {.src = b};
    memset(&share.params, 0, sizeof share.params); /* the padding too: compared as bytes */
    share.params.cfg = cfg;
    share.params.mn = n;
    share.params.k = k;
    share.params.ld = ldb;
    share.params.side = NNF_GEMM_B;
    share.params.trans = trans_b;
    nnf_gemm_packed *p;
    NNF_CHECK(packed_make(cfg, NNF_GEMM_B, n, k, 1, &share, &p));
    /* stored K x N, B is read with the k-major packers' byte copies; stored
     * N x K, as floats: from an aligned copy when it is not aligned (and
     * its packed blocks are not replayed) */
    float *copy = NULL;
    if (!p->ready && trans_b && n && k && (uintptr_t)b % _Alignof(float)) {
        size_t floats, bytes;
        if (!nnf_mul_size(n - 1, ldb, &floats) || !nnf_add_size(floats, k, &floats) ||
            !nnf_mul_size(floats, sizeof(float), &bytes)) {
            nnf_gemm_packed_destroy(p);
            return nnf_error(NNF_ERR_INVALID_ARGUMENT, "GEMM operand of %zu x %zu is too large", n,
                             k);
        }
        if (!(copy = nnf_malloc_aligned(bytes))) {
            nnf_gemm_packed_destroy(p);
            return nnf_error(NNF_ERR_OUT_OF_MEMORY,
                             "out of memory aligning a GEMM operand of %zu x %zu (%zu bytes)", n, k,
                             bytes);
        }
        memcpy(copy, b, bytes);
        b = copy;
    }
    nnf_gemm_src s = nnf_gemm_src_matrix(b, ldb, trans_b);
    pack_whole(cfg, NNF_GEMM_B, &s, n, k, p);
    nnf_pack_made(p->data);
    nnf_free_aligned(copy);
    *out = p;
    return NNF_OK;
}

nnf_status nnf_gemm_pack_a(const nnf_gemm_cfg *cfg, size_t m, size_t k, const float *a, size_t lda,
                           int trans_a, nnf_gemm_packed **out) {
    nnf_gemm_src s = nnf_gemm_src_matrix(a, lda, trans_a);
    return nnf_gemm_pack(cfg, NNF_GEMM_A, &s, m, k, out);
}

void nnf_gemm_packed_destroy(nnf_gemm_packed *p) {
    if (!p)
        return;
    if (p->owns_data)
        nnf_free_aligned(p->data);
    nnf_free(p);
}

void nnf_gemm_packed_destroy_all(nnf_gemm_packed **p, size_t n) {
    if (p)
        for (size_t i = 0; i < n; i++)
            nnf_gemm_packed_destroy(p[i]);
    nnf_free(p);
}

size_t nnf_gemm_packed_bytes(const nnf_gemm_packed *p) {
    return p ? p->mn_pad * p->k * sizeof(float) : 0;
}

/* ---- scratch ------------------------------------------------------------- */

void nnf_gemm_scratch_release(void) {
    nnf_thread_scratch_release(NNF_SCRATCH_GEMM);
}

/* ---- driver -------------------------------------------------------------- */

#define NNF_GEMM_MAX_SLOTS 256

typedef struct gemm_job {
    const nnf_gemm_cfg *cfg;
    size_t m, n, k, kc, nc, ldc;
    int prefetch_b; /* B is a strided k-major matrix far larger than L2 */
    bool direct;    /* A's whole panels read in place (direct_fits_l1) */
    const nnf_gemm_src *a, *b;
    float *c;
    const nnf_epilogue *ep;
    float *scratch;
    size_t a_floats, b_floats; /* per slot */
    int slots;
    atomic_int busy[NNF_GEMM_MAX_SLOTS];
} gemm_job;

static const float *packed_panels(const nnf_gemm_packed *p, size_t mn0, size_t pc, size_t kcb) {
    return (p->blocks ? p->blocks[pc / p->kc] : p->data + pc * p->mn_pad) + mn0 * kcb;
}

/* A is read in place (cfg->ukernel_direct) only when a task's columns of B
 * are at most cfg->direct_panels panels: packing costs a copy of A per K block
 * whatever N is, and each packed panel then serves every B panel, so it
 * weighs most when N is small (GEMM 256: 5-8 % of the time). Read in place,
 * the panel comes back as 14 row streams for every block of B, not one:
 * BERT's 128 x 768 x 3072 ran 0.99-1.06x the packed time, 128 x 768 x 768
 * 0.98-0.99x, GEMM 512 0.985-0.99x, GEMM 256 0.94-0.98x. A task's columns,
 * not B's: with N cut for the threads (BERT's 768-column projections in
 * four tasks of 6 panels on 2 threads) A was packed once for all tasks in
 * a pass of its own over the pool; read in place instead, 128 x 768 x 768
 * on 2 threads 0.483 -> 0.465 ms, BERT-base 0.989 (ab_builds, 6 processes,
 * each under 1); 1 thread unchanged (its one task has all of N). That is
 * the AVX-512 tier's 16. The AVX2 tier's 4 keep the attention's P.V (64
 * columns; an attention 0.96-0.97x its time, 128-1500 tokens) and leave
 * the larger Winograd GEMMs packed: read in place up to 16 panels,
 * ResNet-50 ran 1.006-1.009x on 2 threads (ab_builds, 6 processes). */

/* Whether mr rows of an A read in place (kc floats of each, ld floats
 * apart, taken as starting on a line) stay in L1 beside the B panel: at
 * most two thirds of a set's ways taken by the rows' lines, in an L1 of
 * 4 KiB ways (a VIPT L1's). Rows a multiple of 4 KiB apart share their
 * sets: read in place, GEMM 1024 (14 lines to a set of 12 ways) ran 1.39x
 * slower than packed and BERT's 3072 -> 768 projection (rows 12 KiB apart)
 * 1.25x; at 256 (4 lines a set) 0.96x, at 512 (7) 0.985x. */
static bool direct_fits_l1(size_t ld, size_t kc, size_t mr) {
    size_t l1 = nnf_cpu_get()->l1d, ways = l1 / 4096;
    size_t lines = (kc * sizeof(float) + 63) / 64;
    /* each row's lines: lines / 64 in every set, then a run of lines % 64
     * from its first set on (a difference array: it runs on every GEMM
     * call, 36 a Winograd conv) */
    size_t base = mr * (lines / 64), run = lines % 64;
    int delta[65] = {0};
    for (size_t r = 0; r < mr && run; r++) {
        size_t set = (r * ld * sizeof(float) / 64) % 64, end = set + run;
        delta[set]++;
        if (end <= 64) {
            delta[end]--;
        } else { /* wraps: [set, 64) and [0, end - 64) */
            delta[0]++;
            delta[end - 64]--;
        }
    }
    size_t most = 0;
    for (int set = 0, c = 0; set < 64; set++) {
        c += delta[set];
        most = (size_t)c > most ? (size_t)c : most;
    }
    return base + most <= ways * 2 / 3;
}

/* Row `row` of A from depth pc when the panel at block row ir (mm rows) is
 * a whole one of [0, split) and the job reads A in place; NULL: packed. */
static inline const float *a_in_place(const gemm_job *j, size_t ir, size_t mm, size_t split,
                                      size_t row, size_t pc) {
    return j->direct && mm == j->cfg->mr && ir < split ? j->a->data + row * j->a->ld + pc : NULL;
}

/* Prefetch (into L2) the strided rows of B that the next block will pack,
 * spread over the current block's microkernel calls: the packing copy of a
 * short-K B (a 1x1 conv's activation) otherwise waits on memory while the
 * FMA units idle, a fifth of a 64 -> 32 channel conv at 160 x 160. */
/* Below this many FMAs per B element in a block (its M panels times its
 * K), a block's compute is too short to hide the next block's reads, and
 * the prefetches only wait on memory where the packer would have (a 32 -> 16
 * channel 1x1 conv ran 5 % slower with them). They also pay only for a B
 * well beyond L2 (NNF_GEMM_PF_L2_FACTOR times it), which comes from L3 or
 * memory: a 64 -> 32 channel 1x1 conv at 160 x 160 (6.5 MB of input) ran
 * 20 % faster with them, 96/144 -> 24 at 56 x 56 (1.2/1.8 MB) 7 % slower. */
#define NNF_GEMM_PF_MIN_WORK 256
#define NNF_GEMM_PF_L2_FACTOR 4
/* Prepacked weights are prefetched a block ahead when the block serves at
 * least this many A panels: with one, the block's compute is too short to
 * hide its reads (a GEMV streams B once, and ran 2 % slower with them).
 * Spread over the block's calls, 2-7 panels pay too: ResNet-50's 14x14
 * Winograd GEMMs (16 tiles, 3 panels) took the model 1.1-1.6 % faster (A/B
 * 0.984-0.989 against a threshold of 8); YOLOv5s's 25-tile ones were within
 * the noise. */
#define NNF_GEMM_PF_MIN_PANELS 2

static size_t round_up(size_t v, size_t r) {
    return (v + r - 1) / r * r;
}

typedef struct pf_cursor {
    const char *row; /* the current row's first line */
    size_t ld_bytes, lines_per_row, rows_left, line, per_call;
} pf_cursor;

static void pf_start(pf_cursor *p, const float *base, size_t ld, size_t rows, size_t cols,
                     size_t calls) {
    p->row = (const char *)base;
    p->ld_bytes = ld * sizeof(float);
    /* the block may start mid-line: one more line per row covers the tail */
    p->lines_per_row = (cols * sizeof(float) + 63) / 64 + 1;
    p->rows_left = rows;
    p->line = 0;
    size_t total = rows * p->lines_per_row;
    p->per_call = calls ? (total + calls - 1) / calls : total;
}

/* This call's share of a contiguous run (pf_start with one row) for the
 * microkernel to prefetch as it goes: a burst of 56 prefetches from memory
 * before each call (BERT's 3072 -> 768 projection on AVX-512) filled the
 * line fill buffers, and the last of them waited for the first to return:
 * 10 % of a BERT-base run stood on that one instruction. */
static inline void pf_hand(pf_cursor *p, nnf_tile_ep *t) {
    size_t left = p->rows_left ? p->lines_per_row - p->line : 0;
    t->pf_lines = p->per_call < left ? p->per_call : left;
    t->pf_next = p->row + p->line * 64;
    p->line += t->pf_lines;
}

static inline void pf_step(pf_cursor *p) {
    for (size_t i = 0; i < p->per_call && p->rows_left; i++) {
        __builtin_prefetch(p->row + p->line * 64, 0, 2);
        if (++p->line == p->lines_per_row) {
            p->line = 0;
            p->row += p->ld_bytes;
            p->rows_left--;
        }
    }
}

/* A block's last panel of 1-4 rows costs about a 4-row tile (4 cycles a k
 * step, a full panel 6; a 2-row tile bound by the FMA latency took as
 * long, and the 4-row one has just the 8 accumulator chains the latency
 * needs): where the microkernel says so, the block ends in panels of 5 rows
 * instead, as many as make up the rest (6 - rem of them: 5 b = rem mod 6),
 * which run at the full tile's speed per row (10 accumulators). BERT's M =
 * 128 ran 21 panels of 6 and one of 2, then 20 of 6 and two of 4 (each 87 %
 * of a full panel's time for 67 % of its rows), now 18 of 6 and four of 5;
 * a sequence of 64 ends in two of 5 instead of one of 4, one of 63 in three
 * instead of one of 3. Too few rows for that: the last two panels as 4 + 3
 * or 4 + 4 where the rest is 1 or 2 rows. Each row's sum is the same in any
 * tile, so the results do not change. The AVX-512 tile has a form per row
 * count from 4 (each row a cycle per k step): its M = 128 ends in two panels
 * of 8, not 14 + 2 (2 costing as 4). Rows [0, split) are full panels, the
 * rest panels of tail rows (the last one what is left). */
static void tail_split(size_t mcb, size_t mr, int rebalance, size_t *split, size_t *tail) {
    size_t rem = mcb % mr;
    *split = mcb;
    *tail = mr;
    if (!rebalance || mcb <= mr || rem == 0 || rem == mr - 1)
        return;
    size_t fives = mr - rem; /* mr = 6: 5 fives = 4 sixes + 1, ..., 2 fives = 6 + 4 */
    if (mr == 6 && mcb >= 5 * fives) {
        *split = mcb - 5 * fives;
        *tail = 5;
    } else if (rem <= 2) {
        *split = mcb - mr - rem;
        *tail = (mr + rem + 1) / 2;
    }
}

/* Rows of the panel starting at row ir of the block. */
static inline size_t mm_of(size_t ir, size_t mcb, size_t mr, size_t split, size_t tail) {
    size_t left = ir < split ? split - ir : mcb - ir, most = ir < split ? mr : tail;
    return left < most ? left : most;
}

/* A block of 2 to this many A panels against prepacked B runs B panel by
 * B panel (see gemm_task): M = 7-24 rows against weights from memory,
 * BERT's projections at a sequence of 8 or 16 (ab_builds on 24 MatMuls of
 * 768 x 3072 and back: 0.78 at M = 8, 0.82 at 16). A single panel streams
 * B alone, where prefetching a B panel (28 KB) ahead into L1 lost (1.17 at
 * M = 4); with more panels B's reads are a small part of the block's work. */
#define NNF_GEMM_STREAM_PANELS 4

/* The bias of the tile at C's (row, col), as the microkernel takes it. */
static inline const float *tile_bias(const nnf_epilogue *ep, size_t row, size_t col) {
    return ep->bias_kind == NNF_BIAS_PER_ROW   ? ep->bias + row
           : ep->bias_kind == NNF_BIAS_PER_COL ? ep->bias + col
                                               : NULL;
}

/* One task: C rows [i0, i0 + mi) x columns [j0, j0 + nj). */
static void gemm_task(void *ctx, size_t i0, size_t j0, size_t mi, size_t nj) {
    gemm_job *j = ctx;
    const nnf_gemm_cfg *cfg = j->cfg;
    const size_t mr = cfg->mr, nr = cfg->nr, kc = j->kc;
    int slot = nnf_slot_claim(j->busy, j->slots);
    float *abuf = j->scratch + (size_t)slot * (j->a_floats + j->b_floats);
    float *bbuf = abuf + j->a_floats;
    const nnf_epilogue *ep = j->ep;
    size_t kblocks = j->k ? (j->k + kc - 1) / kc : 1;
    int plain = nnf_epilogue_is_identity(ep);
    const bool direct = j->direct;

    for (size_t kb = 0; kb < kblocks; kb++) {
        size_t pc = kb * kc;
        size_t kcb = j->k - pc < kc ? j->k - pc : kc;
        nnf_tile_ep t = {.accumulate = kb > 0, .ep = kb + 1 == kblocks && !plain ? ep : NULL};
        for (size_t ic = i0; ic < i0 + mi; ic += cfg->mc) {
            size_t mcb = i0 + mi - ic < cfg->mc ? i0 + mi - ic : cfg->mc;
            const float *ap;
            /* rows [0, split) in whole panels, then panels of `tail` rows
             * (see tail_split) */
            size_t split = mcb, tail = mr;
            if (j->a->packed) {
                ap = packed_panels(j->a->packed, ic, pc, kcb);
                if (ic == 0 && mcb == j->a->packed->mn) {
                    split = j->a->packed->tail_from;
                    tail = j->a->packed->tail;
                }
            } else {
                tail_split(mcb, mr, cfg->ukernel_rebalance, &split, &tail);
                /* direct: the whole panels of [0, split) are read in place */
                size_t from = direct ? split - split % mr : 0;
                if (split > from)
                    pack_block(cfg, NNF_GEMM_A, j->a, ic + from, split - from, pc, kcb, mr,
                               abuf + from * kcb);
                for (size_t r = split, pr = split; r < mcb; r += tail, pr += mr)
                    pack_block(cfg, NNF_GEMM_A, j->a, ic + r, mcb - r < tail ? mcb - r : tail, pc,
                               kcb, mr, abuf + pr * kcb);
                ap = abuf;
            }
            for (size_t jc = j0; jc < j0 + nj; jc += j->nc) {
                size_t ncb = j0 + nj - jc < j->nc ? j0 + nj - jc : j->nc;
                const float *bp;
                if (j->b->packed) {
                    bp = packed_panels(j->b->packed, jc, pc, kcb);
                } else {
                    pack_block(cfg, NNF_GEMM_B, j->b, jc, ncb, pc, kcb, nr, bbuf);
                    bp = bbuf;
                }
                size_t calls = (ncb + nr - 1) / nr, panels = (mcb + mr - 1) / mr;
                /* prepacked weights that a few A panels share stream B panel
                 * by B panel (below) */
                bool stream_b = j->b->packed && panels > 1 && panels <= NNF_GEMM_STREAM_PANELS;
                /* the next block's source rows, a slice per microkernel call */
                pf_cursor pf = {0};
                int pf_hand_over = 0;
                t.pf_lines = 0;
                size_t work = (mcb + mr - 1) / mr * kcb, pf_calls = calls * ((mcb + mr - 1) / mr);
                if (j->prefetch_b && jc + ncb < j0 + nj && work >= NNF_GEMM_PF_MIN_WORK) {
                    size_t nnext = j0 + nj - (jc + ncb) < j->nc ? j0 + nj - (jc + ncb) : j->nc;
                    pf_start(&pf, j->b->data + pc * j->b->ld + jc + ncb, j->b->ld, kcb, nnext,
                             pf_calls);
                } else if (j->b->packed && !j->b->packed->cached &&
                           panels >= NNF_GEMM_PF_MIN_PANELS && !stream_b) {
                    /* prepacked weights: the block after this one, in the
                     * order the task reads them (the next columns, or the
                     * next K block's first), one contiguous run, spread
                     * over this block's calls. In a model the weights come
                     * from memory, and each block's first A panel waited on
                     * them (BERT's 768 x 768 projections at M = 128: 1.50
                     * ms against 1.40 in cache). Crowded into the block's
                     * last quarter (70 lines a call for BERT) the prefetches
                     * queued behind each other: spread over the whole block,
                     * BERT-base 1 thread ran 2 % faster on AVX2 (A/B 0.980),
                     * 0.7 % on AVX-512, ResNet-50 1 % (its Winograd GEMMs). */
                    size_t pc2 = pc, kcb2 = kcb, jc2 = jc + ncb, n2 = 0;
                    if (jc2 < j0 + nj) {
                        n2 = j0 + nj - jc2;
                    } else if (ic + mcb >= i0 + mi && kb + 1 < kblocks) {
                        pc2 = pc + kc;
                        kcb2 = j->k - pc2 < kc ? j->k - pc2 : kc;
                        jc2 = j0;
                        n2 = nj;
                    }
                    n2 = n2 < j->nc ? n2 : j->nc;
                    if (n2)
                        pf_start(&pf, packed_panels(j->b->packed, jc2, pc2, kcb2), 0, 1,
                                 round_up(n2, nr) * kcb2, pf_calls);
                    pf_hand_over = cfg->ukernel_prefetches;
                }
                if (stream_b) {
                    /* B panel outermost, every A panel on each, the next B
                     * panel fetched as this one is read: its reads from
                     * memory overlap the FMAs of every panel. A panel by A
                     * panel along the block (below), the first A panel
                     * waited on memory and the others ran on the block in
                     * L2, one after the other (and prefetching the next
                     * block besides overflowed L2). The AVX2 kernel reads
                     * the next panel b_prefetch bytes on; AVX-512's reads
                     * 16 k steps ahead in its own (too short for weights
                     * from memory: ResNet-50's Winograd GEMMs of 49 rows
                     * waited on them), so each A panel's call takes a slice
                     * of the next panel (this block's, or the next block's
                     * first) into L2 (pf_next): ResNet-50 in one process
                     * 0.973 / 0.983 on 1 thread, 0.974 / 0.989 on 2. */
                    t.b_prefetch = (ptrdiff_t)(nr * kcb * sizeof(float));
                    size_t plines = nr * kcb * sizeof(float) / 64;
                    for (size_t jr = 0; jr < ncb; jr += nr) {
                        const char *next = NULL;
                        int hand = cfg->ukernel_prefetches;
                        if (hand && jr + nr < ncb)
                            next = (const char *)(bp + (jr + nr) * kcb);
                        else if (hand && jc + ncb < j0 + nj)
                            next = (const char *)packed_panels(j->b->packed, jc + ncb, pc, kcb);
                        else if (hand && kb + 1 < kblocks)
                            next = (const char *)packed_panels(j->b->packed, j0, pc + kc,
                                                               j->k - pc - kc < kc ? j->k - pc - kc
                                                                                   : kc);
                        for (size_t ir = 0, pr = 0, mm = 0, q = 0; ir < mcb;
                             ir += mm, pr += mr, q++) {
                            mm = mm_of(ir, mcb, mr, split, tail);
                            if (next) {
                                size_t l0 = q * plines / panels, l1 = (q + 1) * plines / panels;
                                t.pf_next = next + l0 * 64;
                                t.pf_lines = l1 - l0;
                            }
                            size_t row = ic + ir, col = jc + jr, nn = ncb - jr < nr ? ncb - jr : nr;
                            if (t.ep) {
                                t.bias = tile_bias(ep, row, col);
                                t.residual = ep->residual
                                                 ? ep->residual + row * ep->ld_residual + col
                                                 : NULL;
                            }
                            const float *arow = a_in_place(j, ir, mm, split, row, pc);
                            if (arow)
                                cfg->ukernel_direct(kcb, arow, j->a->ld, bp + jr * kcb,
                                                    j->c + row * j->ldc + col, j->ldc, nn, &t);
                            else
                                cfg->ukernel(kcb, ap + pr * kcb, bp + jr * kcb,
                                             j->c + row * j->ldc + col, j->ldc, mm, nn, &t);
                        }
                    }
                    t.b_prefetch = 0;
                    t.pf_lines = 0;
                    continue;
                }
                for (size_t ir = 0, pr = 0, mm = 0; ir < mcb; ir += mm, pr += mr) {
                    mm = mm_of(ir, mcb, mr, split, tail);
                    const float *apanel = ap + pr * kcb;
                    size_t row = ic + ir;
                    if (t.ep)
                        t.bias = tile_bias(ep, row, jc);
                    float *crow = j->c + row * j->ldc + jc;
                    const float *rrow =
                        t.ep && ep->residual ? ep->residual + row * ep->ld_residual + jc : NULL;
                    const float *arow = a_in_place(j, ir, mm, split, row, pc);
                    /* No fetch of the next A panel: GCC 12 had deleted the
                     * __builtin_prefetch loops that fetched it a slice per
                     * call (base/prefetch.h), and restored they cost
                     * BERT-base 1.078x and ResNet-50 1.011x its time
                     * (ab_builds, 1 thread): the panel is in L2 already. */
                    for (size_t jr = 0; jr < ncb; jr += nr) {
                        size_t nn = ncb - jr < nr ? ncb - jr : nr;
                        if (t.ep) {
                            if (ep->bias_kind == NNF_BIAS_PER_COL)
                                t.bias = ep->bias + jc + jr;
                            t.residual = rrow ? rrow + jr : NULL;
                        }
                        if (pf_hand_over)
                            pf_hand(&pf, &t);
                        else
                            pf_step(&pf);
                        if (rrow && jr + nr < ncb)
                            /* the next tile's residual rows: in a model they
                             * come from memory (ResNet's block input, written
                             * three convs earlier), and the epilogue waited
                             * on them after the FMAs; a 64 -> 256 channel
                             * 1x1 conv at 56 x 56 with its inputs flushed from
                             * the caches took ~2x its in-cache time. */
                            for (size_t r = 0; r < mm; r++) {
                                const float *p = rrow + r * ep->ld_residual + jr + nr;
                                __builtin_prefetch(p, 0, 3);
                                __builtin_prefetch(p + nr - 1, 0, 3);
                            }
                        if (arow)
                            cfg->ukernel_direct(kcb, arow, j->a->ld, bp + jr * kcb, crow + jr,
                                                j->ldc, nn, &t);
                        else
                            cfg->ukernel(kcb, apanel, bp + jr * kcb, crow + jr, j->ldc, mm, nn, &t);
                    }
                }
            }
        }
    }
    nnf_slot_release(j->busy, slot);
}

/* A GEMM is split only when each thread gets at least this many
 * multiply-adds (a few microseconds, several times a hand-off); below that
 * it runs on the calling thread. BERT-tiny's 16x64x64 projections ran no
 * faster on 2 threads and its 4 heads of 16x16x16 ran 50 % slower. */
#define NNF_GEMM_INLINE_FMAS ((size_t)1 << 16)

static int too_small_to_split(size_t work, nnf_threadpool *pool) {
    size_t threads = (size_t)nnf_threadpool_size(pool), floor;
    return !nnf_mul_size(threads, NNF_GEMM_INLINE_FMAS, &floor) || work < floor;
}

static size_t fmas(size_t m, size_t n, size_t k) {
    size_t mn, mnk;
    if (!nnf_mul_size(m, n, &mn) || !nnf_mul_size(mn, k ? k : 1, &mnk))
        return SIZE_MAX;
    return mnk;
}

/* Tiles for the pool: whole-matrix on one thread; otherwise at least two
 * tasks per thread, cutting N first (each N tile re-packs only A's small
 * blocks) and never below 4 register tiles a side. With B prepacked
 * (weights) only N is cut while it can be: A is then packed once for all
 * tiles (shared_floats), and each weight block is read by one task, where
 * cutting M too had two tasks on two cores read every block from L3 (BERT's
 * 128 x 768 x 768: 8 tasks of 66 x 192 read 4.7 MB of weights, 8 of
 * 128 x 96 read 2.4 MB). Three tasks a thread (8 of 128 x 96 there) read
 * the shared A once per task: on Zen 5 with two threads, two a thread ran
 * BERT's 128 x 768 x 768 and 128 x 3072 x 768 8-9 % faster, BERT-base 6 %
 * (in-process A/B, both orders); one a thread gained the same on BERT and
 * more on GEMM 256 but leaves nothing to rebalance a slow core with.
 * Except where A is the longer side and outgrows L2: cut along N, every
 * task streamed all of the shared A from L3 (after a pass of its own
 * packing it), so M is cut as without prepacked weights, each task packing
 * its own rows' blocks as one thread does (2 threads: GEMM 1024^3 7.04 ->
 * 6.90 ms, 2048^3 56.8 -> 54.3; at 512^3, whose A fits L2, cutting M lost:
 * 0.85 -> 0.92 ms). */
static void choose_tiles(const nnf_gemm_cfg *cfg, size_t m, size_t n, size_t k, int threads,
                         int b_packed, size_t *ti, size_t *tj) {
    *ti = round_up(m, cfg->mr);
    *tj = round_up(n, cfg->nr);
    if (threads <= 1)
        return;
    size_t l2 = nnf_cpu_get()->l2, a_bytes;
    if (b_packed && m >= n && (!nnf_mul_size(m, k, &a_bytes) || a_bytes > l2 / sizeof(float)))
        b_packed = 0;
    size_t want = (size_t)threads * 2;
    for (;;) {
        size_t tasks = ((m + *ti - 1) / *ti) * ((n + *tj - 1) / *tj);
        if (tasks >= want)
            break;
        /* An odd count of row tiles cut in two gives one thread a tile
         * more (the pool hands out consecutive tasks: both halves of the
         * larger rows to one thread), so with an odd count N may be cut
         * down to two panels a task, not four (GEMM 256^3, B prepacked, on
         * 2 threads: 19 row tiles as 10 + 9 and 8 panels as 4 + 4, now 4
         * tasks of 2 panels, 0.075 -> 0.070 ms, ORT 0.071; no zoo model
         * has such a GEMM). */
        int odd_rows = ((*ti + cfg->mr - 1) / cfg->mr) % 2 != 0;
        int can_j = *tj >= (odd_rows ? 4 : 8) * cfg->nr, can_i = *ti >= 8 * cfg->mr;
        if (can_j && (!can_i || b_packed || *tj * cfg->mr >= *ti * cfg->nr))
            *tj = round_up(*tj / 2, cfg->nr);
        else if (can_i)
            *ti = round_up(*ti / 2, cfg->mr);
        else
            break;
    }
}

/* ---- operands packed once for all threads ------------------------------- */

/* When the tiles cut M, every M tile would pack the same B columns again (a
 * conv's im2col for each of them: with 512 output channels over 49 pixels,
 * eight tiles packed B eight times); when they cut N, every N tile would
 * pack the same rows of A (BERT's 128 x 768 x 3072 on 2 threads: eight
 * tiles, A packed eight times, 5-9 % of the GEMM). Packing the operand
 * once, split over the pool, in the same layout as a prepacked operand gives
 * the same values, so the same bits. */
typedef struct shared_pack_job {
    const nnf_gemm_cfg *cfg;
    const nnf_gemm_src *src;
    const nnf_gemm_packed *p; /* the layout being written */
    size_t chunk, nchunks;
} shared_pack_job;

/* Chunk i: `chunk` rows' worth of panels of one K block; panels from
 * tail_from on hold `tail` rows each. */
static void shared_pack_task(void *ctx, size_t i) {
    const shared_pack_job *j = ctx;
    const nnf_gemm_packed *p = j->p;
    size_t pc = i / j->nchunks * p->kc, mn0 = i % j->nchunks * j->chunk;
    size_t kcb = p->k - pc < p->kc ? p->k - pc : p->kc;
    size_t end = mn0 + j->chunk < p->mn_pad ? mn0 + j->chunk : p->mn_pad; /* panel slots */
    float *dst = p->data + pc * p->mn_pad;
    size_t head = end < p->tail_from ? end : p->tail_from; /* whole panels first */
    if (mn0 < head)
        pack_block(j->cfg, p->side, j->src, mn0, head - mn0, pc, kcb, p->r, dst + mn0 * kcb);
    for (size_t slot = mn0 > head ? mn0 : head; slot < end; slot += p->r) {
        size_t row = p->tail_from + (slot - p->tail_from) / p->r * p->tail;
        if (row < p->mn)
            pack_block(j->cfg, p->side, j->src, row, p->mn - row < p->tail ? p->mn - row : p->tail,
                       pc, kcb, p->r, dst + slot * kcb);
    }
}

/* A shared operand above this many floats (16 MiB) is left to each tile. */
#define NNF_GEMM_SHARED_MAX ((size_t)1 << 22)

/* The floats of a shared copy of one side, or 0 when each tile packs its
 * own: only with several threads, an operand not packed yet, and tiles that
 * cut the other side (`cut`). */
static size_t shared_floats(const nnf_gemm_cfg *cfg, nnf_gemm_side side, const nnf_gemm_src *s,
                            size_t mn, size_t k, int threads, int cut) {
    size_t r = side == NNF_GEMM_A ? cfg->mr : cfg->nr, floats;
    if (threads <= 1 || s->packed || k == 0 || !cut ||
        !nnf_mul_size(round_up(mn, r), k, &floats) || floats > NNF_GEMM_SHARED_MAX)
        return 0;
    return floats;
}

/* Packs one side into data (shared_floats() of it) split over the pool; *p
 * and *src describe the result. */
static void shared_pack(const nnf_gemm_cfg *cfg, nnf_gemm_side side, const nnf_gemm_src *s,
                        size_t mn, size_t k, size_t kc, int one_block, float *data,
                        nnf_threadpool *pool, nnf_gemm_packed *p, nnf_gemm_src *src) {
    size_t r = side == NNF_GEMM_A ? cfg->mr : cfg->nr;
    *p = (nnf_gemm_packed){.side = side,
                           .mn = mn,
                           .k = k,
                           .kc = kc,
                           .r = r,
                           .mn_pad = round_up(mn, r),
                           .data = data,
                           .tail_from = mn,
                           .tail = r};
    /* rows that every task takes as one block end in its tail panels, as
     * that block would pack them itself */
    if (side == NNF_GEMM_A && one_block)
        tail_split(mn, r, cfg->ukernel_rebalance, &p->tail_from, &p->tail);
    /* chunks of whole cache blocks for B (as its tiles pack it), of 16
     * register panels for A (M is short where this pays: 128 rows) */
    size_t chunk = side == NNF_GEMM_A ? 16 * r : cfg->nc;
    shared_pack_job pj = {
        .cfg = cfg, .src = s, .p = p, .chunk = chunk, .nchunks = (mn + chunk - 1) / chunk};
    nnf_parallel_for(pool, ((k + kc - 1) / kc) * pj.nchunks, shared_pack_task, &pj);
    *src = nnf_gemm_src_packed(p);
}

/* ---- M = 1 (GEMV) against a packed B ------------------------------------- */

typedef struct gemv_job {
    const nnf_gemm_cfg *cfg;
    const nnf_gemm_packed *b;
    const float *a;
    size_t a_stride, k;
    float *c;
    const nnf_epilogue *ep;
} gemv_job;

/* Panels at a time of a GEMV task: their partial sums (4 nr floats each)
 * stay in L1 while every K block streams past them. */
#define GEMV_PANELS 16

/* Columns [j0, j0 + nj), whole panels, GEMV_PANELS at a time, K block after
 * K block. A panel's sums go to a register-sized buffer; the microkernel
 * with kc = 0 then adds them ("accumulate") and applies the epilogue in
 * registers, as on any tile. */
static void gemv_task(void *ctx, size_t i0, size_t j0, size_t mi, size_t nj) {
    (void)i0;
    (void)mi;
    const gemv_job *j = ctx;
    const nnf_gemm_cfg *cfg = j->cfg;
    const size_t nr = cfg->nr, kc = j->b->kc;
    _Alignas(64) float st[GEMV_PANELS * 4 * 64], buf[64];
    const nnf_epilogue *ep = j->ep;
    const nnf_epilogue *tile_ep = nnf_epilogue_is_identity(ep) ? NULL : ep;
    for (size_t g0 = j0; g0 < j0 + nj; g0 += GEMV_PANELS * nr) {
        size_t cols = j0 + nj - g0 < GEMV_PANELS * nr ? j0 + nj - g0 : GEMV_PANELS * nr;
        size_t np = (cols + nr - 1) / nr;
        memset(st, 0, np * 4 * nr * sizeof(float));
        for (size_t pc = 0; pc < j->k; pc += kc) {
            size_t kcb = j->k - pc < kc ? j->k - pc : kc;
            cfg->gemv_block(kcb, j->a + pc * j->a_stride, j->a_stride,
                            j->b->data + pc * j->b->mn_pad + g0 * kcb, np, st);
        }
        for (size_t p = 0; p < np; p++) {
            size_t jr = g0 + p * nr, nn = j0 + nj - jr < nr ? j0 + nj - jr : nr;
            const float *sp = st + p * 4 * nr;
            for (size_t q = 0; q < nr; q++)
                buf[q] = (sp[q] + sp[nr + q]) + (sp[2 * nr + q] + sp[3 * nr + q]);
            nnf_tile_ep t = {.accumulate = 1, .ep = tile_ep};
            t.bias = ep->bias_kind == NNF_BIAS_PER_ROW   ? ep->bias
                     : ep->bias_kind == NNF_BIAS_PER_COL ? ep->bias + jr
                                                         : NULL;
            t.residual = ep->residual ? ep->residual + jr : NULL;
            cfg->ukernel(0, buf, buf, buf, nr, 1, nn, &t);
            memcpy(j->c + jr, buf, nn * sizeof(float));
        }
    }
}

static void run_gemv(const nnf_gemm_cfg *cfg, size_t n, size_t k, const nnf_gemm_src *a,
                     const nnf_gemm_packed *b, float *c, const nnf_epilogue *ep,
                     nnf_threadpool *pool) {
    gemv_job j = {.cfg = cfg,
                  .b = b,
                  .a = a->data,
                  .a_stride = a->trans ? a->ld : 1,
                  .k = k,
                  .c = c,
                  .ep = ep};
    /* Whole panels per task, about four tasks per thread; each task streams
     * its own slice of B. */
    size_t threads = (size_t)nnf_threadpool_size(pool);
    size_t panels = (n + cfg->nr - 1) / cfg->nr;
    size_t per = panels;
    if (threads > 1) {
        per = (panels + threads * 4 - 1) / (threads * 4);
        if (per < 2)
            per = 2;
    }
    nnf_parallel_for_2d(pool, 1, n, 1, per * cfg->nr, gemv_task, &j);
}

nnf_status nnf_gemm_run(const nnf_gemm_cfg *cfg, size_t m, size_t n, size_t k,
                        const nnf_gemm_src *a, const nnf_gemm_src *b, float *c, size_t ldc,
                        const nnf_epilogue *ep, nnf_threadpool *pool) {
    if (m == 0 || n == 0)
        return NNF_OK;
    size_t kc = b->packed ? b->packed->kc : nnf_gemm_kc(cfg, k);
    if ((a->packed && (a->packed->kc != kc || a->packed->r != cfg->mr || a->packed->mn < m ||
                       a->packed->k != k || a->packed->side != NNF_GEMM_A)) ||
        (b->packed && (b->packed->kc != kc || b->packed->r != cfg->nr || b->packed->mn < n ||
                       b->packed->k != k || b->packed->side != NNF_GEMM_B)))
        return nnf_error(NNF_ERR_INTERNAL,
                         "%s: packed operand does not match the GEMM (%zu x %zu x %zu)", cfg->name,
                         m, n, k);
    if (too_small_to_split(fmas(m, n, k), pool))
        pool = NULL;
    int gemv = m == 1 && k > 0 && cfg->gemv_block && cfg->nr <= 64 && b->packed &&
               !b->packed->blocks && !a->packed && !a->pack;
    nnf_epilogue plain = nnf_epilogue_default();
    if (!ep)
        ep = &plain;
    /* A residual that overlaps C is read from a copy unless it is C itself
     * (an in-place Add: each element read just before it is written) with
     * one K block and no GEMV: C holds partial sums between K blocks, a GEMV
     * stores panels while later ones still read the residual, and a residual
     * shifted against C would be read where other tiles already wrote. */
    float *res_copy = NULL;
    nnf_epilogue with_copy;
    if (ep->residual &&
        (k > kc || gemv || ep->residual != c || (m > 1 && ep->ld_residual != ldc))) {
        const float *r0 = ep->residual, *r1 = ep->residual + (m - 1) * ep->ld_residual + n;
        const float *c0 = c, *c1 = c + (m - 1) * ldc + n;
        if ((uintptr_t)r0 < (uintptr_t)c1 && (uintptr_t)c0 < (uintptr_t)r1) {
            size_t floats;
            if (!nnf_mul_size(m, n, &floats) || !(res_copy = nnf_malloc(floats * sizeof(float))))
                return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory copying a GEMM residual");
            for (size_t i = 0; i < m; i++)
                memcpy(res_copy + i * n, ep->residual + i * ep->ld_residual, n * sizeof(float));
            with_copy = *ep;
            with_copy.residual = res_copy;
            with_copy.ld_residual = n;
            ep = &with_copy;
        }
    }

    nnf_status st = NNF_OK;
    gemm_job *j = NULL;
    if (gemv) {
        run_gemv(cfg, n, k, a, b->packed, c, ep, pool);
        goto fail;
    }
    if (cfg->amx && nnf_cpu_get()->amx && nnf_gemm_amx_fits(m, n, k, a, b) &&
        nnf_gemm_amx_values(m, n, k, a, b)) {
        /* one task a thread, cutting N where it can: each task splits its
         * share of B and all of A again, and with two a thread (as the FMA
         * tiles take) BERT-base ran 65 against 60 ms on 2 threads, GEMM
         * 2048 36.4 against 34.7 ms (1024 even) */
        size_t t = (size_t)nnf_threadpool_size(pool), ti = round_up(m, 16), tj = round_up(n, 16);
        if (t > 1 && n >= 32 * t)
            tj = round_up((n + t - 1) / t, 32);
        else if (t > 1)
            ti = round_up((m + t - 1) / t, 16);
        st = nnf_gemm_amx_run(m, n, k, kc, a, b, c, ldc, ep, ti, tj, pool);
        goto fail;
    }
    j = nnf_calloc(1, sizeof *j);
    if (!j) {
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for a GEMM job");
        goto fail;
    }
    int threads = nnf_threadpool_size(pool);
    size_t ti, tj;
    choose_tiles(cfg, m, n, k, threads, b->packed != NULL, &ti, &tj);
    size_t tasks = ((m + ti - 1) / ti) * ((n + tj - 1) / tj);
    j->cfg = cfg;
    j->m = m;
    j->n = n;
    j->k = k;
    j->kc = kc;
    j->ldc = ldc;
    j->a = a;
    j->b = b;
    j->c = c;
    j->ep = ep;
    j->slots = threads < (int)tasks ? threads : (int)tasks;
    if (j->slots > NNF_GEMM_MAX_SLOTS)
        j->slots = NNF_GEMM_MAX_SLOTS;
    size_t kcb = k < kc ? k : kc;
    j->nc = cfg->nc;
    /* Prepacked weights against an A block that stays in L2 (BERT's
     * 128-token activations): gemm_task fetches B's next block into L2 while
     * this one runs. With blocks of half L2 (cfg->nc) the next one evicted
     * the current, and each A panel after the first read it again from
     * memory. In a model, where the weights come from DRAM, BERT-base ran
     * faster as the blocks shrank (ab_builds, both orders, 1 / 2 threads):
     * a quarter of L2 1.05 / 1.01x, an eighth 1.03 / 1.015x more, a
     * sixteenth 1.0 / 1.04x more, a thirty-second even; ResNet-50 and
     * YOLOv5s even; the same values (only the column blocking moves). Bench
     * GEMMs never showed it: their weights stay in this VM's large L3
     * between runs. A large A is read from L3 once per block, so larger
     * blocks read it fewer times (GEMM 1024 1.5 % faster with half L2). */
    size_t l2 = nnf_cpu_get()->l2;
    if (b->packed && kcb && m * kcb * sizeof(float) <= l2 / 4) { /* K = 0: no blocks */
        size_t small = l2 / 16 / (kcb * sizeof(float)) / cfg->nr * cfg->nr;
        j->nc = small < cfg->nr ? cfg->nr : small < j->nc ? small : j->nc;
    }
    size_t b_bytes;
    size_t mcb = ti < cfg->mc ? ti : cfg->mc;
    size_t ncb = tj < j->nc ? tj : j->nc;
    int direct_ok = cfg->ukernel_direct && !a->packed && !a->pack && !a->trans &&
                    tj <= cfg->direct_panels * cfg->nr && direct_fits_l1(a->ld, kcb, cfg->mr);
    size_t shared_a = direct_ok ? 0 : shared_floats(cfg, NNF_GEMM_A, a, m, k, threads, tj < n);
    size_t shared_b = shared_floats(cfg, NNF_GEMM_B, b, n, k, threads, ti < m);
    j->prefetch_b = !b->packed && !b->pack && !b->trans && !shared_b &&
                    (!nnf_mul_size(kcb * sizeof(float), n, &b_bytes) ||
                     b_bytes / NNF_GEMM_PF_L2_FACTOR > nnf_cpu_get()->l2);
    j->direct = direct_ok;
    j->a_floats = a->packed || shared_a ? 0 : round_up(mcb, cfg->mr) * kcb;
    j->b_floats = b->packed || shared_b ? 0 : round_up(ncb, cfg->nr) * kcb;
    size_t total = (j->a_floats + j->b_floats) * (size_t)j->slots + shared_a + shared_b;
    float *buf = total ? nnf_thread_scratch(NNF_SCRATCH_GEMM, total) : NULL;
    if (total && !buf) {
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for GEMM packing scratch (%zu floats)",
                       total);
        goto fail;
    }
    j->scratch = buf ? buf + shared_a + shared_b : NULL;
    nnf_gemm_packed packed_a, packed_b;
    nnf_gemm_src src_a, src_b;
    if (shared_a) {
        shared_pack(cfg, NNF_GEMM_A, a, m, k, kc, ti >= m && m <= cfg->mc, buf, pool, &packed_a,
                    &src_a);
        j->a = &src_a;
    }
    if (shared_b) {
        shared_pack(cfg, NNF_GEMM_B, b, n, k, kc, 0, buf + shared_a, pool, &packed_b, &src_b);
        j->b = &src_b;
    }
    nnf_parallel_for_2d(pool, m, n, ti, tj, gemm_task, j);
fail:
    nnf_free(j);
    nnf_free(res_copy);
    return st;
}

/* ---- batches ------------------------------------------------------------- */

typedef struct batch_job {
    const nnf_gemm_cfg *cfg;
    size_t m, n, k, ldc;
    nnf_gemm_batch_fn at;
    const void *ctx;
    const nnf_epilogue *ep;
    atomic_int failed; /* first failure's status, 0 = none */
    atomic_size_t failed_at;
} batch_job;

static nnf_status batch_one(const batch_job *j, size_t bi, nnf_threadpool *pool) {
    nnf_gemm_src a = {0}, b = {0};
    float *c = NULL;
    const float *res = NULL;
    j->at(j->ctx, bi, &a, &b, &c, &res);
    nnf_epilogue e = *j->ep;
    e.residual = res;
    return nnf_gemm_run(j->cfg, j->m, j->n, j->k, &a, &b, c, j->ldc, &e, pool);
}

static void batch_task(void *ctx, size_t bi) {
    batch_job *j = ctx;
    nnf_status st = batch_one(j, bi, NULL);
    int none = 0;
    if (st != NNF_OK && atomic_compare_exchange_strong(&j->failed, &none, (int)st))
        atomic_store(&j->failed_at, bi);
}

nnf_status nnf_gemm_run_batch(const nnf_gemm_cfg *cfg, size_t count, size_t m, size_t n, size_t k,
                              nnf_gemm_batch_fn at, const void *ctx, size_t ldc,
                              const nnf_epilogue *ep, nnf_threadpool *pool) {
    nnf_epilogue plain = nnf_epilogue_default();
    batch_job j = {.cfg = cfg,
                   .m = m,
                   .n = n,
                   .k = k,
                   .ldc = ldc,
                   .at = at,
                   .ctx = ctx,
                   .ep = ep ? ep : &plain};
    atomic_init(&j.failed, 0);
    atomic_init(&j.failed_at, 0);
    size_t threads = (size_t)nnf_threadpool_size(pool);
    /* Whole GEMMs per thread when they share out evenly (or are so many that
     * the last round hardly matters), or are too small to split well: each is
     * then packed once and never handed off tile by tile. */
    size_t per = fmas(m, n, k), all;
    if (!nnf_mul_size(per, count, &all))
        all = SIZE_MAX;
    if (too_small_to_split(all, pool))
        pool = NULL, threads = 1;
    int across = threads > 1 && count >= threads &&
                 (count % threads == 0 || count >= 4 * threads || per < ((size_t)1 << 21));
    if (!across) {
        for (size_t bi = 0; bi < count; bi++) {
            nnf_status st = batch_one(&j, bi, pool);
            if (st != NNF_OK)
                return nnf_error_prefix(st, "GEMM %zu of a batch of %zu", bi, count);
        }
        return NNF_OK;
    }
    nnf_parallel_for(pool, count, batch_task, &j);
    int failed = atomic_load(&j.failed);
    if (failed)
        /* The worker's message stayed on its thread: say what failed here. */
        return nnf_error((nnf_status)failed,
                         "%s: GEMM %zu of a batch of %zu (%zu x %zu x %zu) failed", cfg->name,
                         atomic_load(&j.failed_at), count, m, n, k);
    return NNF_OK;
}

nnf_status nnf_sgemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, const float *a,
                     size_t lda, const float *b, size_t ldb, float *c, size_t ldc,
                     const nnf_epilogue *ep, nnf_threadpool *pool) {
    const nnf_gemm_cfg *cfg = nnf_gemm_cfg_for(nnf_cpu_isa());
    nnf_gemm_src sa = nnf_gemm_src_matrix(a, lda, trans_a);
    nnf_gemm_src sb = nnf_gemm_src_matrix(b, ldb, trans_b);
    return nnf_gemm_run(cfg, m, n, k, &sa, &sb, c, ldc, ep, pool);
}

/* ---- portable microkernel ------------------------------------------------ */

void nnf_gemm_ukernel_4x8_scalar(size_t kc, const float *a, const float *b, float *c, size_t ldc,
                                 size_t m, size_t n, const nnf_tile_ep *t) {
    float acc[4][8] = {{0}};
    for (size_t kk = 0; kk < kc; kk++, a += 4, b += 8)
        for (int i = 0; i < 4; i++)
            for (int q = 0; q < 8; q++)
                acc[i][q] += a[i] * b[q];
    for (size_t i = 0; i < m; i++) {
        float *crow = c + i * ldc;
        for (size_t q = 0; q < n; q++) {
            float v = acc[i][q];
            if (t->accumulate)
                v += crow[q];
            crow[q] = t->ep ? nnf_epilogue_scalar(t, i, q, v) : v;
        }
    }
}

static void gemv_block_8_scalar(size_t kcb, const float *a, size_t a_stride, const float *b,
                                size_t np, float *st) {
    for (size_t p = 0; p < np; p++, st += 32)
        for (size_t kk = 0; kk < kcb; kk++, b += 8) {
            float av = a[kk * a_stride], *s = st + 8 * (kk % 4);
            for (int q = 0; q < 8; q++)
                s[q] += av * b[q];
        }
}

/* f32 GEMM: C (M x N, row stride ldc) = epilogue(A (M x K) · B (K x N)).
 *
 * BLIS-style: operands are packed into panels, the C tile of MR x NR lives in
 * registers for the whole K block, K is cut into KC blocks (the B panel stays
 * in L1), M into MC blocks (the packed A block stays in L2), N into NC blocks
 * (the packed B block stays in L3). Packed layout (both sides, "r" = MR for A,
 * NR for B): for each K block of kc rows, for each panel of r rows/columns,
 * kc x r floats with the r values of one k adjacent; the last panel is padded
 * with zeros.
 *
 * Either operand comes as a strided matrix (packed on the fly), as a packed
 * matrix made once at plan time (weights), or through a pack callback (the
 * convolution's implicit im2col). Every ISA tier binds its microkernel and
 * tile sizes in one nnf_gemm_cfg. Results for one element do not depend on
 * the thread count: the K reduction order is fixed by kc alone. */
#ifndef NNF_KERNELS_GEMM_H
#define NNF_KERNELS_GEMM_H

#include "base/cpu.h"
#include "base/status.h"
#include "base/threadpool.h"
#include "kernels/epilogue.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* Multiply packed panels a (kc x mr) and b (kc x nr); write the top-left m x n
 * of the result to c (row stride ldc), adding c's old contents when
 * t->accumulate and applying t->ep when it is non-NULL. kc may be 0. */
typedef void (*nnf_gemm_ukernel_fn)(size_t kc, const float *a, const float *b, float *c, size_t ldc,
                                    size_t m, size_t n, const nnf_tile_ep *t);

/* The microkernel's mr-row tile with A read in place: rows a + i * lda
 * floats (i < mr), k in [0, kc); otherwise as nnf_gemm_ukernel_fn with m =
 * mr. The same values as the packed form. */
typedef void (*nnf_gemm_ukernel_direct_fn)(size_t kc, const float *a, size_t lda, const float *b,
                                           float *c, size_t ldc, size_t n, const nnf_tile_ep *t);
/* Pack rows [mn0, mn0 + mnc) x k in [k0, k0 + kc) of a row-major A (element
 * (i, k) at base[i * ld + k]) into mr-row panels: a tier's vectorised packer. */
typedef void (*nnf_gemm_pack_rows_fn)(const float *base, size_t ld, size_t mn0, size_t mnc,
                                      size_t k0, size_t kc, float *dst);

/* The M = 1 product against a packed B, which streams B once instead of
 * feeding a register tile that is mostly zero rows: one K block (kcb rows,
 * a[kk * a_stride] for its k) of np consecutive r-wide panels of B (b: the
 * first panel's kcb x r floats, the others following, as packed). Each
 * panel's partial sums are four sets of r columns, the k steps taken in
 * turn (st[4 r p + r s + q]: panel p, set s = kk % 4 within the block, column
 * q; the AVX2 kernel adds a block's last kcb % 4 steps to set 0), read and
 * written back, so the K blocks can run one after another over
 * all the panels and B is read as one stream. Column q of a panel is then
 * (st[q] + st[r + q]) + (st[2 r + q] + st[3 r + q]). Columns past B's edge
 * read the packed zero padding. */
typedef void (*nnf_gemv_block_fn)(size_t kcb, const float *a, size_t a_stride, const float *b,
                                  size_t np, float *st);

typedef struct nnf_gemm_cfg {
    const char *name; /* "f32_gemm_6x16_avx2" */
    nnf_isa isa;
    size_t mr, nr;     /* register tile; nr is a power of two */
    size_t kc, mc, nc; /* cache blocks; mc % mr == 0, nc % nr == 0 */
    nnf_gemm_ukernel_fn ukernel;
    /* full panels of a row-major A not packed (gemm.c), where a task's
     * columns are at most direct_panels panels; NULL: A always packed */
    nnf_gemm_ukernel_direct_fn ukernel_direct;
    size_t direct_panels;
    nnf_gemm_pack_rows_fn pack_a_rows; /* NULL: the portable packer */
    /* a B read transposed (its columns rows of K) into nr-column panels, the
     * same transposes (a Gemm's transB, a MatMul's folded K^T); NULL: portable */
    nnf_gemm_pack_rows_fn pack_b_cols;
    nnf_gemv_block_fn gemv_block;      /* NULL: M = 1 runs through the microkernel */
    /* the microkernel's cost follows the panel's rows (AVX2: 6-, 5- and
     * 4-row tiles; AVX-512: a form per row count from 4): a block whose
     * last panel would hold 1-2 rows (AVX2: 1-4) ends in two balanced
     * panels instead (gemm.c, tail_split) */
    int ukernel_rebalance;
    /* the microkernel issues the next block's prefetches (nnf_tile_ep's
     * pf_next) one every few k steps, not the driver in a burst per call */
    int ukernel_prefetches;
    /* products may run on AMX tiles (nnf_gemm_cfg_whole: the AVX-512 tier
     * where the CPU has them); same packed operands as the tier's */
    int amx;
} nnf_gemm_cfg;

/* The configuration for a tier (clamped to what the CPU has), blocking sized
 * from the CPU's caches. A pure function of (isa, cache sizes). */
const nnf_gemm_cfg *nnf_gemm_cfg_for(nnf_isa isa);

/* The configuration for callers that hand each product whole, never a
 * share of its rows (MatMul, Gemm): on the AVX-512 tier of a CPU with AMX,
 * the tier's own with AMX allowed (name f32_gemm_amx_bf16x6). A caller that
 * cuts M itself (a conv over tasks of rows) takes nnf_gemm_cfg_for: the AMX
 * GEMM takes only large M, so the rows a task holds would decide a value's
 * bits, and they change with the thread count. */
const nnf_gemm_cfg *nnf_gemm_cfg_whole(nnf_isa isa);

/* The K block used for a GEMM of depth k: at most cfg->kc, K cut into equal
 * blocks (multiples of 8). Packed operands bake it in, and a GEMM takes its
 * packed B's (one larger than the last-level cache may have longer blocks:
 * kc_for_b in gemm.c). */
size_t nnf_gemm_kc(const nnf_gemm_cfg *cfg, size_t k);

typedef enum nnf_gemm_side { NNF_GEMM_A = 0, NNF_GEMM_B = 1 } nnf_gemm_side;

/* An operand packed for one cfg, made once and shared read-only by runs. */
typedef struct nnf_gemm_packed {
    nnf_gemm_side side;
    size_t mn, k;  /* M (side A) or N (side B), and K */
    size_t kc, r;  /* the cfg's kc and mr/nr baked into the layout */
    size_t mn_pad; /* mn rounded up to r */
    float *data;   /* k * mn_pad floats, 64-byte aligned */
    /* if set, the operand's K blocks lie apart: block pc / kc's panels (mn_pad
     * x its depth floats, as they would be at data + pc * mn_pad) start at
     * blocks[pc / kc]; a view over blocks packed separately (conv3d.c's
     * input planes), read by nnf_gemm_run as side B of an M > 1 product */
    float *const *blocks;
    int owns_data; /* data is this operand's block (else another's: create_n) */
    /* data came packed (a compiled .nnf file's block, base/packs.h): its
     * producer writes nothing */
    bool ready;
    /* packed just now by the calling thread into its scratch (an attention's
     * K and V, plan/plan_attention.c), so in its L2 or L3: nnf_gemm_run
     * does not prefetch the next block of it, as it does weights from
     * memory. A line per microkernel call of a 64-deep product cost
     * Whisper's attention 7 % of its time on Zen 3 (ab_builds 0.93). */
    bool cached;
    /* rows from tail_from on are in panels of `tail` rows (each still r
     * wide), as a block of all mn rows packs them (gemm.c, tail_split);
     * tail_from = mn: every panel r rows */
    size_t tail_from, tail;
    /* the AMX GEMM's check of its values, made on first use: 0 not yet,
     * 1 every one splits into bf16 parts, 2 not (x86/gemm_amx_avx512.c) */
    atomic_int amx_values;
} nnf_gemm_packed;

/* Fill panels for the rows (side A) / columns (side B) [mn0, mn0 + mnc) and
 * k in [k0, k0 + kc) into dst, in the packed layout above with panel width r;
 * the tail of the last panel must be written as zeros. */
typedef void (*nnf_gemm_pack_fn)(const void *ctx, size_t mn0, size_t mnc, size_t k0, size_t kc,
                                 size_t r, float *dst);

typedef struct nnf_gemm_src {
    const nnf_gemm_packed *packed; /* if set, used as is */
    nnf_gemm_pack_fn pack;         /* else if set, called with pack_ctx */
    const void *pack_ctx;
    const float *data; /* else a strided matrix: A is M x K, B is K x N, */
    size_t ld;         /* as stored before the transpose flag applies */
    int trans;
} nnf_gemm_src;

static inline nnf_gemm_src nnf_gemm_src_matrix(const float *data, size_t ld, int trans) {
    nnf_gemm_src s = {.data = data, .ld = ld, .trans = trans};
    return s;
}
static inline nnf_gemm_src nnf_gemm_src_packed(const nnf_gemm_packed *p) {
    nnf_gemm_src s = {.packed = p};
    return s;
}

/* Pack a whole operand: side A is mn x k (M x K), side B is k x mn (K x N). */
nnf_status nnf_gemm_pack(const nnf_gemm_cfg *cfg, nnf_gemm_side side, const nnf_gemm_src *src,
                         size_t mn, size_t k, nnf_gemm_packed **out);
/* B (weights) for C = A·B: K x N, stored (trans_b ? N x K : K x N) with row
 * stride ldb (in floats), at any address: a weight may be left in the model
 * file where it is not aligned for floats (nnf_value.misaligned). */
nnf_status nnf_gemm_pack_b(const nnf_gemm_cfg *cfg, size_t k, size_t n, const void *b, size_t ldb,
                           int trans_b, nnf_gemm_packed **out);
/* A (conv weights) for C = A·B: M x K, stored (trans_a ? K x M : M x K). */
nnf_status nnf_gemm_pack_a(const nnf_gemm_cfg *cfg, size_t m, size_t k, const float *a, size_t lda,
                           int trans_a, nnf_gemm_packed **out);
void nnf_gemm_packed_destroy(nnf_gemm_packed *p);
/* Destroys p[0 .. n) (NULL entries skipped) and frees the array p. */
void nnf_gemm_packed_destroy_all(nnf_gemm_packed **p, size_t n);
/* Packs src's rows (side A) / columns (side B) [0, mnc) as p's [mn0, mn0 +
 * mnc), every K block: a producer that fills an operand made by
 * nnf_gemm_packed_create_n a slice at a time (mn0 a multiple of p->r). */
void nnf_gemm_pack_slice(const nnf_gemm_cfg *cfg, nnf_gemm_packed *p, size_t mn0, size_t mnc,
                         const nnf_gemm_src *src);
/* An operand in the packed layout with its data unwritten, for a producer
 * that writes the packed layout itself (nnf_gemm_packed_at): the Winograd
 * weight transform, which would otherwise fill a row-major copy of 36
 * matrices only for them to be packed. */
nnf_status nnf_gemm_packed_create(const nnf_gemm_cfg *cfg, nnf_gemm_side side, size_t mn, size_t k,
                                  nnf_gemm_packed **out);
/* n such operands of one shape in one block, out[0..n-1]: a load maps and
 * faults one range for the Winograd transform's 36 matrices, not 36 (each
 * a call to the kernel, and at 2 threads a TLB shootdown to move the page
 * bank's pages in). out[0] holds the block, the others point into it:
 * destroy them in any order, and use none once out[0] is gone. */
nnf_status nnf_gemm_packed_create_n(const nnf_gemm_cfg *cfg, nnf_gemm_side side, size_t mn,
                                    size_t k, size_t n, nnf_gemm_packed **out);
/* An operand's layout over memory the caller holds (data: at least
 * nnf_gemm_packed_floats floats, 64-byte aligned; 0 when the size
 * overflows): a product's operand packed at run time into scratch (the
 * attention's K and V, plan/plan_attention.c) with nnf_gemm_pack_slice.
 * Nothing to destroy. */
size_t nnf_gemm_packed_floats(const nnf_gemm_cfg *cfg, nnf_gemm_side side, size_t mn, size_t k);
void nnf_gemm_packed_view(const nnf_gemm_cfg *cfg, nnf_gemm_side side, size_t mn, size_t k,
                          float *data, nnf_gemm_packed *p);
/* Zero every element of row/column mn >= mn_valid or depth >= k_valid (the
 * padding a producer does not write). */
void nnf_gemm_packed_zero_outside(nnf_gemm_packed *p, size_t mn_valid, size_t k_valid);
/* Where element (mn, kk) lives: row mn of A or column mn of B, depth kk.
 * The r elements of a panel at one depth are contiguous, from mn - mn % r. */
static inline float *nnf_gemm_packed_at(const nnf_gemm_packed *p, size_t mn, size_t kk) {
    size_t pc = kk / p->kc * p->kc, kcb = p->k - pc < p->kc ? p->k - pc : p->kc;
    return p->data + pc * p->mn_pad + (mn - mn % p->r) * kcb + (kk - pc) * p->r + mn % p->r;
}
/* Bytes held by a packed operand (for plan reports). */
size_t nnf_gemm_packed_bytes(const nnf_gemm_packed *p);

/* C = epilogue(A·B). ep may be NULL (plain product). Packed operands must have
 * been packed with this cfg. Scratch for on-the-fly packing is cached per
 * calling thread (see nnf_gemm_scratch_release). */
nnf_status nnf_gemm_run(const nnf_gemm_cfg *cfg, size_t m, size_t n, size_t k,
                        const nnf_gemm_src *a, const nnf_gemm_src *b, float *c, size_t ldc,
                        const nnf_epilogue *ep, nnf_threadpool *pool);

/* One GEMM of a batch: fill its operands, its output (row stride ldc as
 * given to nnf_gemm_run_batch) and, when the epilogue has a residual, the
 * residual's origin (same row stride as the epilogue's). Called from worker
 * threads, concurrently. */
typedef void (*nnf_gemm_batch_fn)(const void *ctx, size_t index, nnf_gemm_src *a, nnf_gemm_src *b,
                                  float **c, const float **residual);

/* count GEMMs of one shape (batched MatMul, attention heads). With enough of
 * them each runs whole on one thread (operands packed once, no hand-off per
 * tile); otherwise one after another, each split over the pool. Results are
 * those of nnf_gemm_run for each, whatever the thread count. The epilogue's
 * residual pointer is ignored: at() supplies one per GEMM. */
nnf_status nnf_gemm_run_batch(const nnf_gemm_cfg *cfg, size_t count, size_t m, size_t n, size_t k,
                              nnf_gemm_batch_fn at, const void *ctx, size_t ldc,
                              const nnf_epilogue *ep, nnf_threadpool *pool);

/* Convenience: plain strided operands, the tier in force. */
nnf_status nnf_sgemm(int trans_a, int trans_b, size_t m, size_t n, size_t k, const float *a,
                     size_t lda, const float *b, size_t ldb, float *c, size_t ldc,
                     const nnf_epilogue *ep, nnf_threadpool *pool);

/* The AVX-512 tier's GEMM on AMX tiles (nnf_cpu.amx; x86/gemm_amx_avx512.c):
 * f32 operands split exactly into three bf16 parts, six of their nine
 * products (bf16x6), an f32-level error. nnf_gemm_run takes it for A a
 * row-major matrix, B packed or row-major, N and K at least 16, values it
 * can split (finite, 2^-100 <= |x| < 2^127, or 0) and M at least
 * NNF_GEMM_AMX_MIN_M: B is split on every call (~1.3 cycles an element),
 * which the tiles' speed (M x 6 ps against the FMA tiles' M x 12 ps an
 * element of B) pays back from M ~ 70 (bench_kernels: BERT's 16 x 768 x
 * 3072 0.95 against 0.51 ms, its 128-row products 1.3x faster; BERT-base
 * 12 % faster on 1 thread, 8 % on 2), and at least NNF_GEMM_AMX_MIN_WORK
 * multiply-adds: on 2 threads each task splits its own share of A and B
 * again, and GEMM 256^3 ran 0.86x ORT's speed there (1.33x on 1 thread);
 * the rule reads only the shape, so no value depends on the thread count.
 * ti x tj tiles over the pool as nnf_gemm_run cuts them. */
#define NNF_GEMM_AMX_MIN_M 96
#define NNF_GEMM_AMX_MIN_WORK ((size_t)1 << 25)
/* The sizes alone (plans name their kernel by it); fits adds the sources. */
bool nnf_gemm_amx_shape(size_t m, size_t n, size_t k);
bool nnf_gemm_amx_fits(size_t m, size_t n, size_t k, const nnf_gemm_src *a, const nnf_gemm_src *b);
bool nnf_gemm_amx_values(size_t m, size_t n, size_t k, const nnf_gemm_src *a,
                         const nnf_gemm_src *b);
/* Tests: the work threshold for the calls that follow (0: any); returns the
 * previous one. */
size_t nnf_gemm_amx_force_min_work(size_t work);
nnf_status nnf_gemm_amx_run(size_t m, size_t n, size_t k, size_t kc, const nnf_gemm_src *a,
                            const nnf_gemm_src *b, float *c, size_t ldc, const nnf_epilogue *ep,
                            size_t ti, size_t tj, nnf_threadpool *pool);

/* Frees the calling thread's packing scratch (it is otherwise kept to make
 * the next call allocation-free). */
void nnf_gemm_scratch_release(void);

/* Microkernels, one per tier (defined in the tier's file). */
void nnf_gemm_ukernel_4x8_scalar(size_t kc, const float *a, const float *b, float *c, size_t ldc,
                                 size_t m, size_t n, const nnf_tile_ep *t);
void nnf_gemm_ukernel_6x16_avx2(size_t kc, const float *a, const float *b, float *c, size_t ldc,
                                size_t m, size_t n, const nnf_tile_ep *t);
void nnf_gemm_ukernel_direct_6x16_avx2(size_t kc, const float *a, size_t lda, const float *b,
                                       float *c, size_t ldc, size_t n, const nnf_tile_ep *t);
void nnf_gemm_pack_a6_avx2(const float *base, size_t ld, size_t mn0, size_t mnc, size_t k0,
                           size_t kc, float *dst);
void nnf_gemm_pack_a14_avx512(const float *base, size_t ld, size_t mn0, size_t mnc, size_t k0,
                              size_t kc, float *dst);
void nnf_gemm_pack_b16_avx2(const float *base, size_t ld, size_t mn0, size_t mnc, size_t k0,
                            size_t kc, float *dst);
void nnf_gemm_pack_b32_avx512(const float *base, size_t ld, size_t mn0, size_t mnc, size_t k0,
                              size_t kc, float *dst);
void nnf_gemv_block_16_avx2(size_t kcb, const float *a, size_t a_stride, const float *b,
                            size_t np, float *st);
void nnf_gemv_block_32_avx512(size_t kcb, const float *a, size_t a_stride, const float *b,
                              size_t np, float *st);
void nnf_gemm_ukernel_14x32_avx512(size_t kc, const float *a, const float *b, float *c, size_t ldc,
                                   size_t m, size_t n, const nnf_tile_ep *t);
void nnf_gemm_ukernel_direct_14x32_avx512(size_t kc, const float *a, size_t lda, const float *b,
                                          float *c, size_t ldc, size_t n, const nnf_tile_ep *t);

#endif

/* Optimised memory-bound kernels, float32: element-wise unary and binary
 * (with the common broadcast patterns), softmax, layer/batch normalisation,
 * pooling, reductions, transposes. One table of row kernels per ISA tier;
 * the drivers here split a tensor into large contiguous chunks for the
 * thread pool and call the tier's row kernels on them. The plans in
 * src/plan/plan_{eltwise,norm,pool}.c pick a tier once (nnf_cpu_isa() at plan
 * time) and keep its table.
 *
 * Accuracy against the reference kernels (tests/c/test_eltwise_fast.c and
 * test_norm_pool_fast.c assert these):
 *   scalar tier   the reference formulas (activation.h) in float: exact for
 *                 the unary/binary ops, sums in double per block
 *   AVX2/AVX-512  exp/sigmoid/tanh/erf from x86/vmath_avx2.h (bounds there);
 *                 Exp itself keeps the full float range (overflow to +inf,
 *                 gradual underflow) by squaring exp(x/2) outside [-87, 88];
 *                 every other op is exact (the same IEEE operations as the
 *                 reference, in the same order for the pools).
 * NaN propagates wherever the reference lets it: max/min/clip/relu keep the
 * reference's operand order so a NaN input gives a NaN output. */
#ifndef NNF_KERNELS_ELTWISE_FAST_H
#define NNF_KERNELS_ELTWISE_FAST_H

#include "base/cpu.h"
#include "base/threadpool.h"
#include "ops/op.h"
#include "ops/reduce.h"

#include <math.h>
#include <stddef.h>

/* What a row sum adds up (the kernel table's sum): x, |x| or x * x. */
typedef enum nnf_ew_sum_of { NNF_SUM_X = 0, NNF_SUM_ABS, NNF_SUM_SQUARE } nnf_ew_sum_of;

typedef enum nnf_ew_unop {
    NNF_EWU_RELU = 0,
    NNF_EWU_LEAKY_RELU, /* alpha = slope */
    NNF_EWU_CLIP,       /* alpha = lo, beta = hi (lo > hi gives hi everywhere) */
    NNF_EWU_SIGMOID,
    NNF_EWU_TANH,
    NNF_EWU_EXP,
    NNF_EWU_ERF,
    NNF_EWU_GELU_ERF,
    NNF_EWU_GELU_TANH,
    NNF_EWU_HARD_SIGMOID, /* alpha, beta */
    NNF_EWU_HARD_SWISH,
    NNF_EWU_SQRT,
    NNF_EWU_NEG,
    NNF_EWU_ABS,
    NNF_EWU_RECIPROCAL,
    NNF_EWU_FLOOR,
    NNF_EWU_CEIL,
    NNF_EWU_ROUND, /* half to even */
    NNF_EWU_SOFTSIGN,
    NNF_EWU_SQUARE,   /* Pow(x, 2) */
    NNF_EWU_POW_HALF, /* Pow(x, 0.5): sqrt, but powf's +0 for -0 and +inf for -inf */
    NNF_EWU_POW_INT,  /* Pow(x, alpha), alpha an integer of NNF_EW_POW_INT_MAX or less in size */
    NNF_EWU_COUNT
} nnf_ew_unop;

/* The largest |exponent| of NNF_EWU_POW_INT: the SIMD tiers multiply in
 * double (at most 8 products), rounded to float once: within an ulp of
 * powf. */
#define NNF_EW_POW_INT_MAX 16

typedef struct nnf_ew_unary {
    nnf_ew_unop op;
    float alpha, beta;
} nnf_ew_unary;

typedef enum nnf_ew_binop {
    NNF_EWB_ADD = 0,
    NNF_EWB_SUB,
    NNF_EWB_MUL,
    NNF_EWB_DIV,
    NNF_EWB_MAX, /* NaN from either side wins (numpy.maximum) */
    NNF_EWB_MIN,
    NNF_EWB_PRELU, /* a < 0 ? b * a : a */
    NNF_EWB_COUNT
} nnf_ew_binop;

/* Which operand of a binary row kernel is a single value. */
typedef enum nnf_ew_mode {
    NNF_EW_VV = 0, /* a[i] op b[i] */
    NNF_EW_VS,     /* a[i] op b[0] */
    NNF_EW_SV,     /* a[0] op b[i] */
} nnf_ew_mode;

/* One span of output columns of a 2-D or 3-D pool whose windows lie
 * inside the input along W: y[o] for o in [0, n) reduces the taps
 * x[kd * plane_step + kh * row_step + o * stride + kw * dw], kd in [0, nd),
 * kh in [0, nh), kw in [0, kw), visited kd-major, then kh, like the
 * reference kernel (so sums match it bit for bit). A 2-D pool has nd 1. */
typedef struct nnf_pool_span {
    int is_max;
    size_t nd, plane_step;
    size_t nh, row_step;
    size_t kw, dw, stride;
    float divisor; /* AveragePool: y = sum / divisor; 0 gives 0 */
} nnf_pool_span;

/* One tap of a pool window as the reference takes it: MaxPool keeps the
 * first tap, then one strictly greater (a NaN first tap stays, later NaNs
 * are passed over); AveragePool adds. */
static inline float nnf_pool_tap(int is_max, float acc, float v, int *first) {
    if (!is_max)
        return acc + v;
    if (v > acc || *first)
        acc = v;
    *first = 0;
    return acc;
}

/* The row kernels of one tier. Pointers are borrowed for the call; y may
 * alias x (same position) in unary, binary and affine. */
typedef struct nnf_ew_kernels {
    nnf_isa isa;
    const char *suffix; /* "scalar", "avx2", "avx512": the end of a plan's name */
    void (*unary)(const nnf_ew_unary *u, const float *x, float *y, size_t n);
    void (*binary)(nnf_ew_binop op, nnf_ew_mode mode, const float *a, const float *b, float *y,
                   size_t n);
    /* y = x * a + b */
    void (*affine)(const float *x, float *y, size_t n, float a, float b);
    /* rows of n > 0 values, one after another; log selects LogSoftmax */
    void (*softmax)(const float *x, float *y, size_t rows, size_t n, int log);
    /* the same along an inner axis: `cols` positions side by side, value k
     * of position j at x[k * ld + j] (and y[k * ld + j]) */
    void (*softmax_cols)(const float *x, float *y, size_t n, size_t ld, size_t cols, int log);
    /* one row of n > 0 values: y = (x - mean) / sqrt(var + eps) * scale + bias
     * (bias may be NULL); mean/inv_std receive the statistics when non-NULL */
    void (*layernorm)(const float *x, float *y, size_t n, const float *scale, const float *bias,
                      float eps, float *mean, float *inv_std);
    /* one group of segs x len > 0 values (Instance/GroupNormalization: a
     * group's channels, each len pixels), normalised together: segment k is
     * y = (x - mean) / sqrt(var + eps) * scale[k step] + bias[k step]
     * (step 1: per channel, 0: one pair for the group) */
    void (*groupnorm)(const float *x, float *y, size_t segs, size_t len, const float *scale,
                      const float *bias, size_t step, float eps);
    /* sum of x, |x| or x * x in float blocks of 256 carried in double (the
     * |x| and x * x sums go through nnf_ew_row_sum, which guards their range) */
    double (*sum)(const float *x, size_t n, nnf_ew_sum_of of);
    /* ReduceSum / Mean / Max / Min / L1 / L2 / SumSquare / LogSum (kind:
     * nnf_reduce_kind) along an inner axis: `cols` positions side by side,
     * value k of position j at x[k * ld + j], into y[j]; sums in double, the
     * first NaN wins Max/Min */
    void (*reduce_cols)(const float *x, size_t n, size_t ld, size_t cols, int kind, float *y);
    /* max of n > 0 values; nan_wins = 0 skips NaNs (GlobalMaxPool), 1 returns
     * NaN when any is NaN (ReduceMax) */
    float (*max)(const float *x, size_t n, int nan_wins);
    float (*min)(const float *x, size_t n); /* NaN wins */
    void (*pool_span)(const nnf_pool_span *s, const float *x, float *y, size_t n);
    /* y[c * ldy + r] = x[r * ldx + c] for a rows x cols block, 4-byte elements */
    void (*transpose)(const float *x, size_t ldx, float *y, size_t ldy, size_t rows, size_t cols);
    /* float32 <-> float16 (IEEE binary16 bits), rounding to nearest even,
     * NaN payloads kept (nnf_f32_to_f16 / nnf_f16_to_f32's bits); the AVX2
     * ones need F16C (nnf_cpu.f16c) */
    void (*to_f16)(const float *x, uint16_t *y, size_t n);
    void (*from_f16)(const uint16_t *x, float *y, size_t n);
    /* ArgMax (is_max) / ArgMin of n > 0 values, with the reference's rules:
     * a value wins by comparing strictly better than the best so far (NaN
     * never does; a NaN at index 0 keeps index 0), or equal with last
     * (select_last_index). arg_row: one contiguous row. arg_cols: `cols`
     * positions side by side, value k of position j at x[k * ld + j]. */
    int64_t (*arg_row)(const float *x, size_t n, int is_max, int last);
    void (*arg_cols)(const float *x, size_t n, size_t ld, size_t cols, int is_max, int last,
                     int64_t *y);
    /* Where on 4-byte elements: y[i] = c[i * cs] ? a[i * as] : b[i * bs], the
     * bits copied; strides 0 or 1 (a broadcast run's), any nonzero byte true */
    void (*select32)(const uint8_t *c, size_t cs, const uint32_t *a, size_t as, const uint32_t *b,
                     size_t bs, uint32_t *y, size_t n);
} nnf_ew_kernels;

/* The table of a tier (clamped to what the machine has). */
const nnf_ew_kernels *nnf_ew_kernels_for(nnf_isa isa);

/* k->sum(x, n, of), with the |x| and x * x sums that float blocks may have
 * spoiled (overflowed past 1e37, or below 1e-30 where squares lose their
 * digits to underflow) summed again in double, as the reference sums them. */
double nnf_ew_row_sum(const nnf_ew_kernels *k, const float *x, size_t n, nnf_ew_sum_of of);

/* The sum-like reductions (Sum, Mean, L1, L2, SumSquare, LogSum): what they
 * add up, and their result from that sum of n values, as the reference
 * finishes it (in double, rounded once). */
static inline int nnf_reduce_is_sum(int kind) {
    return kind != NNF_REDUCE_MAX && kind != NNF_REDUCE_MIN && kind != NNF_REDUCE_PROD &&
           kind != NNF_REDUCE_LOG_SUM_EXP;
}

static inline nnf_ew_sum_of nnf_reduce_sum_of(int kind) {
    return kind == NNF_REDUCE_L1                                    ? NNF_SUM_ABS
           : kind == NNF_REDUCE_L2 || kind == NNF_REDUCE_SUM_SQUARE ? NNF_SUM_SQUARE
                                                                    : NNF_SUM_X;
}

static inline float nnf_reduce_finish(int kind, double s, size_t n) {
    switch (kind) {
    case NNF_REDUCE_MEAN: return (float)(s / (double)n);
    case NNF_REDUCE_L2: return (float)sqrt(s);
    case NNF_REDUCE_LOG_SUM: return (float)log(s);
    default: return (float)s;
    }
}

/* The tier kernels (scalar ones in eltwise_fast.c). */
void nnf_ew_unary_avx2(const nnf_ew_unary *u, const float *x, float *y, size_t n);
void nnf_ew_binary_avx2(nnf_ew_binop op, nnf_ew_mode mode, const float *a, const float *b, float *y,
                        size_t n);
void nnf_ew_affine_avx2(const float *x, float *y, size_t n, float a, float b);
void nnf_ew_softmax_avx2(const float *x, float *y, size_t rows, size_t n, int log);
void nnf_ew_softmax_cols_avx2(const float *x, float *y, size_t n, size_t ld, size_t cols, int log);
void nnf_ew_softmax_line_scalar(const float *x, float *y, size_t n, size_t ld, int log);
void nnf_ew_reduce_cols_avx2(const float *x, size_t n, size_t ld, size_t cols, int kind, float *y);
float nnf_ew_reduce_line_scalar(const float *x, size_t n, size_t ld, int kind);
int64_t nnf_ew_arg_line_scalar(const float *x, size_t n, size_t ld, int is_max, int last);
void nnf_ew_groupnorm_avx2(const float *x, float *y, size_t segs, size_t len, const float *scale,
                           const float *bias, size_t step, float eps);
void nnf_ew_layernorm_avx2(const float *x, float *y, size_t n, const float *scale,
                           const float *bias, float eps, float *mean, float *inv_std);
double nnf_ew_sum_avx2(const float *x, size_t n, nnf_ew_sum_of of);
float nnf_ew_max_avx2(const float *x, size_t n, int nan_wins);
float nnf_ew_min_avx2(const float *x, size_t n);
/* The portable span (also the AVX2 span's fallback for strides other than 1 and 2). */
void nnf_pool_span_scalar(const nnf_pool_span *s, const float *x, float *y, size_t n);
void nnf_pool_span_avx2(const nnf_pool_span *s, const float *x, float *y, size_t n);
void nnf_transpose_avx2(const float *x, size_t ldx, float *y, size_t ldy, size_t rows, size_t cols);
int64_t nnf_ew_arg_row_avx2(const float *x, size_t n, int is_max, int last);
void nnf_ew_arg_cols_avx2(const float *x, size_t n, size_t ld, size_t cols, int is_max, int last,
                          int64_t *y);
void nnf_ew_select32_avx2(const uint8_t *c, size_t cs, const uint32_t *a, size_t as,
                          const uint32_t *b, size_t bs, uint32_t *y, size_t n);
/* the portable select32 (the AVX2 one's tail too) */
void nnf_ew_select32_scalar(const uint8_t *c, size_t cs, const uint32_t *a, size_t as,
                            const uint32_t *b, size_t bs, uint32_t *y, size_t n);
void nnf_ew_to_f16_avx2(const float *x, uint16_t *y, size_t n);
void nnf_ew_from_f16_avx2(const uint16_t *x, float *y, size_t n);

/* Separable MaxPool (dilation 1, W stride sw of 1 or 2): a row pass then a
 * column pass. Both may read (and rowmax write) up to the next multiple of
 * 8 past n outputs.
 * rowmax: rm[o] = max of xp[o * sw + k], k < kw, NaN skipped, ties keep the
 * first; xp is an input row padded with -inf on both sides, readable for
 * NNF_POOL_SEP_ROW floats.
 * colmax: y[o] = max of rows[0..nrows)[o] (NaN-free row maxima, ties keep
 * the first row), or window o's first tap where that is NaN: in the input
 * row of the window's first row, row[min(max(o * sw - lead, 0), w - 1)].
 * Together they give the reference's result bit for bit: it starts from the
 * first tap (kh-major) and takes a later tap only when strictly greater. */
#define NNF_POOL_SEP_ROW 1024
void nnf_pool_rowmax_avx2(const float *xp, size_t n, size_t kw, size_t sw, float *rm);
void nnf_pool_colmax_avx2(const float *const *rows, size_t nrows, const float *row, size_t lead,
                          size_t sw, size_t w, float *y, size_t n);

void nnf_ew_unary_avx512(const nnf_ew_unary *u, const float *x, float *y, size_t n);
void nnf_ew_binary_avx512(nnf_ew_binop op, nnf_ew_mode mode, const float *a, const float *b,
                          float *y, size_t n);
void nnf_ew_affine_avx512(const float *x, float *y, size_t n, float a, float b);
void nnf_ew_softmax_avx512(const float *x, float *y, size_t rows, size_t n, int log);
double nnf_ew_sum_avx512(const float *x, size_t n, nnf_ew_sum_of of);

/* ---- broadcast patterns of a binary op ------------------------------------ */

typedef enum nnf_ew_bcast_kind {
    NNF_EWBC_NONE = 0, /* no fast path: keep the reference kernel */
    NNF_EWBC_SAME,     /* both operands have the output's numel */
    NNF_EWBC_SCALAR,   /* the small operand is one value */
    NNF_EWBC_PER_ROW,  /* output [outer, c, inner]; small operand [c] broadcast along inner
                          (NCHW bias [C,1,1]; outer = 1 is a column broadcast) */
    NNF_EWBC_ROW,      /* output [rows, inner]; small operand [inner] repeated per row */
} nnf_ew_bcast_kind;

typedef struct nnf_ew_bcast {
    nnf_ew_bcast_kind kind;
    int small_is_a; /* the broadcast operand is A (else B); 0 for SAME */
    size_t c;       /* PER_ROW: values of the small operand */
    size_t inner;   /* run length over which the pattern repeats (numel for SAME/SCALAR) */
    size_t numel;   /* output elements */
} nnf_ew_bcast;

/* Classify a (numpy-broadcast) binary op over known shapes. Pure. */
nnf_ew_bcast nnf_ew_bcast_classify(const nnf_shape *a, const nnf_shape *b, const nnf_shape *out);
const char *nnf_ew_bcast_name(nnf_ew_bcast_kind kind);

/* ---- drivers: split over the pool in large contiguous chunks --------------- */

void nnf_ew_unary_run(const nnf_ew_kernels *k, const nnf_ew_unary *u, const float *x, float *y,
                      size_t n, nnf_threadpool *pool);
void nnf_ew_binary_run(const nnf_ew_kernels *k, nnf_ew_binop op, const nnf_ew_bcast *bc,
                       const float *a, const float *b, float *y, nnf_threadpool *pool);
/* y = x * a[(row) % c] + b[(row) % c] over rows of `inner` (BatchNormalization). */
void nnf_ew_affine_run(const nnf_ew_kernels *k, const float *x, float *y, size_t numel,
                       size_t inner, size_t c, const float *a, const float *b,
                       nnf_threadpool *pool);
/* fn(ctx, first, count) over [0, n) in blocks of at least `grain` items,
 * about four blocks per thread; inline when one block suffices. */
typedef void (*nnf_ew_range_fn)(void *ctx, size_t first, size_t count);
void nnf_ew_parallel_ranges(nnf_threadpool *pool, size_t n, size_t grain, nnf_ew_range_fn fn,
                            void *ctx);

/* ---- plans (operator-table entries; see src/plan/plan_*.c) ----------------- */

nnf_status nnf_plan_unary(NNF_PLAN_ARGS);
nnf_status nnf_plan_clip(NNF_PLAN_ARGS);
nnf_status nnf_plan_binary(NNF_PLAN_ARGS);
nnf_status nnf_plan_where(NNF_PLAN_ARGS);
nnf_status nnf_plan_softmax(NNF_PLAN_ARGS);
nnf_status nnf_plan_reduce(NNF_PLAN_ARGS);
nnf_status nnf_plan_transpose(NNF_PLAN_ARGS);
nnf_status nnf_plan_cast(NNF_PLAN_ARGS);
nnf_status nnf_plan_split(NNF_PLAN_ARGS);
nnf_status nnf_plan_argminmax(NNF_PLAN_ARGS);
nnf_status nnf_plan_concat(NNF_PLAN_ARGS);
nnf_status nnf_plan_slice(NNF_PLAN_ARGS);
nnf_status nnf_plan_slice_assign(NNF_PLAN_ARGS);
nnf_status nnf_plan_layernorm(NNF_PLAN_ARGS);
nnf_status nnf_plan_lpnorm(NNF_PLAN_ARGS);
nnf_status nnf_plan_instancenorm(NNF_PLAN_ARGS);
nnf_status nnf_plan_groupnorm(NNF_PLAN_ARGS);
nnf_status nnf_plan_batchnorm(NNF_PLAN_ARGS);
nnf_status nnf_plan_maxpool(NNF_PLAN_ARGS);
nnf_status nnf_plan_avgpool(NNF_PLAN_ARGS);
nnf_status nnf_plan_global_pool(NNF_PLAN_ARGS);

/* Reduced form of a Transpose: size-1 axes dropped, axes that stay adjacent
 * merged. dims are the input's merged extents, perm the merged permutation. */
typedef struct nnf_perm_reduced {
    int rank;
    int64_t dims[NNF_MAX_RANK];
    int perm[NNF_MAX_RANK];
} nnf_perm_reduced;
void nnf_perm_reduce(int rank, const int64_t *dims, const int *perm, nnf_perm_reduced *out);

#endif

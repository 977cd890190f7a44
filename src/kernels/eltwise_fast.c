/* The portable tier of the memory-bound kernels, the tier tables, and the
 * drivers that split work over the thread pool. The scalar row kernels use
 * the reference formulas (activation.h) so the scalar tier is exact for the
 * element-wise ops; -O2 vectorises the simple loops for SSE2. */
#include "kernels/eltwise_fast.h"
#include "kernels/stream.h"

#include "kernels/ref/activation.h"
#include "ops/reduce.h"
#include "ops/tensor_common.h"

#include <math.h>
#include <string.h>

/* ---- scalar row kernels ----------------------------------------------------- */

static inline float pow_half(float x) {
    return powf(x, 0.5f);
}

#define MAP1(EXPR)                                                                                 \
    for (size_t i = 0; i < n; i++) {                                                               \
        float v = x[i];                                                                            \
        y[i] = (EXPR);                                                                             \
    }                                                                                              \
    break

static void unary_scalar(const nnf_ew_unary *u, const float *x, float *y, size_t n) {
    const float a = u->alpha, b = u->beta;
    switch (u->op) {
    case NNF_EWU_RELU: MAP1(nnf_f32_relu(v));
    case NNF_EWU_LEAKY_RELU: MAP1(nnf_f32_leaky_relu(v, a));
    case NNF_EWU_CLIP: MAP1(nnf_f32_clip(v, a, b));
    case NNF_EWU_SIGMOID: MAP1(nnf_f32_sigmoid(v));
    case NNF_EWU_TANH: MAP1(tanhf(v));
    case NNF_EWU_EXP: MAP1(expf(v));
    case NNF_EWU_ERF: MAP1(erff(v));
    case NNF_EWU_GELU_ERF: MAP1(nnf_f32_gelu_erf(v));
    case NNF_EWU_GELU_TANH: MAP1(nnf_f32_gelu_tanh(v));
    case NNF_EWU_HARD_SIGMOID: MAP1(nnf_f32_hard_sigmoid(v, a, b));
    case NNF_EWU_HARD_SWISH: MAP1(nnf_f32_hard_swish(v));
    case NNF_EWU_SQRT: MAP1(sqrtf(v));
    case NNF_EWU_NEG: MAP1(-v);
    case NNF_EWU_ABS: MAP1(fabsf(v));
    case NNF_EWU_RECIPROCAL: MAP1(1.0f / v);
    case NNF_EWU_FLOOR: MAP1(floorf(v));
    case NNF_EWU_CEIL: MAP1(ceilf(v));
    case NNF_EWU_ROUND: MAP1(rintf(v));
    case NNF_EWU_SOFTSIGN: MAP1(nnf_f32_softsign(v));
    case NNF_EWU_SQUARE: MAP1(v * v);
    case NNF_EWU_POW_HALF: MAP1(pow_half(v));
    case NNF_EWU_POW_INT: MAP1(powf(v, a));
    case NNF_EWU_COUNT: break;
    }
}

static inline float f_max(float x, float y) {
    return (x > y || x != x) ? x : y;
}
static inline float f_min(float x, float y) {
    return (x < y || x != x) ? x : y;
}

#define MAP2(EXPR)                                                                                 \
    if (mode == NNF_EW_VV) {                                                                       \
        for (size_t i = 0; i < n; i++) {                                                           \
            float p = a[i], q = b[i];                                                              \
            y[i] = (EXPR);                                                                         \
        }                                                                                          \
    } else if (mode == NNF_EW_VS) {                                                                \
        const float q = b[0];                                                                      \
        for (size_t i = 0; i < n; i++) {                                                           \
            float p = a[i];                                                                        \
            y[i] = (EXPR);                                                                         \
        }                                                                                          \
    } else {                                                                                       \
        const float p = a[0];                                                                      \
        for (size_t i = 0; i < n; i++) {                                                           \
            float q = b[i];                                                                        \
            y[i] = (EXPR);                                                                         \
        }                                                                                          \
    }                                                                                              \
    break

static void binary_scalar(nnf_ew_binop op, nnf_ew_mode mode, const float *a, const float *b,
                          float *y, size_t n) {
    switch (op) {
    case NNF_EWB_ADD: MAP2(p + q);
    case NNF_EWB_SUB: MAP2(p - q);
    case NNF_EWB_MUL: MAP2(p * q);
    case NNF_EWB_DIV: MAP2(p / q);
    case NNF_EWB_MAX: MAP2(f_max(p, q));
    case NNF_EWB_MIN: MAP2(f_min(p, q));
    case NNF_EWB_PRELU: MAP2(p < 0.0f ? q * p : p);
    case NNF_EWB_COUNT: break;
    }
}

static void affine_scalar(const float *x, float *y, size_t n, float a, float b) {
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] * a + b;
}

static void softmax_row_scalar(const float *x, float *y, size_t n, int log) {
    float m = -INFINITY;
    for (size_t i = 0; i < n; i++)
        m = x[i] > m ? x[i] : m;
    double s = 0.0;
    if (log) {
        for (size_t i = 0; i < n; i++)
            s += expf(x[i] - m);
        float lse = (float)logf((float)s);
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] - m - lse;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        y[i] = expf(x[i] - m);
        s += y[i];
    }
    float inv = (float)(1.0 / s);
    for (size_t i = 0; i < n; i++)
        y[i] *= inv;
}

static void softmax_scalar(const float *x, float *y, size_t rows, size_t n, int log) {
    for (size_t r = 0; r < rows; r++)
        softmax_row_scalar(x + r * n, y + r * n, n, log);
}

/* softmax_row_scalar's formulas on a line ld apart (exported for the vector
 * tiers' tail positions) */
void nnf_ew_softmax_line_scalar(const float *x, float *y, size_t n, size_t ld, int log) {
    float m = -INFINITY;
    for (size_t i = 0; i < n; i++)
        m = x[i * ld] > m ? x[i * ld] : m;
    double s = 0.0;
    if (log) {
        for (size_t i = 0; i < n; i++)
            s += expf(x[i * ld] - m);
        float lse = (float)logf((float)s);
        for (size_t i = 0; i < n; i++)
            y[i * ld] = x[i * ld] - m - lse;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        y[i * ld] = expf(x[i * ld] - m);
        s += y[i * ld];
    }
    float inv = (float)(1.0 / s);
    for (size_t i = 0; i < n; i++)
        y[i * ld] *= inv;
}

static void softmax_cols_scalar(const float *x, float *y, size_t n, size_t ld, size_t cols,
                                int log) {
    for (size_t j = 0; j < cols; j++)
        nnf_ew_softmax_line_scalar(x + j, y + j, n, ld, log);
}

/* The reference's statistics (ref/norm.c): the mean and 1 / sqrt(var + eps)
 * in double, two passes. */
static double moments(const float *x, size_t n, float eps, double *inv) {
    double s = 0.0, v = 0.0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    double mean = s / (double)n;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - mean;
        v += d * d;
    }
    *inv = 1.0 / sqrt(v / (double)n + (double)eps);
    return mean;
}

/* The reference's formulas (double statistics), so this tier matches it. */
static void layernorm_scalar(const float *x, float *y, size_t n, const float *scale,
                             const float *bias, float eps, float *mean_out, float *inv_out) {
    double inv, mean = moments(x, n, eps, &inv);
    for (size_t i = 0; i < n; i++) {
        float t = (float)((x[i] - mean) * inv) * scale[i];
        y[i] = bias ? t + bias[i] : t;
    }
    if (mean_out)
        *mean_out = (float)mean;
    if (inv_out)
        *inv_out = (float)inv;
}

/* The reference's formulas (ref/norm.c: double statistics, y = x a + b in
 * double), so this tier matches it bit for bit. */
static void groupnorm_scalar(const float *x, float *y, size_t segs, size_t len, const float *scale,
                             const float *bias, size_t step, float eps) {
    double inv, mean = moments(x, segs * len, eps, &inv);
    for (size_t k = 0; k < segs; k++) {
        double a = scale[k * step] * inv, b = bias[k * step] - mean * a;
        for (size_t e = 0; e < len; e++)
            y[k * len + e] = (float)(x[k * len + e] * a + b);
    }
}

/* The reference's sums (in double) along a line ld apart; with ld 1 the
 * scalar tier's row sum and the float tiers' fallback. */
static double sum_line(const float *x, size_t n, size_t ld, nnf_ew_sum_of of) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        float v = x[i * ld];
        s += of == NNF_SUM_X ? v : of == NNF_SUM_ABS ? fabs(v) : (double)v * v;
    }
    return s;
}

static double sum_scalar(const float *x, size_t n, nnf_ew_sum_of of) {
    return sum_line(x, n, 1, of);
}

double nnf_ew_row_sum(const nnf_ew_kernels *k, const float *x, size_t n, nnf_ew_sum_of of) {
    double s = k->sum(x, n, of);
    if (of != NNF_SUM_X && k->sum != sum_scalar &&
        (s > 1e37 || (of == NNF_SUM_SQUARE && s < 1e-30)))
        return sum_scalar(x, n, of);
    return s;
}

static float max_scalar(const float *x, size_t n, int nan_wins) {
    float m = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (x[i] != x[i] && nan_wins)
            return x[i];
        m = x[i] > m ? x[i] : m;
    }
    return m;
}

static float min_scalar(const float *x, size_t n) {
    float m = INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (x[i] != x[i])
            return x[i];
        m = x[i] < m ? x[i] : m;
    }
    return m;
}

/* One position's reduction along a line ld apart (nnf_reduce_kind: the
 * sum-like kinds, max, min): the row kernels' rules (exported for the vector
 * tiers' tail positions). */
float nnf_ew_reduce_line_scalar(const float *x, size_t n, size_t ld, int kind) {
    if (nnf_reduce_is_sum(kind))
        return nnf_reduce_finish(kind, sum_line(x, n, ld, nnf_reduce_sum_of(kind)), n);
    float m = kind == NNF_REDUCE_MAX ? -INFINITY : INFINITY;
    for (size_t i = 0; i < n; i++) {
        float v = x[i * ld];
        if (v != v)
            return v;
        m = kind == NNF_REDUCE_MAX ? (v > m ? v : m) : (v < m ? v : m);
    }
    return m;
}

static void reduce_cols_scalar(const float *x, size_t n, size_t ld, size_t cols, int kind,
                               float *y) {
    for (size_t j = 0; j < cols; j++)
        y[j] = nnf_ew_reduce_line_scalar(x + j, n, ld, kind);
}

void nnf_pool_span_scalar(const nnf_pool_span *s, const float *x, float *y, size_t n) {
    for (size_t o = 0; o < n; o++) {
        const float *w = x + o * s->stride;
        float acc = s->is_max ? -INFINITY : 0.0f;
        int first = 1;
        for (size_t d = 0; d < s->nd; d++)
            for (size_t h = 0; h < s->nh; h++)
                for (size_t k = 0; k < s->kw; k++)
                    acc = nnf_pool_tap(s->is_max, acc,
                                       w[d * s->plane_step + h * s->row_step + k * s->dw], &first);
        if (!s->is_max)
            acc = s->divisor > 0.0f ? acc / s->divisor : 0.0f;
        y[o] = acc;
    }
}

static void transpose_scalar(const float *x, size_t ldx, float *y, size_t ldy, size_t rows,
                             size_t cols) {
    for (size_t r0 = 0; r0 < rows; r0 += 8)
        for (size_t c0 = 0; c0 < cols; c0 += 8) {
            size_t re = r0 + 8 < rows ? r0 + 8 : rows, ce = c0 + 8 < cols ? c0 + 8 : cols;
            for (size_t c = c0; c < ce; c++)
                for (size_t r = r0; r < re; r++)
                    y[c * ldy + r] = x[r * ldx + c];
        }
}

/* ---- tier tables ------------------------------------------------------------ */

static void to_f16_scalar(const float *x, uint16_t *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = nnf_f32_to_f16(x[i]);
}

static void from_f16_scalar(const uint16_t *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = nnf_f16_to_f32(x[i]);
}

/* The reference's loop (kernels/ref/reduce.c), on a strided line (exported
 * for the vector tiers' tail positions). */
int64_t nnf_ew_arg_line_scalar(const float *x, size_t n, size_t ld, int is_max, int last) {
    int64_t best = 0;
    for (size_t k = 1; k < n; k++) {
        float a = x[k * ld], b = x[(size_t)best * ld];
        int better = is_max ? (a > b) : (a < b);
        if (better || (last && a == b))
            best = (int64_t)k;
    }
    return best;
}

static int64_t arg_row_scalar(const float *x, size_t n, int is_max, int last) {
    return nnf_ew_arg_line_scalar(x, n, 1, is_max, last);
}

static void arg_cols_scalar(const float *x, size_t n, size_t ld, size_t cols, int is_max, int last,
                            int64_t *y) {
    for (size_t j = 0; j < cols; j++)
        y[j] = nnf_ew_arg_line_scalar(x + j, n, ld, is_max, last);
}

/* a mask, not a branch: random conditions mispredict every other element */
void nnf_ew_select32_scalar(const uint8_t *c, size_t cs, const uint32_t *a, size_t as,
                            const uint32_t *b, size_t bs, uint32_t *y, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t m = 0u - (uint32_t)(c[i * cs] != 0);
        y[i] = (a[i * as] & m) | (b[i * bs] & ~m);
    }
}

static const nnf_ew_kernels k_scalar = {
    .isa = NNF_ISA_SCALAR,
    .suffix = "scalar",
    .unary = unary_scalar,
    .binary = binary_scalar,
    .affine = affine_scalar,
    .softmax = softmax_scalar,
    .softmax_cols = softmax_cols_scalar,
    .layernorm = layernorm_scalar,
    .groupnorm = groupnorm_scalar,
    .sum = sum_scalar,
    .reduce_cols = reduce_cols_scalar,
    .max = max_scalar,
    .min = min_scalar,
    .pool_span = nnf_pool_span_scalar,
    .transpose = transpose_scalar,
    .to_f16 = to_f16_scalar,
    .from_f16 = from_f16_scalar,
    .arg_row = arg_row_scalar,
    .arg_cols = arg_cols_scalar,
    .select32 = nnf_ew_select32_scalar,
};

static const nnf_ew_kernels k_avx2 = {
    .isa = NNF_ISA_AVX2,
    .suffix = "avx2",
    .unary = nnf_ew_unary_avx2,
    .binary = nnf_ew_binary_avx2,
    .affine = nnf_ew_affine_avx2,
    .softmax = nnf_ew_softmax_avx2,
    .softmax_cols = nnf_ew_softmax_cols_avx2,
    .layernorm = nnf_ew_layernorm_avx2,
    .groupnorm = nnf_ew_groupnorm_avx2,
    .sum = nnf_ew_sum_avx2,
    .reduce_cols = nnf_ew_reduce_cols_avx2,
    .max = nnf_ew_max_avx2,
    .min = nnf_ew_min_avx2,
    .pool_span = nnf_pool_span_avx2,
    .transpose = nnf_transpose_avx2,
    .to_f16 = nnf_ew_to_f16_avx2,
    .from_f16 = nnf_ew_from_f16_avx2,
    .arg_row = nnf_ew_arg_row_avx2,
    .arg_cols = nnf_ew_arg_cols_avx2,
    .select32 = nnf_ew_select32_avx2,
};

/* AVX-512 rows where 16 lanes pay; the rest (short rows, pools, transposes)
 * keep their AVX2 kernels, which every AVX-512 machine runs. */
static const nnf_ew_kernels k_avx512 = {
    .isa = NNF_ISA_AVX512,
    .suffix = "avx512",
    .unary = nnf_ew_unary_avx512,
    .binary = nnf_ew_binary_avx512,
    .affine = nnf_ew_affine_avx512,
    .softmax = nnf_ew_softmax_avx512,
    .softmax_cols = nnf_ew_softmax_cols_avx2,
    .layernorm = nnf_ew_layernorm_avx2,
    .groupnorm = nnf_ew_groupnorm_avx2,
    .sum = nnf_ew_sum_avx512,
    .reduce_cols = nnf_ew_reduce_cols_avx2,
    .max = nnf_ew_max_avx2,
    .min = nnf_ew_min_avx2,
    .pool_span = nnf_pool_span_avx2,
    .transpose = nnf_transpose_avx2,
    .to_f16 = nnf_ew_to_f16_avx2,
    .from_f16 = nnf_ew_from_f16_avx2,
    .arg_row = nnf_ew_arg_row_avx2,
    .arg_cols = nnf_ew_arg_cols_avx2,
    .select32 = nnf_ew_select32_avx2,
};

const nnf_ew_kernels *nnf_ew_kernels_for(nnf_isa isa) {
    nnf_isa max = nnf_cpu_get()->max_isa;
    if (isa > max)
        isa = max;
    return isa == NNF_ISA_AVX512 ? &k_avx512 : isa == NNF_ISA_AVX2 ? &k_avx2 : &k_scalar;
}

/* ---- broadcast classification ----------------------------------------------- */

const char *nnf_ew_bcast_name(nnf_ew_bcast_kind kind) {
    switch (kind) {
    case NNF_EWBC_SAME: return "same";
    case NNF_EWBC_SCALAR: return "scalar";
    case NNF_EWBC_PER_ROW: return "bcast_channel";
    case NNF_EWBC_ROW: return "bcast_row";
    case NNF_EWBC_NONE: break;
    }
    return "none";
}

nnf_ew_bcast nnf_ew_bcast_classify(const nnf_shape *a, const nnf_shape *b, const nnf_shape *out) {
    nnf_ew_bcast r = {.kind = NNF_EWBC_NONE};
    const nnf_shape *op[2] = {a, b};
    int64_t st[2][NNF_MAX_RANK], tmp[2][NNF_MAX_RANK], dims[NNF_MAX_RANK], run[2] = {1, 1};
    int rank = 0;
    if (out->rank < 0 || out->rank > NNF_MAX_RANK || a->rank > out->rank || b->rank > out->rank ||
        a->rank < 0 || b->rank < 0)
        return r;
    int64_t numel = 1;
    for (int i = out->rank - 1; i >= 0; i--) {
        if (out->dims[i] < 0)
            return r;
        numel *= out->dims[i];
        for (int k = 0; k < 2; k++) {
            int ik = i - (out->rank - op[k]->rank);
            int64_t d = ik >= 0 ? op[k]->dims[ik] : 1;
            if (d != 1 && d != out->dims[i])
                return r;
            tmp[k][i] = d == 1 ? 0 : run[k];
            run[k] *= d;
        }
    }
    if (numel <= 0)
        return r;
    /* drop extent-1 dims, merge dims whose strides chain for both operands */
    for (int i = 0; i < out->rank; i++) {
        if (out->dims[i] == 1)
            continue;
        if (rank > 0 && st[0][rank - 1] == tmp[0][i] * out->dims[i] &&
            st[1][rank - 1] == tmp[1][i] * out->dims[i]) {
            dims[rank - 1] *= out->dims[i];
            st[0][rank - 1] = tmp[0][i];
            st[1][rank - 1] = tmp[1][i];
            continue;
        }
        dims[rank] = out->dims[i];
        st[0][rank] = tmp[0][i];
        st[1][rank] = tmp[1][i];
        rank++;
    }
    r.numel = (size_t)numel;
    r.inner = (size_t)numel;
    if (rank == 0 || (rank == 1 && st[0][0] == 1 && st[1][0] == 1)) {
        r.kind = NNF_EWBC_SAME;
        return r;
    }
    if (rank == 1) {
        r.kind = NNF_EWBC_SCALAR;
        r.small_is_a = st[0][0] == 0;
        r.c = 1;
        return r;
    }
    /* the full operand's strides must be dense row-major */
    int full = st[0][rank - 1] == 1 && (rank < 2 || st[0][rank - 2] == dims[rank - 1]) ? 0 : 1;
    int small = 1 - full;
    int64_t chk = 1;
    for (int i = rank - 1; i >= 0; i--) {
        if (st[full][i] != chk)
            return r;
        chk *= dims[i];
    }
    r.small_is_a = small == 0;
    const int64_t *s = st[small];
    if (rank == 2 && s[0] == 1 && s[1] == 0) {
        r.kind = NNF_EWBC_PER_ROW;
        r.c = (size_t)dims[0];
        r.inner = (size_t)dims[1];
    } else if (rank == 2 && s[0] == 0 && s[1] == 1) {
        r.kind = NNF_EWBC_ROW;
        r.inner = (size_t)dims[1];
    } else if (rank == 3 && s[0] == 0 && s[1] == 1 && s[2] == 0) {
        r.kind = NNF_EWBC_PER_ROW;
        r.c = (size_t)dims[1];
        r.inner = (size_t)dims[2];
    } else {
        return r;
    }
    /* rows shorter than this cost more in calls than the reference's loop */
    if (r.inner < 4)
        r.kind = NNF_EWBC_NONE;
    return r;
}

/* ---- drivers ------------------------------------------------------------------ */

typedef struct range_job {
    nnf_ew_range_fn fn;
    void *ctx;
    size_t n, block;
} range_job;

static void range_task(void *p, size_t i) {
    const range_job *j = p;
    size_t first = i * j->block;
    if (first >= j->n)
        return;
    size_t count = j->n - first < j->block ? j->n - first : j->block;
    j->fn(j->ctx, first, count);
}

void nnf_ew_parallel_ranges(nnf_threadpool *pool, size_t n, size_t grain, nnf_ew_range_fn fn,
                            void *ctx) {
    if (n == 0)
        return;
    size_t threads = (size_t)nnf_threadpool_size(pool);
    if (grain < 1)
        grain = 1;
    if (threads <= 1 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    size_t blocks = (n + grain - 1) / grain;
    if (blocks > threads * 4)
        blocks = threads * 4;
    /* blocks start on 16-item (64-byte for floats) boundaries */
    size_t block = ((n + blocks - 1) / blocks + 15) & ~(size_t)15;
    range_job j = {fn, ctx, n, block};
    nnf_parallel_for(pool, (n + block - 1) / block, range_task, &j);
}

/* Floats per block handed to one thread: big enough that a block costs far
 * more than the hand-off, small enough that two cores share a 1 MB tensor. */
#define EW_GRAIN 16384

/* A driver's work on items [first, first + count), written to y (the
 * output's element `first`). */
typedef void (*ew_block_fn)(const void *job, size_t first, size_t count, float *y);

/* blk over [first, first + count) of the output `out`: straight into it, or
 * for a streamed output (kernels/stream.h) a block at a time into a buffer
 * in L1, copied out with streaming stores. */
static void ew_blocks(ew_block_fn blk, const void *job, float *out, bool stream, size_t first,
                      size_t count) {
    if (!stream) {
        blk(job, first, count, out + first);
        return;
    }
    _Alignas(64) float buf[NNF_STREAM_BLOCK];
    for (size_t done = 0; done < count;) {
        size_t c = count - done < NNF_STREAM_BLOCK ? count - done : NNF_STREAM_BLOCK;
        blk(job, first + done, c, buf);
        nnf_stream_copy(out + first + done, buf, c * sizeof(float));
        done += c;
    }
    nnf_stream_fence();
}

typedef struct unary_job {
    const nnf_ew_kernels *k;
    const nnf_ew_unary *u;
    const float *x;
    float *y;
    bool stream;
} unary_job;

static void unary_block(const void *p, size_t first, size_t count, float *y) {
    const unary_job *j = p;
    j->k->unary(j->u, j->x + first, y, count);
}

static void unary_range(void *p, size_t first, size_t count) {
    const unary_job *j = p;
    ew_blocks(unary_block, j, j->y, j->stream, first, count);
}

void nnf_ew_unary_run(const nnf_ew_kernels *k, const nnf_ew_unary *u, const float *x, float *y,
                      size_t n, nnf_threadpool *pool) {
    unary_job j = {k, u, x, y, y != x && nnf_stream_output(n * sizeof *y)};
    nnf_ew_parallel_ranges(pool, n, EW_GRAIN, unary_range, &j);
}

typedef struct binary_job {
    const nnf_ew_kernels *k;
    nnf_ew_binop op;
    const nnf_ew_bcast *bc;
    const float *a, *b;
    float *y;
    bool stream;
} binary_job;

static void binary_block(const void *p, size_t first, size_t count, float *out) {
    const binary_job *j = p;
    const nnf_ew_bcast *bc = j->bc;
    size_t start = first, end = first + count;
    while (first < end) {
        size_t row = first / bc->inner, col = first % bc->inner;
        size_t len = bc->inner - col < end - first ? bc->inner - col : end - first;
        float *y = out + (first - start);
        const float *small = bc->small_is_a ? j->a : j->b;
        const float *big = (bc->small_is_a ? j->b : j->a) + first;
        switch (bc->kind) {
        case NNF_EWBC_SAME:
            j->k->binary(j->op, NNF_EW_VV, j->a + first, j->b + first, y, len);
            break;
        case NNF_EWBC_SCALAR:
        case NNF_EWBC_PER_ROW: {
            const float *s = small + (bc->kind == NNF_EWBC_PER_ROW ? row % bc->c : 0);
            if (bc->small_is_a)
                j->k->binary(j->op, NNF_EW_SV, s, big, y, len);
            else
                j->k->binary(j->op, NNF_EW_VS, big, s, y, len);
            break;
        }
        case NNF_EWBC_ROW:
            if (bc->small_is_a)
                j->k->binary(j->op, NNF_EW_VV, small + col, big, y, len);
            else
                j->k->binary(j->op, NNF_EW_VV, big, small + col, y, len);
            break;
        case NNF_EWBC_NONE: return;
        }
        first += len;
    }
}

static void binary_range(void *p, size_t first, size_t count) {
    const binary_job *j = p;
    ew_blocks(binary_block, j, j->y, j->stream, first, count);
}

void nnf_ew_binary_run(const nnf_ew_kernels *k, nnf_ew_binop op, const nnf_ew_bcast *bc,
                       const float *a, const float *b, float *y, nnf_threadpool *pool) {
    if (bc->kind == NNF_EWBC_NONE || bc->inner == 0)
        return;
    binary_job j = {
        k, op, bc, a, b, y, y != a && y != b && nnf_stream_output(bc->numel * sizeof *y)};
    nnf_ew_parallel_ranges(pool, bc->numel, EW_GRAIN, binary_range, &j);
}

typedef struct affine_job {
    const nnf_ew_kernels *k;
    const float *x, *a, *b;
    float *y;
    size_t inner, c;
    bool stream;
} affine_job;

static void affine_block(const void *p, size_t first, size_t count, float *out) {
    const affine_job *j = p;
    size_t start = first, end = first + count;
    while (first < end) {
        size_t row = first / j->inner, col = first % j->inner;
        size_t len = j->inner - col < end - first ? j->inner - col : end - first;
        size_t c = row % j->c;
        j->k->affine(j->x + first, out + (first - start), len, j->a[c], j->b[c]);
        first += len;
    }
}

static void affine_range(void *p, size_t first, size_t count) {
    const affine_job *j = p;
    ew_blocks(affine_block, j, j->y, j->stream, first, count);
}

void nnf_ew_affine_run(const nnf_ew_kernels *k, const float *x, float *y, size_t numel,
                       size_t inner, size_t c, const float *a, const float *b,
                       nnf_threadpool *pool) {
    if (inner == 0 || c == 0)
        return;
    affine_job j = {k, x, a, b, y, inner, c, y != x && nnf_stream_output(numel * sizeof *y)};
    nnf_ew_parallel_ranges(pool, numel, EW_GRAIN, affine_range, &j);
}

/* ---- transpose reduction -------------------------------------------------------- */

void nnf_perm_reduce(int rank, const int64_t *dims, const int *perm, nnf_perm_reduced *out) {
    /* input axes kept (extent > 1), renumbered densely */
    int newid[NNF_MAX_RANK], kept = 0;
    for (int i = 0; i < rank; i++)
        newid[i] = dims[i] == 1 ? -1 : kept++;
    int p[NNF_MAX_RANK], np = 0;
    for (int k = 0; k < rank; k++)
        if (newid[perm[k]] >= 0)
            p[np++] = newid[perm[k]];
    int64_t d[NNF_MAX_RANK];
    for (int i = 0; i < rank; i++)
        if (newid[i] >= 0)
            d[newid[i]] = dims[i];
    /* groups of output axes whose input axes are consecutive */
    int gstart[NNF_MAX_RANK], glen[NNF_MAX_RANK], ng = 0;
    for (int k = 0; k < np; k++) {
        if (ng > 0 && p[k] == gstart[ng - 1] + glen[ng - 1]) {
            glen[ng - 1]++;
            continue;
        }
        gstart[ng] = p[k];
        glen[ng++] = 1;
    }
    /* a group's new input axis is its rank among the groups by input position */
    out->rank = ng;
    for (int g = 0; g < ng; g++) {
        int before = 0;
        for (int h = 0; h < ng; h++)
            before += gstart[h] < gstart[g];
        out->perm[g] = before;
        int64_t e = 1;
        for (int i = 0; i < glen[g]; i++)
            e *= d[gstart[g] + i];
        out->dims[before] = e;
    }
}

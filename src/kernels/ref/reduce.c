/* Reference kernels of the reductions (ReduceXxx) and of ArgMax/ArgMin.
 *
 * One driver serves every reduction: the input's dims split into kept and
 * reduced ones (adjacent dims of the same kind merged where their strides
 * chain); for each output element the reduced elements form a "line" that a
 * per-op function folds into one value. When the reduced dims are one
 * contiguous block (the common case: trailing axes) the line is read in
 * place; otherwise it is gathered into a scratch buffer first. Empty
 * reductions give the identity of the op (0, 1, -inf, +inf, NaN for a mean).
 * Float sums and products accumulate in double. */
#include "ops/reduce.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef void (*line_fn)(nnf_reduce_kind kind, const void *line, size_t n, void *out);

/* ---- per-op line folds ------------------------------------------------ */

static void line_f32(nnf_reduce_kind kind, const void *line, size_t n, void *out) {
    const float *x = line;
    float *y = out;
    double acc = 0.0;
    switch (kind) {
    case NNF_REDUCE_MAX:
    case NNF_REDUCE_MIN: {
        int is_max = kind == NNF_REDUCE_MAX;
        float m = is_max ? -INFINITY : INFINITY;
        for (size_t i = 0; i < n; i++)
            if ((is_max ? x[i] > m : x[i] < m) || x[i] != x[i])
                m = x[i];
            else if (m != m)
                break;
        *y = m;
        return;
    }
    case NNF_REDUCE_PROD:
        acc = 1.0;
        for (size_t i = 0; i < n; i++)
            acc *= x[i];
        break;
    case NNF_REDUCE_SUM:
    case NNF_REDUCE_MEAN:
    case NNF_REDUCE_LOG_SUM:
        for (size_t i = 0; i < n; i++)
            acc += x[i];
        if (kind == NNF_REDUCE_MEAN)
            acc /= (double)n;
        else if (kind == NNF_REDUCE_LOG_SUM)
            acc = log(acc);
        break;
    case NNF_REDUCE_L1:
        for (size_t i = 0; i < n; i++)
            acc += fabs(x[i]);
        break;
    case NNF_REDUCE_L2:
    case NNF_REDUCE_SUM_SQUARE:
        for (size_t i = 0; i < n; i++)
            acc += (double)x[i] * x[i];
        if (kind == NNF_REDUCE_L2)
            acc = sqrt(acc);
        break;
    case NNF_REDUCE_LOG_SUM_EXP: {
        /* shift by the max so exp cannot overflow; an infinite max is the answer */
        double m = -INFINITY;
        for (size_t i = 0; i < n; i++)
            if (x[i] > m)
                m = x[i];
        if (isinf(m)) {
            acc = m;
            break;
        }
        for (size_t i = 0; i < n; i++)
            acc += exp(x[i] - m);
        acc = m + log(acc);
        break;
    }
    }
    *y = (float)acc;
}

/* Integer folds wrap like the element-wise integer ops. */
#define INT_LINE(NAME, T, UT, TMIN, TMAX)                                                          \
    static void NAME(nnf_reduce_kind kind, const void *line, size_t n, void *out) {                \
        const T *x = line;                                                                         \
        UT acc = 0;                                                                                \
        switch (kind) {                                                                            \
        case NNF_REDUCE_MAX:                                                                       \
        case NNF_REDUCE_MIN: {                                                                     \
            T m = kind == NNF_REDUCE_MAX ? TMIN : TMAX;                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                if (kind == NNF_REDUCE_MAX ? x[i] > m : x[i] < m)                                  \
                    m = x[i];                                                                      \
            *(T *)out = m;                                                                         \
            return;                                                                                \
        }                                                                                          \
        case NNF_REDUCE_PROD:                                                                      \
            acc = 1;                                                                               \
            for (size_t i = 0; i < n; i++)                                                         \
                acc *= (UT)x[i];                                                                   \
            break;                                                                                 \
        case NNF_REDUCE_MEAN: {                                                                    \
            int64_t s = 0;                                                                         \
            for (size_t i = 0; i < n; i++)                                                         \
                s = (int64_t)((uint64_t)s + (uint64_t)x[i]);                                       \
            *(T *)out = n ? (T)(s / (int64_t)n) : 0;                                               \
            return;                                                                                \
        }                                                                                          \
        case NNF_REDUCE_L1:                                                                        \
            for (size_t i = 0; i < n; i++)                                                         \
                acc += x[i] < 0 ? 0 - (UT)x[i] : (UT)x[i];                                         \
            break;                                                                                 \
        case NNF_REDUCE_SUM_SQUARE:                                                                \
            for (size_t i = 0; i < n; i++)                                                         \
                acc += (UT)x[i] * (UT)x[i];                                                        \
            break;                                                                                 \
        default:                                                                                   \
            for (size_t i = 0; i < n; i++)                                                         \
                acc += (UT)x[i];                                                                   \
            break;                                                                                 \
        }                                                                                          \
        *(T *)out = (T)acc;                                                                        \
    }
INT_LINE(line_i32, int32_t, uint32_t, INT32_MIN, INT32_MAX)
INT_LINE(line_i64, int64_t, uint64_t, INT64_MIN, INT64_MAX)
/* bool: Max is any, Min is all; only those two reach it (infer checks) */
INT_LINE(line_bool, uint8_t, uint32_t, 0, 1)

/* ---- the driver ------------------------------------------------------- */

typedef struct dimset {
    int n;
    int64_t dims[NNF_MAX_RANK];
    int64_t strides[NNF_MAX_RANK]; /* in elements of the input */
} dimset;

/* Append a dim, merging it into the previous one when their strides chain. */
static void dimset_push(dimset *s, int64_t d, int64_t stride) {
    if (d == 1)
        return;
    if (s->n > 0 && s->strides[s->n - 1] == stride * d) {
        s->dims[s->n - 1] *= d;
        s->strides[s->n - 1] = stride;
        return;
    }
    s->dims[s->n] = d;
    s->strides[s->n++] = stride;
}

/* Advance a multi-index over s, keeping *off the matching input offset. */
static void dimset_next(const dimset *s, int64_t *idx, int64_t *off) {
    for (int d = s->n - 1; d >= 0; d--) {
        *off += s->strides[d];
        if (++idx[d] < s->dims[d])
            return;
        *off -= s->strides[d] * s->dims[d];
        idx[d] = 0;
    }
}

static nnf_status reduce_run(const nnf_node *node, const nnf_buf *x, const unsigned char *mask,
                             line_fn fn, nnf_reduce_kind kind, nnf_buf *y) {
    size_t es = nnf_dtype_size(x->dtype);
    dimset kept = {0}, red = {0};
    int64_t stride = 1, strides[NNF_MAX_RANK];
    for (int i = x->rank - 1; i >= 0; i--) {
        strides[i] = stride;
        stride *= x->dims[i];
    }
    for (int i = 0; i < x->rank; i++)
        dimset_push(mask[i] ? &red : &kept, x->dims[i], strides[i]);
    size_t n_red = 1;
    for (int i = 0; i < x->rank; i++)
        if (mask[i])
            n_red *= (size_t)x->dims[i];
    if (y->numel == 0)
        return NNF_OK;
    int direct = n_red == 0 || red.n == 0 || (red.n == 1 && red.strides[0] == 1);
    char *scratch = NULL;
    if (!direct) {
        size_t bytes;
        if (!nnf_mul_size(n_red, es, &bytes) || !(scratch = nnf_malloc(bytes)))
            return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "no memory for a %zu-element line",
                                  n_red);
    }
    int64_t kidx[NNF_MAX_RANK] = {0}, koff = 0;
    const char *src = x->data;
    char *dst = y->data;
    for (size_t o = 0; o < y->numel; o++) {
        const void *line = src + koff * (int64_t)es;
        if (!direct) {
            int64_t ridx[NNF_MAX_RANK] = {0}, roff = 0;
            for (size_t r = 0; r < n_red; r++) {
                memcpy(scratch + r * es, src + (koff + roff) * (int64_t)es, es);
                dimset_next(&red, ridx, &roff);
            }
            line = scratch;
        }
        fn(kind, n_red ? line : NULL, n_red, dst + o * es);
        dimset_next(&kept, kidx, &koff);
    }
    nnf_free(scratch);
    return NNF_OK;
}

nnf_status nnf_reduce_ref(NNF_KERNEL_ARGS) {
    const nnf_reduce_params *p = node->params;
    const nnf_buf *x = in[0];
    const nnf_buf *axes = p->axes_from_input && node->n_inputs > 1 ? in[1] : NULL;
    unsigned char mask[NNF_MAX_RANK];
    NNF_CHECK(nnf_reduce_mask(node, p, x->rank, axes ? axes->data : NULL,
                              axes ? axes->dtype : NNF_DTYPE_INT64, axes ? (int64_t)axes->numel : 0,
                              mask));
    line_fn fn;
    switch (x->dtype) {
    case NNF_DTYPE_FLOAT32: fn = line_f32; break;
    case NNF_DTYPE_INT32: fn = line_i32; break;
    case NNF_DTYPE_INT64: fn = line_i64; break;
    case NNF_DTYPE_BOOL: fn = line_bool; break;
    default:
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "no %s kernel", nnf_dtype_name(x->dtype));
    }
    return reduce_run(node, x, mask, fn, p->kind, out[0]);
}

/* ---- ArgMax / ArgMin --------------------------------------------------- */

/* Ties go to the first index, or the last with select_last_index. */
#define ARG_LINES(T)                                                                               \
    for (int64_t o = 0; o < outer; o++)                                                            \
        for (int64_t j = 0; j < inner; j++) {                                                      \
            const T *v = (const T *)x->data + o * n * inner + j;                                   \
            int64_t best = 0;                                                                      \
            for (int64_t k = 1; k < n; k++) {                                                      \
                T a = v[k * inner], b = v[best * inner];                                           \
                int better = p->is_max ? (a > b) : (a < b);                                        \
                if (better || (p->select_last_index && a == b))                                    \
                    best = k;                                                                      \
            }                                                                                      \
            y[o * inner + j] = best;                                                               \
        }

nnf_status nnf_argminmax_ref(NNF_KERNEL_ARGS) {
    const nnf_argminmax_params *p = node->params;
    const nnf_buf *x = in[0];
    int axis;
    NNF_CHECK(nnf_norm_axis(node, p->axis, x->rank, &axis));
    int64_t outer = 1, n = x->dims[axis], inner = 1;
    for (int i = 0; i < x->rank; i++) {
        if (i < axis)
            outer *= x->dims[i];
        else if (i > axis)
            inner *= x->dims[i];
    }
    if (out[0]->numel == 0)
        return NNF_OK;
    if (n == 0)
        return nnf_node_error(node, NNF_ERR_SHAPE, "axis %d has no elements", axis);
    int64_t *y = out[0]->data;
    switch (x->dtype) {
    case NNF_DTYPE_FLOAT32: ARG_LINES(float); break;
    case NNF_DTYPE_INT32: ARG_LINES(int32_t); break;
    case NNF_DTYPE_INT64: ARG_LINES(int64_t); break;
    default:
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "no %s kernel", nnf_dtype_name(x->dtype));
    }
    return NNF_OK;
}

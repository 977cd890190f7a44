/* Reference kernels for Gather, GatherElements, GatherND, ScatterND, OneHot,
 * NonZero, TopK, Trilu and CumSum. Indices arrive from the caller, so every
 * one is range-checked (NNF_ERR_INVALID_ARGUMENT), never trusted. */
#include "kernels/ref/tensor_ref.h"

#include "kernels/stream.h"

#include <math.h>
#include <stdlib.h>

/* A possibly negative index into an extent d; false when out of range. */
static bool norm_index(int64_t v, int64_t d, int64_t *out) {
    if (v < -d || v >= d)
        return false;
    *out = v < 0 ? v + d : v;
    return true;
}

nnf_status nnf_gather_ref(NNF_KERNEL_ARGS) {
    const nnf_axis_params *p = node->params;
    const nnf_buf *x = in[0], *idx = in[1];
    int axis;
    NNF_CHECK(nnf_norm_axis(node, p->axis, x->rank, &axis));
    size_t es = nnf_dtype_size(x->dtype), outer = 1, inner = 1;
    for (int i = 0; i < axis; i++)
        outer *= (size_t)x->dims[i];
    for (int i = axis + 1; i < x->rank; i++)
        inner *= (size_t)x->dims[i];
    int64_t d = x->dims[axis];
    size_t n = idx->numel, block = inner * es;
    const uint8_t *src = x->data;
    uint8_t *dst = out[0]->data;
    for (size_t j = 0; j < n; j++) {
        int64_t v = nnf_read_index(idx->dtype, idx->data, (int64_t)j), k;
        if (!norm_index(v, d, &k))
            return nnf_index_error(node, v, d);
        for (size_t o = 0; o < outer; o++)
            memcpy(dst + (o * n + j) * block, src + (o * (size_t)d + (size_t)k) * block, block);
    }
    return NNF_OK;
}

nnf_status nnf_index_error(const nnf_node *node, int64_t v, int64_t d) {
    return nnf_node_error(node, NNF_ERR_INVALID_ARGUMENT,
                          "index %lld is out of range for extent %lld", (long long)v, (long long)d);
}

nnf_status nnf_gather_elements_check(const nnf_node *node, const nnf_buf *x, const nnf_buf *idx,
                                     int *axis) {
    const nnf_axis_params *p = node->params;
    int r = x->rank;
    NNF_CHECK(nnf_norm_axis(node, p->axis, r, axis));
    if (idx->rank != r)
        return nnf_node_error(node, NNF_ERR_SHAPE, "indices have rank %d, data rank %d",
                              idx->rank, r);
    for (int k = 0; k < r; k++)
        if (k != *axis && idx->dims[k] > x->dims[k])
            return nnf_node_error(node, NNF_ERR_SHAPE,
                                  "indices extent %lld exceeds data extent %lld on axis %d",
                                  (long long)idx->dims[k], (long long)x->dims[k], k);
    return NNF_OK;
}

bool nnf_gather_elements_rows(const nnf_buf *x, const nnf_buf *idx, nnf_buf *y, int axis,
                              size_t first, size_t count, int64_t *bad) {
    int r = x->rank;
    int64_t xs[NNF_MAX_RANK], pos[NNF_MAX_RANK] = {0};
    nnf_strides(r, x->dims, xs);
    size_t es = nnf_dtype_size(x->dtype);
    const uint8_t *src = x->data;
    uint8_t *dst = y->data;
    int64_t d = x->dims[axis], inner = idx->dims[r - 1];
    /* the first row's position over the indices' other axes */
    size_t at = first;
    for (int a = r - 2; a >= 0; a--) {
        pos[a] = (int64_t)(at % (size_t)idx->dims[a]);
        at /= (size_t)idx->dims[a];
    }
    /* a row of the indices' last axis at a time: the other axes' offset
     * once per row */
    const int64_t *i64 = idx->dtype == NNF_DTYPE_INT64 ? idx->data : NULL;
    bool ahead = r >= 2 && axis == r - 1 && (size_t)d * es <= 4096;
    for (size_t row = first; row < first + count; row++) {
        size_t i = row * (size_t)inner;
        int64_t base = 0;
        for (int a = 0; a < r - 1; a++)
            base += a == axis ? 0 : pos[a] * xs[a];
        /* gathering along the last axis reads a data row a row, at random:
         * its lines are fetched four rows ahead (a hint; 1.35 -> 1.13 ms
         * for 8 of 64 floats a row out of 8 MB) */
        if (ahead)
            for (size_t l = 0; l < (size_t)d * es; l += 64)
                __builtin_prefetch(src + (size_t)(base + 4 * xs[r - 2]) * es + l);
        if (axis == r - 1 && i64 && es == 4) {
            /* 4-byte elements along the last axis through typed pointers:
             * through the byte pointers every store may alias the strides
             * and the shape, which were read again for each element */
            const uint32_t *srow = (const uint32_t *)x->data + base;
            uint32_t *drow = (uint32_t *)y->data + i;
            const int64_t *irow = i64 + i;
            for (int64_t j = 0; j < inner; j++) {
                int64_t k;
                if (!norm_index(irow[j], d, &k)) {
                    *bad = irow[j];
                    return false;
                }
                drow[j] = srow[k];
            }
        } else {
            for (int64_t j = 0; j < inner; j++) {
                int64_t v = i64 ? i64[i + (size_t)j]
                                : nnf_read_index(idx->dtype, idx->data, (int64_t)i + j),
                        k;
                if (!norm_index(v, d, &k)) {
                    *bad = v;
                    return false;
                }
                size_t off = (size_t)(base + k * xs[axis] + (axis == r - 1 ? 0 : j));
                if (es == 4)
                    memcpy(dst + (i + (size_t)j) * 4, src + off * 4, 4);
                else
                    memcpy(dst + (i + (size_t)j) * es, src + off * es, es);
            }
        }
        for (int a = r - 2; a >= 0 && ++pos[a] == idx->dims[a]; a--)
            pos[a] = 0;
    }
    return true;
}

nnf_status nnf_gather_elements_ref(NNF_KERNEL_ARGS) {
    const nnf_buf *x = in[0], *idx = in[1];
    int axis;
    NNF_CHECK(nnf_gather_elements_check(node, x, idx, &axis));
    int64_t bad;
    if (idx->numel &&
        !nnf_gather_elements_rows(x, idx, out[0], axis, 0,
                                  idx->numel / (size_t)idx->dims[idx->rank - 1], &bad))
        return nnf_index_error(node, bad, x->dims[axis]);
    return NNF_OK;
}

/* GatherND/ScatterND address: the element offset in data of one index tuple
 * of m entries for batch b (data dims [batch..., indexed..., slice...]). */
static nnf_status nd_offset(const nnf_node *node, const nnf_buf *x, int bdims, const int64_t *tuple,
                            int64_t m, const int64_t *xs, int64_t *off) {
    int64_t o = 0;
    for (int64_t k = 0; k < m; k++) {
        int64_t d = x->dims[bdims + k], v;
        if (!norm_index(tuple[k], d, &v))
            return nnf_index_error(node, tuple[k], d);
        o += v * xs[bdims + k];
    }
    *off = o;
    return NNF_OK;
}

nnf_status nnf_gather_nd_ref(NNF_KERNEL_ARGS) {
    const nnf_gathernd_params *p = node->params;
    const nnf_buf *x = in[0], *idx = in[1];
    int r = x->rank, q = idx->rank, b = (int)p->batch_dims;
    int64_t m = idx->dims[q - 1];
    for (int k = 0; k < b; k++)
        if (idx->dims[k] != x->dims[k])
            return nnf_node_error(node, NNF_ERR_SHAPE, "batch axis %d: indices %lld, data %lld",
                                  k, (long long)idx->dims[k], (long long)x->dims[k]);
    int64_t xs[NNF_MAX_RANK];
    nnf_strides(r, x->dims, xs);
    size_t es = nnf_dtype_size(x->dtype);
    size_t batches = (size_t)nnf_dims_prod(idx->dims, 0, b);
    size_t rows = (size_t)nnf_dims_prod(idx->dims, b, q - 1);
    size_t slice = (size_t)nnf_dims_prod(x->dims, b + (int)m, r);
    size_t batch_stride = (size_t)nnf_dims_prod(x->dims, b, r);
    const int64_t *ind = idx->data;
    const uint8_t *src = x->data;
    uint8_t *dst = out[0]->data;
    for (size_t bi = 0; bi < batches; bi++)
        for (size_t ri = 0; ri < rows; ri++) {
            int64_t off;
            NNF_CHECK(nd_offset(node, x, b, ind + (bi * rows + ri) * (size_t)m, m, xs, &off));
            memcpy(dst, src + (bi * batch_stride + (size_t)off) * es, slice * es);
            dst += slice * es;
        }
    return NNF_OK;
}

/* dst[i] = dst[i] (op) src[i] for one element of a numeric dtype. */
static void scatter_reduce(nnf_dtype t, nnf_scatter_reduction red, void *dst, const void *src) {
#define RED(T)                                                                                     \
    do {                                                                                           \
        T a, b;                                                                                    \
        memcpy(&a, dst, sizeof a);                                                                 \
        memcpy(&b, src, sizeof b);                                                                 \
        T v = red == NNF_SCATTER_ADD   ? (T)(a + b)                                                \
              : red == NNF_SCATTER_MUL ? (T)(a * b)                                                \
              : red == NNF_SCATTER_MAX ? (a > b ? a : b)                                           \
                                       : (a < b ? a : b);                                          \
        memcpy(dst, &v, sizeof v);                                                                 \
    } while (0)
    switch (t) {
    case NNF_DTYPE_FLOAT32: RED(float); break;
    case NNF_DTYPE_FLOAT64: RED(double); break;
    case NNF_DTYPE_INT8: RED(int8_t); break;
    case NNF_DTYPE_INT16: RED(int16_t); break;
    case NNF_DTYPE_INT32: RED(int32_t); break;
    case NNF_DTYPE_INT64: RED(int64_t); break;
    case NNF_DTYPE_UINT8: RED(uint8_t); break;
    case NNF_DTYPE_UINT16: RED(uint16_t); break;
    case NNF_DTYPE_UINT32: RED(uint32_t); break;
    case NNF_DTYPE_UINT64: RED(uint64_t); break;
    case NNF_DTYPE_FLOAT16:
    case NNF_DTYPE_BFLOAT16: {
        float a = (float)nnf_load_f64(t, dst, 0), b = (float)nnf_load_f64(t, src, 0);
        float v = red == NNF_SCATTER_ADD   ? a + b
                  : red == NNF_SCATTER_MUL ? a * b
                  : red == NNF_SCATTER_MAX ? (a > b ? a : b)
                                           : (a < b ? a : b);
        nnf_store_f64(t, dst, 0, v);
        break;
    }
    default: break;
    }
#undef RED
}

nnf_status nnf_scatter_nd_ref(NNF_KERNEL_ARGS) {
    const nnf_scatternd_params *p = node->params;
    const nnf_buf *x = in[0], *idx = in[1], *upd = in[2];
    nnf_buf *y = out[0];
    int r = x->rank, q = idx->rank;
    int64_t m = idx->dims[q - 1];
    size_t es = nnf_dtype_size(x->dtype);
    size_t rows = (size_t)nnf_dims_prod(idx->dims, 0, q - 1);
    size_t slice = (size_t)nnf_dims_prod(x->dims, (int)m, r);
    if (upd->numel != rows * slice)
        return nnf_node_error(node, NNF_ERR_SHAPE, "updates hold %zu elements, expected %zu",
                              upd->numel, rows * slice);
    if (y->data != x->data && x->numel)
        memcpy(y->data, x->data, x->numel * es);
    int64_t xs[NNF_MAX_RANK];
    nnf_strides(r, x->dims, xs);
    const int64_t *ind = idx->data;
    const uint8_t *u = upd->data;
    uint8_t *dst = y->data;
    for (size_t ri = 0; ri < rows; ri++) {
        int64_t off;
        NNF_CHECK(nd_offset(node, x, 0, ind + ri * (size_t)m, m, xs, &off));
        uint8_t *d = dst + (size_t)off * es;
        const uint8_t *s = u + ri * slice * es;
        if (p->reduction == NNF_SCATTER_NONE)
            memcpy(d, s, slice * es);
        else
            for (size_t i = 0; i < slice; i++)
                scatter_reduce(x->dtype, p->reduction, d + i * es, s + i * es);
    }
    return NNF_OK;
}

nnf_status nnf_one_hot_ref(NNF_KERNEL_ARGS) {
    const nnf_axis_params *p = node->params;
    const nnf_buf *idx = in[0], *vals = in[2];
    nnf_buf *y = out[0];
    int axis;
    NNF_CHECK(nnf_norm_axis(node, p->axis, y->rank, &axis));
    if (vals->numel != 2)
        return nnf_node_error(node, NNF_ERR_INVALID_ARGUMENT, "values must hold 2 elements");
    int64_t depth = y->dims[axis];
    size_t es = nnf_dtype_size(y->dtype), outer = 1, inner = 1;
    for (int i = 0; i < axis; i++)
        outer *= (size_t)y->dims[i];
    for (int i = axis + 1; i < y->rank; i++)
        inner *= (size_t)y->dims[i];
    const uint8_t *off = vals->data, *on = off + es;
    uint8_t *dst = y->data;
    nnf_fill_elems(dst, off, y->numel, es);
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            double v = nnf_load_f64(idx->dtype, idx->data, o * inner + i);
            if (idx->dtype == NNF_DTYPE_INT64)
                v = (double)((const int64_t *)idx->data)[o * inner + i];
            if (!(v > -(double)depth - 1 && v < (double)depth))
                continue;
            int64_t k = (int64_t)v;
            if (k < -depth || k >= depth)
                continue;
            if (k < 0)
                k += depth;
            nnf_copy_elem(dst + ((o * (size_t)depth + (size_t)k) * inner + i) * es, on, es);
        }
    return NNF_OK;
}

nnf_status nnf_non_zero_ref(NNF_KERNEL_ARGS) {
    const nnf_buf *x = in[0];
    nnf_buf *y = out[0];
    int r = x->rank;
    int64_t nz = y->rank == 2 ? y->dims[1] : -1, j = 0, pos[NNF_MAX_RANK] = {0};
    int64_t *o = y->data;
    for (size_t i = 0; i < x->numel; i++) {
        if (nnf_elem_nonzero(x->dtype, x->data, i)) {
            if (j >= nz)
                return nnf_node_error(node, NNF_ERR_INTERNAL, "more non-zeros than inferred");
            for (int k = 0; k < r; k++)
                o[k * nz + j] = pos[k];
            j++;
        }
        for (int k = r - 1; k >= 0 && ++pos[k] == x->dims[k]; k--)
            pos[k] = 0;
    }
    if (j != nz)
        return nnf_node_error(node, NNF_ERR_INTERNAL, "fewer non-zeros than inferred");
    return NNF_OK;
}

/* TopK ranks (key, index) pairs; long double holds every int64, uint64 and
 * double exactly, so one key type serves all dtypes. */
#define TOPK_SELECT 256
typedef struct topk_item {
    long double key;
    int64_t index;
} topk_item;

/* The ranking of a before b (-1), after (1): NaN sorts as the largest value,
 * as numpy does, then the key, then the lower index; an, bn: NaN keys,
 * less / differ: a's key below / not equal to b's. */
static inline int topk_rank(bool an, bool bn, bool less, bool differ, int64_t ai, int64_t bi,
                            int largest) {
    if (an != bn)
        return (an ? 1 : -1) * (largest ? -1 : 1);
    if (!an && differ)
        return (less ? -1 : 1) * (largest ? -1 : 1);
    return ai < bi ? -1 : ai > bi;
}

static inline int topk_cmp(const topk_item *a, const topk_item *b, int largest) {
    return topk_rank(isnan(a->key), isnan(b->key), a->key < b->key, a->key != b->key, a->index,
                     b->index, largest);
}
static int topk_cmp_largest(const void *a, const void *b) {
    return topk_cmp(a, b, 1);
}
static int topk_cmp_smallest(const void *a, const void *b) {
    return topk_cmp(a, b, 0);
}

static inline long double load_key(nnf_dtype t, const void *p, size_t i) {
    switch (t) {
    case NNF_DTYPE_FLOAT32: return (long double)((const float *)p)[i];
    case NNF_DTYPE_INT64: return (long double)((const int64_t *)p)[i];
    case NNF_DTYPE_UINT64: return (long double)((const uint64_t *)p)[i];
    default: return nnf_load_f64(t, p, i);
    }
}

nnf_status nnf_top_k_check(const nnf_node *node, const nnf_buf *x, const nnf_buf *vals, int *axis) {
    const nnf_topk_params *p = node->params;
    NNF_CHECK(nnf_norm_axis(node, p->axis, x->rank, axis));
    int64_t d = x->dims[*axis], k = vals->dims[*axis];
    if (k > d)
        return nnf_node_error(node, NNF_ERR_INTERNAL, "K = %lld > extent %lld", (long long)k,
                              (long long)d);
    return NNF_OK;
}

/* The float32 selection of up to TOPK_SELECT: the best k so far kept in
 * order as (float, index) pairs, the rules of topk_cmp in float (no long
 * double on the x87 stack for each comparison), and a contiguous row
 * skipped 16 values at a time while none ranks before the worst held
 * (greater or NaN for largest, smaller for smallest). Writes the k indices
 * in rank order to out[].index. */
typedef struct topk_f32 {
    float key;
    int64_t index;
} topk_f32;

static inline int topk_cmp_f32(const topk_f32 *a, const topk_f32 *b, int largest) {
    return topk_rank(isnan(a->key), isnan(b->key), a->key < b->key, a->key != b->key, a->index,
                     b->index, largest);
}

/* Item `it` into the held items[0..held) (at most k, in rank order) where
 * it ranks, by binary search with cmp; the worst drops out when k are held.
 * Written once for the long double and the float items. */
#define TOPK_INSERT(items, held, k, it, cmp, largest)                                              \
    do {                                                                                           \
        int64_t last_ = (held) < (k) ? (held) : (k)-1, lo_ = 0, hi_ = last_;                       \
        while (lo_ < hi_) {                                                                        \
            int64_t mid_ = (lo_ + hi_) / 2;                                                        \
            if (cmp(&(it), &(items)[mid_], largest) < 0)                                           \
                hi_ = mid_;                                                                        \
            else                                                                                   \
                lo_ = mid_ + 1;                                                                    \
        }                                                                                          \
        memmove(&(items)[lo_ + 1], &(items)[lo_], (size_t)(last_ - lo_) * sizeof *(items));        \
        (items)[lo_] = (it);                                                                       \
        (held) += (held) < (k);                                                                    \
    } while (0)

/* Whether any of 16 floats ranks before worst, four lanes a compare (GCC's
 * and clang's vector types: SSE2 on any x86-64, NEON on Arm). */
typedef float topk_v4f __attribute__((vector_size(16)));
typedef int32_t topk_v4i __attribute__((vector_size(16)));

static inline bool topk_block_hit(const float *x, float worst, int largest) {
    topk_v4f w = {worst, worst, worst, worst};
    topk_v4i hit = {0, 0, 0, 0};
    for (int t = 0; t < 16; t += 4) {
        topk_v4f v;
        memcpy(&v, x + t, sizeof v);
        if (largest)
            hit |= ~(v <= w); /* greater, or NaN */
        else
            hit |= v < w;
    }
    return (hit[0] | hit[1] | hit[2] | hit[3]) != 0;
}

static void topk_row_f32(const float *x, size_t inner, int64_t d, int64_t k, int largest,
                         topk_item *out) {
    topk_f32 it[TOPK_SELECT];
    int64_t held = 0;
    for (int64_t j = 0; j < d; j++) {
        if (held == k) {
            /* most values rank after the worst held (NaN ranks as the
             * largest; on an equal key j, past every held index, ranks
             * after): skipped without a comparison each */
            float worst = it[k - 1].key;
            if (isnan(worst)) {
                if (largest)
                    break; /* k NaNs held: nothing ranks before them */
                while (j < d && isnan(x[(size_t)j * inner]))
                    j++;
            } else {
                while (inner == 1 && j + 16 <= d && !topk_block_hit(x + j, worst, largest))
                    j += 16;
                if (largest)
                    while (j < d && x[(size_t)j * inner] <= worst)
                        j++;
                else
                    while (j < d && !(x[(size_t)j * inner] < worst))
                        j++;
            }
            if (j == d)
                break;
        }
        topk_f32 v = {x[(size_t)j * inner], j};
        if (held == k && topk_cmp_f32(&v, &it[k - 1], largest) >= 0)
            continue;
        TOPK_INSERT(it, held, k, v, topk_cmp_f32, largest);
    }
    for (int64_t t = 0; t < k; t++)
        out[t].index = it[t].index;
}

bool nnf_top_k_rows(const nnf_buf *x, nnf_buf *vals, nnf_buf *inds, int axis, bool largest,
                    size_t first, size_t count) {
    int64_t d = x->dims[axis], k = vals->dims[axis];
    size_t es = nnf_dtype_size(x->dtype), inner = 1;
    for (int i = axis + 1; i < x->rank; i++)
        inner *= (size_t)x->dims[i];
    if (!k)
        return true;
    /* k up to TOPK_SELECT: the best k so far kept in order, each value
     * compared with the worst of them and inserted where it ranks (one
     * comparison for most values); a larger k sorts the whole row */
    bool select = k <= TOPK_SELECT;
    topk_item stack[TOPK_SELECT], *items = stack;
    if (!select && !(items = nnf_calloc((size_t)d, sizeof *items)))
        return false;
    int (*cmp)(const void *, const void *) = largest ? topk_cmp_largest : topk_cmp_smallest;
    bool f32 = x->dtype == NNF_DTYPE_FLOAT32;
    const uint8_t *src = x->data;
    for (size_t row = first; row < first + count; row++) {
        size_t o = row / inner, i = row % inner;
        int64_t held = 0;
        if (select && f32)
            topk_row_f32((const float *)x->data + o * (size_t)d * inner + i, inner, d, k, largest,
                         items);
        else
            for (int64_t j = 0; j < d; j++) {
                size_t at = (o * (size_t)d + (size_t)j) * inner + i;
                topk_item it = {load_key(x->dtype, src, at), j};
                if (!select) {
                    items[held++] = it;
                    continue;
                }
                if (held == k && topk_cmp(&it, &items[k - 1], largest) >= 0)
                    continue;
                TOPK_INSERT(items, held, k, it, topk_cmp, largest);
            }
        if (!select)
            qsort(items, (size_t)d, sizeof *items, cmp);
        for (int64_t j = 0; j < k; j++) {
            size_t at = (o * (size_t)k + (size_t)j) * inner + i;
            size_t from = (o * (size_t)d + (size_t)items[j].index) * inner + i;
            memcpy((uint8_t *)vals->data + at * es, src + from * es, es);
            if (inds)
                ((int64_t *)inds->data)[at] = items[j].index;
        }
    }
    if (items != stack)
        nnf_free(items);
    return true;
}

nnf_status nnf_top_k_ref(NNF_KERNEL_ARGS) {
    const nnf_topk_params *p = node->params;
    const nnf_buf *x = in[0];
    int axis;
    NNF_CHECK(nnf_top_k_check(node, x, out[0], &axis));
    size_t rows = x->numel / (x->dims[axis] ? (size_t)x->dims[axis] : 1);
    if (x->dims[axis] &&
        !nnf_top_k_rows(x, out[0], nnf_kout(node, out, 1), axis, p->largest, 0, rows))
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for TopK");
    return NNF_OK;
}

nnf_status nnf_trilu_ref(NNF_KERNEL_ARGS) {
    const nnf_trilu_params *p = node->params;
    const nnf_buf *x = in[0], *kb = nnf_kin(node, in, 1);
    nnf_buf *y = out[0];
    int64_t k = 0;
    if (kb) {
        if (kb->numel != 1 || !nnf_is_int_index_dtype(kb->dtype))
            return nnf_node_error(node, NNF_ERR_INVALID_ARGUMENT, "k must be one integer");
        k = nnf_read_index(kb->dtype, kb->data, 0);
    }
    int r = x->rank;
    int64_t rows = x->dims[r - 2], cols = x->dims[r - 1];
    size_t es = nnf_dtype_size(x->dtype), mat = (size_t)(rows * cols);
    size_t n = mat ? x->numel / mat : 0;
    const uint8_t *src = x->data;
    uint8_t *dst = y->data;
    /* row i keeps columns [i + k, cols) (upper) or [0, i + k + 1) (lower)
     * and zeroes the rest (zero is all-zero bytes in every dtype) */
    /* a large output's rows (whole cache lines of up to 8 KiB) are built in
     * L1 and copied out by streaming stores (kernels/stream.h) */
    size_t all = (size_t)cols * es;
    bool stream = dst != src && all % 64 == 0 && all <= 8192 && nnf_stream_output(y->numel * es);
    _Alignas(64) uint8_t buf[8192];
    for (size_t b = 0; b < n; b++)
        for (int64_t i = 0; i < rows; i++) {
            int64_t edge = p->upper ? i + k : i + k + 1;
            edge = edge < 0 ? 0 : edge > cols ? cols : edge;
            size_t row = (b * mat + (size_t)(i * cols)) * es, cut = (size_t)edge * es;
            uint8_t *o = stream ? buf : dst + row;
            if (p->upper) {
                memset(o, 0, cut);
                if (all > cut && o != src + row)
                    memcpy(o + cut, src + row + cut, all - cut);
            } else {
                if (cut && o != src + row)
                    memcpy(o, src + row, cut);
                memset(o + cut, 0, all - cut);
            }
            if (stream)
                nnf_stream_copy(dst + row, buf, all);
        }
    if (stream)
        nnf_stream_fence();
    return NNF_OK;
}

nnf_status nnf_cum_sum_ref(NNF_KERNEL_ARGS) {
    const nnf_cumsum_params *p = node->params;
    const nnf_buf *x = in[0], *ab = in[1];
    nnf_buf *y = out[0];
    if (ab->numel != 1 || !nnf_is_int_index_dtype(ab->dtype))
        return nnf_node_error(node, NNF_ERR_INVALID_ARGUMENT, "axis must be one integer");
    int axis;
    NNF_CHECK(nnf_norm_axis(node, nnf_read_index(ab->dtype, ab->data, 0), x->rank, &axis));
    size_t outer = 1, inner = 1, d = (size_t)x->dims[axis];
    for (int i = 0; i < axis; i++)
        outer *= (size_t)x->dims[i];
    for (int i = axis + 1; i < x->rank; i++)
        inner *= (size_t)x->dims[i];
#define CUMSUM(T, ACC, LOAD, STORE)                                                                \
    for (size_t o = 0; o < outer; o++)                                                             \
        for (size_t i = 0; i < inner; i++) {                                                       \
            ACC acc = 0;                                                                           \
            for (size_t jj = 0; jj < d; jj++) {                                                    \
                size_t j = p->reverse ? d - 1 - jj : jj;                                           \
                size_t at = (o * d + j) * inner + i;                                               \
                ACC v = LOAD(((const T *)x->data)[at]);                                            \
                if (p->exclusive) {                                                                \
                    ((T *)y->data)[at] = STORE(acc);                                               \
                    acc += v;                                                                      \
                } else {                                                                           \
                    acc += v;                                                                      \
                    ((T *)y->data)[at] = STORE(acc);                                               \
                }                                                                                  \
            }                                                                                      \
        }
#define AS_IS(v) (v)
    switch (x->dtype) {
    case NNF_DTYPE_FLOAT32: CUMSUM(float, float, AS_IS, AS_IS); break;
    case NNF_DTYPE_FLOAT64: CUMSUM(double, double, AS_IS, AS_IS); break;
    case NNF_DTYPE_INT8: CUMSUM(int8_t, int8_t, AS_IS, AS_IS); break;
    case NNF_DTYPE_INT16: CUMSUM(int16_t, int16_t, AS_IS, AS_IS); break;
    case NNF_DTYPE_INT32: CUMSUM(int32_t, uint32_t, AS_IS, (int32_t)); break;
    case NNF_DTYPE_INT64: CUMSUM(int64_t, uint64_t, AS_IS, (int64_t)); break;
    case NNF_DTYPE_UINT8: CUMSUM(uint8_t, uint8_t, AS_IS, AS_IS); break;
    case NNF_DTYPE_UINT16: CUMSUM(uint16_t, uint16_t, AS_IS, AS_IS); break;
    case NNF_DTYPE_UINT32: CUMSUM(uint32_t, uint32_t, AS_IS, AS_IS); break;
    case NNF_DTYPE_UINT64: CUMSUM(uint64_t, uint64_t, AS_IS, AS_IS); break;
    case NNF_DTYPE_FLOAT16: CUMSUM(uint16_t, float, nnf_f16_to_f32, nnf_f32_to_f16); break;
    case NNF_DTYPE_BFLOAT16: CUMSUM(uint16_t, float, nnf_bf16_to_f32, nnf_f32_to_bf16); break;
    default:
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "dtype %s is not supported",
                              nnf_dtype_name(x->dtype));
    }
#undef CUMSUM
#undef AS_IS
    return NNF_OK;
}

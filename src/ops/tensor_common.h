/* Shared between the tensor / shape / data-movement operator definitions
 * (src/ops/tensor_*.c) and their reference kernels (src/kernels/ref/tensor_*.c):
 * typed attribute structs, readers for small integer tensors, and the index
 * resolution (Slice, Pad, Split) that both shape inference and the kernels
 * need, so the two can never disagree.
 *
 * Data-movement kernels move elements by byte size, never by type: one kernel
 * serves float32, int64, bool and float16 alike. */
#ifndef NNF_OPS_TENSOR_COMMON_H
#define NNF_OPS_TENSOR_COMMON_H

#include "ops/op.h"

#include <string.h>

/* Every fixed-size dtype: what the pure data-movement ops accept. */
#define NNF_DTYPES_ALL                                                                             \
    "float32,float64,float16,bfloat16,int8,int16,int32,int64,uint8,uint16,uint32,uint64,bool"
#define NNF_DTYPES_NUMERIC                                                                         \
    "float32,float64,float16,bfloat16,int8,int16,int32,int64,uint8,uint16,uint32,uint64"

/* ---- attribute structs ------------------------------------------------- */

typedef struct nnf_reshape_params {
    int allowzero;
    int n_shape;          /* opset < 5: the shape attribute; else -1 (shape is input 1) */
    const int64_t *shape; /* borrowed from the node's attribute */
} nnf_reshape_params;

typedef struct nnf_axis_params {
    int64_t axis; /* raw, possibly negative; normalised against the rank at infer/run */
} nnf_axis_params;

typedef struct nnf_axes_params {
    int n_axes;          /* -1 = attribute absent (axes from input 1, or none) */
    const int64_t *axes; /* borrowed from the node's attribute */
} nnf_axes_params;

typedef struct nnf_transpose_params {
    int n_perm; /* 0 = reverse the dimensions */
    int perm[NNF_MAX_RANK];
    bool view; /* moves only axes of extent 1, so every element stays where it
                * is: a view of its input (set by fold_transpose) */
} nnf_transpose_params;

typedef struct nnf_split_params {
    int64_t axis;
    int n_split;          /* -1 = no split attribute */
    const int64_t *split; /* opset < 13: attribute */
    int64_t num_outputs;  /* opset 18: 0 = absent */
} nnf_split_params;

typedef struct nnf_slice_params {
    /* opset < 10: attributes; n_* = -1 when absent */
    int n_starts, n_ends, n_axes;
    const int64_t *starts, *ends, *axes;
} nnf_slice_params;

/* nnfuse::SliceAssign (ops/slice_assign.c): input 0 with updates 1..n
 * written over windows of it along one axis; made only by
 * passes/fold_slice_concat.c. */
typedef struct nnf_slice_assign_params {
    int64_t axis;          /* 0 <= axis < rank */
    const int64_t *starts; /* per update (input k + 1): its first index along axis */
} nnf_slice_assign_params;
/* SliceAssign's rows on pool (NULL: the calling thread); out[0] may be in[0]. */
nnf_status nnf_slice_assign_run(const nnf_node *node, nnf_buf *const *in, nnf_buf *const *out,
                                nnf_threadpool *pool);

typedef enum nnf_pad_mode {
    NNF_PAD_CONSTANT = 0,
    NNF_PAD_REFLECT,
    NNF_PAD_EDGE,
    NNF_PAD_WRAP,
} nnf_pad_mode;

typedef struct nnf_pad_params {
    nnf_pad_mode mode;
    int n_pads;          /* opset < 11: attribute; -1 = pads come from input 1 */
    const int64_t *pads;
    float value;         /* opset < 11 */
} nnf_pad_params;

typedef struct nnf_shape_params {
    int64_t start, end; /* end = INT64_MAX when absent */
} nnf_shape_params;

typedef struct nnf_constant_params {
    nnf_dtype dtype;
    nnf_shape shape;
    const void *data;
    size_t nbytes;
} nnf_constant_params;

typedef struct nnf_cast_params {
    nnf_dtype to; /* UNDEFINED for CastLike (taken from input 1) */
} nnf_cast_params;

typedef struct nnf_eyelike_params {
    nnf_dtype dtype; /* UNDEFINED = the input's */
    int64_t k;
} nnf_eyelike_params;

typedef struct nnf_trilu_params {
    int upper;
} nnf_trilu_params;

typedef struct nnf_topk_params {
    int64_t axis;
    int largest, sorted;
} nnf_topk_params;

typedef struct nnf_cumsum_params {
    int exclusive, reverse;
} nnf_cumsum_params;

typedef struct nnf_gathernd_params {
    int64_t batch_dims;
} nnf_gathernd_params;

typedef enum nnf_scatter_reduction {
    NNF_SCATTER_NONE = 0,
    NNF_SCATTER_ADD,
    NNF_SCATTER_MUL,
    NNF_SCATTER_MAX,
    NNF_SCATTER_MIN,
} nnf_scatter_reduction;

typedef struct nnf_scatternd_params {
    nnf_scatter_reduction reduction;
} nnf_scatternd_params;

/* [lo, hi) of the dims that Shape reports for rank r, clamped as ONNX says. */
static inline void nnf_shape_op_range(const nnf_shape_params *p, int r, int *lo, int *hi) {
    int64_t s = p->start < 0 ? p->start + r : p->start;
    int64_t e = p->end < 0 ? p->end + r : p->end;
    s = s < 0 ? 0 : s > r ? r : s;
    e = e < 0 ? 0 : e > r ? r : e;
    *lo = (int)s;
    *hi = (int)(e > s ? e : s);
}

#define NNF_EINSUM_MAX_INPUTS 16
#define NNF_EINSUM_MAX_LABELS 64

typedef struct nnf_einsum_params {
    int n_terms;
    const char *terms[NNF_EINSUM_MAX_INPUTS]; /* per operand, spaces removed */
    const char *out;                          /* NULL = implicit output */
} nnf_einsum_params;

/* Labels bound to dimensions: label l has extent[l] (-1 unknown); input i's
 * dim k carries in_label[i][k]; the output's dims carry out_label[]. Labels
 * absent from the output are summed over. */
typedef struct nnf_einsum_plan {
    int n_labels;
    int64_t extent[NNF_EINSUM_MAX_LABELS];
    int in_rank[NNF_EINSUM_MAX_INPUTS];
    int in_label[NNF_EINSUM_MAX_INPUTS][NNF_MAX_RANK];
    int out_rank;
    int out_label[NNF_MAX_RANK];
} nnf_einsum_plan;

nnf_status nnf_einsum_resolve(const nnf_node *node, int n_in, const int *ranks,
                              const int64_t *const *dims, nnf_einsum_plan *plan);

/* ---- small helpers ----------------------------------------------------- */

static inline bool nnf_is_int_index_dtype(nnf_dtype t) {
    return t == NNF_DTYPE_INT64 || t == NNF_DTYPE_INT32;
}

/* Element i of an int32/int64 array. */
static inline int64_t nnf_read_index(nnf_dtype t, const void *p, int64_t i) {
    return t == NNF_DTYPE_INT64 ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
}

/* An optional input that the node actually has. */
static inline bool nnf_has_input(const nnf_node *node, const nnf_tinfo *in, int i) {
    return i < node->n_inputs && node->inputs[i] != NNF_NO_VALUE && in[i].present;
}
static inline const nnf_buf *nnf_kin(const nnf_node *node, nnf_buf *const *in, int i) {
    return i < node->n_inputs && node->inputs[i] != NNF_NO_VALUE ? in[i] : NULL;
}
static inline nnf_buf *nnf_kout(const nnf_node *node, nnf_buf *const *out, int i) {
    return i < node->n_outputs && node->outputs[i] != NNF_NO_VALUE ? out[i] : NULL;
}

/* A shape of the given rank with every extent unknown. */
static inline void nnf_shape_unknown(nnf_shape *s, int rank) {
    memset(s, 0, sizeof *s);
    s->rank = rank;
    for (int i = 0; i < rank && i < NNF_MAX_RANK; i++)
        s->dims[i] = -1;
}

/* A known integer vector (a small int32/int64 input or an INTS attribute). */
typedef struct nnf_ivec {
    int64_t n; /* -1 = absent */
    nnf_dtype dtype;
    const void *data; /* NULL = values unknown (n may still be known) */
} nnf_ivec;

static inline int64_t nnf_ivec_at(const nnf_ivec *v, int64_t i) {
    return nnf_read_index(v->dtype, v->data, i);
}

/* The known contents of a 0-D/1-D integer input, or n = its length with
 * data = NULL when only the shape is known, or n = -1 when neither is. */
nnf_status nnf_tinfo_ivec(const nnf_node *node, const nnf_tinfo *t, const char *what,
                          nnf_ivec *out);
nnf_status nnf_buf_ivec(const nnf_node *node, const nnf_buf *b, const char *what, nnf_ivec *out);

/* Slice's starts/ends/axes/steps (v[0..3]) from the opset < 10 attributes;
 * n = -1 for those that are absent. */
void nnf_slice_args_attr(const nnf_slice_params *p, nnf_ivec *v);

/* OneHot's depth scalar (any numeric dtype) as a positive integer. */
bool nnf_one_hot_depth(nnf_dtype t, const void *p, int64_t *depth);

/* Element i is non-zero (NaN counts; -0.0 does not). */
static inline bool nnf_elem_nonzero(nnf_dtype t, const void *p, size_t i) {
    switch (t) {
    case NNF_DTYPE_FLOAT32: return ((const float *)p)[i] != 0.0f;
    case NNF_DTYPE_FLOAT64: return ((const double *)p)[i] != 0.0;
    case NNF_DTYPE_FLOAT16:
    case NNF_DTYPE_BFLOAT16: return (((const uint16_t *)p)[i] & 0x7fff) != 0;
    default: {
        size_t es = nnf_dtype_size(t);
        const uint8_t *b = (const uint8_t *)p + i * es;
        for (size_t k = 0; k < es; k++)
            if (b[k])
                return true;
        return false;
    }
    }
}

static inline bool nnf_is_numeric_dtype(nnf_dtype t) {
    return nnf_dtype_size(t) != 0 && t != NNF_DTYPE_BOOL;
}

/* Per-dimension slice of an input: out extent count[i], first element
 * start[i], stride step[i] (count -1 when unknown at infer time). */
typedef struct nnf_slice_plan {
    int rank;
    int64_t start[NNF_MAX_RANK], step[NNF_MAX_RANK], count[NNF_MAX_RANK];
    bool keep[NNF_MAX_RANK]; /* the extent is the input's (its symbolic name carries over) */
} nnf_slice_plan;

/* ONNX Slice semantics: negative indices count from the end, starts/ends are
 * clamped, steps may be negative. dims may hold -1 (infer time). */
nnf_status nnf_slice_resolve(const nnf_node *node, int rank, const int64_t *dims,
                             const nnf_ivec *starts, const nnf_ivec *ends, const nnf_ivec *axes,
                             const nnf_ivec *steps, nnf_slice_plan *plan);

/* A Slice node's plan when its starts/ends/axes/steps are known (attributes
 * before opset 10, constant inputs after) and resolve against its input's
 * known shape (in: the node's inputs as inference sees them); false
 * otherwise, no error left set. */
bool nnf_slice_plan_known(const nnf_node *node, const nnf_tinfo *in, nnf_slice_plan *sp);

/* Pads for every dimension (begin[i], end[i]; may be negative = crop) from a
 * pads list of 2*len(axes) entries and optional axes. */
nnf_status nnf_pad_resolve(const nnf_node *node, int rank, const nnf_ivec *pads,
                           const nnf_ivec *axes, int64_t *begin, int64_t *end);

/* Normalise axes (possibly negative) against rank into a mask of dims; fails
 * on out-of-range or repeated axes. */
nnf_status nnf_axes_mask(const nnf_node *node, const nnf_ivec *axes, int rank, bool *mask);

/* Software IEEE half / bfloat16 conversion (round to nearest even). */
/* The node's zeroed params struct from the arena (NULL on OOM). */
void *nnf_tensor_params_alloc(nnf_node *node, nnf_arena *arena, size_t size);
#define ALLOC_PARAMS(type, var)                                                                    \
    type *var = nnf_tensor_params_alloc(node, arena, sizeof(type));                                \
    if (!var)                                                                                      \
    return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for attributes")
/* Data-movement ops accept every fixed-size dtype; strings have no size. */
nnf_status nnf_check_fixed_dtype(const nnf_node *node, nnf_dtype t);

/* IEEE binary16 <-> float conversions: round to nearest even, overflow to
 * infinity, subnormals kept, NaNs quieted with their payload's top bits (what
 * F16C's instructions do, bit for bit). */
float nnf_f16_to_f32(uint16_t h);
uint16_t nnf_f32_to_f16(float f);
float nnf_bf16_to_f32(uint16_t h);
uint16_t nnf_f32_to_bf16(float f);

/* Row-major strides (in elements) of dims[0..rank). */
static inline void nnf_strides(int rank, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= dims[i];
    }
}

static inline void nnf_copy_elem(void *dst, const void *src, size_t esize) {
    switch (esize) {
    case 1: *(uint8_t *)dst = *(const uint8_t *)src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, esize); break;
    }
}

/* Product of dims[lo..hi), -1 if any is unknown. */
static inline int64_t nnf_dims_prod(const int64_t *dims, int lo, int hi) {
    int64_t p = 1;
    for (int i = lo; i < hi; i++) {
        if (dims[i] < 0)
            return -1;
        if (__builtin_mul_overflow(p, dims[i], &p))
            return -1;
    }
    return p;
}

#endif

/* Index resolution and conversions shared by the tensor operators' shape
 * inference and their reference kernels. */
#include "ops/tensor_common.h"

#include <math.h>

static nnf_status ivec_make(const nnf_node *node, nnf_dtype dtype, int rank, const int64_t *dims,
                            const void *data, const char *what, nnf_ivec *out) {
    out->n = -1;
    out->dtype = dtype;
    out->data = NULL;
    if (dtype != NNF_DTYPE_UNDEFINED && !nnf_is_int_index_dtype(dtype))
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "%s must be int32 or int64, not %s",
                              what, nnf_dtype_name(dtype));
    if (rank > 1)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "%s must be 1-D, has rank %d", what,
                              rank);
    if (rank == 0)
        out->n = 1;
    else if (rank == 1 && dims[0] >= 0)
        out->n = dims[0];
    if (out->n >= 0 && dtype != NNF_DTYPE_UNDEFINED)
        out->data = data;
    return NNF_OK;
}

nnf_status nnf_tinfo_ivec(const nnf_node *node, const nnf_tinfo *t, const char *what,
                          nnf_ivec *out) {
    return ivec_make(node, t->dtype, t->shape.rank, t->shape.dims, t->data, what, out);
}

nnf_status nnf_buf_ivec(const nnf_node *node, const nnf_buf *b, const char *what, nnf_ivec *out) {
    NNF_CHECK(ivec_make(node, b->dtype, b->rank, b->dims, b->data, what, out));
    if (!out->data && out->n > 0)
        return nnf_node_error(node, NNF_ERR_INTERNAL, "%s has no data at run time", what);
    return NNF_OK;
}

nnf_status nnf_axes_mask(const nnf_node *node, const nnf_ivec *axes, int rank, bool *mask) {
    for (int i = 0; i < rank; i++)
        mask[i] = false;
    for (int64_t i = 0; i < axes->n; i++) {
        int a;
        NNF_CHECK(nnf_norm_axis(node, nnf_ivec_at(axes, i), rank, &a));
        if (mask[a])
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "axis %d is repeated", a);
        mask[a] = true;
    }
    return NNF_OK;
}

bool nnf_slice_plan_known(const nnf_node *node, const nnf_tinfo *in, nnf_slice_plan *sp) {
    const nnf_shape *xs = &in[0].shape;
    if (!node->params || !nnf_shape_known(xs))
        return false;
    nnf_ivec v[4];
    nnf_slice_args_attr(node->params, v);
    static const char *names[4] = {"starts", "ends", "axes", "steps"};
    for (int i = 0; node->opset >= 10 && i < 4; i++) {
        if (!nnf_has_input(node, in, i + 1))
            continue;
        if (nnf_tinfo_ivec(node, &in[i + 1], names[i], &v[i]) != NNF_OK) {
            nnf_error_clear(); /* the reference kernel reports it */
            return false;
        }
        if (!v[i].data)
            return false; /* known only at run time */
    }
    if (nnf_slice_resolve(node, xs->rank, xs->dims, &v[0], &v[1], &v[2], &v[3], sp) != NNF_OK) {
        nnf_error_clear();
        return false;
    }
    return true;
}

/* Clamp v into [lo, hi]. */
static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

nnf_status nnf_slice_resolve(const nnf_node *node, int rank, const int64_t *dims,
                             const nnf_ivec *starts, const nnf_ivec *ends, const nnf_ivec *axes,
                             const nnf_ivec *steps, nnf_slice_plan *plan) {
    plan->rank = rank;
    for (int i = 0; i < rank; i++) {
        plan->start[i] = 0;
        plan->step[i] = 1;
        plan->count[i] = dims[i];
        plan->keep[i] = true;
    }
    if (starts->n != ends->n)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "starts has %lld entries, ends %lld",
                              (long long)starts->n, (long long)ends->n);
    if (axes->n >= 0 && axes->n != starts->n)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "axes has %lld entries, starts %lld",
                              (long long)axes->n, (long long)starts->n);
    if (steps->n >= 0 && steps->n != starts->n)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "steps has %lld entries, starts %lld",
                              (long long)steps->n, (long long)starts->n);
    if (starts->n > rank && axes->n < 0)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "%lld starts for rank %d",
                              (long long)starts->n, rank);
    bool seen[NNF_MAX_RANK] = {false};
    for (int64_t k = 0; k < starts->n; k++) {
        int a = (int)k;
        if (axes->n >= 0)
            NNF_CHECK(nnf_norm_axis(node, nnf_ivec_at(axes, k), rank, &a));
        if (seen[a])
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "axis %d is sliced twice", a);
        seen[a] = true;
        int64_t step = steps->n >= 0 ? nnf_ivec_at(steps, k) : 1;
        if (step == 0)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "step for axis %d is 0", a);
        int64_t s = nnf_ivec_at(starts, k), e = nnf_ivec_at(ends, k), d = dims[a];
        plan->step[a] = step;
        if (d < 0) {
            /* An unknown extent sliced in full keeps its (symbolic) size. */
            plan->keep[a] = step == 1 && s == 0 && e >= INT32_MAX;
            plan->count[a] = -1;
            plan->start[a] = 0;
            continue;
        }
        if (s < 0)
            s += d;
        if (e < 0)
            e += d;
        int64_t count;
        if (step > 0) {
            s = clamp64(s, 0, d);
            e = clamp64(e, 0, d);
            count = e > s ? (e - s - 1) / step + 1 : 0;
        } else {
            s = clamp64(s, 0, d - 1);
            e = clamp64(e, -1, d - 1);
            count = s > e ? (s - e - 1) / -step + 1 : 0;
        }
        plan->start[a] = count > 0 ? s : 0;
        plan->count[a] = count;
        plan->keep[a] = count == d && step == 1;
    }
    return NNF_OK;
}

nnf_status nnf_pad_resolve(const nnf_node *node, int rank, const nnf_ivec *pads,
                           const nnf_ivec *axes, int64_t *begin, int64_t *end) {
    for (int i = 0; i < rank; i++)
        begin[i] = end[i] = 0;
    int64_t n_axes = axes && axes->n >= 0 ? axes->n : rank;
    if (pads->n != 2 * n_axes)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                              "pads has %lld entries, expected %lld (2 per padded axis)",
                              (long long)pads->n, (long long)(2 * n_axes));
    bool seen[NNF_MAX_RANK] = {false};
    for (int64_t k = 0; k < n_axes; k++) {
        int a = (int)k;
        if (axes && axes->n >= 0)
            NNF_CHECK(nnf_norm_axis(node, nnf_ivec_at(axes, k), rank, &a));
        if (seen[a])
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "axis %d is padded twice", a);
        seen[a] = true;
        begin[a] = nnf_ivec_at(pads, k);
        end[a] = nnf_ivec_at(pads, k + n_axes);
    }
    return NNF_OK;
}

/* ---- float16 / bfloat16 ------------------------------------------------ */

float nnf_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        /* a NaN comes out quiet, its payload kept (IEEE conversion, as F16C's) */
        bits = sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0);
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {
        /* subnormal: normalise the mantissa */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t nnf_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan (keep nan quiet and non-zero) */
        return sign | 0x7c00 | (ax > 0x7f800000u ? (uint16_t)(0x200 | ((ax >> 13) & 0x3ff)) : 0);
    if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return sign | 0x7c00;
    if (ax < 0x38800000u) {
        /* result is subnormal or zero: scale by 2^24 and round in float */
        if (ax < 0x33000000u) /* below half the smallest subnormal */
            return sign;
        float a;
        memcpy(&a, &ax, 4);
        return sign | (uint16_t)lrintf(a * 16777216.0f);
    }
    uint32_t m = ax + ((ax >> 13) & 1) + 0xfff; /* round to nearest even */
    return sign | (uint16_t)((m - 0x38000000u) >> 13);
}

float nnf_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t nnf_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

void *nnf_tensor_params_alloc(nnf_node *node, nnf_arena *arena, size_t size) {
    void *p = nnf_arena_calloc(arena, 1, size);
    if (p)
        node->params = p;
    return p;
}

nnf_status nnf_check_fixed_dtype(const nnf_node *node, nnf_dtype t) {
    if (t != NNF_DTYPE_UNDEFINED && nnf_dtype_size(t) == 0)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "dtype %s is not supported", nnf_dtype_name(t));
    return NNF_OK;
}

/* Reference kernels of the unary element-wise operators and Clip.
 *
 * Input and output have the same shape and are dense, so a kernel is one loop
 * over numel; the op switch sits outside the loop. Activation formulas come
 * from activation.h, the one place they are defined. The output may alias
 * the input. */
#include "kernels/ref/activation.h"
#include "ops/elementwise.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAP(T_IN, T_OUT, EXPR)                                                                     \
    do {                                                                                           \
        const T_IN *src_ = in[0]->data;                                                            \
        T_OUT *dst_ = out[0]->data;                                                                \
        for (size_t i_ = 0; i_ < n; i_++) {                                                        \
            T_IN x = src_[i_];                                                                     \
            dst_[i_] = (EXPR);                                                                     \
        }                                                                                          \
    } while (0)

static inline float f32_sign(float x) {
    return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x);
}

static nnf_status unary_f32(const nnf_node *node, const nnf_unary_params *p, nnf_buf *const *in,
                            nnf_buf *const *out, size_t n) {
    const float a = p->alpha, b = p->beta, g = p->gamma;
    switch (p->op) {
    case NNF_UN_RELU: MAP(float, float, nnf_f32_relu(x)); break;
    case NNF_UN_LEAKY_RELU: MAP(float, float, nnf_f32_leaky_relu(x, a)); break;
    case NNF_UN_ELU: MAP(float, float, nnf_f32_elu(x, a)); break;
    case NNF_UN_SELU: MAP(float, float, nnf_f32_selu(x, a, g)); break;
    case NNF_UN_CELU: MAP(float, float, nnf_f32_celu(x, a)); break;
    case NNF_UN_THRESHOLDED_RELU: MAP(float, float, nnf_f32_thresholded_relu(x, a)); break;
    case NNF_UN_SIGMOID: MAP(float, float, nnf_f32_sigmoid(x)); break;
    case NNF_UN_HARD_SIGMOID: MAP(float, float, nnf_f32_hard_sigmoid(x, a, b)); break;
    case NNF_UN_HARD_SWISH: MAP(float, float, nnf_f32_hard_swish(x)); break;
    case NNF_UN_TANH: MAP(float, float, nnf_f32_tanh(x)); break;
    case NNF_UN_SOFTPLUS: MAP(float, float, nnf_f32_softplus(x)); break;
    case NNF_UN_SOFTSIGN: MAP(float, float, nnf_f32_softsign(x)); break;
    case NNF_UN_MISH: MAP(float, float, nnf_f32_mish(x)); break;
    case NNF_UN_GELU:
        if (a != 0.0f)
            MAP(float, float, nnf_f32_gelu_tanh(x));
        else
            MAP(float, float, nnf_f32_gelu_erf(x));
        break;
    case NNF_UN_ERF: MAP(float, float, erff(x)); break;
    case NNF_UN_EXP: MAP(float, float, expf(x)); break;
    case NNF_UN_LOG: MAP(float, float, logf(x)); break;
    case NNF_UN_SQRT: MAP(float, float, sqrtf(x)); break;
    case NNF_UN_RECIPROCAL: MAP(float, float, 1.0f / x); break;
    case NNF_UN_NEG: MAP(float, float, -x); break;
    case NNF_UN_ABS: MAP(float, float, fabsf(x)); break;
    case NNF_UN_FLOOR: MAP(float, float, floorf(x)); break;
    case NNF_UN_CEIL: MAP(float, float, ceilf(x)); break;
    /* rintf rounds half to even in the default rounding mode, which we never change */
    case NNF_UN_ROUND: MAP(float, float, rintf(x)); break;
    case NNF_UN_SIGN: MAP(float, float, f32_sign(x)); break;
    case NNF_UN_SIN: MAP(float, float, sinf(x)); break;
    case NNF_UN_COS: MAP(float, float, cosf(x)); break;
    case NNF_UN_TAN: MAP(float, float, tanf(x)); break;
    case NNF_UN_ASIN: MAP(float, float, asinf(x)); break;
    case NNF_UN_ACOS: MAP(float, float, acosf(x)); break;
    case NNF_UN_ATAN: MAP(float, float, atanf(x)); break;
    case NNF_UN_SINH: MAP(float, float, sinhf(x)); break;
    case NNF_UN_COSH: MAP(float, float, coshf(x)); break;
    case NNF_UN_ASINH: MAP(float, float, asinhf(x)); break;
    case NNF_UN_ACOSH: MAP(float, float, acoshf(x)); break;
    case NNF_UN_ATANH: MAP(float, float, atanhf(x)); break;
    case NNF_UN_ISNAN: MAP(float, uint8_t, (uint8_t)(x != x)); break;
    case NNF_UN_ISINF:
        MAP(float, uint8_t,
            (uint8_t)((p->detect_positive && x == INFINITY) ||
                      (p->detect_negative && x == -INFINITY)));
        break;
    case NNF_UN_NOT: return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "no float32 kernel");
    }
    return NNF_OK;
}

/* Negation and Abs wrap at the minimum value instead of overflowing. */
#define INT_UNARY(T, UT)                                                                           \
    switch (p->op) {                                                                               \
    case NNF_UN_RELU: MAP(T, T, x < 0 ? 0 : x); break;                                             \
    case NNF_UN_NEG: MAP(T, T, (T)(0 - (UT)x)); break;                                             \
    case NNF_UN_ABS: MAP(T, T, x < 0 ? (T)(0 - (UT)x) : x); break;                                 \
    case NNF_UN_SIGN: MAP(T, T, (T)((x > 0) - (x < 0))); break;                                    \
    default:                                                                                       \
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "no %s kernel",                           \
                              nnf_dtype_name(in[0]->dtype));                                       \
    }

nnf_status nnf_unary_ref(NNF_KERNEL_ARGS) {
    const nnf_unary_params *p = node->params;
    size_t n = in[0]->numel;
    switch (in[0]->dtype) {
    case NNF_DTYPE_FLOAT32: return unary_f32(node, p, in, out, n);
    case NNF_DTYPE_INT32: INT_UNARY(int32_t, uint32_t); break;
    case NNF_DTYPE_INT64: INT_UNARY(int64_t, uint64_t); break;
    case NNF_DTYPE_BOOL:
        if (p->op != NNF_UN_NOT)
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "no bool kernel");
        MAP(uint8_t, uint8_t, (uint8_t)!x);
        break;
    default:
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "no %s kernel",
                              nnf_dtype_name(in[0]->dtype));
    }
    return NNF_OK;
}

/* A Clip bound from an optional input: absent or empty leaves *v unchanged. */
static nnf_status clip_bound(const nnf_node *node, const nnf_buf *b, const char *what, double *v) {
    if (!b || b->numel == 0)
        return NNF_OK;
    if (b->numel != 1)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s must be a scalar, has %zu elements", what,
                              b->numel);
    switch (b->dtype) {
    case NNF_DTYPE_FLOAT32: *v = *(const float *)b->data; break;
    case NNF_DTYPE_INT32: *v = (double)*(const int32_t *)b->data; break;
    case NNF_DTYPE_INT64: *v = (double)*(const int64_t *)b->data; break;
    default:
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "%s of type %s", what,
                              nnf_dtype_name(b->dtype));
    }
    return NNF_OK;
}

static inline int64_t clip_i64(int64_t x, int64_t lo, int64_t hi) {
    if (x < lo)
        x = lo;
    if (x > hi)
        x = hi;
    return x;
}

nnf_status nnf_clip_ref(NNF_KERNEL_ARGS) {
    const nnf_clip_params *p = node->params;
    size_t n = in[0]->numel;
    const nnf_buf *bmin = p->bounds_from_inputs && node->n_inputs > 1 ? in[1] : NULL;
    const nnf_buf *bmax = p->bounds_from_inputs && node->n_inputs > 2 ? in[2] : NULL;
    switch (in[0]->dtype) {
    case NNF_DTYPE_FLOAT32: {
        double lo = p->min, hi = p->max;
        NNF_CHECK(clip_bound(node, bmin, "min", &lo));
        NNF_CHECK(clip_bound(node, bmax, "max", &hi));
        const float flo = (float)lo, fhi = (float)hi;
        MAP(float, float, nnf_f32_clip(x, flo, fhi));
        break;
    }
    /* Integer bounds are read exactly (an int64 bound is not rounded through float). */
    case NNF_DTYPE_INT32: {
        int32_t lo = INT32_MIN, hi = INT32_MAX;
        if (bmin && bmin->numel == 1 && bmin->dtype == NNF_DTYPE_INT32)
            lo = *(const int32_t *)bmin->data;
        if (bmax && bmax->numel == 1 && bmax->dtype == NNF_DTYPE_INT32)
            hi = *(const int32_t *)bmax->data;
        MAP(int32_t, int32_t, (int32_t)clip_i64(x, lo, hi));
        break;
    }
    case NNF_DTYPE_INT64: {
        int64_t lo = INT64_MIN, hi = INT64_MAX;
        if (bmin && bmin->numel == 1 && bmin->dtype == NNF_DTYPE_INT64)
            lo = *(const int64_t *)bmin->data;
        if (bmax && bmax->numel == 1 && bmax->dtype == NNF_DTYPE_INT64)
            hi = *(const int64_t *)bmax->data;
        MAP(int64_t, int64_t, clip_i64(x, lo, hi));
        break;
    }
    default:
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "no %s kernel",
                              nnf_dtype_name(in[0]->dtype));
    }
    return NNF_OK;
}

/* Reference Cast: every fixed-size dtype to every other. Floats convert to
 * integers by truncation toward zero; values outside the target's range (and
 * NaN) are undefined in ONNX — here they saturate through int64/uint64 and
 * then wrap to narrower types like numpy and ONNX Runtime on x86, never
 * invoking C undefined behaviour. float16/bfloat16 are converted in software
 * with round-to-nearest-even. */
#include "kernels/ref/tensor_ref.h"

#include <math.h>

static bool is_float(nnf_dtype t) {
    return t == NNF_DTYPE_FLOAT32 || t == NNF_DTYPE_FLOAT64 || t == NNF_DTYPE_FLOAT16 ||
           t == NNF_DTYPE_BFLOAT16;
}

static bool is_unsigned(nnf_dtype t) {
    return t == NNF_DTYPE_UINT8 || t == NNF_DTYPE_UINT16 || t == NNF_DTYPE_UINT32 ||
           t == NNF_DTYPE_UINT64 || t == NNF_DTYPE_BOOL;
}

double nnf_load_f64(nnf_dtype t, const void *p, size_t i) {
    switch (t) {
    case NNF_DTYPE_FLOAT32: return ((const float *)p)[i];
    case NNF_DTYPE_FLOAT64: return ((const double *)p)[i];
    case NNF_DTYPE_FLOAT16: return nnf_f16_to_f32(((const uint16_t *)p)[i]);
    case NNF_DTYPE_BFLOAT16: return nnf_bf16_to_f32(((const uint16_t *)p)[i]);
    case NNF_DTYPE_INT8: return ((const int8_t *)p)[i];
    case NNF_DTYPE_INT16: return ((const int16_t *)p)[i];
    case NNF_DTYPE_INT32: return ((const int32_t *)p)[i];
    case NNF_DTYPE_INT64: return (double)((const int64_t *)p)[i];
    case NNF_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case NNF_DTYPE_BOOL: return ((const uint8_t *)p)[i] != 0;
    case NNF_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case NNF_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case NNF_DTYPE_UINT64: return (double)((const uint64_t *)p)[i];
    default: return 0.0;
    }
}

static int64_t load_i64(nnf_dtype t, const void *p, size_t i) {
    switch (t) {
    case NNF_DTYPE_INT8: return ((const int8_t *)p)[i];
    case NNF_DTYPE_INT16: return ((const int16_t *)p)[i];
    case NNF_DTYPE_INT32: return ((const int32_t *)p)[i];
    case NNF_DTYPE_INT64: return ((const int64_t *)p)[i];
    case NNF_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case NNF_DTYPE_BOOL: return ((const uint8_t *)p)[i] != 0;
    case NNF_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case NNF_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case NNF_DTYPE_UINT64: return (int64_t)((const uint64_t *)p)[i]; /* bit pattern */
    default: return 0;
    }
}

/* Store an integer (two's complement bit pattern) with wrap-around. */
static void store_bits(nnf_dtype t, void *p, size_t i, uint64_t v) {
    switch (t) {
    case NNF_DTYPE_INT8:
    case NNF_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case NNF_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case NNF_DTYPE_INT16:
    case NNF_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case NNF_DTYPE_INT32:
    case NNF_DTYPE_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case NNF_DTYPE_INT64:
    case NNF_DTYPE_UINT64: ((uint64_t *)p)[i] = v; break;
    default: break;
    }
}

/* Truncate toward zero, saturating at the 64-bit range; NaN gives 0. */
static uint64_t f64_to_bits(double v, bool to_unsigned) {
    if (isnan(v))
        return 0;
    if (to_unsigned && v >= 9223372036854775808.0)
        return v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v;
    if (v >= 9223372036854775807.0)
        return (uint64_t)INT64_MAX;
    if (v <= -9223372036854775808.0)
        return (uint64_t)INT64_MIN;
    return (uint64_t)(int64_t)v;
}

void nnf_store_f64(nnf_dtype t, void *p, size_t i, double v) {
    switch (t) {
    case NNF_DTYPE_FLOAT32: ((float *)p)[i] = (float)v; break;
    case NNF_DTYPE_FLOAT64: ((double *)p)[i] = v; break;
    case NNF_DTYPE_FLOAT16: ((uint16_t *)p)[i] = nnf_f32_to_f16((float)v); break;
    case NNF_DTYPE_BFLOAT16: ((uint16_t *)p)[i] = nnf_f32_to_bf16((float)v); break;
    case NNF_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0.0; break; /* NaN is true */
    default: store_bits(t, p, i, f64_to_bits(v, is_unsigned(t))); break;
    }
}

nnf_status nnf_cast_ref(NNF_KERNEL_ARGS) {
    const nnf_buf *x = in[0];
    nnf_buf *y = out[0];
    nnf_dtype from = x->dtype, to = y->dtype;
    size_t n = x->numel;
    if (nnf_dtype_size(from) == 0 || nnf_dtype_size(to) == 0)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "cast from %s to %s is not supported",
                              nnf_dtype_name(from), nnf_dtype_name(to));
    if (from == to) {
        if (n && y->data != x->data)
            memcpy(y->data, x->data, n * nnf_dtype_size(from));
        return NNF_OK;
    }
    if (from == NNF_DTYPE_FLOAT32 && to == NNF_DTYPE_FLOAT16) {
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)y->data)[i] = nnf_f32_to_f16(((const float *)x->data)[i]);
    } else if (is_float(from)) {
        for (size_t i = 0; i < n; i++)
            nnf_store_f64(to, y->data, i, nnf_load_f64(from, x->data, i));
    } else if (is_float(to)) {
        /* integers to float: int64/uint64 through long double so that large
         * values round once, not twice */
        for (size_t i = 0; i < n; i++) {
            long double v = from == NNF_DTYPE_UINT64 ? (long double)((const uint64_t *)x->data)[i]
                                                     : (long double)load_i64(from, x->data, i);
            if (to == NNF_DTYPE_FLOAT32)
                ((float *)y->data)[i] = (float)v;
            else if (to == NNF_DTYPE_FLOAT64)
                ((double *)y->data)[i] = (double)v;
            else
                nnf_store_f64(to, y->data, i, (double)(float)v);
        }
    } else {
        for (size_t i = 0; i < n; i++)
            store_bits(to, y->data, i, (uint64_t)load_i64(from, x->data, i));
    }
    return NNF_OK;
}

/* Reference kernels for the shape operators and value generators: the
 * byte-copy kernel behind Reshape/Flatten/Squeeze/Unsqueeze/Identity, and
 * Dropout, Shape, Size, Expand, Tile, Constant, ConstantOfShape, Range,
 * EyeLike. None reads anything but its inputs and params, so constant folding
 * can run them at load time. */
#include "kernels/ref/tensor_ref.h"

static size_t buf_bytes(const nnf_buf *b) {
    return b->numel * nnf_dtype_size(b->dtype);
}

/* Same elements, new shape. out may alias in (the planner runs these in place). */
nnf_status nnf_copy_ref(NNF_KERNEL_ARGS) {
    if (out[0]->numel != in[0]->numel)
        return nnf_node_error(node, NNF_ERR_INTERNAL, "output holds %zu elements, input %zu",
                              out[0]->numel, in[0]->numel);
    if (out[0]->data != in[0]->data && out[0]->numel)
        memcpy(out[0]->data, in[0]->data, buf_bytes(in[0]));
    return NNF_OK;
}

nnf_status nnf_dropout_ref(NNF_KERNEL_ARGS) {
    const nnf_buf *training = nnf_kin(node, in, 2);
    if (training && training->numel && *(const uint8_t *)training->data) {
        const nnf_buf *ratio = nnf_kin(node, in, 1);
        if (!ratio || !ratio->numel || nnf_load_f64(ratio->dtype, ratio->data, 0) != 0.0)
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                                  "training_mode=true is not supported");
    }
    NNF_CHECK(nnf_copy_ref(node, in, out, ctx));
    nnf_buf *mask = nnf_kout(node, out, 1);
    if (mask && mask->numel)
        memset(mask->data, 1, mask->numel);
    return NNF_OK;
}

/* Reads only the input's dims, never its data: constant folding may call it
 * with data = NULL for a value whose shape alone is known. */
nnf_status nnf_shape_ref(NNF_KERNEL_ARGS) {
    int lo, hi;
    nnf_shape_op_range(node->params, in[0]->rank, &lo, &hi);
    int64_t *o = out[0]->data;
    for (int i = lo; i < hi; i++)
        o[i - lo] = in[0]->dims[i];
    return NNF_OK;
}

/* Like Shape: the input's data is never read. */
nnf_status nnf_size_ref(NNF_KERNEL_ARGS) {
    int64_t n = 1;
    for (int i = 0; i < in[0]->rank; i++)
        n *= in[0]->dims[i];
    *(int64_t *)out[0]->data = n;
    return NNF_OK;
}

nnf_status nnf_expand_ref(NNF_KERNEL_ARGS) {
    const nnf_buf *x = in[0];
    nnf_buf *y = out[0];
    int ro = y->rank, ri = x->rank;
    if (ri > ro)
        return nnf_node_error(node, NNF_ERR_INTERNAL, "output rank %d < input rank %d", ro, ri);
    int64_t istr[NNF_MAX_RANK];
    nnf_strides(ri, x->dims, istr);
    nnf_gather_map m;
    NNF_CHECK(nnf_gather_map_alloc(node, ro, y->dims, &m));
    for (int k = 0; k < ro; k++) {
        int j = k - (ro - ri);
        bool bcast = j < 0 || x->dims[j] == 1;
        if (!bcast && x->dims[j] != y->dims[k]) {
            nnf_gather_map_free(&m);
            return nnf_node_error(node, NNF_ERR_INTERNAL, "axis %d: %lld does not broadcast to %lld",
                                  k, (long long)x->dims[j], (long long)y->dims[k]);
        }
        m.istride[k] = j < 0 ? 0 : istr[j];
        for (int64_t o = 0; o < y->dims[k]; o++)
            m.map[k][o] = bcast ? 0 : o;
    }
    nnf_gather_map_run(&m, y->data, x->data, nnf_dtype_size(x->dtype), NULL);
    nnf_gather_map_free(&m);
    return NNF_OK;
}

nnf_status nnf_tile_ref(NNF_KERNEL_ARGS) {
    const nnf_buf *x = in[0];
    nnf_buf *y = out[0];
    if (x->rank != y->rank)
        return nnf_node_error(node, NNF_ERR_INTERNAL, "output rank %d, input rank %d", y->rank,
                              x->rank);
    if (!y->numel)
        return NNF_OK;
    nnf_gather_map m;
    NNF_CHECK(nnf_gather_map_alloc(node, y->rank, y->dims, &m));
    nnf_strides(x->rank, x->dims, m.istride);
    for (int k = 0; k < y->rank; k++)
        for (int64_t o = 0; o < y->dims[k]; o++)
            m.map[k][o] = o % x->dims[k];
    nnf_gather_map_run(&m, y->data, x->data, nnf_dtype_size(x->dtype), NULL);
    nnf_gather_map_free(&m);
    return NNF_OK;
}

nnf_status nnf_constant_ref(NNF_KERNEL_ARGS) {
    const nnf_constant_params *p = node->params;
    if (buf_bytes(out[0]) != p->nbytes)
        return nnf_node_error(node, NNF_ERR_INTERNAL, "output holds %zu bytes, constant %zu",
                              buf_bytes(out[0]), p->nbytes);
    if (p->nbytes)
        memcpy(out[0]->data, p->data, p->nbytes);
    return NNF_OK;
}

nnf_status nnf_constant_of_shape_ref(NNF_KERNEL_ARGS) {
    const nnf_constant_params *p = node->params;
    nnf_fill_elems(out[0]->data, p->data, out[0]->numel, p->nbytes);
    return NNF_OK;
}

nnf_status nnf_range_ref(NNF_KERNEL_ARGS) {
    nnf_dtype t = out[0]->dtype;
    size_t n = out[0]->numel;
    void *o = out[0]->data;
    switch (t) {
    case NNF_DTYPE_FLOAT16:
    case NNF_DTYPE_BFLOAT16:
    case NNF_DTYPE_FLOAT32:
    case NNF_DTYPE_FLOAT64: {
        double s = nnf_load_f64(t, in[0]->data, 0), d = nnf_load_f64(t, in[2]->data, 0);
        for (size_t i = 0; i < n; i++)
            nnf_store_f64(t, o, i, s + (double)i * d);
        break;
    }
    case NNF_DTYPE_INT16:
    case NNF_DTYPE_INT32:
    case NNF_DTYPE_INT64: {
        int64_t s = (int64_t)nnf_load_f64(t, in[0]->data, 0);
        int64_t d = (int64_t)nnf_load_f64(t, in[2]->data, 0);
        if (t == NNF_DTYPE_INT64) {
            s = *(const int64_t *)in[0]->data;
            d = *(const int64_t *)in[2]->data;
        }
        for (size_t i = 0; i < n; i++) {
            /* wrap-free: every value lies between start and limit */
            int64_t v = (int64_t)((uint64_t)s + (uint64_t)i * (uint64_t)d);
            if (t == NNF_DTYPE_INT64)
                ((int64_t *)o)[i] = v;
            else if (t == NNF_DTYPE_INT32)
                ((int32_t *)o)[i] = (int32_t)v;
            else
                ((int16_t *)o)[i] = (int16_t)v;
        }
        break;
    }
    default:
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "dtype %s is not supported",
                              nnf_dtype_name(t));
    }
    return NNF_OK;
}

nnf_status nnf_eye_like_ref(NNF_KERNEL_ARGS) {
    const nnf_eyelike_params *p = node->params;
    nnf_buf *y = out[0];
    size_t es = nnf_dtype_size(y->dtype);
    if (y->rank != 2)
        return nnf_node_error(node, NNF_ERR_INTERNAL, "output rank %d", y->rank);
    if (y->numel)
        memset(y->data, 0, y->numel * es);
    int64_t rows = y->dims[0], cols = y->dims[1];
    for (int64_t i = 0; i < rows; i++) {
        int64_t j = i + p->k;
        if (j >= 0 && j < cols)
            nnf_store_f64(y->dtype, y->data, (size_t)(i * cols + j), 1.0);
    }
    return NNF_OK;
}

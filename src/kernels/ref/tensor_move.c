/* Reference kernels for Transpose, Concat, Split, Slice and Pad. */
#include "kernels/ref/tensor_ref.h"

nnf_status nnf_transpose_ref(NNF_KERNEL_ARGS) {
    const nnf_transpose_params *p = node->params;
    const nnf_buf *x = in[0];
    nnf_buf *y = out[0];
    int r = x->rank;
    if (y->rank != r || (p->n_perm && p->n_perm != r))
        return nnf_node_error(node, NNF_ERR_INTERNAL, "rank mismatch");
    int64_t istr[NNF_MAX_RANK];
    nnf_strides(r, x->dims, istr);
    nnf_gather_map m;
    NNF_CHECK(nnf_gather_map_alloc(node, r, y->dims, &m));
    for (int k = 0; k < r; k++) {
        int src = p->n_perm ? p->perm[k] : r - 1 - k;
        m.istride[k] = istr[src];
        for (int64_t o = 0; o < y->dims[k]; o++)
            m.map[k][o] = o;
    }
    nnf_gather_map_run(&m, y->data, x->data, nnf_dtype_size(x->dtype), NULL);
    nnf_gather_map_free(&m);
    return NNF_OK;
}

/* Concat and Split view a tensor as [outer, extent(axis) * inner] rows. */
static void axis_split(const int64_t *dims, int rank, int axis, size_t *outer, size_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < axis; i++)
        *outer *= (size_t)dims[i];
    for (int i = axis + 1; i < rank; i++)
        *inner *= (size_t)dims[i];
}

nnf_status nnf_concat_ref(NNF_KERNEL_ARGS) {
    const nnf_axis_params *p = node->params;
    nnf_buf *y = out[0];
    int axis;
    NNF_CHECK(nnf_norm_axis(node, p->axis, y->rank, &axis));
    size_t es = nnf_dtype_size(y->dtype), outer, inner;
    axis_split(y->dims, y->rank, axis, &outer, &inner);
    size_t yrow = (size_t)y->dims[axis] * inner * es, off = 0;
    for (int i = 0; i < node->n_inputs; i++) {
        const nnf_buf *x = in[i];
        size_t xrow = (size_t)x->dims[axis] * inner * es;
        if (off + xrow > yrow)
            return nnf_node_error(node, NNF_ERR_INTERNAL, "inputs exceed the output");
        for (size_t o = 0; o < outer && xrow; o++)
            memcpy((uint8_t *)y->data + o * yrow + off, (const uint8_t *)x->data + o * xrow, xrow);
        off += xrow;
    }
    return NNF_OK;
}

nnf_status nnf_split_ref(NNF_KERNEL_ARGS) {
    const nnf_split_params *p = node->params;
    const nnf_buf *x = in[0];
    int axis;
    NNF_CHECK(nnf_norm_axis(node, p->axis, x->rank, &axis));
    size_t es = nnf_dtype_size(x->dtype), outer, inner;
    axis_split(x->dims, x->rank, axis, &outer, &inner);
    size_t xrow = (size_t)x->dims[axis] * inner * es, off = 0;
    for (int i = 0; i < node->n_outputs; i++) {
        nnf_buf *y = nnf_kout(node, out, i);
        if (!y)
            continue;
        size_t yrow = (size_t)y->dims[axis] * inner * es;
        if (off + yrow > xrow)
            return nnf_node_error(node, NNF_ERR_INTERNAL, "outputs exceed the input");
        for (size_t o = 0; o < outer && yrow; o++)
            memcpy((uint8_t *)y->data + o * yrow, (const uint8_t *)x->data + o * xrow + off, yrow);
        off += yrow;
    }
    return NNF_OK;
}

nnf_status nnf_slice_ref(NNF_KERNEL_ARGS) {
    const nnf_buf *x = in[0];
    nnf_buf *y = out[0];
    nnf_ivec v[4];
    nnf_slice_args_attr(node->params, v);
    static const char *names[4] = {"starts", "ends", "axes", "steps"};
    if (node->opset >= 10)
        for (int i = 0; i < 4; i++) {
            const nnf_buf *b = nnf_kin(node, in, i + 1);
            if (b)
                NNF_CHECK(nnf_buf_ivec(node, b, names[i], &v[i]));
        }
    nnf_slice_plan plan;
    NNF_CHECK(nnf_slice_resolve(node, x->rank, x->dims, &v[0], &v[1], &v[2], &v[3], &plan));
    for (int k = 0; k < x->rank; k++)
        if (plan.count[k] != y->dims[k])
            return nnf_node_error(node, NNF_ERR_INTERNAL, "axis %d: output extent %lld, slice %lld",
                                  k, (long long)y->dims[k], (long long)plan.count[k]);
    nnf_gather_map m;
    NNF_CHECK(nnf_gather_map_alloc(node, x->rank, y->dims, &m));
    nnf_strides(x->rank, x->dims, m.istride);
    for (int k = 0; k < x->rank; k++)
        for (int64_t o = 0; o < y->dims[k]; o++)
            m.map[k][o] = plan.start[k] + o * plan.step[k];
    nnf_gather_map_run(&m, y->data, x->data, nnf_dtype_size(x->dtype), NULL);
    nnf_gather_map_free(&m);
    return NNF_OK;
}

/* Input index for output position o of a padded axis of extent d, or -1 for
 * the constant border. Negative pads crop first and the other modes then see
 * only the kept range [lo, hi), as ONNX Runtime does (it matters for wrap);
 * reflect folds like numpy (period 2(n-1)). */
static int64_t pad_index(nnf_pad_mode mode, int64_t o, int64_t begin, int64_t end, int64_t d) {
    int64_t lo = begin < 0 ? -begin : 0, hi = end < 0 ? d + end : d, n = hi - lo;
    int64_t i = o - begin;
    if (i >= lo && i < hi)
        return i;
    switch (mode) {
    case NNF_PAD_EDGE: return i < lo ? lo : hi - 1;
    case NNF_PAD_WRAP: return lo + ((i - lo) % n + n) % n;
    case NNF_PAD_REFLECT: {
        if (n == 1)
            return lo;
        int64_t period = 2 * (n - 1), t = ((i - lo) % period + period) % period;
        return lo + (t < n ? t : period - t);
    }
    default: return -1;
    }
}

nnf_status nnf_pad_ref(NNF_KERNEL_ARGS) {
    const nnf_pad_params *p = node->params;
    const nnf_buf *x = in[0];
    nnf_buf *y = out[0];
    int r = x->rank;
    nnf_ivec pads = {p->n_pads, NNF_DTYPE_INT64, p->pads}, axes = {-1, NNF_DTYPE_INT64, NULL};
    const nnf_buf *cv = NULL;
    if (p->n_pads < 0) {
        NNF_CHECK(nnf_buf_ivec(node, in[1], "pads", &pads));
        cv = nnf_kin(node, in, 2);
        const nnf_buf *ab = nnf_kin(node, in, 3);
        if (ab)
            NNF_CHECK(nnf_buf_ivec(node, ab, "axes", &axes));
    }
    int64_t begin[NNF_MAX_RANK], end[NNF_MAX_RANK];
    NNF_CHECK(nnf_pad_resolve(node, r, &pads, &axes, begin, end));
    size_t es = nnf_dtype_size(x->dtype);
    uint8_t fill[16] = {0};
    if (cv && cv->numel)
        memcpy(fill, cv->data, es);
    else if (p->n_pads >= 0)
        nnf_store_f64(x->dtype, fill, 0, p->value);
    for (int k = 0; k < r; k++) {
        if (y->dims[k] != x->dims[k] + begin[k] + end[k])
            return nnf_node_error(node, NNF_ERR_INTERNAL, "axis %d: output extent %lld", k,
                                  (long long)y->dims[k]);
        int64_t kept = x->dims[k] + (begin[k] < 0 ? begin[k] : 0) + (end[k] < 0 ? end[k] : 0);
        if (kept <= 0 && (begin[k] > 0 || end[k] > 0) && p->mode != NNF_PAD_CONSTANT)
            return nnf_node_error(node, NNF_ERR_SHAPE,
                                  "cannot pad empty axis %d in a non-constant mode", k);
    }
    if (!y->numel)
        return NNF_OK;
    nnf_gather_map m;
    NNF_CHECK(nnf_gather_map_alloc(node, r, y->dims, &m));
    nnf_strides(r, x->dims, m.istride);
    for (int k = 0; k < r; k++)
        for (int64_t o = 0; o < y->dims[k]; o++)
            m.map[k][o] = pad_index(p->mode, o, begin[k], end[k], x->dims[k]);
    nnf_gather_map_run(&m, y->data, x->data, es, fill);
    nnf_gather_map_free(&m);
    return NNF_OK;
}

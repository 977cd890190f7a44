/* Reference Einsum: one loop over every combination of label values,
 * accumulating the product of the operands into the output (double for
 * floats, int64 for integers). Clear rather than fast: cost is the product of
 * all label extents. */
#include "kernels/ref/tensor_ref.h"

static int64_t load_i64(nnf_dtype t, const void *p, size_t i) {
    switch (t) {
    case NNF_DTYPE_INT8: return ((const int8_t *)p)[i];
    case NNF_DTYPE_INT16: return ((const int16_t *)p)[i];
    case NNF_DTYPE_INT32: return ((const int32_t *)p)[i];
    case NNF_DTYPE_INT64: return ((const int64_t *)p)[i];
    case NNF_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case NNF_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case NNF_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    case NNF_DTYPE_UINT64: return (int64_t)((const uint64_t *)p)[i];
    default: return 0;
    }
}

/* Store the low bits of v, wrapping like the integer type. */
static void store_i64(nnf_dtype t, void *p, size_t i, int64_t v) {
    switch (t) {
    case NNF_DTYPE_INT8:
    case NNF_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case NNF_DTYPE_INT16:
    case NNF_DTYPE_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case NNF_DTYPE_INT32:
    case NNF_DTYPE_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    default: ((uint64_t *)p)[i] = (uint64_t)v; break;
    }
}

nnf_status nnf_einsum_ref(NNF_KERNEL_ARGS) {
    int n_in = node->n_inputs;
    int ranks[NNF_EINSUM_MAX_INPUTS];
    const int64_t *dims[NNF_EINSUM_MAX_INPUTS];
    for (int i = 0; i < n_in; i++) {
        ranks[i] = in[i]->rank;
        dims[i] = in[i]->dims;
    }
    nnf_einsum_plan pl;
    NNF_CHECK(nnf_einsum_resolve(node, n_in, ranks, dims, &pl));
    nnf_buf *y = out[0];
    nnf_dtype t = y->dtype;
    bool is_float = t == NNF_DTYPE_FLOAT32 || t == NNF_DTYPE_FLOAT64 || t == NNF_DTYPE_FLOAT16 ||
                    t == NNF_DTYPE_BFLOAT16;
    /* per-label strides of every operand and of the output; a dim of extent
     * 1 against a larger label broadcasts (stride 0) */
    int64_t (*stride)[NNF_EINSUM_MAX_LABELS] = nnf_calloc((size_t)n_in + 1, sizeof *stride);
    double *accf = NULL;
    int64_t *acci = NULL;
    if (!stride)
        goto oom;
    for (int i = 0; i < n_in; i++) {
        int64_t s[NNF_MAX_RANK];
        nnf_strides(ranks[i], dims[i], s);
        for (int k = 0; k < ranks[i]; k++) {
            int l = pl.in_label[i][k];
            if (dims[i][k] != 1 || pl.extent[l] == 1)
                stride[i][l] += s[k];
        }
    }
    int64_t os[NNF_MAX_RANK];
    nnf_strides(pl.out_rank, y->dims, os);
    for (int k = 0; k < pl.out_rank; k++)
        stride[n_in][pl.out_label[k]] = os[k];
    if (is_float)
        accf = nnf_calloc(y->numel ? y->numel : 1, sizeof *accf);
    else
        acci = nnf_calloc(y->numel ? y->numel : 1, sizeof *acci);
    if (!accf && !acci)
        goto oom;
    bool empty = false;
    for (int l = 0; l < pl.n_labels; l++)
        empty |= pl.extent[l] == 0;
    int64_t idx[NNF_EINSUM_MAX_LABELS] = {0};
    while (!empty) {
        int64_t off[NNF_EINSUM_MAX_INPUTS + 1] = {0};
        for (int i = 0; i <= n_in; i++)
            for (int l = 0; l < pl.n_labels; l++)
                off[i] += idx[l] * stride[i][l];
        if (is_float) {
            double v = 1;
            for (int i = 0; i < n_in; i++)
                v *= nnf_load_f64(t, in[i]->data, (size_t)off[i]);
            accf[off[n_in]] += v;
        } else {
            uint64_t v = 1; /* wraps like the integer type instead of overflowing */
            for (int i = 0; i < n_in; i++)
                v *= (uint64_t)load_i64(t, in[i]->data, (size_t)off[i]);
            acci[off[n_in]] = (int64_t)((uint64_t)acci[off[n_in]] + v);
        }
        int l = pl.n_labels - 1;
        while (l >= 0 && ++idx[l] == pl.extent[l])
            idx[l--] = 0;
        if (l < 0)
            break;
    }
    for (size_t i = 0; i < y->numel; i++) {
        if (is_float)
            nnf_store_f64(t, y->data, i, accf[i]);
        else
            store_i64(t, y->data, i, acci[i]);
    }
    nnf_free(stride);
    nnf_free(accf);
    nnf_free(acci);
    return NNF_OK;
oom:
    nnf_free(stride);
    nnf_free(accf);
    nnf_free(acci);
    return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for Einsum");
}

/* Strided index iteration over a broadcast output.
 *
 * Each operand gets an element stride per output dim (0 where it is
 * broadcast); adjacent dims whose strides chain for every operand are merged,
 * so a same-shape add is one run and a per-channel add over NCHW is N*C runs
 * of H*W. The innermost merged dim is the run handed to the row function. */
#include "kernels/ref/broadcast.h"

#include <string.h>

void nnf_ref_broadcast(const nnf_buf *out, int n_in, const nnf_bcast_in *in, nnf_bcast_row_fn row,
                       const void *ctx) {
    if (out->numel == 0)
        return;
    int64_t dims[NNF_MAX_RANK];
    int64_t st[NNF_BCAST_MAX_IN][NNF_MAX_RANK];
    int r = 0;
    /* Build strides in output-dim order, dropping extent-1 dims. */
    int64_t run_stride[NNF_BCAST_MAX_IN];
    for (int k = 0; k < n_in; k++)
        run_stride[k] = 1;
    int64_t tmp_st[NNF_BCAST_MAX_IN][NNF_MAX_RANK];
    for (int i = out->rank - 1; i >= 0; i--) {
        for (int k = 0; k < n_in; k++) {
            int ik = i - (out->rank - in[k].rank);
            int64_t d = ik >= 0 ? in[k].dims[ik] : 1;
            tmp_st[k][i] = d == 1 ? 0 : run_stride[k];
            run_stride[k] *= d;
        }
    }
    for (int i = 0; i < out->rank; i++) {
        if (out->dims[i] == 1)
            continue;
        if (r > 0) {
            int chain = 1;
            for (int k = 0; k < n_in; k++)
                if (st[k][r - 1] != tmp_st[k][i] * out->dims[i])
                    chain = 0;
            if (chain) {
                dims[r - 1] *= out->dims[i];
                for (int k = 0; k < n_in; k++)
                    st[k][r - 1] = tmp_st[k][i];
                continue;
            }
        }
        dims[r] = out->dims[i];
        for (int k = 0; k < n_in; k++)
            st[k][r] = tmp_st[k][i];
        r++;
    }
    size_t out_elem = nnf_dtype_size(out->dtype);
    size_t run = r > 0 ? (size_t)dims[r - 1] : 1;
    ptrdiff_t run_step[NNF_BCAST_MAX_IN];
    for (int k = 0; k < n_in; k++)
        run_step[k] = r > 0 ? (ptrdiff_t)st[k][r - 1] : 0;
    size_t runs = out->numel / run;

    int64_t idx[NNF_MAX_RANK];
    memset(idx, 0, sizeof idx);
    int64_t off[NNF_BCAST_MAX_IN] = {0};
    const void *ptr[NNF_BCAST_MAX_IN];
    char *o = out->data;
    for (size_t j = 0; j < runs; j++) {
        for (int k = 0; k < n_in; k++)
            ptr[k] = (const char *)in[k].data + off[k] * (int64_t)in[k].elem_size;
        row(ctx, run, o, ptr, run_step);
        o += run * out_elem;
        /* Odometer over the outer dims (all but the run). */
        for (int d = r - 2; d >= 0; d--) {
            for (int k = 0; k < n_in; k++)
                off[k] += st[k][d];
            if (++idx[d] < dims[d])
                break;
            for (int k = 0; k < n_in; k++)
                off[k] -= st[k][d] * dims[d];
            idx[d] = 0;
        }
    }
}

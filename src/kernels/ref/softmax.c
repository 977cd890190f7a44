/* Reference kernel of Softmax, LogSoftmax and Hardmax (float32).
 *
 * The input is viewed as [outer, n, inner] and each of the outer*inner lines
 * of n elements (stride inner) is normalised. Opsets before 13 flatten at
 * axis, so n is the product of the dims from axis on and inner is 1. The max
 * is subtracted before exp, so large logits do not overflow; sums are kept in
 * double. Rank 0 is a single line of one element. */
#include "ops/elementwise.h"

#include <math.h>

static void softmax_line(nnf_softmax_kind kind, const float *x, float *y, int64_t n, int64_t step) {
    float mx = -INFINITY;
    int64_t arg = 0;
    for (int64_t k = 0; k < n; k++) {
        float v = x[k * step];
        if (v > mx) {
            mx = v;
            arg = k;
        }
    }
    if (kind == NNF_HARDMAX) {
        for (int64_t k = 0; k < n; k++)
            y[k * step] = k == arg ? 1.0f : 0.0f;
        return;
    }
    double sum = 0.0;
    for (int64_t k = 0; k < n; k++)
        sum += exp((double)x[k * step] - (double)mx);
    if (kind == NNF_LOG_SOFTMAX) {
        double lse = log(sum);
        for (int64_t k = 0; k < n; k++)
            y[k * step] = (float)((double)x[k * step] - (double)mx - lse);
    } else {
        for (int64_t k = 0; k < n; k++)
            y[k * step] = (float)(exp((double)x[k * step] - (double)mx) / sum);
    }
}

nnf_status nnf_softmax_ref(NNF_KERNEL_ARGS) {
    const nnf_softmax_params *p = node->params;
    const nnf_buf *x = in[0];
    if (x->dtype != NNF_DTYPE_FLOAT32)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "no %s kernel", nnf_dtype_name(x->dtype));
    int64_t outer = 1, n = 1, inner = 1;
    if (x->rank > 0) {
        int axis;
        NNF_CHECK(nnf_norm_axis(node, p->axis, x->rank, &axis));
        for (int i = 0; i < x->rank; i++) {
            if (i < axis)
                outer *= x->dims[i];
            else if (i == axis || p->coerce_2d)
                n *= x->dims[i];
            else
                inner *= x->dims[i];
        }
    }
    if (x->numel == 0)
        return NNF_OK;
    const float *src = x->data;
    float *dst = out[0]->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
            int64_t base = o * n * inner + j;
            softmax_line(p->kind, src + base, dst + base, n, inner);
        }
    return NNF_OK;
}

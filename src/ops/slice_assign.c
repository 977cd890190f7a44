/* nnfuse::SliceAssign: Y = X with updates written over windows of it along
 * one axis (every other extent the same as X's). passes/fold_slice_concat.c
 * makes it from a Concat one of whose inputs is a Slice of X at the place it
 * takes in the Concat's output (YOLOv5s's heads: [xy, wh, Slice(y, 4:85)]
 * along the last axis): the sliced part is never copied, and where X dies
 * at this node its buffer becomes Y's (the plan's in_place_inputs), so only
 * the updates are written. The reference kernel copies X first, as a Slice
 * and a Concat would have (the same rows on one thread; the plan,
 * plan_eltwise.c, runs them on the pool). A model file cannot name it. */
#include "kernels/eltwise_fast.h"
#include "ops/op.h"
#include "ops/tensor_common.h"

#include <string.h>

nnf_status nnf_slice_assign_infer(NNF_INFER_ARGS) {
    const nnf_slice_assign_params *p = node->params;
    const nnf_shape *xs = &in[0].shape;
    if (!p || xs->rank < 1 || p->axis < 0 || p->axis >= xs->rank)
        return nnf_node_error(node, NNF_ERR_SHAPE, "the base has no axis %lld",
                              p ? (long long)p->axis : -1LL);
    for (int k = 1; k < node->n_inputs; k++) {
        const nnf_shape *us = &in[k].shape;
        if (in[k].dtype != in[0].dtype || us->rank != xs->rank)
            return nnf_node_error(node, NNF_ERR_SHAPE, "update %d is not a %s tensor of rank %d", k,
                                  nnf_dtype_name(in[0].dtype), xs->rank);
        int64_t a = us->dims[p->axis], start = p->starts[k - 1];
        for (int d = 0; d < xs->rank; d++)
            if (d != p->axis && us->dims[d] >= 0 && xs->dims[d] >= 0 && us->dims[d] != xs->dims[d])
                return nnf_node_error(node, NNF_ERR_SHAPE,
                                      "update %d has extent %lld on axis %d, the base %lld", k,
                                      (long long)us->dims[d], d, (long long)xs->dims[d]);
        if (start < 0 || (a >= 0 && xs->dims[p->axis] >= 0 && start + a > xs->dims[p->axis]))
            return nnf_node_error(node, NNF_ERR_SHAPE,
                                  "update %d does not fit the base's axis %lld", k,
                                  (long long)p->axis);
    }
    out[0].dtype = in[0].dtype;
    out[0].shape = *xs;
    return NNF_OK;
}

/* Rows [r0, r1) of the outer extent: each update's run of that row to its
 * window; the base's row first when y is not x. */
typedef struct assign_job {
    const nnf_node *node;
    nnf_buf *const *in;
    char *y;
    size_t ylen, inner; /* bytes per outer row of y; bytes per index along the axis */
} assign_job;

static void assign_rows(const assign_job *j, size_t r0, size_t r1) {
    const nnf_slice_assign_params *p = j->node->params;
    const char *x = j->in[0]->data;
    if (j->y != x)
        memcpy(j->y + r0 * j->ylen, x + r0 * j->ylen, (r1 - r0) * j->ylen);
    for (int k = 1; k < j->node->n_inputs; k++) {
        size_t ulen = (size_t)j->in[k]->dims[p->axis] * j->inner,
               off = (size_t)p->starts[k - 1] * j->inner;
        const char *u = j->in[k]->data;
        char *y = j->y + off;
        /* a constant size compiles to moves (YOLOv5s's updates are 2 floats
         * a row: a call each) */
#define ROWS(BYTES)                                                                                \
    for (size_t r = r0; r < r1; r++)                                                               \
        memcpy(y + r * j->ylen, u + r * (BYTES), (BYTES));
        switch (ulen) {
        case 4: ROWS(4) break;
        case 8: ROWS(8) break;
        case 16: ROWS(16) break;
        default: ROWS(ulen) break;
        }
#undef ROWS
    }
}

static void assign_task(void *ctx, size_t r0, size_t n) {
    assign_job *j = ctx;
    assign_rows(j, r0, r0 + n);
}

/* The operands checked against the params (run-time shapes), the job set. */
static nnf_status assign_job_of(const nnf_node *node, nnf_buf *const *in, nnf_buf *const *out,
                                assign_job *j, size_t *outer) {
    const nnf_slice_assign_params *p = node->params;
    const nnf_buf *x = in[0], *y = out[0];
    size_t es = nnf_dtype_size(x->dtype), inner = es, rows = 1;
    if (!p || p->axis >= x->rank || y->numel != x->numel || y->dtype != x->dtype)
        return nnf_node_error(node, NNF_ERR_SHAPE, "the output does not match the base");
    for (int d = 0; d < x->rank; d++)
        if (d < p->axis)
            rows *= (size_t)x->dims[d];
        else if (d > p->axis)
            inner *= (size_t)x->dims[d];
    for (int k = 1; k < node->n_inputs; k++) {
        const nnf_buf *u = in[k];
        if (!u || u->rank != x->rank || u->dtype != x->dtype || p->starts[k - 1] < 0 ||
            p->starts[k - 1] + u->dims[p->axis] > x->dims[p->axis])
            return nnf_node_error(node, NNF_ERR_SHAPE, "update %d does not fit the base", k);
        for (int d = 0; d < x->rank; d++)
            if (d != p->axis && u->dims[d] != x->dims[d])
                return nnf_node_error(node, NNF_ERR_SHAPE, "update %d does not fit the base", k);
    }
    *j = (assign_job){node, in, out[0]->data, (size_t)x->dims[p->axis] * inner, inner};
    *outer = rows;
    return NNF_OK;
}

nnf_status nnf_slice_assign_run(const nnf_node *node, nnf_buf *const *in, nnf_buf *const *out,
                                nnf_threadpool *pool) {
    assign_job j;
    size_t outer;
    NNF_CHECK(assign_job_of(node, in, out, &j, &outer));
    /* rows of about 64 KiB a hand-off */
    size_t grain = j.ylen >= ((size_t)64 << 10) ? 1 : ((size_t)64 << 10) / (j.ylen ? j.ylen : 1);
    nnf_ew_parallel_ranges(pool, outer, grain, assign_task, &j);
    return NNF_OK;
}

nnf_status nnf_slice_assign_ref(NNF_KERNEL_ARGS) {
    (void)ctx;
    return nnf_slice_assign_run(node, in, out, NULL);
}

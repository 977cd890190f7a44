/* Plans for the indexing operators whose reference kernels work a row at a
 * time (GatherElements, TopK): the same row functions
 * (kernels/ref/tensor_ref.h), over the pool in ranges of rows. Rows are
 * independent and each writes only its own outputs. On a failure in any
 * range (an index out of range, TopK's allocation for k over 256) the
 * reference kernel runs again on one thread and reports the first failure,
 * so the message does not depend on the thread count. */
#include "kernels/eltwise_fast.h"
#include "kernels/ref/tensor_ref.h"

#include <stdatomic.h>

/* Elements a range should hold at least, so that a block costs far more
 * than handing it to a thread. */
#define INDEX_GRAIN 16384

static size_t rows_grain(int64_t row_len) {
    return row_len >= INDEX_GRAIN ? 1 : (size_t)(INDEX_GRAIN / (row_len > 0 ? row_len : 1));
}

typedef struct index_job {
    const nnf_buf *x, *idx;
    nnf_buf *y, *y2;
    int axis;
    bool largest;
    atomic_bool failed;
} index_job;

static void gather_elements_range(void *p, size_t first, size_t count) {
    index_job *j = p;
    int64_t bad;
    if (!nnf_gather_elements_rows(j->x, j->idx, j->y, j->axis, first, count, &bad))
        atomic_store_explicit(&j->failed, true, memory_order_relaxed);
}

static nnf_status gather_elements_run(NNF_KERNEL_ARGS) {
    const nnf_buf *x = in[0], *idx = in[1];
    int axis;
    NNF_CHECK(nnf_gather_elements_check(node, x, idx, &axis));
    if (!idx->numel)
        return NNF_OK;
    int64_t row = idx->dims[idx->rank - 1];
    index_job j = {.x = x, .idx = idx, .y = out[0], .axis = axis};
    nnf_ew_parallel_ranges(ctx->pool, idx->numel / (size_t)row, rows_grain(row),
                           gather_elements_range, &j);
    return atomic_load(&j.failed) ? nnf_gather_elements_ref(node, in, out, ctx) : NNF_OK;
}

nnf_status nnf_plan_gather_elements(NNF_PLAN_ARGS) {
    (void)out;
    if (!node->params || !in[0].present || !in[1].present || in[0].shape.rank < 1)
        return NNF_OK;
    plan->name = "gather_elements_rows";
    plan->run = gather_elements_run;
    return NNF_OK;
}

static void top_k_range(void *p, size_t first, size_t count) {
    index_job *j = p;
    if (!nnf_top_k_rows(j->x, j->y, j->y2, j->axis, j->largest, first, count))
        atomic_store_explicit(&j->failed, true, memory_order_relaxed);
}

static nnf_status top_k_run(NNF_KERNEL_ARGS) {
    const nnf_topk_params *p = node->params;
    const nnf_buf *x = in[0];
    int axis;
    NNF_CHECK(nnf_top_k_check(node, x, out[0], &axis));
    int64_t d = x->dims[axis];
    if (!d || !x->numel)
        return NNF_OK;
    index_job j = {
        .x = x, .y = out[0], .y2 = nnf_kout(node, out, 1), .axis = axis, .largest = p->largest};
    nnf_ew_parallel_ranges(ctx->pool, x->numel / (size_t)d, rows_grain(d), top_k_range, &j);
    return atomic_load(&j.failed) ? nnf_top_k_ref(node, in, out, ctx) : NNF_OK;
}

nnf_status nnf_plan_top_k(NNF_PLAN_ARGS) {
    (void)out;
    if (!node->params || !in[0].present || in[0].shape.rank < 1)
        return NNF_OK;
    plan->name = "top_k_rows";
    plan->run = top_k_run;
    return NNF_OK;
}

/* nnfuse::Attention (ops/attention.h): shape inference, cost and the
 * reference kernel, each the ops' it stands for. */
#include "ops/attention.h"

#include "base/alloc.h"

#include <string.h>

void nnf_attention_split(const nnf_node *node, nnf_node *qk, nnf_node *sm, nnf_node *pv) {
    const nnf_attention_params *p = node->params;
    *qk = *sm = *pv = *node;
    qk->op_type = pv->op_type = "MatMul";
    sm->op_type = "Softmax";
    qk->params = (void *)&p->qk;
    pv->params = (void *)&p->pv;
    sm->params = (void *)&p->sm;
    qk->n_inputs = p->n_qk;
    sm->n_inputs = 1;
    pv->n_inputs = 2;
}

/* The scores' shape and type from the node's inputs. */
static nnf_status scores_info(const nnf_node *qk, const nnf_tinfo *in, nnf_tinfo *s) {
    memset(s, 0, sizeof *s);
    s->present = true;
    s->shape.rank = -1;
    return nnf_matmul_infer(qk, in, s);
}

nnf_status nnf_attention_infer(NNF_INFER_ARGS) {
    nnf_node qk, sm, pv;
    nnf_attention_split(node, &qk, &sm, &pv);
    nnf_tinfo t[2];
    NNF_CHECK(scores_info(&qk, in, &t[0]));
    t[1] = in[node->n_inputs - 1];
    return nnf_matmul_infer(&pv, t, out);
}

double nnf_attention_cost(NNF_COST_ARGS) {
    nnf_node qk, sm, pv;
    nnf_attention_split(node, &qk, &sm, &pv);
    nnf_tinfo t[2];
    if (scores_info(&qk, in, &t[0]) != NNF_OK) {
        nnf_error_clear();
        return 0;
    }
    t[1] = in[node->n_inputs - 1];
    return nnf_matmul_cost(&qk, in, &t[0]) + nnf_softmax_cost(&sm, &t[0], &t[0]) +
           nnf_matmul_cost(&pv, t, out);
}

/* The reference kernels, the scores in a buffer of their own. */
nnf_status nnf_attention_ref(NNF_KERNEL_ARGS) {
    const nnf_attention_params *p = node->params;
    nnf_node qk, sm, pv;
    nnf_attention_split(node, &qk, &sm, &pv);
    nnf_tinfo t[4] = {{0}}, s;
    for (int i = 0; i < qk.n_inputs && i < 4; i++) {
        t[i].present = in[i] != NULL;
        if (in[i]) {
            t[i].dtype = in[i]->dtype;
            t[i].shape.rank = in[i]->rank;
            memcpy(t[i].shape.dims, in[i]->dims, sizeof in[i]->dims);
        }
    }
    if (qk.n_inputs > 4)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "too many inputs");
    NNF_CHECK(scores_info(&qk, t, &s));
    int64_t n = nnf_shape_numel(&s.shape);
    if (n < 0)
        return nnf_node_error(node, NNF_ERR_SHAPE, "the scores' shape is not known");
    nnf_buf scores = {.dtype = NNF_DTYPE_FLOAT32, .rank = s.shape.rank, .numel = (size_t)n};
    memcpy(scores.dims, s.shape.dims, sizeof scores.dims);
    scores.data = nnf_calloc(n ? (size_t)n : 1, sizeof(float));
    if (!scores.data)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for %lld scores",
                              (long long)n);
    nnf_buf *ps = &scores, *in2[2] = {&scores, in[node->n_inputs - 1]};
    nnf_status st = nnf_matmul_ref(&qk, in, &ps, ctx);
    if (st == NNF_OK && p->where_cond >= 0) {
        /* Where(cond, scores, other) or Where(cond, other, scores), in place */
        nnf_node wh = *node;
        wh.op_type = "Where";
        wh.params = NULL;
        wh.n_inputs = 3;
        nnf_buf *w_in[3] = {in[p->where_cond], p->scores_first ? &scores : in[p->where_cond + 1],
                            p->scores_first ? in[p->where_cond + 1] : &scores};
        st = nnf_where_ref(&wh, w_in, &ps, ctx);
    }
    if (st == NNF_OK)
        st = nnf_softmax_ref(&sm, &ps, &ps, ctx);
    if (st == NNF_OK)
        st = nnf_matmul_ref(&pv, in2, out, ctx);
    nnf_free(scores.data);
    return st;
}

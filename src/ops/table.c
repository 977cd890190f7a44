#include "ops/op.h"

#include "ops/tensor_common.h"

#include <string.h>

static const nnf_op_def op_table[] = {
#define NNF_OP(domain, name, since, until, in_min, in_max, out_min, out_max, dtypes, init, infer,  \
               ref, cost, plan)                                                                    \
    {domain, name, since, until, in_min, in_max, out_min, out_max, dtypes, init, infer, ref, cost, \
     plan, false},
#define NNF_OP_SYM(domain, name, since, until, in_min, in_max, out_min, out_max, dtypes, init,     \
                   infer, ref, cost, plan)                                                         \
    {domain, name, since, until, in_min, in_max, out_min, out_max, dtypes, init, infer, ref, cost, \
     plan, true},
#include "ops/list_all.inc"
#undef NNF_OP
#undef NNF_OP_SYM
};

size_t nnf_op_count(void) { return sizeof op_table / sizeof op_table[0]; }

const nnf_op_def *nnf_op_at(size_t i) { return i < nnf_op_count() ? &op_table[i] : NULL; }

static int same_domain(const char *a, const char *b) {
    if (!a || !strcmp(a, "ai.onnx"))
        a = "";
    if (!b || !strcmp(b, "ai.onnx"))
        b = "";
    return !strcmp(a, b);
}

const nnf_op_def *nnf_op_find(const char *domain, const char *name, int opset,
                              const nnf_op_def **other_range) {
    if (other_range)
        *other_range = NULL;
    for (size_t i = 0; i < nnf_op_count(); i++) {
        const nnf_op_def *d = &op_table[i];
        if (strcmp(d->name, name) || !same_domain(d->domain, domain))
            continue;
        if (opset >= d->since_version && opset <= d->until_version)
            return d;
        if (other_range)
            *other_range = d;
    }
    return NULL;
}

nnf_status nnf_init_none(NNF_INIT_ARGS) { return NNF_OK; }

/* The internal operators' init: only graph passes make them (they set the
 * params themselves), so one named in a model file is refused. */
nnf_status nnf_init_internal(NNF_INIT_ARGS) {
    (void)arena;
    return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                          "%s::%s is an internal operator, made by nnfuse's graph passes; a model "
                          "file cannot use it",
                          node->domain, node->op_type);
}
double nnf_cost_none(NNF_COST_ARGS) { return 0.0; }
nnf_status nnf_plan_none(NNF_PLAN_ARGS) { return NNF_OK; }

bool nnf_is_view_op(const nnf_node *n) {
    static const char *const views[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"};
    if (n->domain[0])
        return false;
    if (!strcmp(n->op_type, "Transpose"))
        return n->params && ((const nnf_transpose_params *)n->params)->view;
    for (size_t i = 0; i < sizeof views / sizeof views[0]; i++)
        if (!strcmp(n->op_type, views[i]))
            return true;
    return false;
}

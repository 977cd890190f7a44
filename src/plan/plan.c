#include "plan/plan.h"

#include "base/log.h"

#include <string.h>


/* Live readers of each value (graph outputs count as readers). */
static int *count_readers(const nnf_graph *g) {
    int *uses = nnf_calloc((size_t)g->n_values + 1, sizeof(int));
    if (!uses)
        return NULL;
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; !g->nodes[i].dead && k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0)
                uses[g->nodes[i].inputs[k]]++;
    for (int k = 0; k < g->n_outputs; k++)
        uses[g->outputs[k]]++;
    return uses;
}

nnf_status nnf_graph_plan(nnf_graph *g, bool release_packed, nnf_kernel_plan **plans_out) {
    nnf_kernel_plan *plans = nnf_calloc((size_t)g->n_nodes + 1, sizeof *plans);
    int *uses = count_readers(g);
    if (!plans || !uses) {
        nnf_free(plans);
        nnf_free(uses);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory planning kernels");
    }
    nnf_tinfo in[64], out[64];
    for (int oi = 0; oi < g->n_order; oi++) {
        int id = g->order[oi];
        const nnf_node *n = &g->nodes[id];
        if (n->dead || !n->op->plan || n->op->plan == nnf_plan_none || n->n_inputs > 64 || n->n_outputs > 64)
            continue;
        bool known = true;
        for (int k = 0; k < n->n_inputs; k++) {
            nnf_value_tinfo(g, n->inputs[k], &in[k]);
            known &= !in[k].present || nnf_shape_known(&in[k].shape);
        }
        for (int k = 0; k < n->n_outputs; k++) {
            nnf_value_tinfo(g, n->outputs[k], &out[k]);
            known &= !out[k].present || nnf_shape_known(&out[k].shape);
        }
        if (!known && !n->op->plan_symbolic)
            continue;
        nnf_status st = n->op->plan(n, in, out, &plans[id]);
        if (st != NNF_OK) {
            nnf_graph_plans_free(g, plans);
            nnf_free(uses);
            return nnf_error_prefix(st, "planning node '%s' (%s)", n->name, n->op_type);
        }
        if (!plans[id].run)
            continue;
        NNF_LOG_DEBUG("node '%s' (%s): kernel %s", n->name, n->op_type, plans[id].name);
        for (int k = 0; release_packed && k < n->n_inputs && k < 32; k++) {
            int v = n->inputs[k];
            if ((plans[id].packed_inputs >> k & 1) && v >= 0 && uses[v] == 1 &&
                nnf_graph_release_value_data(g, v))
                NNF_LOG_TRACE("released the unpacked copy of '%s'", g->values[v].name);
        }
    }
    nnf_free(uses);
    *plans_out = plans;
    return NNF_OK;
}

void nnf_graph_plans_free(const nnf_graph *g, nnf_kernel_plan *plans) {
    if (!plans)
        return;
    for (int i = 0; i < g->n_nodes; i++)
        if (plans[i].free_state)
            plans[i].free_state(plans[i].state);
    nnf_free(plans);
}

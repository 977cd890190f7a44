/* Kernel plans for a whole graph: for every node whose shapes are known at
 * load, the op's plan hook chooses a kernel and packs constant weights once.
 * Plans are immutable and shared by every session of the model. */
#ifndef NNF_PLAN_PLAN_H
#define NNF_PLAN_PLAN_H

#include "ops/op.h"

/* *plans_out: one entry per node id (run NULL = reference kernel). */
nnf_status nnf_graph_plan(const nnf_graph *g, nnf_kernel_plan **plans_out);
void nnf_graph_plans_free(const nnf_graph *g, nnf_kernel_plan *plans);

#endif

/* Kernel plans for a whole graph: for every node whose shapes are known at
 * load, the op's plan hook chooses a kernel and packs constant weights once.
 * Plans are immutable and shared by every session of the model. */
#ifndef NNF_PLAN_PLAN_H
#define NNF_PLAN_PLAN_H

#include "ops/op.h"

/* *plans_out: one entry per node id (run NULL = reference kernel). With
 * release_packed, a constant that a plan packed and that no other node reads
 * is released right after packing (see nnf_kernel_plan.packed_inputs). */
nnf_status nnf_graph_plan(nnf_graph *g, bool release_packed, nnf_kernel_plan **plans_out);
void nnf_graph_plans_free(const nnf_graph *g, nnf_kernel_plan *plans);

#endif

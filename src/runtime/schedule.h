/* The node order sessions run (runtime/schedule.c). */
#ifndef NNF_RUNTIME_SCHEDULE_H
#define NNF_RUNTIME_SCHEDULE_H

#include "ir/graph.h"
#include "ops/op.h"

/* Replace g->order (a topological order) by a depth-first one where that
 * lowers the simulated peak of live intermediate bytes; plans: the model's
 * kernel plans, one per node (their in_place_inputs). Keeps the order when
 * sizes are unknown or the graph holds subgraphs. */
nnf_status nnf_schedule_for_memory(nnf_graph *g, const nnf_kernel_plan *plans);

#endif

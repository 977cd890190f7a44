/* Kernel plans for a whole graph: for every node whose shapes are known at
 * load, the op's plan hook chooses a kernel and packs constant weights once.
 * Plans are immutable and shared by every session of the model. */
#ifndef NNF_PLAN_PLAN_H
#define NNF_PLAN_PLAN_H

#include "base/packs.h"
#include "base/threadpool.h"
#include "ops/op.h"

/* *plans_out: one entry per node id (run NULL = reference kernel). With
 * release_packed, a constant that a plan packed and that no other node reads
 * is released right after packing (see nnf_kernel_plan.packed_inputs). With
 * a pool of several threads, nodes are planned in parallel (the weight
 * transforms and packing that make most of a load's own work); the plans
 * are the same. packs (or NULL): the store each node's packed blocks are
 * recorded in or replayed from (base/packs.h); a node whose blocks are
 * replayed does not apply a folded BatchNorm's pending scale to the weights
 * it packs (nothing reads them), only to those it leaves unpacked. */
nnf_status nnf_graph_plan(nnf_graph *g, bool release_packed, nnf_threadpool *pool, nnf_packs *packs,
                          nnf_kernel_plan **plans_out);
void nnf_graph_plans_free(const nnf_graph *g, nnf_kernel_plan *plans);

#endif

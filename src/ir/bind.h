/* Binding nodes to the operator table, attribute parsing, and static
 * inference: the steps between import and execution. */
#ifndef NNF_IR_BIND_H
#define NNF_IR_BIND_H

#include "ir/graph.h"

/* Bind every node of g (and of its subgraphs) to its op table entry and check
 * arity. All unsupported operators are named in one message. */
nnf_status nnf_graph_bind_ops(nnf_graph *g);
/* Run every bound node's init (attributes → typed params). */
nnf_status nnf_graph_init_params(nnf_graph *g);
/* Infer dtypes and shapes of every value in topological order; nodes whose
 * inputs are all known constants and whose outputs are small are evaluated
 * now (constant folding of shape arithmetic) and their outputs become
 * NNF_VALUE_CONSTANT. Requires g->order. */
nnf_status nnf_graph_infer(nnf_graph *g);

/* Unsupported operators of g: writes up to max lines "domain:op (opset N) node 'x'"
 * into a caller array; returns the total count. Used by `nnfuse ops --check`. */
int nnf_graph_unsupported(const nnf_graph *g, char (*lines)[256], int max);

#endif

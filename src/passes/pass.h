/* Graph optimisation passes: one pass per file, run in the order pipeline.c
 * lists, each switchable off by name. A pass rewrites the inferred graph in
 * place (marking replaced nodes dead) and records what it fused for the
 * compile report. Passes run once at load; the model is immutable after. */
#ifndef NNF_PASSES_PASS_H
#define NNF_PASSES_PASS_H

#include "ir/graph.h"

typedef struct nnf_pass_ctx {
    nnf_graph *graph;
    int *uses;          /* per value: number of live (node, input slot) readers + graph outputs */
    int fusions;        /* count of rewrites done by the current pass */
} nnf_pass_ctx;

typedef struct nnf_pass {
    const char *name;
    int min_level; /* runs at -O<min_level> and above */
    nnf_status (*run)(nnf_pass_ctx *ctx);
    /* reads misaligned weights (nnf_value.misaligned) byte-wise, so it may
     * run before they are aligned; the first pass without it runs after */
    int bytewise;
} nnf_pass;

/* Run every enabled pass for opt_level. disabled: comma-separated pass names
 * (also read from NNF_DISABLE_PASSES). Re-sorts the graph afterwards. */
nnf_status nnf_passes_run(nnf_graph *g, int opt_level, const char *disabled);
/* Whether name is in the comma-separated list (NULL: no). The runtime's node
 * order (runtime/schedule.c) is switched off as "schedule" the same way. */
int nnf_pass_listed(const char *list, const char *name);

/* Helpers shared by passes. */
void nnf_pass_count_uses(nnf_pass_ctx *ctx);
/* Whether n is a live node of the default domain of this op type (NULL: no). */
bool nnf_pass_is_op(const nnf_node *n, const char *op);
/* x's axis i against y's axis k: the same extent (known, or the same
 * symbolic name), or, where may_broadcast, x's is 1. */
bool nnf_pass_dim_fits(const nnf_shape *x, int i, const nnf_shape *y, int k, bool may_broadcast);
/* x is shaped like y (its leading axes may be left out) but for extents of 1
 * where it broadcasts, except its last: whole rows of y's last axis, as a
 * GEMM epilogue reads a residual by batch and row (an attention mask). */
bool nnf_pass_rows_broadcast(const nnf_shape *x, const nnf_shape *y);
/* The live node producing value v, or NULL. */
nnf_node *nnf_pass_producer(nnf_pass_ctx *ctx, int v);
/* Record that `into` absorbed `from` (names kept for profile/compare). */
nnf_status nnf_pass_merge_names(nnf_pass_ctx *ctx, nnf_node *into, const nnf_node *from);
/* Make `node` produce `v` (the absorbed node's output) as its output k. */
void nnf_pass_take_output(nnf_pass_ctx *ctx, nnf_node *node, int k, int v);
/* Grow a node's input list to n entries (new ones NNF_NO_VALUE). */
nnf_status nnf_pass_resize_inputs(nnf_node *node, int n);
/* A float32 constant value's data, or NULL (also for a misaligned one, which
 * only byte-wise readers may read, and for one with a pending row scale,
 * nnf_value.row_scale, whose data is not yet its value). */
const float *nnf_pass_const_f32(const nnf_graph *g, int v);
/* The same data, misaligned too: for a pass that reads it byte-wise
 * (nnf_pass.bytewise). */
const void *nnf_pass_const_f32_bytes(const nnf_graph *g, int v);
/* The value of a float32 constant with one element (nnf_pass_const_f32's
 * rules), if v is one. */
bool nnf_pass_const_scalar(const nnf_graph *g, int v, float *out);
/* Release the data of constants no live node reads any more (weights that
 * were folded into new ones). */
void nnf_pass_release_unused(nnf_pass_ctx *ctx);
/* Add a new constant float32 value with the given shape; returns its id or -1. */
int nnf_pass_new_const(nnf_graph *g, const char *name, const nnf_shape *shape, float **data_out);
/* The same, taking over the data block of constant `from` when this rewrite's
 * node is its only reader and the graph owns it (copied at import, or made by
 * a pass): no new memory and no page faults, for data computed element by
 * element from the old (in place). `from` is left released; otherwise a new
 * block as nnf_pass_new_const. */
int nnf_pass_new_const_over(nnf_pass_ctx *ctx, int from, const char *name, const nnf_shape *shape,
                            float **data_out);

#endif

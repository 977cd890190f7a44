/* The operator table: one entry per supported (domain, op type), generated
 * from src/ops/list_*.inc. The registry, `nnfuse ops`, shape inference, the
 * executor and the op tests all derive from it.
 *
 * Each entry binds:
 *   init   parse + validate the node's attributes into a typed struct
 *          (node->params, allocated from the graph arena); runs at load.
 *          Unsupported attribute values return NNF_ERR_UNSUPPORTED.
 *   infer  output dtypes and shapes from input dtypes/shapes, and from input
 *          data where it is known (constants at load; everything at run time).
 *          Unknown extents stay -1 (symbolic names propagate where they can).
 *   ref    the portable reference kernel: clear, correct, the oracle in tests.
 *   cost   FLOPs for the given shapes (for `nnfuse info` and the profiler).
 *   plan   optional: choose an optimised kernel for fixed shapes, pack its
 *          weights, and fill an nnf_kernel_plan; leaves plan->run NULL to
 *          keep the reference kernel.
 * Functions that an op does not need are the shared nnf_*_none ones. */
#ifndef NNF_OPS_OP_H
#define NNF_OPS_OP_H

#include "base/threadpool.h"
#include "ir/graph.h"

/* A value as shape inference sees it. */
typedef struct nnf_tinfo {
    bool present;      /* false for an omitted optional input */
    nnf_dtype dtype;
    nnf_shape shape;
    const void *data;  /* non-NULL when the contents are known */
    /* at load, for an integer vector computed from shapes: its elements as
     * extents or symbolic dims (src/ops/dimvals.c); NULL at run time */
    const nnf_dimval *dimvals;
    int n_dimvals;
} nnf_tinfo;

/* A tensor as a kernel sees it: dense, row-major, shape fully known. */
typedef struct nnf_buf {
    nnf_dtype dtype;
    int rank;
    int64_t dims[NNF_MAX_RANK];
    void *data;
    size_t numel;
} nnf_buf;

typedef struct nnf_kctx {
    nnf_threadpool *pool; /* NULL = run inline */
    void *state;          /* the kernel plan's state (NULL for reference kernels) */
} nnf_kctx;

#define NNF_INIT_ARGS nnf_node *node, nnf_arena *arena
#define NNF_INFER_ARGS const nnf_node *node, const nnf_tinfo *in, nnf_tinfo *out
/* in[i] is NULL for an omitted optional input; out[] are allocated with the
 * inferred shapes before the call. */
#define NNF_KERNEL_ARGS const nnf_node *node, nnf_buf *const *in, nnf_buf *const *out, nnf_kctx *ctx
#define NNF_COST_ARGS const nnf_node *node, const nnf_tinfo *in, const nnf_tinfo *out

typedef nnf_status (*nnf_init_fn)(NNF_INIT_ARGS);
typedef nnf_status (*nnf_infer_fn)(NNF_INFER_ARGS);
typedef nnf_status (*nnf_kernel_fn)(NNF_KERNEL_ARGS);
typedef double (*nnf_cost_fn)(NNF_COST_ARGS);

typedef struct nnf_kernel_plan {
    const char *name;        /* e.g. "f32_gemm_6x16_avx2" */
    nnf_kernel_fn run;
    void *state;             /* packed weights etc., owned by the plan */
    void (*free_state)(void *state);
    /* bit k set: input k's constant data was packed into state and run never
     * reads it, so the loader may release the unpacked copy */
    unsigned packed_inputs;
    /* bit k set: run may write output 0 over input k (it reads each
     * element of input k just before writing the same element of output 0,
     * and nothing else of input k), so when input k dies at this node the
     * runtime may hand its buffer to the output */
    unsigned in_place_inputs;
} nnf_kernel_plan;
/* Shapes in in/out are fully known (also unknown extents for an op marked
 * NNF_OP_SYM); constant inputs (weights) carry data. */
#define NNF_PLAN_ARGS const nnf_node *node, const nnf_tinfo *in, const nnf_tinfo *out, nnf_kernel_plan *plan
typedef nnf_status (*nnf_plan_fn)(NNF_PLAN_ARGS);

typedef struct nnf_op_def {
    const char *domain; /* "" = ai.onnx */
    const char *name;
    int since_version, until_version;
    int min_inputs, max_inputs, min_outputs, max_outputs;
    const char *dtypes; /* comma-separated dtype names the kernels accept */
    nnf_init_fn init;
    nnf_infer_fn infer;
    nnf_kernel_fn ref;
    nnf_cost_fn cost;
    nnf_plan_fn plan;
    /* plan is also called for nodes whose shapes are not all known at load
     * (NNF_OP_SYM in the table); otherwise only with every shape known */
    bool plan_symbolic;
} nnf_op_def;

/* Declarations of every function the table names. */
#define NNF_OP(domain, name, since, until, in_min, in_max, out_min, out_max, dtypes, init, infer,  \
               ref, cost, plan)                                                                    \
    nnf_status init(NNF_INIT_ARGS);                                                                \
    nnf_status infer(NNF_INFER_ARGS);                                                              \
    nnf_status ref(NNF_KERNEL_ARGS);                                                               \
    double cost(NNF_COST_ARGS);                                                                    \
    nnf_status plan(NNF_PLAN_ARGS);
#define NNF_OP_SYM NNF_OP
#include "ops/list_all.inc"
#undef NNF_OP_SYM
#undef NNF_OP

nnf_status nnf_init_none(NNF_INIT_ARGS);
nnf_status nnf_init_internal(NNF_INIT_ARGS);
double nnf_cost_none(NNF_COST_ARGS);
nnf_status nnf_plan_none(NNF_PLAN_ARGS);

size_t nnf_op_count(void);
const nnf_op_def *nnf_op_at(size_t i);
/* The entry for (domain, name) whose range holds opset; NULL if none. If the
 * name exists for other opsets only, *other_range (may be NULL) is set to it. */
const nnf_op_def *nnf_op_find(const char *domain, const char *name, int opset,
                              const nnf_op_def **other_range);

/* Value v of g as inference sees it (v < 0: an absent optional input). An
 * empty constant counts as known data. */
void nnf_value_tinfo(const nnf_graph *g, int v, nnf_tinfo *t);
/* Node n's FLOPs from the shapes in g. An unknown extent is taken as 1 when
 * unit_extents, else the node is not countable: -1. So is one with an
 * unknown rank or more than 64 inputs or outputs. */
double nnf_node_cost(const nnf_graph *g, const nnf_node *n, bool unit_extents);
/* Ops whose output 0 is input 0's elements unchanged, only re-shaped (the
 * executor hands a dying input's buffer on to them; load-time folding
 * leaves large ones to the run). */
bool nnf_is_view_op(const nnf_node *n);
/* After node n's infer at load: the symbolic shape values of its output, for
 * the shape-arithmetic ops (src/ops/dimvals.c). */
nnf_status nnf_dimvals_infer(nnf_graph *g, const nnf_node *n);

/* Helpers shared by many ops. */
/* numpy-style broadcast of a and b into out; NNF_ERR_SHAPE if incompatible. */
nnf_status nnf_broadcast_shape(const nnf_shape *a, const nnf_shape *b, nnf_shape *out);
/* Normalise a possibly negative axis against rank; NNF_ERR_INVALID_MODEL if out of range. */
nnf_status nnf_norm_axis(const nnf_node *node, int64_t axis, int rank, int *out);
/* Read element i of a known integer tensor (int32/int64) as int64. */
int64_t nnf_tinfo_int(const nnf_tinfo *t, int64_t i);
/* An error naming the node and its operator. */
nnf_status nnf_node_error(const nnf_node *node, nnf_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif

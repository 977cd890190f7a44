/* The IR: the one data structure every stage shares.
 *
 * A graph owns values (tensors: inputs, initialisers, intermediates, outputs)
 * and nodes (operator applications), both addressed by dense integer ids.
 * Everything a graph allocates lives in its arena and dies with the graph;
 * initialiser data usually points into the memory-mapped model file (not
 * copied) and is kept alive by the model that owns the mapping.
 *
 * Shapes: rank < 0 = unknown rank; dims[i] < 0 = unknown extent, with
 * dim_names[i] naming a symbolic dimension when one is known ("batch"). */
#ifndef NNF_IR_GRAPH_H
#define NNF_IR_GRAPH_H

#include "base/alloc.h"
#include "base/status.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#define NNF_MAX_RANK 8
#define NNF_NO_VALUE (-1) /* an omitted optional input/output */

typedef struct nnf_graph nnf_graph;

/* An element of a small integer vector computed from shapes at run time,
 * as load knows it: an extent (v >= 0), a symbolic dim (v < 0, name set) or
 * unknown (v < 0, no name). See src/ops/dimvals.c. */
typedef struct nnf_dimval {
    int64_t v;
    const char *name;
} nnf_dimval;

typedef struct nnf_shape {
    int rank; /* -1 = unknown */
    int64_t dims[NNF_MAX_RANK];
    const char *dim_names[NNF_MAX_RANK];
} nnf_shape;

typedef enum nnf_value_kind {
    NNF_VALUE_INTERMEDIATE = 0,
    NNF_VALUE_INPUT,       /* graph input fed by the caller */
    NNF_VALUE_INITIALIZER, /* constant data (weights); may also be a graph input with a default */
    NNF_VALUE_CONSTANT,    /* data computed at load time (Constant node, folded shapes) */
} nnf_value_kind;

typedef struct nnf_value {
    const char *name;
    nnf_dtype dtype; /* NNF_DTYPE_UNDEFINED until inferred */
    nnf_shape shape;
    nnf_value_kind kind;
    bool is_output;  /* a graph output */
    int producer;    /* node id, or -1 */
    /* constant data for INITIALIZER/CONSTANT values: row-major, nbytes long,
     * aligned to the element size. Borrowed from the model's mapping or the
     * graph arena. */
    const void *data;
    size_t nbytes;
    /* the data was released after load (packed into a kernel plan, or no
     * longer read by any node): only planned kernels may run on it */
    bool released;
    /* an initialiser whose data stays in the model file at an address not
     * aligned for its dtype, because every reader copies it byte-wise (the
     * table of a Gather: a vocabulary's embeddings are read a row at a time,
     * never copied at load and never resident whole). The importer copies
     * any other misaligned initialiser into an aligned block. */
    bool misaligned;
    /* a compiled file holds this initialiser packed, and the load replays
     * it (runtime/compile.h): nothing reads it typed before the plan that
     * packed it releases it, so it is never aligned (copied) either */
    bool packed_away;
    /* a blocked (NCHWc8) twin made by the layout pass: the id of the value
     * whose data it holds in blocked layout; -1 for every other value. Tools
     * (hooks, dumps) see such a value as that logical value. */
    int blocked_of;
    /* a 0-D/1-D integer intermediate computed from shapes (Shape -> Gather
     * -> Concat): its n_dimvals elements as far as load knows them, for
     * Reshape's infer; NULL otherwise (src/ops/dimvals.c) */
    const nnf_dimval *dimvals;
    int n_dimvals;
    /* float data whose rows (first dim) still need multiplying by these
     * factors, one per row, in a block of the graph: a BatchNormalization
     * folded into the Conv that alone reads the weights (fold_batchnorm.c).
     * The plan applies them just before it plans that node
     * (nnf_graph_set_value_block), so the folded copy is still in the
     * caches when the kernel packs it; nothing reads such data before
     * (nnf_pass_const_f32 returns NULL for it). NULL otherwise. */
    const float *row_scale;
} nnf_value;

/* ONNX AttributeProto.AttributeType values. */
typedef enum nnf_attr_type {
    NNF_ATTR_UNDEFINED = 0,
    NNF_ATTR_FLOAT = 1,
    NNF_ATTR_INT = 2,
    NNF_ATTR_STRING = 3,
    NNF_ATTR_TENSOR = 4,
    NNF_ATTR_GRAPH = 5,
    NNF_ATTR_FLOATS = 6,
    NNF_ATTR_INTS = 7,
    NNF_ATTR_STRINGS = 8,
    NNF_ATTR_TENSORS = 9,
    NNF_ATTR_GRAPHS = 10,
} nnf_attr_type;

/* A constant tensor held by an attribute (Constant's value, ConstantOfShape's value). */
typedef struct nnf_const_tensor {
    nnf_dtype dtype;
    nnf_shape shape;
    const void *data;
    size_t nbytes;
    /* data points into the model at an address not aligned for the dtype
     * (only while importing initialisers: see nnf_value.misaligned) */
    bool misaligned;
} nnf_const_tensor;

typedef struct nnf_attr {
    const char *name;
    nnf_attr_type type;
    float f;
    int64_t i;
    const char *s; /* STRING: NUL-terminated copy (s_len bytes before the NUL) */
    size_t s_len;
    int count;      /* element count of FLOATS/INTS/STRINGS/TENSORS/GRAPHS */
    const float *floats;
    const int64_t *ints;
    const char **strings;
    nnf_const_tensor *tensor;  /* TENSOR; TENSORS: array of count */
    nnf_graph *graph;          /* GRAPH; GRAPHS: graphs[count] */
    nnf_graph **graphs;
} nnf_attr;

struct nnf_op_def;

typedef struct nnf_node {
    const char *name;    /* never NULL; synthesised "<op>_<id>" when the file has none */
    const char *op_type;
    const char *domain;  /* "" for the default ONNX domain */
    int opset;           /* the opset version in force for the node's domain */
    const struct nnf_op_def *op; /* NULL when unsupported */
    int n_inputs, n_outputs;
    int *inputs;  /* value ids; NNF_NO_VALUE for omitted optional inputs */
    int *outputs;
    int n_attrs;
    nnf_attr *attrs;
    void *params; /* the op's typed attribute struct, filled by op->init */
    bool dead;    /* removed by a pass; skipped everywhere */
    /* names of the original nodes a fusion merged into this one (this node's own
     * name first); NULL when the node was not fused. Arena-owned. */
    const char **fused_from;
    int n_fused_from;
} nnf_node;

typedef struct nnf_opset_import {
    const char *domain;
    int64_t version;
} nnf_opset_import;

/* A read-only file mapping that constant data points into. */
typedef struct nnf_mapping {
    struct nnf_mapping *next;
    const char *path;
    void *addr;
    size_t size;
    int fd; /* the file, open while mapped (copies read it with pread), or -1 */
} nnf_mapping;

struct nnf_graph {
    nnf_arena arena;
    nnf_mapping *mappings; /* external-data files; unmapped by nnf_graph_destroy */
    /* mappings values may point into that another graph owns (a shape plan's
     * graph reads its parent model's file) */
    const nnf_mapping *borrowed_mappings;
    nnf_graph *parent; /* enclosing graph of a subgraph (If/Loop body), else NULL */
    const char *name;
    const char *source; /* file the graph was read from, for messages ("<memory>") */

    nnf_value *values;
    int n_values, cap_values;
    nnf_node *nodes;
    int n_nodes, cap_nodes;
    int *inputs; /* value ids of caller-fed inputs, in file order */
    int n_inputs;
    int *outputs; /* value ids of graph outputs, in file order */
    int n_outputs;
    int *order; /* topological order of live nodes (nnf_graph_toposort) */
    int n_order;

    nnf_opset_import *opsets;
    int n_opsets;
    int64_t ir_version;
    const char *producer_name;
    /* the optimisation level whose passes will run: the load's constant
     * folding leaves them what they do better (bind.c read_as_matmul_b) */
    int opt_level;
};

nnf_status nnf_graph_create(nnf_graph **out);
void nnf_graph_destroy(nnf_graph *g);

/* A 64-byte aligned block of constant data owned by the graph (or its root
 * graph, for subgraphs) that, unlike the arena, can be released early once
 * nothing reads it. NULL on OOM. */
void *nnf_graph_block_alloc(nnf_graph *g, size_t size);
/* Release value v's data if it lives in a block of g: sets data NULL and
 * released. Returns true if memory was freed. */
bool nnf_graph_release_value_data(nnf_graph *g, int v);
/* Gives back the resident pages of value v's data where it is read from a
 * file mapping (the data stays readable: a later read faults them in again
 * from the page cache): a weight that one plan packed while others still may
 * read it. False where v is not in a mapping. */
bool nnf_graph_drop_value_pages(const nnf_graph *g, int v);
/* Detach value v's data block (it stays owned by the graph) so a new value can
 * hold it: sets data NULL and released. NULL if v's data is not a block of g
 * (borrowed from the file, or in the arena). */
void *nnf_graph_take_value_block(nnf_graph *g, int v);

/* dst = value val's data with its pending row scale applied (val->row_scale
 * set; the data read byte-wise, as it may be misaligned): nbytes of aligned
 * floats. Data in a file mapping of g is read from the file (pread), not
 * through the mapping. Touches no graph state. */
void nnf_value_scale_rows(const nnf_graph *g, const nnf_value *val, float *dst);
/* Value v's data becomes block (from nnf_graph_block_alloc), an ordinary
 * aligned copy: the old data and the row scale's block are released. */
void nnf_graph_set_value_block(nnf_graph *g, int v, void *block);

/* Whether node n reads its input k only byte-wise (memcpy of rows), so the
 * value may stay in the model file at an address not aligned for its dtype
 * (nnf_value.misaligned): the table of a Gather. */
bool nnf_node_reads_bytewise(const nnf_node *n, int k);
/* Readers still to come that read a misaligned weight (nnf_value.misaligned)
 * byte-wise, for nnf_graph_typed_reads: the BatchNormalization fold reads a
 * Conv's weights before any typed reader does (the import;
 * nnf_graph_align_values runs after the fold), and a MatMul's or Gemm's plan
 * packs its B from any alignment (nnf_gemm_pack_b) before anything else
 * reads it (up to the plans). */
enum {
    NNF_PENDING_FOLD = 1u << 0,
    NNF_PENDING_PLAN = 1u << 1,
};
/* Per value (n_values entries, owned by the caller, nnf_free; NULL on OOM):
 * whether a live node reads it other than byte-wise, given the pending
 * readers (NNF_PENDING_*), or it is a graph output, so that its data must be
 * aligned. packed (NULL: none): per node, the inputs its kernel plan packed
 * (nnf_kernel_plan.packed_inputs), which it reads no more. */
bool *nnf_graph_typed_reads(const nnf_graph *g, unsigned pending, const unsigned *packed);
/* Give every misaligned value that a node of g reads other than byte-wise
 * (nnf_graph_typed_reads), or that is a graph output, an aligned copy of its
 * data. Idempotent. */
nnf_status nnf_graph_align_values(nnf_graph *g, unsigned pending, const unsigned *packed);
/* The same for value v alone (nothing if it is aligned). */
nnf_status nnf_graph_align_value(nnf_graph *g, int v);

/* Fix the shapes of the listed graph inputs (nnf_model_options.input_shapes)
 * and of every declared dim named like a symbolic dim they fixed; before
 * shapes are inferred. Two inputs that give one name two extents are an
 * error, unless `lenient` (a run's shapes, which onnxruntime accepts too):
 * then that name stays symbolic elsewhere. */
nnf_status nnf_graph_fix_inputs(nnf_graph *g, const nnf_input_shape *shapes, size_t n,
                                bool lenient);

/* Find a value by name; -1 if absent. Linear-time lookup with a hash built on
 * demand is an internal detail. */
int nnf_graph_find_value(const nnf_graph *g, const char *name);
/* The node named `name` (len bytes of it), or where that node was fused
 * away, the live node that absorbed it (fused_from); -1 if none. */
NNF_API int nnf_graph_find_node(const nnf_graph *g, const char *name, size_t len);
/* Get or create the value with this name. Returns its id or -1 on OOM. */
int nnf_graph_value(nnf_graph *g, const char *name);
/* Append a node; inputs/outputs are copied. Returns the node id or -1 on OOM. */
int nnf_graph_add_node(nnf_graph *g, const char *name, const char *op_type, const char *domain,
                       const int *inputs, int n_inputs, const int *outputs, int n_outputs);
/* The opset version imported for domain ("" or "ai.onnx" = default), 0 if none. */
int64_t nnf_graph_opset(const nnf_graph *g, const char *domain);

/* Compute g->order; fails (naming a node) on a cycle or a value with no producer
 * that is not an input/initialiser. */
nnf_status nnf_graph_toposort(nnf_graph *g);
/* The live nodes that read each value produced by a live node, as CSR: those
 * of value v are cons[cstart[v]..cstart[v + 1]), in ascending node id, a node
 * once per input slot. Both arrays are the caller's (nnf_free). Fails on a
 * node that reads its own output. */
nnf_status nnf_graph_consumers(const nnf_graph *g, int **cstart_out, int **cons_out);
/* Check structural invariants: ids in range, one producer per value, every
 * consumed value defined, outputs produced. */
nnf_status nnf_graph_verify(const nnf_graph *g);
/* A hash of the graph's structure: every node's op, domain, liveness and
 * value ids, every value's kind, dtype, shape and pending row scale (a
 * compiled file's blocks fit only the graph they were packed for). */
nnf_status nnf_graph_fingerprint(const nnf_graph *g, uint64_t *out);

/* Attribute lookups by name (NULL / default when absent). */
const nnf_attr *nnf_node_attr(const nnf_node *n, const char *name);
int64_t nnf_attr_int(const nnf_node *n, const char *name, int64_t dflt);
float nnf_attr_float(const nnf_node *n, const char *name, float dflt);
const char *nnf_attr_string(const nnf_node *n, const char *name, const char *dflt);
/* INTS attribute: returns count (or -1 when absent) and sets *vals. */
int nnf_attr_ints(const nnf_node *n, const char *name, const int64_t **vals);
int nnf_attr_floats(const nnf_node *n, const char *name, const float **vals);

/* Element count of a fully known shape, -1 if any dim is unknown or it overflows. */
int64_t nnf_shape_numel(const nnf_shape *s);
bool nnf_shape_known(const nnf_shape *s);
/* The bytes of a value's data when its shape is known and they fit a
 * size_t; false otherwise. */
bool nnf_value_static_bytes(const nnf_value *v, size_t *bytes);
/* Equal at every run that keeps to the model's symbolic dims: the same
 * rank, and each dim the same known extent or unknown under the same name. A
 * name stands for one extent throughout a model (ONNX's dim_param; TensorRT
 * reads it the same way), so a pass may fuse across "B x S x 768" and
 * "B x S x 768" as it does across "1 x 128 x 768". Inputs that disagree on a
 * named dim still run (as in ONNX Runtime): a kernel planned on such a match
 * checks the run's extents and refuses a mismatch by name. */
bool nnf_shape_same(const nnf_shape *a, const nnf_shape *b);
/* Format "1x3x224x224", "batchx128", "?" into buf; returns buf. */
char *nnf_shape_str(const nnf_shape *s, char *buf, size_t size);

/* Text dump of the graph (one line per node with shapes), used by `nnfuse info -v`. */
void nnf_graph_dump(const nnf_graph *g, FILE *f);
/* Graphviz DOT. */
void nnf_graph_dump_dot(const nnf_graph *g, FILE *f);

#endif

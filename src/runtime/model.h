/* The loaded model: an immutable, inferred IR graph plus the file mapping its
 * weights point into. Shared read-only by every session. */
#ifndef NNF_RUNTIME_MODEL_H
#define NNF_RUNTIME_MODEL_H

#include "base/packs.h"
#include "ops/op.h"

#include <stdatomic.h>

typedef struct nnf_shape_plans nnf_shape_plans;

/* A load's packed blocks (base/packs.h): recorded for nnf_compile, or
 * replayed from a compiled file. */
typedef struct nnf_load_packs {
    nnf_packs *packs;
    bool replay;
    /* replaying: the initialisers the blocks hold packed (NUL-terminated
     * names, nnf_onnx_import_mapping) */
    const char *packed_away;
    size_t packed_away_bytes;
    /* the optimised graph's fingerprint (nnf_graph_fingerprint): replaying,
     * the file's, which the load's must equal; recording, the load's */
    uint64_t graph_hash;
} nnf_load_packs;

struct nnf_model {
    nnf_graph *graph;
    nnf_mapping *file; /* the mapped .onnx until import hands it to the graph (NULL for buffers) */
    char *source;      /* path for messages */
    int opt_level;
    int keep_unpacked; /* nnf_model_options.keep_unpacked_weights */
    int threads;       /* nnf_model_options.threads */
    nnf_value_info *input_info, *output_info;
    nnf_kernel_plan *plans; /* per node id; NULL at -O0 (reference kernels only) */
    /* The bytes the model was read from (the file's mapping, which the graph
     * keeps, or the caller's buffer, borrowed for the model's lifetime) and
     * the directory of external data: a shape plan loads them again. */
    const void *bytes;
    size_t size;
    char *base_dir;
    /* what a compiled file of this model records (runtime/compile.h): the
     * build, CPU and options it was loaded with */
    char *meta;
    /* the packed blocks this load records or replays; NULL after the load */
    nnf_load_packs *packs;
    /* loaded from a compiled file: 0 no; 1 its blocks read in place; 2 planned
     * from its ONNX model, since the file was compiled for another `differs`
     * ("cpu", "opt", "graph", ...) */
    int compiled;
    char differs[32];
    nnf_shape_plans *shape_plans; /* shape_plans.c; NULL: this model plans no shapes at run time */
    const nnf_model *parent;      /* a shape plan's model: the one it was planned for (owns it) */
    /* The pages the load's page bank held when it closed (alloc.h,
     * nnf_page_bank_detach): the first run takes them for its buffers and
     * scratch, faulted in already; NULL once taken. Sessions hold the model
     * const: this is the one field a run changes (atomically). */
    _Atomic(void *) warm_pages;
};

/* nnf_model_load, recording every packed block in rec (for nnf_compile);
 * a compiled file's blocks are not replayed then. */
nnf_status nnf_model_load_recording(const char *path, const nnf_model_options *opts,
                                    nnf_load_packs *rec, nnf_model **out);

/* The model's warm pages, once: the first caller gets them (to adopt for a
 * run, then nnf_page_bank_free), every later one NULL. */
void *nnf_model_take_warm_pages(const nnf_model *m);

/* `base` loaded again from its bytes, with n input shapes fixed (the same
 * options otherwise); *out plans no shapes of its own and must not outlive
 * base. */
nnf_status nnf_model_load_shaped(const nnf_model *base, const nnf_input_shape *shapes, size_t n,
                                 nnf_model **out);

/* shape_plans.c: the plans a model with symbolic dims makes for the input
 * shapes it runs with, at most `max`. */
nnf_status nnf_shape_plans_create(int max, nnf_shape_plans **out);
void nnf_shape_plans_free(nnf_shape_plans *sp);
/* The shape plan to run the input shapes in bufs (indexed by value id, as a
 * session's) on: one m keeps (made on first use; m itself where m makes no
 * shape plans), or where m keeps as many as it may, a new one that *own
 * returns to the caller to destroy. Safe from sessions on several threads. */
nnf_status nnf_model_for_shapes(const nnf_model *m, const nnf_buf *bufs, const nnf_model **use,
                                nnf_model **own);
/* Whether shape plan `plan` of m was made for the input shapes in bufs. */
bool nnf_shape_plan_fits(const nnf_model *plan, const nnf_model *m, const nnf_buf *bufs);

#endif

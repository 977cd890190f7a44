/*
 * nnfuse — a neural-network inference engine for CPUs.
 *
 * Quick tour:
 *
 *   nnf_model *model = NULL;
 *   if (nnf_model_load("resnet50.onnx", NULL, &model) != NNF_OK) {
 *       fprintf(stderr, "%s\n", nnf_last_error());   // names file, node, operator
 *       return 1;
 *   }
 *   nnf_session_options so = nnf_session_options_default();
 *   so.threads = 0;                                   // 0 = all cores
 *   nnf_session *sess = NULL;
 *   nnf_session_create(model, &so, &sess);
 *
 *   float pixels[1 * 3 * 224 * 224] = {0};
 *   int64_t shape[4] = {1, 3, 224, 224};
 *   nnf_tensor in = {.name = "input", .dtype = NNF_DTYPE_FLOAT32, .rank = 4,
 *                    .shape = shape, .data = pixels};
 *   const nnf_tensor *outs = NULL;  size_t n_outs = 0;
 *   if (nnf_session_run(sess, &in, 1, &outs, &n_outs) != NNF_OK)
 *       fprintf(stderr, "%s\n", nnf_session_last_error(sess));
 *   // outs[i].data is owned by the session and valid until the next run.
 *
 *   nnf_session_destroy(sess);
 *   nnf_model_destroy(model);
 *
 * Offline, nnf_model_compile("resnet50.onnx", NULL, "resnet50.nnf") writes a
 * file whose weights are already packed for this CPU; nnf_model_load takes it
 * as it takes the .onnx, and loads it without that work.
 *
 * Conventions: every call returns nnf_status; results come back through
 * trailing *_out parameters; destroy(NULL) is a no-op. A model is immutable
 * once loaded and may be shared by sessions running on different threads; a
 * session is used by one thread at a time.
 */
#ifndef NNFUSE_H
#define NNFUSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(NNF_BUILDING_LIBRARY)
#define NNF_API __attribute__((visibility("default")))
#else
#define NNF_API
#endif

#define NNFUSE_VERSION "0.1.0"

typedef enum nnf_status {
    NNF_OK = 0,
    NNF_ERR_INVALID_ARGUMENT = 1, /* the caller passed something wrong */
    NNF_ERR_INVALID_MODEL = 2,    /* malformed, truncated or inconsistent model file */
    NNF_ERR_UNSUPPORTED = 3,      /* an operator, attribute value or dtype nnfuse lacks */
    NNF_ERR_OUT_OF_MEMORY = 4,
    NNF_ERR_IO = 5,               /* a file could not be opened, mapped or written */
    NNF_ERR_SHAPE = 6,            /* an input's shape or dtype does not fit the model */
    NNF_ERR_INTERNAL = 7,
} nnf_status;

/* Values equal ONNX TensorProto.DataType. */
typedef enum nnf_dtype {
    NNF_DTYPE_UNDEFINED = 0,
    NNF_DTYPE_FLOAT32 = 1,
    NNF_DTYPE_UINT8 = 2,
    NNF_DTYPE_INT8 = 3,
    NNF_DTYPE_UINT16 = 4,
    NNF_DTYPE_INT16 = 5,
    NNF_DTYPE_INT32 = 6,
    NNF_DTYPE_INT64 = 7,
    NNF_DTYPE_STRING = 8,
    NNF_DTYPE_BOOL = 9,
    NNF_DTYPE_FLOAT16 = 10,
    NNF_DTYPE_FLOAT64 = 11,
    NNF_DTYPE_UINT32 = 12,
    NNF_DTYPE_UINT64 = 13,
    NNF_DTYPE_BFLOAT16 = 16,
} nnf_dtype;

/* A short name ("float32", "int64", ...). Never NULL. */
NNF_API const char *nnf_dtype_name(nnf_dtype dtype);
/* Bytes per element, 0 for strings and unknown types. */
NNF_API size_t nnf_dtype_size(nnf_dtype dtype);
NNF_API const char *nnf_status_name(nnf_status status);

/*
 * A dense, row-major tensor exchanged with the caller. For inputs every field
 * is borrowed for the duration of the call. For outputs every pointer is owned
 * by the session and stays valid until the next run or nnf_session_destroy.
 */
typedef struct nnf_tensor {
    const char *name;
    nnf_dtype dtype;
    int rank;
    const int64_t *shape; /* rank entries */
    void *data;           /* product(shape) * nnf_dtype_size(dtype) bytes */
} nnf_tensor;

/* Static description of a model input/output. dims[i] < 0 means unknown; then
 * dim_names[i] holds the symbolic name when the model gave one (else NULL).
 * rank < 0 means the rank itself is unknown. Pointers are owned by the model. */
typedef struct nnf_value_info {
    const char *name;
    nnf_dtype dtype;
    int rank;
    const int64_t *dims;
    const char *const *dim_names;
} nnf_value_info;

typedef struct nnf_model nnf_model;
typedef struct nnf_session nnf_session;

/* One entry of nnf_model_options.input_shapes. */
typedef struct nnf_input_shape {
    const char *name;
    int rank;
    const int64_t *dims; /* rank extents, each >= 0 */
} nnf_input_shape;

/* Options structs start with their size so they can grow without _v2 calls.
 * Always start from the *_default() value. */
typedef struct nnf_model_options {
    size_t struct_size;
    int opt_level; /* 0 = no graph optimisation (the graph as imported, optimised kernels still
                      chosen; unpacked weights kept) ... 3 = all passes (default) */
    /* non-zero: keep the unpacked copy of weights that optimised kernels
     * packed at load, so sessions with reference_kernels can run this model.
     * Default 0: the copies are released (a model's resident memory roughly
     * halves). */
    int keep_unpacked_weights;
    /* threads loading may use: 0 = all cores (default), 1 = only the caller's. With more than
     * one, a helper thread faults fresh memory in ahead of the loader. */
    int threads;
    /* Shapes fixed at load for inputs with symbolic (or unknown) dims, as onnxruntime's
     * free-dimension overrides or OpenVINO's reshape: n_input_shapes entries, borrowed for the
     * call. Each listed input must keep the model's rank and fixed extents; a symbolic dim takes
     * the given extent, and so does every dim of the graph that bears its name. Passes and
     * kernel plans then see concrete shapes at load (see shape_plans for a model that keeps
     * symbolic dims), and runs with other shapes than these are refused (NNF_ERR_SHAPE). */
    const nnf_input_shape *input_shapes;
    size_t n_input_shapes;
    /* A model whose symbolic dims leave nodes without planned kernels (convolutions, pools,
     * norms: the ones that plan for fixed shapes only) plans each new set of input shapes on
     * its first run, as a load with those shapes fixed would, and keeps up to shape_plans of
     * these plans (default 4; 0: none, such nodes run on reference kernels). A plan is kept
     * only where it puts at least a tenth of the run's FLOPs on planned kernels that the
     * symbolic plan left to reference kernels; otherwise the model keeps its symbolic plan
     * for every shape. Each kept plan holds its own packed weights. */
    int shape_plans;
} nnf_model_options;

typedef struct nnf_session_options {
    size_t struct_size;
    int threads;           /* 0 = all cores (default), 1 = run on the caller's thread */
    int profile;           /* non-zero: record per-node timing (nnf_session_profile) */
    const char *dump_dir;  /* non-NULL: write every node output there as .npy (borrowed) */
    const char *dump_filter; /* comma list of node names or op types to dump; NULL = all */
    int reference_kernels; /* non-zero: run only the portable reference kernels (needs a model
                              loaded at opt_level 0 or with keep_unpacked_weights) */
} nnf_session_options;

NNF_API nnf_model_options nnf_model_options_default(void);
NNF_API nnf_session_options nnf_session_options_default(void);

/* The message of the last failed call on this thread (load/create paths that
 * have no object yet write here too). Never NULL; "" when there is none. */
NNF_API const char *nnf_last_error(void);

/* Load an ONNX model, or a compiled .nnf file (nnf_model_compile), from a
 * file. The file is memory-mapped: weights are not copied. opts may be NULL.
 * *model_out is owned by the caller (nnf_model_destroy). */
NNF_API nnf_status nnf_model_load(const char *path, const nnf_model_options *opts,
                                  nnf_model **model_out);
/* Load from memory. The buffer is borrowed for the model's lifetime (not
 * copied); a compiled .nnf file's must be 64-byte aligned. External-data
 * tensors are resolved relative to base_dir (may be NULL). */
NNF_API nnf_status nnf_model_load_buffer(const void *data, size_t size, const char *base_dir,
                                         const nnf_model_options *opts, nnf_model **model_out);
NNF_API void nnf_model_destroy(nnf_model *model);
/* Compile the model at path (ONNX) with opts (optimisation level, input
 * shapes; NULL: the defaults) into out_path, a .nnf file that holds the model
 * and every weight its kernels read, already packed for this CPU: loading it
 * maps the packed weights from the file instead of transforming and packing
 * them (nnfuse's ATC). The file is for this build of nnfuse, this CPU and
 * these options; a load elsewhere (another build, CPU, NNF_ISA tier,
 * optimisation level or set of disabled passes) plans the model from the
 * ONNX copy inside it as usual, with a warning. Loading a .nnf without input
 * shapes fixes the ones it was compiled with. */
NNF_API nnf_status nnf_model_compile(const char *path, const nnf_model_options *opts,
                                     const char *out_path);

NNF_API size_t nnf_model_input_count(const nnf_model *model);
NNF_API size_t nnf_model_output_count(const nnf_model *model);
/* info_out's pointers are borrowed for the model's lifetime. */
NNF_API nnf_status nnf_model_input_info(const nnf_model *model, size_t index,
                                        nnf_value_info *info_out);
NNF_API nnf_status nnf_model_output_info(const nnf_model *model, size_t index,
                                         nnf_value_info *info_out);

/* model is borrowed for the session's lifetime (running a session needs its
 * model; destroying one does not, so the two may be destroyed in any order).
 * opts may be NULL. */
NNF_API nnf_status nnf_session_create(const nnf_model *model, const nnf_session_options *opts,
                                      nnf_session **session_out);
NNF_API void nnf_session_destroy(nnf_session *session);

/* Run one inference. inputs are matched by name (or by position when a name is
 * NULL). Outputs come back in model output order; *outputs_out points to an
 * array owned by the session, valid until the next run or destroy. */
NNF_API nnf_status nnf_session_run(nnf_session *session, const nnf_tensor *inputs,
                                   size_t input_count, const nnf_tensor **outputs_out,
                                   size_t *output_count_out);
/* The message of the session's last failed call. Never NULL. */
NNF_API const char *nnf_session_last_error(const nnf_session *session);

#ifdef __cplusplus
}
#endif
#endif /* NNFUSE_H */

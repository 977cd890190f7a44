/* The loaded model: an immutable, inferred IR graph plus the file mapping its
 * weights point into. Shared read-only by every session. */
#ifndef NNF_RUNTIME_MODEL_H
#define NNF_RUNTIME_MODEL_H

#include "ops/op.h"

struct nnf_model {
    nnf_graph *graph;
    nnf_mapping *file; /* the mapped .onnx until import hands it to the graph (NULL for buffers) */
    char *source;      /* path for messages */
    int opt_level;
    int keep_unpacked; /* nnf_model_options.keep_unpacked_weights */
    nnf_value_info *input_info, *output_info;
    nnf_kernel_plan *plans; /* per node id; NULL at -O0 (reference kernels only) */
};

#endif

/* Shared between the ONNX importer's files; not part of any API. */
#ifndef NNF_ONNX_INTERNAL_H
#define NNF_ONNX_INTERNAL_H

#include "ir/graph.h"
#include "onnx/pb.h"

/* Names longer than this are cut in messages so the detail that follows
 * them is not pushed out of the fixed-size error buffer. */
#define NNF_ONNX_NAME_FMT "%.160s"

typedef struct nnf_onnx_ctx {
    const uint8_t *base; /* the whole model buffer */
    size_t size;
    const char *base_dir; /* NULL = current directory */
    nnf_graph *root;      /* owns external-data mappings for all subgraphs */
    bool base_is_mapping; /* base is a private file mapping: copied pages may be handed back */
    bool initializers;    /* reading a graph's initialisers: misaligned data may stay in place */
    /* names (each NUL-terminated) of initialisers a compiled file holds
     * packed (nnf_value.packed_away) */
    const char *packed_away;
    size_t packed_away_bytes;
    /* domain → opset version, hashed: a hostile file may hold very many
     * opset imports and nodes, and a linear lookup per node is quadratic. */
    const char **opset_keys;
    int64_t *opset_vals;
    size_t opset_cap;
} nnf_onnx_ctx;
/* Whether [data, data + nbytes) lies in a file mapping of the import's (the
 * model file mapped by the loader, or external data): pages the graph may hand
 * back, unlike a caller's buffer. */
bool nnf_onnx_in_own_mapping(const nnf_onnx_ctx *cx, const void *data, size_t nbytes);

nnf_status nnf_onnx_oom(const char *what);
/* Replace *data (nbytes in the model) by an aligned copy, handing the copied
 * file pages back. */
nnf_status nnf_onnx_copy_aligned(nnf_onnx_ctx *cx, nnf_arena *a, const void **data, size_t nbytes);

/* A reader over a LEN field's payload. */
static inline nnf_pb nnf_onnx_msg(const nnf_onnx_ctx *cx, const nnf_pb_field *f) {
    nnf_pb r = {.p = f->data, .end = f->data + f->len, .base = cx->base};
    return r;
}

/* Copy a string field into the arena, NUL-terminated. Names (allow_nul = 0)
 * may not contain NUL bytes: a C string would silently cut them. */
nnf_status nnf_onnx_string(nnf_arena *a, const nnf_pb_field *f, const char *what, int allow_nul,
                           const char **out);

/* Decode a TensorProto. The data is borrowed from the model buffer or an
 * external-data mapping when aligned to the element size, else copied into
 * `arena`. `what` ("initializer", "tensor") starts the message prefix. */
nnf_status nnf_onnx_tensor(nnf_onnx_ctx *cx, nnf_arena *arena, const nnf_pb_field *span,
                           const char *what, const char **name_out, nnf_const_tensor *out);

/* Import a GraphProto into g (created by the caller, parent already set).
 * depth counts message nesting from the model, for the nesting limit. */
nnf_status nnf_onnx_graph(nnf_onnx_ctx *cx, nnf_graph *g, const nnf_pb_field *span, int depth);
/* Decode one AttributeProto and append it to g->nodes[node_id].attrs (sized
 * by the caller); index numbers it in messages when it has no name. */
nnf_status nnf_onnx_attr(nnf_onnx_ctx *cx, nnf_graph *g, int node_id, const nnf_pb_field *span,
                         int index, int depth);
nnf_status nnf_onnx_check_attr_names(const nnf_node *n);

/* A dtype nnfuse can hold in a tensor (strings excluded). */
int nnf_onnx_dtype_known(int64_t dtype);

#endif

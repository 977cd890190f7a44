/* Cast and CastLike between every fixed-size dtype nnfuse has. float8, int4
 * and string targets are rejected at load (NNF_ERR_UNSUPPORTED); the
 * saturate attribute only affects float8 targets, so it is accepted and has
 * no effect on the types we convert to. */
#include "ops/tensor_common.h"

static bool cast_dtype_ok(nnf_dtype t) {
    return nnf_dtype_size(t) != 0;
}

/* Opset 1 spelled 'to' as a TensorProto.DataType name. */
static nnf_dtype dtype_from_name(const char *s) {
    static const struct {
        const char *name;
        nnf_dtype t;
    } names[] = {
        {"FLOAT", NNF_DTYPE_FLOAT32},   {"UINT8", NNF_DTYPE_UINT8},   {"INT8", NNF_DTYPE_INT8},
        {"UINT16", NNF_DTYPE_UINT16},   {"INT16", NNF_DTYPE_INT16},   {"INT32", NNF_DTYPE_INT32},
        {"INT64", NNF_DTYPE_INT64},     {"BOOL", NNF_DTYPE_BOOL},     {"FLOAT16", NNF_DTYPE_FLOAT16},
        {"DOUBLE", NNF_DTYPE_FLOAT64},  {"UINT32", NNF_DTYPE_UINT32}, {"UINT64", NNF_DTYPE_UINT64},
        {"BFLOAT16", NNF_DTYPE_BFLOAT16},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(s, names[i].name))
            return names[i].t;
    return NNF_DTYPE_UNDEFINED;
}

nnf_status nnf_cast_init(NNF_INIT_ARGS) {
    nnf_cast_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    if (!p)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for attributes");
    node->params = p;
    const nnf_attr *a = nnf_node_attr(node, "to");
    if (!strcmp(node->op_type, "CastLike"))
        return NNF_OK;
    if (!a)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute 'to' is missing");
    if (a->type == NNF_ATTR_STRING) {
        p->to = dtype_from_name(a->s ? a->s : "");
        if (p->to == NNF_DTYPE_UNDEFINED)
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                                  "attribute 'to' = '%s' is not supported", a->s ? a->s : "");
        return NNF_OK;
    }
    p->to = (nnf_dtype)a->i;
    if (a->i <= 0 || a->i > 64 || !cast_dtype_ok(p->to))
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED,
                              "attribute 'to' = %lld (%s) is not supported", (long long)a->i,
                              a->i == NNF_DTYPE_STRING ? "string" : "no such dtype in nnfuse");
    return NNF_OK;
}

nnf_status nnf_cast_infer(NNF_INFER_ARGS) {
    const nnf_cast_params *p = node->params;
    nnf_dtype from = in[0].dtype, to = p->to;
    if (to == NNF_DTYPE_UNDEFINED) /* CastLike */
        to = in[1].dtype;
    if (from != NNF_DTYPE_UNDEFINED && !cast_dtype_ok(from))
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "casting from %s is not supported",
                              nnf_dtype_name(from));
    if (to != NNF_DTYPE_UNDEFINED && !cast_dtype_ok(to))
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "casting to %s is not supported",
                              nnf_dtype_name(to));
    out[0].dtype = to;
    out[0].shape = in[0].shape;
    return NNF_OK;
}

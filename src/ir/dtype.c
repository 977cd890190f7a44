#include "nnfuse.h"

NNF_API const char *nnf_dtype_name(nnf_dtype t) {
    switch (t) {
    case NNF_DTYPE_FLOAT32: return "float32";
    case NNF_DTYPE_UINT8: return "uint8";
    case NNF_DTYPE_INT8: return "int8";
    case NNF_DTYPE_UINT16: return "uint16";
    case NNF_DTYPE_INT16: return "int16";
    case NNF_DTYPE_INT32: return "int32";
    case NNF_DTYPE_INT64: return "int64";
    case NNF_DTYPE_STRING: return "string";
    case NNF_DTYPE_BOOL: return "bool";
    case NNF_DTYPE_FLOAT16: return "float16";
    case NNF_DTYPE_FLOAT64: return "float64";
    case NNF_DTYPE_UINT32: return "uint32";
    case NNF_DTYPE_UINT64: return "uint64";
    case NNF_DTYPE_BFLOAT16: return "bfloat16";
    case NNF_DTYPE_UNDEFINED: break;
    }
    return "undefined";
}

NNF_API size_t nnf_dtype_size(nnf_dtype t) {
    switch (t) {
    case NNF_DTYPE_UINT8:
    case NNF_DTYPE_INT8:
    case NNF_DTYPE_BOOL: return 1;
    case NNF_DTYPE_UINT16:
    case NNF_DTYPE_INT16:
    case NNF_DTYPE_FLOAT16:
    case NNF_DTYPE_BFLOAT16: return 2;
    case NNF_DTYPE_FLOAT32:
    case NNF_DTYPE_INT32:
    case NNF_DTYPE_UINT32: return 4;
    case NNF_DTYPE_INT64:
    case NNF_DTYPE_FLOAT64:
    case NNF_DTYPE_UINT64: return 8;
    default: return 0;
    }
}

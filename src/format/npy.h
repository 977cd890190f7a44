/* NumPy .npy files (format 1.0/2.0/3.0 read, 1.0 write), little-endian, C order. */
#ifndef NNF_FORMAT_NPY_H
#define NNF_FORMAT_NPY_H

#include "nnfuse.h"

#define NNF_NPY_MAX_RANK 8

typedef struct nnf_npy {
    nnf_dtype dtype;
    int rank;
    int64_t shape[NNF_NPY_MAX_RANK];
    void *data; /* owned: nnf_npy_free */
    size_t nbytes;
} nnf_npy;

NNF_API nnf_status nnf_npy_read(const char *path, nnf_npy *out);
NNF_API void nnf_npy_free(nnf_npy *npy);
NNF_API nnf_status nnf_npy_write(const char *path, nnf_dtype dtype, int rank, const int64_t *shape,
                                 const void *data);
/* Replace characters outside [A-Za-z0-9._-] by '_' (CLI.md file naming). */
NNF_API void nnf_npy_safe_name(const char *name, char *out, size_t size);

#endif

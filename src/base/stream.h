/* Streaming stores: writing memory that nothing reads soon (packed weights at
 * load, read back on the first run) without first reading each line into the
 * cache, which a plain store does. Where the CPU has no such store (not
 * x86-64), a plain copy. */
#ifndef NNF_BASE_STREAM_H
#define NNF_BASE_STREAM_H

#include <stddef.h>

/* dst[0..n) = src[0..n); dst 16-byte aligned for the streaming path (else a
 * plain copy). Stores may stay in write-combining buffers until
 * nnf_stream_fence. */
void nnf_stream_copy(float *dst, const float *src, size_t n);
/* Orders the streamed stores before what follows (another thread's reads). */
void nnf_stream_fence(void);

#endif

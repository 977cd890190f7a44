/* Streaming stores: an output larger than the last-level cache is written
 * around the caches. A plain store first reads the line it writes (a third
 * of an element-wise op's traffic, half of a copy's), and a line written
 * that far back has left the cache before the next operator reads it. The
 * drivers compute a block into a buffer in L1 and copy it out with
 * non-temporal stores (SSE2, every x86-64; plain memcpy elsewhere); the
 * values are the same bits either way. */
#ifndef NNF_KERNELS_STREAM_H
#define NNF_KERNELS_STREAM_H

#include <stdbool.h>
#include <stddef.h>

/* Floats a driver computes into its L1 buffer before copying them out. */
#define NNF_STREAM_BLOCK 1024

/* Whether an output of `bytes` is written with streaming stores: at least
 * the last-level cache (nnf_cpu_get()->l3), or NNF_STREAM_BYTES when that is
 * set (tests run every output through the streamed paths with a small one),
 * or the size a test forced. */
bool nnf_stream_output(size_t bytes);
/* Tests: outputs of at least min_bytes stream (0: the cache size again);
 * returns the previous setting. */
size_t nnf_stream_force(size_t min_bytes);

/* memcpy with non-temporal stores for the aligned part of dst. The stores
 * are weakly ordered: call nnf_stream_fence before the data is handed to
 * another thread (the end of a parallel range). */
void nnf_stream_copy(void *dst, const void *src, size_t bytes);
/* memset(dst, 0, bytes) in the same way. */
void nnf_stream_zero(void *dst, size_t bytes);
void nnf_stream_fence(void);

#endif

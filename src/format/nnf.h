/* The compiled model file (.nnf): what `nnfuse compile` writes and every
 * loader accepts in place of the .onnx.
 *
 *   offset 0     header (128 bytes, little-endian): magic "\x89NNF\r\n\x1a\n",
 *                u32 version (1), u32 0, u64 meta offset, u64 meta bytes,
 *                u64 ONNX offset, u64 ONNX bytes, u64 table offset,
 *                u64 table entries, u64 names offset, u64 names bytes,
 *                u64 the optimised graph's fingerprint (nnf_graph_fingerprint), zeros
 *   meta         text, "key value" lines: the build, CPU, tier, options and
 *                input shapes the file was compiled for (runtime/compile.c)
 *   names        the initialisers the blocks hold packed, each NUL-terminated
 *                (a load that replays the blocks never copies them)
 *   table        per packed block: u32 node, u32 seq, u64 offset, u64 bytes,
 *                sorted by (node, seq) (base/packs.h); nodes that share a
 *                block have entries at the same offset
 *   ONNX         the source model, byte for byte, at a 4 KiB boundary (its
 *                weights keep the alignment they had in their own file)
 *   blocks       each 64 bytes after a borrowed-block header (base/alloc.h),
 *                at a multiple of 64: read in place from the file's mapping
 *
 * Every offset and size is checked against the file before use; a block's
 * bytes are weights, which no check can vouch for (as an ONNX file's). */
#ifndef NNF_FORMAT_NNF_H
#define NNF_FORMAT_NNF_H

#include "base/packs.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nnf_compiled {
    const char *meta; /* not NUL-terminated */
    size_t meta_bytes;
    const void *onnx;
    size_t onnx_bytes;
    nnf_pack_entry *blocks; /* data pointing into the file */
    size_t n_blocks;
    const char *names; /* packed_away: NUL-terminated names */
    size_t names_bytes;
    uint64_t graph_hash;
} nnf_compiled;

/* Whether data starts like a compiled file. */
bool nnf_compiled_is(const void *data, size_t size);
/* Parse a compiled file held at data (64-byte aligned: a mapping); source
 * names it in messages. NNF_ERR_INVALID_MODEL on anything out of place. */
nnf_status nnf_compiled_parse(const void *data, size_t size, const char *source, nnf_compiled *out);
void nnf_compiled_free(nnf_compiled *c);
/* Write a compiled file to path (through path + ".tmp", renamed at the end);
 * *block_bytes: the packed blocks' bytes, each shared block once. */
nnf_status nnf_compiled_write(const char *path, const char *meta, const char *names,
                              size_t names_bytes, uint64_t graph_hash, const void *onnx,
                              size_t onnx_bytes, const nnf_pack_entry *blocks, size_t n_blocks,
                              size_t *block_bytes);

#endif

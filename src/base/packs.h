/* Packed weights kept across processes: what a compiled .nnf file stores.
 *
 * Planning a node packs its constant weights (GEMM panels, blocked conv
 * weights, Winograd's transformed matrices): most of a load's work. Every
 * packer takes its block from nnf_pack_alloc. While a node is planned with a
 * store attached (nnf_packs_enter):
 *  - a recording store (`nnfuse compile`) notes each block, in the order the
 *    node's plan asks for them, so the bytes can be written to a file once
 *    the load is done;
 *  - a replaying store (loading that file) hands back the file's block for
 *    the same node and position, already packed (*ready): the packer skips
 *    its work and the plan reads its weights from the file's mapping. A
 *    block of another size than the one the file holds is an error: the file
 *    was made for this build, CPU and options (the loader checks them first).
 * Outside a planned node (kernels made at run time, tests) nnf_pack_alloc is
 * nnf_malloc_aligned. Blocks are freed with nnf_free_aligned either way (the
 * file's carry a borrowed header, alloc.h). */
#ifndef NNF_BASE_PACKS_H
#define NNF_BASE_PACKS_H

#include "base/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nnf_pack_entry {
    uint32_t node; /* node id in the planned graph */
    uint32_t seq;  /* the block's position among that node's packs */
    const void *data;
    size_t bytes;
} nnf_pack_entry;

typedef struct nnf_packs nnf_packs;

nnf_packs *nnf_packs_recorder(void);
/* A replaying store over entries sorted by (node, seq), each data 64-byte
 * aligned after a borrowed header; the entries are copied, the data not. */
nnf_status nnf_packs_replayer(const nnf_pack_entry *entries, size_t n, nnf_packs **out);
void nnf_packs_free(nnf_packs *p);
/* The recorded blocks, sorted by (node, seq); valid while their owners live. */
const nnf_pack_entry *nnf_packs_entries(nnf_packs *p, size_t *n);
/* Whether the store holds blocks of `node` (replaying). */
bool nnf_packs_has_node(const nnf_packs *p, int node);

/* This thread plans `node` with store p (NULL: none) until nnf_packs_leave;
 * returns the first error a replay met (a block of the wrong size). */
void nnf_packs_enter(nnf_packs *p, int node);
nnf_status nnf_packs_leave(void);
/* A 64-byte aligned block for packed weights; *ready: it holds them already
 * (do not write it). NULL when out of memory, or where a replaying store
 * has no such block (nnf_packs_leave then says so). */
void *nnf_pack_alloc(size_t bytes, bool *ready);
/* Whether this thread's node gets its blocks from a replaying store: a
 * packer may skip what only feeds them (a transform into a temporary). */
bool nnf_pack_replaying(void);

#endif

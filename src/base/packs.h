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
 *  - a load's own store (neither) only lets nodes share blocks, below.
 * Outside a planned node (kernels made at run time, tests) nnf_pack_alloc is
 * nnf_malloc_aligned. Blocks are freed with nnf_free_aligned either way (the
 * file's carry a borrowed header, alloc.h; a shared one is freed by its last
 * holder).
 *
 * Shared blocks: a weight several nodes read (layers that share their
 * weights, as ALBERT's; a loop unrolled into copies of its body; tied
 * projections) is packed once when the packer says what its block is made
 * of (nnf_pack_alloc_shared): which of the node's constant inputs, and the
 * packing's own parameters. The first node to ask makes the block; the
 * others get a reference to it. Recording, every node still gets its entry
 * (the file holds the bytes once, nnf_compiled_write); replaying, each
 * finds its entry as for any block. */
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
/* A store that records nothing and replays nothing: a load's, for sharing. */
nnf_packs *nnf_packs_sharer(void);
/* A replaying store over entries sorted by (node, seq), each data 64-byte
 * aligned after a borrowed header; the entries are copied, the data not. */
nnf_status nnf_packs_replayer(const nnf_pack_entry *entries, size_t n, nnf_packs **out);
void nnf_packs_free(nnf_packs *p);
/* The recorded blocks, sorted by (node, seq); valid while their owners live. */
const nnf_pack_entry *nnf_packs_entries(nnf_packs *p, size_t *n);
/* Whether the store holds blocks of `node` (replaying). */
bool nnf_packs_has_node(const nnf_packs *p, int node);

/* A constant input of the node being planned: what a packer may name as the
 * source of a shared block. */
typedef struct nnf_pack_source {
    const void *data; /* as the plan is given it */
    int value;        /* the graph value it is */
} nnf_pack_source;

/* This thread plans `node`, whose constant inputs are src[0..n_src), with
 * store p (NULL: none) until nnf_packs_leave; returns the first error a
 * replay met (a block of the wrong size). */
void nnf_packs_enter(nnf_packs *p, int node, const nnf_pack_source *src, int n_src);
nnf_status nnf_packs_leave(void);
/* A 64-byte aligned block for packed weights; *ready: it holds them already
 * (do not write it). NULL when out of memory, or where a replaying store
 * has no such block (nnf_packs_leave then says so). */
void *nnf_pack_alloc(size_t bytes, bool *ready);
/* nnf_pack_alloc for a block made from the node's constant input at `src`
 * (the data the plan was given) and nothing else but `params` (plain bytes,
 * at most NNF_PACK_PARAMS_MAX: shapes, strides, layout, the cfg's address).
 * A node that asks for what another node asked for before gets a reference
 * to the same block, *ready, once its maker has called nnf_pack_made (it
 * waits until then); the maker gets *ready false and must call
 * nnf_pack_made(block) when the block is written (or it fails: the load
 * fails with it). A src that is not one of the node's constant inputs, or no
 * store: a block of the node's own, as nnf_pack_alloc. */
#define NNF_PACK_PARAMS_MAX 64
void *nnf_pack_alloc_shared(const void *src, const void *params, size_t params_bytes, size_t bytes,
                            bool *ready);
void nnf_pack_made(const void *block);

#endif

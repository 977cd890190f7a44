/* Allocation: every heap allocation of the library goes through these, so a
 * test can make the N-th one fail (fault injection) and every path that can
 * run out of memory is exercised. The arena is a bump allocator for things
 * that live exactly as long as their owner (the IR of a model). */
#ifndef NNF_BASE_ALLOC_H
#define NNF_BASE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *nnf_malloc(size_t size);
void *nnf_calloc(size_t count, size_t size); /* overflow-checked */
void *nnf_realloc(void *ptr, size_t size);
void nnf_free(void *ptr);
/* 64-byte aligned, for tensors and packed weights. Free with nnf_free_aligned. */
void *nnf_malloc_aligned(size_t size);
void nnf_free_aligned(void *ptr);
/* A block that someone else owns can stand in for an aligned one: its 64
 * bytes of header (NNF_BLOCK_HEADER, before the data) say "borrowed", and
 * nnf_free_aligned leaves it alone. A compiled .nnf file holds its packed
 * weights so, each after such a header, in its read-only mapping
 * (plan/packs.h). nnf_block_header_borrowed writes the header;
 * nnf_block_is_borrowed checks the one before p. */
#define NNF_BLOCK_HEADER 64
void nnf_block_header_borrowed(void *header);
/* One more holder of aligned block p (returned): nnf_free_aligned frees it
 * when the last lets go. A packed weight several nodes read is one block
 * (base/packs.h). No-op on a borrowed block. */
void *nnf_block_ref(void *p);
int nnf_block_is_borrowed(const void *p);
/* While open (nested calls count), this thread's freed large aligned blocks
 * keep their pages for its next large blocks (moved, not copied): for a load,
 * which replaces each weight by a new copy several times. prefault (on the
 * first open): a helper thread keeps a few MiB of fresh pages faulted in
 * ahead of those blocks, so another core does the kernel's share of the
 * work. Close gives back what is left. */
void nnf_page_bank_open(int prefault);
void nnf_page_bank_close(void);
/* Closes this thread's bank like nnf_page_bank_close (no helper after it),
 * but where the bank still holds pages it returns it, with at most `keep`
 * bytes of them, instead of giving them back: pages a load faulted in and
 * freed again serve its model's first run (adopted, below) in place of
 * fresh ones, then nnf_page_bank_free. NULL when nested or left empty. */
void *nnf_page_bank_detach(size_t keep);
void nnf_page_bank_free(void *bank);
/* Makes `bank` (another thread's open bank, or NULL) this thread's and
 * returns what it had: a loader's workers share its bank for the time of a
 * task (the bank locks itself). Open and close stay with the owner. */
void *nnf_page_bank_adopt(void *bank);
void *nnf_page_bank_current(void);
/* Faults in the whole pages of [p, p + bytes) for writing, in one call:
 * done for fresh memory from this size on, which is written whole soon after. */
#define NNF_POPULATE_MIN_BYTES ((size_t)1 << 20)
void nnf_populate(void *p, size_t bytes);
/* Address space for `bytes` (page multiple), pages faulted in on first touch,
 * not counted against the commit limit until then; NULL where none is given
 * (and always in sanitizer builds). Counts as an allocation for the fault
 * injection below. */
void *nnf_reserve(size_t bytes);
void nnf_unreserve(void *p, size_t bytes);
/* The whole pages [p, p + bytes) of a reserved range, about to be written
 * for the first time: moved in from this thread's page bank where it has
 * some, the rest faulted in now from NNF_POPULATE_MIN_BYTES on (else on
 * first touch). */
void nnf_reserve_touch(void *p, size_t bytes);
/* Counts one allocation made outside these functions (a buffer carved from a
 * reserved range) and says whether the fault injection fails it. */
int nnf_alloc_fails(void);
char *nnf_strdup(const char *s);

/* Per-thread scratch: a growable 64-byte aligned buffer per (thread, kind),
 * kept between calls (a model runs the same kernels every time; a fresh
 * buffer would fault its pages in again) and freed when the thread exits.
 * Kinds are separate buffers, so a GEMM may run inside a Winograd task.
 * NULL when it cannot grow to `floats` (the old buffer is kept). */
typedef enum nnf_scratch_kind {
    NNF_SCRATCH_GEMM = 0,
    NNF_SCRATCH_WINOGRAD,
    NNF_SCRATCH_PW_DW,
    NNF_SCRATCH_CONV_OUT,  /* a blocked conv's band before it goes out as NCHW */
    NNF_SCRATCH_CONV_IN,   /* a conv's input rearranged: padded, subsampled or split copies */
    NNF_SCRATCH_AMX,       /* the AMX GEMM's operands split into bf16 parts */
    NNF_SCRATCH_CONV_COLS, /* a transposed conv's GEMM products before col2im adds them up */
    NNF_SCRATCH_EINSUM,    /* an Einsum's operands and product in the GEMM's order */
    NNF_SCRATCH_STREAM,    /* a block of an output on its way out by streaming stores */
    NNF_SCRATCH_ATTENTION, /* an attention's packed K and V and a block of its scores */
    NNF_SCRATCH_KINDS
} nnf_scratch_kind;
float *nnf_thread_scratch(nnf_scratch_kind kind, size_t floats);
/* Frees the calling thread's buffer of that kind now. */
void nnf_thread_scratch_release(nnf_scratch_kind kind);

/* Fault injection for tests: the n-th allocation from now on fails (n >= 1);
 * 0 disables. Returns how many allocations happened since the last call. */
uint64_t nnf_alloc_fail_after(uint64_t n);

typedef struct nnf_arena_chunk nnf_arena_chunk;
typedef struct nnf_arena {
    nnf_arena_chunk *head;
    size_t used_total;
} nnf_arena;

/* Zeroed, 16-byte aligned memory that lives until nnf_arena_free. NULL on OOM. */
void *nnf_arena_alloc(nnf_arena *a, size_t size);
void *nnf_arena_calloc(nnf_arena *a, size_t count, size_t size);
char *nnf_arena_strndup(nnf_arena *a, const char *s, size_t n);
char *nnf_arena_strdup(nnf_arena *a, const char *s);
void nnf_arena_free(nnf_arena *a);

#endif

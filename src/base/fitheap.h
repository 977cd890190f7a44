/* A heap of buffers in one reserved address range, placed first fit by
 * offset with neighbouring free ranges merged: a session's intermediate
 * tensors. Buffers that live at different times share pages, so a run faults
 * in and keeps about its peak of live bytes, where one block per buffer kept
 * the sum of the sizes it ever asked for at once (YOLOv5s: 25 MB against 47).
 * Pages stay mapped when a buffer is freed: the next run touches no fresh page.
 *
 * Where no range can be reserved (an address-space limit, strict overcommit,
 * sanitizer builds, whose checks see only heap blocks) or a buffer does not fit
 * in what is left of it, the buffer is a block of its own, and freed blocks are
 * kept for reuse, best fit by size. Not thread-safe: one owner. */
#ifndef NNF_BASE_FITHEAP_H
#define NNF_BASE_FITHEAP_H

#include <stddef.h>

typedef struct nnf_fit_range {
    size_t off, len;
} nnf_fit_range;

typedef struct nnf_fit_block {
    void *data;
    size_t capacity;
} nnf_fit_block;

typedef struct nnf_fitheap {
    size_t want;         /* bytes to reserve on first use */
    unsigned char *base; /* the reserved range; NULL before first use or without one */
    size_t reserved;     /* its size */
    size_t top;          /* end of the highest range in use or free (bytes from base) */
    size_t touched;      /* bytes from base whose pages have been faulted in */
    nnf_fit_range *free; /* free ranges below top, by offset, none adjacent */
    size_t n_free, cap_free;
    size_t n_live;         /* buffers in the range now */
    nnf_fit_block *blocks; /* freed blocks of their own, kept for reuse */
    size_t n_blocks, cap_blocks;
    size_t n_block_live; /* blocks of their own handed out now */
    size_t block_bytes;  /* their capacities, handed out or kept */
    int no_range;        /* the reservation failed or is not made here */
} nnf_fitheap;

/* A heap that reserves `reserve` bytes of address space (rounded to pages)
 * on its first buffer; 0 = never (every buffer a block of its own). */
void nnf_fitheap_init(nnf_fitheap *h, size_t reserve);
/* A 64-byte aligned buffer of at least `bytes`; *capacity is its usable size,
 * to be passed back to nnf_fitheap_put. NULL when out of memory (or when the
 * allocation-failure injection of base/alloc.h says so). */
void *nnf_fitheap_get(nnf_fitheap *h, size_t bytes, size_t *capacity);
/* Returns a buffer from nnf_fitheap_get (NULL is ignored). Never allocates. */
void nnf_fitheap_put(nnf_fitheap *h, void *data, size_t capacity);
/* Gives everything back; the heap may be initialised again. */
void nnf_fitheap_destroy(nnf_fitheap *h);
/* Bytes of the range in use or free (its high-water mark), for tests and reports. */
size_t nnf_fitheap_span(const nnf_fitheap *h);
/* Bytes the heap keeps resident: the range's pages faulted in so far and every
 * block of its own. */
size_t nnf_fitheap_held(const nnf_fitheap *h);

#endif

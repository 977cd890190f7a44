/* A software prefetch the compiler keeps. Written as __builtin_prefetch in a
 * loop of its own, GCC 12's tree DCE deleted the whole loop where an inline
 * helper holding it was inlined into a large caller, leaving no instruction
 * (-fno-tree-dce kept them): the NCHW-input rows fetch of the AVX-512 conv
 * span (kernels/nchwc.h, which now uses this), and the GEMM's A-panel
 * fetches, dead in the build that found this (restored, they cost BERT-base
 * 1.078x its time: gemm.c no longer has them). An asm statement is never
 * deleted. Check a new prefetch loop with objdump. */
#ifndef NNF_BASE_PREFETCH_H
#define NNF_BASE_PREFETCH_H

/* The line at p into L1 (prefetcht0). */
static inline void nnf_prefetch_l1(const void *p) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetcht0 %0" : : "m"(*(const char *)p));
#else
    __builtin_prefetch(p, 0, 3);
#endif
}

#endif

#include "base/stream.h"

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h> /* x86-64's baseline: no ISA flags needed */
#endif

void nnf_stream_copy(float *dst, const float *src, size_t n) {
#if defined(__SSE2__)
    if (((uintptr_t)dst & 15) == 0) {
        size_t i = 0;
        for (; i + 4 <= n; i += 4)
            _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
        memcpy(dst + i, src + i, (n - i) * sizeof(float));
        return;
    }
#endif
    memcpy(dst, src, n * sizeof(float));
}

void nnf_stream_fence(void) {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

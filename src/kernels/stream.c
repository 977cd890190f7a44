/* Streaming stores (kernels/stream.h). */
#include "kernels/stream.h"

#include "base/cpu.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static _Atomic size_t g_forced, g_default;

size_t nnf_stream_force(size_t min_bytes) {
    return atomic_exchange(&g_forced, min_bytes);
}

/* NNF_STREAM_BYTES, else the last-level cache's size (worked out once; two
 * threads that race store the same value). */
static size_t default_min(void) {
    size_t v = atomic_load_explicit(&g_default, memory_order_relaxed);
    if (!v) {
        const char *env = getenv("NNF_STREAM_BYTES");
        char *end = NULL;
        unsigned long long n = env && *env ? strtoull(env, &end, 10) : 0;
        v = end && !*end && n ? (size_t)n : nnf_cpu_get()->l3;
        atomic_store_explicit(&g_default, v, memory_order_relaxed);
    }
    return v;
}

bool nnf_stream_output(size_t bytes) {
    size_t forced = atomic_load_explicit(&g_forced, memory_order_relaxed);
    return bytes && bytes >= (forced ? forced : default_min());
}

void nnf_stream_copy(void *dst, const void *src, size_t bytes) {
#if defined(__SSE2__)
    uint8_t *d = dst;
    const uint8_t *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > bytes)
        head = bytes;
    memcpy(d, s, head);
    d += head;
    s += head;
    bytes -= head;
    for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s),
                b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32)),
                e = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, a);
        _mm_stream_si128((__m128i *)(d + 16), b);
        _mm_stream_si128((__m128i *)(d + 32), c);
        _mm_stream_si128((__m128i *)(d + 48), e);
    }
    for (; bytes >= 16; bytes -= 16, d += 16, s += 16)
        _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
    memcpy(d, s, bytes);
#else
    memcpy(dst, src, bytes);
#endif
}

void nnf_stream_zero(void *dst, size_t bytes) {
#if defined(__SSE2__)
    uint8_t *d = dst;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > bytes)
        head = bytes;
    memset(d, 0, head);
    d += head;
    bytes -= head;
    const __m128i z = _mm_setzero_si128();
    for (; bytes >= 16; bytes -= 16, d += 16)
        _mm_stream_si128((__m128i *)d, z);
    memset(d, 0, bytes);
#else
    memset(dst, 0, bytes);
#endif
}

void nnf_stream_fence(void) {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

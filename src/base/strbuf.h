/* A growable string built piece by piece (a compiled file's meta data and
 * names, the profiler's shape fields). After a failed allocation it stays
 * failed and appends nothing more. */
#ifndef NNF_BASE_STRBUF_H
#define NNF_BASE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct nnf_strbuf {
    char *s; /* NUL-terminated once anything was appended; nnf_free it */
    size_t len, cap;
    bool failed;
} nnf_strbuf;

void nnf_strbuf_printf(nnf_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The string (the caller nnf_frees it), or NULL if an append failed (the
 * buffer is freed then); b is empty after. */
char *nnf_strbuf_take(nnf_strbuf *b);

#endif

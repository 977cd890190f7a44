#include "base/strbuf.h"

#include "base/alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void nnf_strbuf_printf(nnf_strbuf *b, const char *fmt, ...) {
    while (!b->failed) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
        } else if (b->s && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        } else {
            size_t cap = (b->cap ? b->cap * 2 : 256) + (size_t)n;
            char *s = nnf_realloc(b->s, cap);
            if (s) {
                b->s = s;
                b->cap = cap;
            } else {
                b->failed = true;
            }
        }
    }
}

char *nnf_strbuf_take(nnf_strbuf *b) {
    char *s = b->failed ? NULL : b->s;
    if (b->failed)
        nnf_free(b->s);
    memset(b, 0, sizeof *b);
    return s;
}

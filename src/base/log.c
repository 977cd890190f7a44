#include "base/log.h"

#include "nnfuse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *level_names[] = {"error", "warn", "info", "debug", "trace"};
static int level = -1; /* -1: not yet read from the environment */

nnf_log_level nnf_log_level_get(void) {
    if (level < 0) {
        const char *e = getenv("NNF_LOG_LEVEL");
        int l = NNF_LOG_WARN;
        for (int i = 0; e && i < 5; i++)
            if (!strcmp(e, level_names[i]))
                l = i;
        level = l;
    }
    return (nnf_log_level)level;
}

NNF_API void nnf_log_set_level(nnf_log_level l) { level = (int)l; }

void nnf_log(nnf_log_level l, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "nnfuse %s: %s\n", level_names[l], buf);
}

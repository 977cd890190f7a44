#include "base/status.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char tls_error[NNF_ERROR_MAX];

nnf_status nnf_error(nnf_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_error, sizeof tls_error, fmt, ap);
    va_end(ap);
    return status;
}

nnf_status nnf_error_prefix(nnf_status status, const char *fmt, ...) {
    char prefix[512];
    char old[NNF_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, tls_error, sizeof old);
    if (old[0])
        snprintf(tls_error, sizeof tls_error, "%s: %s", prefix, old);
    else
        snprintf(tls_error, sizeof tls_error, "%s", prefix);
    return status;
}

nnf_status nnf_error_corrupt(const char *file, int line, const char *fmt, ...) {
    char msg[NNF_ERROR_MAX - 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    snprintf(tls_error, sizeof tls_error, "%s [check at %s:%d]", msg, base ? base + 1 : file, line);
    return NNF_ERR_INVALID_MODEL;
}

void nnf_error_clear(void) { tls_error[0] = 0; }

const char *nnf_error_message(void) { return tls_error; }

NNF_API const char *nnf_last_error(void) { return tls_error; }

NNF_API const char *nnf_status_name(nnf_status s) {
    switch (s) {
    case NNF_OK: return "ok";
    case NNF_ERR_INVALID_ARGUMENT: return "invalid argument";
    case NNF_ERR_INVALID_MODEL: return "invalid model";
    case NNF_ERR_UNSUPPORTED: return "unsupported";
    case NNF_ERR_OUT_OF_MEMORY: return "out of memory";
    case NNF_ERR_IO: return "i/o error";
    case NNF_ERR_SHAPE: return "shape mismatch";
    case NNF_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

/* Status codes and the per-thread last-error message.
 *
 * Every failing internal call records one message with nnf_error() and
 * returns its status; callers add context (file, node, operator) with
 * nnf_error_prefix() as the status travels up. The public API copies the
 * message into the session/model that failed. */
#ifndef NNF_BASE_STATUS_H
#define NNF_BASE_STATUS_H

#include "nnfuse.h"

#include <stdarg.h>

#define NNF_ERROR_MAX 1024

/* Set the thread's last error to the formatted message; returns status. */
nnf_status nnf_error(nnf_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prepend "prefix: " to the thread's last error; returns status. */
nnf_status nnf_error_prefix(nnf_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void nnf_error_clear(void);
const char *nnf_error_message(void);

/* A corrupt or hostile model file was detected: records where in our source it
 * was found (like SQLite's *_BKPT) so a fuzzer report points at the check. */
#define NNF_CORRUPT(...) nnf_error_corrupt(__FILE__, __LINE__, __VA_ARGS__)
nnf_status nnf_error_corrupt(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define NNF_CHECK(expr)                     \
    do {                                    \
        nnf_status nnf_check_s_ = (expr);   \
        if (nnf_check_s_ != NNF_OK)         \
            return nnf_check_s_;            \
    } while (0)

/* Overflow-checked size arithmetic: return false on overflow. */
static inline int nnf_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline int nnf_add_size(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

#endif

/* Logging: NNF_LOG_LEVEL=error|warn|info|debug|trace (default warn), one line
 * per event on stderr: "nnfuse <level>: message". */
#ifndef NNF_BASE_LOG_H
#define NNF_BASE_LOG_H

typedef enum nnf_log_level {
    NNF_LOG_ERROR = 0,
    NNF_LOG_WARN,
    NNF_LOG_INFO,
    NNF_LOG_DEBUG,
    NNF_LOG_TRACE,
} nnf_log_level;

/* The level in force (read once from the environment; nnf_log_set_level overrides). */
nnf_log_level nnf_log_level_get(void);
void nnf_log_set_level(nnf_log_level level);
void nnf_log(nnf_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define NNF_LOG_AT(lvl, ...)                 \
    do {                                     \
        if ((lvl) <= nnf_log_level_get())    \
            nnf_log((lvl), __VA_ARGS__);     \
    } while (0)
#define NNF_LOG_ERROR(...) NNF_LOG_AT(NNF_LOG_ERROR, __VA_ARGS__)
#define NNF_LOG_WARN(...) NNF_LOG_AT(NNF_LOG_WARN, __VA_ARGS__)
#define NNF_LOG_INFO(...) NNF_LOG_AT(NNF_LOG_INFO, __VA_ARGS__)
#define NNF_LOG_DEBUG(...) NNF_LOG_AT(NNF_LOG_DEBUG, __VA_ARGS__)
#define NNF_LOG_TRACE(...) NNF_LOG_AT(NNF_LOG_TRACE, __VA_ARGS__)

#endif

/* A session: one caller's execution state over a shared model. */
#ifndef NNF_RUNTIME_SESSION_H
#define NNF_RUNTIME_SESSION_H

#include "base/fitheap.h"
#include "ops/op.h"
#include "runtime/model.h"

/* One executed node, when profiling is on. Times in microseconds from the
 * session's creation. */
typedef struct nnf_profile_event {
    int node;
    double start_us, dur_us;
    const char *kernel; /* the plan's kernel name, or "ref" */
    int over_input;     /* the input whose buffer output 0 took and overwrote, or -1 */
    /* the threads' working time during the node, in microseconds summed over
     * the pool's threads: the calling thread's time outside parallel jobs
     * plus every thread's time in the jobs' items (nnf_threadpool_usage);
     * busy_us / (threads x dur_us) is how much of the threads' time the node
     * used. With one thread, dur_us. */
    double busy_us;
} nnf_profile_event;

/* Called after every executed node for each of its outputs (profile, compare).
 * The buffer is borrowed for the call. A hook set with logical = true sees a
 * blocked (NCHWc) output as the model's NCHW value, unblocked into a scratch
 * buffer; with false it sees the buffer as it is and costs the run nothing
 * more (the profiler: an unblocking copy per node would evict the next node's
 * input from the caches and inflate its time). */
typedef void (*nnf_output_hook)(void *user, const nnf_node *node, int output_index, const nnf_value *value,
                                const nnf_buf *buf);

struct nnf_session {
    const nnf_model *model;
    /* the graph's value count, kept so that destroying a session never reads
     * the model (a garbage collector may free a model before its session) */
    int n_values;
    nnf_session_options opts;
    nnf_threadpool *pool;
    const nnf_kernel_plan *plans; /* per node id, borrowed from the model; NULL = reference kernels only */
    int *last_use;          /* per value: position in order of its last reader; INT32_MAX = keep */
    nnf_buf *bufs;          /* per value, current run */
    unsigned char *owned;   /* per value: bufs[v].data allocated by this session */
    nnf_tensor *outputs;
    int64_t (*output_shapes)[NNF_MAX_RANK];
    char error[NNF_ERROR_MAX];
    double t0_us;
    nnf_profile_event *events;
    size_t n_events, cap_events;
    nnf_output_hook hook;
    void *hook_user;
    bool hook_logical;
    /* test-only: add `inject_delta` to every element of node `inject_node`'s first output */
    int inject_node;
    float inject_delta;
    /* bytes of intermediate buffers this session holds now / at most since
     * creation (`nnfuse bench` reports the peak as "Arena") */
    size_t live_bytes, peak_bytes;
    /* the intermediate buffers: one range of address space, first fit by
     * offset, pages kept when a buffer is freed, so a run touches about its
     * peak of live bytes and steady-state runs fault in nothing. The static
     * memory plan will fix the offsets at load. */
    nnf_fitheap heap;
    size_t *capacity; /* per value: capacity of bufs[v].data when owned */
    /* Concats done in place (concat_in_place.c): per value, the Concat
     * output it is a slice of (-1: none) and its byte offset there; per
     * node id, 1 for a Concat whose inputs were produced in place */
    int *slice_of;
    size_t *slice_off;
    unsigned char *concat_in_place;
    /* a blocked output unblocked for the hook and dumps (grown as needed) */
    float *logical;
    size_t logical_cap;
    /* Executors over the model's shape plans (runtime/shape_plans.c), made
     * on first use with this session's options, pool and hook: a run runs on
     * the one planned for its input shapes. At most one plan is the
     * session's own (`own`: made beyond the model's cap, destroyed here). */
    struct nnf_shaped_session {
        const nnf_model *model;
        nnf_session *session;
        bool own;
    } *shaped;
    int n_shaped;
    /* Per value: 1 for a constant (initializer or folded value, not a graph
     * input), its buffer bound once at creation and never released; the
     * others, listed in run_values, are cleared before each run. Per node
     * id: 1 where every input and output shape is concrete at load, so a
     * planned kernel whose inputs match its plan has the outputs the load
     * inferred (run_node skips the op's shape inference). */
    unsigned char *fixed, *static_shapes;
    int *run_values, n_run_values;
    nnf_session *last;  /* the session that ran the last run: this one or a shaped one */
    bool borrowed_pool; /* a shaped session runs on its parent's pool */
};

/* Profile events of the runs since the last reset (borrowed). */
NNF_API void nnf_session_profile(const nnf_session *s, const nnf_profile_event **events, size_t *count);
NNF_API void nnf_session_profile_reset(nnf_session *s);
NNF_API void nnf_session_set_hook(nnf_session *s, nnf_output_hook hook, void *user, bool logical);
NNF_API const nnf_graph *nnf_model_graph(const nnf_model *m);
/* The graph of the model the last run ran on: the session's model, or its
 * shape plan for that run's input shapes (the nodes profile events and
 * hooks refer to). */
NNF_API const nnf_graph *nnf_session_graph(const nnf_session *s);
/* Test hook for `nnfuse compare` tests: perturb one node's output. */
NNF_API void nnf_session_inject_error(nnf_session *s, int node, float delta);
double nnf_now_us(void);
/* Fills slice_of / slice_off / concat_in_place (needs last_use and plans). */
nnf_status nnf_concat_in_place_plan(nnf_session *s);
/* Current and peak bytes of live intermediate buffers (either may be NULL). */
NNF_API void nnf_session_memory(const nnf_session *s, size_t *live_out, size_t *peak_out);
/* Bytes the session's buffer heap keeps resident for them (base/fitheap.h):
 * about the peak when buffers that live at different times share pages. */
NNF_API size_t nnf_session_buffers_held(const nnf_session *s);

#endif

/* ab_builds: two builds of libnnfuse.so side by side in one process, on one
 * model, run after run, so that both see the same state of a noisy shared
 * machine. A separate-process comparison of two builds a minute apart
 * measured the machine's phases (the same ResNet-50 binary ran in 91-96 or
 * 110-136 ms depending on when); here each round runs A then B (B then A on
 * odd rounds) and the verdict is the median of the per-round ratios B/A.
 *
 * Both libraries are loaded with RTLD_LOCAL, each resolving its own symbols,
 * through the public C API only (include/nnfuse.h), so any two builds with
 * that API compare: a commit and its parent, two compile flags.
 * Inputs: the same for both, floats uniform in [-1, 1) from a fixed
 * generator, integers 0, unknown dimensions 1. After the last round the
 * outputs of A and B are compared bit for bit (a change meant to be
 * bit-identical shows "identical"; else the largest difference).
 * Timing: thread CPU time with 1 thread (as nnfuse bench), wall time with more.
 * --load times loading instead (nnf_model_load, then destroy: import,
 * passes, plans, page faults), A and B alternately in the same way: a load's
 * time moves by a fifth between processes a minute apart, more than most
 * changes to it.
 *
 * --processes N repeats the comparison in N child processes, one after the
 * other, the odd ones loading B's library and model before A's, and gives
 * the median of each order's verdicts and their geometric mean. Within one process the two builds'
 * weights and buffers sit on the pages that process got, and this host runs some processes' pages
 * slower than others' (the kernel table's single-op rows): one process compared ResNet-50 builds at
 * 0.980, the same two with the order of the libraries swapped at 1.0075.
 *
 * Usage: ab_builds LIB_A.so LIB_B.so MODEL [--threads N] [--rounds N] [--warmup N] [--load]
 *                  [--processes N]
 * (copy each build's libnnfuse.so to its own path first: dlopen returns the
 * library already loaded for a path it has seen). */
#include "nnfuse.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_IO 16
#define MAX_ROUNDS 10000

typedef struct build {
    const char *path;
    nnf_status (*model_load)(const char *, const nnf_model_options *, nnf_model **);
    nnf_model_options (*model_options_default)(void);
    void (*model_destroy)(nnf_model *);
    size_t (*input_count)(const nnf_model *);
    nnf_status (*input_info)(const nnf_model *, size_t, nnf_value_info *);
    nnf_session_options (*session_options_default)(void);
    nnf_status (*session_create)(const nnf_model *, const nnf_session_options *, nnf_session **);
    void (*session_destroy)(nnf_session *);
    nnf_status (*session_run)(nnf_session *, const nnf_tensor *, size_t, const nnf_tensor **,
                              size_t *);
    const char *(*last_error)(void);
    const char *(*session_last_error)(const nnf_session *);
    size_t (*dtype_size)(nnf_dtype);
    void *handle;
    nnf_model *model;
    nnf_session *session;
    nnf_tensor in[MAX_IO];
    int64_t shape[MAX_IO][8];
    size_t nin;
    const nnf_tensor *out;
    size_t nout;
} build;

static int bind(build *b, const char *path) {
    b->path = path;
    b->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!b->handle) {
        fprintf(stderr, "ab_builds: %s\n", dlerror());
        return -1;
    }
#define SYM(field, name)                                                                           \
    do {                                                                                           \
        *(void **)&b->field = dlsym(b->handle, name);                                              \
        if (!b->field) {                                                                           \
            fprintf(stderr, "ab_builds: %s: no symbol %s\n", path, name);                          \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)
    SYM(model_load, "nnf_model_load");
    SYM(model_options_default, "nnf_model_options_default");
    SYM(model_destroy, "nnf_model_destroy");
    SYM(input_count, "nnf_model_input_count");
    SYM(input_info, "nnf_model_input_info");
    SYM(session_options_default, "nnf_session_options_default");
    SYM(session_create, "nnf_session_create");
    SYM(session_destroy, "nnf_session_destroy");
    SYM(session_run, "nnf_session_run");
    SYM(last_error, "nnf_last_error");
    SYM(session_last_error, "nnf_session_last_error");
    SYM(dtype_size, "nnf_dtype_size");
#undef SYM
    return 0;
}

/* The model, a session and the inputs (the same values in both builds). */
static int open_model(build *b, const char *model, int threads) {
    if (b->model_load(model, NULL, &b->model) != NNF_OK) {
        fprintf(stderr, "ab_builds: %s: %s\n", b->path, b->last_error());
        return -1;
    }
    nnf_session_options o = b->session_options_default();
    o.threads = threads;
    if (b->session_create(b->model, &o, &b->session) != NNF_OK) {
        fprintf(stderr, "ab_builds: %s: %s\n", b->path, b->last_error());
        return -1;
    }
    b->nin = b->input_count(b->model);
    if (b->nin > MAX_IO) {
        fprintf(stderr, "ab_builds: %s has %zu inputs (at most %d)\n", model, b->nin, MAX_IO);
        return -1;
    }
    for (size_t i = 0; i < b->nin; i++) {
        nnf_value_info vi;
        if (b->input_info(b->model, i, &vi) != NNF_OK || vi.rank < 0 || vi.rank > 8) {
            fprintf(stderr, "ab_builds: %s: input %zu has no usable shape\n", model, i);
            return -1;
        }
        size_t n = 1;
        for (int d = 0; d < vi.rank; d++) {
            b->shape[i][d] = vi.dims[d] < 0 ? 1 : vi.dims[d];
            if (b->shape[i][d] && n > SIZE_MAX / 16 / (size_t)b->shape[i][d]) {
                fprintf(stderr, "ab_builds: %s: input %s is too large\n", model, vi.name);
                return -1;
            }
            n *= (size_t)b->shape[i][d];
        }
        size_t es = b->dtype_size(vi.dtype);
        void *p = calloc(n ? n : 1, es ? es : 1);
        if (!p) {
            fprintf(stderr, "ab_builds: out of memory for input %s\n", vi.name);
            return -1;
        }
        if (vi.dtype == NNF_DTYPE_FLOAT32) {
            uint32_t s = 12345u + (uint32_t)i;
            for (size_t q = 0; q < n; q++) {
                s = s * 1664525u + 1013904223u;
                ((float *)p)[q] = (float)(s >> 8) / 8388608.0f - 1.0f;
            }
        }
        b->in[i] = (nnf_tensor){.name = vi.name, .dtype = vi.dtype, .rank = vi.rank,
                                .shape = b->shape[i], .data = p};
    }
    return 0;
}

static double now(int cpu) {
    struct timespec ts;
    clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int run_once(build *b, int cpu, double *ms) {
    double t0 = now(cpu);
    if (b->session_run(b->session, b->in, b->nin, &b->out, &b->nout) != NNF_OK) {
        fprintf(stderr, "ab_builds: %s: %s\n", b->path, b->session_last_error(b->session));
        return -1;
    }
    *ms = (now(cpu) - t0) * 1e3;
    return 0;
}

/* One load and destroy of the model; *ms the load. */
static int load_once(build *b, const char *model, int threads, int cpu, double *ms) {
    nnf_model_options o = b->model_options_default();
    o.threads = threads;
    nnf_model *m = NULL;
    double t0 = now(cpu);
    if (b->model_load(model, &o, &m) != NNF_OK) {
        fprintf(stderr, "ab_builds: %s: %s\n", b->path, b->last_error());
        return -1;
    }
    *ms = (now(cpu) - t0) * 1e3;
    b->model_destroy(m);
    return 0;
}

/* One timed step of a round: a run, or a load (--load). With threads, the
 * other build's pool first goes idle: its workers poll for a next job for a
 * millisecond after each run (base/threadpool.c), and a timed run started
 * at once shared the cores with them. */
static int step(build *b, int load, const char *model, int threads, int cpu, double *ms) {
    if (threads > 1)
        nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
    return load ? load_once(b, model, threads, cpu, ms) : run_once(b, cpu, ms);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* sorts v */
static double pct(double *v, int n, int p) {
    qsort(v, (size_t)n, sizeof v[0], cmp_d);
    return v[(size_t)n * (size_t)p / 100 < (size_t)n ? (size_t)n * (size_t)p / 100 : (size_t)n - 1];
}

/* One process's result, as a child hands it to the parent. */
typedef struct verdict {
    double ratio;  /* the median of the rounds' B/A */
    int identical; /* 1 identical outputs, 0 different, -1 not compared (--load) */
} verdict;

/* The two builds' medians and spreads, and the verdict (sorts the arrays). */
static verdict report(const char *const *pos, double *va, double *vb, double *ratio, int rounds) {
    printf("A %-40s median %9.3f ms  p10 %9.3f  p90 %9.3f\n", pos[0], pct(va, rounds, 50),
           pct(va, rounds, 10), pct(va, rounds, 90));
    printf("B %-40s median %9.3f ms  p10 %9.3f  p90 %9.3f\n", pos[1], pct(vb, rounds, 50),
           pct(vb, rounds, 10), pct(vb, rounds, 90));
    verdict v = {pct(ratio, rounds, 50), -1};
    printf("B/A per round: median %.4f  p25 %.4f  p75 %.4f\n", v.ratio, pct(ratio, rounds, 25),
           pct(ratio, rounds, 75));
    return v;
}

/* The outputs of A and B: identical bytes (returns 1), or the largest float
 * difference. */
static int compare_outputs(const build *a, const build *b) {
    if (a->nout != b->nout) {
        printf("outputs: %zu vs %zu outputs\n", a->nout, b->nout);
        return 0;
    }
    int same = 1;
    for (size_t o = 0; o < a->nout; o++) {
        const nnf_tensor *x = &a->out[o], *y = &b->out[o];
        size_t n = 1;
        for (int d = 0; d < x->rank; d++)
            n *= (size_t)x->shape[d];
        if (x->dtype != y->dtype || x->rank != y->rank ||
            memcmp(x->shape, y->shape, (size_t)x->rank * sizeof x->shape[0]) != 0) {
            printf("outputs: %s differs in type or shape\n", x->name);
            same = 0;
            continue;
        }
        if (memcmp(x->data, y->data, n * a->dtype_size(x->dtype)) == 0)
            continue;
        same = 0;
        if (x->dtype == NNF_DTYPE_FLOAT32) {
            double worst = 0;
            for (size_t i = 0; i < n; i++) {
                double d = fabs((double)((const float *)x->data)[i] - ((const float *)y->data)[i]);
                if (!(d <= worst))
                    worst = d;
            }
            printf("outputs: %s differs, largest |A - B| %.3g\n", x->name, worst);
        } else {
            printf("outputs: %s differs\n", x->name);
        }
    }
    if (same)
        printf("outputs: identical\n");
    return same;
}

/* One comparison in this process; b_first loads B's library and model
 * before A's. Returns nonzero on failure. */
static int compare(const char *const *pos, int threads, int rounds, int warmup, int load,
                   int b_first, verdict *v) {
    static build a, b;
    if (b_first ? bind(&b, pos[1]) || bind(&a, pos[0]) : bind(&a, pos[0]) || bind(&b, pos[1]))
        return 1;
    int cpu = threads == 1;
    double ta, tb;
    static double va[MAX_ROUNDS], vb[MAX_ROUNDS], ratio[MAX_ROUNDS];
    build *one = b_first ? &b : &a, *two = b_first ? &a : &b;
    if (!load && (open_model(one, pos[2], threads) || open_model(two, pos[2], threads)))
        return 1;
    for (int i = 0; i < warmup; i++)
        if (step(&a, load, pos[2], threads, cpu, &ta) || step(&b, load, pos[2], threads, cpu, &tb))
            return 1;
    for (int r = 0; r < rounds; r++) {
        build *first = r & 1 ? &b : &a, *second = r & 1 ? &a : &b;
        double *t1 = r & 1 ? &vb[r] : &va[r], *t2 = r & 1 ? &va[r] : &vb[r];
        if (step(first, load, pos[2], threads, cpu, t1) ||
            step(second, load, pos[2], threads, cpu, t2))
            return 1;
        ratio[r] = vb[r] / va[r];
    }
    printf("model %s, %s%d thread(s), %d rounds (%s)%s\n", pos[2], load ? "loads on " : "", threads,
           rounds, cpu ? "thread CPU time" : "wall time", b_first ? ", B loaded first" : "");
    *v = report(pos, va, vb, ratio, rounds);
    if (load)
        return 0;
    v->identical = compare_outputs(&a, &b);
    a.session_destroy(a.session);
    b.session_destroy(b.session);
    a.model_destroy(a.model);
    b.model_destroy(b.model);
    for (size_t i = 0; i < a.nin; i++)
        free(a.in[i].data);
    for (size_t i = 0; i < b.nin; i++)
        free(b.in[i].data);
    return 0;
}

/* --processes: each comparison in a child, in turn; the verdicts through a pipe. */
static int compare_in_processes(const char *const *pos, int threads, int rounds, int warmup,
                                int load, int processes) {
    double ratios[64]; /* processes <= 64 */
    int identical = 1;
    for (int k = 0; k < processes; k++) {
        int fd[2];
        fflush(stdout);
        if (pipe(fd) != 0) {
            perror("ab_builds: pipe");
            return 1;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("ab_builds: fork");
            return 1;
        }
        if (pid == 0) {
            close(fd[0]);
            verdict v;
            int rc = compare(pos, threads, rounds, warmup, load, k & 1, &v);
            fflush(stdout);
            if (rc == 0 && write(fd[1], &v, sizeof v) != (ssize_t)sizeof v)
                rc = 1;
            _exit(rc);
        }
        close(fd[1]);
        verdict v;
        ssize_t got = read(fd[0], &v, sizeof v);
        close(fd[0]);
        int status = 0;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
            got != (ssize_t)sizeof v) {
            fprintf(stderr, "ab_builds: process %d of %d failed\n", k + 1, processes);
            return 1;
        }
        ratios[k] = v.ratio;
        identical &= v.identical != 0;
    }
    printf("B/A over %d processes (odd ones loading B first), each:", processes);
    for (int k = 0; k < processes; k++)
        printf(" %.4f", ratios[k]);
    /* the library loaded second ran about 1 % faster (a library against a
     * copy of itself: 0.986 with A first, 1.009 with B first): the median of
     * each order, and their geometric mean, so that neither order outvotes
     * the other */
    double by_order[2][32];
    int n_order[2] = {0, 0};
    for (int k = 0; k < processes; k++)
        by_order[k & 1][n_order[k & 1]++] = ratios[k];
    double med[2] = {1, 1};
    for (int o = 0; o < 2; o++) {
        int n = n_order[o], h = n / 2;
        qsort(by_order[o], (size_t)n, sizeof by_order[o][0], cmp_d);
        if (n)
            med[o] = n & 1 ? by_order[o][h] : (by_order[o][h - 1] + by_order[o][h]) / 2;
    }
    printf("; median A first %.4f", med[0]);
    if (n_order[1])
        printf(", B first %.4f; verdict %.4f", med[1], sqrt(med[0] * med[1]));
    printf("\n");
    if (!load)
        printf("outputs: %s in every process\n", identical ? "identical" : "NOT identical");
    return 0;
}

int main(int argc, char **argv) {
    int threads = 1, rounds = 30, warmup = 3, load = 0, processes = 1;
    const char *pos[3];
    int np = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
            warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--processes") && i + 1 < argc)
            processes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--load"))
            load = 1;
        else if (argv[i][0] != '-' && np < 3)
            pos[np++] = argv[i];
        else
            np = -100;
    }
    if (np != 3 || threads < 1 || rounds < 1 || rounds > MAX_ROUNDS || warmup < 0 ||
        processes < 1 || processes > 64) {
        fprintf(stderr,
                "usage: ab_builds LIB_A.so LIB_B.so MODEL [--threads N] [--rounds N<=%d] "
                "[--warmup N] [--load] [--processes N<=64]\n",
                MAX_ROUNDS);
        return 2;
    }
    if (!strcmp(pos[0], pos[1])) {
        fprintf(stderr, "ab_builds: give the two builds different paths (dlopen returns the "
                        "library already loaded for a path)\n");
        return 2;
    }
    if (processes > 1)
        return compare_in_processes(pos, threads, rounds, warmup, load, processes);
    verdict v;
    return compare(pos, threads, rounds, warmup, load, 0, &v);
}

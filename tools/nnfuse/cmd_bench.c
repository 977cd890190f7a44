/* nnfuse bench MODEL [--threads N] [--warmup N] [--iterations N | --duration SEC]
 *                    [--input-shape NAME:d0,d1,...]... [-O0..-O3] [--json FILE]
 *
 * Latency and throughput, trtexec / benchmark_app style. The first inference
 * is timed on its own, from the start of model loading to the first output,
 * because that is what a user waiting on a cold start sees; the steady-state
 * figures come from the timed loop after the warm-up. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static const char *usage = "MODEL [--threads N] [--warmup N] [--iterations N | --duration SEC] "
                           "[--input-shape NAME:d0,d1,...]... [-O0..-O3] [--seed N] [--json FILE|-]";

/* Without --iterations or --duration: run until this many iterations or this
 * many seconds, whichever comes first, but at least MIN_ITERATIONS. */
enum { DEFAULT_ITERATIONS = 100, MIN_ITERATIONS = 5 };
static const double DEFAULT_SECONDS = 10.0;

typedef struct bench_stats {
    double min, mean, median, p90, p99, max;
} bench_stats;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Linear interpolation between closest ranks (numpy's default), so the
 * numbers agree with what bench/compare.py computes for ONNX Runtime. */
static double percentile(const double *sorted, size_t n, double q) {
    if (n == 0)
        return 0;
    double pos = q * (double)(n - 1);
    size_t lo = (size_t)floor(pos), hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - (double)lo);
}

static void stats_compute(double *lat, size_t n, bench_stats *st) {
    memset(st, 0, sizeof *st);
    if (!n)
        return;
    qsort(lat, n, sizeof *lat, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += lat[i];
    st->min = lat[0];
    st->max = lat[n - 1];
    st->mean = sum / (double)n;
    st->median = percentile(lat, n, 0.5);
    st->p90 = percentile(lat, n, 0.9);
    st->p99 = percentile(lat, n, 0.99);
}

/* Peak resident set of this process image. VmHWM first: getrusage's
 * ru_maxrss survives execve, so a bench started by a large parent (Python's
 * subprocess) would report the parent's peak instead of its own. */
static double peak_rss_mib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        long kib = -1;
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "VmHWM:", 6)) {
                kib = strtol(line + 6, NULL, 10);
                break;
            }
        fclose(f);
        if (kib > 0)
            return (double)kib / 1024.0;
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
}

typedef struct bench_result {
    const char *model;
    int threads, opt_level, warmup;
    double first_ms, load_ms, total_s, throughput, rss_mib;
    size_t count, arena_bytes, held_bytes;
    bench_stats lat;
    const double *samples; /* sorted */
} bench_result;

static int write_json(const char *path, const bench_result *r) {
    FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
    if (!f) {
        fprintf(stderr, "nnfuse bench: cannot write %s\n", path);
        return EXIT_INVALID;
    }
    fprintf(f, "{\"model\": ");
    cli_json_string(f, r->model);
    fprintf(
        f,
        ", \"threads\": %d, \"opt_level\": %d, \"warmup\": %d, \"count\": %zu, \"first_ms\": %.4f, "
        "\"load_ms\": %.4f, \"latency_ms\": {\"min\": %.4f, \"mean\": %.4f, \"median\": %.4f, "
        "\"p90\": %.4f, \"p99\": %.4f, "
        "\"max\": %.4f}, \"throughput\": %.4f, \"peak_rss_mb\": %.2f, \"arena_bytes\": %zu, "
        "\"buffers_held_bytes\": %zu, "
        "\"samples_ms\": [",
        r->threads, r->opt_level, r->warmup, r->count, r->first_ms, r->load_ms, r->lat.min,
        r->lat.mean, r->lat.median, r->lat.p90, r->lat.p99, r->lat.max, r->throughput, r->rss_mib,
        r->arena_bytes, r->held_bytes);
    for (size_t i = 0; i < r->count; i++)
        fprintf(f, "%s%.4f", i ? ", " : "", r->samples[i]);
    fprintf(f, "]}\n");
    int bad = ferror(f);
    if (f != stdout)
        bad |= fclose(f);
    if (bad) {
        fprintf(stderr, "nnfuse bench: error writing %s\n", path);
        return EXIT_INVALID;
    }
    return EXIT_OK;
}

static void print_text(const bench_result *r) {
    printf("Model:            %s\n", r->model);
    printf("Threads:          %d\n", r->threads);
    printf("First inference:  %.3f ms (load + session %.3f ms, first run %.3f ms)\n", r->first_ms, r->load_ms,
           r->first_ms - r->load_ms);
    printf("Count:            %zu iterations in %.3f s (after %d warm-up)\n", r->count, r->total_s, r->warmup);
    printf("Latency (ms):     min %.3f  mean %.3f  median %.3f  p90 %.3f  p99 %.3f  max %.3f\n", r->lat.min,
           r->lat.mean, r->lat.median, r->lat.p90, r->lat.p99, r->lat.max);
    printf("Throughput:       %.2f inferences/s\n", r->throughput);
    printf("Peak RSS:         %.1f MiB\n", r->rss_mib);
    printf("Arena:            %.2f MiB (peak of live intermediate buffers; %.2f MiB held)\n",
           (double)r->arena_bytes / (1 << 20), (double)r->held_bytes / (1 << 20));
}

int cmd_bench(int argc, char **argv) {
    cli_common c;
    cli_common_init(&c);
    long warmup = 5, iterations = -1;
    double duration = -1;
    const char *json = NULL;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i);
        if (r > 0)
            continue;
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (r == 0 && !strcmp(argv[i], "--warmup") && val) {
            warmup = strtol(val, &end, 10);
            i++;
        } else if (r == 0 && (!strcmp(argv[i], "--iterations") || !strcmp(argv[i], "-n")) && val) {
            iterations = strtol(val, &end, 10);
            i++;
        } else if (r == 0 && !strcmp(argv[i], "--duration") && val) {
            duration = strtod(val, &end);
            i++;
        } else if (r == 0 && !strcmp(argv[i], "--json") && val) {
            json = val;
            i++;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: nnfuse bench %s\n"
                   "Without --iterations/--duration: up to %d iterations or %.0f s, at least %d. "
                   "--warmup defaults to 5.\n",
                   usage, DEFAULT_ITERATIONS, DEFAULT_SECONDS, MIN_ITERATIONS);
            return EXIT_OK;
        } else
            return cli_usage("bench", usage);
        if (end && (*end || end == val))
            return cli_usage("bench", usage);
    }
    if (!c.model || warmup < 0 || (iterations >= 0 && duration >= 0) || iterations == 0 || duration == 0 ||
        iterations > 100000000)
        return cli_usage("bench", usage);
    double max_seconds = duration > 0 ? duration : iterations > 0 ? INFINITY : DEFAULT_SECONDS;
    size_t max_iters = iterations > 0 ? (size_t)iterations : duration > 0 ? SIZE_MAX : DEFAULT_ITERATIONS;
    size_t min_iters = iterations > 0 ? (size_t)iterations : duration > 0 ? 1 : MIN_ITERATIONS;

    int rc = EXIT_OK;
    nnf_model *model = NULL;
    nnf_session *sess = NULL;
    cli_inputs in = {0};
    double *lat = NULL;
    size_t n = 0, cap = 0;
    const nnf_tensor *outs = NULL;
    size_t n_outs = 0;

    double t_start = nnf_now_us();
    nnf_status st = cli_open(&c, &model, &sess, NULL);
    if (st != NNF_OK)
        return cli_fail("bench", st, nnf_last_error());
    /* making the inputs (reading .npy files, generating random ones) is the
     * caller's work, not the engine's: ORT's figure leaves it out too */
    double t_inputs = nnf_now_us(), load_ms = (t_inputs - t_start) / 1e3;
    st = cli_inputs_make(model, &c, &in);
    if (st != NNF_OK) {
        rc = cli_fail("bench", st, nnf_last_error());
        goto done;
    }
    t_start += nnf_now_us() - t_inputs;
    st = nnf_session_run(sess, in.tensors, in.n, &outs, &n_outs);
    if (st != NNF_OK)
        goto run_failed;
    /* the pool's real size, so "0 = all cores" is reported as what it meant here */
    bench_result res = {.model = c.model, .threads = nnf_threadpool_size(sess->pool), .opt_level = c.opt_level,
                        .warmup = (int)warmup};
    res.first_ms = (nnf_now_us() - t_start) / 1e3;
    res.load_ms = load_ms;

    for (long w = 0; w < warmup; w++)
        if ((st = nnf_session_run(sess, in.tensors, in.n, &outs, &n_outs)) != NNF_OK)
            goto run_failed;
    double loop_start = nnf_now_us();
    while (n < max_iters && (n < min_iters || (nnf_now_us() - loop_start) / 1e6 < max_seconds)) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            double *p = realloc(lat, ncap * sizeof *lat);
            if (!p) {
                rc = cli_fail("bench", NNF_ERR_OUT_OF_MEMORY, "out of memory recording latencies");
                goto done;
            }
            lat = p;
            cap = ncap;
        }
        double t0 = nnf_now_us();
        if ((st = nnf_session_run(sess, in.tensors, in.n, &outs, &n_outs)) != NNF_OK)
            goto run_failed;
        lat[n++] = (nnf_now_us() - t0) / 1e3;
    }
    res.total_s = (nnf_now_us() - loop_start) / 1e6;
    res.count = n;
    res.throughput = res.total_s > 0 ? (double)n / res.total_s : 0;
    stats_compute(lat, n, &res.lat);
    res.samples = lat;
    res.rss_mib = peak_rss_mib();
    nnf_session_memory(sess, NULL, &res.arena_bytes);
    res.held_bytes = nnf_session_buffers_held(sess);
    if (!json || strcmp(json, "-"))
        print_text(&res);
    if (json)
        rc = write_json(json, &res);
    goto done;
run_failed:
    rc = cli_fail("bench", st, nnf_session_last_error(sess));
done:
    free(lat);
    cli_inputs_free(&in);
    nnf_session_destroy(sess);
    nnf_model_destroy(model);
    return rc;
}

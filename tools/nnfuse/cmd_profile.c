/* nnfuse profile MODEL [-o trace.json] [--top N] [--iterations N] [--warmup N] [--peak FILE]
 *
 * Per-node wall time, msprof's task-time view. The session records one
 * nnf_profile_event per executed node (a branch on opts.profile, so an
 * unprofiled session pays nothing); this command adds, from the output hook,
 * what the event lacks: the shapes the node really ran with, its FLOPs (the op
 * table's cost function on those shapes) and the bytes it read and wrote. The
 * hook runs after the node's timer stopped, so this bookkeeping is not timed.
 *
 * The trace uses ONNX Runtime's profiler field names, so scripts written for
 * ORT traces read ours, and it opens in Perfetto and chrome://tracing. */
#include "cli.h"

#include "base/alloc.h"
#include "base/strbuf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *usage = "MODEL [-o trace.json] [--top N] [--iterations N] [--warmup N] [--peak FILE] "
                           "[--threads N] [-O0..-O3] [-i NAME=FILE.npy]... [--input-shape NAME:dims]...";

/* What the hook learns about one profile event. */
typedef struct prof_rec {
    double flops, bytes;
    char *shapes; /* JSON: "input_type_shape": [...], "output_type_shape": [...] */
} prof_rec;

typedef struct prof_ctx {
    nnf_session *sess;
    const nnf_graph *g;
    prof_rec *recs; /* indexed like the session's events */
    size_t n_recs, cap_recs;
    nnf_status err;
} prof_ctx;

/* ONNX Runtime writes ONNX type names in output_type_shape. */
static const char *ort_type_name(nnf_dtype t) {
    switch (t) {
    case NNF_DTYPE_FLOAT32: return "float";
    case NNF_DTYPE_FLOAT64: return "double";
    case NNF_DTYPE_FLOAT16: return "float16";
    case NNF_DTYPE_BFLOAT16: return "bfloat16";
    default: return nnf_dtype_name(t);
    }
}

static void sb_shapes(nnf_strbuf *b, const char *key, nnf_buf *const *bufs, int n) {
    nnf_strbuf_printf(b, "\"%s\": [", key);
    int first = 1;
    for (int k = 0; k < n; k++) {
        if (!bufs[k])
            continue;
        nnf_strbuf_printf(b, "%s{\"%s\": [", first ? "" : ", ", ort_type_name(bufs[k]->dtype));
        for (int d = 0; d < bufs[k]->rank; d++)
            nnf_strbuf_printf(b, "%s%lld", d ? ", " : "", (long long)bufs[k]->dims[d]);
        nnf_strbuf_printf(b, "]}");
        first = 0;
    }
    nnf_strbuf_printf(b, "]");
}

static void buf_to_tinfo(const nnf_buf *b, nnf_tinfo *t) {
    memset(t, 0, sizeof *t);
    t->shape.rank = -1;
    if (!b)
        return;
    t->present = true;
    t->dtype = b->dtype;
    t->shape.rank = b->rank;
    memcpy(t->shape.dims, b->dims, sizeof b->dims);
    t->data = b->data;
}

/* Called once per node output; the node's work is recorded at its first
 * present output, when every output is written and no input released yet. */
static void profile_hook(void *user, const nnf_node *node, int output_index, const nnf_value *value,
                         const nnf_buf *buf) {
    prof_ctx *ctx = user;
    (void)value;
    (void)buf;
    int first = 0;
    while (first < node->n_outputs && node->outputs[first] < 0)
        first++;
    if (output_index != first || ctx->err != NNF_OK)
        return;
    const nnf_profile_event *ev;
    size_t n_ev;
    nnf_session_profile(ctx->sess, &ev, &n_ev);
    ctx->g = nnf_session_graph(ctx->sess); /* a shape plan's, where the run went to one */
    int id = (int)(node - ctx->g->nodes);
    if (n_ev == 0 || ev[n_ev - 1].node != id || node->n_inputs > 64 || node->n_outputs > 64) {
        ctx->err = nnf_node_error(node, NNF_ERR_INTERNAL, "profile event and output hook disagree");
        return;
    }
    if (n_ev > ctx->cap_recs) {
        size_t cap = ctx->cap_recs ? ctx->cap_recs * 2 : 256;
        while (cap < n_ev)
            cap *= 2;
        prof_rec *r = realloc(ctx->recs, cap * sizeof *r);
        if (!r) {
            ctx->err = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory recording the profile");
            return;
        }
        memset(r + ctx->cap_recs, 0, (cap - ctx->cap_recs) * sizeof *r);
        ctx->recs = r;
        ctx->cap_recs = cap;
    }
    nnf_buf *in[64], *out[64], *shown_in[64], *shown_out[64], shown[128];
    nnf_tinfo tin[64], tout[64];
    double bytes = 0;
    const nnf_graph *g = ctx->g;
    for (int pass = 0; pass < 2; pass++) {
        int cnt = pass ? node->n_outputs : node->n_inputs;
        const int *ids = pass ? node->outputs : node->inputs;
        nnf_buf **bufs = pass ? out : in, **show = pass ? shown_out : shown_in;
        for (int k = 0; k < cnt; k++) {
            /* the executor keeps a node's inputs alive until its hooks ran;
             * last: the executor running */
            bufs[k] = ids[k] >= 0 ? &ctx->sess->last->bufs[ids[k]] : NULL;
            buf_to_tinfo(bufs[k], pass ? &tout[k] : &tin[k]);
            if (bufs[k])
                bytes += (double)bufs[k]->numel * (double)nnf_dtype_size(bufs[k]->dtype);
            /* shapes as the model has them: a blocked value by its logical channels */
            show[k] = bufs[k];
            if (bufs[k] && g->values[ids[k]].blocked_of >= 0) {
                shown[pass * 64 + k] = *bufs[k];
                shown[pass * 64 + k].dims[1] = g->values[g->values[ids[k]].blocked_of].shape.dims[1];
                show[k] = &shown[pass * 64 + k];
            }
        }
    }
    prof_rec *r = &ctx->recs[n_ev - 1];
    nnf_free(r->shapes);
    r->flops = node->op->cost(node, tin, tout);
    r->bytes = bytes;
    nnf_strbuf sb = {0};
    sb_shapes(&sb, "input_type_shape", shown_in, node->n_inputs);
    nnf_strbuf_printf(&sb, ", ");
    sb_shapes(&sb, "output_type_shape", shown_out, node->n_outputs);
    if (!(r->shapes = nnf_strbuf_take(&sb)))
        ctx->err = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory recording the profile");
    if (n_ev > ctx->n_recs)
        ctx->n_recs = n_ev;
}

/* Session-level span of one iteration, like ORT's "model_run" event. */
typedef struct run_span {
    double start_us, dur_us;
} run_span;

static int write_trace(const char *path, const prof_ctx *ctx, const nnf_profile_event *ev, size_t n_ev,
                       const run_span *runs, int n_runs) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "nnfuse profile: cannot write %s\n", path);
        return EXIT_INVALID;
    }
    int pid = (int)getpid();
    fputs("[\n", f);
    for (int r = 0; r < n_runs; r++)
        fprintf(f,
                "{\"cat\": \"Session\", \"pid\": %d, \"tid\": 0, \"dur\": %.3f, \"ts\": %.3f, \"ph\": \"X\", "
                "\"name\": \"model_run\", \"args\": {\"iteration\": %d}},\n",
                pid, runs[r].dur_us, runs[r].start_us, r);
    for (size_t i = 0; i < n_ev; i++) {
        const nnf_node *n = &ctx->g->nodes[ev[i].node];
        const prof_rec *rec = i < ctx->n_recs ? &ctx->recs[i] : NULL;
        fprintf(f, "{\"cat\": \"Node\", \"pid\": %d, \"tid\": 0, \"dur\": %.3f, \"ts\": %.3f, \"ph\": \"X\", \"name\": ",
                pid, ev[i].dur_us, ev[i].start_us);
        cli_json_string(f, n->name);
        fputs(", \"args\": {\"op_name\": ", f);
        cli_json_string(f, n->op_type);
        fprintf(f, ", \"node_index\": \"%d\", \"provider\": \"nnfuse\", \"kernel\": ", ev[i].node);
        cli_json_string(f, ev[i].kernel ? ev[i].kernel : "ref");
        if (ev[i].over_input >= 0 && ev[i].over_input < n->n_inputs && n->inputs[ev[i].over_input] >= 0) {
            fputs(", \"over_input\": ", f); /* wrote its output over this dying input's buffer */
            cli_json_string(f, ctx->g->values[n->inputs[ev[i].over_input]].name);
        }
        if (n->fused_from && n->n_fused_from > 0) {
            fputs(", \"fused_from\": [", f);
            for (int k = 0; k < n->n_fused_from; k++) {
                if (k)
                    fputs(", ", f);
                cli_json_string(f, n->fused_from[k]);
            }
            fputc(']', f);
        }
        fprintf(f, ", \"thread_busy_us\": %.3f", ev[i].busy_us);
        if (rec && rec->shapes)
            fprintf(f, ", %s, \"flops\": %.0f, \"bytes\": %.0f", rec->shapes, rec->flops, rec->bytes);
        else
            fputs(", \"input_type_shape\": [], \"output_type_shape\": []", f);
        fprintf(f, "}}%s\n", i + 1 < n_ev ? "," : "");
    }
    fputs("]\n", f);
    int bad = ferror(f);
    bad |= fclose(f);
    if (bad) {
        fprintf(stderr, "nnfuse profile: error writing %s\n", path);
        return EXIT_INVALID;
    }
    return EXIT_OK;
}

/* The peak tool's JSON: the first number after any of the keys, else 0. A
 * lenient scan rather than a JSON parser, because the file is ours and flat. */
static double json_number_of(const char *text, const char *const *keys) {
    for (; *keys; keys++) {
        char pat[96];
        snprintf(pat, sizeof pat, "\"%s\"", *keys);
        const char *p = strstr(text, pat);
        if (!p)
            continue;
        p += strlen(pat);
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            p++;
        if (*p++ != ':')
            continue;
        char *end;
        double v = strtod(p, &end);
        if (end != p && v > 0 && isfinite(v))
            return v;
    }
    return 0;
}

typedef struct peak_info {
    double gflops, gbs; /* for the threads this run used; 0 = unknown */
} peak_info;

static int read_peak(const char *path, int threads, peak_info *pk) {
    memset(pk, 0, sizeof *pk);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "nnfuse profile: cannot read %s\n", path);
        return EXIT_INVALID;
    }
    char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    /* bench/peak --json: fma_gflops_1 / _n, copy_gbs_1 / _n, triad_gbs_1 / _n, threads */
    static const char *const k_f1[] = {"fma_gflops_1", NULL}, *const k_fn[] = {"fma_gflops_n", NULL},
                             *const k_threads[] = {"threads", NULL};
    static const char *const k_copy1[] = {"copy_gbs_1", NULL}, *const k_triad1[] = {"triad_gbs_1", NULL},
                             *const k_copyn[] = {"copy_gbs_n", NULL}, *const k_triadn[] = {"triad_gbs_n", NULL};
    /* other producers: a per-core or a total figure */
    static const char *const total_flops[] = {"peak_gflops", "fma_gflops", "gflops", NULL};
    static const char *const core_flops[] = {"gflops_per_core", "fma_gflops_per_core", NULL};
    static const char *const bandwidth[] = {"bandwidth_gbs", "stream_gbs", "memcpy_gbs", "gbs", "bandwidth", NULL};
    double f1 = json_number_of(text, k_f1), fn = json_number_of(text, k_fn);
    /* the best measured bandwidth, so "% peak" never flatters */
    double b1 = fmax(json_number_of(text, k_copy1), json_number_of(text, k_triad1));
    double bn = fmax(json_number_of(text, k_copyn), json_number_of(text, k_triadn));
    if (f1 > 0) {
        bool same_threads = (int)json_number_of(text, k_threads) == threads;
        pk->gflops = threads <= 1 ? f1 : fn > 0 && same_threads ? fn : f1 * threads;
        pk->gbs = threads <= 1 || bn <= 0 ? b1 : bn;
    } else {
        double per_core = json_number_of(text, core_flops);
        /* FMA peak scales with cores; a per-core figure is scaled to the threads used */
        pk->gflops = per_core > 0 ? per_core * threads : json_number_of(text, total_flops);
        pk->gbs = json_number_of(text, bandwidth);
    }
    if (pk->gflops <= 0 && pk->gbs <= 0)
        fprintf(stderr, "nnfuse profile: %s has no peak figures (fma_gflops_1, triad_gbs_1, ...)\n", path);
    return EXIT_OK;
}

typedef struct agg {
    const char *name, *op;
    int node;
    size_t calls;
    double us, flops, bytes;
    double busy_us; /* the threads' working time (nnf_profile_event) */
} agg;

static int cmp_agg(const void *a, const void *b) {
    double x = ((const agg *)a)->us, y = ((const agg *)b)->us;
    return (x < y) - (x > y);
}

/* With several threads, the share of the threads' time the rows kept them
 * working: the rest they waited (a job's slowest thread, or a kernel that
 * runs on the calling thread alone). */
static double busy_pct(double busy_us, double us, int threads) {
    return us > 0 ? 100.0 * busy_us / ((double)threads * us) : 0;
}

static void print_table(const char *title, agg *rows, size_t n, size_t top, double total_us,
                        const peak_info *pk, int threads) {
    qsort(rows, n, sizeof *rows, cmp_agg);
    printf("\n%s\n", title);
    printf("%-32s %-18s %6s %10s %9s %6s %9s %10s %8s", "name", "op", "calls", "total ms", "avg ms", "%", "GFLOP/s",
           "MB/call", "GB/s");
    if (pk->gflops > 0 || pk->gbs > 0)
        printf(" %8s", "% peak");
    if (threads > 1)
        printf(" %6s", "busy %");
    putchar('\n');
    for (size_t i = 0; i < n && (top == 0 || i < top); i++) {
        const agg *r = &rows[i];
        double sec = r->us / 1e6;
        double gflops = sec > 0 ? r->flops / sec / 1e9 : 0, gbs = sec > 0 ? r->bytes / sec / 1e9 : 0;
        printf("%-32.32s %-18.18s %6zu %10.3f %9.4f %6.2f %9.2f %10.3f %8.2f", r->name, r->op, r->calls, r->us / 1e3,
               r->us / 1e3 / (double)r->calls, total_us > 0 ? 100.0 * r->us / total_us : 0, gflops,
               r->bytes / (double)r->calls / 1e6, gbs);
        if (pk->gflops > 0 || pk->gbs > 0) {
            /* roofline view: how close the node came to whichever limit binds it */
            double fc = pk->gflops > 0 ? gflops / pk->gflops : 0, fm = pk->gbs > 0 ? gbs / pk->gbs : 0;
            printf(" %7.1f%c", 100.0 * (fc > fm ? fc : fm), fc > fm ? 'F' : 'M');
        }
        if (threads > 1)
            printf(" %6.1f", busy_pct(r->busy_us, r->us, threads));
        putchar('\n');
    }
    if (top && n > top)
        printf("... %zu more (--top 0 shows all)\n", n - top);
}

/* The original nodes behind each fused node of the table, in table order. */
static void print_fused(const nnf_graph *g, const agg *rows, size_t n, size_t top) {
    int header = 0;
    for (size_t i = 0; i < n && (top == 0 || i < top); i++) {
        const nnf_node *nd = &g->nodes[rows[i].node];
        if (!nd->fused_from || nd->n_fused_from <= 0)
            continue;
        if (!header++)
            printf("\nFused nodes (the original nodes each one replaced):\n");
        printf("  %s:", nd->name);
        for (int k = 0; k < nd->n_fused_from; k++)
            printf(" %s%s", nd->fused_from[k], k + 1 < nd->n_fused_from ? "," : "\n");
    }
}

int cmd_profile(int argc, char **argv) {
    cli_common c;
    cli_common_init(&c);
    const char *trace = NULL, *peak_file = NULL;
    long top = 20, iterations = 1, warmup = 1;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i);
        if (r > 0)
            continue;
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (r == 0 && !strcmp(argv[i], "-o") && val)
            trace = argv[++i];
        else if (r == 0 && !strcmp(argv[i], "--peak") && val)
            peak_file = argv[++i];
        else if (r == 0 && !strcmp(argv[i], "--top") && val)
            top = strtol(argv[++i], &end, 10);
        else if (r == 0 && !strcmp(argv[i], "--iterations") && val)
            iterations = strtol(argv[++i], &end, 10);
        else if (r == 0 && !strcmp(argv[i], "--warmup") && val)
            warmup = strtol(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: nnfuse profile %s\n"
                   "Defaults: 1 warm-up run (not recorded), 1 profiled iteration, top 20 nodes.\n"
                   "--peak FILE reads the output of `peak --json` (build/peak).\n",
                   usage);
            return EXIT_OK;
        } else
            return cli_usage("profile", usage);
        if (end && (*end || end == val))
            return cli_usage("profile", usage);
    }
    if (!c.model || top < 0 || iterations < 1 || iterations > 1000000 || warmup < 0)
        return cli_usage("profile", usage);

    int rc = EXIT_OK;
    nnf_model *model = NULL;
    nnf_session *sess = NULL;
    cli_inputs in = {0};
    prof_ctx ctx = {0};
    run_span *runs = NULL;
    agg *ops = NULL, *nodes = NULL;
    const nnf_tensor *outs = NULL;
    size_t n_outs = 0;
    nnf_session_options so = nnf_session_options_default();
    so.profile = 1;
    nnf_status st = cli_open(&c, &model, &sess, &so);
    if (st != NNF_OK)
        return cli_fail("profile", st, nnf_last_error());
    ctx.sess = sess;
    peak_info pk = {0};
    if (peak_file && (rc = read_peak(peak_file, nnf_threadpool_size(sess->pool), &pk)) != EXIT_OK)
        goto done;
    st = cli_inputs_make(model, &c, &in);
    if (st != NNF_OK) {
        rc = cli_fail("profile", st, nnf_last_error());
        goto done;
    }
    for (long w = 0; w < warmup; w++)
        if ((st = nnf_session_run(sess, in.tensors, in.n, &outs, &n_outs)) != NNF_OK)
            goto run_failed;
    nnf_session_profile_reset(sess);
    nnf_session_set_hook(sess, profile_hook, &ctx, false);
    runs = calloc((size_t)iterations, sizeof *runs);
    if (!runs) {
        rc = cli_fail("profile", NNF_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (long it = 0; it < iterations; it++) {
        double t0 = nnf_now_us();
        st = nnf_session_run(sess, in.tensors, in.n, &outs, &n_outs);
        runs[it] = (run_span){t0 - sess->t0_us, nnf_now_us() - t0};
        if (st != NNF_OK)
            goto run_failed;
        if (ctx.err != NNF_OK) {
            rc = cli_fail("profile", ctx.err, nnf_last_error());
            goto done;
        }
    }
    const nnf_profile_event *ev;
    size_t n_ev;
    nnf_session_profile(sess, &ev, &n_ev);
    const nnf_graph *g = ctx.g = nnf_session_graph(sess);
    ops = calloc((size_t)g->n_nodes + 1, sizeof *ops);
    nodes = calloc((size_t)g->n_nodes + 1, sizeof *nodes);
    if (!ops || !nodes) {
        rc = cli_fail("profile", NNF_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    size_t n_ops = 0, n_nodes = 0;
    double total_us = 0, run_us = 0, busy_us = 0;
    int threads = nnf_threadpool_size(sess->pool);
    for (long it = 0; it < iterations; it++)
        run_us += runs[it].dur_us;
    for (size_t i = 0; i < n_ev; i++) {
        const nnf_node *n = &g->nodes[ev[i].node];
        const prof_rec *rec = i < ctx.n_recs ? &ctx.recs[i] : NULL;
        size_t k = 0;
        while (k < n_nodes && nodes[k].node != ev[i].node)
            k++;
        if (k == n_nodes)
            nodes[n_nodes++] = (agg){.name = n->name, .op = n->op_type, .node = ev[i].node};
        size_t o = 0;
        while (o < n_ops && strcmp(ops[o].name, n->op_type))
            o++;
        if (o == n_ops)
            ops[n_ops++] = (agg){.name = n->op_type, .op = "", .node = -1};
        agg *both[2] = {&nodes[k], &ops[o]};
        for (int b = 0; b < 2; b++) {
            both[b]->calls++;
            both[b]->us += ev[i].dur_us;
            both[b]->flops += rec ? rec->flops : 0;
            both[b]->bytes += rec ? rec->bytes : 0;
            both[b]->busy_us += ev[i].busy_us;
        }
        total_us += ev[i].dur_us;
        busy_us += ev[i].busy_us;
    }
    printf("Profiled %ld iteration%s of %s: %zu node events, %.3f ms in nodes, %.3f ms per run\n", iterations,
           iterations > 1 ? "s" : "", c.model, n_ev, total_us / 1e3, run_us / 1e3 / (double)iterations);
    if (threads > 1)
        printf("Threads: %d, busy %.1f %% of their time in nodes (busy %% below: the rest they "
               "waited)\n",
               threads, busy_pct(busy_us, total_us, threads));
    print_table("Per operator type:", ops, n_ops, 0, total_us, &pk, threads);
    print_table("Per node:", nodes, n_nodes, (size_t)top, total_us, &pk, threads);
    print_fused(g, nodes, n_nodes, (size_t)top);
    if (trace) {
        rc = write_trace(trace, &ctx, ev, n_ev, runs, (int)iterations);
        if (rc == EXIT_OK)
            printf("\nTrace: %s (Chrome trace format; open in https://ui.perfetto.dev or chrome://tracing)\n", trace);
    }
    goto done;
run_failed:
    rc = cli_fail("profile", st, nnf_session_last_error(sess));
done:
    for (size_t i = 0; i < ctx.cap_recs; i++)
        nnf_free(ctx.recs[i].shapes);
    free(ctx.recs);
    free(runs);
    free(ops);
    free(nodes);
    cli_inputs_free(&in);
    nnf_session_destroy(sess);
    nnf_model_destroy(model);
    return rc;
}

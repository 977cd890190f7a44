/* nnfuse compile MODEL.onnx -o OUT.nnf [--input-shape NAME:d0,...]... [-O0..-O3]
 *   [--precision fp32] [--report FILE.json] [--verify] */
#include "cli.h"

#include "runtime/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static const char *usage = "MODEL.onnx -o OUT.nnf [--input-shape NAME:d0,d1,...]... [-O0..-O3] "
                           "[--precision fp32] [--report FILE.json] [--verify] [--threads N]";

static int live_nodes(const nnf_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++)
        n += !g->nodes[i].dead;
    return n;
}

/* Runs `model` on the seeded inputs of c; *outs stays valid until the session
 * goes. */
static nnf_status run_once(const nnf_model *model, const cli_common *c, nnf_session **sess,
                           cli_inputs *in, const nnf_tensor **outs, size_t *n_outs) {
    nnf_session_options so = nnf_session_options_default();
    so.threads = c->threads;
    NNF_CHECK(nnf_session_create(model, &so, sess));
    NNF_CHECK(cli_inputs_make(model, c, in));
    nnf_status st = nnf_session_run(*sess, in->tensors, in->n, outs, n_outs);
    if (st != NNF_OK)
        nnf_error(st, "%s", nnf_session_last_error(*sess));
    return st;
}

static size_t tensor_bytes(const nnf_tensor *t) {
    size_t n = nnf_dtype_size(t->dtype);
    for (int d = 0; d < t->rank; d++)
        n *= (size_t)t->shape[d];
    return n;
}

/* --verify: the compiled file, loaded as a user would, against the model
 * compile loaded (the source with the same options), run on the same seeded
 * inputs: every output (want[0..n_want)) equal bit for bit. */
static int verify(const cli_common *c, const char *out_path, nnf_model_options mo,
                  const nnf_tensor *want, size_t n_want) {
    cli_common nnf = *c;
    nnf.model = out_path;
    nnf_model *b = NULL;
    nnf_session *sb = NULL;
    cli_inputs ib = {0};
    const nnf_tensor *got = NULL;
    size_t n_got = 0;
    int rc = EXIT_OK;
    nnf_status st = cli_load(&nnf, mo, true, &b);
    if (st == NNF_OK)
        st = run_once(b, &nnf, &sb, &ib, &got, &n_got);
    if (st != NNF_OK) {
        rc = cli_fail("compile", st, nnf_last_error());
        goto done;
    }
    for (size_t k = 0; k < n_want && k < n_got && rc == EXIT_OK; k++) {
        size_t bytes = tensor_bytes(&want[k]);
        if (want[k].dtype != got[k].dtype || want[k].rank != got[k].rank ||
            bytes != tensor_bytes(&got[k]) || memcmp(want[k].data, got[k].data, bytes)) {
            fprintf(stderr, "nnfuse compile: --verify: output '%s' of %s differs from %s's\n",
                    want[k].name, out_path, c->model);
            rc = EXIT_ACCURACY;
        }
    }
    if (n_want != n_got) {
        fprintf(stderr, "nnfuse compile: --verify: %zu outputs against %zu\n", n_got, n_want);
        rc = EXIT_ACCURACY;
    }
    if (rc == EXIT_OK)
        printf("verified: %zu output(s) of %s equal %s's bit for bit\n", n_want, out_path,
               c->model);
done:
    cli_inputs_free(&ib);
    nnf_session_destroy(sb);
    nnf_model_destroy(b);
    return rc;
}

/* --report: arena (of a run of the compiled model) and the packed blocks'
 * and file's bytes as measured by the caller */
static int report(const cli_common *c, const char *path, const char *out_path,
                  const nnf_model *model, nnf_model_options mo, size_t arena, size_t packed,
                  size_t file_bytes) {
    nnf_model *exported = NULL;
    mo.opt_level = 0;
    nnf_status st = cli_load(c, mo, true, &exported);
    if (st != NNF_OK)
        return cli_fail("compile", st, nnf_last_error());
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "nnfuse compile: cannot write %s\n", path);
        nnf_model_destroy(exported);
        return EXIT_INVALID;
    }
    const nnf_graph *g = nnf_model_graph(model);
    size_t weights = packed, tensors = 0, bytes;
    for (int i = 0; i < g->n_values; i++) {
        const nnf_value *v = &g->values[i];
        if ((v->kind == NNF_VALUE_INITIALIZER || v->kind == NNF_VALUE_CONSTANT) && v->data)
            weights += v->nbytes; /* held unpacked */
        else if (v->producer >= 0 && !g->nodes[v->producer].dead &&
                 nnf_value_static_bytes(v, &bytes))
            tensors += bytes;
    }
    fprintf(f, "{\"model\": ");
    cli_json_string(f, c->model);
    fprintf(f, ", \"output\": ");
    cli_json_string(f, out_path);
    fprintf(f, ", \"opt_level\": %d, \"nodes_before\": %d, \"nodes_after\": %d, \"fusions\": [",
            c->opt_level, live_nodes(nnf_model_graph(exported)), live_nodes(g));
    int first = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        const nnf_node *n = &g->nodes[i];
        if (n->dead || !n->n_fused_from)
            continue;
        fprintf(f, "%s{\"pattern\": ", first ? "" : ", ");
        cli_json_string(f, n->op_type);
        fprintf(f, ", \"node\": ");
        cli_json_string(f, n->name);
        fprintf(f, ", \"nodes\": [");
        for (int k = 0; k < n->n_fused_from; k++) {
            fprintf(f, "%s", k ? ", " : "");
            cli_json_string(f, n->fused_from[k]);
        }
        fprintf(f, "]}");
        first = 0;
    }
    fprintf(f,
            "], \"arena_bytes\": %zu, \"weights_bytes\": %zu, \"sum_tensor_bytes\": %zu, "
            "\"file_bytes\": %zu}\n",
            arena, weights, tensors, file_bytes);
    fclose(f);
    nnf_model_destroy(exported);
    return EXIT_OK;
}

int cmd_compile(int argc, char **argv) {
    cli_common c;
    cli_common_init(&c);
    const char *out_path = NULL, *report_path = NULL, *precision = "fp32";
    int do_verify = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i);
        if (r > 0)
            continue;
        if (r == 0 && !strcmp(argv[i], "-o") && i + 1 < argc)
            out_path = argv[++i];
        else if (r == 0 && !strcmp(argv[i], "--report") && i + 1 < argc)
            report_path = argv[++i];
        else if (r == 0 && !strcmp(argv[i], "--precision") && i + 1 < argc)
            precision = argv[++i];
        else if (r == 0 && !strcmp(argv[i], "--verify"))
            do_verify = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: nnfuse compile %s\n", usage);
            return EXIT_OK;
        } else
            return cli_usage("compile", usage);
    }
    if (!c.model || !out_path)
        return cli_usage("compile", usage);
    if (strcmp(precision, "fp32")) {
        fprintf(stderr, "nnfuse compile: --precision %s: only fp32 is compiled yet\n", precision);
        return EXIT_UNSUPPORTED;
    }
    nnf_model_options mo = nnf_model_options_default();
    mo.opt_level = c.opt_level;
    nnf_model *model = NULL;
    size_t packed = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    nnf_status st = cli_compile(&c, mo, out_path, &packed, &model);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (st != NNF_OK)
        return cli_fail("compile", st, nnf_last_error());
    struct stat sb;
    size_t file_bytes = stat(out_path, &sb) == 0 ? (size_t)sb.st_size : 0;
    printf("compiled %s -> %s: %d nodes, %.1f MiB, in %.1f ms\n", c.model, out_path,
           live_nodes(nnf_model_graph(model)), (double)file_bytes / (1 << 20),
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    /* one run of the model as compiled: its arena for the report, its outputs
     * for --verify */
    nnf_session *sess = NULL;
    cli_inputs in = {0};
    const nnf_tensor *outs = NULL;
    size_t n_outs = 0, arena = 0;
    int rc = EXIT_OK;
    if (report_path || do_verify) {
        if ((st = run_once(model, &c, &sess, &in, &outs, &n_outs)) != NNF_OK)
            rc = cli_fail("compile", st, nnf_last_error());
        else
            nnf_session_memory(sess, NULL, &arena);
    }
    if (rc == EXIT_OK && report_path)
        rc = report(&c, report_path, out_path, model, mo, arena, packed, file_bytes);
    if (rc == EXIT_OK && do_verify)
        rc = verify(&c, out_path, mo, outs, n_outs);
    cli_inputs_free(&in);
    nnf_session_destroy(sess);
    nnf_model_destroy(model);
    return rc;
}

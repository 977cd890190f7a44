/* nnfuse ops [--json] [--check MODEL] */
#include "cli.h"

#include "base/file.h"
#include "ir/bind.h"
#include "onnx/import.h"
#include "ops/op.h"

#include <libgen.h>
#include <stdio.h>
#include <string.h>

static void json_dtypes(const char *list) {
    putchar('[');
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        printf("%s\"%.*s\"", p == list ? "" : ", ", (int)l, p);
        p += l + (e ? 1 : 0);
    }
    putchar(']');
}

static int check_model(const char *path) {
    nnf_mapping *file = NULL;
    nnf_graph *g = NULL;
    nnf_status st = nnf_file_map(path, &file);
    if (st != NNF_OK)
        return cli_fail("ops", st, nnf_last_error());
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    st = nnf_onnx_import(file->addr, file->size, path, dirname(dir), &g);
    if (st != NNF_OK) {
        nnf_mappings_free(file);
        return cli_fail("ops", st, nnf_last_error());
    }
    enum { MAX = 4096 };
    static char lines[MAX][256];
    int n = nnf_graph_unsupported(g, lines, MAX);
    if (n == 0)
        printf("%s: every operator is supported\n", path);
    else {
        printf("%s: %d unsupported operator node%s:\n", path, n, n > 1 ? "s" : "");
        for (int i = 0; i < n && i < MAX; i++)
            printf("  %s\n", lines[i]);
        printf("See `nnfuse ops` for the supported list; include/nnfuse_plugin.h adds custom operators.\n");
    }
    nnf_graph_destroy(g);
    nnf_mappings_free(file);
    return n ? EXIT_UNSUPPORTED : EXIT_OK;
}

int cmd_ops(int argc, char **argv) {
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--check") && i + 1 < argc)
            return check_model(argv[++i]);
        else
            return cli_usage("ops", "[--json] [--check MODEL]");
    }
    size_t n = nnf_op_count();
    if (json)
        printf("[\n");
    else
        printf("%-14s %-26s %-8s %s\n", "domain", "operator", "opsets", "dtypes");
    for (size_t i = 0; i < n; i++) {
        const nnf_op_def *d = nnf_op_at(i);
        const char *dom = d->domain[0] ? d->domain : "ai.onnx";
        if (json) {
            printf("  {\"domain\": \"%s\", \"name\": \"%s\", \"since_version\": %d, \"until_version\": %d, \"dtypes\": ",
                   dom, d->name, d->since_version, d->until_version);
            json_dtypes(d->dtypes);
            printf("}%s\n", i + 1 < n ? "," : "");
        } else {
            char range[32];
            snprintf(range, sizeof range, "%d-%d", d->since_version, d->until_version);
            printf("%-14s %-26s %-8s %s\n", dom, d->name, range, d->dtypes);
        }
    }
    if (json)
        printf("]\n");
    else
        printf("%zu operator entries\n", n);
    return EXIT_OK;
}

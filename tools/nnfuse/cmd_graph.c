/* nnfuse graph MODEL [-O0..-O3] [-o FILE.dot|FILE.svg]
 *
 * The graph as the runtime will execute it (after the optimisation level's
 * passes), as Graphviz DOT on stdout or in a file; .svg goes through `dot`. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *usage = "MODEL [-O0..-O3] [-o FILE.dot|FILE.svg]";

static bool ends_with(const char *s, const char *suffix) {
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && !strcmp(s + ls - lx, suffix);
}

/* Pipes the DOT text into `dot -Tsvg -o path`, without a shell, so any
 * characters in the path are safe. */
static int write_svg(const nnf_graph *g, const char *path) {
    int fds[2];
    if (pipe(fds) != 0) {
        fprintf(stderr, "nnfuse graph: pipe: %s\n", strerror(errno));
        return EXIT_INTERNAL;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "nnfuse graph: fork: %s\n", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return EXIT_INTERNAL;
    }
    if (pid == 0) {
        dup2(fds[0], 0);
        close(fds[0]);
        close(fds[1]);
        execlp("dot", "dot", "-Tsvg", "-o", path, (char *)NULL);
        fprintf(stderr, "nnfuse graph: cannot run Graphviz `dot` (%s); install graphviz or write .dot\n",
                strerror(errno));
        _exit(127);
    }
    close(fds[0]);
    FILE *f = fdopen(fds[1], "w");
    if (!f) {
        close(fds[1]);
        waitpid(pid, NULL, 0);
        return EXIT_INTERNAL;
    }
    nnf_graph_dump_dot(g, f);
    fclose(f);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return EXIT_INTERNAL;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "nnfuse graph: `dot -Tsvg -o %s` failed (exit %d)\n", path,
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return EXIT_INTERNAL;
    }
    return EXIT_OK;
}

int cmd_graph(int argc, char **argv) {
    cli_common c;
    cli_common_init(&c);
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i);
        if (r > 0)
            continue;
        if (r == 0 && !strcmp(argv[i], "-o") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: nnfuse graph %s\nWithout -o the DOT text goes to stdout.\n", usage);
            return EXIT_OK;
        } else
            return cli_usage("graph", usage);
    }
    if (!c.model)
        return cli_usage("graph", usage);
    if (out && ends_with(out, ".onnx")) {
        fprintf(stderr, "nnfuse graph: writing .onnx is not supported yet; use .dot or .svg\n");
        return EXIT_USAGE;
    }
    if (out && !ends_with(out, ".dot") && !ends_with(out, ".gv") && !ends_with(out, ".svg")) {
        fprintf(stderr, "nnfuse graph: -o %s: the extension must be .dot or .svg\n", out);
        return EXIT_USAGE;
    }
    nnf_model *model = NULL;
    nnf_model_options mo = nnf_model_options_default();
    mo.opt_level = c.opt_level;
    nnf_status st = nnf_model_load(c.model, &mo, &model);
    if (st != NNF_OK)
        return cli_fail("graph", st, nnf_last_error());
    const nnf_graph *g = nnf_model_graph(model);
    int rc = EXIT_OK;
    if (!out)
        nnf_graph_dump_dot(g, stdout);
    else if (ends_with(out, ".svg"))
        rc = write_svg(g, out);
    else {
        FILE *f = fopen(out, "w");
        if (!f) {
            fprintf(stderr, "nnfuse graph: cannot write %s: %s\n", out, strerror(errno));
            rc = EXIT_INVALID;
        } else {
            nnf_graph_dump_dot(g, f);
            int bad = ferror(f);
            bad |= fclose(f);
            if (bad) {
                fprintf(stderr, "nnfuse graph: error writing %s\n", out);
                rc = EXIT_INVALID;
            }
        }
    }
    if (rc == EXIT_OK && out)
        printf("%s: %s\n", out, ends_with(out, ".svg") ? "SVG" : "DOT");
    nnf_model_destroy(model);
    return rc;
}

/* The `nnfuse` command: one binary, subcommands (see docs/CLI.md). */
#include "cli.h"

#include <stdio.h>
#include <string.h>

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"info", cmd_info, "inputs, outputs, op histogram, parameters, GFLOPs of a model"},
    {"ops", cmd_ops, "list supported operators; --check MODEL lists the unsupported ones"},
    {"run", cmd_run, "run one inference, writing outputs as .npy"},
    {"bench", cmd_bench, "latency, throughput, first inference, peak RSS and arena of a model"},
    {"profile", cmd_profile, "per-node timing: a table per op and node, Chrome-trace JSON"},
    {"compare", cmd_compare,
     "layer-by-layer accuracy against -O0 reference kernels, ONNX Runtime or .npy files"},
    {"graph", cmd_graph, "the graph as Graphviz DOT or SVG"},
    {"compile", cmd_compile,
     "compile a model into a .nnf file whose weights load packed (the offline compiler)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: nnfuse <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\ncommon options: --threads N (0 = all cores; loading and running), -O0..-O3, -v,\n"
            "  --seed N, -i NAME=FILE.npy, --input-shape NAME:d0,d1,... (fixed at load),\n"
            "  --shape-plans N (input shapes a model with symbolic dims plans on their first run;\n"
            "  default 4, 0 = none)\n"
            "environment: NNF_LOG_LEVEL=error|warn|info|debug|trace, NNF_ISA=scalar|avx2|avx512\n"
            "`nnfuse <command> --help` describes a command. Version " NNFUSE_VERSION ".\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("nnfuse %s\n", NNFUSE_VERSION);
        return EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "nnfuse: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}

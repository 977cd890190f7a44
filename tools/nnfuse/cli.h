/* Shared pieces of the `nnfuse` subcommands. */
#ifndef NNF_TOOLS_CLI_H
#define NNF_TOOLS_CLI_H

#include "nnfuse.h"
#include "runtime/session.h"

#include <stdbool.h>
#include <stdio.h>

enum {
    EXIT_OK = 0,
    EXIT_USAGE = 1,
    EXIT_INVALID = 2,
    EXIT_UNSUPPORTED = 3,
    EXIT_ACCURACY = 4,
    EXIT_OOM = 5,
    EXIT_INTERNAL = 6,
};

/* Map a status to the exit code of CLI.md. */
int cli_exit_code(nnf_status st);
/* Print "nnfuse <cmd>: <message>" for a failed status; returns the exit code. */
int cli_fail(const char *cmd, nnf_status st, const char *message);
int cli_usage(const char *cmd, const char *usage);
/* mkdir -p; 0 on success (errno set otherwise). */
int cli_mkdirs(const char *path);
/* Write s as a JSON string literal (quoted, escaped). */
void cli_json_string(FILE *f, const char *s);

/* Options every model command accepts. */
typedef struct cli_common {
    const char *model;
    int threads;         /* 0 = all cores */
    int opt_level;       /* -O0..-O3 */
    uint64_t seed;
    int verbose;
    const char *input_files[64]; /* "NAME=FILE.npy" */
    int n_input_files;
    const char *input_shapes[64]; /* "NAME:d0,d1,..." */
    int n_input_shapes;
    int shape_plans; /* --shape-plans N (nnf_model_options.shape_plans); -1 = the default */
} cli_common;

/* Consume a common flag at argv[*i] (advancing *i past its value). Returns 1 if
 * consumed, 0 if not a common flag, -1 on a malformed one. */
int cli_common_flag(cli_common *c, int argc, char **argv, int *i);
void cli_common_init(cli_common *c);

/* Inputs for one run: from -i files, or a seeded generator (floats uniform in
 * [-1,1), integers 0, bool false) with shapes from the model, which
 * --input-shape fixed at load (cli_open); other unknown dims are 1. */
typedef struct cli_inputs {
    nnf_tensor tensors[64];
    int64_t shapes[64][NNF_MAX_RANK];
    void *data[64];
    bool from_npy[64]; /* data[i] is an nnf_npy's (nnf_npy_free), else calloc'd */
    size_t n;
} cli_inputs;
nnf_status cli_inputs_make(const nnf_model *model, const cli_common *c, cli_inputs *out);
void cli_inputs_free(cli_inputs *in);

/* Load the model with the common options (--threads, --input-shape,
 * --shape-plans) over mo's opt_level and keep_unpacked_weights. again: a
 * second load of the model a command loads anyway (the exported graph's
 * statistics, the reference of `compare`), whose load warnings would repeat
 * the first's, so only errors are logged unless -v asked for more. */
nnf_status cli_load(const cli_common *c, nnf_model_options mo, bool again, nnf_model **out);

/* As cli_load, compiling the model into out_path (nnf_compile); *out gets the
 * loaded model, *packed_bytes the bytes of the file's packed blocks. */
nnf_status cli_compile(const cli_common *c, nnf_model_options mo, const char *out_path,
                       size_t *packed_bytes, nnf_model **out);

/* Load the model and create a session from the common options. */
nnf_status cli_open(const cli_common *c, nnf_model **model, nnf_session **session,
                    const nnf_session_options *extra);

int cmd_info(int argc, char **argv);
int cmd_ops(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_graph(int argc, char **argv);
int cmd_compile(int argc, char **argv);

#endif

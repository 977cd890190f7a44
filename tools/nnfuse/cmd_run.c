/* nnfuse run MODEL [-i NAME=FILE.npy]... [-o DIR] [--seed N] */
#include "cli.h"

#include "format/npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *usage = "MODEL [-i NAME=FILE.npy]... [-o DIR] [--seed N] [--threads N] [-O0..-O3] "
                           "[--dump-dir DIR [--dump-filter NAMES]] [--reference]";

int cmd_run(int argc, char **argv) {
    cli_common c;
    cli_common_init(&c);
    const char *out_dir = ".";
    nnf_session_options so = nnf_session_options_default();
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i);
        if (r > 0)
            continue;
        if (r == 0 && !strcmp(argv[i], "-o") && i + 1 < argc)
            out_dir = argv[++i];
        else if (r == 0 && !strcmp(argv[i], "--dump-dir") && i + 1 < argc)
            so.dump_dir = argv[++i];
        else if (r == 0 && !strcmp(argv[i], "--dump-filter") && i + 1 < argc)
            so.dump_filter = argv[++i];
        else if (r == 0 && !strcmp(argv[i], "--reference"))
            so.reference_kernels = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: nnfuse run %s\n", usage);
            return EXIT_OK;
        } else
            return cli_usage("run", usage);
    }
    if (!c.model)
        return cli_usage("run", usage);
    if (!so.dump_dir)
        so.dump_dir = getenv("NNF_DUMP_DIR");
    if (!so.dump_filter)
        so.dump_filter = getenv("NNF_DUMP_FILTER");
    if (so.dump_dir && cli_mkdirs(so.dump_dir) != 0) {
        fprintf(stderr, "nnfuse run: cannot create %s: %s\n", so.dump_dir, strerror(errno));
        return EXIT_INVALID;
    }
    nnf_model *model = NULL;
    nnf_session *sess = NULL;
    cli_inputs in = {0};
    int rc = EXIT_OK;
    nnf_status st = cli_open(&c, &model, &sess, &so);
    if (st != NNF_OK)
        return cli_fail("run", st, nnf_last_error());
    st = cli_inputs_make(model, &c, &in);
    if (st != NNF_OK) {
        rc = cli_fail("run", st, nnf_last_error());
        goto done;
    }
    const nnf_tensor *outs = NULL;
    size_t n_outs = 0;
    st = nnf_session_run(sess, in.tensors, in.n, &outs, &n_outs);
    if (st != NNF_OK) {
        rc = cli_fail("run", st, nnf_session_last_error(sess));
        goto done;
    }
    if (cli_mkdirs(out_dir) != 0) {
        fprintf(stderr, "nnfuse run: cannot create %s: %s\n", out_dir, strerror(errno));
        rc = EXIT_INVALID;
        goto done;
    }
    for (size_t k = 0; k < n_outs; k++) {
        char safe[256], path[4096];
        nnf_npy_safe_name(outs[k].name, safe, sizeof safe);
        snprintf(path, sizeof path, "%s/%s.npy", out_dir, safe);
        st = nnf_npy_write(path, outs[k].dtype, outs[k].rank, outs[k].shape, outs[k].data);
        if (st != NNF_OK) {
            rc = cli_fail("run", st, nnf_last_error());
            goto done;
        }
        printf("%s: %s [", path, nnf_dtype_name(outs[k].dtype));
        for (int d = 0; d < outs[k].rank; d++)
            printf("%s%lld", d ? "x" : "", (long long)outs[k].shape[d]);
        printf("]\n");
    }
done:
    cli_inputs_free(&in);
    nnf_session_destroy(sess);
    nnf_model_destroy(model);
    return rc;
}

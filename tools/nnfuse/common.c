#include "cli.h"

#include "base/log.h"
#include "format/npy.h"
#include "runtime/compile.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

int cli_exit_code(nnf_status st) {
    switch (st) {
    case NNF_OK: return EXIT_OK;
    case NNF_ERR_UNSUPPORTED: return EXIT_UNSUPPORTED;
    case NNF_ERR_OUT_OF_MEMORY: return EXIT_OOM;
    case NNF_ERR_INTERNAL: return EXIT_INTERNAL;
    case NNF_ERR_INVALID_ARGUMENT:
    case NNF_ERR_INVALID_MODEL:
    case NNF_ERR_IO:
    case NNF_ERR_SHAPE: return EXIT_INVALID;
    }
    return EXIT_INTERNAL;
}

int cli_fail(const char *cmd, nnf_status st, const char *message) {
    fprintf(stderr, "nnfuse %s: %s: %s\n", cmd, nnf_status_name(st), message && message[0] ? message : "(no detail)");
    return cli_exit_code(st);
}

int cli_usage(const char *cmd, const char *usage) {
    fprintf(stderr, "usage: nnfuse %s %s\n", cmd, usage);
    return EXIT_USAGE;
}

void cli_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

int cli_mkdirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != 0)
            continue;
        char saved = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return -1;
        buf[i] = saved;
    }
    return 0;
}

void cli_common_init(cli_common *c) {
    memset(c, 0, sizeof *c);
    c->threads = 0;
    c->opt_level = 3;
    c->shape_plans = -1;
}

int cli_common_flag(cli_common *c, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const char *val = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (!strcmp(a, "--threads") || !strcmp(a, "-t")) {
        if (!val)
            return -1;
        c->threads = atoi(val);
        ++*i;
        return 1;
    }
    if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) {
        c->opt_level = a[2] - '0';
        return 1;
    }
    if (!strcmp(a, "--seed")) {
        if (!val)
            return -1;
        c->seed = strtoull(val, NULL, 10);
        ++*i;
        return 1;
    }
    if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
        c->verbose++;
        nnf_log_set_level(c->verbose > 1 ? NNF_LOG_DEBUG : NNF_LOG_INFO);
        return 1;
    }
    if (!strcmp(a, "-i") || !strcmp(a, "--input")) {
        if (!val || c->n_input_files >= 64 || !strchr(val, '='))
            return -1;
        c->input_files[c->n_input_files++] = val;
        ++*i;
        return 1;
    }
    if (!strcmp(a, "--input-shape")) {
        if (!val || c->n_input_shapes >= 64 || !strchr(val, ':'))
            return -1;
        c->input_shapes[c->n_input_shapes++] = val;
        ++*i;
        return 1;
    }
    if (!strcmp(a, "--shape-plans")) {
        char *end;
        long n = val ? strtol(val, &end, 10) : -1;
        if (!val || *end || n < 0 || n > 1024)
            return -1;
        c->shape_plans = (int)n;
        ++*i;
        return 1;
    }
    if (a[0] != '-' && !c->model) {
        c->model = a;
        return 1;
    }
    return 0;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

nnf_status cli_inputs_make(const nnf_model *model, const cli_common *c, cli_inputs *out) {
    memset(out, 0, sizeof *out);
    size_t n = nnf_model_input_count(model);
    if (n > 64)
        return nnf_error(NNF_ERR_UNSUPPORTED, "more than 64 model inputs");
    uint64_t rng = c->seed;
    for (size_t i = 0; i < n; i++) {
        nnf_value_info info;
        NNF_CHECK(nnf_model_input_info(model, i, &info));
        nnf_tensor *t = &out->tensors[i];
        t->name = info.name;
        t->shape = out->shapes[i];
        out->n = i + 1;
        const char *file = NULL;
        for (int k = 0; k < c->n_input_files; k++) {
            const char *eq = strchr(c->input_files[k], '=');
            if ((size_t)(eq - c->input_files[k]) == strlen(info.name) &&
                !strncmp(c->input_files[k], info.name, strlen(info.name)))
                file = eq + 1;
        }
        if (file) {
            nnf_npy npy;
            NNF_CHECK(nnf_npy_read(file, &npy));
            t->dtype = npy.dtype;
            t->rank = npy.rank;
            memcpy(out->shapes[i], npy.shape, sizeof(int64_t) * (size_t)npy.rank);
            out->data[i] = t->data = npy.data;
            out->from_npy[i] = true;
            continue;
        }
        if (info.rank < 0)
            return nnf_error(NNF_ERR_INVALID_ARGUMENT,
                             "input '%s' has an unknown rank: give it with -i %s=FILE.npy", info.name, info.name);
        t->dtype = info.dtype == NNF_DTYPE_UNDEFINED ? NNF_DTYPE_FLOAT32 : info.dtype;
        t->rank = info.rank;
        /* --input-shape fixed the shape at load (cli_open); other unknown extents are 1 */
        size_t numel = 1;
        for (int d = 0; d < info.rank; d++) {
            int64_t e = info.dims[d] >= 0 ? info.dims[d] : 1;
            if (e < 0 || !nnf_mul_size(numel, (size_t)e, &numel))
                return nnf_error(NNF_ERR_INVALID_ARGUMENT, "input '%s': bad extent", info.name);
            out->shapes[i][d] = e;
        }
        size_t es = nnf_dtype_size(t->dtype), bytes;
        if (!es || !nnf_mul_size(numel, es, &bytes))
            return nnf_error(NNF_ERR_UNSUPPORTED, "input '%s': cannot generate dtype %s", info.name,
                             nnf_dtype_name(t->dtype));
        unsigned char *data = calloc(1, bytes ? bytes : 1);
        if (!data)
            return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for input '%s'", info.name);
        out->data[i] = data;
        t->data = data;
        if (t->dtype == NNF_DTYPE_FLOAT32)
            for (size_t k = 0; k < numel; k++)
                ((float *)data)[k] = (float)((double)(splitmix(&rng) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
        else if (t->dtype == NNF_DTYPE_FLOAT64)
            for (size_t k = 0; k < numel; k++)
                ((double *)data)[k] = (double)(splitmix(&rng) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
    }
    return NNF_OK;
}

void cli_inputs_free(cli_inputs *in) {
    for (size_t i = 0; i < in->n; i++) {
        if (in->from_npy[i])
            nnf_npy_free(&(nnf_npy){.data = in->data[i]});
        else
            free(in->data[i]);
    }
    in->n = 0;
}

/* The --input-shape NAME:d0,d1,... options as the model options' input shapes
 * (fixed at load, so passes and kernel plans see them). */
typedef struct cli_shapes {
    nnf_input_shape entries[64];
    char names[64][256];
    int64_t dims[64][16];
} cli_shapes;

static nnf_status parse_shapes(const cli_common *c, cli_shapes *out) {
    for (int k = 0; k < c->n_input_shapes; k++) {
        const char *s = c->input_shapes[k], *colon = strrchr(s, ':');
        size_t ln = (size_t)(colon - s);
        if (ln >= sizeof out->names[k])
            return nnf_error(NNF_ERR_INVALID_ARGUMENT, "--input-shape: name too long");
        memcpy(out->names[k], s, ln);
        out->names[k][ln] = 0;
        int rank = 0;
        for (const char *p = colon + 1; *p;) {
            char *end;
            long long e = strtoll(p, &end, 10);
            if (end == p || e < 0 || rank == 16 || (*end && *end != ','))
                return nnf_error(NNF_ERR_INVALID_ARGUMENT, "--input-shape %s: bad dims", s);
            out->dims[k][rank++] = e;
            p = *end ? end + 1 : end;
        }
        out->entries[k] = (nnf_input_shape){out->names[k], rank, out->dims[k]};
    }
    return NNF_OK;
}

/* cli_load, or with compile_to, nnf_compile into that file (*packed_bytes:
 * its blocks' bytes) */
static nnf_status load_or_compile(const cli_common *c, nnf_model_options mo, bool again,
                                  const char *compile_to, size_t *packed_bytes, nnf_model **out) {
    mo.threads = c->threads; /* the session's: a 1-thread figure uses one thread throughout */
    if (c->shape_plans >= 0)
        mo.shape_plans = c->shape_plans;
    *out = NULL;
    cli_shapes *shapes = c->n_input_shapes ? calloc(1, sizeof *shapes) : NULL;
    if (c->n_input_shapes && !shapes)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for --input-shape");
    nnf_status st = shapes ? parse_shapes(c, shapes) : NNF_OK;
    mo.input_shapes = shapes ? shapes->entries : NULL;
    mo.n_input_shapes = (size_t)c->n_input_shapes;
    nnf_log_level level = nnf_log_level_get();
    if (again && level == NNF_LOG_WARN)
        nnf_log_set_level(NNF_LOG_ERROR);
    if (st == NNF_OK)
        st = compile_to ? nnf_compile(c->model, &mo, compile_to, out, packed_bytes)
                        : nnf_model_load(c->model, &mo, out);
    nnf_log_set_level(level);
    free(shapes);
    return st;
}

nnf_status cli_load(const cli_common *c, nnf_model_options mo, bool again, nnf_model **out) {
    return load_or_compile(c, mo, again, NULL, NULL, out);
}

nnf_status cli_compile(const cli_common *c, nnf_model_options mo, const char *out_path,
                       size_t *packed_bytes, nnf_model **out) {
    return load_or_compile(c, mo, false, out_path, packed_bytes, out);
}

nnf_status cli_open(const cli_common *c, nnf_model **model, nnf_session **session,
                    const nnf_session_options *extra) {
    nnf_model_options mo = nnf_model_options_default();
    mo.opt_level = c->opt_level;
    mo.keep_unpacked_weights = extra && extra->reference_kernels;
    *session = NULL;
    NNF_CHECK(cli_load(c, mo, false, model));
    nnf_session_options so = extra ? *extra : nnf_session_options_default();
    so.threads = c->threads;
    nnf_status st = nnf_session_create(*model, &so, session);
    if (st != NNF_OK) {
        nnf_model_destroy(*model);
        *model = NULL;
    }
    return st;
}

/* nnfuse compare MODEL [--reference unfused|onnxruntime|DIR] [-i NAME=FILE.npy]... [--tolerance T]
 *
 * Layer-by-layer accuracy. The model runs as users run it (default options)
 * with an output hook that meets every tensor it computes; each is compared,
 * in execution order, with the same tensor of a reference:
 *   unfused      the same model at -O0 on the portable reference kernels,
 *                run first in this process, every tensor captured;
 *   onnxruntime  bench/ort_run.py in a separate Python process, which makes
 *                every intermediate value a graph output and writes all of
 *                them as .npy into a temporary folder;
 *   DIR          a folder of .npy files named by tensor (CLI.md safe names).
 *
 * The acceptance rule is ops-nn's: MERE < T and MAX-RE < 10·T, T = 2^-13 for
 * float32. Relative error is |x - ref| / max(|ref|, floor) with the floor
 * mean|ref| over the tensor. A fixed tiny epsilon makes every near-zero
 * element (a conv output crossing zero) count a legitimate few-ulp difference
 * of summation order, propagated through the layers above it, as a huge
 * relative error; even a floor of 2^-10·max|ref| left the zoo's tiny models
 * "failing" against ONNX Runtime at MAX-RE ~1.3e-3 with cosine 1.000000. With the mean as floor they show
 * MERE ~1e-6 and MAX-RE <= 3e-4, while an error of 1e-4 of the tensor's scale
 * in every element still fails MERE. Integer and bool tensors must match
 * exactly.
 *
 * Fusion can make a tensor disappear (a Conv's output inside Conv+ReLU) or
 * make one node stand for several. Lookups go through tensor_origin(): the
 * reference is searched by the tensor's original name, and a report names
 * every original node behind a fused one (node->fused_from). */
#include "cli.h"

#include "format/npy.h"
#include "runtime/model.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *usage = "MODEL [--reference unfused|onnxruntime|DIR] [-i NAME=FILE.npy]... [--tolerance T] "
                           "[--all] [--threads N] [-O0..-O3] [--seed N] [--input-shape NAME:dims]...";

#define F32_TOLERANCE 0x1p-13

typedef enum cmp_status { CMP_OK, CMP_FAIL, CMP_MISSING, CMP_MISMATCH } cmp_status;

typedef struct cmp_row {
    char *tensor, *node, *op;
    nnf_dtype dtype;
    int rank;
    int64_t dims[NNF_MAX_RANK];
    double max_abs, mere, max_re, cosine, tol;
    cmp_status status;
} cmp_row;

/* A captured tensor of the unfused reference run. */
typedef struct ref_tensor {
    char *name;
    nnf_dtype dtype;
    int rank;
    int64_t dims[NNF_MAX_RANK];
    size_t numel;
    void *data;
} ref_tensor;

typedef struct cmp_ctx {
    const char *dir; /* reference folder, or NULL for captured tensors */
    ref_tensor *refs;
    size_t n_refs, cap_refs;
    cmp_row *rows;
    size_t n_rows, cap_rows;
    double tol; /* T for float32/float64 */
    nnf_status err;
} cmp_ctx;

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap)
        return 1;
    size_t c = *cap ? *cap * 2 : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return 0;
    memset((char *)q + *cap * elem, 0, (c - *cap) * elem);
    *p = q;
    *cap = c;
    return 1;
}

static char *dup_str(const char *s) {
    size_t l = strlen(s) + 1;
    char *d = malloc(l);
    return d ? memcpy(d, s, l) : NULL;
}

/* ------------------------------------------------------------------ origin */

/* The name the reference knows a tensor by, and the original node(s) behind
 * the node that produced it, as "a+b+c". Fusion passes keep the name of the
 * fused group's last tensor on the fused node's output, so the tensor name is
 * the value's own; the tensors inside the group no longer exist in the
 * optimised run and are simply not compared. */
static void tensor_origin(const nnf_node *node, const nnf_value *value, const char **tensor, char *nodes,
                          size_t size) {
    *tensor = value->name;
    if (!node->fused_from || node->n_fused_from <= 0) {
        snprintf(nodes, size, "%s", node->name);
        return;
    }
    size_t off = 0;
    nodes[0] = 0;
    for (int k = 0; k < node->n_fused_from && off < size; k++)
        off += (size_t)snprintf(nodes + off, size - off, "%s%s", k ? "+" : "", node->fused_from[k]);
}

/* ------------------------------------------------------------------ metrics */

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f)
        bits = sign | 0x7f800000u | (man << 13);
    else if (exp)
        bits = sign | ((exp + 112) << 23) | (man << 13);
    else if (!man)
        bits = sign;
    else {
        float f = ldexpf((float)man, -24);
        return sign ? -f : f;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Element i as a double; false for a dtype this command cannot read. */
static bool elem(const void *data, nnf_dtype t, size_t i, double *out) {
    switch (t) {
    case NNF_DTYPE_FLOAT32: *out = ((const float *)data)[i]; return true;
    case NNF_DTYPE_FLOAT64: *out = ((const double *)data)[i]; return true;
    case NNF_DTYPE_FLOAT16: *out = half_to_float(((const uint16_t *)data)[i]); return true;
    case NNF_DTYPE_BFLOAT16: {
        uint32_t bits = (uint32_t)((const uint16_t *)data)[i] << 16;
        float f;
        memcpy(&f, &bits, sizeof f);
        *out = f;
        return true;
    }
    case NNF_DTYPE_INT8: *out = ((const int8_t *)data)[i]; return true;
    case NNF_DTYPE_UINT8: *out = ((const uint8_t *)data)[i]; return true;
    case NNF_DTYPE_BOOL: *out = ((const uint8_t *)data)[i] != 0; return true;
    case NNF_DTYPE_INT16: *out = ((const int16_t *)data)[i]; return true;
    case NNF_DTYPE_UINT16: *out = ((const uint16_t *)data)[i]; return true;
    case NNF_DTYPE_INT32: *out = ((const int32_t *)data)[i]; return true;
    case NNF_DTYPE_UINT32: *out = ((const uint32_t *)data)[i]; return true;
    case NNF_DTYPE_INT64: *out = (double)((const int64_t *)data)[i]; return true;
    case NNF_DTYPE_UINT64: *out = (double)((const uint64_t *)data)[i]; return true;
    default: return false;
    }
}

static bool readable(nnf_dtype t) {
    double v;
    static const uint64_t zero = 0;
    return elem(&zero, t, 0, &v);
}

static bool is_float(nnf_dtype t) {
    return t == NNF_DTYPE_FLOAT32 || t == NNF_DTYPE_FLOAT64 || t == NNF_DTYPE_FLOAT16 || t == NNF_DTYPE_BFLOAT16;
}

/* T for a dtype: the user's (or the f32 default) for f32/f64; half types
 * carry fewer mantissa bits, so their T is never tighter than their epsilon
 * scaled like f32's (2^-13 ≈ 2^10 ulp of f32); integers must match. */
static double dtype_tolerance(nnf_dtype t, double tol) {
    if (t == NNF_DTYPE_FLOAT16)
        return fmax(tol, 0x1p-10);
    if (t == NNF_DTYPE_BFLOAT16)
        return fmax(tol, 0x1p-7);
    return is_float(t) ? tol : 0;
}

/* Fills the row's metrics and status from the tensor and its reference. */
static void measure(cmp_row *row, const nnf_buf *x, nnf_dtype rdt, int rrank, const int64_t *rdims, size_t rnumel,
                    const void *rdata, double tol) {
    row->tol = dtype_tolerance(x->dtype, tol);
    bool same_shape = rrank == x->rank && rnumel == x->numel;
    for (int d = 0; same_shape && d < x->rank; d++)
        same_shape = rdims[d] == x->dims[d];
    if (!same_shape || !readable(x->dtype) || !readable(rdt) || is_float(x->dtype) != is_float(rdt)) {
        row->status = CMP_MISMATCH;
        row->max_abs = row->mere = row->max_re = INFINITY;
        row->cosine = 0;
        return;
    }
    size_t n = x->numel;
    double ref_sum = 0;
    size_t finite = 0;
    for (size_t i = 0; i < n; i++) {
        double r;
        elem(rdata, rdt, i, &r);
        if (isfinite(r)) {
            ref_sum += fabs(r);
            finite++;
        }
    }
    double floor_ = fmax(finite ? ref_sum / (double)finite : 0, 1e-30);
    double max_abs = 0, sum_re = 0, max_re = 0, dot = 0, nx = 0, nr = 0;
    for (size_t i = 0; i < n; i++) {
        double a, r;
        elem(x->data, x->dtype, i, &a);
        elem(rdata, rdt, i, &r);
        double diff, re;
        if (isnan(a) || isnan(r) || isinf(a) || isinf(r)) {
            /* the same non-finite value in both is agreement, anything else is not */
            bool same = (isnan(a) && isnan(r)) || a == r;
            diff = re = same ? 0 : INFINITY;
        } else {
            diff = fabs(a - r);
            re = diff / fmax(fabs(r), floor_);
            dot += a * r;
            nx += a * a;
            nr += r * r;
        }
        max_abs = fmax(max_abs, diff);
        max_re = fmax(max_re, re);
        sum_re += re;
    }
    row->max_abs = max_abs;
    row->mere = n ? sum_re / (double)n : 0;
    row->max_re = max_re;
    row->cosine = nx == 0 && nr == 0 ? 1.0 : (nx == 0 || nr == 0) ? 0.0 : dot / (sqrt(nx) * sqrt(nr));
    bool pass = row->tol > 0 ? row->mere < row->tol && row->max_re < 10 * row->tol : max_abs == 0;
    row->status = pass ? CMP_OK : CMP_FAIL;
}

/* ------------------------------------------------------------------ hooks */

static void capture_hook(void *user, const nnf_node *node, int output_index, const nnf_value *value,
                         const nnf_buf *buf) {
    cmp_ctx *ctx = user;
    (void)output_index;
    if (ctx->err != NNF_OK)
        return;
    size_t es = nnf_dtype_size(buf->dtype), bytes;
    if (!es || !nnf_mul_size(buf->numel, es, &bytes))
        return; /* strings and the like: nothing comparable */
    if (!grow((void **)&ctx->refs, &ctx->cap_refs, ctx->n_refs + 1, sizeof *ctx->refs)) {
        ctx->err = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory capturing the reference");
        return;
    }
    ref_tensor *r = &ctx->refs[ctx->n_refs];
    r->name = dup_str(value->name);
    r->data = malloc(bytes ? bytes : 1);
    if (!r->name || !r->data) {
        free(r->name);
        free(r->data);
        memset(r, 0, sizeof *r);
        ctx->err = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory capturing tensor '%s' of node '%s' (%s)",
                             value->name, node->name, node->op_type);
        return;
    }
    memcpy(r->data, buf->data, bytes);
    r->dtype = buf->dtype;
    r->rank = buf->rank;
    memcpy(r->dims, buf->dims, sizeof r->dims);
    r->numel = buf->numel;
    ctx->n_refs++;
}

static const ref_tensor *find_ref(const cmp_ctx *ctx, const char *name) {
    /* backwards: a value written twice (loop bodies) compares with its last write */
    for (size_t i = ctx->n_refs; i-- > 0;)
        if (!strcmp(ctx->refs[i].name, name))
            return &ctx->refs[i];
    return NULL;
}

static void compare_hook(void *user, const nnf_node *node, int output_index, const nnf_value *value,
                         const nnf_buf *buf) {
    cmp_ctx *ctx = user;
    (void)output_index;
    if (ctx->err != NNF_OK || !nnf_dtype_size(buf->dtype))
        return;
    if (!grow((void **)&ctx->rows, &ctx->cap_rows, ctx->n_rows + 1, sizeof *ctx->rows)) {
        ctx->err = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory recording the comparison");
        return;
    }
    const char *tensor;
    char nodes[1024];
    tensor_origin(node, value, &tensor, nodes, sizeof nodes);
    cmp_row *row = &ctx->rows[ctx->n_rows];
    memset(row, 0, sizeof *row);
    row->tensor = dup_str(tensor);
    row->node = dup_str(nodes);
    row->op = dup_str(node->op_type);
    if (!row->tensor || !row->node || !row->op) {
        free(row->tensor);
        free(row->node);
        free(row->op);
        ctx->err = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory recording the comparison");
        return;
    }
    ctx->n_rows++;
    row->dtype = buf->dtype;
    row->rank = buf->rank;
    memcpy(row->dims, buf->dims, sizeof row->dims);
    if (!ctx->dir) {
        const ref_tensor *r = find_ref(ctx, tensor);
        if (!r)
            row->status = CMP_MISSING;
        else
            measure(row, buf, r->dtype, r->rank, r->dims, r->numel, r->data, ctx->tol);
        return;
    }
    char safe[256], path[PATH_MAX];
    nnf_npy_safe_name(tensor, safe, sizeof safe);
    snprintf(path, sizeof path, "%s/%s.npy", ctx->dir, safe);
    if (access(path, F_OK) != 0) {
        row->status = CMP_MISSING;
        return;
    }
    nnf_npy npy;
    nnf_status st = nnf_npy_read(path, &npy);
    if (st != NNF_OK) {
        ctx->err = nnf_error_prefix(st, "reading the reference of tensor '%s'", tensor);
        return;
    }
    size_t es = nnf_dtype_size(npy.dtype), numel = es ? npy.nbytes / es : 0;
    measure(row, buf, npy.dtype, npy.rank, npy.shape, numel, npy.data, ctx->tol);
    nnf_npy_free(&npy);
}

/* ------------------------------------------------------------------ onnxruntime */

/* The repository the `nnfuse` binary was built in: the binary sits in a
 * build folder at the root. */
static void repo_root(char *out, size_t size) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(out, size, ".");
        return;
    }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    snprintf(out, size, "%s/..", exe);
}

static void remove_tree(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            struct stat sb;
            if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
                remove_tree(p);
            else
                unlink(p);
        }
        closedir(d);
    }
    rmdir(path);
}

/* The ONNX file ONNX Runtime reads for `model` (loaded from path): path
 * itself, or for a compiled .nnf the ONNX model inside it, written to
 * tmp/model.onnx (ONNX Runtime does not read .nnf files). */
static nnf_status onnx_of(const nnf_model *model, const char *path, const char *tmp, char *out,
                          size_t cap) {
    if (!model->compiled) {
        snprintf(out, cap, "%s", path);
        return NNF_OK;
    }
    snprintf(out, cap, "%s/model.onnx", tmp);
    FILE *f = fopen(out, "wb");
    bool ok = f && fwrite(model->bytes, 1, model->size, f) == model->size;
    if (f && fclose(f) != 0)
        ok = false;
    return ok ? NNF_OK : nnf_error(NNF_ERR_IO, "cannot write %s: %s", out, strerror(errno));
}

/* Writes the inputs to tmp/inputs, runs ort_run.py dump, which fills tmp/ref. */
static nnf_status run_onnxruntime(const char *model, const cli_inputs *in, const char *tmp, char *ref_dir,
                                  size_t ref_size) {
    char in_dir[PATH_MAX], root[PATH_MAX], script[PATH_MAX], python[PATH_MAX];
    snprintf(in_dir, sizeof in_dir, "%s/inputs", tmp);
    snprintf(ref_dir, ref_size, "%s/ref", tmp);
    if (mkdir(in_dir, 0700) != 0 || mkdir(ref_dir, 0700) != 0)
        return nnf_error(NNF_ERR_IO, "cannot create %s: %s", in_dir, strerror(errno));
    for (size_t i = 0; i < in->n; i++) {
        char safe[256], path[PATH_MAX];
        const nnf_tensor *t = &in->tensors[i];
        nnf_npy_safe_name(t->name, safe, sizeof safe);
        snprintf(path, sizeof path, "%s/%s.npy", in_dir, safe);
        NNF_CHECK(nnf_npy_write(path, t->dtype, t->rank, t->shape, t->data));
    }
    repo_root(root, sizeof root);
    const char *env_script = getenv("NNF_ORT_SCRIPT"), *env_python = getenv("NNF_PYTHON");
    snprintf(script, sizeof script, "%s", env_script ? env_script : "");
    if (!env_script)
        snprintf(script, sizeof script, "%s/bench/ort_run.py", root);
    if (env_python)
        snprintf(python, sizeof python, "%s", env_python);
    else {
        snprintf(python, sizeof python, "%s/.venv/bin/python", root);
        if (access(python, X_OK) != 0)
            snprintf(python, sizeof python, "python3");
    }
    char *const argv[] = {python, script, "dump", (char *)model, "--inputs", in_dir, "--out", ref_dir, NULL};
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return nnf_error(NNF_ERR_INTERNAL, "cannot start %s: %s", python, strerror(errno));
    if (pid == 0) {
        /* the report owns stdout; the script's chatter goes to stderr */
        dup2(2, 1);
        execvp(python, argv);
        fprintf(stderr, "nnfuse compare: cannot run %s: %s\n", python, strerror(errno));
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return nnf_error(NNF_ERR_INTERNAL, "waiting for %s: %s", script, strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return nnf_error(NNF_ERR_INTERNAL,
                         "%s %s failed (exit %d); set NNF_PYTHON to a Python with onnx and onnxruntime", python,
                         script, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return NNF_OK;
}

/* ------------------------------------------------------------------ report */

static const char *status_word(cmp_status s) {
    switch (s) {
    case CMP_OK: return "ok";
    case CMP_FAIL: return "FAIL";
    case CMP_MISSING: return "no-ref";
    case CMP_MISMATCH: return "SHAPE";
    }
    return "?";
}

static void shape_text(const cmp_row *r, char *buf, size_t size) {
    size_t off = 0;
    buf[0] = 0;
    for (int d = 0; d < r->rank && off < size; d++)
        off += (size_t)snprintf(buf + off, size - off, "%s%lld", d ? "x" : "", (long long)r->dims[d]);
    if (r->rank == 0)
        snprintf(buf, size, "scalar");
}

/* Prints the table (all rows, or only up to a bit past the first failure
 * unless all) and returns the index of the first failing row or -1. */
static long report(const cmp_ctx *ctx, const char *ref_name, int all) {
    long first_bad = -1;
    size_t compared = 0, missing = 0, failed = 0;
    for (size_t i = 0; i < ctx->n_rows; i++) {
        cmp_status s = ctx->rows[i].status;
        compared += s != CMP_MISSING;
        missing += s == CMP_MISSING;
        if (s == CMP_FAIL || s == CMP_MISMATCH) {
            failed++;
            if (first_bad < 0)
                first_bad = (long)i;
        }
    }
    printf("Reference: %s. Rule: MERE < T and MAX-RE < 10*T (T = %g for float32), "
           "relative error = |x-ref| / max(|ref|, mean|ref|)\n\n",
           ref_name, ctx->tol);
    printf("%4s  %-32s %-24s %-18s %-16s %11s %11s %11s %10s  %s\n", "#", "tensor", "node", "op", "shape", "max abs",
           "mean rel", "max rel", "cosine", "status");
    size_t shown_after_fail = 0;
    for (size_t i = 0; i < ctx->n_rows; i++) {
        const cmp_row *r = &ctx->rows[i];
        /* after the first failure everything downstream differs too; a few rows
         * show how it spreads, --all shows the rest */
        if (!all && first_bad >= 0 && (long)i > first_bad && ++shown_after_fail > 5) {
            printf("  ... %zu more rows (--all shows every tensor)\n", ctx->n_rows - i);
            break;
        }
        char shape[96];
        shape_text(r, shape, sizeof shape);
        if (r->status == CMP_MISSING)
            printf("%4zu  %-32.32s %-24.24s %-18.18s %-16.16s %11s %11s %11s %10s  %s\n", i, r->tensor, r->node, r->op,
                   shape, "-", "-", "-", "-", status_word(r->status));
        else
            printf("%4zu  %-32.32s %-24.24s %-18.18s %-16.16s %11.3e %11.3e %11.3e %10.6f  %s\n", i, r->tensor, r->node,
                   r->op, shape, r->max_abs, r->mere, r->max_re, r->cosine, status_word(r->status));
    }
    printf("\n%zu tensors compared, %zu beyond tolerance, %zu without a reference\n", compared, failed, missing);
    return first_bad;
}

/* -i NAME=DIR/<safe NAME>.npy for inputs the user did not give, when the
 * reference folder holds them: a folder dumped elsewhere then reproduces its
 * run without retyping every input. */
static void inputs_from_dir(cli_common *c, const nnf_model *model, const char *dir, char (*store)[PATH_MAX + 256]) {
    size_t n = nnf_model_input_count(model);
    for (size_t i = 0; i < n && i < 64 && c->n_input_files < 64; i++) {
        nnf_value_info info;
        if (nnf_model_input_info(model, i, &info) != NNF_OK)
            continue;
        size_t ln = strlen(info.name);
        bool given = false;
        for (int k = 0; k < c->n_input_files; k++)
            given |= !strncmp(c->input_files[k], info.name, ln) && c->input_files[k][ln] == '=';
        char safe[256];
        nnf_npy_safe_name(info.name, safe, sizeof safe);
        snprintf(store[i], sizeof store[i], "%s=%s/%s.npy", info.name, dir, safe);
        if (!given && access(strchr(store[i], '=') + 1, R_OK) == 0)
            c->input_files[c->n_input_files++] = store[i];
    }
}

int cmd_compare(int argc, char **argv) {
    cli_common c;
    cli_common_init(&c);
    const char *reference = "unfused";
    double tol = F32_TOLERANCE;
    int all = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i);
        if (r > 0)
            continue;
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (r == 0 && !strcmp(argv[i], "--reference") && val)
            reference = argv[++i];
        else if (r == 0 && !strcmp(argv[i], "--tolerance") && val) {
            char *end;
            tol = strtod(argv[++i], &end);
            if (*end || end == val || !(tol > 0) || !isfinite(tol))
                return cli_usage("compare", usage);
        } else if (r == 0 && !strcmp(argv[i], "--all"))
            all = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: nnfuse compare %s\n"
                   "Exit 0 when every tensor is within tolerance, 4 when one is not.\n",
                   usage);
            return EXIT_OK;
        } else
            return cli_usage("compare", usage);
    }
    if (!c.model)
        return cli_usage("compare", usage);
    bool unfused = !strcmp(reference, "unfused"), ort = !strcmp(reference, "onnxruntime");
    struct stat sb;
    if (!unfused && !ort && (stat(reference, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
        fprintf(stderr, "nnfuse compare: --reference %s is neither unfused, onnxruntime nor a folder\n", reference);
        return EXIT_USAGE;
    }

    int rc = EXIT_OK;
    nnf_model *model = NULL, *ref_model = NULL;
    nnf_session *sess = NULL, *ref_sess = NULL;
    cli_inputs in = {0};
    cmp_ctx ctx = {.tol = tol};
    char tmp[] = "/tmp/nnfuse-compare-XXXXXX", ref_dir[PATH_MAX];
    bool have_tmp = false;
    static char dir_inputs[64][PATH_MAX + 256];
    const nnf_tensor *outs = NULL;
    size_t n_outs = 0;
    nnf_status st = cli_open(&c, &model, &sess, NULL);
    if (st != NNF_OK)
        return cli_fail("compare", st, nnf_last_error());
    if (!unfused && !ort)
        inputs_from_dir(&c, model, reference, dir_inputs);
    st = cli_inputs_make(model, &c, &in);
    if (st != NNF_OK)
        goto fail;

    const char *inject = getenv("NNF_TEST_INJECT");
    if (inject && inject[0]) {
        const char *colon = strrchr(inject, ':');
        int node =
            colon ? nnf_graph_find_node(nnf_model_graph(model), inject, (size_t)(colon - inject))
                  : -1;
        if (node < 0) {
            fprintf(stderr, "nnfuse compare: NNF_TEST_INJECT=%s names no node of %s (want NODE:DELTA)\n", inject,
                    c.model);
            rc = EXIT_USAGE;
            goto done;
        }
        nnf_session_inject_error(sess, node, strtof(colon + 1, NULL));
    }

    const char *ref_name = reference;
    if (unfused) {
        nnf_model_options mo = nnf_model_options_default();
        mo.opt_level = 0;
        if ((st = cli_load(&c, mo, true, &ref_model)) != NNF_OK)
            goto fail;
        nnf_session_options so = nnf_session_options_default();
        so.threads = c.threads;
        so.reference_kernels = 1;
        if ((st = nnf_session_create(ref_model, &so, &ref_sess)) != NNF_OK)
            goto fail;
        nnf_session_set_hook(ref_sess, capture_hook, &ctx, true);
        if ((st = nnf_session_run(ref_sess, in.tensors, in.n, &outs, &n_outs)) != NNF_OK) {
            rc = cli_fail("compare", st, nnf_session_last_error(ref_sess));
            goto done;
        }
        if (ctx.err != NNF_OK) {
            st = ctx.err;
            goto fail;
        }
        ref_name = "unfused (-O0, reference kernels)";
    } else if (ort) {
        if (!mkdtemp(tmp)) {
            st = nnf_error(NNF_ERR_IO, "cannot create a temporary folder: %s", strerror(errno));
            goto fail;
        }
        have_tmp = true;
        char onnx_path[PATH_MAX + 32];
        if ((st = onnx_of(model, c.model, tmp, onnx_path, sizeof onnx_path)) != NNF_OK ||
            (st = run_onnxruntime(onnx_path, &in, tmp, ref_dir, sizeof ref_dir)) != NNF_OK)
            goto fail;
        ctx.dir = ref_dir;
        ref_name = "ONNX Runtime (bench/ort_run.py, every value exposed)";
    } else
        ctx.dir = reference;

    nnf_session_set_hook(sess, compare_hook, &ctx, true);
    if ((st = nnf_session_run(sess, in.tensors, in.n, &outs, &n_outs)) != NNF_OK) {
        rc = cli_fail("compare", st, nnf_session_last_error(sess));
        goto done;
    }
    if (ctx.err != NNF_OK) {
        st = ctx.err;
        goto fail;
    }
    long bad = report(&ctx, ref_name, all);
    size_t compared = 0;
    for (size_t i = 0; i < ctx.n_rows; i++)
        compared += ctx.rows[i].status != CMP_MISSING;
    if (bad >= 0) {
        const cmp_row *r = &ctx.rows[bad];
        fprintf(stderr,
                "nnfuse compare: accuracy check failed: first tensor beyond tolerance is '%s' from node '%s' (%s): "
                "%sMERE %.3e MAX-RE %.3e (T = %g), max abs %.3e, cosine %.6f\n",
                r->tensor, r->node, r->op, r->status == CMP_MISMATCH ? "shape or dtype differs from the reference; " : "",
                r->mere, r->max_re, r->tol, r->max_abs, r->cosine);
        rc = EXIT_ACCURACY;
    } else if (compared == 0) {
        fprintf(stderr, "nnfuse compare: no tensor of %s has a reference in %s: nothing was checked\n", c.model,
                reference);
        rc = EXIT_ACCURACY;
    } else
        printf("All compared tensors are within tolerance.\n");
    goto done;
fail:
    rc = cli_fail("compare", st, nnf_last_error());
done:
    if (have_tmp)
        remove_tree(tmp);
    for (size_t i = 0; i < ctx.n_refs; i++) {
        free(ctx.refs[i].name);
        free(ctx.refs[i].data);
    }
    free(ctx.refs);
    for (size_t i = 0; i < ctx.n_rows; i++) {
        free(ctx.rows[i].tensor);
        free(ctx.rows[i].node);
        free(ctx.rows[i].op);
    }
    free(ctx.rows);
    cli_inputs_free(&in);
    nnf_session_destroy(ref_sess);
    nnf_model_destroy(ref_model);
    nnf_session_destroy(sess);
    nnf_model_destroy(model);
    return rc;
}

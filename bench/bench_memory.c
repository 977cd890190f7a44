/* bench_memory: GB/s of the memory-bound kernels (element-wise, softmax,
 * layer/batch norm, per-channel ops, pools, transpose, concat) on suite
 * shapes, through the same op-table plans the runtime uses, beside the
 * reference kernel and as a percentage of the stream bandwidth that
 * bench/peak.c measures (`peak --json`, run from this program's directory;
 * --bw GBS overrides it, --no-peak skips it).
 *
 * Bytes counted: every input read once plus every output written once (the
 * minimum traffic). Tensors larger than the caches report DRAM bandwidth;
 * the softmax and layernorm shapes fit in L2/L3 and can exceed the stream
 * figure. Each case is warmed up, then timed for at least 10 runs and 0.3 s;
 * the median is reported.
 * Usage: bench_memory [--threads N] [--filter SUBSTR] [--bw GBS] [--no-peak] [--json] */
#include "base/cpu.h"
#include "base/threadpool.h"
#include "kernels/eltwise_fast.h"
#include "ops/op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the case table below leaves trailing fields to their zero defaults */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef struct bin {
    int rank;
    int64_t dims[4];
    int constant;
    nnf_dtype dtype; /* 0 = float32 */
} bin;

typedef struct bcase {
    const char *name, *op;
    int opset;
    nnf_plan_fn plan; /* NULL: the op table's */
    int n_in;
    bin in[5];
    nnf_attr attrs[4];
    int n_attrs;
} bcase;

static const int64_t k3[2] = {3, 3}, s2[2] = {2, 2}, p1[4] = {1, 1, 1, 1};
static const int64_t nhwc[4] = {0, 2, 3, 1}, heads[4] = {0, 2, 1, 3}, last[1] = {-1};

static const bcase cases[] = {
    {"add_same_4M", "Add", 14, NULL, 2, {{1, {4194304}}, {1, {4194304}}}},
    {"relu_4M", "Relu", 14, NULL, 1, {{1, {4194304}}}},
    {"sigmoid_4M", "Sigmoid", 13, NULL, 1, {{1, {4194304}}}},
    {"gelu_4M", "Gelu", 20, NULL, 1, {{1, {4194304}}}},
    {"mul_channel_1x96x112x112", "Mul", 14, NULL, 2, {{4, {1, 96, 112, 112}}, {3, {96, 1, 1}, 1}}},
    {"add_channel_1x32x112x112", "Add", 14, NULL, 2, {{4, {1, 32, 112, 112}}, {3, {32, 1, 1}, 1}}},
    {"add_row_128x3072", "Add", 14, NULL, 2, {{2, {128, 3072}}, {1, {3072}, 1}}},
    {"softmax_1x12x128x128", "Softmax", 13, NULL, 1, {{4, {1, 12, 128, 128}}}},
    {"layernorm_128x768",
     "LayerNormalization",
     17,
     nnf_plan_layernorm,
     3,
     {{2, {128, 768}}, {1, {768}, 1}, {1, {768}, 1}}},
    {"batchnorm_1x64x112x112",
     "BatchNormalization",
     15,
     nnf_plan_batchnorm,
     5,
     {{4, {1, 64, 112, 112}}, {1, {64}, 1}, {1, {64}, 1}, {1, {64}, 1}, {1, {64}, 1}}},
    {"maxpool3x3s2_1x64x112x112",
     "MaxPool",
     12,
     nnf_plan_maxpool,
     1,
     {{4, {1, 64, 112, 112}}},
     {{.name = "kernel_shape", .type = NNF_ATTR_INTS, .ints = k3, .count = 2},
      {.name = "strides", .type = NNF_ATTR_INTS, .ints = s2, .count = 2},
      {.name = "pads", .type = NNF_ATTR_INTS, .ints = p1, .count = 4}},
     3},
    {"global_avgpool_1x2048x7x7",
     "GlobalAveragePool",
     1,
     nnf_plan_global_pool,
     1,
     {{4, {1, 2048, 7, 7}}}},
    {"reduce_mean_128x768",
     "ReduceMean",
     13,
     NULL,
     1,
     {{2, {128, 768}}},
     {{.name = "axes", .type = NNF_ATTR_INTS, .ints = last, .count = 1}},
     1},
    {"transpose_nhwc_1x64x112x112",
     "Transpose",
     13,
     nnf_plan_transpose,
     1,
     {{4, {1, 64, 112, 112}}},
     {{.name = "perm", .type = NNF_ATTR_INTS, .ints = nhwc, .count = 4}},
     1},
    /* YOLOv5s's detect head, [1, 3, 85, 40, 40] -> [1, 3, 40, 40, 85] */
    {"transpose_yolo_head_3x85x40x40",
     "Transpose",
     13,
     nnf_plan_transpose,
     1,
     {{4, {3, 85, 40, 40}}},
     {{.name = "perm", .type = NNF_ATTR_INTS, .ints = nhwc, .count = 4}},
     1},
    {"transpose_heads_1x128x12x64",
     "Transpose",
     13,
     nnf_plan_transpose,
     1,
     {{4, {1, 128, 12, 64}}},
     {{.name = "perm", .type = NNF_ATTR_INTS, .ints = heads, .count = 4}},
     1},
    {"concat_c_2x(1x128x80x80)",
     "Concat",
     13,
     nnf_plan_concat,
     2,
     {{4, {1, 128, 80, 80}}, {4, {1, 128, 80, 80}}},
     {{.name = "axis", .type = NNF_ATTR_INT, .i = 1}},
     1},
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median seconds of fn over >= 10 runs and >= 0.3 s, after 2 warm-ups. */
static double time_kernel(nnf_kernel_fn fn, const nnf_node *node, nnf_buf **in, nnf_buf **out,
                          nnf_kctx *ctx) {
    double times[1000];
    int n = 0;
    double start = now();
    for (int rep = -2; n < 1000 && (n < 10 || now() - start < 0.3); rep++) {
        double t0 = now();
        if (fn(node, in, out, ctx) != NNF_OK)
            return -1;
        if (rep >= 0)
            times[n++] = now() - t0;
    }
    qsort(times, (size_t)n, sizeof times[0], cmp_d);
    return times[n / 2];
}

/* copy_gbs_1 / copy_gbs_n from `peak --json` beside argv[0]; 0 if unavailable. */
static void read_peak(const char *argv0, int threads, double *bw1, double *bwn) {
    char cmd[4200], dir[4096];
    snprintf(dir, sizeof dir, "%s", argv0);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    snprintf(cmd, sizeof cmd, "'%s/peak' --json --threads %d 2>/dev/null", dir, threads);
    FILE *p = popen(cmd, "r");
    char line[2048] = {0};
    if (!p)
        return;
    if (!fgets(line, sizeof line, p))
        line[0] = 0;
    pclose(p);
    const char *a = strstr(line, "\"copy_gbs_1\":"), *b = strstr(line, "\"copy_gbs_n\":");
    if (a)
        *bw1 = atof(a + 13);
    if (b)
        *bwn = atof(b + 13);
}

static void fill(nnf_buf *b, unsigned seed) {
    size_t es = nnf_dtype_size(b->dtype);
    if (b->dtype == NNF_DTYPE_FLOAT32) {
        float *p = b->data;
        for (size_t i = 0; i < b->numel; i++)
            p[i] = (float)((i * 2654435761u + seed) % 2000u) * 0.001f - 0.5f + (seed & 1);
    } else {
        memset(b->data, (int)seed, b->numel * es);
    }
}

int main(int argc, char **argv) {
    int threads = 0, json = 0, no_peak = 0;
    const char *filter = NULL;
    double bw_override = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
            filter = argv[++i];
        else if (!strcmp(argv[i], "--bw") && i + 1 < argc)
            bw_override = atof(argv[++i]);
        else if (!strcmp(argv[i], "--no-peak"))
            no_peak = 1;
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else {
            fprintf(stderr, "usage: bench_memory [--threads N] [--filter SUBSTR] [--bw GBS] "
                            "[--no-peak] [--json]\n");
            return 2;
        }
    }
    nnf_threadpool *pool = NULL;
    if (nnf_threadpool_create(threads, &pool) != NNF_OK)
        return 1;
    int nt = nnf_threadpool_size(pool);
    double bw1 = 0, bwn = 0;
    if (bw_override > 0)
        bw1 = bwn = bw_override;
    else if (!no_peak)
        read_peak(argv[0], nt, &bw1, &bwn);
    if (!json) {
        printf("cpu %s, tier %s, %d thread(s); stream copy %.1f GB/s (1 thread), %.1f GB/s (%d)\n",
               nnf_cpu_get()->brand, nnf_isa_name(nnf_cpu_isa()), nt, bw1, bwn, nt);
        printf("%-30s %-28s %9s %9s %7s %9s %7s\n", "case", "kernel", "ref GB/s", "GB/s 1t", "% bw",
               "GB/s nt", "% bw");
    }
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const bcase *c = &cases[ci];
        if (filter && !strstr(c->name, filter))
            continue;
        nnf_graph *g = NULL;
        if (nnf_graph_create(&g) != NNF_OK)
            return 1;
        int vin[5], vout[1];
        for (int i = 0; i < c->n_in; i++) {
            char nm[8];
            snprintf(nm, sizeof nm, "i%d", i);
            vin[i] = nnf_graph_value(g, nm);
        }
        vout[0] = nnf_graph_value(g, "y");
        int id = nnf_graph_add_node(g, c->name, c->op, "", vin, c->n_in, vout, 1);
        if (id < 0)
            return 1;
        nnf_node *node = &g->nodes[id]; /* after the call: it may move g->nodes */
        node->opset = c->opset;
        node->attrs = (nnf_attr *)c->attrs;
        node->n_attrs = c->n_attrs;
        node->op = nnf_op_find("", c->op, c->opset, NULL);
        nnf_tinfo tin[5] = {{0}}, tout[1] = {{.present = true, .shape = {.rank = -1}}};
        nnf_buf bufs[5], ybuf, yref, *pin[5], *pout[1] = {&ybuf}, *pref[1] = {&yref};
        double bytes = 0;
        for (int i = 0; i < c->n_in; i++) {
            nnf_buf *b = &bufs[i];
            b->dtype = c->in[i].dtype ? c->in[i].dtype : NNF_DTYPE_FLOAT32;
            b->rank = c->in[i].rank;
            b->numel = 1;
            for (int d = 0; d < b->rank; d++) {
                b->dims[d] = c->in[i].dims[d];
                b->numel *= (size_t)b->dims[d];
            }
            b->data = nnf_malloc_aligned(b->numel * nnf_dtype_size(b->dtype));
            fill(b, (unsigned)i + 1);
            /* BatchNormalization's variance must be positive */
            if (!strcmp(c->op, "BatchNormalization") && i == 4)
                for (size_t k = 0; k < b->numel; k++)
                    ((float *)b->data)[k] = 1.0f + (float)k * 0.01f;
            pin[i] = b;
            tin[i] = (nnf_tinfo){.present = true,
                                 .dtype = b->dtype,
                                 .shape = {.rank = b->rank},
                                 .data = c->in[i].constant ? b->data : NULL};
            memcpy(tin[i].shape.dims, b->dims, sizeof b->dims);
            bytes += (double)(b->numel * nnf_dtype_size(b->dtype));
        }
        nnf_kernel_plan plan = {0};
        if (!node->op || node->op->init(node, &g->arena) != NNF_OK ||
            node->op->infer(node, tin, tout) != NNF_OK ||
            (c->plan ? c->plan : node->op->plan)(node, tin, tout, &plan) != NNF_OK) {
            fprintf(stderr, "%s: %s\n", c->name, nnf_last_error());
            return 1;
        }
        ybuf.dtype = yref.dtype = tout[0].dtype;
        ybuf.rank = yref.rank = tout[0].shape.rank;
        memcpy(ybuf.dims, tout[0].shape.dims, sizeof ybuf.dims);
        memcpy(yref.dims, tout[0].shape.dims, sizeof yref.dims);
        ybuf.numel = (size_t)nnf_shape_numel(&tout[0].shape);
        yref.numel = ybuf.numel;
        ybuf.data = nnf_malloc_aligned(ybuf.numel * nnf_dtype_size(ybuf.dtype));
        yref.data = nnf_malloc_aligned(yref.numel * nnf_dtype_size(yref.dtype));
        bytes += (double)(ybuf.numel * nnf_dtype_size(ybuf.dtype));
        nnf_kctx rctx = {.pool = NULL}, f1 = {.pool = NULL, .state = plan.state},
                 fn = {.pool = pool, .state = plan.state};
        double tr = time_kernel(node->op->ref, node, pin, pref, &rctx);
        double t1 = plan.run ? time_kernel(plan.run, node, pin, pout, &f1) : -1;
        double tn = plan.run ? time_kernel(plan.run, node, pin, pout, &fn) : -1;
        double gr = tr > 0 ? bytes / tr * 1e-9 : 0, g1 = t1 > 0 ? bytes / t1 * 1e-9 : 0,
               gn = tn > 0 ? bytes / tn * 1e-9 : 0;
        if (json)
            printf("{\"case\": \"%s\", \"kernel\": \"%s\", \"bytes\": %.0f, \"ref_gbs\": %.2f, "
                   "\"gbs_1\": %.2f, \"gbs_n\": %.2f, \"threads\": %d, \"stream_gbs_1\": %.2f, "
                   "\"stream_gbs_n\": %.2f}\n",
                   c->name, plan.run ? plan.name : "ref", bytes, gr, g1, gn, nt, bw1, bwn);
        else
            printf("%-30s %-28s %9.2f %9.2f %6.0f%% %9.2f %6.0f%%\n", c->name,
                   plan.run ? plan.name : "(reference)", gr, g1, bw1 > 0 ? 100 * g1 / bw1 : 0, gn,
                   bwn > 0 ? 100 * gn / bwn : 0);
        if (plan.free_state)
            plan.free_state(plan.state);
        for (int i = 0; i < c->n_in; i++)
            nnf_free_aligned(bufs[i].data);
        nnf_free_aligned(ybuf.data);
        nnf_free_aligned(yref.data);
        nnf_graph_destroy(g);
    }
    nnf_threadpool_destroy(pool);
    return 0;
}

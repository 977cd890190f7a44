/* bench_kernels: GFLOP/s of the optimised GEMM and conv kernels on shapes of
 * the model suite (square GEMMs, BERT-base projections, ResNet-50,
 * MobileNetV2 and YOLOv5s conv layers). Weights are prepacked as a plan
 * would; each case is warmed up, then timed until it has run at least 10
 * times and 0.3 s; median and best are reported. bench/kernels.py runs this
 * beside ONNX Runtime and the measured peak.
 * Timing: thread CPU time with 1 thread, wall time with more.
 * Usage: bench_kernels [--threads N] [--json] [--cold] [--nchwc] [--list] [--filter SUBSTR | --filter =NAME]
 *                      | [--model FILE]
 * --list prints the cases (shapes, FLOPs, bytes, kernel) without timing them.
 * ("=NAME" selects exactly one case: bench/kernels.py alternates cases one by
 * one with ONNX Runtime). --nchwc runs the conv cases on the NCHWc8 blocked
 * kernels (kernels/nchwc.h) as the layout pass would pick them, input and
 * output already blocked: inside a model the reorders happen at the edges
 * of blocked regions only, so they are not timed here. --cold evicts the
 * caches before each timed run (64 MB written, untimed): inside a model the
 * weights come from memory and the input from L3 or the other core.
 * --model FILE times a whole model through the public API instead, as a user
 * runs it (import, passes, the layout pass's reorders at its edges, plans):
 * bench/kernels.py hands it the single-op model it gives ONNX Runtime, so the
 * two engines run the same file. One JSON row (or line), named after FILE,
 * "kernel" listing the kernels the plan ran. */
#include "nnfuse.h"
#include "base/cpu.h"
#include "base/threadpool.h"
#include "kernels/conv_fast.h"
#include "kernels/conv_transpose.h"
#include "kernels/gemm.h"
#include "kernels/nchwc.h"
#include "runtime/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct bcase {
    const char *name;
    char kind; /* 'g' gemm, 'c' conv, 't' conv transpose */
    size_t m, n, k;                  /* gemm */
    size_t c, h, w, oc, g, kh, s, p; /* conv (square kernel, stride, pad; 't': pad cropped) */
    nnf_act_kind act;
    int res; /* conv: fused residual (same shape as the output) before act */
} bcase;

static const bcase cases[] = {
    {"gemm_256", 'g', .m = 256, .n = 256, .k = 256},
    {"gemm_512", 'g', .m = 512, .n = 512, .k = 512},
    {"gemm_1024", 'g', .m = 1024, .n = 1024, .k = 1024},
    {"gemm_2048", 'g', .m = 2048, .n = 2048, .k = 2048},
    {"bert_qkv_128x768x768", 'g', .m = 128, .n = 768, .k = 768},
    {"bert_ffn1_128x768x3072", 'g', .m = 128, .n = 3072, .k = 768, .act = NNF_ACT_GELU_ERF},
    {"bert_ffn2_128x3072x768", 'g', .m = 128, .n = 768, .k = 3072},
    {"r50_fc_1x2048x1000", 'g', .m = 1, .n = 1000, .k = 2048},
    /* short sequences: a few A panels against weights that stream */
    {"bert_ffn1_8x768x3072", 'g', .m = 8, .n = 3072, .k = 768},
    {"bert_ffn1_16x768x3072", 'g', .m = 16, .n = 3072, .k = 768},
    {"mbv2_fc_1x1280x1000", 'g', .m = 1, .n = 1000, .k = 1280},
    {"r50_conv1_7x7s2", 'c', .c = 3, .h = 224, .w = 224, .oc = 64, .g = 1, .kh = 7, .s = 2, .p = 3,
     .act = NNF_ACT_RELU},
    {"r50_l1_1x1_64_64", 'c', .c = 64, .h = 56, .w = 56, .oc = 64, .g = 1, .kh = 1, .s = 1,
     .act = NNF_ACT_RELU},
    {"r50_l1_3x3_64_64", 'c', .c = 64, .h = 56, .w = 56, .oc = 64, .g = 1, .kh = 3, .s = 1, .p = 1,
     .act = NNF_ACT_RELU},
    {"r50_l1_1x1_64_256", 'c', .c = 64, .h = 56, .w = 56, .oc = 256, .g = 1, .kh = 1, .s = 1},
    {"r50_l1_1x1_64_256_res", 'c', .c = 64, .h = 56, .w = 56, .oc = 256, .g = 1, .kh = 1, .s = 1,
     .act = NNF_ACT_RELU, .res = 1},
    {"r50_l1_1x1_256_64", 'c', .c = 256, .h = 56, .w = 56, .oc = 64, .g = 1, .kh = 1, .s = 1,
     .act = NNF_ACT_RELU},
    {"r50_l2_3x3s2_128", 'c', .c = 128, .h = 56, .w = 56, .oc = 128, .g = 1, .kh = 3, .s = 2,
     .p = 1, .act = NNF_ACT_RELU},
    {"r50_l2_ds_1x1s2_256_512", 'c', .c = 256, .h = 56, .w = 56, .oc = 512, .g = 1, .kh = 1,
     .s = 2},
    {"r50_l4_ds_1x1s2_1024_2048", 'c', .c = 1024, .h = 14, .w = 14, .oc = 2048, .g = 1, .kh = 1,
     .s = 2},
    {"r50_l2_3x3_128", 'c', .c = 128, .h = 28, .w = 28, .oc = 128, .g = 1, .kh = 3, .s = 1, .p = 1,
     .act = NNF_ACT_RELU},
    {"r50_l2_1x1_128_512", 'c', .c = 128, .h = 28, .w = 28, .oc = 512, .g = 1, .kh = 1, .s = 1},
    {"r50_l3_3x3s2_256", 'c', .c = 256, .h = 28, .w = 28, .oc = 256, .g = 1, .kh = 3, .s = 2,
     .p = 1, .act = NNF_ACT_RELU},
    {"r50_l4_3x3s2_512", 'c', .c = 512, .h = 14, .w = 14, .oc = 512, .g = 1, .kh = 3, .s = 2,
     .p = 1, .act = NNF_ACT_RELU},
    {"r50_l3_3x3_256", 'c', .c = 256, .h = 14, .w = 14, .oc = 256, .g = 1, .kh = 3, .s = 1, .p = 1,
     .act = NNF_ACT_RELU},
    {"r50_l3_1x1_256_1024", 'c', .c = 256, .h = 14, .w = 14, .oc = 1024, .g = 1, .kh = 1, .s = 1},
    {"r50_l3_1x1_1024_256", 'c', .c = 1024, .h = 14, .w = 14, .oc = 256, .g = 1, .kh = 1, .s = 1,
     .act = NNF_ACT_RELU},
    {"r50_l4_3x3_512", 'c', .c = 512, .h = 7, .w = 7, .oc = 512, .g = 1, .kh = 3, .s = 1, .p = 1,
     .act = NNF_ACT_RELU},
    {"r50_l4_1x1_512_2048", 'c', .c = 512, .h = 7, .w = 7, .oc = 2048, .g = 1, .kh = 1, .s = 1},
    {"mbv2_dw3x3_32_112", 'c', .c = 32, .h = 112, .w = 112, .oc = 32, .g = 32, .kh = 3, .s = 1,
     .p = 1, .act = NNF_ACT_CLIP},
    {"mbv2_pw_32_16_112", 'c', .c = 32, .h = 112, .w = 112, .oc = 16, .g = 1, .kh = 1, .s = 1},
    {"mbv2_dw3x3s2_96_112", 'c', .c = 96, .h = 112, .w = 112, .oc = 96, .g = 96, .kh = 3, .s = 2,
     .p = 1, .act = NNF_ACT_CLIP},
    {"mbv2_dw3x3_144_56", 'c', .c = 144, .h = 56, .w = 56, .oc = 144, .g = 144, .kh = 3, .s = 1,
     .p = 1, .act = NNF_ACT_CLIP},
    {"mbv2_pw_144_24_56", 'c', .c = 144, .h = 56, .w = 56, .oc = 24, .g = 1, .kh = 1, .s = 1},
    {"mbv2_pw_960_160_7", 'c', .c = 960, .h = 7, .w = 7, .oc = 160, .g = 1, .kh = 1, .s = 1},
    {"mbv2_stem_3x3s2_3_32", 'c', .c = 3, .h = 224, .w = 224, .oc = 32, .g = 1, .kh = 3, .s = 2,
     .p = 1, .act = NNF_ACT_CLIP},
    {"mbv2_pw_16_96_112", 'c', .c = 16, .h = 112, .w = 112, .oc = 96, .g = 1, .kh = 1, .s = 1,
     .act = NNF_ACT_CLIP},
    {"mbv2_pw_96_24_56", 'c', .c = 96, .h = 56, .w = 56, .oc = 24, .g = 1, .kh = 1, .s = 1},
    {"mbv2_pw_24_144_56", 'c', .c = 24, .h = 56, .w = 56, .oc = 144, .g = 1, .kh = 1, .s = 1,
     .act = NNF_ACT_CLIP},
    {"mbv2_dw3x3s2_144_56", 'c', .c = 144, .h = 56, .w = 56, .oc = 144, .g = 144, .kh = 3, .s = 2,
     .p = 1, .act = NNF_ACT_CLIP},
    {"mbv2_dw3x3_192_28", 'c', .c = 192, .h = 28, .w = 28, .oc = 192, .g = 192, .kh = 3, .s = 1,
     .p = 1, .act = NNF_ACT_CLIP},
    {"mbv2_dw3x3s2_192_28", 'c', .c = 192, .h = 28, .w = 28, .oc = 192, .g = 192, .kh = 3, .s = 2,
     .p = 1, .act = NNF_ACT_CLIP},
    {"mbv2_dw3x3_384_14", 'c', .c = 384, .h = 14, .w = 14, .oc = 384, .g = 384, .kh = 3, .s = 1,
     .p = 1, .act = NNF_ACT_CLIP},
    {"mbv2_dw3x3_576_14", 'c', .c = 576, .h = 14, .w = 14, .oc = 576, .g = 576, .kh = 3, .s = 1,
     .p = 1, .act = NNF_ACT_CLIP},
    {"mbv2_dw3x3s2_576_14", 'c', .c = 576, .h = 14, .w = 14, .oc = 576, .g = 576, .kh = 3, .s = 2,
     .p = 1, .act = NNF_ACT_CLIP},
    {"mbv2_dw3x3_960_7", 'c', .c = 960, .h = 7, .w = 7, .oc = 960, .g = 960, .kh = 3, .s = 1,
     .p = 1, .act = NNF_ACT_CLIP},
    /* ConvNeXt-T's 7x7 depthwise convs (a bias, no activation) */
    {"convnext_dw7x7_96_56", 'c', .c = 96, .h = 56, .w = 56, .oc = 96, .g = 96, .kh = 7, .s = 1,
     .p = 3},
    {"convnext_dw7x7_192_28", 'c', .c = 192, .h = 28, .w = 28, .oc = 192, .g = 192, .kh = 7, .s = 1,
     .p = 3},
    {"convnext_dw7x7_384_14", 'c', .c = 384, .h = 14, .w = 14, .oc = 384, .g = 384, .kh = 7, .s = 1,
     .p = 3},
    {"convnext_dw7x7_768_7", 'c', .c = 768, .h = 7, .w = 7, .oc = 768, .g = 768, .kh = 7, .s = 1,
     .p = 3},
    /* ResNeXt-50 32x4d's grouped 3x3s: 4 channels a group (nchwc_gconv.c), then whole blocks */
    {"resnext_g32_128_56", 'c', .c = 128, .h = 56, .w = 56, .oc = 128, .g = 32, .kh = 3, .s = 1,
     .p = 1, .act = NNF_ACT_RELU},
    {"resnext_g32_256_28", 'c', .c = 256, .h = 28, .w = 28, .oc = 256, .g = 32, .kh = 3, .s = 1,
     .p = 1, .act = NNF_ACT_RELU},
    {"resnext_g32_512_14", 'c', .c = 512, .h = 14, .w = 14, .oc = 512, .g = 32, .kh = 3, .s = 1,
     .p = 1, .act = NNF_ACT_RELU},
    /* patchify stems: a conv of stride = kernel on the image (ViT-B/16's 16x16 to 768, ConvNeXt's
     * and Swin's 4x4 to 96 and 128) */
    {"vit_patch16_3_768_224", 'c', .c = 3, .h = 224, .w = 224, .oc = 768, .g = 1, .kh = 16,
     .s = 16},
    {"convnext_stem4_3_96_224", 'c', .c = 3, .h = 224, .w = 224, .oc = 96, .g = 1, .kh = 4, .s = 4},
    {"swin_stem4_3_128_224", 'c', .c = 3, .h = 224, .w = 224, .oc = 128, .g = 1, .kh = 4, .s = 4},
    {"mbv2_pw_960_320_7", 'c', .c = 960, .h = 7, .w = 7, .oc = 320, .g = 1, .kh = 1, .s = 1},
    {"mbv2_pw_320_1280_7", 'c', .c = 320, .h = 7, .w = 7, .oc = 1280, .g = 1, .kh = 1, .s = 1,
     .act = NNF_ACT_CLIP},
    {"yolo_stem_6x6s2", 'c', .c = 3, .h = 640, .w = 640, .oc = 32, .g = 1, .kh = 6, .s = 2, .p = 2,
     .act = NNF_ACT_SILU},
    {"yolo_3x3s2_32_64", 'c', .c = 32, .h = 320, .w = 320, .oc = 64, .g = 1, .kh = 3, .s = 2,
     .p = 1, .act = NNF_ACT_SILU},
    {"yolo_1x1_64_32", 'c', .c = 64, .h = 160, .w = 160, .oc = 32, .g = 1, .kh = 1, .s = 1,
     .act = NNF_ACT_SILU},
    {"yolo_3x3_32_32", 'c', .c = 32, .h = 160, .w = 160, .oc = 32, .g = 1, .kh = 3, .s = 1, .p = 1,
     .act = NNF_ACT_SILU},
    {"yolo_3x3_64_64_80", 'c', .c = 64, .h = 80, .w = 80, .oc = 64, .g = 1, .kh = 3, .s = 1, .p = 1,
     .act = NNF_ACT_SILU},
    {"yolo_3x3_128_128_40", 'c', .c = 128, .h = 40, .w = 40, .oc = 128, .g = 1, .kh = 3, .s = 1,
     .p = 1, .act = NNF_ACT_SILU},
    {"yolo_3x3_256_256_20", 'c', .c = 256, .h = 20, .w = 20, .oc = 256, .g = 1, .kh = 3, .s = 1,
     .p = 1, .act = NNF_ACT_SILU},
    {"r50_l3_3x3_256_res", 'c', .c = 256, .h = 14, .w = 14, .oc = 256, .g = 1, .kh = 3, .s = 1,
     .p = 1, .act = NNF_ACT_RELU, .res = 1},
    {"yolo_3x3s2_256_512", 'c', .c = 256, .h = 40, .w = 40, .oc = 512, .g = 1, .kh = 3, .s = 2,
     .p = 1, .act = NNF_ACT_SILU},
    /* ConvTranspose: the U-Net's first and last up-sampling, a GAN generator's 4x4 s2 */
    {"unet_up1_2x2s2_512_256_16", 't', .c = 512, .h = 16, .w = 16, .oc = 256, .g = 1, .kh = 2,
     .s = 2},
    {"unet_up4_2x2s2_64_32_128", 't', .c = 64, .h = 128, .w = 128, .oc = 32, .g = 1, .kh = 2,
     .s = 2},
    {"dcgan_4x4s2_256_128_16", 't', .c = 256, .h = 16, .w = 16, .oc = 128, .g = 1, .kh = 4, .s = 2,
     .p = 1, .act = NNF_ACT_RELU},
};

/* With one thread all work runs on the caller, and its CPU time leaves out
 * the time other processes held the core (shared machines); with a pool,
 * wall time. */
static clockid_t g_clock = CLOCK_MONOTONIC;
static double now(void) {
    struct timespec ts;
    clock_gettime(g_clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static float *rnd(size_t n) {
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n && p; i++)
        p[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return p;
}

static void evict_caches(void) {
    static volatile char *junk;
    const size_t size = (size_t)64 << 20;
    if (!junk)
        junk = malloc(size);
    for (size_t i = 0; junk && i < size; i += 64)
        junk[i] = (char)i;
}

/* Runs fn(ctx) warmed up, then until it has run at least 10 times and 0.3 s;
 * sorts the times (s) into t[0..*n). */
static nnf_status time_runs(nnf_status (*fn)(void *), void *ctx, int cold, double *t, int *n) {
    *n = 0;
    double start = now();
    for (int rep = -2; *n < 1000 && (*n < 10 || now() - start < 0.3); rep++) {
        if (cold)
            evict_caches();
        double t0 = now();
        nnf_status st = fn(ctx);
        if (st != NNF_OK)
            return st;
        if (rep >= 0)
            t[(*n)++] = now() - t0;
    }
    qsort(t, (size_t)*n, sizeof t[0], cmp_d);
    return NNF_OK;
}

typedef struct case_run {
    const bcase *b;
    const nnf_gemm_cfg *cfg;
    const float *x;
    float *y;
    const nnf_gemm_packed *pb;
    const nnf_conv_kernel *ck;
    const nnf_nchwc_conv *nk;
    const nnf_nchwc_wino *wk;
    const nnf_nchwc_dw *dk;
    const nnf_nchwc_gconv *gk;
    const nnf_convt_kernel *tk;
    const nnf_epilogue *ep;
    nnf_threadpool *pool;
} case_run;

static nnf_status run_case(void *ctx) {
    const case_run *c = ctx;
    if (c->b->kind == 'g') {
        nnf_gemm_src sa = nnf_gemm_src_matrix(c->x, c->b->k, 0), sb = nnf_gemm_src_packed(c->pb);
        return nnf_gemm_run(c->cfg, c->b->m, c->b->n, c->b->k, &sa, &sb, c->y, c->b->n, c->ep, c->pool);
    }
    if (c->tk)
        return nnf_convt_kernel_run(c->tk, c->x, c->y, c->ep, c->pool);
    return c->ck   ? nnf_conv_kernel_run(c->ck, c->x, c->y, c->ep, c->pool)
           : c->nk ? nnf_nchwc_conv_run(c->nk, c->x, c->y, c->ep, c->pool)
           : c->wk ? nnf_nchwc_wino_run(c->wk, c->x, c->y, c->ep, c->pool)
           : c->gk ? nnf_nchwc_gconv_run(c->gk, c->x, c->y, c->ep, c->pool)
                   : nnf_nchwc_dw_run(c->dk, c->x, c->y, c->ep, c->pool);
}

typedef struct model_run {
    nnf_session *s;
    nnf_tensor in[16];
    size_t nin;
} model_run;

static nnf_status run_model(void *ctx) {
    model_run *r = ctx;
    const nnf_tensor *out;
    size_t nout;
    return nnf_session_run(r->s, r->in, r->nin, &out, &nout);
}

/* --model: every input float32 with fixed dims (the single-op models of
 * bench/kernels.py), filled by rnd(). */
static int bench_model(const char *path, int threads, int json, int cold) {
    nnf_model_options mo = nnf_model_options_default();
    mo.threads = threads;
    nnf_model *m = NULL;
    nnf_session *s = NULL;
    model_run r = {0};
    int rc = 1;
    char kernels[512] = "";
    if (nnf_model_load(path, &mo, &m) != NNF_OK)
        goto fail;
    nnf_session_options so = nnf_session_options_default();
    so.threads = threads;
    so.profile = 1; /* the kernel names, from one profiled run; timed runs without */
    if (nnf_session_create(m, &so, &s) != NNF_OK)
        goto fail;
    r.s = s;
    r.nin = nnf_model_input_count(m);
    for (size_t i = 0; i < r.nin; i++) {
        nnf_value_info vi;
        size_t numel = 1;
        if (i >= 16 || nnf_model_input_info(m, i, &vi) != NNF_OK || vi.dtype != NNF_DTYPE_FLOAT32 || vi.rank < 0) {
            fprintf(stderr, "%s: input %zu is not a float32 tensor of known rank\n", path, i);
            goto out;
        }
        for (int d = 0; d < vi.rank; d++)
            numel *= vi.dims[d] > 0 ? (size_t)vi.dims[d] : 1;
        r.in[i] = (nnf_tensor){.name = vi.name, .dtype = vi.dtype, .rank = vi.rank, .shape = vi.dims,
                               .data = rnd(numel)};
        if (!r.in[i].data)
            goto out;
    }
    if (run_model(&r) != NNF_OK)
        goto fail;
    const nnf_profile_event *ev;
    size_t nev;
    nnf_session_profile(s, &ev, &nev);
    for (size_t e = 0; e < nev; e++) {
        size_t len = strlen(kernels);
        snprintf(kernels + len, sizeof kernels - len, "%s%s", len ? "+" : "", ev[e].kernel);
    }
    nnf_session_destroy(s);
    so.profile = 0;
    if (nnf_session_create(m, &so, &s) != NNF_OK)
        goto fail;
    r.s = s;
    double times[1000];
    int n;
    if (time_runs(run_model, &r, cold, times, &n) != NNF_OK)
        goto fail;
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (json)
        printf("[\n  {\"name\": \"%.*s\", \"kernel\": \"%s\", \"threads\": %d, \"median_ms\": %.4f, "
               "\"best_ms\": %.4f, \"p90_ms\": %.4f, \"runs\": %d}\n]\n",
               (int)(strcspn(name, ".")), name, kernels, threads, times[n / 2] * 1e3, times[0] * 1e3,
               times[(n * 9) / 10] * 1e3, n);
    else
        printf("%-26s %-34s %10.3f %10.3f\n", name, kernels, times[n / 2] * 1e3, times[0] * 1e3);
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "%s: %s\n", path, s ? nnf_session_last_error(s) : nnf_last_error());
out:
    for (size_t i = 0; i < r.nin && i < 16; i++)
        free(r.in[i].data);
    nnf_session_destroy(s);
    nnf_model_destroy(m);
    return rc;
}

int main(int argc, char **argv) {
    int threads = 1, json = 0, nchwc = 0, cold = 0, list = 0;
    const char *filter = NULL, *model = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--nchwc"))
            nchwc = 1;
        else if (!strcmp(argv[i], "--cold"))
            cold = 1;
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
            filter = argv[++i];
        else if (!strcmp(argv[i], "--list"))
            list = 1;
        else if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else {
            fprintf(stderr, "usage: bench_kernels [--threads N] [--json] [--cold] "
                            "[--nchwc] [--list] [--filter SUBSTR|=NAME] | [--model FILE]\n");
            return 2;
        }
    }
    if (threads == 1)
        g_clock = CLOCK_THREAD_CPUTIME_ID;
    if (model)
        return bench_model(model, threads, json, cold);
    nnf_threadpool *pool = NULL;
    if (nnf_threadpool_create(threads, &pool) != NNF_OK) {
        fprintf(stderr, "%s\n", nnf_error_message());
        return 1;
    }
    nnf_isa isa = nnf_cpu_isa();
    /* a MatMul's configuration: products handed whole (AMX where the CPU has it) */
    const nnf_gemm_cfg *cfg = nnf_gemm_cfg_whole(isa);
    if (json)
        printf("[\n");
    else
        printf("%-26s %-34s %10s %10s %9s\n", "case", "kernel", "median ms", "best ms", "GFLOP/s");
    int first = 1;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const bcase *b = &cases[ci];
        if ((filter && (filter[0] == '=' ? strcmp(b->name, filter + 1) != 0 : !strstr(b->name, filter))) ||
            (nchwc && b->kind != 'c'))
            continue;
        double flops, bytes;
        float *x = NULL, *w = NULL, *bias = NULL, *y = NULL, *res = NULL;
        nnf_gemm_packed *pb = NULL;
        nnf_conv_kernel *ck = NULL;
        nnf_nchwc_conv *nk = NULL;
        nnf_nchwc_dw *dk = NULL;
        nnf_nchwc_gconv *gk = NULL;
        nnf_nchwc_wino *wk = NULL;
        nnf_convt_kernel *tk = NULL;
        nnf_conv2d_shape s = {0};
        nnf_epilogue ep = nnf_epilogue_default();
        ep.act.kind = b->act;
        ep.act.beta = 6.0f; /* Clip = ReLU6 */
        const char *kname;
        if (b->kind == 'g') {
            x = rnd(b->m * b->k);
            w = rnd(b->k * b->n);
            y = malloc(b->m * b->n * sizeof(float));
            if (nnf_gemm_pack_b(cfg, b->k, b->n, w, b->n, 0, &pb) != NNF_OK)
                return 1;
            flops = 2.0 * (double)b->m * (double)b->n * (double)b->k;
            bytes = 4.0 * ((double)b->m * (double)b->k + (double)b->k * (double)b->n + (double)b->m * (double)b->n);
            kname = cfg->name;
        } else {
            s = (nnf_conv2d_shape){.n = 1, .c = b->c, .h = b->h, .w = b->w, .oc = b->oc, .group = b->g,
                                   .kh = b->kh, .kw = b->kh, .sh = b->s, .sw = b->s, .dh = 1, .dw = 1,
                                   .pt = b->p, .pl = b->p};
            s.oh = b->kind == 't' ? (b->h - 1) * b->s + b->kh - 2 * b->p : (b->h + 2 * b->p - b->kh) / b->s + 1;
            s.ow = b->kind == 't' ? (b->w - 1) * b->s + b->kh - 2 * b->p : (b->w + 2 * b->p - b->kh) / b->s + 1;
            /* blocked tensors hold the channels rounded up to the block */
            size_t cx = nchwc && (b->g > 1 || b->c > 4) ? nnf_nchwc_blocks(s.c) * NNF_NCHWC_B : s.c;
            size_t cy = nchwc ? nnf_nchwc_blocks(s.oc) * NNF_NCHWC_B : s.oc;
            x = rnd(cx * s.h * s.w);
            w = rnd(s.oc * (s.c / s.group) * s.kh * s.kw);
            bias = rnd(s.oc);
            y = malloc(cy * s.oh * s.ow * sizeof(float));
            /* blocked: the kernel the blocked conv plan picks (plan_nchwc.c) */
            nnf_status cs =
                b->kind == 't' ? nnf_convt_kernel_create(&s, isa, w, &tk)
                : !nchwc       ? nnf_conv_kernel_create(&s, nnf_conv_select(&s, isa), isa, w, &ck)
                : nnf_nchwc_dw_supported(&s)    ? nnf_nchwc_dw_create(&s, isa, w, &dk)
                : nnf_nchwc_gconv_supported(&s) ? nnf_nchwc_gconv_create(&s, isa, w, &gk)
                : nnf_nchwc_wino_wins(&s, isa)
                    ? nnf_nchwc_wino_create(&s, isa, w, &wk)
                    : nnf_nchwc_conv_create(
                          &s, cx != s.c || s.c > 4,
                          nnf_nchwc_conv_tier(&s, NNF_ACT_NONE, isa, nnf_cpu_get()), w, &nk);
            if (cs != NNF_OK) {
                fprintf(stderr, "%s: %s\n", b->name, nnf_error_message());
                return 1;
            }
            ep.bias_kind = NNF_BIAS_PER_ROW;
            ep.bias = bias;
            if (b->res) {
                res = rnd(cy * s.oh * s.ow);
                ep.residual = res;
            }
            /* a ConvTranspose multiplies every input pixel by every tap of its W row */
            flops = b->kind == 't' ? 2.0 * (double)(s.c * s.h * s.w) * (double)(s.oc / s.group * s.kh * s.kw)
                                   : 2.0 * (double)(s.oc * s.oh * s.ow) * (double)(s.c / s.group * s.kh * s.kw);
            bytes = 4.0 * (double)(s.c * s.h * s.w + (b->res ? 2 : 1) * s.oc * s.oh * s.ow +
                                   s.oc * (s.c / s.group) * s.kh * s.kw);
            kname = tk   ? tk->name
                    : ck ? ck->name
                    : nk ? nk->name
                    : wk ? wk->name
                    : gk ? gk->name
                         : dk->name;
        }
        case_run cr = {b, cfg, x, y, pb, ck, nk, wk, dk, gk, tk, &ep, pool};
        double times[1000] = {0};
        int n = 0;
        if (!list && time_runs(run_case, &cr, cold, times, &n) != NNF_OK) {
            fprintf(stderr, "%s: %s\n", b->name, nnf_error_message());
            return 1;
        }
        double med = times[n / 2], best = times[0], p90 = times[(n * 9) / 10];
        if (json) {
            printf("%s  {\"name\": \"%s\", \"kind\": \"%s\", \"kernel\": \"%s\", \"threads\": %d, "
                   "\"flops\": %.0f, \"bytes\": %.0f, \"median_ms\": %.4f, \"best_ms\": %.4f, "
                   "\"p90_ms\": %.4f, \"runs\": %d",
                   first ? "" : ",\n", b->name, b->kind == 'g' ? "gemm" : b->kind == 't' ? "convtranspose" : "conv", kname, threads,
                   flops, bytes, med * 1e3, best * 1e3, p90 * 1e3, n);
            if (b->kind == 'g')
                printf(", \"m\": %zu, \"n\": %zu, \"k\": %zu, \"act\": %d}", b->m, b->n, b->k, (int)b->act);
            else
                printf(", \"c\": %zu, \"h\": %zu, \"w\": %zu, \"oc\": %zu, \"group\": %zu, \"kernel_size\": %zu, "
                       "\"stride\": %zu, \"pad\": %zu, \"act\": %d, \"res\": %d}",
                       b->c, b->h, b->w, b->oc, b->g, b->kh, b->s, b->p, (int)b->act, b->res);
            first = 0;
        } else {
            printf("%-26s %-34s %10.3f %10.3f %9.1f\n", b->name, kname, med * 1e3, best * 1e3,
                   flops / med * 1e-9);
        }
        fflush(stdout);
        nnf_gemm_packed_destroy(pb);
        nnf_conv_kernel_destroy(ck);
        nnf_nchwc_conv_destroy(nk);
        nnf_nchwc_dw_destroy(dk);
        nnf_nchwc_gconv_destroy(gk);
        nnf_nchwc_wino_destroy(wk);
        nnf_convt_kernel_destroy(tk);
        free(x);
        free(w);
        free(bias);
        free(res);
        free(y);
    }
    if (json)
        printf("\n]\n");
    nnf_threadpool_destroy(pool);
    return 0;
}

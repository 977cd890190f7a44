/* The optimised LayerNormalization, BatchNormalization, 2-D Max/AveragePool
 * and global pool kernels against the reference kernels, through the op
 * table's init/infer and the plan functions, on every ISA tier present.
 *
 * Tolerances:
 *   BatchNormalization, MaxPool, AveragePool, GlobalMaxPool: exact (same
 *     IEEE operations in the same order as the reference; NaN/Inf included)
 *   GlobalAveragePool: rel 1e-6 (float blocks of 256 carried in double vs
 *     the reference's double sum)
 *   LayerNormalization: abs 2e-6 * (1 + |y|) on SIMD tiers (float statistics
 *     with the mean applied as a hi/lo pair), exact on the scalar tier;
 *     Mean output abs 1e-7 * max|x| (3e-7 here), InvStdDev rel 1e-6. */
#include "base/alloc.h"
#include "fast_op_harness.h"
#include "kernels/eltwise_fast.h"
#include "ops/conv.h"
#include "ops/norm.h"

#include "check.h"

static nnf_threadpool *g_pool;

/* ---- LayerNormalization ------------------------------------------------------------ */

static void test_layernorm(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    const size_t ns[] = {1, 2, 7, 8, 9, 13, 16, 17, 31, 61, 127, 255, 257, 768, 1000};
    double worst = 0;
    for (size_t si = 0; si < sizeof ns / sizeof ns[0]; si++) {
        size_t n = ns[si];
        for (int variant = 0; variant < 3; variant++) {
            /* 0: centred data, bias, all outputs; 1: no bias, a mean far from
             * zero; 2: rows of a constant (zero variance) */
            int64_t d[2] = {5, (int64_t)n}, dn[1] = {(int64_t)n};
            float *x = f_rand_buf(5 * n, -3, 3), *sc = f_rand_buf(n, 0.5f, 2),
                  *b = f_rand_buf(n, -1, 1);
            if (variant == 1)
                for (size_t i = 0; i < 5 * n; i++)
                    x[i] += 100.0f;
            if (variant == 2)
                for (size_t i = 0; i < 5 * n; i++)
                    x[i] = 0.25f;
            f_in in[3] = {f32_in(x, 2, d, 0), f32_in(sc, 1, dn, 1), f32_in(b, 1, dn, 1)};
            nnf_attr at[2] = {f_int("axis", -1), f_float("epsilon", 1e-5f)};
            int n_in = variant == 1 ? 2 : 3, n_out = variant == 0 ? 3 : 1;
            f_res r = f_run("LayerNormalization", 17, at, 2, in, n_in, n_out, nnf_plan_layernorm,
                            n > 500 ? g_pool : NULL);
            CHECK_MSG(r.planned && strstr(r.name, t), "%s layernorm n=%zu planned (%s)", t, n,
                      r.name);
            double e = isa == NNF_ISA_SCALAR ? (f_same_bytes(&r, 0) ? 0 : 2)
                                             : f_err(&r, 0, 2e-6, 2e-6, "layernorm");
            CHECK_MSG(e <= 1, "%s layernorm n=%zu variant %d: %.3g of tolerance", t, n, variant, e);
            worst = e > worst ? e : worst;
            if (n_out == 3) {
                CHECK_MSG(f_err(&r, 1, 3e-7, 1e-6, "mean") <= 1, "%s layernorm mean n=%zu", t, n);
                CHECK_MSG(f_err(&r, 2, 0, 1e-6, "inv_std") <= 1, "%s layernorm inv_std n=%zu", t,
                          n);
            }
            f_free(&r);
            free(x);
            free(sc);
            free(b);
        }
    }
    printf("  %-6s LayerNorm worst %.3f of tolerance\n", t, worst);
    /* BERT shape, threaded, same as inline; normalising the last two axes */
    int64_t d[3] = {1, 128, 768}, dn[1] = {768}, d2[2] = {128, 768};
    float *x = f_rand_buf(128 * 768, -2, 2), *sc = f_rand_buf(128 * 768, 0.5f, 1.5f),
          *b = f_rand_buf(128 * 768, -1, 1);
    f_in in[3] = {f32_in(x, 3, d, 0), f32_in(sc, 1, dn, 1), f32_in(b, 1, dn, 0)};
    nnf_attr at = f_int("axis", -1);
    f_res r = f_run("LayerNormalization", 17, &at, 1, in, 3, 1, nnf_plan_layernorm, g_pool);
    f_res r1 = f_run("LayerNormalization", 17, &at, 1, in, 3, 1, nnf_plan_layernorm, NULL);
    CHECK_MSG(f_err(&r, 0, 2e-6, 2e-6, "layernorm bert") <= 1, "%s layernorm 128x768", t);
    CHECK(r.planned && r1.planned && !memcmp(r.fast[0], r1.fast[0], 128 * 768 * sizeof(float)));
    f_free(&r);
    f_free(&r1);
    at = f_int("axis", 1);
    in[1] = f32_in(sc, 2, d2, 0);
    in[2] = f32_in(b, 2, d2, 0);
    r = f_run("LayerNormalization", 17, &at, 1, in, 3, 1, nnf_plan_layernorm, NULL);
    CHECK_MSG(f_err(&r, 0, 2e-6, 2e-6, "layernorm 2 axes") <= 1, "%s layernorm axis 1", t);
    f_free(&r);
    /* a scale that broadcasts keeps the reference */
    int64_t d1[2] = {1, 768};
    in[1] = f32_in(sc, 2, d1, 0);
    r = f_run("LayerNormalization", 17, &at, 1, in, 3, 1, nnf_plan_layernorm, NULL);
    CHECK(r.status == NNF_OK && !r.planned);
    f_free(&r);
    free(x);
    free(sc);
    free(b);
}

/* ---- BatchNormalization ------------------------------------------------------------- */

static void test_batchnorm(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    const int64_t shapes[][4] = {{1, 1, 1, 1},  {2, 3, 7, 7},    {1, 13, 1, 17},
                                 {2, 16, 5, 5}, {1, 32, 56, 56}, {3, 5, 2, 1}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int64_t *d = shapes[si];
        size_t n = numel_of(4, d), c = (size_t)d[1];
        int64_t dc[1] = {d[1]};
        float *x = f_rand_buf(n, -5, 5), *p[4];
        f_specials(x, n, 11, 0);
        for (int k = 0; k < 4; k++)
            p[k] = f_rand_buf(c, k == 3 ? 0.1f : -2, 2); /* variance > 0 */
        f_in in[5] = {f32_in(x, 4, d, 0), f32_in(p[0], 1, dc, 1), f32_in(p[1], 1, dc, 1),
                      f32_in(p[2], 1, dc, 1), f32_in(p[3], 1, dc, 1)};
        nnf_attr at = f_float("epsilon", 1e-3f);
        f_res r = f_run("BatchNormalization", 15, &at, 1, in, 5, 1, nnf_plan_batchnorm,
                        n > 50000 ? g_pool : NULL);
        CHECK_MSG(r.planned && strstr(r.name, t) && f_same_bytes(&r, 0),
                  "%s batchnorm shape %zu (%s)", t, si, r.name);
        f_free(&r);
        in[4].constant = 0; /* statistics known only at run time: reference */
        r = f_run("BatchNormalization", 15, &at, 1, in, 5, 1, nnf_plan_batchnorm, NULL);
        CHECK(r.status == NNF_OK && !r.planned);
        f_free(&r);
        free(x);
        for (int k = 0; k < 4; k++)
            free(p[k]);
    }
}

/* ---- 2-D pools ------------------------------------------------------------------------ */

typedef struct pool_case {
    int64_t n, c, h, w;
    int64_t k[2], s[2], d[2], pads[4];
    int ceil, include_pad;
    const char *auto_pad;
} pool_case;

static int run_pool(nnf_isa isa, const pool_case *pc, int is_max, float *worst_out) {
    int64_t dims[4] = {pc->n, pc->c, pc->h, pc->w};
    size_t n = numel_of(4, dims);
    float *x = f_rand_buf(n, -10, 10);
    f_specials(x, n, 17, 5);
    nnf_attr at[7];
    int na = 0;
    at[na++] = f_ints("kernel_shape", pc->k, 2);
    at[na++] = f_ints("strides", pc->s, 2);
    at[na++] = f_ints("pads", pc->pads, 4);
    at[na++] = f_int("ceil_mode", pc->ceil);
    if (pc->auto_pad)
        at[na++] = f_str("auto_pad", pc->auto_pad);
    if (is_max)
        at[na++] = f_ints("dilations", pc->d, 2);
    else
        at[na++] = f_int("count_include_pad", pc->include_pad);
    f_in in = f32_in(x, 4, dims, 0);
    f_res r = f_run(is_max ? "MaxPool" : "AveragePool", is_max ? 12 : 19, at, na, &in, 1, 1,
                    is_max ? nnf_plan_maxpool : nnf_plan_avgpool, n > 20000 ? g_pool : NULL);
    int ok = r.planned && strstr(r.name, isa == NNF_ISA_SCALAR ? "scalar" : "avx2") &&
             f_same_bytes(&r, 0);
    if (!ok && r.planned)
        f_err(&r, 0, 0, 0, is_max ? "maxpool" : "avgpool");
    (void)worst_out;
    f_free(&r);
    free(x);
    return ok;
}

static void test_pools(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    pool_case cases[] = {
        /* n, c, h, w, kernel, strides, dilations, pads (t, l, b, r), ceil, include_pad */
        {1, 1, 1, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0, NULL},
        {1, 2, 7, 7, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0, 0, NULL},
        {1, 2, 7, 7, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0, 1, NULL},
        {2, 3, 13, 13, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 0, NULL},
        {1, 3, 13, 31, {3, 3}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 1, 1, NULL},
        {1, 2, 31, 61, {5, 5}, {1, 1}, {2, 2}, {2, 2, 2, 2}, 0, 0, NULL},
        {1, 2, 17, 33, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 0, NULL},
        {1, 1, 9, 40, {2, 3}, {1, 1}, {2, 3}, {0, 1, 2, 0}, 0, 1, NULL},
        {1, 2, 16, 17, {3, 2}, {3, 3}, {1, 1}, {1, 0, 1, 1}, 1, 0, NULL},
        {1, 1, 2, 2, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0, 1, NULL},
        {1, 2, 20, 21, {3, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0, "SAME_UPPER"},
        {1, 4, 10, 11, {4, 4}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 1, "SAME_LOWER"},
        {1, 1, 5, 7, {7, 7}, {1, 1}, {1, 1}, {3, 3, 3, 3}, 0, 0, NULL},
        /* suite shapes: ResNet stem max pool, YOLOv5 SPPF 5x5, a 7x7 average */
        {1, 64, 112, 112, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 0, NULL},
        {1, 32, 20, 20, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}, 0, 0, NULL},
        {1, 64, 7, 7, {7, 7}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0, NULL},
        /* separable stride-1 MaxPool: widths around the 8-lane blocks, row
         * strides, strips of one output row (ow * kh near the buffer), a width
         * past the row buffer (the span kernel), asymmetric pads */
        {1, 3, 1, 1, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}, 0, 0, NULL},
        {1, 3, 2, 2, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}, 0, 0, NULL},
        {1, 3, 7, 7, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}, 0, 0, NULL},
        {1, 3, 13, 13, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}, 0, 0, NULL},
        {2, 3, 33, 33, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}, 0, 0, NULL},
        {1, 2, 33, 9, {3, 3}, {2, 1}, {1, 1}, {1, 1, 1, 1}, 0, 0, NULL},
        {1, 2, 13, 8, {2, 3}, {3, 1}, {1, 1}, {1, 2, 0, 1}, 1, 0, NULL},
        {1, 1, 9, 700, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}, 0, 0, NULL},
        {1, 64, 40, 40, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}, 0, 0, NULL}, /* threaded */
        {2, 5, 130, 130, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0, 0, NULL}, /* strips, threaded */
        {1, 1, 6, 1500, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0, 0, NULL},
        {1, 2, 16, 17, {1, 9}, {1, 1}, {1, 1}, {0, 4, 0, 4}, 0, 0, NULL},
        /* separable with W stride 2 */
        {1, 3, 1, 1, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 0, NULL},
        {1, 3, 2, 2, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, 0, NULL},
        {1, 3, 7, 7, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 0, NULL},
        {1, 3, 33, 33, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, 0, NULL},
        {1, 2, 9, 47, {5, 4}, {1, 2}, {1, 1}, {2, 3, 2, 0}, 0, 0, NULL},
        {1, 1, 5, 900, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 0, NULL},
        {1, 1, 5, 2100, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 0, NULL},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int is_max = 0; is_max < 2; is_max++) {
            if (!is_max && (cases[ci].d[0] != 1 || cases[ci].d[1] != 1))
                continue; /* AveragePool dilations are opset 19's; tested on MaxPool */
            CHECK_MSG(run_pool(isa, &cases[ci], is_max, NULL), "%s %s case %zu", t,
                      is_max ? "MaxPool" : "AveragePool", ci);
        }
    /* MaxPool with the Indices output keeps the reference */
    int64_t dims[4] = {1, 1, 4, 4}, k[2] = {2, 2};
    float x[18];
    for (int i = 0; i < 18; i++)
        x[i] = (float)i;
    nnf_attr at = f_ints("kernel_shape", k, 2);
    f_in in = f32_in(x, 4, dims, 0);
    f_res r = f_run("MaxPool", 12, &at, 1, &in, 1, 2, nnf_plan_maxpool, NULL);
    CHECK(r.status == NNF_OK && !r.planned);
    f_free(&r);
    /* 1-D and 3-D pools too */
    int64_t d3[3] = {1, 2, 9}, k1[1] = {3};
    at = f_ints("kernel_shape", k1, 1);
    in = f32_in(x, 3, d3, 0);
    r = f_run("MaxPool", 12, &at, 1, &in, 1, 1, nnf_plan_maxpool, NULL);
    CHECK(r.status == NNF_OK && !r.planned);
    f_free(&r);
}

static void test_global_pools(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    const size_t planes[] = {1, 2, 7, 13, 49, 127, 255, 257, 3136, 50000};
    for (size_t i = 0; i < sizeof planes / sizeof planes[0]; i++) {
        int64_t d[3] = {2, 3, (int64_t)planes[i]};
        size_t n = numel_of(3, d);
        float *x = f_rand_buf(n, -2, 2);
        for (int is_max = 0; is_max < 2; is_max++) {
            if (is_max)
                f_specials(x, n, 13, 1); /* GlobalMaxPool skips NaN like the reference */
            f_in in = f32_in(x, 3, d, 0);
            f_res r = f_run(is_max ? "GlobalMaxPool" : "GlobalAveragePool", 1, NULL, 0, &in, 1, 1,
                            nnf_plan_global_pool, n > 50000 ? g_pool : NULL);
            CHECK_MSG(r.planned && strstr(r.name, t) &&
                          (is_max ? f_same_bytes(&r, 0) : f_err(&r, 0, 1e-7, 1e-6, "gap") <= 1),
                      "%s %s plane %zu", t, is_max ? "GlobalMaxPool" : "GlobalAveragePool",
                      planes[i]);
            f_free(&r);
        }
        free(x);
    }
    int64_t d4[4] = {1, 2048, 7, 7};
    float *x = f_rand_buf(2048 * 49, 0, 4);
    f_in in = f32_in(x, 4, d4, 0);
    f_res r = f_run("GlobalAveragePool", 1, NULL, 0, &in, 1, 1, nnf_plan_global_pool, g_pool);
    CHECK_MSG(f_err(&r, 0, 1e-7, 1e-6, "gap resnet") <= 1, "%s GlobalAveragePool 1x2048x7x7", t);
    f_free(&r);
    r = f_run("GlobalLpPool", 2, NULL, 0, &in, 1, 1, nnf_plan_global_pool, NULL);
    CHECK(r.status == NNF_OK && !r.planned);
    f_free(&r);
    free(x);
}

/* Plans that run out of memory report it and leave no kernel (and no leak:
 * the ASan build checks). BatchNormalization allocates twice. */
static void test_plan_alloc_failures(void) {
    nnf_norm_params np = {.epsilon = 1e-5f};
    nnf_node node = {.name = "bn",
                     .op_type = "BatchNormalization",
                     .domain = "",
                     .n_inputs = 5,
                     .n_outputs = 1,
                     .params = &np};
    float c4[4] = {1, 2, 3, 4};
    nnf_tinfo in[5], out[1] = {{.present = true,
                                .dtype = NNF_DTYPE_FLOAT32,
                                .shape = {.rank = 4, .dims = {1, 4, 3, 3}}}};
    in[0] = out[0];
    for (int k = 1; k < 5; k++)
        in[k] = (nnf_tinfo){.present = true,
                            .dtype = NNF_DTYPE_FLOAT32,
                            .shape = {.rank = 1, .dims = {4}},
                            .data = c4};
    for (uint64_t fail = 1; fail <= 3; fail++) {
        nnf_kernel_plan plan = {0};
        nnf_alloc_fail_after(fail);
        nnf_status st = nnf_plan_batchnorm(&node, in, out, &plan);
        nnf_alloc_fail_after(0);
        if (fail <= 2)
            CHECK_MSG(st == NNF_ERR_OUT_OF_MEMORY && !plan.run,
                      "batchnorm plan, allocation %d fails", (int)fail);
        else
            CHECK(st == NNF_OK && plan.run);
        if (plan.free_state)
            plan.free_state(plan.state);
    }
    nnf_conv_params cp = {.spatial = 2, .kernel = {2, 2}, .strides = {1, 1}, .dilations = {1, 1}};
    nnf_node pn = {.name = "mp",
                   .op_type = "MaxPool",
                   .domain = "",
                   .n_inputs = 1,
                   .n_outputs = 1,
                   .params = &cp};
    nnf_tinfo po[1] = {
        {.present = true, .dtype = NNF_DTYPE_FLOAT32, .shape = {.rank = 4, .dims = {1, 4, 2, 2}}}};
    nnf_kernel_plan plan = {0};
    nnf_alloc_fail_after(1);
    nnf_status st = nnf_plan_maxpool(&pn, in, po, &plan);
    nnf_alloc_fail_after(0);
    CHECK(st == NNF_ERR_OUT_OF_MEMORY && !plan.run);
}

int main(void) {
    const nnf_cpu *cpu = nnf_cpu_get();
    if (nnf_threadpool_create(2, &g_pool) != NNF_OK)
        return 1;
    for (int t = NNF_ISA_SCALAR; t <= (int)cpu->max_isa; t++) {
        nnf_isa isa = nnf_cpu_force_isa((nnf_isa)t);
        printf("tier %s\n", nnf_isa_name(isa));
        test_layernorm(isa);
        test_batchnorm(isa);
        test_pools(isa);
        test_global_pools(isa);
    }
    test_plan_alloc_failures();
    if (cpu->max_isa < NNF_ISA_AVX512)
        printf("AVX-512 tier not available on this CPU: its kernels are compiled, not run\n");
    /* LayerNorm and BatchNorm also ran with the output over their input
     * (fast_op_harness.h) */
    printf("runs with the output over an input: %d\n", f_in_place_total);
    CHECK(f_in_place_total >= 20);
    nnf_threadpool_destroy(g_pool);
    TEST_MAIN_END();
}

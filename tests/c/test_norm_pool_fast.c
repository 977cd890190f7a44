/* The optimised LayerNormalization, BatchNormalization, LpNormalization, 2-D Max/AveragePool
 * and global pool kernels against the reference kernels, through the op
 * table's init/infer and the plan functions, on every ISA tier present.
 *
 * Tolerances:
 *   BatchNormalization, MaxPool, AveragePool, GlobalMaxPool: exact (same
 *     IEEE operations in the same order as the reference; NaN/Inf included;
 *     in the soak, a NaN may be any NaN and a maximum's zero either zero,
 *     where IEEE 754 leaves the choice: same_value())
 *   GlobalAveragePool: rel 1e-6 (float blocks of 256 carried in double vs
 *     the reference's double sum)
 *   LpNormalization: rel 1e-6 (test_lpnorm)
 *   LayerNormalization: abs 2e-6 * (1 + |y|) on SIMD tiers (float statistics
 *     with the mean applied as a hi/lo pair), exact on the scalar tier;
 *     Mean output abs 1e-7 * max|x| (3e-7 here), InvStdDev rel 1e-6.
 * NNF_TEST_SOAK=N adds N random cases of each family on 1, 2 and 3 threads,
 * with a guard past every output (soak() below). */
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

/* ---- InstanceNormalization / GroupNormalization --------------------------------------- */

/* Each group's channels normalised together: planes of 1, primes and vector
 * edges, a mean far from zero, constant groups; scale/bias per channel
 * (InstanceNormalization, GroupNormalization-21) and per group (-18).
 * Tolerance as LayerNormalization's (the same statistics); the scalar tier
 * is the reference's formulas, bit for bit. */
static void test_groupnorm(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    static const struct {
        int64_t d[4];
        int64_t groups; /* 0: InstanceNormalization */
        int opset;
        float offset;
    } cases[] = {
        {{1, 3, 1, 1}, 0, 6, 0},     {{2, 3, 7, 5}, 0, 6, 0},    {{1, 4, 13, 11}, 0, 6, 100},
        {{1, 2, 3, 3}, 0, 6, 0.25f}, {{1, 5, 31, 61}, 0, 6, 0},  {{2, 6, 4, 5}, 3, 21, 0},
        {{1, 12, 9, 7}, 4, 21, -50}, {{1, 8, 2, 8}, 8, 21, 0},   {{1, 6, 5, 5}, 1, 21, 0},
        {{2, 6, 4, 5}, 3, 18, 0},    {{1, 10, 1, 17}, 5, 18, 3}, {{1, 32, 16, 16}, 8, 21, 0},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int64_t *d = cases[ci].d;
        size_t n = numel_of(4, d),
               pairs = cases[ci].opset == 18 ? (size_t)cases[ci].groups : (size_t)d[1];
        int64_t dp[1] = {(int64_t)pairs};
        float *x = f_rand_buf(n, -3, 3), *sc = f_rand_buf(pairs, 0.5f, 2),
              *b = f_rand_buf(pairs, -1, 1);
        for (size_t i = 0; i < n; i++)
            x[i] = cases[ci].offset == 0.25f ? 0.25f : x[i] + cases[ci].offset; /* 0.25: constant */
        f_in in[3] = {f32_in(x, 4, d, 0), f32_in(sc, 1, dp, 1), f32_in(b, 1, dp, 1)};
        nnf_attr at[2] = {f_float("epsilon", 1e-5f), f_int("num_groups", cases[ci].groups)};
        f_res r = cases[ci].groups ? f_run("GroupNormalization", cases[ci].opset, at, 2, in, 3, 1,
                                           nnf_plan_groupnorm, ci % 2 ? g_pool : NULL)
                                   : f_run("InstanceNormalization", cases[ci].opset, at, 1, in, 3,
                                           1, nnf_plan_instancenorm, ci % 2 ? g_pool : NULL);
        CHECK_MSG(r.planned && strstr(r.name, t), "%s group norm case %zu planned (%s)", t, ci,
                  r.name);
        double e = isa == NNF_ISA_SCALAR ? (f_same_bytes(&r, 0) ? 0 : 2)
                                         : f_err(&r, 0, 2e-6, 2e-6, "group norm");
        CHECK_MSG(e <= 1, "%s group norm case %zu: %.3g of tolerance", t, ci, e);
        f_free(&r);
        free(x);
        free(sc);
        free(b);
    }
}

/* ---- LpNormalization --------------------------------------------------------------- */

/* Rows and positions along an inner axis, p 1 and 2, at lengths with vector
 * tails, on 1 and 2 threads; lines of zeros, of values near 1e-25 (squares
 * that underflow in float), near 1e20 (squares that overflow) and near 1e-39
 * (a norm whose reciprocal overflows), with a NaN and with an infinity. rel 1e-6: the float-block
 * sum (1.5e-6, halved by the square root for p 2) and the reciprocal's and product's roundings
 * against the reference's x / norm in double. */
static void test_lpnorm(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    static const struct {
        int64_t d[3];
        int axis;
    } cases[] = {{{6, 1, 1}, 1},     {{6, 2, 1}, 1},    {{6, 7, 1}, 1},   {{6, 13, 1}, 1},
                 {{6, 31, 1}, 1},    {{6, 127, 1}, 1},  {{6, 768, 1}, 1}, {{6, 1000, 1}, 1},
                 {{3, 40000, 1}, 1}, {{6, 1, 7}, 1},    {{6, 5, 64}, 1},  {{2, 33, 65}, 1},
                 {{6, 17, 130}, 1},  {{1, 61, 200}, 1}, {{7, 3, 5}, 0}};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int64_t *d = cases[ci].d;
        size_t n = numel_of(3, d);
        for (int p = 1; p <= 2; p++) {
            float *x = f_rand_buf(n, -2, 2);
            /* line k: values at x[first + k * ld], line_len of them */
            size_t ld = cases[ci].axis == 1 ? (size_t)d[2] : (size_t)(d[1] * d[2]),
                   len = (size_t)d[cases[ci].axis], outer = n / (len * ld);
            for (size_t l = 0; l < outer * ld && l < 6; l++) {
                size_t first = l / ld * len * ld + l % ld;
                static const float scale[6] = {0.0f, 1e-25f, 1e20f, 1, 1, 1e-39f};
                for (size_t k = 0; k < len; k++)
                    x[first + k * ld] *= scale[l];
                if (l == 3)
                    x[first + len / 2 * ld] = NAN;
                if (l == 4)
                    x[first + len / 3 * ld] = INFINITY;
            }
            nnf_attr at[2] = {f_int("axis", cases[ci].axis), f_int("p", p)};
            f_in in = f32_in(x, 3, d, 0);
            f_res r = f_run("LpNormalization", 1, at, 2, &in, 1, 1, NULL, ci % 2 ? g_pool : NULL);
            CHECK_MSG(
                r.planned && strstr(r.name, t) &&
                    strstr(r.name, d[2] == 1 && cases[ci].axis == 1 ? "lastaxis" : "inneraxis") &&
                    f_err(&r, 0, 1e-30, 1e-6, "LpNormalization") <= 1,
                "%s LpNormalization p %d case %zu (%s)", t, p, ci, r.name);
            f_free(&r);
            free(x);
        }
    }
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

/* ---- 1-D, 2-D and 3-D pools ------------------------------------------------------------ */

typedef struct pool_case {
    int64_t n, c, h, w;
    int64_t k[2], s[2], d[2], pads[4];
    int ceil, include_pad;
    const char *auto_pad;
} pool_case;

/* h 0: a 1-D pool over [n, c, w] with the cases' W kernel, stride,
 * dilation and pads (l, r) */
static int run_pool(nnf_isa isa, const pool_case *pc, int is_max, float *worst_out) {
    int sp = pc->h ? 2 : 1;
    int64_t dims[4] = {pc->n, pc->c, pc->h ? pc->h : pc->w, pc->w};
    int64_t k1[1] = {pc->k[1]}, s1[1] = {pc->s[1]}, d1[1] = {pc->d[1]},
            p1[2] = {pc->pads[1], pc->pads[3]};
    size_t n = numel_of(sp + 2, dims);
    float *x = f_rand_buf(n, -10, 10);
    f_specials(x, n, 17, 5);
    nnf_attr at[7];
    int na = 0;
    at[na++] = f_ints("kernel_shape", sp == 2 ? pc->k : k1, sp);
    at[na++] = f_ints("strides", sp == 2 ? pc->s : s1, sp);
    at[na++] = f_ints("pads", sp == 2 ? pc->pads : p1, 2 * sp);
    at[na++] = f_int("ceil_mode", pc->ceil);
    if (pc->auto_pad)
        at[na++] = f_str("auto_pad", pc->auto_pad);
    if (is_max)
        at[na++] = f_ints("dilations", sp == 2 ? pc->d : d1, sp);
    else
        at[na++] = f_int("count_include_pad", pc->include_pad);
    f_in in = f32_in(x, sp + 2, dims, 0);
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

/* 3-D pools (NCDHW): the depth's taps, pads, strides and dilation around
 * the 2-D cases' W edges, against the reference bit for bit (NaN and
 * infinities mixed in), on 1 and 2 threads; a 3D U-Net's 2x2x2 stride-2
 * down-sampling. */
static void test_pools3d(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    static const struct {
        int64_t dims[5], k[3], s[3], d[3], pads[6];
        int ceil, include_pad;
    } cs[] = {
        {{1, 1, 1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, 0, 0},
        {{1, 2, 4, 8, 8}, {2, 2, 2}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, 0, 0},
        {{2, 3, 5, 7, 9}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, 0, 1},
        {{1, 2, 7, 6, 17}, {3, 2, 3}, {2, 1, 2}, {1, 1, 1}, {1, 0, 1, 1, 1, 0}, 1, 0},
        {{1, 2, 9, 5, 13}, {2, 3, 2}, {3, 2, 1}, {2, 1, 2}, {1, 1, 0, 0, 1, 1}, 0, 1},
        {{1, 3, 6, 9, 40}, {3, 1, 5}, {1, 3, 1}, {1, 1, 1}, {2, 0, 2, 0, 0, 2}, 1, 1},
        {{1, 16, 8, 32, 32}, {2, 2, 2}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, 0, 0},
    };
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++)
        for (int is_max = 0; is_max < 2; is_max++) {
            int dil = cs[ci].d[0] > 1 || cs[ci].d[1] > 1 || cs[ci].d[2] > 1;
            size_t n = numel_of(5, cs[ci].dims);
            float *x = f_rand_buf(n, -10, 10);
            f_specials(x, n, 17, 5);
            nnf_attr at[6];
            int na = 0;
            at[na++] = f_ints("kernel_shape", cs[ci].k, 3);
            at[na++] = f_ints("strides", cs[ci].s, 3);
            at[na++] = f_ints("pads", cs[ci].pads, 6);
            at[na++] = f_int("ceil_mode", cs[ci].ceil);
            if (is_max || dil)
                at[na++] = f_ints("dilations", cs[ci].d, 3);
            if (!is_max)
                at[na++] = f_int("count_include_pad", cs[ci].include_pad);
            f_in in = f32_in(x, 5, cs[ci].dims, 0);
            f_res r =
                f_run(is_max ? "MaxPool" : "AveragePool", is_max || !dil ? 12 : 19, at, na, &in, 1,
                      1, is_max ? nnf_plan_maxpool : nnf_plan_avgpool, ci % 2 ? g_pool : NULL);
            CHECK_MSG(r.planned && strstr(r.name, "pool3d") &&
                          strstr(r.name, isa == NNF_ISA_SCALAR ? "scalar" : "avx2") &&
                          f_same_bytes(&r, 0),
                      "%s 3-D %s case %zu (%s)", t, is_max ? "MaxPool" : "AveragePool", ci, r.name);
            f_free(&r);
            free(x);
        }
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
        {1, 64, 40, 40, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}, 0, 0, NULL},  /* threaded */
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
        /* 1-D (h 0): rows of one, strides 1-3, dilation, pads, ceil, a
         * wide threaded one */
        {1, 2, 0, 1, {1, 3}, {1, 1}, {1, 1}, {0, 1, 0, 1}, 0, 1, NULL},
        {2, 3, 0, 17, {1, 3}, {1, 2}, {1, 1}, {0, 1, 0, 1}, 0, 0, NULL},
        {1, 3, 0, 61, {1, 5}, {1, 1}, {1, 2}, {0, 2, 0, 3}, 1, 0, NULL},
        {1, 2, 0, 127, {1, 4}, {1, 3}, {1, 1}, {0, 0, 0, 0}, 1, 1, NULL},
        {1, 2, 0, 31, {1, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0, "SAME_UPPER"},
        {1, 16, 0, 4099, {1, 3}, {1, 2}, {1, 1}, {0, 1, 0, 1}, 0, 0, NULL},
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
    test_pools3d(isa);
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

/* ---- cases the soak found (failing until the kernels are fixed) ------------------------ */


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

/* ---- the soak ------------------------------------------------------------------------- */

static nnf_threadpool *g_pool3; /* the soak's third thread count */
static char soak_desc[512];     /* the case being run: printed with each failed check */

/* Uniform in [lo, hi]. */
static size_t uniform(size_t lo, size_t hi) {
    return lo + (size_t)(check_unit() * (double)(hi - lo + 1));
}

static size_t pick(const size_t *v, size_t n) {
    return v[(size_t)(check_unit() * (double)n) % n];
}

/* Any small count, or a multiple of 8 up to 72 off by -1, 0 or +1 (the AVX2
 * rows' blocks of 8 and 16). */
static size_t soak_channels(void) {
    if (check_unit() < 0.5)
        return uniform(1, 24);
    size_t c = 8 * uniform(1, 9);
    return c + uniform(0, 2) - 1;
}

/* A map extent: half the time one at the edges of the 8-lane blocks, else
 * any of 1..60. */
static size_t soak_extent(void) {
    static const size_t edges[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 23, 24, 25};
    return check_unit() < 0.5 ? pick(edges, 12) : uniform(1, 60);
}

/* dims[0..parts) with product total: a random divisor per axis. */
static void soak_split(size_t total, int parts, int64_t *dims) {
    for (int i = 0; i < parts - 1; i++) {
        size_t div[256], nd = 0;
        for (size_t d = 1; d * d <= total && nd < 254; d++)
            if (total % d == 0) {
                div[nd++] = d;
                div[nd++] = total / d;
            }
        size_t d = check_unit() < 0.3 ? 1 : pick(div, nd);
        dims[i] = (int64_t)d;
        total /= d;
    }
    if (parts > 0)
        dims[parts - 1] = (int64_t)total;
}

static const char *const data_names[] = {"uniform", "specials", "ties", "ties<=0", "offset"};

/* Input data of a kind: 0 uniform in [-3, 3]; 1 the same with NaN, +-inf,
 * signed zeros, a denormal and large values at a random stride (f_specials);
 * 2 few distinct values (-2, -1, -0, +0, 1), so that windows hold ties and
 * zeros of both signs; 3 the same without 1 (every max a tie of zeros or
 * negatives, as after a negated ReLU); 4 uniform plus a large offset. */
static float *soak_data(size_t n, int kind) {
    float *x = f_rand_buf(n, -3, 3);
    if (kind == 1) {
        size_t stride = uniform(2, 300);
        f_specials(x, n, stride, uniform(0, stride - 1));
    } else if (kind == 2 || kind == 3) {
        static const float v[] = {-2.0f, -1.0f, -0.0f, 0.0f, 1.0f};
        for (size_t i = 0; i < n; i++)
            x[i] = v[uniform(0, kind == 2 ? 4 : 3)];
    } else if (kind == 4) {
        static const float off[] = {100.0f, -1000.0f, 1e4f};
        float o = off[uniform(0, 2)];
        for (size_t i = 0; i < n; i++)
            x[i] += o;
    }
    return x;
}

/* Largest |x| over the finite values (at least 1). */
static double max_abs(const float *x, size_t n) {
    double m = 1;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]) && fabs((double)x[i]) > m)
            m = fabs((double)x[i]);
    return m;
}

/* An output's check: the same value as the reference (exact), else
 * f_err's |fast - ref| <= abs + rel |ref|, NaN meeting NaN. "The same value"
 * is the same bits, except where IEEE 754 leaves the result open: a NaN from
 * NaN operands may carry either operand's sign and payload (x86 returns the
 * first source's, and the compiler orders the sources), and max of +0 and -0
 * may be either zero (zeros: a maximum's output). */
typedef struct out_tol {
    int exact;
    double abs, rel;
    int zeros;
} out_tol;

static const out_tol EXACT = {1, 0, 0, 0};
static const out_tol EXACT_MAX = {1, 0, 0, 1};

static int same_value(uint32_t f, uint32_t e, int zeros) {
    float a, b;
    memcpy(&a, &f, 4);
    memcpy(&b, &e, 4);
    return f == e || (isnan(a) && isnan(b)) || (zeros && a == 0.0f && b == 0.0f);
}

/* Output k of r against the reference; prints the first differing element. */
static int soak_output_ok(const f_res *r, int k, out_tol tol, const char *what) {
    if (!tol.exact)
        return f_err(r, k, tol.abs, tol.rel, what) <= 1;
    const uint32_t *f = r->fast[k], *e = r->ref[k];
    for (size_t i = 0; i < r->numel[k]; i++)
        if (!same_value(f[i], e[i], tol.zeros)) {
            float a, b;
            memcpy(&a, &f[i], 4);
            memcpy(&b, &e[i], 4);
            fprintf(stderr,
                    "  %s [%s]: output %d element %zu fast %.9g (0x%08x) ref %.9g (0x%08x)\n", what,
                    r->name, k, i, a, (unsigned)f[i], b, (unsigned)e[i]);
            return 0;
        }
    return 1;
}

/* LayerNormalization of rows [768] with an outlier (100) among values in
 * [-3, 3], at x[pos]: the AVX2 kernel's worst error in tolerances. Data from
 * a fixed check_rng state, which is restored (the other cases' data stays). */
static double ln_outlier_err(size_t pos, uint64_t state) {
    uint64_t keep = check_rng;
    check_rng = state;
    int64_t d[2] = {4, 768}, dn[1] = {768};
    float *x = f_rand_buf(4 * 768, -3, 3), *sc = f_rand_buf(768, 0.5f, 2),
          *b = f_rand_buf(768, -1, 1);
    check_rng = keep;
    for (size_t r = 0; r < 4; r++)
        x[r * 768 + pos] = 100.0f;
    f_in in[3] = {f32_in(x, 2, d, 0), f32_in(sc, 1, dn, 1), f32_in(b, 1, dn, 1)};
    f_res r = f_run("LayerNormalization", 17, NULL, 0, in, 3, 1, nnf_plan_layernorm, NULL);
    double e = f_err(&r, 0, 2e-6, 2e-6, "layernorm outlier");
    f_free(&r);
    free(x);
    free(sc);
    free(b);
    return e;
}

static void test_soak_regressions(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    /* GlobalMaxPool of {-0, +0}: a zero of either sign (the reference keeps
     * the first of equal values, the AVX2 lane tree the later lane; IEEE 754
     * leaves max(-0, +0) open) */
    float z[2] = {-0.0f, 0.0f};
    int64_t dz[3] = {1, 1, 2};
    f_in in = f32_in(z, 3, dz, 0);
    f_res r = f_run("GlobalMaxPool", 1, NULL, 0, &in, 1, 1, nnf_plan_global_pool, NULL);
    CHECK_MSG(r.status == NNF_OK && r.planned && soak_output_ok(&r, 0, EXACT_MAX, "max of zeros") &&
                  *(const float *)r.fast[0] == 0.0f,
              "%s GlobalMaxPool of {-0, +0}", t);
    f_free(&r);
    /* LayerNormalization's Mean of a row {+inf, 1} is +inf; the AVX2 kernel
     * sums x - x[0] (inf - inf: NaN) and reports NaN */
    float xi[2] = {INFINITY, 1.0f}, one[2] = {1.0f, 1.0f};
    int64_t dl[2] = {1, 2}, d2[1] = {2};
    f_in li[2] = {f32_in(xi, 2, dl, 0), f32_in(one, 1, d2, 1)};
    r = f_run("LayerNormalization", 17, NULL, 0, li, 2, 2, nnf_plan_layernorm, NULL);
    CHECK_MSG(f_err(&r, 1, 0, 1e-6, "layernorm mean of {inf, 1}") <= 1,
              "%s LayerNormalization Mean of {+inf, 1}", t);
    f_free(&r);
    /* An outlier in a row: within tolerance anywhere but at x[0], which the
     * AVX2 kernel takes as the pivot of its float sums (x - x[0], ~100 each,
     * so the mean is 1e-5 off: 1.48 tolerances in y here) */
    uint64_t state = 0x9E3779B97F4A7C15ull ^ 3 * 0x2545F4914F6CDD1Dull;
    CHECK_MSG(ln_outlier_err(5, state) <= 1, "%s LayerNormalization, outlier at x[5]", t);
    CHECK_MSG(ln_outlier_err(0, state) <= 1, "%s LayerNormalization, outlier at x[0]", t);
    /* BatchNormalization of NaN with a NaN multiplier (variance -1: sqrtf
     * gives the default NaN, 0xffc00000): the reference's x * a keeps x's NaN
     * (0x7fc00000); the AVX2 vmulps has the broadcast a as its first source
     * (GCC folds the load of x into the second), so a's NaN comes out */
    float xn[8], st[4][1] = {{1.0f}, {0.0f}, {0.0f}, {-1.0f}};
    for (int i = 0; i < 8; i++)
        xn[i] = NAN;
    int64_t db[4] = {1, 1, 1, 8}, dc[1] = {1};
    f_in bi[5] = {f32_in(xn, 4, db, 0), f32_in(st[0], 1, dc, 1), f32_in(st[1], 1, dc, 1),
                  f32_in(st[2], 1, dc, 1), f32_in(st[3], 1, dc, 1)};
    r = f_run("BatchNormalization", 15, NULL, 0, bi, 5, 1, nnf_plan_batchnorm, NULL);
    CHECK_MSG(r.planned && soak_output_ok(&r, 0, EXACT, "NaN times NaN") &&
                  isnan(*(const float *)r.fast[0]),
              "%s BatchNormalization of NaN, variance -1", t);
    f_free(&r);
}

/* The 16 bytes past each output still hold the harness's poison. */
static int guard_intact(const f_res *r) {
    for (int k = 0; k < r->n_out; k++) {
        const unsigned char *p = r->fast[k];
        if (!p)
            continue;
        p += r->numel[k] * nnf_dtype_size(r->dtype[k]);
        for (int i = 0; i < 16; i++)
            if (p[i] != 0x7f)
                return 0;
    }
    return 1;
}

/* One case on every tier up to top, on 1, 2 and 3 threads: planned on the
 * tier's kernel (or, with planned 0, left to the reference), each output k
 * within tol[k] of the reference (the scalar tier: tol_scalar[k]), nothing
 * written past an output, and the three thread counts bit-identical. The
 * harness also reruns each plan with the output over an input it may
 * overwrite. Pools name their AVX2 kernels on the AVX-512 tier. */
static void soak_case(const char *op, int opset, nnf_attr *at, int na, const f_in *in, int n_in,
                      int n_out, nnf_plan_fn plan_fn, int planned, const out_tol *tol,
                      const out_tol *tol_scalar, nnf_isa top) {
    nnf_threadpool *pools[3] = {NULL, g_pool, g_pool3};
    for (int t = NNF_ISA_SCALAR; t <= (int)top; t++) {
        nnf_isa isa = nnf_cpu_force_isa((nnf_isa)t);
        const char *tn = nnf_isa_name(isa);
        const char *suffix =
            isa == NNF_ISA_AVX512 && strstr(op, "Pool") && !strstr(op, "Global") ? "avx2" : tn;
        f_res r[3];
        for (int p = 0; p < 3; p++)
            r[p] = f_run(op, opset, at, na, in, n_in, n_out, plan_fn, pools[p]);
        for (int p = 0; p < 3; p++) {
            CHECK_MSG(r[p].status == NNF_OK && r[p].planned == planned &&
                          (!planned || strstr(r[p].name, suffix)),
                      "%s, %d threads: status %d, planned %d (%s)\n  %s", tn, p + 1,
                      (int)r[p].status, r[p].planned, r[p].name, soak_desc);
            CHECK_MSG(guard_intact(&r[p]), "%s, %d threads: written past an output\n  %s", tn,
                      p + 1, soak_desc);
        }
        for (int k = 0; planned && r[0].status == NNF_OK && r[0].planned && k < n_out; k++) {
            out_tol tk = isa == NNF_ISA_SCALAR ? tol_scalar[k] : tol[k];
            CHECK_MSG(soak_output_ok(&r[0], k, tk, op), "%s: output %d against the reference\n  %s",
                      tn, k, soak_desc);
            size_t bytes = r[0].numel[k] * nnf_dtype_size(r[0].dtype[k]);
            for (int p = 1; p < 3; p++)
                CHECK_MSG(r[p].status == NNF_OK && r[p].planned &&
                              !memcmp(r[p].fast[k], r[0].fast[k], bytes),
                          "%s: output %d on %d threads differs from 1 thread\n  %s", tn, k, p + 1,
                          soak_desc);
        }
        for (int p = 0; p < 3; p++)
            f_free(&r[p]);
    }
}

static int desc_dims(char *s, size_t cap, int rank, const int64_t *d) {
    int len = snprintf(s, cap, "[");
    for (int i = 0; i < rank && len < (int)cap; i++)
        len += snprintf(s + len, cap - (size_t)len, i ? ",%lld" : "%lld", (long long)d[i]);
    if (len < (int)cap)
        len += snprintf(s + len, cap - (size_t)len, "]");
    return len;
}

/* LayerNormalization: rank 1..5, any axis (negative half the time), a
 * normalised size at the AVX2 kernel's edges (8- and 16-float steps, blocks
 * of 256) or any of 1..3000, rows enough for the threads sometimes, bias,
 * Mean and InvStdDev optional, scale/bias that broadcast (the reference). */
static void soak_layernorm(nnf_isa top) {
    static const size_t edges[] = {1,   2,   3,   7,   8,   9,    15,   16,   17,   31,  32,
                                   33,  63,  64,  65,  127, 128,  129,  255,  256,  257, 511,
                                   512, 513, 767, 768, 769, 1023, 1024, 1025, 2047, 2048};
    int rank = (int)uniform(1, 5), axis = (int)uniform(0, (size_t)rank - 1);
    size_t n = check_unit() < 0.5 ? pick(edges, sizeof edges / sizeof edges[0]) : uniform(1, 3000);
    size_t max_rows = 60000 / n, rows = 1;
    if (axis > 0)
        rows = check_unit() < 0.6 ? uniform(1, 8) : uniform(1, max_rows > 1 ? max_rows : 1);
    int64_t d[5];
    soak_split(rows, axis, d);
    soak_split(n, rank - axis, d + axis);
    size_t numel = rows * n;
    int kind = (int)uniform(0, 5); /* 5: constant rows (variance 0) */
    float *x = soak_data(numel, kind == 5 ? 0 : kind);
    if (kind == 5)
        for (size_t r = 0; r < rows; r++)
            for (size_t i = 0; i < n; i++)
                x[r * n + i] = x[r * n];
    float *sc = check_unit() < 0.8 ? f_rand_buf(n, 0.5f, 2) : f_rand_buf(n, -2, 2),
          *b = f_rand_buf(n, -1, 1);
    /* scale/bias: the normalised shape, without its leading 1s sometimes */
    int srank = rank - axis;
    const int64_t *sd = d + axis;
    while (srank > 1 && sd[0] == 1 && check_unit() < 0.5) {
        sd++;
        srank--;
    }
    int64_t one[1] = {1};
    int bcast = n > 1 && check_unit() < 0.05; /* a scale of one value: the reference's */
    double u = check_unit();
    int bias = u < 0.4 ? 0 : u < 0.5 ? -1 : 1; /* none, absent, present */
    f_in in[3] = {f32_in(x, rank, d, 0), bcast ? f32_in(sc, 1, one, 1) : f32_in(sc, srank, sd, 1),
                  f32_in(b, srank, sd, 1)};
    in[1].constant = check_unit() < 0.5;
    in[2].constant = check_unit() < 0.5;
    in[2].absent = bias < 0;
    static const float eps[] = {1e-5f, 1e-6f, 1e-12f, 1e-3f, 0.25f};
    nnf_attr at[2];
    int na = 0, ax = axis - (check_unit() < 0.5 ? rank : 0);
    if (ax != -1 || check_unit() < 0.5)
        at[na++] = f_int("axis", ax);
    float e = eps[uniform(0, 4)];
    if (e != 1e-5f || check_unit() < 0.5)
        at[na++] = f_float("epsilon", e);
    int n_out = (int)uniform(1, 3);
    int len = snprintf(soak_desc, sizeof soak_desc, "LayerNormalization x ");
    len += desc_dims(soak_desc + len, sizeof soak_desc - (size_t)len, rank, d);
    snprintf(soak_desc + len, sizeof soak_desc - (size_t)len,
             " axis %d epsilon %g scale %s bias %s outputs %d data %s", ax, (double)e,
             bcast ? "[1]" : "dense", bias ? (bias < 0 ? "absent" : "dense") : "none", n_out,
             kind == 5 ? "constant rows" : data_names[kind]);
    /* SIMD tiers: y abs 2e-6 (1 + |y|), Mean abs 1e-7 max|x| (and rel 1e-6 as
     * the fixed cases), InvStdDev rel 1e-6; the scalar tier is exact */
    out_tol tol[3] = {{0, 2e-6, 2e-6, 0}, {0, 1e-7 * max_abs(x, numel), 1e-6, 0}, {0, 0, 1e-6, 0}};
    out_tol exact[3] = {EXACT, EXACT, EXACT};
    soak_case("LayerNormalization", 17, at, na, in, bias ? 3 : 2, n_out, nnf_plan_layernorm, !bcast,
              tol, exact, top);
    free(x);
    free(sc);
    free(b);
}

/* BatchNormalization: rank 2..5, any channel count, maps to a few thousand,
 * statistics with NaN, infinities, zero and negative variance sometimes, and
 * statistics known only at run time (the reference). */
static void soak_batchnorm(nnf_isa top) {
    /* one draw per statement: the order of draws in an initialiser list or
     * in a call's arguments is unspecified, and a seed must replay */
    int rank = (int)uniform(2, 5);
    int64_t d[5];
    d[0] = (int64_t)uniform(1, 2);
    d[1] = (int64_t)soak_channels();
    size_t plane = check_unit() < 0.5 ? soak_extent() : uniform(1, 4000);
    if ((size_t)(d[0] * d[1]) * plane > 200000)
        plane = 200000 / (size_t)(d[0] * d[1]);
    if (rank == 2)
        plane = 1;
    soak_split(plane, rank - 2, d + 2);
    size_t c = (size_t)d[1], numel = (size_t)(d[0] * d[1]) * plane;
    int kind = (int)uniform(0, 3);
    float *x = soak_data(numel, kind), *p[4];
    for (int k = 0; k < 4; k++)
        p[k] = f_rand_buf(c, k == 3 ? 0 : -2, 2);
    int bad_stats = check_unit() < 0.1;
    if (bad_stats)
        for (int k = 0; k < 4; k++) {
            size_t stride = uniform(1, 5);
            f_specials(p[k], c, stride, uniform(0, 4));
        }
    int runtime = check_unit() < 0.1 ? (int)uniform(1, 4) : 0;
    f_in in[5] = {f32_in(x, rank, d, 0)};
    for (int k = 1; k < 5; k++)
        in[k] = f32_in(p[k - 1], 1, d + 1, k != runtime);
    static const float eps[] = {1e-5f, 1e-3f, 0.0f};
    float e = eps[uniform(0, 2)];
    nnf_attr at = f_float("epsilon", e);
    static const size_t opsets[] = {9, 14, 15};
    int opset = (int)pick(opsets, 3);
    int len = snprintf(soak_desc, sizeof soak_desc, "BatchNormalization opset %d x ", opset);
    len += desc_dims(soak_desc + len, sizeof soak_desc - (size_t)len, rank, d);
    snprintf(soak_desc + len, sizeof soak_desc - (size_t)len, " epsilon %g data %s%s%s", (double)e,
             data_names[kind], bad_stats ? " statistics with specials" : "",
             runtime ? " runtime statistics" : "");
    int na = e != 1e-5f || check_unit() < 0.5;
    out_tol exact[1] = {EXACT};
    soak_case("BatchNormalization", opset, &at, na, in, 5, 1, nnf_plan_batchnorm, !runtime, exact,
              exact, top);
    free(x);
    for (int k = 0; k < 4; k++)
        free(p[k]);
}

/* Output extent of a pool axis: the reference's rules (conv.c). */
static int64_t soak_pool_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1,
                             int ceil_mode, int same) {
    if (same)
        return (in + s - 1) / s;
    int64_t room = in + p0 + p1 - ((k - 1) * d + 1);
    if (room < 0)
        return 0;
    int64_t out = room / s + 1;
    if (ceil_mode && room % s && out * s < in + p0)
        out++;
    return out;
}

/* 1-D, 2-D and 3-D MaxPool and AveragePool: kernels 1..7 per axis,
 * strides 1..3, dilation 1..2 (AveragePool's from opset 19), pads 0..3
 * below the kernel, ceil_mode, count_include_pad, auto_pad, batch 1..2,
 * channels to 73, maps to 60 x 60, and wide rows around the separable
 * MaxPool's row buffer (NNF_POOL_SEP_ROW). */
static void soak_pool(nnf_isa top) {
    for (;;) {
        double u = check_unit();
        int is_max = check_unit() < 0.5, sp = u < 0.05 ? 1 : u < 0.85 ? 2 : 3;
        int64_t d5[5] = {1, 1, 1, 1, 1};
        d5[0] = (int64_t)uniform(1, 2);
        d5[1] = (int64_t)soak_channels();
        int64_t k[3], s[3], dl[3] = {1, 1, 1}, pads[6] = {0, 0, 0, 0, 0, 0}, o[3];
        int wide = sp == 2 && check_unit() < 0.08, any_dl = 0;
        for (int i = 0; i < sp; i++) {
            d5[2 + i] = (int64_t)soak_extent();
            k[i] = i && check_unit() < 0.5 ? k[0] : (int64_t)uniform(1, 7);
            s[i] = i && check_unit() < 0.5 ? s[0] : (int64_t)uniform(1, 3);
            if (check_unit() < 0.2)
                dl[i] = 2, any_dl = 1;
        }
        if (sp == 3 && check_unit() < 0.5)
            d5[2] = (int64_t)uniform(1, 9); /* a short depth */
        if (wide) {
            d5[1] = (int64_t)uniform(1, 3);
            d5[2] = (int64_t)uniform(1, 8);
            d5[3] = (int64_t)uniform(500, 2200);
        }
        for (int i = 0; i < 2 * sp; i++) {
            int64_t kk = k[i % sp], top_pad = kk - 1 < 3 ? kk - 1 : 3;
            pads[i] =
                i >= sp && check_unit() < 0.6 ? pads[i - sp] : (int64_t)uniform(0, (size_t)top_pad);
            if (pads[i] > top_pad)
                pads[i] = top_pad;
        }
        int ceil_mode = check_unit() < 0.3, include_pad = !is_max && check_unit() < 0.5;
        static const char *const autos[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
        int ap = check_unit() < 0.15 ? (int)uniform(0, 3) : -1;
        int same = ap == 1 || ap == 2;
        if (ap >= 1)
            memset(pads, 0, sizeof pads);
        int64_t p0[3], p1[3];
        size_t out_n = (size_t)(d5[0] * d5[1]), in_n = out_n, taps = 1;
        for (int i = 0; i < sp; i++) {
            p0[i] = pads[i];
            p1[i] = pads[sp + i];
            o[i] = soak_pool_out(d5[2 + i], k[i], s[i], dl[i], p0[i], p1[i], ap > 0 ? 0 : ceil_mode,
                                 same);
            out_n *= (size_t)(o[i] > 0 ? o[i] : 0);
            in_n *= (size_t)d5[2 + i];
            taps *= (size_t)k[i];
        }
        if (out_n == 0 || out_n * taps > 300000 || in_n > 300000)
            continue;
        int opset = is_max ? 12 : any_dl ? 19 : check_unit() < 0.5 ? 11 : 19;
        nnf_attr at[8];
        int na = 0;
        at[na++] = f_ints("kernel_shape", k, sp);
        if (s[0] > 1 || s[sp - 1] > 1 || check_unit() < 0.5)
            at[na++] = f_ints("strides", s, sp);
        if (ap >= 0)
            at[na++] = f_str("auto_pad", autos[ap]);
        if (ap < 1) /* explicit pads go with NOTSET only */
            at[na++] = f_ints("pads", pads, 2 * sp);
        at[na++] = f_int("ceil_mode", ceil_mode);
        if (any_dl || check_unit() < 0.3)
            at[na++] = f_ints("dilations", dl, sp);
        if (!is_max)
            at[na++] = f_int("count_include_pad", include_pad);
        int kind = (int)uniform(0, 3);
        float *x = soak_data(in_n, kind);
        f_in in = f32_in(x, 2 + sp, d5, 0);
        const char *op = is_max ? "MaxPool" : "AveragePool";
        int len = snprintf(soak_desc, sizeof soak_desc, "%s opset %d x ", op, opset);
        len += desc_dims(soak_desc + len, sizeof soak_desc - (size_t)len, 2 + sp, d5);
        len += snprintf(soak_desc + len, sizeof soak_desc - (size_t)len, " kernel ");
        len += desc_dims(soak_desc + len, sizeof soak_desc - (size_t)len, sp, k);
        len += snprintf(soak_desc + len, sizeof soak_desc - (size_t)len, " strides ");
        len += desc_dims(soak_desc + len, sizeof soak_desc - (size_t)len, sp, s);
        len += snprintf(soak_desc + len, sizeof soak_desc - (size_t)len, " dilations ");
        len += desc_dims(soak_desc + len, sizeof soak_desc - (size_t)len, sp, dl);
        len += snprintf(soak_desc + len, sizeof soak_desc - (size_t)len, " pads ");
        len += desc_dims(soak_desc + len, sizeof soak_desc - (size_t)len, 2 * sp, pads);
        snprintf(soak_desc + len, sizeof soak_desc - (size_t)len,
                 " auto_pad %s ceil_mode %d count_include_pad %d data %s",
                 ap >= 0 ? autos[ap] : "(none)", ceil_mode, include_pad, data_names[kind]);
        out_tol exact[1] = {is_max ? EXACT_MAX : EXACT};
        soak_case(op, opset, at, na, &in, 1, 1, is_max ? nnf_plan_maxpool : nnf_plan_avgpool, 1,
                  exact, exact, top);
        free(x);
        return;
    }
}

/* GlobalMaxPool (exact) and GlobalAveragePool (rel 1e-6; abs 5e-8 max|x|,
 * the fixed cases' 1e-7 at |x| <= 2): rank 3..5, planes to a few thousand
 * around the 256-float blocks, NaN, infinities and ties of signed zeros. */
static void soak_global(nnf_isa top) {
    static const size_t edges[] = {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 255, 256, 257, 511, 513};
    int rank = (int)uniform(3, 5), is_max = check_unit() < 0.5;
    int64_t d[5];
    d[0] = (int64_t)uniform(1, 2);
    d[1] = (int64_t)soak_channels();
    size_t plane =
        check_unit() < 0.5 ? pick(edges, sizeof edges / sizeof edges[0]) : uniform(1, 5000);
    if ((size_t)(d[0] * d[1]) * plane > 300000)
        plane = 300000 / (size_t)(d[0] * d[1]);
    soak_split(plane, rank - 2, d + 2);
    size_t numel = (size_t)(d[0] * d[1]) * plane;
    int kind = (int)uniform(0, 4);
    float *x = soak_data(numel, kind);
    f_in in = f32_in(x, rank, d, 0);
    const char *op = is_max ? "GlobalMaxPool" : "GlobalAveragePool";
    int len = snprintf(soak_desc, sizeof soak_desc, "%s x ", op);
    len += desc_dims(soak_desc + len, sizeof soak_desc - (size_t)len, rank, d);
    snprintf(soak_desc + len, sizeof soak_desc - (size_t)len, " data %s", data_names[kind]);
    out_tol tol[1] = {{is_max, 5e-8 * max_abs(x, numel), 1e-6, is_max}};
    soak_case(op, 1, NULL, 0, &in, 1, 1, nnf_plan_global_pool, 1, tol, tol, top);
    free(x);
}

/* NNF_TEST_SOAK=N runs N more random cases of each family (LayerNorm,
 * BatchNorm, 2-D pools, global pools) from NNF_TEST_SEED (default 1) on every
 * tier, on 1, 2 and 3 threads, with the tolerances of the head comment and a
 * guard past every output. Off by default (CI runs the fixed cases); for long
 * runs after a kernel change:
 *   NNF_TEST_SOAK=1000 NNF_TEST_SEED=7 build/test_norm_pool_fast */
static void soak(nnf_isa top) {
    long count = check_soak_begin();
    if (count <= 0)
        return;
    CHECK(nnf_threadpool_create(3, &g_pool3) == NNF_OK);
    for (long i = 0; i < count; i++)
        soak_layernorm(top);
    for (long i = 0; i < count; i++)
        soak_batchnorm(top);
    for (long i = 0; i < count; i++)
        soak_pool(top);
    for (long i = 0; i < count; i++)
        soak_global(top);
    nnf_threadpool_destroy(g_pool3);
    g_pool3 = NULL;
    check_soak_end(count, "random cases");
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
        test_groupnorm(isa);
        test_lpnorm(isa);
        test_pools(isa);
        test_global_pools(isa);
        test_soak_regressions(isa);
    }
    test_plan_alloc_failures();
    soak(cpu->max_isa);
    if (cpu->max_isa < NNF_ISA_AVX512)
        printf("AVX-512 tier not available on this CPU: its kernels are compiled, not run\n");
    /* LayerNorm and BatchNorm also ran with the output over their input
     * (fast_op_harness.h) */
    printf("runs with the output over an input: %d\n", f_in_place_total);
    CHECK(f_in_place_total >= 20);
    nnf_threadpool_destroy(g_pool);
    TEST_MAIN_END();
}

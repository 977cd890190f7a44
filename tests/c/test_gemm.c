/* f32 GEMM against a double-precision oracle, on every ISA tier this machine
 * has (forced through nnf_cpu_force_isa / nnf_gemm_cfg_for).
 *
 * Tolerance, from the accumulation length K: |err| <= K * 2^-22 * sum_k |alpha a_ik b_kj|
 * (4x the worst-case bound K*u of a float sum, u = 2^-24), plus for the
 * epilogue 2^-20 * (|bias| + |residual| + |y|) and the stated error of the
 * vector activations (vmath_avx2.h), scaled by |x| for SiLU/GELU.
 * Also: vector math accuracy, NaN/Inf propagation, strides and transposes,
 * prepacked operands, thread-count independence, in-place residual, the
 * M = 1 (GEMV) path, batches of GEMMs against lone ones bit for bit, the
 * Gemm/MatMul plans against the reference kernels (inline and threaded),
 * 1x1-conv shaped GEMMs (short K, B read in place with a wide stride) at
 * every edge-tile size, and edge tiles against full tiles bit for bit. */
#include "base/alloc.h"
#include "base/cpu.h"
#include "base/packs.h"
#include "base/threadpool.h"
#include "kernels/gemm.h"
#include "kernels/vmath.h"
#include "plan/kernels.h"

#include "check.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Activation in double precision: the oracle. */
static double act_d(const nnf_activation *a, double x) {
    switch (a->kind) {
    case NNF_ACT_NONE: return x;
    case NNF_ACT_RELU: return x < 0 ? 0 : x;
    case NNF_ACT_CLIP: return x < a->alpha ? a->alpha : x > a->beta ? a->beta : x;
    case NNF_ACT_LEAKY_RELU: return x < 0 ? a->alpha * x : x;
    case NNF_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case NNF_ACT_SILU: return x / (1.0 + exp(-x));
    case NNF_ACT_TANH: return tanh(x);
    case NNF_ACT_HARD_SIGMOID: {
        double y = a->alpha * x + a->beta;
        return y < 0 ? 0 : y > 1 ? 1 : y;
    }
    case NNF_ACT_HARD_SWISH: {
        double y = x / 6.0 + 0.5;
        return x * (y < 0 ? 0 : y > 1 ? 1 : y);
    }
    case NNF_ACT_GELU_ERF: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case NNF_ACT_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(0.79788456080286536 * (x + 0.044715 * x * x * x)));
    }
    return x;
}

static const nnf_activation k_acts[] = {
    {NNF_ACT_NONE, 0, 0},       {NNF_ACT_RELU, 0, 0},
    {NNF_ACT_CLIP, 0.0f, 6.0f}, {NNF_ACT_LEAKY_RELU, 0.1f, 0},
    {NNF_ACT_SIGMOID, 0, 0},    {NNF_ACT_SILU, 0, 0},
    {NNF_ACT_TANH, 0, 0},       {NNF_ACT_HARD_SIGMOID, 0.2f, 0.5f},
    {NNF_ACT_HARD_SWISH, 0, 0}, {NNF_ACT_GELU_ERF, 0, 0},
    {NNF_ACT_GELU_TANH, 0, 0},
};
#define N_ACTS (sizeof k_acts / sizeof k_acts[0])

typedef struct gcase {
    size_t m, n, k;
    int ta, tb;
    size_t lda, ldb, ldc; /* 0 = tight */
    int pack_a, pack_b;
    nnf_epilogue ep;
    int use_ep;
} gcase;

/* The oracle for C(i, j) of case g (a and b as stored, lda and ldb resolved,
 * the epilogue's residual still holding its input): the product in double
 * precision through the epilogue, and in *tol the tolerance of the file's
 * head comment. */
static double oracle_at(const gcase *g, const float *a, size_t lda, const float *b, size_t ldb,
                        size_t i, size_t j, double *tol) {
    const nnf_epilogue *ep = g->use_ep ? &g->ep : NULL;
    double acc = 0, mag = 0;
    for (size_t q = 0; q < g->k; q++) {
        double av = g->ta ? a[q * lda + i] : a[i * lda + q];
        double bv = g->tb ? b[j * ldb + q] : b[q * ldb + j];
        acc += av * bv;
        mag += fabs(av * bv);
    }
    double y = acc, extra = 0, xin;
    double alpha = ep ? ep->alpha : 1.0;
    y *= alpha;
    mag *= fabs(alpha);
    if (ep) {
        if (ep->bias_kind == NNF_BIAS_PER_ROW)
            y += ep->bias[i], extra += fabs(ep->bias[i]);
        else if (ep->bias_kind == NNF_BIAS_PER_COL)
            y += ep->bias[j], extra += fabs(ep->bias[j]);
        double r = ep->residual ? ep->residual_scale * ep->residual[i * ep->ld_residual + j] : 0;
        extra += fabs(r);
        if (!ep->residual_after_act)
            y += r;
        xin = y;
        y = act_d(&ep->act, y);
        if (ep->residual_after_act)
            y += r;
    } else {
        xin = y;
    }
    double t = (double)g->k * ldexp(1.0, -22) * mag + ldexp(1.0, -20) * (extra + fabs(y)) + 1e-30;
    /* activation slope <= 1.2 carries the sum's error; plus its own approximation error */
    *tol = 1.2 * t + 4e-7 * (1.0 + fabs(xin));
    return y;
}

/* Runs one case with cfg and checks it against the oracle; returns the number of bad values. */
static int run_case(const nnf_gemm_cfg *cfg, const gcase *g, nnf_threadpool *pool,
                    const char *what) {
    size_t m = g->m, n = g->n, k = g->k;
    size_t ar = g->ta ? k : m, ac = g->ta ? m : k, br = g->tb ? n : k, bc = g->tb ? k : n;
    size_t lda = g->lda ? g->lda : ac, ldb = g->ldb ? g->ldb : bc, ldc = g->ldc ? g->ldc : n;
    float *a = check_rand_buf(ar * lda), *b = check_rand_buf(br * ldb);
    size_t csize = m * ldc + 1;
    float *c = check_rand_buf(csize), *c0 = malloc(csize * sizeof(float));
    memcpy(c0, c, csize * sizeof(float));
    nnf_gemm_packed *pa = NULL, *pb = NULL;
    nnf_gemm_src sa = nnf_gemm_src_matrix(a, lda, g->ta), sb = nnf_gemm_src_matrix(b, ldb, g->tb);
    if (g->pack_a) {
        CHECK(nnf_gemm_pack_a(cfg, m, k, a, lda, g->ta, &pa) == NNF_OK);
        sa = nnf_gemm_src_packed(pa);
    }
    if (g->pack_b) {
        CHECK(nnf_gemm_pack_b(cfg, k, n, b, ldb, g->tb, &pb) == NNF_OK);
        sb = nnf_gemm_src_packed(pb);
    }
    const nnf_epilogue *ep = g->use_ep ? &g->ep : NULL;
    CHECK(nnf_gemm_run(cfg, m, n, k, &sa, &sb, c, ldc, ep, pool) == NNF_OK);
    int bad = 0;
    for (size_t i = 0; i < m && bad < 3; i++) {
        for (size_t j = 0; j < ldc && bad < 3; j++) {
            size_t ci = i * ldc + j;
            if (j >= n) {
                if (memcmp(&c[ci], &c0[ci], sizeof(float))) {
                    fprintf(stderr, "%s: wrote outside C at (%zu,%zu)\n", what, i, j);
                    bad++;
                }
                continue;
            }
            double tol, y = oracle_at(g, a, lda, b, ldb, i, j, &tol);
            double got = c[ci];
            if (!(fabs(got - y) <= tol)) {
                fprintf(stderr,
                        "%s: %s C(%zu,%zu) = %.9g, want %.9g (tol %.3g) [m=%zu n=%zu k=%zu]\n",
                        what, cfg->name, i, j, got, y, tol, m, n, k);
                bad++;
            }
        }
    }
    for (size_t ci = m * ldc; ci < csize; ci++)
        if (memcmp(&c[ci], &c0[ci], sizeof(float)))
            bad++;
    nnf_gemm_packed_destroy(pa);
    nnf_gemm_packed_destroy(pb);
    free(a);
    free(b);
    free(c);
    free(c0);
    return bad;
}

static void test_sizes(const nnf_gemm_cfg *cfg) {
    /* blocks that end in 5-row panels (tail_split): 20, 25 (nothing else),
     * 26, 31, 32, 61, 127 (the rest 1-2 rows), 15, 16, 33 (3-4 rows); 7,
     * 13: in 4 + 3 */
    size_t mn[] = {1,       2,           7,           13,      20,          25,
                   26,      31,          32,          61,      127,         cfg->mr - 1,
                   cfg->mr, cfg->mr + 1, cfg->nr - 1, cfg->nr, cfg->nr + 1, 2 * cfg->nr + 1};
    size_t ks[] = {1, 2, 7, 13, 61, cfg->kc, cfg->kc + 1, 2 * cfg->kc + 3};
    int fails = 0, cases = 0;
    for (size_t i = 0; i < sizeof mn / sizeof mn[0]; i++)
        for (size_t j = 0; j < sizeof mn / sizeof mn[0]; j++)
            for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++) {
                if ((i + j + q) % 3 &&
                    ks[q] > 64) /* keep the run short: a third of the large-K combos */
                    continue;
                gcase g = {.m = mn[i], .n = mn[j], .k = ks[q], .pack_b = (i + q) & 1};
                fails += run_case(cfg, &g, NULL, "sizes") != 0;
                cases++;
            }
    CHECK_MSG(fails == 0, "%s: %d of %d size cases failed", cfg->name, fails, cases);
}

static void test_layouts(const nnf_gemm_cfg *cfg) {
    int fails = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int pk = 0; pk < 4; pk++) {
                gcase g = {.m = 37,
                           .n = 45,
                           .k = cfg->kc + 19,
                           .ta = ta,
                           .tb = tb,
                           .pack_a = pk & 1,
                           .pack_b = pk >> 1};
                fails += run_case(cfg, &g, NULL, "transposes") != 0;
                g.lda = (ta ? g.m : g.k) + 5;
                g.ldb = (tb ? g.k : g.n) + 3;
                g.ldc = g.n + 7;
                fails += run_case(cfg, &g, NULL, "strides") != 0;
            }
    /* B read transposed (packed by the tier's 8x8 transposes into nr-column
     * panels: full ones, a last one of 8 or more columns, fewer) at awkward
     * widths and depths, K tails of the 8-step transposes included */
    static const size_t tn[] = {1, 7, 8, 9, 16, 31, 33, 64, 65};
    static const size_t tk[] = {1, 7, 9, 64};
    for (size_t i = 0; i < sizeof tn / sizeof tn[0]; i++)
        for (size_t q = 0; q < sizeof tk / sizeof tk[0]; q++) {
            gcase g = {.m = 13, .n = tn[i], .k = tk[q], .tb = 1, .ldb = tk[q] + 3};
            fails += run_case(cfg, &g, NULL, "B transposed") != 0;
        }
    CHECK_MSG(fails == 0, "%s: layout cases failed: %d", cfg->name, fails);
}

static void test_epilogues(const nnf_gemm_cfg *cfg) {
    size_t m = 19, n = 37, k = 29;
    float *bias_r = check_rand_buf(m), *bias_c = check_rand_buf(n), *res = check_rand_buf(m * (n + 3));
    int fails = 0;
    /* every act x bias x residual, scaled or not: alpha alone (an
     * attention's scale) finishes in the AVX2 tile's registers, with a bias
     * or residual through the C epilogue */
    for (size_t a = 0; a < N_ACTS; a++)
        for (int form = 0; form < 6; form++)
            for (int rmode = 0; rmode < 3; rmode++) {
                int bk = form % 3;
                gcase g = {.m = m, .n = n, .k = k, .use_ep = 1, .pack_b = (int)(a & 1)};
                g.ep = nnf_epilogue_default();
                g.ep.act = k_acts[a];
                g.ep.alpha = form >= 3 ? 0.75f : 1.0f;
                g.ep.bias_kind = (nnf_bias_kind)bk;
                g.ep.bias = bk == 1 ? bias_r : bk == 2 ? bias_c : NULL;
                if (rmode) {
                    g.ep.residual = res;
                    g.ep.ld_residual = n + 3;
                    g.ep.residual_scale = rmode == 2 ? 0.5f : 1.0f;
                    g.ep.residual_after_act = rmode == 2;
                }
                int bad = run_case(cfg, &g, NULL, "epilogue");
                CHECK_MSG(!bad, "%s: act %d bias %d residual %d alpha %g", cfg->name,
                          (int)k_acts[a].kind, bk, rmode, (double)g.ep.alpha);
                fails += bad != 0;
                /* a multi-K-block version, where the epilogue runs after accumulation */
                g.k = cfg->kc + 5;
                g.m = 7;
                bad = run_case(cfg, &g, NULL, "epilogue-kblocks");
                CHECK_MSG(!bad, "%s: kblocks act %d bias %d residual %d alpha %g", cfg->name,
                          (int)k_acts[a].kind, bk, rmode, (double)g.ep.alpha);
            }
    /* K = 0: the epilogue of an all-zero product */
    gcase g = {.m = 5, .n = 9, .k = 0, .use_ep = 1};
    g.ep = nnf_epilogue_default();
    g.ep.bias_kind = NNF_BIAS_PER_COL;
    g.ep.bias = bias_c;
    g.ep.act = k_acts[5];
    CHECK(run_case(cfg, &g, NULL, "k=0") == 0);
    /* and against a prepacked B (the weight blocking divided by K's block:
     * a soak seed found the division by zero) */
    g.pack_b = 1;
    CHECK(run_case(cfg, &g, NULL, "k=0 packed B") == 0);
    free(bias_r);
    free(bias_c);
    free(res);
}

static void test_nan_inf(const nnf_gemm_cfg *cfg) {
    size_t m = 9, n = 21, k = 11;
    float *a = check_rand_buf(m * k), *b = check_rand_buf(k * n), *c = malloc(m * n * sizeof(float));
    a[3 * k + 4] = NAN;       /* row 3 of C is NaN */
    b[2 * n + 17] = INFINITY; /* column 17 is +-Inf (or NaN in row 3) */
    for (size_t ai = 0; ai < N_ACTS; ai++) {
        nnf_epilogue ep = nnf_epilogue_default();
        ep.act = k_acts[ai];
        CHECK(nnf_gemm_run(cfg, m, n, k, &(nnf_gemm_src){.data = a, .ld = k},
                           &(nnf_gemm_src){.data = b, .ld = n}, c, n, &ep, NULL) == NNF_OK);
        int ok = 1;
        for (size_t j = 0; j < n; j++)
            ok &= isnan(c[3 * n + j]) != 0;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++)
                if (i != 3 && j != 17)
                    ok &= isfinite(c[i * n + j]) != 0;
        CHECK_MSG(ok, "%s: NaN propagation with act %d", cfg->name, (int)ep.act.kind);
        if (ep.act.kind == NNF_ACT_NONE || ep.act.kind == NNF_ACT_RELU) {
            for (size_t i = 0; i < m; i++) {
                if (i == 3)
                    continue;
                float v = c[i * n + 17];
                double sign = a[i * k + 2];
                int want_inf = ep.act.kind == NNF_ACT_NONE || sign > 0;
                CHECK_MSG(want_inf ? isinf(v) && (v > 0) == (sign > 0) : v == 0.0f,
                          "%s: Inf column row %zu act %d: %g", cfg->name, i, (int)ep.act.kind, v);
            }
        }
    }
    free(a);
    free(b);
    free(c);
}

/* Same bits for 1, 2 and 3 threads; in-place residual with several K blocks. */
static void test_threads(const nnf_gemm_cfg *cfg) {
    size_t m = 131, n = 257, k = cfg->kc * 2 + 9;
    float *a = check_rand_buf(m * k), *b = check_rand_buf(k * n), *bias = check_rand_buf(n);
    float *c1 = malloc(m * n * sizeof(float)), *c2 = malloc(m * n * sizeof(float));
    nnf_epilogue ep = nnf_epilogue_default();
    ep.bias_kind = NNF_BIAS_PER_COL;
    ep.bias = bias;
    ep.act = k_acts[9];
    nnf_gemm_src sa = nnf_gemm_src_matrix(a, k, 0), sb = nnf_gemm_src_matrix(b, n, 0);
    CHECK(nnf_gemm_run(cfg, m, n, k, &sa, &sb, c1, n, &ep, NULL) == NNF_OK);
    for (int t = 2; t <= 3; t++) {
        nnf_threadpool *pool = NULL;
        CHECK(nnf_threadpool_create(t, &pool) == NNF_OK);
        memset(c2, 0, m * n * sizeof(float));
        CHECK(nnf_gemm_run(cfg, m, n, k, &sa, &sb, c2, n, &ep, pool) == NNF_OK);
        CHECK_MSG(!memcmp(c1, c2, m * n * sizeof(float)), "%s: %d threads differ from 1", cfg->name,
                  t);
        gcase g = {.m = 61, .n = 127, .k = 300, .pack_b = 1};
        CHECK(run_case(cfg, &g, pool, "threaded") == 0);
        nnf_threadpool_destroy(pool);
    }
    /* Tall and narrow (a late conv layer: the tiles cut M, so B is packed
     * once for all threads), B transposed and strided, several K blocks */
    {
        size_t mt = 301, nt = 49, kt = cfg->kc * 2 + 9, ldb = kt + 5;
        float *at = check_rand_buf(mt * kt), *bt = check_rand_buf(nt * ldb);
        float *t1 = malloc(mt * nt * sizeof(float)), *t2 = malloc(mt * nt * sizeof(float));
        nnf_gemm_src ta = nnf_gemm_src_matrix(at, kt, 0), tb = nnf_gemm_src_matrix(bt, ldb, 1);
        CHECK(nnf_gemm_run(cfg, mt, nt, kt, &ta, &tb, t1, nt, &ep, NULL) == NNF_OK);
        for (int t = 2; t <= 3; t++) {
            nnf_threadpool *pool = NULL;
            CHECK(nnf_threadpool_create(t, &pool) == NNF_OK);
            CHECK(nnf_gemm_run(cfg, mt, nt, kt, &ta, &tb, t2, nt, &ep, pool) == NNF_OK);
            CHECK_MSG(!memcmp(t1, t2, mt * nt * sizeof(float)), "%s: tall GEMM, %d threads differ",
                      cfg->name, t);
            gcase g = {.m = 97,
                       .n = 2 * cfg->nr + 1,
                       .k = cfg->kc + 3,
                       .tb = t & 1,
                       .use_ep = 1,
                       .ep = ep};
            CHECK(run_case(cfg, &g, pool, "shared-b") == 0);
            nnf_threadpool_destroy(pool);
        }
        free(at);
        free(bt);
        free(t1);
        free(t2);
    }
    /* Tall with prepacked weights and an A beyond L2 (GEMM 1024^3): the
     * tiles cut M, each task packing its own rows, not N with A shared */
    {
        size_t mt = 1031, nt = 3 * cfg->nr + 5, kt = cfg->kc * 2 + 9;
        while (mt * kt * sizeof(float) <= 2 * nnf_cpu_get()->l2)
            kt += cfg->kc;
        float *at = check_rand_buf(mt * kt), *bt = check_rand_buf(kt * nt);
        float *t1 = malloc(mt * nt * sizeof(float)), *t2 = malloc(mt * nt * sizeof(float));
        nnf_gemm_packed *pbt = NULL;
        CHECK(nnf_gemm_pack_b(cfg, kt, nt, bt, nt, 0, &pbt) == NNF_OK);
        nnf_gemm_src ta = nnf_gemm_src_matrix(at, kt, 0), tb = nnf_gemm_src_packed(pbt);
        nnf_epilogue ept = nnf_epilogue_default();
        ept.act = k_acts[9];
        CHECK(nnf_gemm_run(cfg, mt, nt, kt, &ta, &tb, t1, nt, &ept, NULL) == NNF_OK);
        for (int t = 2; t <= 3; t++) {
            nnf_threadpool *pool = NULL;
            CHECK(nnf_threadpool_create(t, &pool) == NNF_OK);
            CHECK(nnf_gemm_run(cfg, mt, nt, kt, &ta, &tb, t2, nt, &ept, pool) == NNF_OK);
            CHECK_MSG(!memcmp(t1, t2, mt * nt * sizeof(float)),
                      "%s: tall GEMM on prepacked B, %d threads differ", cfg->name, t);
            nnf_threadpool_destroy(pool);
        }
        /* against a double-precision product on a few rows */
        for (size_t i = 0; i < mt; i += 103)
            for (size_t jn = 0; jn < nt; jn++) {
                double acc = 0, mag = 0;
                for (size_t q = 0; q < kt; q++) {
                    acc += (double)at[i * kt + q] * bt[q * nt + jn];
                    mag += fabs((double)at[i * kt + q] * bt[q * nt + jn]);
                }
                float want = nnf_act_apply(&ept.act, (float)acc);
                CHECK_MSG(fabs(t1[i * nt + jn] - want) <= 1e-5 * (mag + 1),
                          "%s: tall GEMM on prepacked B (%zu, %zu): %g want %g", cfg->name, i, jn,
                          t1[i * nt + jn], want);
            }
        nnf_gemm_packed_destroy(pbt);
        free(at);
        free(bt);
        free(t1);
        free(t2);
    }
    /* Short and wide (BERT's 128-token projections: the tiles cut N, so A
     * is packed once for all threads, in chunks of 16 panels: 2 chunks, the
     * last 25 rows in five 5-row tail panels across them, as one thread's
     * block packs them), A transposed and strided, B prepacked, several K
     * blocks */
    {
        size_t ms = 16 * cfg->mr + 7, ns = 24 * cfg->nr + 3, ks = cfg->kc * 2 + 9, lda = ms + 3;
        float *as = check_rand_buf(ks * lda), *bs = check_rand_buf(ks * ns), *bias_s = check_rand_buf(ns);
        float *s1 = malloc(ms * ns * sizeof(float)), *s2 = malloc(ms * ns * sizeof(float));
        nnf_epilogue eps = ep; /* ep's bias has n (257) columns */
        eps.bias = bias_s;
        nnf_gemm_packed *pbs = NULL;
        CHECK(nnf_gemm_pack_b(cfg, ks, ns, bs, ns, 0, &pbs) == NNF_OK);
        nnf_gemm_src ta = nnf_gemm_src_matrix(as, lda, 1), tb = nnf_gemm_src_packed(pbs);
        CHECK(nnf_gemm_run(cfg, ms, ns, ks, &ta, &tb, s1, ns, &eps, NULL) == NNF_OK);
        for (int t = 2; t <= 3; t++) {
            nnf_threadpool *pool = NULL;
            CHECK(nnf_threadpool_create(t, &pool) == NNF_OK);
            CHECK(nnf_gemm_run(cfg, ms, ns, ks, &ta, &tb, s2, ns, &eps, pool) == NNF_OK);
            CHECK_MSG(!memcmp(s1, s2, ms * ns * sizeof(float)), "%s: wide GEMM, %d threads differ",
                      cfg->name, t);
            gcase g = {.m = ms,
                       .n = ns,
                       .k = ks,
                       .ta = t & 1,
                       .lda = (t & 1) ? lda : 0,
                       .pack_b = 1,
                       .use_ep = 1,
                       .ep = eps};
            CHECK(run_case(cfg, &g, pool, "shared-a") == 0);
            nnf_threadpool_destroy(pool);
        }
        nnf_gemm_packed_destroy(pbs);
        free(as);
        free(bias_s);
        free(bs);
        free(s1);
        free(s2);
    }
    /* residual = C itself (an in-place Add), K spanning several blocks */
    float *r = malloc(m * n * sizeof(float));
    memcpy(c2, c1, m * n * sizeof(float));
    memcpy(r, c1, m * n * sizeof(float));
    nnf_epilogue e2 = nnf_epilogue_default();
    e2.residual = c2;
    e2.ld_residual = n;
    CHECK(nnf_gemm_run(cfg, m, n, k, &sa, &sb, c2, n, &e2, NULL) == NNF_OK);
    e2.residual = r;
    CHECK(nnf_gemm_run(cfg, m, n, k, &sa, &sb, c1, n, &e2, NULL) == NNF_OK);
    CHECK_MSG(!memcmp(c1, c2, m * n * sizeof(float)), "%s: in-place residual", cfg->name);
    free(r);
    free(a);
    free(b);
    free(bias);
    free(c1);
    free(c2);
}

/* M = 1 against a packed B (the GEMV path): panel edges, several K blocks,
 * a strided (transposed) A, every bias kind and a residual, threads. */
static void test_gemv(const nnf_gemm_cfg *cfg) {
    /* 16 nr + 1: past the panels a GEMV task carries at a time (gemm.c) */
    size_t ns[] = {1, 2, cfg->nr - 1, cfg->nr, cfg->nr + 1, 2 * cfg->nr + 1, 61, 127, 16 * cfg->nr + 1, 1000};
    size_t ks[] = {1, 3, 7, 13, cfg->kc, cfg->kc + 1, 2 * cfg->kc + 3, 2048};
    float *bias = check_rand_buf(1000), *res = check_rand_buf(1000 + 5);
    nnf_threadpool *pool2 = NULL, *pool3 = NULL;
    CHECK(nnf_threadpool_create(2, &pool2) == NNF_OK && nnf_threadpool_create(3, &pool3) == NNF_OK);
    int fails = 0, cases = 0;
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++) {
            int v = (int)(i + q);
            gcase g = {.m = 1,
                       .n = ns[i],
                       .k = ks[q],
                       .pack_b = 1,
                       .tb = v & 1,
                       .ta = (v >> 1) & 1,
                       .lda = (v >> 1) & 1 ? 3 : 0,
                       .use_ep = v % 3 != 0};
            g.ep = nnf_epilogue_default();
            g.ep.act = k_acts[(size_t)v % N_ACTS];
            g.ep.bias_kind = (nnf_bias_kind)(v % 3);
            g.ep.bias = g.ep.bias_kind == NNF_BIAS_PER_ROW ? bias + 3 : bias;
            g.ep.alpha = v & 4 ? 0.5f : 1.0f;
            if (v & 2) {
                g.ep.residual = res + 1;
                g.ep.ld_residual = ns[i];
                g.ep.residual_after_act = v & 8;
            }
            nnf_threadpool *pool = v % 3 == 0 ? NULL : v % 3 == 1 ? pool2 : pool3;
            fails += run_case(cfg, &g, pool, "gemv") != 0;
            cases++;
        }
    CHECK_MSG(fails == 0, "%s: %d of %d GEMV cases failed", cfg->name, fails, cases);

    /* same bits for 1, 2, 3 threads; residual = C itself (in place) */
    size_t n = 1000, k = 2048;
    float *a = check_rand_buf(k), *b = check_rand_buf(k * n), *c1 = malloc(n * sizeof(float)),
          *c2 = malloc(n * sizeof(float)), *c3 = malloc(n * sizeof(float));
    nnf_gemm_packed *pb = NULL;
    CHECK(nnf_gemm_pack_b(cfg, k, n, b, n, 0, &pb) == NNF_OK);
    nnf_gemm_src sa = nnf_gemm_src_matrix(a, k, 0), sb = nnf_gemm_src_packed(pb);
    nnf_epilogue ep = nnf_epilogue_default();
    ep.bias_kind = NNF_BIAS_PER_COL;
    ep.bias = bias;
    ep.act = k_acts[3];
    CHECK(nnf_gemm_run(cfg, 1, n, k, &sa, &sb, c1, n, &ep, NULL) == NNF_OK);
    CHECK(nnf_gemm_run(cfg, 1, n, k, &sa, &sb, c2, n, &ep, pool2) == NNF_OK);
    CHECK(nnf_gemm_run(cfg, 1, n, k, &sa, &sb, c3, n, &ep, pool3) == NNF_OK);
    CHECK_MSG(!memcmp(c1, c2, n * sizeof(float)) && !memcmp(c1, c3, n * sizeof(float)),
              "%s: GEMV differs across thread counts", cfg->name);
    /* in place, and shifted by one element either way (a panel must not
     * overwrite what a later panel still reads) */
    for (int shift = -1; shift <= 1; shift++) {
        float *buf = malloc((n + 2) * sizeof(float)), *want = malloc(n * sizeof(float));
        for (size_t i = 0; i < n + 2; i++)
            buf[i] = (float)i * 0.01f - 3.0f;
        nnf_epilogue e2 = nnf_epilogue_default();
        e2.residual = buf + 1 + shift;
        e2.ld_residual = n;
        CHECK(nnf_gemm_run(cfg, 1, n, k, &sa, &sb, want, n, &e2, NULL) == NNF_OK);
        CHECK(nnf_gemm_run(cfg, 1, n, k, &sa, &sb, buf + 1, n, &e2, pool2) == NNF_OK);
        CHECK_MSG(!memcmp(want, buf + 1, n * sizeof(float)), "%s: GEMV residual overlapping C (%d)",
                  cfg->name, shift);
        free(buf);
        free(want);
    }
    /* the same on the tiled path, one K block: a residual shifted against C
     * by a row, an element either way, or with another row stride, must be
     * read before any tile writes over it (C itself is read in place) */
    for (int shift = -41; shift <= 41; shift++) {
        if (shift < -1 && shift != -40 && shift != -41)
            continue;
        if (shift > 1 && shift != 40 && shift != 41)
            continue;
        const size_t tm = 13, tn = 40, tk = 5, pad = 64;
        float *buf = malloc((tm * tn + 2 * pad) * sizeof(float));
        float *want = malloc(tm * tn * sizeof(float));
        float *ta = check_rand_buf(tm * tk), *tb = check_rand_buf(tk * tn);
        for (size_t i = 0; i < tm * tn + 2 * pad; i++)
            buf[i] = (float)i * 0.01f - 3.0f;
        nnf_gemm_src xa = nnf_gemm_src_matrix(ta, tk, 0), xb = nnf_gemm_src_matrix(tb, tn, 0);
        nnf_epilogue e2 = nnf_epilogue_default();
        e2.residual = buf + pad + shift;
        e2.ld_residual = tn;
        CHECK(nnf_gemm_run(cfg, tm, tn, tk, &xa, &xb, want, tn, &e2, NULL) == NNF_OK);
        CHECK(nnf_gemm_run(cfg, tm, tn, tk, &xa, &xb, buf + pad, tn, &e2, pool2) == NNF_OK);
        CHECK_MSG(!memcmp(want, buf + pad, tm * tn * sizeof(float)),
                  "%s: residual shifted %d against C", cfg->name, shift);
        free(buf);
        free(want);
        free(ta);
        free(tb);
    }
    nnf_gemm_packed_destroy(pb);
    nnf_threadpool_destroy(pool2);
    nnf_threadpool_destroy(pool3);
    free(a);
    free(b);
    free(c1);
    free(c2);
    free(c3);
    free(bias);
    free(res);
}

/* Batches: A per GEMM, B shared by every third (a broadcast), a residual per
 * GEMM; each must equal a lone nnf_gemm_run bit for bit, whatever the thread
 * count or the split (whole GEMMs per thread or tiles of each). */
typedef struct bctx {
    const float *a, *b, *r;
    float *c;
    const nnf_gemm_packed *pb;
    size_t m, n, k;
} bctx;

static void batch_at(const void *ctx, size_t i, nnf_gemm_src *a, nnf_gemm_src *b, float **c,
                     const float **r) {
    const bctx *t = ctx;
    *a = nnf_gemm_src_matrix(t->a + i * t->m * t->k, t->k, 0);
    *b = t->pb ? nnf_gemm_src_packed(t->pb)
               : nnf_gemm_src_matrix(t->b + (i % 3) * t->k * t->n, t->n, 0);
    *c = t->c + i * t->m * t->n;
    *r = t->r ? t->r + i * t->m * t->n : NULL;
}

static void test_batch(const nnf_gemm_cfg *cfg) {
    size_t shapes[][3] = {{1, 1, 1},
                          {7, 13, 5},
                          {cfg->mr + 1, cfg->nr - 1, 61},
                          {1, 33, 70},
                          {31, 2 * cfg->nr + 1, cfg->kc + 3},
                          {128, 128, 64}};
    size_t counts[] = {1, 2, 3, 5, 12};
    nnf_threadpool *pools[3] = {NULL, NULL, NULL};
    CHECK(nnf_threadpool_create(2, &pools[1]) == NNF_OK &&
          nnf_threadpool_create(3, &pools[2]) == NNF_OK);
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            size_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], cnt = counts[ci];
            if (m * n * k * cnt > 2000000 && cnt != 12)
                continue;
            float *a = check_rand_buf(cnt * m * k), *b = check_rand_buf(3 * k * n), *r = check_rand_buf(cnt * m * n);
            float *want = malloc(cnt * m * n * sizeof(float)),
                  *got = malloc(cnt * m * n * sizeof(float));
            int packed = (s + ci) & 1, with_res = (s + ci) % 3 == 0;
            nnf_gemm_packed *pb = NULL;
            if (packed)
                CHECK(nnf_gemm_pack_b(cfg, k, n, b, n, 0, &pb) == NNF_OK);
            nnf_epilogue ep = nnf_epilogue_default();
            ep.act = k_acts[(s + ci) % N_ACTS];
            ep.ld_residual = n;
            bctx t = {.a = a,
                      .b = b,
                      .r = with_res ? r : NULL,
                      .c = want,
                      .pb = pb,
                      .m = m,
                      .n = n,
                      .k = k};
            for (size_t i = 0; i < cnt; i++) {
                nnf_gemm_src sa, sb;
                float *c;
                const float *res;
                batch_at(&t, i, &sa, &sb, &c, &res);
                nnf_epilogue e = ep;
                e.residual = res;
                CHECK(nnf_gemm_run(cfg, m, n, k, &sa, &sb, c, n, &e, NULL) == NNF_OK);
                if (i == 0 && s < 2) {
                    /* the lone GEMM itself against the oracle */
                    gcase g = {.m = m, .n = n, .k = k, .pack_b = packed, .use_ep = 1, .ep = ep};
                    g.ep.residual = NULL;
                    bad += run_case(cfg, &g, NULL, "batch-one") != 0;
                }
            }
            t.c = got;
            for (int p = 0; p < 3; p++) {
                memset(got, 0xff, cnt * m * n * sizeof(float));
                CHECK(nnf_gemm_run_batch(cfg, cnt, m, n, k, batch_at, &t, n, &ep, pools[p]) ==
                      NNF_OK);
                if (memcmp(want, got, cnt * m * n * sizeof(float))) {
                    fprintf(stderr, "%s: batch %zu x %zux%zux%zu, %d threads differs\n", cfg->name,
                            cnt, m, n, k, p + 1);
                    bad++;
                }
            }
            nnf_gemm_packed_destroy(pb);
            free(a);
            free(b);
            free(r);
            free(want);
            free(got);
        }
    CHECK_MSG(bad == 0, "%s: %d batched GEMM cases differ", cfg->name, bad);
    nnf_threadpool_destroy(pools[1]);
    nnf_threadpool_destroy(pools[2]);
}

static void test_real_shapes(const nnf_gemm_cfg *cfg) {
    /* BERT-base projection and a ResNet-50 classifier row */
    gcase bert = {.m = 128, .n = 768, .k = 768, .pack_b = 1};
    CHECK_MSG(run_case(cfg, &bert, NULL, "bert") == 0, "%s: 128x768x768", cfg->name);
    gcase fc = {.m = 1, .n = 1000, .k = 2048, .pack_b = 1, .tb = 1};
    CHECK_MSG(run_case(cfg, &fc, NULL, "fc") == 0, "%s: 1x1000x2048", cfg->name);
}

/* exp/sigmoid/tanh/erf of the tier against double libm. */
static void test_vmath(nnf_isa isa) {
    size_t n = 200001;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    struct {
        nnf_vm_fn fn;
        double lo, hi, tol;
        int rel;
    } fns[] = {{NNF_VM_EXP, -87.0, 88.0, 3e-7, 1},
               {NNF_VM_SIGMOID, -30.0, 30.0, 2e-7, 0},
               {NNF_VM_TANH, -12.0, 12.0, 4e-7, 0},
               {NNF_VM_ERF, -6.0, 6.0, 4e-7, 0},
               {NNF_VM_SILU, -30.0, 30.0, 3e-7, 1}};
    for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
        for (size_t i = 0; i < n; i++)
            x[i] = (float)(fns[f].lo + (fns[f].hi - fns[f].lo) * (double)i / (double)(n - 1));
        nnf_vmath(isa, fns[f].fn, x, y, n);
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            double xd = x[i], want = fns[f].fn == NNF_VM_EXP       ? exp(xd)
                                     : fns[f].fn == NNF_VM_SIGMOID ? 1.0 / (1.0 + exp(-xd))
                                     : fns[f].fn == NNF_VM_TANH    ? tanh(xd)
                                     : fns[f].fn == NNF_VM_ERF     ? erf(xd)
                                                                   : xd / (1.0 + exp(-xd));
            double err = fabs(y[i] - want) / (fns[f].rel && want != 0.0 ? fabs(want) : 1.0);
            if (!(err <= worst))
                worst = err;
        }
        printf("%s vmath fn %d: max %s error %.3g\n", nnf_isa_name(isa), (int)fns[f].fn,
               fns[f].rel ? "rel" : "abs", worst);
        CHECK_MSG(worst <= fns[f].tol, "%s fn %d error %g > %g", nnf_isa_name(isa), (int)fns[f].fn,
                  worst, fns[f].tol);
        /* each value alone (the 1-vector form) gives the bits it got among
         * its neighbours (the kernels' 4-vector form) */
        size_t bad = 0;
        for (size_t i = 0; i < n; i += 997) {
            float one;
            nnf_vmath(isa, fns[f].fn, x + i, &one, 1);
            bad += memcmp(&one, y + i, sizeof one) != 0;
        }
        CHECK_MSG(bad == 0, "%s fn %d: %zu values differ alone", nnf_isa_name(isa),
                  (int)fns[f].fn, bad);
        float sp[5] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f}, so[5];
        nnf_vmath(isa, fns[f].fn, sp, so, 5);
        CHECK_MSG(isnan(so[0]), "%s fn %d NaN", nnf_isa_name(isa), (int)fns[f].fn);
        if (fns[f].fn == NNF_VM_SIGMOID)
            CHECK(so[1] == 1.0f && so[2] >= 0.0f && so[2] < 1e-30f && so[3] == 0.5f);
        if (fns[f].fn == NNF_VM_TANH || fns[f].fn == NNF_VM_ERF)
            CHECK(fabsf(so[1] - 1.0f) <= 1e-6f && fabsf(so[2] + 1.0f) <= 1e-6f && so[3] == 0.0f);
        if (fns[f].fn == NNF_VM_EXP)
            CHECK(so[3] == 1.0f && so[2] < 1e-30f);
        /* -inf * sigmoid(-inf): NaN where the sigmoid reaches 0 (as Sigmoid +
         * Mul: scalar, AVX2's reciprocal), -inf where it stops at a denormal
         * (AVX-512's division); never a positive number */
        if (fns[f].fn == NNF_VM_SILU)
            CHECK(so[1] == INFINITY && (isnan(so[2]) || so[2] == -INFINITY) && so[3] == 0.0f);
    }
    /* every activation on arrays (odd length: the masked tail) against the reference formula */
    for (size_t a = 0; a < N_ACTS; a++) {
        size_t len = 1003;
        for (size_t i = 0; i < len; i++)
            x[i] = (float)(-9.0 + 18.0 * (double)i / (double)(len - 1));
        x[7] = NAN;
        nnf_act_array(isa, &k_acts[a], x, y, len);
        int ok = isnan(y[7]);
        for (size_t i = 0; i < len; i++)
            if (i != 7)
                ok &= fabs(y[i] - act_d(&k_acts[a], x[i])) <= 4e-7 * (1.0 + fabs(x[i]));
        CHECK_MSG(ok, "%s act %d over an array", nnf_isa_name(isa), (int)k_acts[a].kind);
    }
    free(x);
    free(y);
}

/* ---- plans against the reference kernels --------------------------------- */

static void set_info(nnf_tinfo *t, int rank, const int64_t *dims, const void *data) {
    memset(t, 0, sizeof *t);
    t->present = true;
    t->dtype = NNF_DTYPE_FLOAT32;
    t->shape.rank = rank;
    for (int i = 0; i < rank; i++)
        t->shape.dims[i] = dims[i];
    t->data = data;
}

static nnf_buf make_buf(int rank, const int64_t *dims, void *data) {
    nnf_buf b = {.dtype = NNF_DTYPE_FLOAT32, .rank = rank, .data = data, .numel = 1};
    for (int i = 0; i < rank; i++) {
        b.dims[i] = dims[i];
        b.numel *= (size_t)dims[i];
    }
    return b;
}

/* Plan node with inputs (shapes, data or NULL if not constant), run the fast
 * kernel and the reference, compare. */
/* Plans run on this pool (NULL, then 2 and 3 threads). */
static nnf_threadpool *g_plan_pool;

static void check_plan(const char *op, nnf_gemm_params *p, int n_in, const int *ranks,
                       const int64_t (*dims)[4], float **data, const int *is_const, int yrank,
                       const int64_t *ydims, int expect_fast) {
    nnf_node node = {
        .name = "n0", .op_type = op, .domain = "", .n_inputs = n_in, .n_outputs = 1, .params = p};
    nnf_tinfo in[4], out[1];
    nnf_buf bufs[4], ybuf, rbuf;
    nnf_buf *inp[4];
    for (int i = 0; i < n_in; i++) {
        set_info(&in[i], ranks[i], dims[i], is_const[i] ? data[i] : NULL);
        bufs[i] = make_buf(ranks[i], dims[i], data[i]);
        inp[i] = &bufs[i];
    }
    set_info(&out[0], yrank, ydims, NULL);
    nnf_kernel_plan plan = {0};
    nnf_status st = !strcmp(op, "Gemm") ? nnf_plan_gemm(&node, in, out, &plan)
                                        : nnf_plan_matmul(&node, in, out, &plan);
    CHECK(st == NNF_OK);
    CHECK_MSG((plan.run != NULL) == expect_fast, "%s plan fast=%d", op, plan.run != NULL);
    if (!plan.run) {
        if (plan.free_state)
            plan.free_state(plan.state);
        return;
    }
    ybuf = make_buf(yrank, ydims, NULL);
    float *y = malloc(ybuf.numel * sizeof(float)), *yr = malloc(ybuf.numel * sizeof(float));
    ybuf.data = y;
    rbuf = ybuf;
    rbuf.data = yr;
    nnf_buf *yo = &ybuf, *ro = &rbuf;
    nnf_kctx ctx = {.state = plan.state, .pool = g_plan_pool};
    CHECK(plan.run(&node, inp, &yo, &ctx) == NNF_OK);
    nnf_kctx rctx = {0};
    CHECK((!strcmp(op, "Gemm") ? nnf_gemm_ref(&node, inp, &ro, &rctx)
                               : nnf_matmul_ref(&node, inp, &ro, &rctx)) == NNF_OK);
    double worst = 0;
    for (size_t i = 0; i < ybuf.numel; i++) {
        double e = fabs(y[i] - yr[i]) / (1.0 + fabs(yr[i]));
        if (!(e <= worst))
            worst = e;
    }
    CHECK_MSG(worst < 2e-5, "%s plan %s vs reference: %g", op, plan.name, worst);
    plan.free_state(plan.state);
    free(y);
    free(yr);
}

static void test_plans(void) {
    /* Gemm transB with bias vector, alpha/beta, GELU */
    {
        nnf_gemm_params p = {.trans_b = 1,
                             .alpha = 0.5f,
                             .beta = 2.0f,
                             .act = {NNF_ACT_GELU_ERF, 0, 0},
                             .residual_input = -1,
                             .bias_input = -1};
        int ranks[3] = {2, 2, 1};
        int64_t dims[3][4] = {{33, 70}, {45, 70}, {45}};
        float *d[3] = {check_rand_buf(33 * 70), check_rand_buf(45 * 70), check_rand_buf(45)};
        int cst[3] = {0, 1, 1};
        int64_t yd[2] = {33, 45};
        check_plan("Gemm", &p, 3, ranks, dims, d, cst, 2, yd, 1);
        /* C full (M, N), not constant: residual with beta */
        int64_t dims2[3][4] = {{33, 70}, {45, 70}, {33, 45}};
        float *d2[3] = {d[0], d[1], check_rand_buf(33 * 45)};
        int cst2[3] = {0, 0, 0};
        check_plan("Gemm", &p, 3, ranks[0] == 2 ? (int[]){2, 2, 2} : ranks, dims2, d2, cst2, 2, yd,
                   1);
        /* C (M, 1) constant: per-row bias; transA */
        nnf_gemm_params p3 = {
            .trans_a = 1, .alpha = 1.0f, .beta = 1.0f, .residual_input = -1, .bias_input = -1};
        int64_t dims3[3][4] = {{70, 33}, {70, 45}, {33, 1}};
        float *d3[3] = {d[0], d[1], d2[2]};
        int cst3[3] = {0, 1, 1};
        check_plan("Gemm", &p3, 3, (int[]){2, 2, 2}, dims3, d3, cst3, 2, yd, 1);
        for (int i = 0; i < 3; i++)
            free(d[i]);
        free(d2[2]);
    }
    /* MatMul: BERT-like 3-D x constant 2-D (flattened), with fused residual */
    {
        nnf_gemm_params p = {
            .alpha = 1.0f, .residual_input = 2, .bias_input = -1, .act = {NNF_ACT_NONE, 0, 0}};
        int64_t dims[3][4] = {{2, 16, 64}, {64, 48}, {2, 16, 48}};
        float *d[3] = {check_rand_buf(2 * 16 * 64), check_rand_buf(64 * 48), check_rand_buf(2 * 16 * 48)};
        int cst[3] = {0, 1, 0};
        int64_t yd[3] = {2, 16, 48};
        check_plan("MatMul", &p, 3, (int[]){3, 2, 3}, dims, d, cst, 3, yd, 1);
        /* a fused row vector: a per-column bias */
        nnf_gemm_params prow = {
            .alpha = 1.0f, .residual_input = -1, .bias_input = 2, .act = {NNF_ACT_NONE, 0, 0}};
        int64_t dims2[3][4] = {{2, 16, 64}, {64, 48}, {48}};
        check_plan("MatMul", &prow, 3, (int[]){3, 2, 1}, dims2, d, cst, 3, yd, 1);
        /* a Linear layer's bias row and the skip connection after it: both fused */
        nnf_gemm_params pb = {
            .alpha = 1.0f, .residual_input = 3, .bias_input = 2, .act = {NNF_ACT_NONE, 0, 0}};
        int64_t dims4[4][4] = {{2, 16, 64}, {64, 48}, {48}, {2, 16, 48}};
        float *d4[4] = {d[0], d[1], check_rand_buf(48), d[2]};
        int cst4[4] = {0, 1, 1, 0};
        check_plan("MatMul", &pb, 4, (int[]){3, 2, 1, 3}, dims4, d4, cst4, 3, yd, 1);
        free(d4[2]);
        for (int i = 0; i < 3; i++)
            free(d[i]);
    }
    /* MatMul: 4-D broadcast batches, nothing constant (attention scores) */
    {
        nnf_gemm_params p = {.alpha = 1.0f, .residual_input = -1, .bias_input = -1};
        int64_t dims[2][4] = {{2, 3, 13, 8}, {1, 3, 8, 17}};
        float *d[2] = {check_rand_buf(2 * 3 * 13 * 8), check_rand_buf(3 * 8 * 17)};
        int cst[2] = {0, 0};
        int64_t yd[4] = {2, 3, 13, 17};
        check_plan("MatMul", &p, 2, (int[]){4, 4}, dims, d, cst, 4, yd, 1);
        /* 12 heads (BERT attention), B batch broadcast over A's first axis */
        int64_t dh[2][4] = {{1, 12, 13, 8}, {1, 12, 8, 17}};
        float *dd[2] = {check_rand_buf(12 * 13 * 8), check_rand_buf(12 * 8 * 17)};
        int64_t ydh[4] = {1, 12, 13, 17};
        check_plan("MatMul", &p, 2, (int[]){4, 4}, dh, dd, cst, 4, ydh, 1);
        int64_t db[2][4] = {{2, 1, 7, 8}, {3, 8, 17}};
        int64_t ydb[4] = {2, 3, 7, 17};
        check_plan("MatMul", &p, 2, (int[]){4, 3}, db, dd, cst, 4, ydb, 1);
        /* constant B (packed) with a batched broadcast A and a batched B of 1 */
        int64_t dc[2][4] = {{5, 2, 7, 8}, {1, 1, 8, 17}};
        int64_t ydc[4] = {5, 2, 7, 17};
        int cstb[2] = {0, 1};
        check_plan("MatMul", &p, 2, (int[]){4, 4}, dc, dd, cstb, 4, ydc, 1);
        free(dd[0]);
        free(dd[1]);
        /* 1-D A */
        int64_t dims1[2][4] = {{8}, {1, 3, 8, 17}};
        int64_t yd1[3] = {1, 3, 17};
        check_plan("MatMul", &p, 2, (int[]){1, 4}, dims1, d, cst, 3, yd1, 1);
        free(d[0]);
        free(d[1]);
    }
    /* selection is a pure function of the shapes and tier */
    nnf_gemm_choice c = nnf_gemm_choose(128, 768, 768, 1, 1, 1, NNF_ISA_SCALAR);
    CHECK(c.cfg && c.cfg->isa == NNF_ISA_SCALAR && c.prepack_b && !c.flatten);
    c = nnf_gemm_choose(128, 768, 768, 4, 1, 1, NNF_ISA_AVX2);
    CHECK(c.cfg && c.flatten && c.prepack_b);
    CHECK(c.cfg->isa == (nnf_cpu_get()->max_isa >= NNF_ISA_AVX2 ? NNF_ISA_AVX2 : NNF_ISA_SCALAR));
    c = nnf_gemm_choose(13, 17, 8, 6, 3, 0, NNF_ISA_AVX2);
    CHECK(c.cfg && !c.flatten && !c.prepack_b);
    c = nnf_gemm_choose(-1, 17, 8, 1, 1, 0, NNF_ISA_AVX2);
    CHECK(c.cfg == NULL);
}

/* The 1x1-conv shape of GEMM: A prepacked (weights), B a k-major matrix
 * read in place with a row stride wider than N (an activation plane), a
 * per-row bias, every activation, a residual on some. Sizes cross every
 * edge-tile choice of the tiers (M % mr of 1..mr-1: the AVX2 tier's 4-row
 * tile on 1-4 rows; N % nr <= 8: its 8-column tile), and long N with enough M
 * panels runs the next-block prefetch of B across several N blocks. */
static void test_conv1x1_shapes(const nnf_gemm_cfg *cfg) {
    static const size_t sz[] = {1, 2, 5, 7, 13, 16, 17, 31, 49, 64, 127};
    enum { NS = sizeof sz / sizeof sz[0] };
    float *bias = check_rand_buf(1024), *res = check_rand_buf(1024 * 1100);
    int fails = 0, cases = 0;
    for (size_t i = 0; i < NS; i++)
        for (size_t j = 0; j < NS; j++)
            for (size_t q = 0; q < NS; q++) {
                gcase g = {.m = sz[i], .n = sz[j], .k = sz[q], .pack_a = 1, .use_ep = 1};
                g.ldb = sz[j] + 3 + (i % 3) * 16;
                g.ldc = (i + q) % 4 == 0 ? sz[j] + 5 : 0;
                g.ep = nnf_epilogue_default();
                g.ep.act = k_acts[(i + j + q) % N_ACTS];
                g.ep.bias_kind = NNF_BIAS_PER_ROW;
                g.ep.bias = bias;
                if ((i + 2 * j + q) % 3 == 0) {
                    g.ep.residual = res;
                    g.ep.ld_residual = sz[j] + 1;
                    g.ep.residual_after_act = (i + j) % 5 == 0;
                }
                fails += run_case(cfg, &g, NULL, "conv1x1") != 0;
                cases++;
            }
    /* several N blocks (cfg->nc columns each) and several M panels */
    static const size_t big_n[] = {300, 1000};
    static const size_t ms[] = {24, 32, 64, 127};
    static const size_t ks[] = {16, 64, 127};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        for (size_t j = 0; j < 2; j++)
            for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++) {
                gcase g = {.m = ms[i], .n = big_n[j], .k = ks[q], .pack_a = 1, .use_ep = 1};
                g.ldb = big_n[j] + 64 * (q + 1) + 3;
                g.ep = nnf_epilogue_default();
                g.ep.act = k_acts[(i + j + q) % 2 ? 5 : 1]; /* SiLU, ReLU */
                g.ep.bias_kind = NNF_BIAS_PER_ROW;
                g.ep.bias = bias;
                if (q == 1) {
                    g.ep.residual = res;
                    g.ep.ld_residual = big_n[j];
                }
                fails += run_case(cfg, &g, NULL, "conv1x1-long") != 0;
                cases++;
            }
    /* a B several times L2 (the driver prefetches the next block's rows only
     * then), not a multiple of the N block, with a residual */
    {
        size_t k = 64, n = 4 * nnf_cpu_get()->l2 / (k * sizeof(float)) + 77;
        float *res2 = check_rand_buf(30 * n);
        gcase g = {.m = 30, .n = n, .k = k, .pack_a = 1, .use_ep = 1, .ldb = n + 5};
        g.ep = nnf_epilogue_default();
        g.ep.act = k_acts[5];
        g.ep.bias_kind = NNF_BIAS_PER_ROW;
        g.ep.bias = bias;
        g.ep.residual = res2;
        g.ep.ld_residual = n;
        fails += run_case(cfg, &g, NULL, "conv1x1-beyond-l2") != 0;
        cases++;
        free(res2);
    }
    CHECK_MSG(fails == 0, "%s: %d of %d 1x1-conv GEMM cases failed", cfg->name, fails, cases);
    free(bias);
    free(res);
}

/* A value does not depend on which tile computed it: rows past the last full
 * mr panel and columns of a last panel of at most 8 go through narrower
 * tiles on some tiers, and must equal the same rows/columns computed by a
 * full tile bit for bit (same K order, same epilogue). */
static void test_edge_tiles_bitwise(const nnf_gemm_cfg *cfg) {
    size_t k = 45, mr = cfg->mr, nr = cfg->nr;
    size_t mbig = 2 * mr, nbig = 2 * nr;
    float *a = check_rand_buf(mbig * k), *b = check_rand_buf(k * nbig), *bias = check_rand_buf(mbig);
    float *full = malloc(mbig * nbig * sizeof(float)), *part = malloc(mbig * nbig * sizeof(float));
    int diff = 0;
    for (size_t ai = 0; ai < N_ACTS; ai++) {
        nnf_epilogue ep = nnf_epilogue_default();
        ep.act = k_acts[ai];
        ep.bias_kind = NNF_BIAS_PER_ROW;
        ep.bias = bias;
        nnf_gemm_src sa = nnf_gemm_src_matrix(a, k, 0), sb = nnf_gemm_src_matrix(b, nbig, 0);
        CHECK(nnf_gemm_run(cfg, mbig, nbig, k, &sa, &sb, full, nbig, &ep, NULL) == NNF_OK);
        for (size_t mt = 1; mt < mr; mt++)
            for (size_t nt = 1; nt <= nr; nt += 3) {
                size_t m = mr + mt, n = nr + nt;
                CHECK(nnf_gemm_run(cfg, m, n, k, &sa, &sb, part, nbig, &ep, NULL) == NNF_OK);
                for (size_t i = 0; i < m; i++)
                    diff += memcmp(part + i * nbig, full + i * nbig, n * sizeof(float)) != 0;
            }
    }
    CHECK_MSG(diff == 0, "%s: %d edge-tile rows differ from full-tile rows", cfg->name, diff);
    free(a);
    free(b);
    free(bias);
    free(full);
    free(part);
}

/* A read in place (the tier's ukernel_direct: the whole panels of a
 * row-major A not packed) gives the bits of A packed first, at panel edges
 * and K tails (kc % 4, the assembly's single steps), with B strided or
 * prepacked, an epilogue with a residual or none, on 1 and 2 threads; 600
 * columns (19 panels) read A in place only where 2 threads cut N. */
static void test_direct_a_bitwise(const nnf_gemm_cfg *cfg, nnf_threadpool *pool2) {
    if (!cfg->ukernel_direct)
        return;
    size_t mr = cfg->mr;
    size_t ms[] = {mr, mr + 1, 2 * mr - 1, 2 * mr, 2 * mr + 1, 3 * mr + 2, 128};
    size_t ns[] = {1, 16, 17, 32, 33, 100, 600};
    size_t ks[] = {1, 3, 4, 5, 13, 64, cfg->kc + 5, 2 * cfg->kc + 3};
    int diff = 0, cases = 0;
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
            for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++) {
                size_t m = ms[i], n = ns[j], k = ks[q], lda = k + (q % 3), ldc = n + 1;
                int variant = (int)(i + j + q);
                if (variant % 2 && k > 64)
                    continue; /* keep the run short */
                float *a = check_rand_buf(m * lda), *b = check_rand_buf(k * n);
                float *bias = check_rand_buf(n), *res = check_rand_buf(m * ldc);
                float *c1 = calloc(m * ldc, sizeof(float)), *c2 = calloc(m * ldc, sizeof(float));
                nnf_epilogue ep = nnf_epilogue_default();
                ep.bias_kind = NNF_BIAS_PER_COL;
                ep.bias = bias;
                ep.residual = variant % 3 ? res : NULL;
                ep.ld_residual = ldc;
                ep.act = k_acts[(size_t)variant % N_ACTS];
                nnf_gemm_packed *pa = NULL, *pb = NULL;
                CHECK(nnf_gemm_pack_a(cfg, m, k, a, lda, 0, &pa) == NNF_OK);
                nnf_gemm_src sa = nnf_gemm_src_matrix(a, lda, 0), spa = nnf_gemm_src_packed(pa);
                nnf_gemm_src sb = nnf_gemm_src_matrix(b, n, 0);
                if (variant % 2) {
                    CHECK(nnf_gemm_pack_b(cfg, k, n, b, n, 0, &pb) == NNF_OK);
                    sb = nnf_gemm_src_packed(pb);
                }
                for (int t = 0; t < 2 && pa; t++) {
                    nnf_threadpool *pool = t ? pool2 : NULL;
                    const nnf_epilogue *e = variant % 4 ? &ep : NULL;
                    CHECK(nnf_gemm_run(cfg, m, n, k, &sa, &sb, c1, ldc, e, pool) == NNF_OK);
                    CHECK(nnf_gemm_run(cfg, m, n, k, &spa, &sb, c2, ldc, e, pool) == NNF_OK);
                    for (size_t r = 0; r < m; r++)
                        diff += memcmp(c1 + r * ldc, c2 + r * ldc, n * sizeof(float)) != 0;
                    cases++;
                }
                nnf_gemm_packed_destroy(pa);
                nnf_gemm_packed_destroy(pb);
                free(a);
                free(b);
                free(bias);
                free(res);
                free(c1);
                free(c2);
            }
    CHECK_MSG(diff == 0, "%s: %d rows of %d cases differ with A read in place", cfg->name, diff,
              cases);
}

/* K blocking: never above cfg->kc, equal blocks (multiples of 8) and no
 * more of them than ceil(K / kc); packed A through the tier's packer (the
 * AVX2 one transposes 8 k at a time) laid out exactly as gemm.h says. */
static void test_blocking_and_packing(const nnf_gemm_cfg *cfg) {
    int bad = 0;
    for (size_t k = 1; k <= 4 * cfg->kc + 9; k++) {
        size_t kc = nnf_gemm_kc(cfg, k);
        size_t blocks = (k + kc - 1) / kc, want = (k + cfg->kc - 1) / cfg->kc;
        if (kc > cfg->kc || (k > cfg->kc && kc % 8) || blocks != want)
            bad++;
    }
    CHECK_MSG(bad == 0, "%s: nnf_gemm_kc wrong for %d depths", cfg->name, bad);
    size_t rows[] = {1, 5, 6, 7, 12, 13, 31};
    size_t ks[] = {1, 7, 8, 9, 17, cfg->kc + 3};
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            size_t m = rows[ri], k = ks[ki], lda = k + 3;
            float *a = malloc(m * lda * sizeof(float));
            for (size_t i = 0; i < m * lda; i++)
                a[i] = (float)i * 0.5f - 7.0f;
            nnf_gemm_packed *p = NULL;
            CHECK(nnf_gemm_pack_a(cfg, m, k, a, lda, 0, &p) == NNF_OK);
            if (!p) {
                free(a);
                continue;
            }
            size_t kc = p->kc, r = p->r, wrong = 0;
            for (size_t pc = 0; pc < k; pc += kc) {
                size_t kcb = k - pc < kc ? k - pc : kc;
                for (size_t i = 0; i < p->mn_pad; i++)
                    for (size_t kk = 0; kk < kcb; kk++) {
                        float got = p->data[pc * p->mn_pad + (i / r) * kcb * r + kk * r + i % r];
                        float want = i < m ? a[i * lda + pc + kk] : 0.0f;
                        wrong += got != want;
                    }
            }
            CHECK_MSG(wrong == 0, "%s: packed A %zux%zu has %zu wrong values", cfg->name, m, k,
                      wrong);
            nnf_gemm_packed_destroy(p);
            free(a);
        }
    /* an operand written through nnf_gemm_packed_at (the Winograd weights)
     * equals the packed copy of the same matrix, padding included: B of
     * k x n with only its first kv rows and nv columns non-zero */
    size_t ns[] = {1, 8, cfg->nr - 1, cfg->nr + 8, 3 * cfg->nr + 5};
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            size_t n = ns[ni], k = ks[ki], nv = n > 3 ? n - 3 : n, kv = k > 2 ? k - 2 : k;
            float *b = calloc(k * n, sizeof(float));
            for (size_t kk = 0; kk < kv; kk++)
                for (size_t j = 0; j < nv; j++)
                    b[kk * n + j] = (float)(kk * n + j) * 0.25f + 1.0f;
            nnf_gemm_packed *want = NULL, *got = NULL;
            CHECK(nnf_gemm_pack_b(cfg, k, n, b, n, 0, &want) == NNF_OK);
            CHECK(nnf_gemm_packed_create(cfg, NNF_GEMM_B, n, k, &got) == NNF_OK);
            if (want && got) {
                memset(got->data, 0x7f, nnf_gemm_packed_bytes(got)); /* garbage */
                nnf_gemm_packed_zero_outside(got, nv, kv);
                for (size_t kk = 0; kk < kv; kk++)
                    for (size_t j = 0; j < nv; j++)
                        *nnf_gemm_packed_at(got, j, kk) = b[kk * n + j];
                CHECK_MSG(got->kc == want->kc && got->mn_pad == want->mn_pad &&
                              !memcmp(got->data, want->data, nnf_gemm_packed_bytes(want)),
                          "%s: B %zux%zu written in place differs from its packed copy", cfg->name,
                          k, n);
            }
            nnf_gemm_packed_destroy(want);
            nnf_gemm_packed_destroy(got);
            free(b);
        }
    /* B at an address not aligned for floats (a weight left in the model
     * file) packs to the same bytes, stored K x N (read byte-wise) and N x K
     * (through the packer's aligned copy), with a row stride past its width */
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (int tb = 0; tb < 2; tb++) {
                size_t n = ns[ni], k = ks[ki], ldb = (tb ? k : n) + 2, rows = tb ? n : k;
                size_t bytes = rows * ldb * sizeof(float);
                float *b = check_rand_buf(rows * ldb);
                unsigned char *shifted = malloc(bytes + 3);
                nnf_gemm_packed *want = NULL;
                CHECK(nnf_gemm_pack_b(cfg, k, n, b, ldb, tb, &want) == NNF_OK);
                for (size_t off = 1; want && off < 4; off++) {
                    memcpy(shifted + off, b, bytes);
                    nnf_gemm_packed *got = NULL;
                    CHECK(nnf_gemm_pack_b(cfg, k, n, shifted + off, ldb, tb, &got) == NNF_OK);
                    CHECK_MSG(got && !memcmp(got->data, want->data, nnf_gemm_packed_bytes(want)),
                              "%s: B %zux%zu (trans %d) at byte offset %zu packs differently",
                              cfg->name, k, n, tb, off);
                    nnf_gemm_packed_destroy(got);
                }
                nnf_gemm_packed_destroy(want);
                free(shifted);
                free(b);
            }
}

/* ---- packed B shared between nodes (base/packs.h) ------------------------- */

typedef struct share_job {
    const nnf_gemm_cfg *cfg;
    nnf_packs *packs;
    int node;
    const float *w;
    size_t k, n;
    nnf_gemm_packed *out;
    nnf_status st;
} share_job;

/* One node's plan packing w, a constant input of it (value 7), under packs. */
static void *plan_share_job(void *arg) {
    share_job *j = arg;
    nnf_pack_source src = {.data = j->w, .value = 7};
    nnf_packs_enter(j->packs, j->node, &src, 1);
    j->st = nnf_gemm_pack_b(j->cfg, j->k, j->n, j->w, j->n, 0, &j->out);
    nnf_status left = nnf_packs_leave();
    j->st = j->st != NNF_OK ? j->st : left;
    return NULL;
}

/* Nodes whose plans pack the same weight the same way get one block: the
 * first node's, bit for bit what packing alone makes, *ready for the others;
 * the block outlives the store and each holder but the last. Another layout
 * of the same bytes, another value at the same address, or an address that
 * is no constant input of the node: a block of the node's own. Recording,
 * every node has its entry, the shared ones at the same data. Nodes planned
 * on several threads at once get one block. */
static void test_shared_pack_b(const nnf_gemm_cfg *cfg) {
    const size_t k = 37, n = cfg->nr + 5;
    float *w = check_rand_buf(k * n);
    nnf_gemm_packed *alone = NULL;
    CHECK(nnf_gemm_pack_b(cfg, k, n, w, n, 0, &alone) == NNF_OK);
    size_t bytes = nnf_gemm_packed_bytes(alone);
    for (int rec = 0; rec < 2; rec++) {
        nnf_packs *p = rec ? nnf_packs_recorder() : nnf_packs_sharer();
        CHECK(p != NULL);
        nnf_pack_source src = {.data = w, .value = 7}, other = {.data = w, .value = 8};
        nnf_gemm_packed *got[6] = {0};
        for (int node = 0; node < 6; node++) {
            /* 0, 1: the same packing; 2: N x K; 3: another value; 4: not an
             * input of the node; 5: the first again */
            nnf_packs_enter(p, node, node == 3 ? &other : &src, node == 4 ? 0 : 1);
            CHECK(nnf_gemm_pack_b(cfg, k, n, w, node == 2 ? k : n, node == 2, &got[node]) ==
                  NNF_OK);
            CHECK(nnf_packs_leave() == NNF_OK);
        }
        CHECK(got[0] && got[1] && got[2] && got[3] && got[4] && got[5]);
        if (!got[0] || !got[1] || !got[2] || !got[3] || !got[4] || !got[5])
            break;
        CHECK(!got[0]->ready && got[1]->ready && got[5]->ready);
        CHECK(got[1]->data == got[0]->data && got[5]->data == got[0]->data);
        for (int node = 2; node < 5; node++)
            CHECK_MSG(got[node]->data != got[0]->data && !got[node]->ready,
                      "%s: node %d shares a block it should not", cfg->name, node);
        CHECK(!memcmp(got[0]->data, alone->data, bytes));
        if (rec) {
            size_t ne;
            const nnf_pack_entry *e = nnf_packs_entries(p, &ne);
            CHECK(ne == 6);
            for (size_t i = 0; i < ne && ne == 6; i++)
                CHECK(e[i].node == i && e[i].seq == 0 && e[i].bytes == bytes &&
                      (e[i].data == got[0]->data) == (i == 0 || i == 1 || i == 5));
        }
        nnf_packs_free(p); /* the holders keep the block */
        nnf_gemm_packed_destroy(got[0]);
        CHECK(!memcmp(got[1]->data, alone->data, bytes));
        nnf_gemm_packed_destroy(got[1]);
        CHECK(!memcmp(got[5]->data, alone->data, bytes));
        for (int node = 2; node < 6; node++)
            nnf_gemm_packed_destroy(got[node]);
    }
    /* four nodes planned at once, on four threads */
    for (int round = 0; round < 4; round++) {
        nnf_packs *p = nnf_packs_sharer();
        share_job jobs[4];
        pthread_t th[4];
        for (int t = 0; t < 4; t++) {
            jobs[t] = (share_job){.cfg = cfg, .packs = p, .node = t, .w = w, .k = k, .n = n};
            CHECK(pthread_create(&th[t], NULL, plan_share_job, &jobs[t]) == 0);
        }
        int made = 0;
        for (int t = 0; t < 4; t++) {
            CHECK(pthread_join(th[t], NULL) == 0);
            CHECK(jobs[t].st == NNF_OK && jobs[t].out);
        }
        for (int t = 0; t < 4 && jobs[0].out && jobs[t].out; t++) {
            made += !jobs[t].out->ready;
            CHECK(jobs[t].out->data == jobs[0].out->data &&
                  !memcmp(jobs[t].out->data, alone->data, bytes));
        }
        CHECK_MSG(made == 1, "%s: %d nodes made the shared block", cfg->name, made);
        nnf_packs_free(p);
        for (int t = 0; t < 4; t++)
            nnf_gemm_packed_destroy(jobs[t].out);
    }
    nnf_gemm_packed_destroy(alone);
    free(w);
}

/* ---- soak: random cases, off unless NNF_TEST_SOAK is set ------------------ */

static int is_prime(size_t v) {
    if (v < 2)
        return 0;
    for (size_t d = 2; d * d <= v; d++)
        if (v % d == 0)
            return 0;
    return 1;
}

/* A dimension of about max at most: small (1..24), a prime, a multiple of a
 * register tile (6, 8, 14, 16, 32: the tiers' mr and nr) or of a cache block
 * of the tiers (`blocks`: kc for K, nc for N) off by -1, 0 or +1, or any. */
static size_t soak_dim(size_t max, const size_t *blocks, size_t nblocks) {
    static const size_t tiles[] = {6, 8, 14, 16, 32};
    double u = check_unit();
    size_t v;
    if (u < 0.3) {
        v = 1 + (size_t)(check_unit() * 24);
    } else if (u < 0.45) {
        for (v = 2 + (size_t)(check_unit() * (double)(max - 1)); !is_prime(v); v--)
            ;
    } else if (u < 0.85) {
        size_t nb = 5 + nblocks, i = (size_t)(check_unit() * (double)nb) % nb;
        size_t base = i < 5 ? tiles[i] : blocks[i - 5];
        size_t mult = 1 + (size_t)(check_unit() * (double)(max / base));
        v = base * mult + (size_t)(check_unit() * 3) - 1;
    } else {
        v = 1 + (size_t)(check_unit() * (double)max);
    }
    return v ? v : 1;
}

/* Floats past the end of C that no run may touch. */
#define SOAK_SENTINEL 16

/* One random case on every tier: the 1-thread result against the oracle
 * (computed once for all tiers: it is most of the cost), nothing written
 * outside C's m x n (row padding, a sentinel past its end), the 2- and
 * 3-thread results equal to it bit for bit; a batch against its lone GEMMs
 * bit for bit on 1, 2 and 3 threads, its first GEMM against the oracle.
 * Returns 0 when the draw is over the oracle's budget (drawn again). */
static int soak_case(long idx, const char *seed, nnf_threadpool *const pools[3]) {
    nnf_isa max_isa = nnf_cpu_get()->max_isa;
    size_t kcs[3], ncs[3], mcs[3], ntiers = 0;
    for (int t = NNF_ISA_SCALAR; t <= (int)max_isa; t++, ntiers++) {
        const nnf_gemm_cfg *cfg = nnf_gemm_cfg_for((nnf_isa)t);
        kcs[ntiers] = cfg->kc;
        ncs[ntiers] = cfg->nc;
        mcs[ntiers] = cfg->mc;
    }
    gcase g = {0};
    size_t cnt = 0; /* GEMMs in a batch; 0: one nnf_gemm_run */
    double u = check_unit();
    g.n = soak_dim(300, ncs, ntiers);
    if (u < 0.1) {
        g.m = 1; /* the GEMV path when B is prepacked and A is not */
        if (check_unit() < 0.5)
            g.n = soak_dim(2000, ncs, ntiers);
    } else if (u < 0.14) { /* a second M block (tail_split per block) */
        size_t mc = mcs[(size_t)(check_unit() * (double)ntiers) % ntiers]; /* a draw a statement */
        g.m = mc + (size_t)(check_unit() * 15) - 7;
    } else if (u < 0.19) { /* tall: the threads' tiles cut M, B is packed once for them */
        g.m = soak_dim(2100, mcs, ntiers);
        g.n = soak_dim(64, NULL, 0);
    } else if (u < 0.24) { /* wide: they cut N, A is packed once; B's rows are prefetched */
        g.m = soak_dim(48, NULL, 0);
        g.n = soak_dim(2000, ncs, ntiers);
    } else {
        g.m = soak_dim(300, NULL, 0);
    }
    g.k = check_unit() < 0.01 ? 0 : soak_dim(1200, kcs, ntiers); /* up to 3 K blocks */
    if (check_unit() < 0.12)
        cnt = 2 + (size_t)(check_unit() * 5);
    /* the double oracle's work (and the scalar tier's), bounded */
    if ((double)g.m * (double)g.n * (double)(g.k ? g.k : 1) * (double)(cnt ? cnt : 1) > 4e7)
        return 0;
    size_t m = g.m, n = g.n, k = g.k;
    if (!cnt) { /* a batch's operands are tight and plain (batch_at) */
        g.ta = check_unit() < 0.3;
        g.tb = check_unit() < 0.4;
    }
    size_t ar = g.ta ? k : m, ac = g.ta ? m : k, br = g.tb ? n : k, bc = g.tb ? k : n;
    if (!cnt) {
        if (check_unit() < 0.25)
            g.lda = ac + 1 + (size_t)(check_unit() * 40);
        if (check_unit() < 0.25)
            g.ldb = bc + 1 + (size_t)(check_unit() * 40);
        if (check_unit() < 0.25)
            g.ldc = n + 1 + (size_t)(check_unit() * 40);
        g.pack_a = check_unit() < 0.25;
    }
    g.pack_b = check_unit() < (m == 1 ? 0.7 : 0.35);
    size_t lda = g.lda ? g.lda : ac, ldb = g.ldb ? g.ldb : bc, ldc = g.ldc ? g.ldc : n;

    /* the epilogue: the clamp-only ones (alpha 1, a residual before the
     * activation at scale 1, none/ReLU/Clip) finish in the AVX2 tile's
     * registers, the rest through the C epilogue: both often */
    size_t mn = m > n ? m : n;
    float *bias = check_rand_buf(mn);
    int inplace = 0;
    g.use_ep = check_unit() < 0.85;
    g.ep = nnf_epilogue_default();
    if (check_unit() < 0.25)
        g.ep.alpha = 3.0f * (float)check_unit() - 1.5f;
    g.ep.act = k_acts[check_unit() < 0.4 ? (size_t)(check_unit() * 3) % 3
                                         : (size_t)(check_unit() * N_ACTS) % N_ACTS];
    g.ep.bias_kind = (nnf_bias_kind)((size_t)(check_unit() * 3) % 3);
    g.ep.bias = g.ep.bias_kind != NNF_BIAS_NONE ? bias : NULL;
    size_t res_floats = 0;
    if (check_unit() < 0.5) {
        g.ep.residual_after_act = check_unit() < 0.35;
        if (check_unit() < 0.3)
            g.ep.residual_scale = 0.25f + (float)check_unit();
        g.ep.ld_residual = n;
        if (cnt) {
            res_floats = cnt * m * n;
        } else if (check_unit() < 0.2) {
            inplace = 1; /* residual = C itself (an in-place Add) */
            g.ep.ld_residual = ldc;
        } else {
            if (check_unit() < 0.3)
                g.ep.ld_residual += 1 + (size_t)(check_unit() * 20);
            res_floats = m * g.ep.ld_residual;
        }
    }
    int with_res = res_floats || inplace;

    float *a = check_rand_buf((cnt ? cnt : 1) * ar * lda);
    float *b = check_rand_buf((cnt ? 3 : 1) * br * ldb); /* a batch: B shared by every third */
    float *res = res_floats ? check_rand_buf(res_floats) : NULL;
    size_t csize = (cnt ? cnt * m * n : m * ldc) + SOAK_SENTINEL;
    float *c0 = check_rand_buf(csize), *c = malloc(csize * sizeof(float)),
          *c1 = malloc(csize * sizeof(float));
    /* the oracle, once: C's initial contents as the residual when in place */
    double *want = malloc((m * n + 1) * sizeof(double)),
           *tol = malloc((m * n + 1) * sizeof(double));
    g.ep.residual = inplace ? c0 : res;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            want[i * n + j] = oracle_at(&g, a, lda, b, ldb, i, j, &tol[i * n + j]);
    g.ep.residual = inplace ? c : res;
    const nnf_epilogue *ep = g.use_ep ? &g.ep : NULL;

    char what[320];
    snprintf(what, sizeof what,
             "soak case %ld of seed %s: m=%zu n=%zu k=%zu ta=%d tb=%d lda=%zu ldb=%zu ldc=%zu "
             "pack_a=%d pack_b=%d batch=%zu ep=%d alpha=%g bias=%d act=%d res=%d after=%d "
             "scale=%g ld_res=%zu in_place=%d",
             idx, seed, m, n, k, g.ta, g.tb, lda, ldb, ldc, g.pack_a, g.pack_b, cnt, g.use_ep,
             (double)g.ep.alpha, (int)g.ep.bias_kind, (int)g.ep.act.kind, with_res,
             g.ep.residual_after_act, (double)g.ep.residual_scale, g.ep.ld_residual, inplace);

    for (int t = NNF_ISA_SCALAR; t <= (int)max_isa; t++) {
        CHECK(nnf_cpu_force_isa((nnf_isa)t) == (nnf_isa)t);
        const nnf_gemm_cfg *cfg = nnf_gemm_cfg_for(nnf_cpu_isa());
        nnf_gemm_packed *pa = NULL, *pb = NULL;
        if (g.pack_a)
            CHECK(nnf_gemm_pack_a(cfg, m, k, a, lda, g.ta, &pa) == NNF_OK);
        if (g.pack_b)
            CHECK(nnf_gemm_pack_b(cfg, k, n, b, ldb, g.tb, &pb) == NNF_OK);
        nnf_gemm_src sa = pa ? nnf_gemm_src_packed(pa) : nnf_gemm_src_matrix(a, lda, g.ta);
        nnf_gemm_src sb = pb ? nnf_gemm_src_packed(pb) : nnf_gemm_src_matrix(b, ldb, g.tb);
        /* at() supplies the residual whatever the epilogue: none without one */
        bctx bt = {.a = a, .b = b, .r = ep ? res : NULL, .c = c, .pb = pb, .m = m, .n = n, .k = k};
        /* the reference bits: one nnf_gemm_run per GEMM, on 1 thread */
        memcpy(c1, c0, csize * sizeof(float));
        if (cnt) {
            bt.c = c1;
            for (size_t i = 0; i < cnt; i++) {
                nnf_gemm_src bsa, bsb;
                float *bc1;
                const float *br1;
                batch_at(&bt, i, &bsa, &bsb, &bc1, &br1);
                nnf_epilogue e = ep ? *ep : nnf_epilogue_default();
                e.residual = br1;
                CHECK(nnf_gemm_run(cfg, m, n, k, &bsa, &bsb, bc1, n, &e, NULL) == NNF_OK);
            }
            bt.c = c;
        } else {
            nnf_epilogue e = g.ep;
            if (inplace)
                e.residual = c1;
            CHECK(nnf_gemm_run(cfg, m, n, k, &sa, &sb, c1, ldc, g.use_ep ? &e : NULL, NULL) ==
                  NNF_OK);
        }
        int bad = 0;
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                double got = c1[i * ldc + j], y = want[i * n + j];
                if (!(fabs(got - y) <= tol[i * n + j]) && bad++ < 3)
                    fprintf(stderr, "%s: %s C(%zu,%zu) = %.9g, want %.9g (tol %.3g)\n", what,
                            cfg->name, i, j, got, y, tol[i * n + j]);
            }
        CHECK_MSG(!bad, "%s: %s, %d values beyond the tolerance", what, cfg->name, bad);
        size_t outside = 0;
        for (size_t ci = 0; ci < csize; ci++)
            if ((ci >= (cnt ? cnt * m * n : m * ldc) || (!cnt && ci % ldc >= n)) &&
                memcmp(&c1[ci], &c0[ci], sizeof(float)))
                outside++;
        CHECK_MSG(!outside, "%s: %s wrote %zu floats outside C", what, cfg->name, outside);
        /* a value does not depend on which tile computed it (nor on which
         * of the threads' tiles it fell in): C's bottom-right block from
         * (i0, j0) computed alone, through operands offset to it, has the
         * same bits (prepacked operands cannot be offset; M = 1 against a
         * packed B is the GEMV path, which sums in another order) */
        if (!cnt && !pa && !pb && !inplace) {
            size_t i0 = (size_t)(check_unit() * (double)m), j0 = (size_t)(check_unit() * (double)n);
            size_t ms = m - i0, ns = n - j0;
            nnf_gemm_src ssa = nnf_gemm_src_matrix(a + (g.ta ? i0 : i0 * lda), lda, g.ta);
            nnf_gemm_src ssb = nnf_gemm_src_matrix(b + (g.tb ? j0 * ldb : j0), ldb, g.tb);
            nnf_epilogue es = g.ep;
            es.bias = es.bias_kind == NNF_BIAS_PER_ROW   ? bias + i0
                      : es.bias_kind == NNF_BIAS_PER_COL ? bias + j0
                                                         : NULL;
            es.residual = res ? res + i0 * g.ep.ld_residual + j0 : NULL;
            memcpy(c, c0, csize * sizeof(float));
            CHECK(nnf_gemm_run(cfg, ms, ns, k, &ssa, &ssb, c + i0 * ldc + j0, ldc,
                               g.use_ep ? &es : NULL, NULL) == NNF_OK);
            size_t diff = 0;
            for (size_t i = i0; i < m; i++)
                diff += memcmp(c + i * ldc + j0, c1 + i * ldc + j0, ns * sizeof(float)) != 0;
            CHECK_MSG(!diff, "%s: %s, the block from (%zu,%zu) alone: %zu rows differ", what,
                      cfg->name, i0, j0, diff);
        }
        for (int p = 0; p < 3; p++) {
            if (!cnt && p == 0)
                continue; /* that was the reference */
            memcpy(c, c0, csize * sizeof(float));
            if (cnt)
                CHECK(nnf_gemm_run_batch(cfg, cnt, m, n, k, batch_at, &bt, n, ep, pools[p]) ==
                      NNF_OK);
            else
                CHECK(nnf_gemm_run(cfg, m, n, k, &sa, &sb, c, ldc, ep, pools[p]) == NNF_OK);
            size_t diff = 0, first = 0;
            for (size_t ci = csize; ci-- > 0;)
                if (memcmp(&c[ci], &c1[ci], sizeof(float)))
                    diff++, first = ci;
            CHECK_MSG(!diff,
                      "%s: %s, %s on %d threads: %zu floats differ from 1 thread's, first at "
                      "%zu: %a vs %a",
                      what, cfg->name, cnt ? "batch" : "GEMM", p + 1, diff, first, (double)c[first],
                      (double)c1[first]);
        }
        nnf_gemm_packed_destroy(pa);
        nnf_gemm_packed_destroy(pb);
    }
    free(bias);
    free(a);
    free(b);
    free(res);
    free(c0);
    free(c);
    free(c1);
    free(want);
    free(tol);
    return 1;
}

/* NNF_TEST_SOAK=N runs N random cases from NNF_TEST_SEED (default 1) on a
 * wider grid than the fixed tests: M, N to ~300 (M = 1, and M past the
 * tiers' mc, sometimes), K to ~1200 (up to three K blocks), small sizes,
 * primes and tile/block multiples +-1, strides, transposes, prepacked
 * operands, every epilogue (in place too), batches; every tier on 1, 2 and
 * 3 threads. Off by default (CI runs the fixed cases); for long runs after
 * a kernel change:
 *   NNF_TEST_SOAK=2000 NNF_TEST_SEED=7 build/test_gemm */
static void soak(void) {
    long count = check_soak_begin();
    if (count <= 0)
        return;
    nnf_threadpool *pools[3] = {NULL, NULL, NULL};
    CHECK(nnf_threadpool_create(2, &pools[1]) == NNF_OK &&
          nnf_threadpool_create(3, &pools[2]) == NNF_OK);
    long ran = 0;
    while (ran < count)
        ran += soak_case(ran, check_soak_seed(), pools);
    nnf_threadpool_destroy(pools[1]);
    nnf_threadpool_destroy(pools[2]);
    check_soak_end(ran, "random cases");
}

static int g_thread_gemm_ok;

static void *gemm_on_a_thread(void *arg) {
    (void)arg;
    size_t m = 37, n = 41, k = 300;
    float *a = check_rand_buf(m * k), *b = check_rand_buf(k * n), *c = malloc(m * n * sizeof(float));
    g_thread_gemm_ok = nnf_sgemm(0, 0, m, n, k, a, k, b, n, c, n, NULL, NULL) == NNF_OK;
    free(a);
    free(b);
    free(c);
    return NULL;
}

/* The AMX GEMM at its edges, against the oracle: M at and past the
 * threshold (16-row tiles and 256-row blocks with tails), N of 16-column
 * tiles paired (a lone last one), past a 512-column chunk, K of 32-deep
 * steps and 128-deep blocks inside the packed kc, B strided or packed,
 * every epilogue (bias per row or column, a residual before or after the
 * activation, in place over C), and the same bits on 1, 2 and 3 threads. */
static void test_amx_sizes(const nnf_gemm_cfg *cfg) {
    size_t m0 = NNF_GEMM_AMX_MIN_M;
    size_t ms[] = {m0, m0 + 1, m0 + 15, m0 + 17, 2 * m0 + 3};
    size_t ns[] = {16, 17, 31, 32, 33, 100, 529};
    size_t ks[] = {16, 17, 31, 32, 33, 61, 128, 129, cfg->kc + 5, 2 * cfg->kc + 3};
    int fails = 0, cases = 0;
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        for (size_t jn = 0; jn < sizeof ns / sizeof ns[0]; jn++)
            for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++) {
                size_t v = i + jn + q;
                if (v % 4 && (ms[i] > m0 + 17 || ns[jn] > 100 || ks[q] > 200))
                    continue; /* keep the run short */
                gcase g = {.m = ms[i], .n = ns[jn], .k = ks[q], .pack_b = (int)(v & 1)};
                if (v % 3 == 0)
                    g.lda = ks[q] + 3, g.ldb = ns[jn] + 1, g.ldc = ns[jn] + 2;
                fails += run_case(cfg, &g, NULL, "amx sizes") != 0;
                cases++;
            }
    CHECK_MSG(fails == 0, "%s: %d of %d AMX size cases failed", cfg->name, fails, cases);

    size_t m = m0 + 45, n = 75, k = cfg->kc + 37;
    float *bias = check_rand_buf(m > n ? m : n), *res = check_rand_buf(m * n);
    fails = 0;
    for (size_t ai = 0; ai < N_ACTS; ai++)
        for (int form = 0; form < 4; form++) {
            gcase g = {.m = m, .n = n, .k = k, .use_ep = 1, .pack_b = form & 1};
            g.ep = nnf_epilogue_default();
            g.ep.act = k_acts[ai];
            g.ep.alpha = form == 3 ? 0.5f : 1.0f;
            g.ep.bias_kind = form & 1 ? NNF_BIAS_PER_COL : NNF_BIAS_PER_ROW;
            g.ep.bias = bias;
            if (form >= 2) {
                g.ep.residual = res;
                g.ep.ld_residual = n;
                g.ep.residual_after_act = form == 3;
            }
            fails += run_case(cfg, &g, NULL, "amx epilogue") != 0;
        }
    CHECK_MSG(fails == 0, "%s: %d AMX epilogue cases failed", cfg->name, fails);

    /* in place: the residual is C (one K block), and the same bits on 1-3 threads */
    float *a = check_rand_buf(m * k), *b = check_rand_buf(k * n);
    float *c1 = malloc(m * n * sizeof(float)), *c2 = malloc(m * n * sizeof(float));
    nnf_gemm_src sa = nnf_gemm_src_matrix(a, k, 0), sb = nnf_gemm_src_matrix(b, n, 0);
    nnf_epilogue ep = nnf_epilogue_default();
    ep.act = k_acts[9];
    ep.bias_kind = NNF_BIAS_PER_COL;
    ep.bias = bias;
    CHECK(nnf_gemm_run(cfg, m, n, k, &sa, &sb, c1, n, &ep, NULL) == NNF_OK);
    for (int t = 2; t <= 3; t++) {
        nnf_threadpool *pool = NULL;
        CHECK(nnf_threadpool_create(t, &pool) == NNF_OK);
        CHECK(nnf_gemm_run(cfg, m, n, k, &sa, &sb, c2, n, &ep, pool) == NNF_OK);
        CHECK_MSG(!memcmp(c1, c2, m * n * sizeof(float)), "%s: AMX on %d threads differs",
                  cfg->name, t);
        nnf_threadpool_destroy(pool);
    }
    size_t k1 = 200; /* one K block */
    memcpy(c1, res, m * n * sizeof(float));
    memcpy(c2, res, m * n * sizeof(float));
    nnf_epilogue ip = nnf_epilogue_default();
    ip.residual = c1;
    ip.ld_residual = n;
    sa = nnf_gemm_src_matrix(a, k1, 0);
    CHECK(nnf_gemm_run(cfg, m, n, k1, &sa, &sb, c1, n, &ip, NULL) == NNF_OK);
    int bad = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double ref = c2[i * n + j], mag = fabs(ref);
            for (size_t q = 0; q < k1; q++) {
                ref += (double)a[i * k1 + q] * b[q * n + j];
                mag += fabs((double)a[i * k1 + q] * b[q * n + j]);
            }
            bad += !(fabs(c1[i * n + j] - ref) <= (double)k1 * ldexp(1.0, -22) * mag);
        }
    CHECK_MSG(bad == 0, "%s: AMX with the residual in place: %d values off", cfg->name, bad);
    free(a);
    free(b);
    free(c1);
    free(c2);
    free(bias);
    free(res);
}

/* c1 = A B on cfg as it is (AMX on, pool), c2 = the same on the FMA tiles
 * (one thread); whether their bits are the same. */
static bool same_as_fma(const nnf_gemm_cfg *cfg, size_t m, size_t n, size_t k,
                        const nnf_gemm_src *a, const nnf_gemm_src *b, float *c1, float *c2,
                        nnf_threadpool *pool) {
    CHECK(nnf_gemm_run(cfg, m, n, k, a, b, c1, n, NULL, pool) == NNF_OK);
    nnf_cpu_force_amx(false);
    CHECK(nnf_gemm_run(cfg, m, n, k, a, b, c2, n, NULL, NULL) == NNF_OK);
    nnf_cpu_force_amx(true);
    return !memcmp(c1, c2, m * n * sizeof(float));
}

/* The AMX GEMM (on): it is taken (its bits differ from the FMA tiles'),
 * its error is an f32 GEMM's (the largest error relative to sum |a b| over
 * a 99 x 80 x 1024 product at most twice the FMA tiles', both against
 * double precision), and values it cannot split (NaN, Inf, a nonzero under
 * 2^-100) send the GEMM to the FMA tiles: NaN and Inf propagate, and a
 * tiny value gives the FMA tiles' bits, for A and for a packed B (whose
 * check is kept). */
static void test_amx(const nnf_gemm_cfg *cfg) {
    size_t m = NNF_GEMM_AMX_MIN_M + 3, n = 80, k = 1024;
    float *a = check_rand_buf(m * k), *b = check_rand_buf(k * n);
    float *c1 = malloc(m * n * sizeof(float)), *c2 = malloc(m * n * sizeof(float));
    nnf_gemm_src sa = nnf_gemm_src_matrix(a, k, 0), sb = nnf_gemm_src_matrix(b, n, 0);
    same_as_fma(cfg, m, n, k, &sa, &sb, c1, c2, NULL);
    double e_amx = 0, e_fma = 0;
    int differ = 0;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double ref = 0, mag = 0;
            for (size_t q = 0; q < k; q++) {
                ref += (double)a[i * k + q] * b[q * n + j];
                mag += fabs((double)a[i * k + q] * b[q * n + j]);
            }
            double x = fabs(c1[i * n + j] - ref) / mag, y = fabs(c2[i * n + j] - ref) / mag;
            e_amx = x > e_amx ? x : e_amx;
            e_fma = y > e_fma ? y : e_fma;
            differ += c1[i * n + j] != c2[i * n + j];
        }
    printf("AMX: %d of %zu values differ from the FMA tiles; largest error / sum|ab| %.3g (FMA "
           "%.3g)\n",
           differ, m * n, e_amx, e_fma);
    CHECK_MSG(differ > 0, "%s: the AMX GEMM was not taken", cfg->name);
    CHECK_MSG(e_amx <= 2 * e_fma, "%s: AMX error %.3g against the FMA tiles' %.3g", cfg->name,
              e_amx, e_fma);

    /* unsplittable values: a tiny one in A, then in a packed B */
    size_t q = NNF_GEMM_AMX_MIN_M;
    free(c1);
    free(c2);
    c1 = malloc(q * q * sizeof(float));
    c2 = malloc(q * q * sizeof(float));
    for (int side = 0; side < 2; side++) {
        float *x = check_rand_buf(q * q), *w = check_rand_buf(q * q);
        (side ? w : x)[5 * q + 7] = 1e-35f;
        nnf_gemm_packed *pw = NULL;
        CHECK(nnf_gemm_pack_b(cfg, q, q, w, q, 0, &pw) == NNF_OK);
        nnf_gemm_src sx = nnf_gemm_src_matrix(x, q, 0), spw = nnf_gemm_src_packed(pw);
        for (int rep = 0; rep < 2; rep++)
            CHECK_MSG(same_as_fma(cfg, q, q, q, &sx, &spw, c1, c2, NULL),
                      "%s: a value under 2^-100 in %s did not send the GEMM to the FMA tiles",
                      cfg->name, side ? "B" : "A");
        CHECK(atomic_load(&pw->amx_values) == (side ? 2 : 0)); /* A is checked first */
        /* NaN in A row 3, Inf in B column 17: row 3 NaN, column 17 +-Inf */
        x[5 * q + 7] = w[5 * q + 7] = 0.5f;
        x[3 * q + 4] = NAN;
        w[2 * q + 17] = INFINITY;
        nnf_gemm_src sw = nnf_gemm_src_matrix(w, q, 0);
        CHECK(nnf_gemm_run(cfg, q, q, q, &sx, &sw, c1, q, NULL, NULL) == NNF_OK);
        int ok = 1;
        for (size_t i = 0; i < q; i++)
            for (size_t j = 0; j < q; j++)
                ok &= i == 3    ? isnan(c1[i * q + j]) != 0
                      : j == 17 ? isinf(c1[i * q + j]) && (c1[i * q + j] > 0) == (x[i * q + 2] > 0)
                                : isfinite(c1[i * q + j]) != 0;
        CHECK_MSG(ok, "%s: NaN / Inf through the AMX GEMM's check", cfg->name);
        nnf_gemm_packed_destroy(pw);
        free(x);
        free(w);
    }
    free(a);
    free(b);
    free(c1);
    free(c2);
}

/* With AMX on, the tier's FMA configuration (callers that cut M
 * themselves) gives the FMA tiles' bits at any M. */
static void test_fma_cfg_no_amx(const nnf_gemm_cfg *cfg) {
    size_t m = NNF_GEMM_AMX_MIN_M + 5, n = 40, k = 70;
    float *a = check_rand_buf(m * k), *b = check_rand_buf(k * n);
    float *c1 = malloc(m * n * sizeof(float)), *c2 = malloc(m * n * sizeof(float));
    nnf_gemm_src sa = nnf_gemm_src_matrix(a, k, 0), sb = nnf_gemm_src_matrix(b, n, 0);
    CHECK(nnf_gemm_run(cfg, m, n, k, &sa, &sb, c1, n, NULL, NULL) == NNF_OK);
    for (size_t i = 0; i < m; i++) /* row by row, as a caller cutting M would */
        CHECK(nnf_gemm_run(cfg, 1, n, k, &(nnf_gemm_src){.data = a + i * k, .ld = k}, &sb,
                           c2 + i * n, n, NULL, NULL) == NNF_OK);
    CHECK_MSG(!memcmp(c1, c2, m * n * sizeof(float)),
              "%s: with AMX on, the FMA configuration's rows depend on M", cfg->name);
    free(a);
    free(b);
    free(c1);
    free(c2);
}

/* Products under NNF_GEMM_AMX_MIN_WORK stay on the FMA tiles (their bits),
 * those at it take AMX, whatever the thread count. */
static void test_amx_work(const nnf_gemm_cfg *cfg) {
    size_t m = NNF_GEMM_AMX_MIN_M, n = 64, k = (NNF_GEMM_AMX_MIN_WORK + m * n - 1) / (m * n);
    float *a = check_rand_buf(m * (k + 1)), *b = check_rand_buf((k + 1) * n);
    float *c1 = malloc(m * n * sizeof(float)), *c2 = malloc(m * n * sizeof(float));
    nnf_threadpool *p2 = NULL;
    CHECK(nnf_threadpool_create(2, &p2) == NNF_OK);
    for (size_t kk = k - 1; kk <= k; kk++) {
        nnf_gemm_src sa = nnf_gemm_src_matrix(a, kk, 0), sb = nnf_gemm_src_matrix(b, n, 0);
        bool same = same_as_fma(cfg, m, n, kk, &sa, &sb, c1, c2, p2);
        CHECK_MSG(same == (kk * m * n < NNF_GEMM_AMX_MIN_WORK),
                  "%s: %zu x %zu x %zu %s the AMX GEMM", cfg->name, m, n, kk,
                  same ? "did not take" : "took");
    }
    nnf_threadpool_destroy(p2);
    free(a);
    free(b);
    free(c1);
    free(c2);
}

/* A packed B larger than the last-level cache (a language model's head)
 * takes the fewest K blocks whose A micropanel fits L1 (gemm.c kc_for_b):
 * here one block of K = kc + 88, where every other B gets two. The products
 * are still the oracle's, B read as stored and transposed, on the pool too. */
static void test_b_past_llc(const nnf_gemm_cfg *cfg) {
    const nnf_cpu *cpu = nnf_cpu_get();
    size_t k = cfg->kc + 88, most = cpu->l1d / (cfg->mr * sizeof(float)) & ~(size_t)7;
    size_t n = cpu->l3 / sizeof(float) / k + 17;
    float *b = check_rand_buf(k * n);
    nnf_gemm_packed *pb = NULL, *small = NULL;
    CHECK(nnf_gemm_pack_b(cfg, k, n, b, n, 0, &pb) == NNF_OK);
    CHECK(nnf_gemm_pack_b(cfg, k, 64, b, n, 0, &small) == NNF_OK);
    CHECK_MSG(cfg->amx || k > most ? pb->kc == small->kc : pb->kc == k && small->kc < k,
              "%s: K blocks of %zu (B past the LLC) and %zu", cfg->name, pb->kc, small->kc);
    nnf_gemm_packed_destroy(pb);
    nnf_gemm_packed_destroy(small);
    free(b);
    nnf_threadpool *pool = NULL;
    CHECK(nnf_threadpool_create(2, &pool) == NNF_OK);
    for (int tb = 0; tb < 2; tb++) {
        gcase g = {.m = cfg->mr + 1, .n = n, .k = k, .tb = tb, .pack_b = 1};
        CHECK(run_case(cfg, &g, NULL, "B past the LLC") == 0);
        CHECK(run_case(cfg, &g, pool, "B past the LLC, threaded") == 0);
    }
    nnf_threadpool_destroy(pool);
}

/* Every test of a tier's GEMM; with amx, the tests that compare the FMA
 * tiles' paths bit for bit (edge tiles, A read in place) are left out:
 * the AMX GEMM takes some of those shapes and not others. */
static void tier_tests(const nnf_gemm_cfg *cfg, nnf_isa isa, bool amx) {
    test_blocking_and_packing(cfg);
    test_sizes(cfg);
    test_conv1x1_shapes(cfg);
    if (!amx) {
        test_edge_tiles_bitwise(cfg);
        nnf_threadpool *p2 = NULL;
        CHECK(nnf_threadpool_create(2, &p2) == NNF_OK);
        test_direct_a_bitwise(cfg, p2);
        nnf_threadpool_destroy(p2);
    }
    test_layouts(cfg);
    test_epilogues(cfg);
    test_nan_inf(cfg);
    test_threads(cfg);
    test_real_shapes(cfg);
    test_gemv(cfg);
    test_batch(cfg);
    test_plans();
    test_shared_pack_b(cfg);
    test_b_past_llc(cfg);
    nnf_threadpool *pp = NULL;
    CHECK(nnf_threadpool_create(isa == NNF_ISA_SCALAR ? 3 : 2, &pp) == NNF_OK);
    g_plan_pool = pp;
    test_plans();
    g_plan_pool = NULL;
    nnf_threadpool_destroy(pp);
}

int main(void) {
    check_rng = 88172645463325252ull; /* the data this program was written with */
    const nnf_cpu *cpu = nnf_cpu_get();
    printf("cpu: %s (%s, family %#x), tier %s, L1d %zu KiB, L2 %zu KiB, L3 %zu "
           "KiB\n",
           cpu->brand, cpu->vendor, cpu->family, nnf_isa_name(cpu->max_isa), cpu->l1d >> 10,
           cpu->l2 >> 10, cpu->l3 >> 10);
    /* The default tier is the widest (on AMD Zen 4 too, where 512-bit
     * operations run as two halves); NNF_ISA, when set, overrides it. */
    CHECK(!cpu->zmm_halves || (cpu->family == 0x19 && cpu->max_isa == NNF_ISA_AVX512));
    if (!getenv("NNF_ISA"))
        CHECK(nnf_cpu_isa() == cpu->max_isa);
    for (int t = NNF_ISA_SCALAR; t <= (int)cpu->max_isa; t++) {
        nnf_isa isa = (nnf_isa)t;
        CHECK(nnf_cpu_force_isa(isa) == isa);
        const nnf_gemm_cfg *cfg = nnf_gemm_cfg_for(nnf_cpu_isa());
        CHECK(cfg->isa == isa);
        CHECK(cfg->mc % cfg->mr == 0 && cfg->nc % cfg->nr == 0 && cfg->kc >= 64);
        printf("tier %s: %s kc=%zu mc=%zu nc=%zu\n", nnf_isa_name(isa), cfg->name, cfg->kc, cfg->mc,
               cfg->nc);
        test_vmath(isa);
        /* the FMA tiles; then, on the AVX-512 tier, the AMX GEMM where the
         * CPU has it or the build emulates it */
        bool amx = cpu->amx;
        nnf_cpu_force_amx(false);
        tier_tests(cfg, isa, false);
        /* the FMA configuration never takes AMX */
        if (isa == NNF_ISA_AVX512 && nnf_cpu_force_amx(true) | nnf_cpu_get()->amx) {
            CHECK(!cfg->amx && nnf_gemm_cfg_whole(isa)->amx);
            test_fma_cfg_no_amx(cfg);
            cfg = nnf_gemm_cfg_whole(isa);
            printf("tier %s with AMX: %s\n", nnf_isa_name(isa), cfg->name);
            /* the work threshold lowered: the edges of small products too */
            size_t work = nnf_gemm_amx_force_min_work(0);
            tier_tests(cfg, isa, true);
            test_amx(cfg);
            test_amx_sizes(cfg);
            nnf_gemm_amx_force_min_work(work);
            test_amx_work(cfg);
        }
        nnf_cpu_force_amx(amx);
    }
    soak();
    /* a tier above the machine's is clamped */
    CHECK(nnf_cpu_force_isa(NNF_ISA_AVX512) == cpu->max_isa);
    nnf_isa parsed;
    CHECK(nnf_isa_parse("AVX2", &parsed) && parsed == NNF_ISA_AVX2);
    CHECK(!nnf_isa_parse("sse", &parsed));
    /* a thread that ran a GEMM and exits frees its scratch (the ASan
     * build's leak check would report it otherwise) */
    pthread_t th;
    CHECK(pthread_create(&th, NULL, gemm_on_a_thread, NULL) == 0 && pthread_join(th, NULL) == 0);
    CHECK(g_thread_gemm_ok);
    nnf_gemm_scratch_release();
    TEST_MAIN_END();
}

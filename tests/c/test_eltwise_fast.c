/* The optimised element-wise, softmax, reduction, transpose and concat
 * kernels against the reference kernels, through the op table (init, infer,
 * plan), on every ISA tier this machine has, at sizes 1, 2, primes, vector
 * widths +-1 and suite shapes, with NaN/Inf/-0/denormals mixed in.
 *
 * Tolerances (|fast - ref| <= abs + rel * |ref|):
 *   exact (0, 0)   every op on the scalar tier (the reference formulas), and
 *                  on all tiers the ops made of single IEEE operations:
 *                  Relu, LeakyRelu, Clip, HardSigmoid, HardSwish, Neg, Abs,
 *                  Sqrt, Reciprocal, Floor, Ceil, Round, Softsign, the binary
 *                  ops, Max/Min reductions, Transpose, Concat, Slice
 *   Pow 2 / 0.5    1 ulp (rel 1.2e-7): x*x and sqrt are correctly rounded,
 *                  libm's powf within an ulp; other integer exponents (up to
 *                  16 in size) the same: products in double rounded once
 *   Sigmoid        abs 2e-7     Tanh abs 4e-7     Erf abs 4e-7
 *   Exp            rel 3e-7 (abs 1e-37 for results in the denormal range)
 *   Gelu           abs 5e-7 * (1 + |x|)
 *   Softmax        abs 1e-7 + rel 1e-6; LogSoftmax abs 1e-6 * (1 + |y|)
 *   ReduceSum/Mean abs 1e-6 * sum|x| over the row (float blocks, double carry)
 *   Resize         exact (the reference's float operations; +0 and -0 equal)
 *
 * NNF_TEST_SOAK=N adds N random cases of every op above, on 1, 2 and 3
 * threads too (soak() below). */
#include "base/alloc.h"
#include "base/cpu.h"
#include "fast_op_harness.h"
#include "kernels/eltwise_fast.h"
#include "kernels/resize_fast.h"
#include "kernels/stream.h"
#include "ops/tensor_common.h"

#include "check.h"

#include <stdarg.h>

static nnf_threadpool *g_pool;
static const size_t sizes[] = {1, 2, 7, 13, 15, 16, 17, 31, 32, 33, 61, 127, 1000, 40000};
#define N_SIZES (sizeof sizes / sizeof sizes[0])

/* ---- unary --------------------------------------------------------------------- */

typedef struct un_case {
    const char *op;
    int opset;
    nnf_attr attrs[2];
    int n_attrs;
    double abs_tol, rel_tol, abs_per_x; /* on SIMD tiers; scalar tier is exact */
    float lo, hi;
} un_case;

/* The N_UN_CASES unary ops with their tolerances and input ranges (the
 * soak draws from them too). */
#define N_UN_CASES 19
static void unary_cases(un_case *out) {
    const un_case cases[N_UN_CASES] = {
        {"Relu", 14, {{0}}, 0, 0, 0, 0, -8, 8},
        {"LeakyRelu", 16, {f_float("alpha", 0.1f)}, 1, 0, 0, 0, -8, 8},
        {"Sigmoid", 13, {{0}}, 0, 2e-7, 0, 0, -30, 30},
        {"Tanh", 13, {{0}}, 0, 4e-7, 0, 0, -10, 10},
        {"Exp", 13, {{0}}, 0, 1e-37, 3e-7, 0, -100, 89},
        {"Erf", 13, {{0}}, 0, 4e-7, 0, 0, -5, 5},
        {"Gelu", 20, {{0}}, 0, 5e-7, 0, 5e-7, -8, 8},
        {"Gelu", 20, {f_str("approximate", "tanh")}, 1, 5e-7, 0, 5e-7, -8, 8},
        {"HardSigmoid", 6, {f_float("alpha", 0.2f), f_float("beta", 0.5f)}, 2, 0, 0, 0, -8, 8},
        {"HardSwish", 14, {{0}}, 0, 0, 0, 0, -8, 8},
        {"Sqrt", 13, {{0}}, 0, 0, 0, 0, -2, 50},
        {"Neg", 13, {{0}}, 0, 0, 0, 0, -8, 8},
        {"Abs", 13, {{0}}, 0, 0, 0, 0, -8, 8},
        {"Reciprocal", 13, {{0}}, 0, 0, 0, 0, -8, 8},
        {"Floor", 13, {{0}}, 0, 0, 0, 0, -8, 8},
        {"Ceil", 13, {{0}}, 0, 0, 0, 0, -8, 8},
        {"Round", 11, {{0}}, 0, 0, 0, 0, -8, 8},
        {"Softsign", 1, {{0}}, 0, 0, 0, 0, -8, 8},
        {"Clip", 6, {f_float("min", -1.0f), f_float("max", 2.5f)}, 2, 0, 0, 0, -8, 8},
    };
    memcpy(out, cases, sizeof cases);
}

static void test_unary(nnf_isa isa) {
    un_case cases[N_UN_CASES];
    unary_cases(cases);
    const char *t = nnf_isa_name(isa);
    for (size_t c = 0; c < N_UN_CASES; c++) {
        un_case *u = &cases[c];
        double worst = 0;
        for (size_t si = 0; si < N_SIZES; si++) {
            size_t n = sizes[si];
            int64_t d[1] = {(int64_t)n};
            float *x = f_rand_buf(n, u->lo, u->hi);
            f_specials(x, n, 5, n > 3 ? 3 : 0);
            /* round halves for Round, exact ties for Floor/Ceil */
            for (size_t i = 1; i < n; i += 11)
                x[i] = (float)((int)x[i]) + 0.5f;
            f_in in = f32_in(x, 1, d, 0);
            f_res r = f_run(u->op, u->opset, u->attrs, u->n_attrs, &in, 1, 1, NULL,
                            n > 1000 ? g_pool : NULL);
            CHECK_MSG(r.planned && strstr(r.name, t), "%s %s n=%zu: planned %d name %s", t, u->op,
                      n, r.planned, r.name);
            double e = isa == NNF_ISA_SCALAR || (u->abs_tol == 0 && u->rel_tol == 0)
                           ? (f_same_bytes(&r, 0) ? 0 : f_err(&r, 0, 0, 0, u->op))
                           : 0;
            if (isa != NNF_ISA_SCALAR && (u->abs_tol > 0 || u->rel_tol > 0)) {
                /* Gelu's bound grows with |x|: check element by element */
                const float *f = r.fast[0], *ref = r.ref[0];
                for (size_t i = 0; r.planned && i < n; i++) {
                    double tol = u->abs_tol + u->rel_tol * fabs(ref[i]) + u->abs_per_x * fabs(x[i]);
                    double q = isnan(ref[i])   ? (isnan(f[i]) ? 0 : INFINITY)
                               : isinf(ref[i]) ? (ref[i] == f[i] ? 0 : INFINITY)
                                               : fabs((double)f[i] - ref[i]) / tol;
                    if (q > 1)
                        fprintf(stderr, "  %s x=%.9g fast %.9g ref %.9g\n", u->op, x[i], f[i],
                                ref[i]);
                    if (q > e)
                        e = q;
                }
            }
            if (e > worst)
                worst = e;
            CHECK_MSG(e <= 1, "%s %s n=%zu: error %.3g of tolerance", t, u->op, n, e);
            f_free(&r);
            free(x);
        }
        printf("  %-6s %-12s worst %.3f of tolerance\n", t, u->op, worst);
    }
    /* Clip-13 with constant bound inputs (and an omitted one); a non-constant bound keeps ref */
    float lo = -0.5f, hi = 0.75f;
    int64_t d[2] = {3, 37};
    float *x = f_rand_buf(111, -2, 2);
    f_specials(x, 111, 7, 1);
    f_in in[3] = {f32_in(x, 2, d, 0), f32_in(&lo, 0, NULL, 1), f32_in(&hi, 0, NULL, 1)};
    f_res r = f_run("Clip", 13, NULL, 0, in, 3, 1, NULL, NULL);
    CHECK_MSG(f_same_bytes(&r, 0), "%s Clip-13 constant bounds", t);
    f_free(&r);
    in[1].absent = 1;
    r = f_run("Clip", 13, NULL, 0, in, 3, 1, NULL, NULL);
    CHECK_MSG(f_same_bytes(&r, 0), "%s Clip-13 max only", t);
    f_free(&r);
    in[1].absent = 0;
    in[2].constant = 0;
    r = f_run("Clip", 13, NULL, 0, in, 3, 1, NULL, NULL);
    CHECK(r.status == NNF_OK && !r.planned);
    f_free(&r);
    /* lo > hi: every value becomes hi */
    lo = 3.0f;
    in[2].constant = 1;
    r = f_run("Clip", 13, NULL, 0, in, 3, 1, NULL, NULL);
    CHECK_MSG(f_same_bytes(&r, 0), "%s Clip-13 lo > hi", t);
    f_free(&r);
    /* int32 Relu and Selu stay on the reference */
    int32_t xi[5] = {-3, 4, 0, -1, 9};
    int64_t d5[1] = {5};
    f_in ii = {.dtype = NNF_DTYPE_INT32, .rank = 1, .dims = {5}, .data = xi};
    r = f_run("Relu", 14, NULL, 0, &ii, 1, 1, NULL, NULL);
    CHECK(r.status == NNF_OK && !r.planned);
    f_free(&r);
    f_in fi = f32_in(x, 1, d5, 0);
    r = f_run("Selu", 6, NULL, 0, &fi, 1, 1, NULL, NULL);
    CHECK(r.status == NNF_OK && !r.planned);
    f_free(&r);
    free(x);
}

/* ---- binary -------------------------------------------------------------------- */

typedef struct shape_pair {
    int ra;
    int64_t a[4];
    int rb;
    int64_t b[4];
    const char *kind; /* expected plan kind; NULL = not planned */
} shape_pair;

static void test_binary(nnf_isa isa) {
    const char *ops[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "PRelu"};
    shape_pair pairs[] = {
        {1, {1}, 1, {1}, "same"},
        {1, {2}, 1, {2}, "same"},
        {1, {7}, 1, {7}, "same"},
        {1, {17}, 1, {17}, "same"},
        {1, {127}, 1, {127}, "same"},
        {4, {2, 3, 5, 7}, 4, {2, 3, 5, 7}, "same"},
        {1, {100003}, 1, {100003}, "same"},
        {1, {33}, 0, {0}, "scalar"},
        {2, {13, 61}, 1, {1}, "scalar"},
        {0, {0}, 1, {31}, "scalar"},
        {4, {1, 3, 7, 7}, 3, {3, 1, 1}, "bcast_channel"},
        {4, {2, 13, 5, 9}, 4, {1, 13, 1, 1}, "bcast_channel"},
        {4, {1, 32, 56, 56}, 3, {32, 1, 1}, "bcast_channel"},
        {3, {5, 1, 1}, 4, {2, 5, 3, 11}, "bcast_channel"},
        {2, {31, 17}, 2, {31, 1}, "bcast_channel"},
        {2, {9, 16}, 1, {16}, "bcast_row"},
        {3, {2, 3, 33}, 1, {33}, "bcast_row"},
        {1, {61}, 2, {7, 61}, "bcast_row"},
        {3, {4, 128, 768}, 1, {768}, "bcast_row"},
        {2, {13, 1}, 2, {1, 17}, NULL}, /* outer product */
        {2, {64, 3}, 1, {3}, NULL},     /* rows too short */
        {3, {4, 5, 6}, 3, {4, 1, 6}, NULL},
    };
    const char *t = nnf_isa_name(isa);
    for (size_t pi = 0; pi < sizeof pairs / sizeof pairs[0]; pi++) {
        shape_pair *sp = &pairs[pi];
        size_t na = numel_of(sp->ra, sp->a), nb = numel_of(sp->rb, sp->b);
        float *a = f_rand_buf(na, -4, 4), *b = f_rand_buf(nb, -4, 4);
        f_specials(a, na, 9, 0);
        f_specials(b, nb, 7, nb > 2 ? 2 : 0);
        for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
            int prelu = !strcmp(ops[oi], "PRelu");
            int b_small = nb < na || (nb == na && sp->rb <= sp->ra);
            if (prelu && !b_small)
                continue; /* the slope broadcasts to X only */
            f_in in[2] = {f32_in(a, sp->ra, sp->a, 0), f32_in(b, sp->rb, sp->b, 0)};
            f_res r = f_run(ops[oi], prelu ? 16 : 14, NULL, 0, in, 2, 1, NULL,
                            na * nb > 50000 ? g_pool : NULL);
            if (sp->kind) {
                CHECK_MSG(r.planned && strstr(r.name, sp->kind) && strstr(r.name, t),
                          "%s %s pair %zu: planned %d name %s", t, ops[oi], pi, r.planned, r.name);
                CHECK_MSG(f_same_bytes(&r, 0) || f_err(&r, 0, 0, 0, ops[oi]) == 0,
                          "%s %s pair %zu differs from the reference", t, ops[oi], pi);
            } else {
                CHECK_MSG(r.status == NNF_OK && !r.planned, "%s %s pair %zu should keep ref", t,
                          ops[oi], pi);
            }
            f_free(&r);
        }
        free(a);
        free(b);
    }
    /* Pow with a constant exponent 2 or 0.5 */
    float e2 = 2.0f, eh = 0.5f, e3 = 3.0f;
    int64_t e2i = 2;
    for (size_t si = 0; si < N_SIZES; si++) {
        size_t n = sizes[si];
        int64_t d[1] = {(int64_t)n};
        float *x = f_rand_buf(n, -10, 10);
        f_specials(x, n, 4, 0);
        f_in in[2] = {f32_in(x, 1, d, 0), f32_in(&e2, 0, NULL, 1)};
        f_res r = f_run("Pow", 15, NULL, 0, in, 2, 1, NULL, NULL);
        CHECK_MSG(r.planned && f_err(&r, 0, 0, 1.2e-7, "Pow 2") <= 1, "%s Pow 2 n=%zu", t, n);
        f_free(&r);
        in[1].data = &eh;
        r = f_run("Pow", 15, NULL, 0, in, 2, 1, NULL, NULL);
        CHECK_MSG(r.planned && f_err(&r, 0, 0, 1.2e-7, "Pow 0.5") <= 1, "%s Pow 0.5 n=%zu", t, n);
        f_free(&r);
        in[1] =
            (f_in){.dtype = NNF_DTYPE_INT64, .rank = 1, .dims = {1}, .data = &e2i, .constant = 1};
        r = f_run("Pow", 15, NULL, 0, in, 2, 1, NULL, NULL);
        CHECK_MSG(r.planned && f_err(&r, 0, 0, 1.2e-7, "Pow int 2") <= 1, "%s Pow int64 2 n=%zu", t,
                  n);
        f_free(&r);
        free(x);
    }
    /* other integer exponents up to NNF_EW_POW_INT_MAX in size (float or
     * int64): products in double rounded once, within an ulp of powf */
    static const float eints[] = {3, -1, -2, 4, 7, -5, 16, -16};
    for (size_t ei = 0; ei < sizeof eints / sizeof eints[0]; ei++)
        for (size_t si = 0; si < N_SIZES; si++) {
            size_t n = sizes[si];
            int64_t d[1] = {(int64_t)n}, ie = (int64_t)eints[ei];
            float *x = f_rand_buf(n, -10, 10);
            f_specials(x, n, 4, 0);
            f_in in[2] = {f32_in(x, 1, d, 0), f32_in(&eints[ei], 0, NULL, 1)};
            if (si % 2)
                in[1] = (f_in){.dtype = NNF_DTYPE_INT64, .rank = 0, .data = &ie, .constant = 1};
            f_res r = f_run("Pow", 15, NULL, 0, in, 2, 1, NULL, NULL);
            CHECK_MSG(r.planned && f_err(&r, 0, 0, 1.2e-7, "Pow int") <= 1, "%s Pow %g n=%zu", t,
                      (double)eints[ei], n);
            f_free(&r);
            free(x);
        }
    /* exponents that stay on the reference: 17, 2.5, 1, 0 */
    float xs[4] = {1, 2, 3, 4}, e17 = 17.0f, e25 = 2.5f, e1 = 1.0f, e0 = 0.0f;
    int64_t d4[1] = {4};
    f_in in3[2] = {f32_in(xs, 1, d4, 0), f32_in(&e3, 0, NULL, 1)};
    f_res r;
    const float *stay[] = {&e17, &e25, &e1, &e0};
    for (size_t k = 0; k < 4; k++) {
        in3[1].data = stay[k];
        r = f_run("Pow", 15, NULL, 0, in3, 2, 1, NULL, NULL);
        CHECK_MSG(r.status == NNF_OK && !r.planned, "Pow %g planned", (double)*stay[k]);
        f_free(&r);
    }
    in3[1].data = &e2;
    in3[1].constant = 0; /* exponent known only at run time */
    r = f_run("Pow", 15, NULL, 0, in3, 2, 1, NULL, NULL);
    CHECK(r.status == NNF_OK && !r.planned);
    f_free(&r);
    /* variadic Sum / Max / Min of three to five inputs of one shape fold
     * through the binary driver, bit for bit the reference's pairwise fold
     * (NaN and infinities mixed in); Sum of two is Add; Mean and a
     * broadcast input stay on the reference */
    static const char *folds[] = {"Sum", "Max", "Min"};
    for (size_t si = 0; si < N_SIZES; si++)
        for (int nv = 3; nv <= 5; nv++) {
            size_t n = sizes[si];
            int64_t d[1] = {(int64_t)n};
            float *vx[5];
            f_in vin[5];
            for (int k = 0; k < nv; k++) {
                vx[k] = f_rand_buf(n, -10, 10);
                f_specials(vx[k], n, 5 + (size_t)k, (size_t)k);
                vin[k] = f32_in(vx[k], 1, d, 0);
            }
            for (int f = 0; f < 3; f++) {
                r = f_run(folds[f], 13, NULL, 0, vin, nv, 1, NULL, NULL);
                CHECK_MSG(r.planned && f_same_bytes(&r, 0), "%s %s of %d, n=%zu", t, folds[f], nv,
                          n);
                f_free(&r);
            }
            for (int k = 0; k < nv; k++)
                free(vx[k]);
        }
    f_in v3[3] = {f32_in(xs, 1, d4, 0), f32_in(xs, 1, d4, 0), f32_in(xs, 1, d4, 0)};
    r = f_run("Sum", 13, NULL, 0, v3, 2, 1, NULL, NULL);
    CHECK(r.planned && f_same_bytes(&r, 0));
    f_free(&r);
    r = f_run("Mean", 13, NULL, 0, v3, 3, 1, NULL, NULL);
    CHECK(r.status == NNF_OK && !r.planned);
    f_free(&r);
    int64_t d1[1] = {1};
    v3[2] = f32_in(xs, 1, d1, 0); /* broadcast */
    r = f_run("Sum", 13, NULL, 0, v3, 3, 1, NULL, NULL);
    CHECK(r.status == NNF_OK && !r.planned);
    f_free(&r);
}

static void test_classify(void) {
    nnf_shape a = {.rank = 4, .dims = {2, 8, 5, 5}}, b = {.rank = 3, .dims = {8, 1, 1}}, y = a;
    nnf_ew_bcast bc = nnf_ew_bcast_classify(&a, &b, &y);
    CHECK(bc.kind == NNF_EWBC_PER_ROW && bc.c == 8 && bc.inner == 25 && !bc.small_is_a &&
          bc.numel == 400);
    bc = nnf_ew_bcast_classify(&b, &a, &y);
    CHECK(bc.kind == NNF_EWBC_PER_ROW && bc.small_is_a);
    nnf_shape r = {.rank = 1, .dims = {5}};
    bc = nnf_ew_bcast_classify(&a, &r, &y);
    CHECK(bc.kind == NNF_EWBC_ROW && bc.inner == 5);
    nnf_shape s1 = {.rank = 4, .dims = {1, 1, 1, 1}};
    bc = nnf_ew_bcast_classify(&a, &s1, &y);
    CHECK(bc.kind == NNF_EWBC_SCALAR && bc.inner == 400);
    nnf_shape bad = {.rank = 1, .dims = {4}};
    bc = nnf_ew_bcast_classify(&a, &bad, &y);
    CHECK(bc.kind == NNF_EWBC_NONE);
    nnf_shape e = {.rank = 2, .dims = {0, 3}};
    bc = nnf_ew_bcast_classify(&e, &e, &e);
    CHECK(bc.kind == NNF_EWBC_NONE);
    /* [1,5,1] + [1] after dropping extent-1 dims is one run */
    nnf_shape p = {.rank = 3, .dims = {1, 5, 1}};
    bc = nnf_ew_bcast_classify(&p, &p, &p);
    CHECK(bc.kind == NNF_EWBC_SAME && bc.numel == 5);
}

/* ---- softmax --------------------------------------------------------------------- */

static void test_softmax(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    for (int log = 0; log < 2; log++) {
        const char *op = log ? "LogSoftmax" : "Softmax";
        double at = log ? 1e-6 : 1e-7, rt = log ? 1e-6 : 1e-6, worst = 0;
        /* past 1024 the AVX-512 tier takes rows in fours, past 2048 in pairs */
        static const size_t longer[] = {1500, 2048, 3001};
        for (size_t si = 0; si < N_SIZES + 3; si++) {
            size_t n = si < N_SIZES ? sizes[si] : longer[si - N_SIZES];
            if (n > 5000)
                continue;
            /* 9 rows: the AVX-512 tier's groups (eight, four or two rows) and
             * one alone; rows 1 and 5 carry a -inf entry, rows 2 and 7 a NaN
             * (NaN rows), row 6 is all -inf (a NaN row) */
            int64_t d[2] = {9, (int64_t)n};
            float *x = f_rand_buf(9 * n, -20, 20);
            if (n > 1) {
                x[n + n / 2] = -INFINITY;
                x[5 * n + n - 1] = -INFINITY;
            }
            x[2 * n] = NAN;
            x[7 * n + n / 3] = NAN;
            for (size_t i = 0; i < n; i++)
                x[6 * n + i] = -INFINITY;
            nnf_attr ax = f_int("axis", -1);
            f_in in = f32_in(x, 2, d, 0);
            f_res r = f_run(op, 13, &ax, 1, &in, 1, 1, NULL, NULL);
            CHECK_MSG(r.planned && strstr(r.name, t), "%s %s n=%zu planned", t, op, n);
            double e = isa == NNF_ISA_SCALAR && !log ? f_err(&r, 0, 1e-7, 1e-6, op)
                                                     : f_err(&r, 0, at, rt, op);
            CHECK_MSG(e <= 1, "%s %s n=%zu: %.3g of tolerance", t, op, n, e);
            worst = e > worst ? e : worst;
            f_free(&r);
            free(x);
        }
        printf("  %-6s %-12s worst %.3f of tolerance\n", t, op, worst);
        /* suite shape: attention scores 1x12x128x128, threaded; same result inline */
        int64_t d4[4] = {1, 12, 128, 128};
        size_t n = numel_of(4, d4);
        float *x = f_rand_buf(n, -10, 10);
        f_in in = f32_in(x, 4, d4, 0);
        f_res r = f_run(op, 13, NULL, 0, &in, 1, 1, NULL, g_pool);
        CHECK_MSG(f_err(&r, 0, at, rt, op) <= 1, "%s %s 1x12x128x128", t, op);
        f_res r1 = f_run(op, 13, NULL, 0, &in, 1, 1, NULL, NULL);
        CHECK(r.planned && r1.planned && !memcmp(r.fast[0], r1.fast[0], n * sizeof(float)));
        f_free(&r);
        f_free(&r1);
        /* rows streaming from memory, more than eight L2s of them (the AVX2
         * tier runs them one by one, fetching ahead), a prime length */
        size_t rl = 509, nrows = 8 * nnf_cpu_get()->l2 / (rl * sizeof(float)) + 7;
        int64_t ds[2] = {(int64_t)nrows, (int64_t)rl};
        float *xs = f_rand_buf(nrows * rl, -10, 10);
        in = f32_in(xs, 2, ds, 0);
        r = f_run(op, 13, NULL, 0, &in, 1, 1, NULL, NULL);
        CHECK_MSG(r.planned && f_err(&r, 0, at, rt, op) <= 1, "%s %s %zu rows of 509", t, op,
                  nrows);
        f_free(&r);
        free(xs);
        /* opset 11 flattens from the axis: [2,3,4,5] at axis 1 is rows of 60 */
        int64_t dc[4] = {2, 3, 4, 5};
        nnf_attr ax1 = f_int("axis", 1);
        in = f32_in(x, 4, dc, 0);
        r = f_run(op, 11, &ax1, 1, &in, 1, 1, NULL, NULL);
        CHECK_MSG(r.planned && f_err(&r, 0, at, rt, op) <= 1, "%s %s opset 11 coerced", t, op);
        f_free(&r);
        /* opset 13 along a middle axis: positions side by side */
        r = f_run(op, 13, &ax1, 1, &in, 1, 1, NULL, NULL);
        CHECK_MSG(r.planned && strstr(r.name, "inneraxis") && f_err(&r, 0, at, rt, op) <= 1,
                  "%s %s opset 13 middle axis", t, op);
        f_free(&r);
        /* ... at lengths past the vectors with tails (7 .. 37 positions,
         * several items), NaN, -inf and all -inf lines among them, threaded */
        for (size_t si = 0; si < N_SIZES; si++) {
            size_t n = sizes[si];
            if (n > 300)
                continue;
            for (size_t inner = 7; inner <= 130; inner += 41) {
                int64_t dm[3] = {2, (int64_t)n, (int64_t)inner};
                float *xm = f_rand_buf(2 * n * inner, -20, 20);
                xm[inner + 3] = NAN; /* position 3 of image 0 (n > 1) */
                if (n > 2)
                    xm[2 * inner + 5] = -INFINITY;
                for (size_t k = 0; k < n; k++)
                    xm[(n + k) * inner + inner - 1] = -INFINITY; /* image 1's last position */
                f_in im = f32_in(xm, 3, dm, 0);
                r = f_run(op, 13, &ax1, 1, &im, 1, 1, NULL, si % 2 ? g_pool : NULL);
                CHECK_MSG(r.planned && f_err(&r, 0, at, rt, op) <= 1, "%s %s [2,%zu,%zu] axis 1", t,
                          op, n, inner);
                f_free(&r);
                free(xm);
            }
        }
        /* ... unless the later axes are all 1 */
        int64_t d1[4] = {2, 60, 1, 1};
        in = f32_in(x, 4, d1, 0);
        r = f_run(op, 13, &ax1, 1, &in, 1, 1, NULL, NULL);
        CHECK_MSG(r.planned && f_err(&r, 0, at, rt, op) <= 1, "%s %s axis with trailing 1s", t, op);
        f_free(&r);
        free(x);
    }
    /* Hardmax along the last axis: the ArgMax row kernel's first maximum,
     * bit for bit the reference (ties, NaN and infinities mixed in, rows
     * starting with NaN, a row of NaNs); along an inner axis the reference */
    for (size_t si = 0; si < N_SIZES; si++) {
        size_t n = sizes[si] > 2000 ? 2000 : sizes[si];
        int64_t d[2] = {3, (int64_t)n};
        float *x = f_rand_buf(3 * n, -4, 4);
        for (size_t i = 0; i < 3 * n; i++)
            x[i] = roundf(x[i]); /* ties: the first maximum wins */
        f_specials(x, 3 * n, 11, si % 5);
        x[n] = NAN; /* row 1 starts with NaN */
        for (size_t i = 2 * n; i < 3 * n; i += 2)
            x[i] = NAN;
        f_in in = f32_in(x, 2, d, 0);
        f_res r = f_run("Hardmax", 13, NULL, 0, &in, 1, 1, NULL, NULL);
        CHECK_MSG(r.planned && f_same_bytes(&r, 0), "%s Hardmax n=%zu", t, n);
        f_free(&r);
        free(x);
    }
    float x[6] = {1, 3, 2, 0, 5, 4};
    int64_t d[2] = {3, 2};
    nnf_attr ax0 = f_int("axis", 0);
    f_in in = f32_in(x, 2, d, 0);
    f_res r = f_run("Hardmax", 13, &ax0, 1, &in, 1, 1, NULL, NULL);
    CHECK(r.status == NNF_OK && !r.planned);
    f_free(&r);
}

/* ---- reductions ------------------------------------------------------------------------ */

/* A reduction's tolerance against the reference's double sums, for n
 * values of magnitude below 1: Sum and Mean (values of both signs) an
 * absolute 1e-6 a value; L1, L2, SumSquare and LogSum (sums of positive
 * terms, each float block of 256 summed at most 13 additions deep) 1.5e-6
 * relative (LogSum: absolute); Max and Min exact. */
static double reduce_abs_tol(int kind, size_t n) {
    return kind == NNF_REDUCE_SUM || kind == NNF_REDUCE_MEAN ? 1e-6 * (double)n
           : kind == NNF_REDUCE_LOG_SUM                      ? 1.5e-6
                                                             : 0;
}

static double reduce_rel_tol(int kind) {
    return kind == NNF_REDUCE_L1 || kind == NNF_REDUCE_L2 || kind == NNF_REDUCE_SUM_SQUARE ? 1.5e-6
                                                                                           : 0;
}

static const struct {
    const char *op;
    int kind;
} reduce_ops[] = {{"ReduceSum", NNF_REDUCE_SUM},
                  {"ReduceMean", NNF_REDUCE_MEAN},
                  {"ReduceMax", NNF_REDUCE_MAX},
                  {"ReduceMin", NNF_REDUCE_MIN},
                  {"ReduceL1", NNF_REDUCE_L1},
                  {"ReduceL2", NNF_REDUCE_L2},
                  {"ReduceSumSquare", NNF_REDUCE_SUM_SQUARE},
                  {"ReduceLogSum", NNF_REDUCE_LOG_SUM}};

/* Values for a reduction test: in [-1, 1] ([0.1, 1] for LogSum, whose
 * log would magnify a cancelling sum's error); Max / Min get NaN and
 * infinities at `nan_at`, `inf_at`, `ninf_at`; the sums of |x| and x * x
 * get a line of values near 1e-25 (squares that underflow in float) and
 * one near 1e20 (squares that overflow), each `line` values `ld` apart
 * from `tiny_at` / `huge_at`. */
static float *reduce_input(int kind, size_t numel, size_t nan_at, size_t inf_at, size_t ninf_at,
                           size_t tiny_at, size_t huge_at, size_t line, size_t ld) {
    float *x = f_rand_buf(numel, kind == NNF_REDUCE_LOG_SUM ? 0.1f : -1.0f, 1.0f);
    if (kind == NNF_REDUCE_MAX || kind == NNF_REDUCE_MIN) {
        x[nan_at] = NAN;
        x[inf_at] = INFINITY;
        x[ninf_at] = -INFINITY;
    } else if (reduce_rel_tol(kind) > 0) {
        for (size_t k = 0; k < line; k++) {
            x[tiny_at + k * ld] *= 1e-25f;
            x[huge_at + k * ld] *= 1e20f;
        }
    }
    return x;
}

static void test_reduce(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    for (size_t oi = 0; oi < sizeof reduce_ops / sizeof reduce_ops[0]; oi++) {
        const char *op = reduce_ops[oi].op;
        int kind = reduce_ops[oi].kind;
        double rel = reduce_rel_tol(kind);
        for (size_t si = 0; si < N_SIZES; si++) {
            size_t n = sizes[si];
            int64_t d[3] = {2, 3, (int64_t)n};
            /* rows 0 (NaN), 1 (+inf), 2 (-inf) for Max / Min; row 1 tiny, 4 huge for the others */
            float *x = reduce_input(kind, 6 * n, n / 2, n + n / 3, 2 * n, n, 4 * n, n, 1);
            int64_t axes[1] = {-1};
            nnf_attr at[2] = {f_ints("axes", axes, 1), f_int("keepdims", (int64_t)(si & 1))};
            f_in in = f32_in(x, 3, d, 0);
            f_res r = f_run(op, 11, at, 2, &in, 1, 1, NULL, NULL);
            CHECK_MSG(r.planned && strstr(r.name, t) &&
                          f_err(&r, 0, reduce_abs_tol(kind, n), rel, op) <= 1,
                      "%s %s n=%zu", t, op, n);
            f_free(&r);
            free(x);
        }
        /* opset 18: axes [2,3] from a constant input over NCHW (a global pool) */
        int64_t d[4] = {2, 16, 7, 7}, axes[2] = {2, 3};
        float *x = f_rand_buf(2 * 16 * 49, kind == NNF_REDUCE_LOG_SUM ? 0.1f : -1.0f, 1);
        f_in in[2] = {
            f32_in(x, 4, d, 0),
            {.dtype = NNF_DTYPE_INT64, .rank = 1, .dims = {2}, .data = axes, .constant = 1}};
        f_res r = f_run(op, 18, NULL, 0, in, 2, 1, NULL, g_pool);
        CHECK_MSG(r.planned && f_err(&r, 0, reduce_abs_tol(kind, 49), rel, op) <= 1,
                  "%s %s axes [2,3]", t, op);
        f_free(&r);
        /* a middle axis: positions side by side */
        axes[0] = 1;
        in[1].dims[0] = 1;
        r = f_run(op, 18, NULL, 0, in, 2, 1, NULL, NULL);
        CHECK_MSG(r.planned && strstr(r.name, "inneraxes") &&
                      f_err(&r, 0, reduce_abs_tol(kind, 16), rel, op) <= 1,
                  "%s %s axes [1]", t, op);
        f_free(&r);
        /* ... at lengths with vector tails, NaN and infinities (or tiny and
         * huge lines) at some positions, threaded; two reduced blocks keep
         * the reference */
        for (size_t si = 0; si < N_SIZES; si++) {
            size_t n = sizes[si];
            if (n > 300)
                continue;
            for (size_t inner = 7; inner <= 130; inner += 41) {
                int64_t dm[3] = {2, (int64_t)n, (int64_t)inner}, ax1[1] = {1};
                /* image 0: NaN at position 3, value 0, +inf at position 6
                 * halfway; image 1: -inf at position 2; tiny line at image
                 * 0 position 5, huge at image 1 position 1 */
                float *xm = reduce_input(kind, 2 * n * inner, 3, (n / 2) * inner + 6, n * inner + 2,
                                         5, n * inner + 1, n, inner);
                if (kind == NNF_REDUCE_MAX || kind == NNF_REDUCE_MIN)
                    xm[(n - 1) * inner + 5] = NAN; /* the last value of position 5 */
                nnf_attr am[2] = {f_ints("axes", ax1, 1), f_int("keepdims", (int64_t)(si & 1))};
                f_in im = f32_in(xm, 3, dm, 0);
                r = f_run(op, 11, am, 2, &im, 1, 1, NULL, si % 2 ? g_pool : NULL);
                CHECK_MSG(r.planned && f_err(&r, 0, reduce_abs_tol(kind, n), rel, op) <= 1,
                          "%s %s [2,%zu,%zu] axis 1", t, op, n, inner);
                f_free(&r);
                free(xm);
            }
        }
        int64_t d5[4] = {2, 3, 4, 5}, two[2] = {0, 2};
        float *x5 = f_rand_buf(120, -1, 1);
        nnf_attr a5[1] = {f_ints("axes", two, 2)};
        f_in i5 = f32_in(x5, 4, d5, 0);
        r = f_run(op, 11, a5, 1, &i5, 1, 1, NULL, NULL);
        CHECK(r.status == NNF_OK && !r.planned);
        f_free(&r);
        free(x5);
        axes[0] = -1;
        in[1].constant = 0;
        r = f_run(op, 18, NULL, 0, in, 2, 1, NULL, NULL);
        CHECK(r.status == NNF_OK && !r.planned);
        f_free(&r);
        free(x);
    }
    /* ReduceProd and ReduceLogSumExp keep the reference */
    float x[6] = {1, 2, 3, 4, 5, 6};
    int64_t d[2] = {2, 3}, axes[1] = {-1};
    nnf_attr at[1] = {f_ints("axes", axes, 1)};
    f_in in = f32_in(x, 2, d, 0);
    f_res r = f_run("ReduceProd", 11, at, 1, &in, 1, 1, NULL, NULL);
    CHECK(r.status == NNF_OK && !r.planned);
    f_free(&r);
    r = f_run("ReduceLogSumExp", 11, at, 1, &in, 1, 1, NULL, NULL);
    CHECK(r.status == NNF_OK && !r.planned);
    f_free(&r);
}

/* ---- Transpose / Concat ------------------------------------------------------------------ */

static void check_transpose(const char *t, int rank, const int64_t *dims, const int64_t *perm,
                            nnf_dtype dt, const char *expect) {
    size_t n = numel_of(rank, dims), es = nnf_dtype_size(dt);
    unsigned char *x = malloc(n * es + 1);
    for (size_t i = 0; i < n * es; i++)
        x[i] = (unsigned char)(i * 131u + 7u);
    f_in in = {.dtype = dt, .rank = rank, .data = x};
    memcpy(in.dims, dims, sizeof(int64_t) * (size_t)rank);
    nnf_attr at = f_ints("perm", perm, rank);
    f_res r = f_run("Transpose", 13, &at, perm ? 1 : 0, &in, 1, 1, nnf_plan_transpose,
                    n > 100000 ? g_pool : NULL);
    if (expect)
        CHECK_MSG(r.planned && strstr(r.name, expect) && f_same_bytes(&r, 0),
                  "%s transpose rank %d [%lld..] -> %s (got %s)", t, rank, (long long)dims[0],
                  expect, r.name);
    else
        CHECK_MSG(r.status == NNF_OK && !r.planned, "%s transpose should keep ref (got %s)", t,
                  r.name);
    f_free(&r);
    free(x);
}

static void test_transpose(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    const int64_t p10[2] = {1, 0};
    const size_t ext[] = {1, 2, 7, 8, 9, 13, 63, 64, 65, 127};
    for (size_t i = 0; i < 10; i++)
        for (size_t j = 0; j < 10; j++) {
            int64_t d[2] = {(int64_t)ext[i], (int64_t)ext[j]};
            /* a 1 x n transpose is a copy */
            check_transpose(t, 2, d, p10, NNF_DTYPE_FLOAT32,
                            ext[i] == 1 || ext[j] == 1 ? "copy" : "2d");
        }
    int64_t nchw[4] = {2, 24, 13, 11}, big[4] = {1, 64, 56, 56};
    const int64_t to_nhwc[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2}, heads[4] = {0, 2, 1, 3};
    const int64_t ident[4] = {0, 1, 2, 3}, odd[4] = {3, 1, 0, 2};
    check_transpose(t, 4, nchw, to_nhwc, NNF_DTYPE_FLOAT32, "2d");
    check_transpose(t, 4, nchw, to_nchw, NNF_DTYPE_INT32, "2d");
    check_transpose(t, 4, big, to_nhwc, NNF_DTYPE_FLOAT32, "2d");
    check_transpose(t, 4, nchw, heads, NNF_DTYPE_FLOAT32, "rows");
    check_transpose(t, 4, nchw, heads, NNF_DTYPE_INT64, "rows");
    check_transpose(t, 4, nchw, heads, NNF_DTYPE_UINT8, "rows");
    int64_t bert[4] = {1, 128, 12, 64};
    check_transpose(t, 4, bert, heads, NNF_DTYPE_FLOAT32, "rows");
    check_transpose(t, 4, nchw, ident, NNF_DTYPE_FLOAT32, "copy");
    check_transpose(t, 4, nchw, NULL, NNF_DTYPE_FLOAT32, NULL); /* reverse: [3,2,1,0] */
    check_transpose(t, 4, nchw, odd, NNF_DTYPE_FLOAT32, NULL);
    int64_t d2[2] = {9, 17};
    check_transpose(t, 2, d2, p10, NNF_DTYPE_INT64, NULL); /* 8-byte 2-D transposes keep ref */
}

static void test_concat(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    struct {
        int rank, axis, n;
        int64_t dims[4][4];
        nnf_dtype dt;
    } cases[] = {
        {2, 0, 3, {{2, 5}, {1, 5}, {4, 5}}, NNF_DTYPE_FLOAT32},
        {2, 1, 3, {{3, 2}, {3, 7}, {3, 1}}, NNF_DTYPE_FLOAT32},
        {4, 1, 3, {{2, 3, 4, 5}, {2, 0, 4, 5}, {2, 6, 4, 5}}, NNF_DTYPE_INT64},
        {3, -1, 2, {{4, 3, 13}, {4, 3, 1}}, NNF_DTYPE_UINT8},
        {4, 1, 2, {{1, 256, 56, 56}, {1, 128, 56, 56}}, NNF_DTYPE_FLOAT32},
        {4,
         3,
         4,
         {{1, 8, 40, 40}, {1, 8, 40, 40}, {1, 8, 40, 40}, {1, 8, 40, 40}},
         NNF_DTYPE_FLOAT32},
        {1, 0, 2, {{1}, {1}}, NNF_DTYPE_FLOAT32},
        /* YOLOv5 head: xy, wh, the rest (whole rows of 2-float pieces) */
        {4, -1, 3, {{3, 40, 40, 2}, {3, 40, 40, 2}, {3, 40, 40, 81}}, NNF_DTYPE_FLOAT32},
        {3, 2, 4, {{2, 7, 1}, {2, 7, 3}, {2, 7, 4}, {2, 7, 0}}, NNF_DTYPE_INT64},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        f_in in[4];
        void *bufs[4];
        for (int i = 0; i < cases[c].n; i++) {
            size_t n = numel_of(cases[c].rank, cases[c].dims[i]), es = nnf_dtype_size(cases[c].dt);
            unsigned char *p = malloc(n * es + 1);
            for (size_t k = 0; k < n * es; k++)
                p[k] = (unsigned char)(k * 29u + (unsigned)i * 101u);
            bufs[i] = p;
            in[i] = (f_in){.dtype = cases[c].dt, .rank = cases[c].rank, .data = p};
            memcpy(in[i].dims, cases[c].dims[i], sizeof(int64_t) * 4);
        }
        nnf_attr at = f_int("axis", cases[c].axis);
        f_res r = f_run("Concat", 13, &at, 1, in, cases[c].n, 1, nnf_plan_concat, g_pool);
        CHECK_MSG(f_same_bytes(&r, 0), "%s concat case %zu", t, c);
        f_res r1 = f_run("Concat", 13, &at, 1, in, cases[c].n, 1, nnf_plan_concat, NULL);
        CHECK_MSG(f_same_bytes(&r1, 0), "%s concat case %zu inline", t, c);
        f_free(&r);
        f_free(&r1);
        for (int i = 0; i < cases[c].n; i++)
            free(bufs[i]);
    }
}

/* ---- Resize ------------------------------------------------------------------------ */

static const char *const rs_coords[] = {"half_pixel",         "half_pixel_symmetric",
                                        "pytorch_half_pixel", "align_corners",
                                        "asymmetric",         "tf_half_pixel_for_nn"};
static const char *const rs_nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                         "ceil"};

/* Resize-13 of a [n, c, h, w] input by scales (sizes when out != NULL); the
 * fast kernel must be chosen iff expect_plan, and then equal the reference
 * (exact; the reference's +0 for -0 aside). Returns 1 on success. */
static int run_resize(nnf_isa isa, const int64_t *dims, const float *scales, const int64_t *sizes,
                      const char *mode, const char *coord, const char *nearest, int const_args,
                      int expect_plan) {
    size_t n = numel_of(4, dims);
    float *x = f_rand_buf(n, -10, 10);
    f_specials(x, n, 11, 4);
    nnf_attr at[3] = {f_str("mode", mode), f_str("coordinate_transformation_mode", coord),
                      f_str("nearest_mode", nearest)};
    int64_t four = 4;
    f_in in[4] = {f32_in(x, 4, dims, 0), {.absent = 1}, {.absent = 1}, {.absent = 1}};
    if (sizes)
        in[3] = (f_in){.dtype = NNF_DTYPE_INT64,
                       .rank = 1,
                       .dims = {four},
                       .data = sizes,
                       .constant = const_args};
    else
        in[2] = f32_in(scales, 1, &four, const_args);
    int64_t od[4];
    for (int a = 0; a < 4; a++)
        od[a] = sizes ? sizes[a] : (int64_t)floorf(scales[a] * (float)dims[a]);
    size_t on = numel_of(4, od);
    f_res r = f_run("Resize", 13, at, 3, in, sizes ? 4 : 3, 1, nnf_plan_resize,
                    on > 20000 ? g_pool : NULL);
    int ok = r.status == NNF_OK && r.planned == expect_plan;
    if (ok && expect_plan)
        ok =
            strstr(r.name, isa == NNF_ISA_SCALAR ? "scalar" : "_") && f_err(&r, 0, 0, 0, mode) <= 1;
    if (!ok)
        fprintf(stderr, "  resize %s %s %s [%lld %lld %lld %lld] -> [%lld %lld %lld %lld]: %s\n",
                mode, coord, nearest, (long long)dims[0], (long long)dims[1], (long long)dims[2],
                (long long)dims[3], (long long)od[0], (long long)od[1], (long long)od[2],
                (long long)od[3], r.planned ? r.name : "not planned");
    f_free(&r);
    free(x);
    return ok;
}

/* 3-D (NCDHW) Resize-13 by scales: linear runs the depth's taps in the
 * plan (bit for bit the reference: every depth-row tap pair weighted by its
 * product, summed in the reference's order), on 1 and 2 threads; nearest
 * with a resized depth keeps the reference. */
static void test_resize3d(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    static const struct {
        int64_t dims[5];
        float scales[5];
    } cs[] = {
        {{1, 2, 3, 5, 6}, {1, 1, 2, 2, 2}},       {{1, 3, 4, 7, 5}, {1, 1, 0.5f, 2, 3}},
        {{2, 2, 5, 4, 9}, {1, 1, 1.5f, 1, 0.5f}}, {{1, 1, 1, 3, 3}, {1, 1, 3, 2, 2}},
        {{1, 4, 8, 16, 16}, {1, 1, 2, 2, 2}},
    };
    static const char *coords[] = {"half_pixel", "asymmetric", "align_corners",
                                   "pytorch_half_pixel"};
    int64_t five = 5;
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++)
        for (size_t k = 0; k < 4; k++) {
            size_t n = numel_of(5, cs[ci].dims);
            float *x = f_rand_buf(n, -10, 10);
            f_specials(x, n, 11, 4);
            nnf_attr at[3] = {f_str("mode", "linear"),
                              f_str("coordinate_transformation_mode", coords[k]),
                              f_str("nearest_mode", "floor")};
            f_in in[3] = {
                f32_in(x, 5, cs[ci].dims, 0), {.absent = 1}, f32_in(cs[ci].scales, 1, &five, 1)};
            f_res r = f_run("Resize", 13, at, 3, in, 3, 1, nnf_plan_resize, ci % 2 ? g_pool : NULL);
            CHECK_MSG(r.planned && strstr(r.name, "trilinear") &&
                          f_err(&r, 0, 0, 0, "resize3d") <= 1,
                      "%s 3-D resize case %zu %s (%s)", t, ci, coords[k], r.name);
            f_free(&r);
            at[0] = f_str("mode", "nearest");
            r = f_run("Resize", 13, at, 3, in, 3, 1, nnf_plan_resize, NULL);
            CHECK_MSG(r.status == NNF_OK && !r.planned, "%s 3-D nearest resize case %zu", t, ci);
            f_free(&r);
            free(x);
        }
}

static void test_resize(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    static const int64_t ext[] = {1, 2, 7, 13, 33};
    static const float sc[][2] = {{2, 2},    {3, 3}, {0.5f, 0.5f}, {1.5f, 1.5f},
                                  {2, 0.5f}, {1, 3}, {3, 1}};
    int fails = 0, runs = 0;
    for (size_t hi = 0; hi < 5; hi++)
        for (size_t wi = 0; wi < 5; wi++)
            for (size_t si = 0; si < sizeof sc / sizeof sc[0]; si++) {
                int64_t dims[4] = {1, 2, ext[hi], ext[wi]};
                float scales[4] = {1, 1, sc[si][0], sc[si][1]};
                if (floorf(scales[2] * (float)dims[2]) < 1 ||
                    floorf(scales[3] * (float)dims[3]) < 1)
                    continue;
                for (size_t ci = 0; ci < 6; ci++) {
                    /* tf_half_pixel_for_nn moves unscaled axes too (o + 0.5 rounds
                     * up, or interpolates): nearest resizes the channels on the
                     * reference, linear as the third-to-last axis (a volume's
                     * depth) */
                    int tf = ci == 5;
                    for (size_t ni = 0; ni < 4; ni++, runs++)
                        fails += !run_resize(isa, dims, scales, NULL, "nearest", rs_coords[ci],
                                             rs_nearest[ni], 1, !tf || ni == 0 || ni == 2);
                    runs++;
                    fails += !run_resize(isa, dims, scales, NULL, "linear", rs_coords[ci],
                                         "round_prefer_floor", 1, 1);
                }
            }
    CHECK_MSG(fails == 0, "%s resize: %d of %d cases differ", t, fails, runs);
    /* suite shapes (YOLOv5 2x nearest), more planes, sizes instead of scales */
    int64_t y5[4] = {1, 128, 40, 40}, b2[4] = {2, 3, 17, 9}, sz[4] = {2, 3, 40, 5};
    float s2[4] = {1, 1, 2, 2};
    CHECK_MSG(run_resize(isa, y5, s2, NULL, "nearest", "asymmetric", "floor", 1, 1),
              "%s resize yolo", t);
    /* bilinear: rows wider than the linear kernel's column chunk (1024), and
     * many planes split over the pool (each range's first rows read input
     * rows no earlier row of the range kept) */
    int64_t wide[4] = {1, 2, 5, 700}, many[4] = {2, 64, 19, 23};
    float s2b[4] = {1, 1, 2, 2}, s13[4] = {1, 1, 1.3f, 0.7f};
    for (size_t ci = 0; ci < 5; ci++) {
        CHECK_MSG(run_resize(isa, wide, s2b, NULL, "linear", rs_coords[ci], "floor", 1, 1),
                  "%s resize linear wide %s", t, rs_coords[ci]);
        CHECK_MSG(
            run_resize(isa, many, ci % 2 ? s13 : s2b, NULL, "linear", rs_coords[ci], "floor", 1, 1),
            "%s resize linear planes %s", t, rs_coords[ci]);
    }
    for (size_t ci = 0; ci < 6; ci++) {
        CHECK_MSG(run_resize(isa, b2, NULL, sz, "nearest", rs_coords[ci], "floor", 1, 1),
                  "%s resize sizes nearest %s", t, rs_coords[ci]);
        CHECK_MSG(run_resize(isa, b2, NULL, sz, "linear", rs_coords[ci], "floor", 1, ci != 5),
                  "%s resize sizes linear %s", t, rs_coords[ci]);
    }
    /* Upsample-9 (scales input) and -7 (scales attribute): asymmetric, the
     * simple nearest rounding, or linear */
    float s15[4] = {1, 1, 2, 1.5f};
    int64_t four = 4;
    float *ux = f_rand_buf(numel_of(4, b2), -3, 3);
    for (int lin = 0; lin < 2; lin++) {
        nnf_attr am = f_str("mode", lin ? "linear" : "nearest");
        f_in uin[2] = {f32_in(ux, 4, b2, 0), f32_in(s15, 1, &four, 1)};
        f_res r = f_run("Upsample", 9, &am, 1, uin, 2, 1, nnf_plan_resize, NULL);
        CHECK_MSG(r.planned && f_err(&r, 0, 0, 0, "upsample9") <= 1, "%s upsample-9 %d", t, lin);
        f_free(&r);
        nnf_attr a7[2] = {am,
                          {.name = "scales", .type = NNF_ATTR_FLOATS, .floats = s15, .count = 4}};
        r = f_run("Upsample", 7, a7, 2, uin, 1, 1, nnf_plan_resize, NULL);
        CHECK_MSG(r.planned && f_err(&r, 0, 0, 0, "upsample7") <= 1, "%s upsample-7 %d", t, lin);
        f_free(&r);
    }
    free(ux);
    /* the reference keeps: cubic, tf_crop_and_resize, a resized channel
     * axis, scales unknown at load */
    float s3[4] = {1, 2, 2, 2};
    CHECK_MSG(run_resize(isa, b2, s2, NULL, "cubic", "half_pixel", "floor", 1, 0), "%s cubic", t);
    CHECK_MSG(run_resize(isa, b2, s2, NULL, "linear", "tf_crop_and_resize", "floor", 1, 0),
              "%s tf_crop_and_resize", t);
    CHECK_MSG(run_resize(isa, b2, s3, NULL, "nearest", "asymmetric", "floor", 1, 0),
              "%s channel resize", t);
}

/* The plan directly: scales unknown at load keep the reference; known ones
 * plan; every allocation failure is reported and leaves no plan. */
static void test_resize_plan(void) {
    nnf_resize_params rp = {.mode = NNF_RESIZE_NEAREST,
                            .coord = NNF_COORD_ASYMMETRIC,
                            .nearest = NNF_NEAREST_FLOOR,
                            .cubic_a = -0.75f,
                            .roi_input = 1,
                            .scales_input = 2,
                            .sizes_input = 3};
    nnf_node node = {.name = "rs",
                     .op_type = "Resize",
                     .domain = "",
                     .opset = 13,
                     .n_inputs = 3,
                     .n_outputs = 1,
                     .params = &rp};
    float s2[4] = {1, 1, 2, 2};
    nnf_tinfo in[3] = {
        {.present = true, .dtype = NNF_DTYPE_FLOAT32, .shape = {.rank = 4, .dims = {1, 3, 4, 5}}},
        {.present = false},
        {.present = true, .dtype = NNF_DTYPE_FLOAT32, .shape = {.rank = 1, .dims = {4}}}};
    nnf_tinfo out[1] = {
        {.present = true, .dtype = NNF_DTYPE_FLOAT32, .shape = {.rank = 4, .dims = {1, 3, 8, 10}}}};
    nnf_kernel_plan plan = {0};
    CHECK(nnf_plan_resize(&node, in, out, &plan) == NNF_OK && !plan.run);
    in[2].data = s2;
    for (uint64_t fail = 1; fail <= 8; fail++) {
        plan = (nnf_kernel_plan){0};
        nnf_alloc_fail_after(fail);
        nnf_status st = nnf_plan_resize(&node, in, out, &plan);
        nnf_alloc_fail_after(0);
        if (fail <= 7)
            CHECK_MSG(st == NNF_ERR_OUT_OF_MEMORY && !plan.run, "resize plan, allocation %d fails",
                      (int)fail);
        else
            CHECK(st == NNF_OK && plan.run && strstr(plan.name, "nearest"));
        if (plan.free_state)
            plan.free_state(plan.state);
    }
    out[0].shape.dims[3] = 11; /* not what the scales give: the reference reports it */
    plan = (nnf_kernel_plan){0};
    CHECK(nnf_plan_resize(&node, in, out, &plan) == NNF_OK && !plan.run);
}

static void test_resize_tables(void) {
    nnf_resize_params p = {.mode = NNF_RESIZE_NEAREST,
                           .coord = NNF_COORD_ASYMMETRIC,
                           .nearest = NNF_NEAREST_FLOOR,
                           .cubic_a = -0.75f};
    int64_t in[4] = {1, 8, 5, 6}, out2[4] = {1, 8, 10, 12}, out1[4] = {1, 8, 15, 6};
    float s2[4] = {1, 1, 2, 2}, s31[4] = {1, 1, 3, 1}, roi[8] = {0, 0, 0, 0, 1, 1, 1, 1};
    nnf_resize_tables t;
    CHECK(nnf_resize_tables_build(&p, 4, in, out2, s2, roi, &t) == NNF_OK);
    CHECK(t.kind == NNF_RSZ_NEAREST && t.cols == NNF_RSZ_COLS_DUP && t.dup == 2 && t.planes == 8 &&
          t.hidx[9] == 4);
    nnf_resize_tables_free(&t);
    CHECK(nnf_resize_tables_build(&p, 4, in, out1, s31, roi, &t) == NNF_OK);
    CHECK(t.kind == NNF_RSZ_NEAREST && t.cols == NNF_RSZ_COLS_COPY && t.hidx[14] == 4);
    nnf_resize_tables_free(&t);
    p.coord = NNF_COORD_HALF_PIXEL; /* nearest half-pixel 2x: o / 2 as well */
    p.nearest = NNF_NEAREST_ROUND_PREFER_FLOOR;
    CHECK(nnf_resize_tables_build(&p, 4, in, out2, s2, roi, &t) == NNF_OK);
    CHECK(t.kind == NNF_RSZ_NEAREST && t.cols == NNF_RSZ_COLS_DUP);
    nnf_resize_tables_free(&t);
    p.mode = NNF_RESIZE_LINEAR;
    CHECK(nnf_resize_tables_build(&p, 4, in, out2, s2, roi, &t) == NNF_OK);
    CHECK(t.kind == NNF_RSZ_LINEAR && t.th == 2 && t.tw == 2);
    nnf_resize_tables_free(&t);
    p.coord = NNF_COORD_ASYMMETRIC; /* linear, scale 1 along W: one tap there */
    CHECK(nnf_resize_tables_build(&p, 4, in, out1, s31, roi, &t) == NNF_OK);
    CHECK(t.kind == NNF_RSZ_LINEAR && t.th == 2 && t.tw == 1);
    nnf_resize_tables_free(&t);
    p.mode = NNF_RESIZE_CUBIC;
    CHECK(nnf_resize_tables_build(&p, 4, in, out2, s2, roi, &t) == NNF_OK &&
          t.kind == NNF_RSZ_NONE && !t.hidx);
    p.mode = NNF_RESIZE_NEAREST;
    p.coord = NNF_COORD_TF_CROP_AND_RESIZE;
    CHECK(nnf_resize_tables_build(&p, 4, in, out2, s2, roi, &t) == NNF_OK &&
          t.kind == NNF_RSZ_NONE);
    p.coord = NNF_COORD_ASYMMETRIC;
    nnf_alloc_fail_after(2);
    nnf_status st = nnf_resize_tables_build(&p, 4, in, out2, s2, roi, &t);
    nnf_alloc_fail_after(0);
    CHECK(st == NNF_ERR_OUT_OF_MEMORY && t.kind == NNF_RSZ_NONE && !t.hidx);
}

/* ---- Slice ------------------------------------------------------------------------- */

static void test_slice(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    struct {
        int rank, n;
        int64_t dims[5], starts[5], ends[5], axes[5], steps[5];
        nnf_dtype dt;
    } cases[] = {
        /* YOLOv5 head: xy, wh and the rest of the last axis */
        {5, 1, {1, 3, 80, 80, 85}, {0}, {2}, {4}, {1}, NNF_DTYPE_FLOAT32},
        {5, 1, {1, 3, 40, 40, 85}, {2}, {4}, {4}, {1}, NNF_DTYPE_FLOAT32},
        {5, 1, {1, 3, 20, 20, 85}, {4}, {85}, {-1}, {1}, NNF_DTYPE_FLOAT32},
        {1, 1, {1}, {0}, {1}, {0}, {1}, NNF_DTYPE_FLOAT32},
        {1, 1, {33}, {-7}, {100}, {0}, {1}, NNF_DTYPE_FLOAT32},
        {2, 1, {7, 13}, {12}, {-100}, {1}, {-1}, NNF_DTYPE_FLOAT32},
        {2, 2, {13, 7}, {1, 2}, {12, 5}, {0, 1}, {3, 1}, NNF_DTYPE_FLOAT32},
        {3, 2, {2, 33, 7}, {1, 0}, {2, 33}, {0, 1}, {1, 2}, NNF_DTYPE_INT64},
        {4, 2, {2, 3, 13, 5}, {1, 3}, {3, 1000}, {1, 3}, {1, 1}, NNF_DTYPE_UINT8},
        {3, 1, {4, 3, 33}, {2}, {3}, {0}, {1}, NNF_DTYPE_FLOAT32},
        {3,
         3,
         {5, 6, 7},
         {4, 5, 6},
         {-100, -100, -100},
         {0, 1, 2},
         {-2, -3, -1},
         NNF_DTYPE_FLOAT32},
        {2, 1, {3, 40000}, {1}, {39999}, {1}, {1}, NNF_DTYPE_FLOAT32},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t n = numel_of(cases[c].rank, cases[c].dims), es = nnf_dtype_size(cases[c].dt);
        unsigned char *p = malloc(n * es);
        for (size_t k = 0; k < n * es; k++)
            p[k] = (unsigned char)(k * 31u + 7u);
        int64_t cn = cases[c].n;
        f_in in[5] = {{.dtype = cases[c].dt, .rank = cases[c].rank, .data = p}};
        memcpy(in[0].dims, cases[c].dims, sizeof cases[c].dims);
        const int64_t *args[4] = {cases[c].starts, cases[c].ends, cases[c].axes, cases[c].steps};
        for (int i = 0; i < 4; i++)
            in[i + 1] = (f_in){
                .dtype = NNF_DTYPE_INT64, .rank = 1, .dims = {cn}, .data = args[i], .constant = 1};
        for (int pool = 0; pool < 2; pool++) {
            f_res r = f_run("Slice", 13, NULL, 0, in, 5, 1, nnf_plan_slice, pool ? g_pool : NULL);
            CHECK_MSG(f_same_bytes(&r, 0), "%s slice case %zu%s", t, c, pool ? " pooled" : "");
            f_free(&r);
        }
        /* Slice-1: the same as attributes (steps 1 only) */
        int unit = 1;
        for (int i = 0; i < cases[c].n; i++)
            unit &= cases[c].steps[i] == 1;
        if (unit) {
            nnf_attr at[3] = {f_ints("starts", cases[c].starts, cases[c].n),
                              f_ints("ends", cases[c].ends, cases[c].n),
                              f_ints("axes", cases[c].axes, cases[c].n)};
            f_res r = f_run("Slice", 1, at, 3, in, 1, 1, nnf_plan_slice, NULL);
            CHECK_MSG(f_same_bytes(&r, 0), "%s slice-1 case %zu", t, c);
            f_free(&r);
        }
        free(p);
    }
    /* starts only known at run time: the reference keeps it */
    int64_t d[2] = {4, 6}, st = 1, en = 3, ax = 1, one = 1;
    float x[24] = {0};
    f_in in[4] = {f32_in(x, 2, d, 0),
                  {.dtype = NNF_DTYPE_INT64, .rank = 1, .dims = {one}, .data = &st},
                  {.dtype = NNF_DTYPE_INT64, .rank = 1, .dims = {one}, .data = &en, .constant = 1},
                  {.dtype = NNF_DTYPE_INT64, .rank = 1, .dims = {one}, .data = &ax, .constant = 1}};
    nnf_tinfo ti[4],
        to[1] = {
            {.present = true, .dtype = NNF_DTYPE_FLOAT32, .shape = {.rank = 2, .dims = {4, 2}}}};
    for (int i = 0; i < 4; i++)
        ti[i] = (nnf_tinfo){.present = true,
                            .dtype = in[i].dtype,
                            .shape = {.rank = in[i].rank, .dims = {in[i].dims[0], in[i].dims[1]}},
                            .data = in[i].constant ? in[i].data : NULL};
    int ins[4] = {0, 1, 2, 3}, outs[1] = {4};
    nnf_node node = {.name = "sl",
                     .op_type = "Slice",
                     .domain = "",
                     .opset = 13,
                     .n_inputs = 4,
                     .n_outputs = 1,
                     .inputs = ins,
                     .outputs = outs,
                     .params = &(nnf_slice_params){-1, -1, -1, NULL, NULL, NULL}};
    nnf_kernel_plan plan = {0};
    CHECK(nnf_plan_slice(&node, ti, to, &plan) == NNF_OK && !plan.run);
}

static void test_perm_reduce(void) {
    int64_t d[4] = {2, 3, 4, 5};
    int p[4] = {0, 2, 3, 1};
    nnf_perm_reduced r;
    nnf_perm_reduce(4, d, p, &r);
    CHECK(r.rank == 3 && r.dims[0] == 2 && r.dims[1] == 3 && r.dims[2] == 20 && r.perm[0] == 0 &&
          r.perm[1] == 2 && r.perm[2] == 1);
    int64_t d1[4] = {1, 3, 1, 5};
    int q[4] = {2, 3, 0, 1};
    nnf_perm_reduce(4, d1, q, &r);
    CHECK(r.rank == 2 && r.dims[0] == 3 && r.dims[1] == 5 && r.perm[0] == 1 && r.perm[1] == 0);
    int id[4] = {0, 1, 2, 3};
    nnf_perm_reduce(4, d, id, &r);
    CHECK(r.rank == 1 && r.dims[0] == 120 && r.perm[0] == 0);
}

/* ---- the soak ------------------------------------------------------------------------ */

static nnf_threadpool *g_pool3; /* the soak's third thread count */
static char soak_what[1024];    /* the case in words, printed when a check fails */
static long soak_planned;       /* runs the fast kernels took (the soak reaches them) */
static long soak_case;          /* the case's number in its seed's sequence */

static size_t uniform(size_t lo, size_t hi) {
    return lo + (size_t)(check_unit() * (double)(hi - lo + 1));
}

static void what_add(const char *fmt, ...) {
    size_t at = strlen(soak_what);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(soak_what + at, sizeof soak_what - at, fmt, ap);
    va_end(ap);
}

static void what_dims(const char *name, int rank, const int64_t *d) {
    what_add(" %s [", name);
    for (int i = 0; i < rank; i++)
        what_add(i ? ",%lld" : "%lld", (long long)d[i]);
    what_add("]");
}

/* Extents at the vector widths +-1 and the 16-item block starts of the
 * drivers, primes, and one long axis. */
static const int64_t soak_ext[] = {1,  2,  3,  7,  8,  9,   15,  16,  17,  31,
                                   32, 33, 63, 64, 65, 127, 255, 256, 257, 1000};
#define N_SOAK_EXT (sizeof soak_ext / sizeof soak_ext[0])

/* Elements per tensor: a few thousand, or (one case in four) up to 300000 so
 * that the drivers split the work (16384 floats or 256 KB per thread block)
 * and the thread counts can differ. */
static size_t soak_cap(void) {
    return check_unit() < 0.25 ? 300000 : 4096;
}

/* rank extents from soak_ext, cut (one axis at a time, to a smaller extent)
 * until there are at most cap elements. */
static void soak_shape(int rank, int64_t *d, size_t cap) {
    for (int i = 0; i < rank; i++)
        d[i] = soak_ext[uniform(0, N_SOAK_EXT - 1)];
    while (numel_of(rank, d) > cap) {
        int i = (int)uniform(0, (size_t)rank - 1);
        size_t k = 0;
        while (k + 1 < N_SOAK_EXT && soak_ext[k + 1] < d[i])
            k++;
        if (d[i] > 1)
            d[i] = soak_ext[uniform(0, k)];
    }
}

/* A random permutation of 0..rank-1 (Fisher-Yates). */
static void soak_perm(int rank, int64_t *perm) {
    for (int i = 0; i < rank; i++)
        perm[i] = i;
    for (int i = rank - 1; i > 0; i--) {
        size_t j = uniform(0, (size_t)i);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* Uniform in [lo, hi], most of the time with NaN/Inf/-0/denormals/large
 * values every stride-th element. */
static float *soak_floats(size_t n, float lo, float hi) {
    float *x = f_rand_buf(n, lo, hi);
    if (check_unit() < 0.7) {
        size_t every = uniform(2, 40); /* a draw a statement: seeds replay anywhere */
        f_specials(x, n, every, uniform(0, 5));
    }
    return x;
}

static void *soak_bytes(size_t n) {
    unsigned char *p = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(check_unit() * 256);
    return p;
}

static nnf_dtype soak_dtype(void) {
    static const nnf_dtype dt[] = {NNF_DTYPE_FLOAT32, NNF_DTYPE_FLOAT32, NNF_DTYPE_INT32,
                                   NNF_DTYPE_INT64, NNF_DTYPE_UINT8};
    return dt[uniform(0, 4)];
}

/* |fast - ref| <= abs + rel * |ref| + per_x * |x| (x: input 0, as large as the
 * output); row_sum: abs * sum |x| over the reduced row of the output element
 * instead (/ the row length for a mean); bytes: bit-identical; exact on the
 * scalar tier when scalar_exact. */
typedef struct soak_tol {
    double abs, rel, per_x;
    int row_sum, mean, bytes, scalar_exact;
} soak_tol;

/* Worst error over output 0 as a fraction of the tolerance (> 1 fails);
 * prints the worst element. NaN must meet NaN, infinities be equal, and a
 * -0 may meet +0 (as f_err). */
static double soak_err(const f_res *r, const soak_tol *tol, int exact, const f_in *x0) {
    if (tol->bytes || r->dtype[0] != NNF_DTYPE_FLOAT32)
        return f_same_bytes(r, 0) ? 0 : INFINITY;
    const float *f = r->fast[0], *e = r->ref[0], *x = x0->data;
    size_t n = r->numel[0], row = n ? numel_of(x0->rank, x0->dims) / n : 0, at = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double q, t = exact ? 0 : tol->abs + tol->rel * fabs(e[i]);
        if (!exact && tol->per_x > 0)
            t += tol->per_x * fabs(x[i]);
        if (!exact && tol->row_sum) {
            double s = 0;
            for (size_t k = 0; k < row; k++)
                s += fabs(x[i * row + k]);
            t = tol->abs * (tol->mean ? s / (double)row : s);
        }
        if (isnan(e[i]) || isnan(f[i]))
            q = isnan(e[i]) && isnan(f[i]) ? 0 : INFINITY;
        else if (isinf(e[i]) || isinf(f[i]))
            q = e[i] == f[i] ? 0 : INFINITY;
        else {
            double d = fabs((double)f[i] - (double)e[i]);
            q = d == 0 ? 0 : (t > 0 ? d / t : INFINITY);
        }
        if (q > worst) {
            worst = q;
            at = i;
        }
    }
    if (worst > 1)
        fprintf(stderr, "  [%s] element %zu of %zu: fast %.9g ref %.9g\n", r->name, at, n, f[at],
                e[at]);
    return worst;
}

/* 0x7f poison (fast_op_harness.h) left in the 16 bytes after output 0. */
static int soak_guard_ok(const f_res *r, const void *buf) {
    const unsigned char *p = (const unsigned char *)buf + r->numel[0] * nnf_dtype_size(r->dtype[0]);
    for (int i = 0; i < 16; i++)
        if (p[i] != 0x7f)
            return 0;
    return 1;
}

/* One random case on every tier and on 1, 2 and 3 threads: the op runs (init,
 * infer, plan, run), the fast result is within tol of the reference, the
 * three thread counts give the same bits, and no kernel writes past its
 * output. */
static void soak_run(const char *op, int opset, nnf_attr *at, int n_at, const f_in *ins, int n_in,
                     nnf_plan_fn plan_fn, const soak_tol *tol) {
    nnf_threadpool *pools[3] = {NULL, g_pool, g_pool3};
    for (int t = NNF_ISA_SCALAR; t <= (int)nnf_cpu_get()->max_isa; t++) {
        nnf_isa isa = nnf_cpu_force_isa((nnf_isa)t);
        const char *tn = nnf_isa_name(isa);
        f_res r[3];
        for (int p = 0; p < 3; p++)
            r[p] = f_run(op, opset, at, n_at, ins, n_in, 1, plan_fn, pools[p]);
        for (int p = 0; p < 3; p++) {
            CHECK_MSG(r[p].status == NNF_OK, "soak #%ld %s %d threads: fails:%s", soak_case, tn,
                      p + 1, soak_what);
            if (r[p].status != NNF_OK)
                continue;
            CHECK_MSG(soak_guard_ok(&r[p], r[p].ref[0]) &&
                          (!r[p].planned || soak_guard_ok(&r[p], r[p].fast[0])),
                      "soak #%ld %s %d threads [%s]: written past the output:%s", soak_case, tn,
                      p + 1, r[p].name, soak_what);
        }
        if (r[0].status == NNF_OK && r[0].planned) {
            soak_planned++;
            double e = soak_err(&r[0], tol, tol->scalar_exact && isa == NNF_ISA_SCALAR, &ins[0]);
            CHECK_MSG(e <= 1, "soak #%ld %s [%s]: error %.3g of tolerance:%s", soak_case, tn,
                      r[0].name, e, soak_what);
            size_t bytes = r[0].numel[0] * nnf_dtype_size(r[0].dtype[0]);
            for (int p = 1; p < 3; p++)
                CHECK_MSG(r[p].status != NNF_OK ||
                              (r[p].planned && !memcmp(r[p].fast[0], r[0].fast[0], bytes)),
                          "soak #%ld %s [%s]: %d threads differ from 1:%s", soak_case, tn,
                          r[0].name, p + 1, soak_what);
        }
        for (int p = 0; p < 3; p++)
            f_free(&r[p]);
    }
}

static void soak_unary(size_t cap) {
    un_case cases[N_UN_CASES];
    unary_cases(cases);
    un_case *u = &cases[uniform(0, N_UN_CASES - 1)];
    int rank = (int)uniform(1, 6);
    int64_t d[6];
    soak_shape(rank, d, cap);
    size_t n = numel_of(rank, d);
    float *x = soak_floats(n, u->lo, u->hi);
    for (size_t i = 1; i < n; i += 11) /* ties for Round, integers for Floor/Ceil */
        x[i] = (float)((int)x[i]) + (i % 2 ? 0.5f : 0.0f);
    soak_tol tol = {u->abs_tol, u->rel_tol, u->abs_per_x, .scalar_exact = 1};
    f_in in[3] = {f32_in(x, rank, d, 0)};
    float lo = f_rand(-3, 1), hi = f_rand(-1, 3);
    if (check_unit() < 0.1) { /* Clip-13: constant bounds (one may be absent; lo > hi too) */
        in[1] = f32_in(&lo, 0, NULL, 1);
        in[2] = f32_in(&hi, 0, NULL, 1);
        in[1].absent = check_unit() < 0.2;
        in[2].absent = !in[1].absent && check_unit() < 0.2;
        snprintf(soak_what, sizeof soak_what, " Clip-13 min %s%.9g max %s%.9g",
                 in[1].absent ? "absent " : "", lo, in[2].absent ? "absent " : "", hi);
        what_dims("x", rank, d);
        soak_run("Clip", 13, NULL, 0, in, 3, NULL, &tol);
    } else {
        snprintf(soak_what, sizeof soak_what, " %s-%d", u->op, u->opset);
        what_dims("x", rank, d);
        soak_run(u->op, u->opset, u->attrs, u->n_attrs, in, 1, NULL, &tol);
    }
    free(x);
}

/* Operand shapes of a broadcast: same, a scalar, a channel [c,1,..,1], a
 * trailing row, or any mix of size-1 axes and lower ranks on both sides;
 * A and B swapped half of the time (never for PRelu, whose slope is B). */
static void soak_binary(size_t cap) {
    static const char *ops[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "PRelu"};
    const char *op = ops[uniform(0, 6)];
    int prelu = !strcmp(op, "PRelu");
    int rank = (int)uniform(1, 6), ra = rank, rb = rank;
    int64_t od[6], da[6], db[6];
    soak_shape(rank, od, cap);
    memcpy(da, od, sizeof od);
    memcpy(db, od, sizeof od);
    size_t k = uniform(0, (size_t)rank - 1), pattern = uniform(0, 5);
    switch (pattern) {
    case 0: break;
    case 1: /* a scalar of rank 0..rank */
        rb = (int)uniform(0, (size_t)rank);
        for (int i = 0; i < rb; i++)
            db[i] = 1;
        break;
    case 2: /* a channel: [c, 1, ..] at axis k, with or without the leading 1s */
        for (int i = 0; i < rank; i++)
            db[i] = i == (int)k ? od[i] : 1;
        if (check_unit() < 0.5) {
            rb = rank - (int)k;
            memmove(db, db + k, sizeof(int64_t) * (size_t)rb);
        }
        break;
    case 3: /* the trailing axes from k */
        rb = rank - (int)k;
        memmove(db, od + k, sizeof(int64_t) * (size_t)rb);
        break;
    default: /* size-1 axes anywhere, lower ranks, on one or both sides */
        rb = (int)uniform(0, (size_t)rank);
        for (int i = 0; i < rb; i++)
            db[i] = check_unit() < 0.5 ? 1 : od[rank - rb + i];
        if (!prelu && pattern == 5) {
            ra = (int)uniform(0, (size_t)rank);
            for (int i = 0; i < ra; i++)
                da[i] = check_unit() < 0.5 ? 1 : od[rank - ra + i];
        }
        break;
    }
    if (!prelu && check_unit() < 0.5) {
        int64_t t[6];
        memcpy(t, da, sizeof t);
        memcpy(da, db, sizeof t);
        memcpy(db, t, sizeof t);
        int tr = ra;
        ra = rb;
        rb = tr;
    }
    size_t na = numel_of(ra, da), nb = numel_of(rb, db);
    float *a = soak_floats(na, -4, 4), *b = soak_floats(nb, -4, 4);
    f_in in[2] = {f32_in(a, ra, da, 0), f32_in(b, rb, db, 0)};
    snprintf(soak_what, sizeof soak_what, " %s", op);
    what_dims("a", ra, da);
    what_dims("b", rb, db);
    soak_tol tol = {0, 0, 0, .scalar_exact = 1};
    soak_run(op, prelu ? 16 : 14, NULL, 0, in, 2, NULL, &tol);
    free(a);
    free(b);
}

/* Pow by a constant 2, 0.5 or 3 (float, or int64 2) of rank 0..2, or by a
 * run-time exponent (the reference). */
static void soak_pow(size_t cap) {
    int rank = (int)uniform(1, 6);
    int64_t d[6], ed[2] = {1, 1};
    soak_shape(rank, d, cap);
    size_t n = numel_of(rank, d);
    float *x = soak_floats(n, -10, 10);
    static const float ev[] = {2.0f, 0.5f, 3.0f};
    float e = ev[uniform(0, 2)];
    int64_t ei = 2;
    int erank = (int)uniform(0, 2), econst = check_unit() < 0.9; /* a draw per declarator */
    f_in in[2] = {f32_in(x, rank, d, 0), f32_in(&e, erank, ed, econst)};
    if (check_unit() < 0.2)
        in[1] =
            (f_in){.dtype = NNF_DTYPE_INT64, .rank = 1, .dims = {1}, .data = &ei, .constant = 1};
    snprintf(soak_what, sizeof soak_what, " Pow-15 exponent %s %g%s (rank %d)",
             in[1].dtype == NNF_DTYPE_INT64 ? "int64" : "float",
             in[1].dtype == NNF_DTYPE_INT64 ? 2.0 : (double)e, in[1].constant ? "" : " at run time",
             in[1].rank);
    what_dims("x", rank, d);
    soak_tol tol = {.rel = 1.2e-7};
    soak_run("Pow", 15, NULL, 0, in, 2, NULL, &tol);
    free(x);
}

/* Softmax/LogSoftmax opsets 1, 11 (rows from the axis on) and 13 (along the
 * axis; sometimes with extent-1 axes after it), any axis, negative too. */
static void soak_softmax(size_t cap) {
    int log = check_unit() < 0.5, rank = (int)uniform(1, 6);
    static const int opsets[] = {1, 11, 13, 13};
    int opset = opsets[uniform(0, 3)];
    int64_t d[6];
    soak_shape(rank, d, cap);
    int has_axis = check_unit() < 0.8 || (opset < 13 && rank < 2); /* the default is 1 */
    int64_t axis = (int64_t)uniform(0, 2 * (size_t)rank - 1) - rank;
    if (opset >= 13 && check_unit() < 0.3)
        for (int i = (int)(axis < 0 ? axis + rank : axis) + 1; i < rank; i++)
            d[i] = 1;
    size_t n = numel_of(rank, d);
    float *x = f_rand_buf(n, -20, 20);
    if (check_unit() < 0.4) {
        size_t every = uniform(5, 300); /* a draw a statement: seeds replay anywhere */
        f_specials(x, n, every, uniform(0, 5));
    }
    const char *op = log ? "LogSoftmax" : "Softmax";
    nnf_attr at = f_int("axis", axis);
    snprintf(soak_what, sizeof soak_what, " %s-%d axis %s%lld", op, opset,
             has_axis ? "" : "default, not ", (long long)axis);
    what_dims("x", rank, d);
    soak_tol tol = {.abs = log ? 1e-6 : 1e-7, .rel = 1e-6};
    f_in in = f32_in(x, rank, d, 0);
    soak_run(op, opset, &at, has_axis, &in, 1, NULL, &tol);
    free(x);
}

/* Reduce{Sum,Mean,Max,Min,L1,L2,SumSquare,LogSum} opsets 11, 13, 18: axes as an attribute or a
 * constant input (negative, any order), a trailing block or any subset, none
 * (all, or nothing with noop_with_empty_axes), keepdims on and off. */
static void soak_reduce(size_t cap) {
    static const int opsets[] = {11, 13, 18};
    size_t oi = uniform(0, sizeof reduce_ops / sizeof reduce_ops[0] - 1);
    const char *op = reduce_ops[oi].op;
    int kind = reduce_ops[oi].kind;
    int opset = opsets[uniform(0, 2)], rank = (int)uniform(1, 6);
    int axes_input = opset >= (kind == NNF_REDUCE_SUM ? 13 : 18);
    int64_t d[6], axes[6];
    soak_shape(rank, d, cap);
    int na = 0;
    if (check_unit() < 0.85) {
        int mask[6] = {0};
        if (check_unit() < 0.6) { /* a trailing block */
            for (int i = (int)uniform(0, (size_t)rank - 1); i < rank; i++)
                mask[i] = 1;
        } else {
            for (int i = 0; i < rank; i++)
                mask[i] = check_unit() < 0.5;
        }
        for (int i = 0; i < rank; i++)
            if (mask[i])
                axes[na++] = check_unit() < 0.5 ? i - rank : i;
        for (int i = na - 1; i > 0; i--) { /* any order */
            size_t j = uniform(0, (size_t)i);
            int64_t t = axes[i];
            axes[i] = axes[j];
            axes[j] = t;
        }
    }
    size_t n = numel_of(rank, d);
    int sum_like = kind == NNF_REDUCE_SUM || kind == NNF_REDUCE_MEAN;
    float *x = kind == NNF_REDUCE_MAX || kind == NNF_REDUCE_MIN
                   ? soak_floats(n, -1, 1)
                   : f_rand_buf(n, kind == NNF_REDUCE_LOG_SUM ? 0.1f : -1.0f, 1);
    if (sum_like && check_unit() < 0.4) {
        size_t every = uniform(2, 200); /* a draw a statement: seeds replay anywhere */
        f_specials(x, n, every, uniform(0, 5));
    }
    nnf_attr at[3];
    int n_at = 0, keep = check_unit() < 0.5, noop = axes_input && check_unit() < 0.3;
    if (check_unit() < 0.8)
        at[n_at++] = f_int("keepdims", keep);
    if (noop)
        at[n_at++] = f_int("noop_with_empty_axes", 1);
    f_in in[2] = {f32_in(x, rank, d, 0)};
    int n_in = 1;
    if (na && !axes_input)
        at[n_at++] = f_ints("axes", axes, na);
    if (na && axes_input) { /* constant: f_run sizes the output from the inferred shape */
        in[1] =
            (f_in){.dtype = NNF_DTYPE_INT64, .rank = 1, .dims = {na}, .data = axes, .constant = 1};
        n_in = 2;
    }
    snprintf(soak_what, sizeof soak_what, " %s-%d keepdims %s%s axes%s", op, opset,
             n_at && at[0].name[0] == 'k' ? (keep ? "1" : "0") : "default",
             noop ? " noop_with_empty_axes" : "", axes_input ? " (input)" : "");
    what_dims("", na, axes);
    what_dims("x", rank, d);
    /* Sum / Mean: 1e-6 a value summed; the others as test_reduce */
    soak_tol tol = {sum_like ? 1e-6 : reduce_abs_tol(kind, 1), reduce_rel_tol(kind), 0,
                    .row_sum = sum_like, .mean = kind == NNF_REDUCE_MEAN};
    soak_run(op, opset, at, n_at, in, n_in, NULL, &tol);
    free(x);
}

/* Transpose of ranks 1..6 by any permutation (or none: reversed), any
 * element size. */
static void soak_transpose(size_t cap) {
    int rank = (int)uniform(1, 6);
    int64_t d[6], perm[6];
    soak_shape(rank, d, cap);
    soak_perm(rank, perm);
    int has_perm = check_unit() < 0.9;
    nnf_dtype dt = soak_dtype();
    void *x = soak_bytes(numel_of(rank, d) * nnf_dtype_size(dt));
    f_in in = {.dtype = dt, .rank = rank, .data = x};
    memcpy(in.dims, d, sizeof d);
    nnf_attr at = f_ints("perm", perm, rank);
    snprintf(soak_what, sizeof soak_what, " Transpose %s", nnf_dtype_name(dt));
    what_dims("x", rank, d);
    if (has_perm)
        what_dims("perm", rank, perm);
    soak_tol tol = {.bytes = 1};
    soak_run("Transpose", 13, &at, has_perm, &in, 1, nnf_plan_transpose, &tol);
    free(x);
}

/* Concat of 1..5 inputs along any axis (negative too), extents 0 included. */
static void soak_concat(size_t cap) {
    int rank = (int)uniform(1, 6), n_in = (int)uniform(1, 5);
    int64_t d[6], axis = (int64_t)uniform(0, 2 * (size_t)rank - 1) - rank;
    int ax = (int)(axis < 0 ? axis + rank : axis);
    soak_shape(rank, d, cap / (size_t)n_in);
    nnf_dtype dt = soak_dtype();
    size_t es = nnf_dtype_size(dt), per_unit = numel_of(rank, d) / (size_t)d[ax];
    f_in in[5] = {{0}};
    void *bufs[5];
    snprintf(soak_what, sizeof soak_what, " Concat %s axis %lld", nnf_dtype_name(dt),
             (long long)axis);
    for (int i = 0; i < n_in; i++) {
        int64_t e = check_unit() < 0.1 ? 0 : soak_ext[uniform(0, N_SOAK_EXT - 1)];
        while ((size_t)e * per_unit > cap / (size_t)n_in && e > 1)
            e /= 2;
        in[i] = (f_in){.dtype = dt, .rank = rank};
        memcpy(in[i].dims, d, sizeof d);
        in[i].dims[ax] = e;
        bufs[i] = soak_bytes((size_t)e * per_unit * es);
        in[i].data = bufs[i];
        what_dims("in", rank, in[i].dims);
    }
    nnf_attr at = f_int("axis", axis);
    soak_tol tol = {.bytes = 1};
    soak_run("Concat", 13, &at, 1, in, n_in, nnf_plan_concat, &tol);
    for (int i = 0; i < n_in; i++)
        free(bufs[i]);
}

/* A slice bound: inside, just outside, or far outside the axis. */
static int64_t soak_bound(int64_t dim) {
    double u = check_unit();
    if (u < 0.05)
        return INT64_MAX;
    if (u < 0.1)
        return INT64_MIN;
    return (int64_t)uniform(0, 2 * (size_t)dim + 6) - dim - 3;
}

/* Slice-13 with constant starts/ends/axes/steps over any subset of the axes
 * (negative axes, steps -3..3, axes or steps omitted), and Slice-1. */
static void soak_slice(size_t cap) {
    int rank = (int)uniform(1, 6);
    int64_t d[6], st[6], en[6], ax[6], sp[6], perm[6];
    soak_shape(rank, d, cap);
    soak_perm(rank, perm);
    int n = (int)uniform(1, (size_t)rank), v1 = check_unit() < 0.15;
    int has_axes = v1 || check_unit() < 0.8, has_steps = !v1 && check_unit() < 0.8;
    static const int64_t steps[] = {1, 1, 1, 2, 3, -1, -1, -2, -3};
    for (int i = 0; i < n; i++) {
        int a = has_axes ? (int)perm[i] : i;
        ax[i] = check_unit() < 0.3 ? a - rank : a;
        sp[i] = has_steps ? steps[uniform(0, 8)] : 1;
        st[i] = soak_bound(d[a]);
        en[i] = soak_bound(d[a]);
        if (check_unit() < 0.6) { /* most of the time a non-empty range in the step's direction */
            int64_t lo = (int64_t)uniform(0, (size_t)d[a] - 1),
                    hi = (int64_t)uniform(0, (size_t)d[a]);
            if (hi <= lo)
                hi = lo + 1;
            st[i] = sp[i] > 0 ? lo : hi - 1;
            /* a negative step ending before element 0: -d - 1 or INT64_MIN (-1 is the last) */
            en[i] = sp[i] > 0 ? hi : lo > 0 ? lo - 1 : check_unit() < 0.5 ? INT64_MIN : -d[a] - 1;
        }
    }
    nnf_dtype dt = soak_dtype();
    void *x = soak_bytes(numel_of(rank, d) * nnf_dtype_size(dt));
    f_in in[5] = {{.dtype = dt, .rank = rank, .data = x}};
    memcpy(in[0].dims, d, sizeof d);
    const int64_t *args[4] = {st, en, ax, sp};
    for (int i = 0; i < 4; i++)
        in[i + 1] = (f_in){
            .dtype = NNF_DTYPE_INT64, .rank = 1, .dims = {n}, .data = args[i], .constant = 1};
    in[3].absent = !has_axes;
    in[4].absent = !has_steps;
    snprintf(soak_what, sizeof soak_what, " Slice-%d %s", v1 ? 1 : 13, nnf_dtype_name(dt));
    what_dims("x", rank, d);
    what_dims("starts", n, st);
    what_dims("ends", n, en);
    if (has_axes)
        what_dims("axes", n, ax);
    if (has_steps)
        what_dims("steps", n, sp);
    soak_tol tol = {.bytes = 1};
    if (v1) {
        nnf_attr at[3] = {f_ints("starts", st, n), f_ints("ends", en, n), f_ints("axes", ax, n)};
        soak_run("Slice", 1, at, 3, in, 1, nnf_plan_slice, &tol);
    } else {
        soak_run("Slice", 13, NULL, 0, in, has_steps ? 5 : has_axes ? 4 : 3, nnf_plan_slice, &tol);
    }
    free(x);
}

/* Resize-13 of ranks 2..6 by constant scales or sizes of the last three axes
 * (now and then an outer axis or cubic: the reference), every coordinate
 * transform and nearest mode, and Resize-18 with axes = the last two. */
static void soak_resize(size_t cap) {
    static const char *modes[] = {"nearest", "nearest", "linear", "linear", "cubic"};
    static const float sc[] = {0.25f, 0.5f, 0.7f, 1, 1, 1.3f, 1.5f, 2, 2, 3};
    int rank = (int)uniform(2, 6), by_sizes = check_unit() < 0.3;
    int opset = check_unit() < 0.2 ? 18 : 13, naxes = opset == 18 ? 2 : rank;
    int64_t d[6], od[6], sizes[6], four = naxes, axes[2] = {-2, rank - 1};
    float scales[6];
    do {
        soak_shape(rank, d, cap / 4);
        for (int i = 0; i < rank; i++) {
            /* the third-to-last axis often (a volume's depth: linear plans it) */
            double u = check_unit();
            int resized = i >= rank - 2 || u < (i == rank - 3 ? 0.3 : 0.05);
            scales[i] = resized ? sc[uniform(0, 9)] : 1;
            od[i] = (int64_t)floorf(scales[i] * (float)d[i]);
            if (by_sizes) {
                od[i] = resized ? (int64_t)uniform(1, 2 * (size_t)d[i] + 2) : d[i];
                sizes[i] = od[i];
            }
        }
    } while (numel_of(rank, od) == 0 || numel_of(rank, od) > cap);
    /* cubic takes 4 taps on every axis: the reference refuses rank 6 */
    const char *mode = modes[uniform(0, rank < 6 ? 4 : 3)], *coord = rs_coords[uniform(0, 5)],
               *nearest = rs_nearest[uniform(0, 3)];
    size_t n = numel_of(rank, d);
    float *x = soak_floats(n, -10, 10);
    nnf_attr at[4] = {f_str("mode", mode), f_str("coordinate_transformation_mode", coord),
                      f_str("nearest_mode", nearest), f_ints("axes", axes, 2)};
    int off = rank - naxes;
    f_in in[4] = {f32_in(x, rank, d, 0), {.absent = 1}, {.absent = 1}, {.absent = 1}};
    if (by_sizes)
        in[3] = (f_in){.dtype = NNF_DTYPE_INT64,
                       .rank = 1,
                       .dims = {four},
                       .data = sizes + off,
                       .constant = 1};
    else
        in[2] = f32_in(scales + off, 1, &four, 1);
    snprintf(soak_what, sizeof soak_what, " Resize-%d %s %s %s", opset, mode, coord, nearest);
    what_dims("x", rank, d);
    what_dims("y", rank, od);
    if (!by_sizes) {
        what_add(" scales [");
        for (int i = off; i < rank; i++)
            what_add(i > off ? ",%.9g" : "%.9g", (double)scales[i]);
        what_add("]");
    }
    soak_tol tol = {0};
    soak_run("Resize", opset, at, opset == 18 ? 4 : 3, in, by_sizes ? 4 : 3, nnf_plan_resize, &tol);
    free(x);
}

/* NNF_TEST_SOAK=N runs N more random cases from NNF_TEST_SEED (default 1),
 * each on every tier and on 1, 2 and 3 threads: every op above at ranks
 * 1..6 with extents of soak_ext (a few thousand elements, one case in four up
 * to 300000 so the drivers split the work), broadcasts of every kind, softmax
 * and reduction axes (negative, keepdims, opsets 1..18), transposes of any
 * permutation, concats and slices along any axis with any bounds and steps,
 * and resizes of ranks 2..6; NaN/Inf/-0/denormals mixed in. Checked: the
 * tolerances above, bit-identical results on 1, 2 and 3 threads, and
 * nothing written past the output. Off by default (CI runs the fixed cases);
 * for long runs after a kernel change:
 *   NNF_TEST_SOAK=1000 NNF_TEST_SEED=7 build/test_eltwise_fast */
static void soak(void) {
    long count = check_soak_begin();
    if (count <= 0)
        return;
    CHECK(nnf_threadpool_create(3, &g_pool3) == NNF_OK);
    for (long i = 0; i < count; i++) {
        size_t cap = soak_cap();
        soak_case = i;
        switch (uniform(0, 8)) {
        case 0: soak_unary(cap); break;
        case 1: soak_binary(cap); break;
        case 2: soak_pow(cap); break;
        case 3: soak_softmax(cap); break;
        case 4: soak_reduce(cap); break;
        case 5: soak_transpose(cap); break;
        case 6: soak_concat(cap); break;
        case 7: soak_slice(cap); break;
        default: soak_resize(cap); break;
        }
    }
    /* most cases take a fast kernel on every tier: a soak that stopped
     * reaching them would pass without checking anything */
    CHECK_MSG(count < 20 || soak_planned >= count, "soak: only %ld planned runs", soak_planned);
    nnf_threadpool_destroy(g_pool3);
    g_pool3 = NULL;
    check_soak_end(count, "random cases");
}

/* The tier's float32 <-> float16 conversions against nnf_f32_to_f16 /
 * nnf_f16_to_f32, bit for bit: every float16, and floats at and around every
 * float16 (the values, one and two ulps off, the ties between neighbours),
 * a sweep of all float bit patterns at a prime stride, NaN payloads, at
 * lengths with every tail. */
static void test_cast_f16(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    const nnf_ew_kernels *k = nnf_ew_kernels_for(isa);
    if (isa > NNF_ISA_SCALAR && !nnf_cpu_get()->f16c) {
        printf("%s: no F16C, its conversions not run\n", t);
        return;
    }
    enum { N = 65536 * 8 };
    uint16_t *h = malloc(N * sizeof *h), *h2 = malloc(N * sizeof *h2);
    float *f = malloc(N * sizeof *f), *f2 = malloc(N * sizeof *f2);
    uint32_t *bits = malloc(N * sizeof *bits);
    CHECK(h && h2 && f && f2 && bits);
    if (!h || !h2 || !f || !f2 || !bits)
        goto done;
    for (uint32_t i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    k->from_f16(h, f, 65536);
    size_t bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        float want = nnf_f16_to_f32((uint16_t)i);
        bad += memcmp(&f[i], &want, 4) != 0;
    }
    CHECK_MSG(bad == 0, "%s float16 -> float32: %zu of 65536 differ", t, bad);
    /* floats around every float16: its value, +-1 and +-2 ulps, the tie to
     * the next one and +-1 ulp of it */
    size_t n = 0;
    for (uint32_t i = 0; i < 65536 && n + 8 <= N; i++) {
        float v = nnf_f16_to_f32((uint16_t)i), next = nnf_f16_to_f32((uint16_t)(i + 1));
        uint32_t b, c;
        memcpy(&b, &v, 4);
        float mid = (float)(((double)v + (double)next) / 2);
        memcpy(&c, &mid, 4);
        uint32_t cand[8] = {b, b + 1, b - 1, b + 2, b - 2, c, c + 1, c - 1};
        for (int j = 0; j < 8; j++)
            bits[n++] = cand[j];
    }
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) { /* every bit pattern at a prime stride, NaNs included */
            n = 0;
            for (uint64_t b = 0; b < ((uint64_t)1 << 32) && n < N; b += 8191)
                bits[n++] = (uint32_t)b;
        }
        memcpy(f, bits, n * 4);
        k->to_f16(f, h, n);
        bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += h[i] != nnf_f32_to_f16(f[i]);
        CHECK_MSG(bad == 0, "%s float32 -> float16 (%s): %zu of %zu differ", t,
                  pass ? "stride sweep" : "around every float16", bad, n);
    }
    /* every length to 17: the tails */
    for (size_t len = 1; len <= 17; len++) {
        memset(h2, 0xAB, 32 * sizeof *h2);
        k->to_f16(f + 3, h2, len);
        bad = h2[len] != 0xABAB;
        for (size_t i = 0; i < len; i++)
            bad += h2[i] != nnf_f32_to_f16(f[3 + i]);
        memset(f2, 0xAB, 32 * sizeof *f2);
        k->from_f16(h + 5, f2, len);
        uint32_t tail;
        memcpy(&tail, &f2[len], 4);
        bad += tail != 0xABABABABu;
        for (size_t i = 0; i < len; i++) {
            float want = nnf_f16_to_f32(h[5 + i]);
            bad += memcmp(&f2[i], &want, 4) != 0;
        }
        CHECK_MSG(bad == 0, "%s float16 conversions, length %zu", t, len);
    }
done:
    free(h);
    free(h2);
    free(f);
    free(f2);
    free(bits);
}

/* The reference's ArgMax/ArgMin loop on a strided line. */
static int64_t arg_ref(const float *x, size_t n, size_t ld, int is_max, int last) {
    int64_t best = 0;
    for (size_t k = 1; k < n; k++) {
        float a = x[k * ld], b = x[(size_t)best * ld];
        if ((is_max ? a > b : a < b) || (last && a == b))
            best = (int64_t)k;
    }
    return best;
}

/* The tier's ArgMax/ArgMin rows and side-by-side columns against the
 * reference loop: lengths 1 to 40 and 1000, few distinct values (ties), NaN
 * (at index 0 too), -0 beside +0, infinities, rows of only NaN or -inf. */
static void test_arg(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    const nnf_ew_kernels *k = nnf_ew_kernels_for(isa);
    enum { MAXN = 1000, COLS = 19 };
    float *x = malloc(MAXN * COLS * sizeof *x);
    CHECK(x != NULL);
    if (!x)
        return;
    uint64_t state = 99;
    size_t bad = 0, runs = 0;
    for (int variant = 0; variant < 6; variant++)
        for (size_t n = 1; n <= MAXN; n = n < 40 ? n + 1 : MAXN + 1) {
            size_t len = n;
            for (size_t i = 0; i < len * COLS; i++) {
                state = state * 6364136223846793005ull + 1442695040888963407ull;
                int r = (int)(state >> 59); /* 0..31 */
                float v = (float)(r % 7) - 3.0f;
                if (variant == 1 && r == 0)
                    v = NAN;
                if (variant == 2 && r < 4)
                    v = r & 1 ? -0.0f : 0.0f;
                if (variant == 3)
                    v = r < 3 ? INFINITY : r < 6 ? -INFINITY : v;
                if (variant == 4)
                    v = NAN;
                if (variant == 5)
                    v = r < 16 ? -INFINITY : NAN;
                x[i] = v;
            }
            if (variant == 1)
                x[0] = NAN; /* index 0 NaN on the first row / column */
            for (int is_max = 0; is_max < 2; is_max++)
                for (int last = 0; last < 2; last++) {
                    for (size_t c = 0; c < COLS; c++) {
                        const float *row = x + c * len;
                        bad += k->arg_row(row, len, is_max, last) !=
                               arg_ref(row, len, 1, is_max, last);
                    }
                    int64_t y[COLS];
                    k->arg_cols(x, len, COLS, COLS, is_max, last, y);
                    for (size_t c = 0; c < COLS; c++)
                        bad += y[c] != arg_ref(x + c, len, COLS, is_max, last);
                    runs += 2 * COLS;
                }
        }
    CHECK_MSG(bad == 0, "%s ArgMax/ArgMin: %zu of %zu lines differ from the reference", t, bad,
              runs);
    free(x);
}

/* nnf_stream_copy against memcpy at every alignment of dst and src within
 * 16 bytes and lengths around the 16- and 64-byte steps; the bytes around
 * the copy untouched. */
static void test_stream_copy(void) {
    uint8_t src[320], dst[320], want[320];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)(i * 37 + 11);
    static const size_t lens[] = {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 200, 255};
    for (size_t d = 0; d < 16; d++)
        for (size_t s = 0; s < 16; s += 5)
            for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
                memset(dst, 0xA5, sizeof dst);
                memset(want, 0xA5, sizeof want);
                memcpy(want + d, src + s, lens[l]);
                nnf_stream_copy(dst + d, src + s, lens[l]);
                nnf_stream_fence();
                CHECK_MSG(!memcmp(dst, want, sizeof dst), "stream copy dst+%zu src+%zu len %zu", d,
                          s, lens[l]);
            }
}

/* select32 (Where) against its definition at every length to 40 and 1000,
 * every stride pattern (0 or 1 for the condition and both values), with
 * condition bytes other than 0 and 1 and NaN payloads in the values; the
 * element past the end untouched. */
static void test_select(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    const nnf_ew_kernels *k = nnf_ew_kernels_for(isa);
    enum { MAXN = 1000 };
    uint8_t c[MAXN];
    uint32_t a[MAXN], b[MAXN], y[MAXN + 1];
    uint64_t state = 7;
    for (size_t i = 0; i < MAXN; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        c[i] = (uint8_t)(state >> 61 == 0 ? 0 : state >> 61 == 1 ? 1 : (state >> 40) & 0xff);
        a[i] = (uint32_t)(state >> 20) | 0x7f800001u; /* NaN bits */
        b[i] = (uint32_t)(state >> 8);
    }
    size_t bad = 0, runs = 0;
    for (size_t n = 1; n <= MAXN; n = n < 40 ? n + 1 : n < MAXN ? MAXN : MAXN + 1)
        for (int pat = 0; pat < 8; pat++) {
            size_t cs = pat & 1, as = (pat >> 1) & 1, bs = (pat >> 2) & 1;
            y[n] = 0xdeadbeefu;
            k->select32(c, cs, a, as, b, bs, y, n);
            for (size_t i = 0; i < n; i++)
                bad += y[i] != (c[i * cs] ? a[i * as] : b[i * bs]);
            bad += y[n] != 0xdeadbeefu;
            runs++;
        }
    CHECK_MSG(bad == 0, "%s select32: %zu wrong elements over %zu runs", t, bad, runs);
}

int main(void) {
    const nnf_cpu *cpu = nnf_cpu_get();
    if (nnf_threadpool_create(2, &g_pool) != NNF_OK)
        return 1;
    test_classify();
    test_perm_reduce();
    test_resize_tables();
    test_resize_plan();
    for (int t = NNF_ISA_SCALAR; t <= (int)cpu->max_isa; t++) {
        nnf_isa isa = nnf_cpu_force_isa((nnf_isa)t);
        printf("tier %s\n", nnf_isa_name(isa));
        test_unary(isa);
        test_binary(isa);
        test_softmax(isa);
        test_reduce(isa);
        test_transpose(isa);
        test_concat(isa);
        test_resize(isa);
        test_resize3d(isa);
        test_slice(isa);
        test_cast_f16(isa);
        test_arg(isa);
        test_select(isa);
    }
    /* again with every output streamed (kernels/stream.h): the drivers'
     * blocks through the L1 buffer, at every size and tier, in place too */
    test_stream_copy();
    nnf_stream_force(1);
    for (int t = NNF_ISA_SCALAR; t <= (int)cpu->max_isa; t++) {
        nnf_isa isa = nnf_cpu_force_isa((nnf_isa)t);
        printf("tier %s, outputs streamed\n", nnf_isa_name(isa));
        test_unary(isa);
        test_binary(isa);
    }
    nnf_stream_force(0);
    if (cpu->max_isa < NNF_ISA_AVX512)
        printf("AVX-512 tier not available on this CPU: its kernels are compiled, not run\n");
    /* every planned unary and binary kernel also ran with its output over
     * each input it may overwrite (fast_op_harness.h), at every size and tier */
    printf("runs with the output over an input: %d\n", f_in_place_total);
    CHECK(f_in_place_total >= 400);
    soak();
    nnf_threadpool_destroy(g_pool);
    TEST_MAIN_END();
}

/* Reference kernels of the element-wise, activation and softmax operators,
 * run through the op table (init -> infer -> ref) against hand-computed
 * values: broadcasting (scalar, row, column, both sides, three ways), rank 0,
 * empty tensors, integer corner cases, opset-dependent attributes. */
#include "check.h"
#include "kernels/ref/activation.h"
#include "ref_op_harness.h"

#include <float.h>
#include <stdint.h>

#define D(...) ((int64_t[]){__VA_ARGS__})
#define FV(...) ((float[]){__VA_ARGS__})
#define NF(...) (sizeof((float[]){__VA_ARGS__}) / sizeof(float))

static h_in t_f32(int rank, const int64_t *dims, const float *data) {
    h_in t = {.dtype = NNF_DTYPE_FLOAT32, .rank = rank, .data = data};
    for (int i = 0; i < rank; i++)
        t.dims[i] = dims[i];
    return t;
}
static h_in t_typed(nnf_dtype dt, int rank, const int64_t *dims, const void *data) {
    h_in t = t_f32(rank, dims, NULL);
    t.dtype = dt;
    t.data = data;
    return t;
}
static const h_in absent = {.absent = 1};

/* Run a binary float op and compare. */
static void bin_f32(const char *op, int opset, h_in a, h_in b, int rank, const int64_t *dims,
                    const float *want, size_t n) {
    h_in ins[2] = {a, b};
    h_out o = h_run(op, opset, NULL, 0, ins, 2);
    CHECK_MSG(o.status == NNF_OK, "%s failed at %s", op, o.stage ? o.stage : "-");
    CHECK_MSG(h_shape_is(&o, rank, dims), "%s shape", op);
    CHECK_MSG(h_match_f32(&o, want, n, 1e-6), "%s values", op);
    h_free(&o);
}

static void test_broadcast_shapes(void) {
    /* same shape */
    bin_f32("Add", 14, t_f32(2, D(2, 3), FV(1, 2, 3, 4, 5, 6)),
            t_f32(2, D(2, 3), FV(10, 20, 30, 40, 50, 60)), 2, D(2, 3), FV(11, 22, 33, 44, 55, 66),
            6);
    /* scalar (rank 0) on the right and on the left */
    bin_f32("Sub", 14, t_f32(2, D(2, 3), FV(1, 2, 3, 4, 5, 6)), t_f32(0, NULL, FV(1)), 2, D(2, 3),
            FV(0, 1, 2, 3, 4, 5), 6);
    bin_f32("Sub", 14, t_f32(0, NULL, FV(10)), t_f32(2, D(2, 3), FV(1, 2, 3, 4, 5, 6)), 2, D(2, 3),
            FV(9, 8, 7, 6, 5, 4), 6);
    /* row */
    bin_f32("Mul", 14, t_f32(2, D(2, 3), FV(1, 2, 3, 4, 5, 6)), t_f32(1, D(3), FV(1, 10, 100)), 2,
            D(2, 3), FV(1, 20, 300, 4, 50, 600), 6);
    /* column */
    bin_f32("Div", 14, t_f32(2, D(2, 3), FV(2, 4, 6, 8, 10, 12)), t_f32(2, D(2, 1), FV(2, 4)), 2,
            D(2, 3), FV(1, 2, 3, 2, 2.5f, 3), 6);
    /* both sides broadcast */
    bin_f32("Add", 14, t_f32(2, D(2, 1), FV(10, 20)), t_f32(2, D(1, 3), FV(1, 2, 3)), 2, D(2, 3),
            FV(11, 12, 13, 21, 22, 23), 6);
    /* middle dim broadcast (not mergeable with its neighbours) */
    bin_f32("Add", 14, t_f32(3, D(2, 2, 2), FV(0, 1, 2, 3, 4, 5, 6, 7)),
            t_f32(3, D(2, 1, 2), FV(10, 20, 30, 40)), 3, D(2, 2, 2),
            FV(10, 21, 12, 23, 34, 45, 36, 47), 8);
    /* rank 0 with rank 0 */
    bin_f32("Mul", 14, t_f32(0, NULL, FV(3)), t_f32(0, NULL, FV(4)), 0, NULL, FV(12), 1);
    /* empty tensor broadcast against a row */
    {
        h_in ins[2] = {t_f32(2, D(0, 3), FV(0)), t_f32(1, D(3), FV(1, 2, 3))};
        h_out o = h_run("Add", 14, NULL, 0, ins, 2);
        CHECK(o.status == NNF_OK && h_shape_is(&o, 2, D(0, 3)) && o.numel == 0);
        h_free(&o);
        /* [0] against [1] -> [0] */
        h_in ins2[2] = {t_f32(1, D(1), FV(1)), t_f32(1, D(0), FV(0))};
        o = h_run("Add", 14, NULL, 0, ins2, 2);
        CHECK(o.status == NNF_OK && h_shape_is(&o, 1, D(0)));
        h_free(&o);
    }
    /* incompatible */
    {
        h_in ins[2] = {t_f32(1, D(3), FV(1, 2, 3)), t_f32(1, D(2), FV(1, 2))};
        h_out o = h_run("Add", 14, NULL, 0, ins, 2);
        CHECK(o.status == NNF_ERR_SHAPE && !strcmp(o.stage, "infer"));
        CHECK(strstr(nnf_last_error(), "n0") != NULL);
        h_free(&o);
    }
    /* symbolic dims survive inference */
    {
        h_in ins[2] = {t_f32(2, D(-1, 3), NULL), t_f32(1, D(3), NULL)};
        h_out o = h_run_ex("Add", 14, NULL, 0, ins, 2, 1);
        CHECK(o.status == NNF_OK && h_shape_is(&o, 2, D(-1, 3)));
    }
}

static void test_legacy_broadcast(void) {
    /* opset 6: B [3] aligned with A's axis 1 of [2,3,2] */
    nnf_attr at[2] = {h_int("broadcast", 1), h_int("axis", 1)};
    h_in ins[2] = {t_f32(3, D(2, 3, 2), FV(0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1)),
                   t_f32(1, D(3), FV(10, 20, 30))};
    h_out o = h_run("Add", 6, at, 2, ins, 2);
    CHECK(h_shape_is(&o, 3, D(2, 3, 2)));
    CHECK(h_match_f32(&o, FV(10, 10, 20, 20, 30, 30, 11, 11, 21, 21, 31, 31), 12, 0));
    h_free(&o);
    /* without broadcast=1 the shapes must match */
    o = h_run("Add", 6, NULL, 0, ins, 2);
    CHECK(o.status == NNF_ERR_SHAPE);
    h_free(&o);
    /* broadcast=1 without axis: trailing alignment */
    nnf_attr at1[1] = {h_int("broadcast", 1)};
    h_in ins2[2] = {t_f32(2, D(2, 2), FV(1, 2, 3, 4)), t_f32(1, D(2), FV(10, 20))};
    o = h_run("Mul", 1, at1, 1, ins2, 2);
    CHECK(h_match_f32(&o, FV(10, 40, 30, 80), 4, 0));
    h_free(&o);
}

static void test_integer_arith(void) {
    int32_t a[] = {7, -7, 7, -7, 5, INT32_MIN, INT32_MAX};
    int32_t b[] = {2, 2, -2, -2, 0, -1, 1};
    h_in ins[2] = {t_typed(NNF_DTYPE_INT32, 1, D(7), a), t_typed(NNF_DTYPE_INT32, 1, D(7), b)};
    h_out o = h_run("Div", 14, NULL, 0, ins, 2);
    int32_t want_div[] = {3, -3, -3, 3, 0, INT32_MIN, INT32_MAX};
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT32, want_div, 7));
    h_free(&o);
    o = h_run("Add", 14, NULL, 0, ins, 2);
    int32_t want_add[] = {9, -5, 5, -9, 5, INT32_MAX, INT32_MIN}; /* wraps */
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT32, want_add, 7));
    h_free(&o);

    /* Mod: fmod=0 takes the divisor's sign, fmod=1 the dividend's */
    int64_t ma[] = {-7, 7, -7, 7, 6, 5};
    int64_t mb[] = {3, -3, -3, 3, 3, 0};
    h_in mins[2] = {t_typed(NNF_DTYPE_INT64, 1, D(6), ma), t_typed(NNF_DTYPE_INT64, 1, D(6), mb)};
    o = h_run("Mod", 13, NULL, 0, mins, 2);
    int64_t want_mod[] = {2, -2, -1, 1, 0, 0};
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT64, want_mod, 6));
    h_free(&o);
    nnf_attr fm[1] = {h_int("fmod", 1)};
    o = h_run("Mod", 13, fm, 1, mins, 2);
    int64_t want_fmod[] = {-1, 1, -1, 1, 0, 0};
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT64, want_fmod, 6));
    h_free(&o);
    /* float Mod: fmod=1 is C fmod; fmod=0 (defined by Mod-28) takes the divisor's sign */
    h_in fins[2] = {t_f32(1, D(4), FV(-7.5f, 7.5f, 4, 3)), t_f32(1, D(4), FV(2, -2, -2, INFINITY))};
    o = h_run("Mod", 13, fm, 1, fins, 2);
    CHECK(h_match_f32(&o, FV(-1.5f, 1.5f, 0, 3), 4, 0));
    h_free(&o);
    o = h_run("Mod", 28, NULL, 0, fins, 2);
    CHECK(h_match_f32(&o, FV(0.5f, -0.5f, -0.0f, 3), 4, 0));
    CHECK(o.status == NNF_OK && signbit(((float *)o.data)[2]));
    h_free(&o);

    /* narrow and unsigned integer types */
    h_in i8[2] = {t_typed(NNF_DTYPE_INT8, 1, D(3), (int8_t[]){100, -128, -7}),
                  t_typed(NNF_DTYPE_INT8, 1, D(3), (int8_t[]){100, -1, 2})};
    o = h_run("Add", 14, NULL, 0, i8, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT8, (int8_t[]){-56, 127, -5}, 3));
    h_free(&o);
    o = h_run("Div", 14, NULL, 0, i8, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT8, (int8_t[]){1, -128, -3}, 3));
    h_free(&o);
    h_in u16[2] = {t_typed(NNF_DTYPE_UINT16, 1, D(3), (uint16_t[]){65535, 3, 7}),
                   t_typed(NNF_DTYPE_UINT16, 1, D(3), (uint16_t[]){65535, 5, 0})};
    o = h_run("Mul", 14, NULL, 0, u16, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_UINT16, (uint16_t[]){1, 15, 0}, 3));
    h_free(&o);
    o = h_run("Sub", 14, NULL, 0, u16, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_UINT16, (uint16_t[]){0, 65534, 7}, 3));
    h_free(&o);
    o = h_run("Less", 13, NULL, 0, u16, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_BOOL, (uint8_t[]){0, 1, 0}, 3));
    h_free(&o);
    /* Mod does not exist before opset 10 */
    CHECK(nnf_op_find("", "Mod", 9, NULL) == NULL);

    /* int Max/Min */
    h_in mm[2] = {t_typed(NNF_DTYPE_INT64, 1, D(3), (int64_t[]){1, 5, -3}),
                  t_typed(NNF_DTYPE_INT64, 0, NULL, (int64_t[]){2})};
    o = h_run("Max", 13, NULL, 0, mm, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT64, (int64_t[]){2, 5, 2}, 3));
    h_free(&o);

    /* mixed int32 + int64 is rejected (Pow aside) */
    h_in mix[2] = {t_typed(NNF_DTYPE_INT32, 1, D(1), a), t_typed(NNF_DTYPE_INT64, 1, D(1), ma)};
    o = h_run("Add", 14, NULL, 0, mix, 2);
    CHECK(o.status == NNF_ERR_UNSUPPORTED);
    h_free(&o);
}

static void test_pow(void) {
    bin_f32("Pow", 15, t_f32(1, D(3), FV(2, 4, -2)), t_f32(1, D(3), FV(3, 0.5f, 2)), 1, D(3),
            FV(8, 2, 4), 3);
    /* float base, int64 exponent */
    h_in a[2] = {t_f32(1, D(3), FV(2, 3, -2)), t_typed(NNF_DTYPE_INT64, 0, NULL, (int64_t[]){3})};
    h_out o = h_run("Pow", 15, NULL, 0, a, 2);
    CHECK(h_match_f32(&o, FV(8, 27, -8), 3, 0));
    h_free(&o);
    /* integer base and exponent, negative exponents truncate */
    h_in b[2] = {t_typed(NNF_DTYPE_INT32, 1, D(5), (int32_t[]){2, -3, 2, -1, 1}),
                 t_typed(NNF_DTYPE_INT32, 1, D(5), (int32_t[]){10, 3, -1, -3, -5})};
    o = h_run("Pow", 15, NULL, 0, b, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT32, (int32_t[]){1024, -27, 0, -1, 1}, 5));
    h_free(&o);
    /* int base, float exponent: truncated */
    h_in c[2] = {t_typed(NNF_DTYPE_INT64, 1, D(2), (int64_t[]){2, 9}), t_f32(0, NULL, FV(0.5f))};
    o = h_run("Pow", 15, NULL, 0, c, 2);
    CHECK(o.dtype == NNF_DTYPE_INT64 && h_match_bytes(&o, NNF_DTYPE_INT64, (int64_t[]){1, 3}, 2));
    h_free(&o);
}

static void test_variadic(void) {
    h_in ins[3] = {t_f32(2, D(2, 1), FV(1, 5)), t_f32(1, D(3), FV(0, 3, 6)), t_f32(0, NULL, FV(2))};
    h_out o = h_run("Max", 13, NULL, 0, ins, 3);
    CHECK(h_shape_is(&o, 2, D(2, 3)));
    CHECK(h_match_f32(&o, FV(2, 3, 6, 5, 5, 6), 6, 0));
    h_free(&o);
    o = h_run("Min", 13, NULL, 0, ins, 3);
    CHECK(h_match_f32(&o, FV(0, 1, 1, 0, 2, 2), 6, 0));
    h_free(&o);
    o = h_run("Sum", 13, NULL, 0, ins, 3);
    CHECK(h_match_f32(&o, FV(3, 6, 9, 7, 10, 13), 6, 0));
    h_free(&o);
    o = h_run("Mean", 13, NULL, 0, ins, 3);
    CHECK(h_match_f32(&o, FV(1, 2, 3, 7.0f / 3, 10.0f / 3, 13.0f / 3), 6, 1e-6));
    h_free(&o);
    o = h_run("Sum", 13, NULL, 0, ins, 1);
    CHECK(h_shape_is(&o, 2, D(2, 1)) && h_match_f32(&o, FV(1, 5), 2, 0));
    h_free(&o);
    /* NaN propagates through Max like numpy.maximum */
    h_in nan_in[2] = {t_f32(1, D(2), FV(NAN, 1)), t_f32(1, D(2), FV(1, NAN))};
    o = h_run("Max", 13, NULL, 0, nan_in, 2);
    CHECK(h_match_f32(&o, FV(NAN, NAN), 2, 0));
    h_free(&o);
}

static void test_compare_logic(void) {
    h_in c[2] = {t_f32(1, D(3), FV(1, 2, 3)), t_f32(0, NULL, FV(2))};
    struct {
        const char *op;
        uint8_t want[3];
    } cases[] = {{"Equal", {0, 1, 0}},
                 {"Less", {1, 0, 0}},
                 {"Greater", {0, 0, 1}},
                 {"LessOrEqual", {1, 1, 0}},
                 {"GreaterOrEqual", {0, 1, 1}}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        h_out o = h_run(cases[i].op, 16, NULL, 0, c, 2);
        CHECK_MSG(h_match_bytes(&o, NNF_DTYPE_BOOL, cases[i].want, 3), "%s", cases[i].op);
        h_free(&o);
    }
    h_in ci[2] = {t_typed(NNF_DTYPE_INT64, 2, D(2, 1), (int64_t[]){1, 3}),
                  t_typed(NNF_DTYPE_INT64, 1, D(2), (int64_t[]){1, 3})};
    h_out o = h_run("Equal", 13, NULL, 0, ci, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_BOOL, (uint8_t[]){1, 0, 0, 1}, 4));
    h_free(&o);

    uint8_t a[] = {0, 0, 1, 1}, b[] = {0, 1, 0, 1};
    h_in l[2] = {t_typed(NNF_DTYPE_BOOL, 1, D(4), a), t_typed(NNF_DTYPE_BOOL, 1, D(4), b)};
    o = h_run("And", 7, NULL, 0, l, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_BOOL, (uint8_t[]){0, 0, 0, 1}, 4));
    h_free(&o);
    o = h_run("Or", 7, NULL, 0, l, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_BOOL, (uint8_t[]){0, 1, 1, 1}, 4));
    h_free(&o);
    o = h_run("Xor", 7, NULL, 0, l, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_BOOL, (uint8_t[]){0, 1, 1, 0}, 4));
    h_free(&o);
    o = h_run("Equal", 13, NULL, 0, l, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_BOOL, (uint8_t[]){1, 0, 0, 1}, 4));
    h_free(&o);
    o = h_run("Not", 1, NULL, 0, l, 1);
    CHECK(h_match_bytes(&o, NNF_DTYPE_BOOL, (uint8_t[]){1, 1, 0, 0}, 4));
    h_free(&o);
    /* logic on floats is a type error */
    o = h_run("And", 7, NULL, 0, c, 2);
    CHECK(o.status == NNF_ERR_UNSUPPORTED);
    h_free(&o);

    /* BitShift */
    h_in s[2] = {t_typed(NNF_DTYPE_UINT8, 1, D(3), (uint8_t[]){16, 4, 1}),
                 t_typed(NNF_DTYPE_UINT8, 1, D(3), (uint8_t[]){1, 2, 9})};
    nnf_attr dl[1] = {h_str("direction", "LEFT")}, dr[1] = {h_str("direction", "RIGHT")};
    o = h_run("BitShift", 11, dl, 1, s, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_UINT8, (uint8_t[]){32, 16, 0}, 3));
    h_free(&o);
    o = h_run("BitShift", 11, dr, 1, s, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_UINT8, (uint8_t[]){8, 1, 0}, 3));
    h_free(&o);
    /* BitShift-28: signed, arithmetic right shift, out-of-range counts */
    h_in ss[2] = {t_typed(NNF_DTYPE_INT8, 1, D(4), (int8_t[]){-16, -16, 64, -1}),
                  t_typed(NNF_DTYPE_INT8, 1, D(4), (int8_t[]){2, 8, 1, -1})};
    o = h_run("BitShift", 28, dr, 1, ss, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT8, (int8_t[]){-4, -1, 32, -1}, 4));
    h_free(&o);
    o = h_run("BitShift", 28, dl, 1, ss, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT8, (int8_t[]){-64, 0, -128, 0}, 4));
    h_free(&o);
    nnf_attr du[1] = {h_str("direction", "UP")};
    o = h_run("BitShift", 11, du, 1, s, 2);
    CHECK(o.status == NNF_ERR_UNSUPPORTED && !strcmp(o.stage, "init"));
    CHECK(strstr(nnf_last_error(), "direction") != NULL);
    h_free(&o);
}

static void test_where_prelu(void) {
    /* cond [2,1], X [3], Y scalar -> [2,3] */
    h_in w[3] = {t_typed(NNF_DTYPE_BOOL, 2, D(2, 1), (uint8_t[]){1, 0}),
                 t_f32(1, D(3), FV(1, 2, 3)), t_f32(0, NULL, FV(-1))};
    h_out o = h_run("Where", 16, NULL, 0, w, 3);
    CHECK(h_shape_is(&o, 2, D(2, 3)));
    CHECK(h_match_f32(&o, FV(1, 2, 3, -1, -1, -1), 6, 0));
    h_free(&o);
    h_in wi[3] = {t_typed(NNF_DTYPE_BOOL, 1, D(3), (uint8_t[]){1, 0, 1}),
                  t_typed(NNF_DTYPE_INT64, 1, D(3), (int64_t[]){1, 2, 3}),
                  t_typed(NNF_DTYPE_INT64, 1, D(3), (int64_t[]){-1, -2, -3})};
    o = h_run("Where", 16, NULL, 0, wi, 3);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT64, (int64_t[]){1, -2, 3}, 3));
    h_free(&o);
    /* condition must be bool */
    w[0] = t_f32(2, D(2, 1), FV(1, 0));
    o = h_run("Where", 16, NULL, 0, w, 3);
    CHECK(o.status == NNF_ERR_INVALID_MODEL);
    h_free(&o);

    /* PRelu: slope [2,1,1] over NCHW [1,2,1,2] */
    h_in p[2] = {t_f32(4, D(1, 2, 1, 2), FV(-1, 2, -3, 4)), t_f32(3, D(2, 1, 1), FV(0.1f, 0.5f))};
    o = h_run("PRelu", 16, NULL, 0, p, 2);
    CHECK(h_shape_is(&o, 4, D(1, 2, 1, 2)));
    CHECK(h_match_f32(&o, FV(-0.1f, 2, -1.5f, 4), 4, 1e-7));
    h_free(&o);
    /* slope may not grow X */
    h_in p2[2] = {t_f32(1, D(2), FV(-1, 1)), t_f32(2, D(2, 2), FV(1, 1, 1, 1))};
    o = h_run("PRelu", 16, NULL, 0, p2, 2);
    CHECK(o.status == NNF_ERR_SHAPE);
    h_free(&o);
}

/* Run a unary float op over xs and compare with want. */
static void un_f32(const char *op, int opset, nnf_attr *at, int n_at, const float *xs,
                   const float *want, size_t n, double tol) {
    h_in in = t_f32(1, D((int64_t)n), xs);
    h_out o = h_run(op, opset, at, n_at, &in, 1);
    CHECK_MSG(o.status == NNF_OK && h_match_f32(&o, want, n, tol), "%s", op);
    h_free(&o);
}

static void test_unary(void) {
    const double t = 2e-6;
    un_f32("Relu", 14, NULL, 0, FV(-1, 0, 2, NAN), FV(0, 0, 2, NAN), 4, 0);
    nnf_attr lr[1] = {h_float("alpha", 0.1f)};
    un_f32("LeakyRelu", 16, lr, 1, FV(-2, 3), FV(-0.2f, 3), 2, t);
    un_f32("LeakyRelu", 16, NULL, 0, FV(-2, 3), FV(-0.02f, 3), 2, t);
    un_f32("Elu", 6, NULL, 0, FV(-1, 2), FV(-0.63212056f, 2), 2, t);
    un_f32("Selu", 6, NULL, 0, FV(-1, 2), FV(-1.1113307f, 2.1014020f), 2, t);
    un_f32("Celu", 12, NULL, 0, FV(-1, 2), FV(-0.63212056f, 2), 2, t);
    nnf_attr ca[1] = {h_float("alpha", 2.0f)};
    un_f32("Celu", 12, ca, 1, FV(-2), FV(-1.2642411f), 1, t); /* 2*(e^-1 - 1) */
    un_f32("ThresholdedRelu", 10, NULL, 0, FV(0.5f, 1, 1.5f), FV(0, 0, 1.5f), 3, 0);
    un_f32("Sigmoid", 13, NULL, 0, FV(0, 2, -2, 100, -100),
           FV(0.5f, 0.88079708f, 0.11920292f, 1, 0), 5, t);
    un_f32("HardSigmoid", 6, NULL, 0, FV(-3, 0, 1, 3), FV(0, 0.5f, 0.7f, 1), 4, t);
    un_f32("HardSwish", 14, NULL, 0, FV(-4, 1, 4), FV(0, 0.6666667f, 4), 3, t);
    un_f32("Tanh", 13, NULL, 0, FV(0, 1, -20), FV(0, 0.76159416f, -1), 3, t);
    un_f32("Softplus", 1, NULL, 0, FV(0, 1, 100, -100), FV(0.69314718f, 1.3132617f, 100, 0), 4, t);
    un_f32("Softsign", 1, NULL, 0, FV(1, -3), FV(0.5f, -0.75f), 2, t);
    un_f32("Mish", 18, NULL, 0, FV(1, -1), FV(0.86509839f, -0.30340147f), 2, t);
    un_f32("Gelu", 20, NULL, 0, FV(1, -1), FV(0.84134475f, -0.15865525f), 2, t);
    nnf_attr gt[1] = {h_str("approximate", "tanh")};
    un_f32("Gelu", 20, gt, 1, FV(1, -1), FV(0.84119199f, -0.15880801f), 2, t);
    un_f32("Erf", 13, NULL, 0, FV(0, 1), FV(0, 0.84270079f), 2, t);
    un_f32("Exp", 13, NULL, 0, FV(0, 1), FV(1, 2.7182818f), 2, t);
    un_f32("Log", 13, NULL, 0, FV(1, 0, -1), FV(0, -INFINITY, NAN), 3, t);
    un_f32("Sqrt", 13, NULL, 0, FV(4, 2), FV(2, 1.4142136f), 2, t);
    un_f32("Reciprocal", 13, NULL, 0, FV(4, -0.5f), FV(0.25f, -2), 2, t);
    un_f32("Neg", 13, NULL, 0, FV(4, -0.5f), FV(-4, 0.5f), 2, 0);
    un_f32("Abs", 13, NULL, 0, FV(4, -0.5f), FV(4, 0.5f), 2, 0);
    un_f32("Floor", 13, NULL, 0, FV(1.5f, -1.5f), FV(1, -2), 2, 0);
    un_f32("Ceil", 13, NULL, 0, FV(1.5f, -1.5f), FV(2, -1), 2, 0);
    un_f32("Round", 11, NULL, 0, FV(0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, 2.6f),
           FV(0, 2, 2, -0.0f, -2, 2, 3), 7, 0);
    un_f32("Sign", 13, NULL, 0, FV(-3, 0, 2), FV(-1, 0, 1), 3, 0);
    un_f32("Sin", 7, NULL, 0, FV(0, 1), FV(0, 0.84147098f), 2, t);
    un_f32("Cos", 7, NULL, 0, FV(0, 1), FV(1, 0.54030231f), 2, t);
    un_f32("Tan", 7, NULL, 0, FV(0, 1), FV(0, 1.5574077f), 2, t);
    un_f32("Asin", 7, NULL, 0, FV(0, 1), FV(0, 1.5707963f), 2, t);
    un_f32("Acos", 7, NULL, 0, FV(1, 0), FV(0, 1.5707963f), 2, t);
    un_f32("Atan", 7, NULL, 0, FV(0, 1), FV(0, 0.78539816f), 2, t);
    un_f32("Sinh", 9, NULL, 0, FV(0, 1), FV(0, 1.1752012f), 2, t);
    un_f32("Cosh", 9, NULL, 0, FV(0, 1), FV(1, 1.5430806f), 2, t);
    un_f32("Asinh", 9, NULL, 0, FV(0, 1), FV(0, 0.88137359f), 2, t);
    un_f32("Acosh", 9, NULL, 0, FV(1, 2), FV(0, 1.3169579f), 2, t);
    un_f32("Atanh", 9, NULL, 0, FV(0, 0.5f), FV(0, 0.54930614f), 2, t);

    /* float -> bool predicates */
    h_in in = t_f32(1, D(4), FV(1, NAN, INFINITY, -INFINITY));
    h_out o = h_run("IsNaN", 13, NULL, 0, &in, 1);
    CHECK(h_match_bytes(&o, NNF_DTYPE_BOOL, (uint8_t[]){0, 1, 0, 0}, 4));
    h_free(&o);
    o = h_run("IsInf", 10, NULL, 0, &in, 1);
    CHECK(h_match_bytes(&o, NNF_DTYPE_BOOL, (uint8_t[]){0, 0, 1, 1}, 4));
    h_free(&o);
    nnf_attr neg_only[2] = {h_int("detect_positive", 0), h_int("detect_negative", 1)};
    o = h_run("IsInf", 10, neg_only, 2, &in, 1);
    CHECK(h_match_bytes(&o, NNF_DTYPE_BOOL, (uint8_t[]){0, 0, 0, 1}, 4));
    h_free(&o);

    /* integer Neg/Abs/Sign/Relu, wrapping at the minimum */
    h_in ii = t_typed(NNF_DTYPE_INT32, 1, D(4), (int32_t[]){-3, 0, 5, INT32_MIN});
    o = h_run("Neg", 13, NULL, 0, &ii, 1);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT32, (int32_t[]){3, 0, -5, INT32_MIN}, 4));
    h_free(&o);
    o = h_run("Abs", 13, NULL, 0, &ii, 1);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT32, (int32_t[]){3, 0, 5, INT32_MIN}, 4));
    h_free(&o);
    o = h_run("Sign", 13, NULL, 0, &ii, 1);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT32, (int32_t[]){-1, 0, 1, -1}, 4));
    h_free(&o);
    o = h_run("Relu", 14, NULL, 0, &ii, 1);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT32, (int32_t[]){0, 0, 5, 0}, 4));
    h_free(&o);
    /* no integer Sigmoid */
    o = h_run("Sigmoid", 13, NULL, 0, &ii, 1);
    CHECK(o.status == NNF_ERR_UNSUPPORTED && !strcmp(o.stage, "infer"));
    h_free(&o);

    /* rank 0 and empty */
    h_in s = t_f32(0, NULL, FV(-2));
    o = h_run("Relu", 14, NULL, 0, &s, 1);
    CHECK(o.shape.rank == 0 && h_match_f32(&o, FV(0), 1, 0));
    h_free(&o);
    h_in e = t_f32(2, D(3, 0), NULL);
    o = h_run("Exp", 13, NULL, 0, &e, 1);
    CHECK(o.status == NNF_OK && h_shape_is(&o, 2, D(3, 0)));
    h_free(&o);

    /* attribute and opset validation */
    nnf_attr bad[1] = {h_str("approximate", "fast")};
    o = h_run("Gelu", 20, bad, 1, &s, 1);
    CHECK(o.status == NNF_ERR_UNSUPPORTED && !strcmp(o.stage, "init"));
    CHECK(strstr(nnf_last_error(), "approximate") && strstr(nnf_last_error(), "Gelu"));
    h_free(&o);
    CHECK(nnf_op_find("", "Gelu", 19, NULL) == NULL);
    CHECK(nnf_op_find("", "HardSwish", 13, NULL) == NULL);
    CHECK(nnf_op_find("", "Relu", 22, NULL) != NULL);
}

static void test_clip(void) {
    /* opset 6: attributes */
    nnf_attr at[2] = {h_float("min", -1), h_float("max", 1)};
    un_f32("Clip", 6, at, 2, FV(-2, 0.5f, 3), FV(-1, 0.5f, 1), 3, 0);
    /* opset 6 defaults: the float range */
    un_f32("Clip", 6, NULL, 0, FV(-INFINITY, 3), FV(-FLT_MAX, 3), 2, 0);
    /* opset 13: inputs, max only */
    h_in ins[3] = {t_f32(1, D(3), FV(-2, 0.5f, 3)), absent, t_f32(0, NULL, FV(1))};
    h_out o = h_run("Clip", 13, NULL, 0, ins, 3);
    CHECK(h_match_f32(&o, FV(-2, 0.5f, 1), 3, 0));
    h_free(&o);
    /* min > max: everything becomes max */
    ins[1] = t_f32(0, NULL, FV(2));
    o = h_run("Clip", 13, NULL, 0, ins, 3);
    CHECK(h_match_f32(&o, FV(1, 1, 1), 3, 0));
    h_free(&o);
    /* no bounds at all */
    o = h_run("Clip", 13, NULL, 0, ins, 1);
    CHECK(h_match_f32(&o, FV(-2, 0.5f, 3), 3, 0));
    h_free(&o);
    /* int64 with exact bounds */
    h_in ii[3] = {t_typed(NNF_DTYPE_INT64, 1, D(3), (int64_t[]){-5, 0, INT64_MAX}),
                  t_typed(NNF_DTYPE_INT64, 0, NULL, (int64_t[]){-1}),
                  t_typed(NNF_DTYPE_INT64, 0, NULL, (int64_t[]){INT64_MAX - 1})};
    o = h_run("Clip", 13, NULL, 0, ii, 3);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT64, (int64_t[]){-1, 0, INT64_MAX - 1}, 3));
    h_free(&o);
    /* ints are opset 13+ only; bounds must match the input type */
    o = h_run("Clip", 12, NULL, 0, ii, 1);
    CHECK(o.status == NNF_ERR_UNSUPPORTED);
    h_free(&o);
    ii[1] = t_f32(0, NULL, FV(0));
    o = h_run("Clip", 13, NULL, 0, ii, 3);
    CHECK(o.status == NNF_ERR_INVALID_MODEL);
    h_free(&o);
}

static void test_softmax(void) {
    const double t = 1e-6;
    /* opset 13, last axis */
    h_in x = t_f32(2, D(2, 3), FV(1, 2, 3, 1000, 1001, 1002));
    float sm[] = {0.09003057f, 0.24472847f, 0.66524096f, 0.09003057f, 0.24472847f, 0.66524096f};
    h_out o = h_run("Softmax", 13, NULL, 0, &x, 1);
    CHECK(h_match_f32(&o, sm, 6, t));
    h_free(&o);
    float lsm[] = {-2.40760596f, -1.40760596f, -0.40760596f,
                   -2.40760596f, -1.40760596f, -0.40760596f};
    o = h_run("LogSoftmax", 13, NULL, 0, &x, 1);
    CHECK(h_match_f32(&o, lsm, 6, t));
    h_free(&o);
    /* axis 0 (strided lines) */
    nnf_attr a0[1] = {h_int("axis", 0)};
    h_in y = t_f32(2, D(2, 2), FV(0, 1, 0, 3));
    o = h_run("Softmax", 13, a0, 1, &y, 1);
    CHECK(h_match_f32(&o, FV(0.5f, 0.11920292f, 0.5f, 0.88079708f), 4, t));
    h_free(&o);
    /* opset 11: coerced to 2D at axis 1, so [2,2,2] normalises rows of 4 */
    h_in z = t_f32(3, D(2, 2, 2), FV(0, 0, 0, 0, 1, 1, 1, 1));
    o = h_run("Softmax", 11, NULL, 0, &z, 1);
    CHECK(h_match_f32(&o, FV(0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f), 8, t));
    h_free(&o);
    /* opset 13 on the same input: pairs along the last axis */
    o = h_run("Softmax", 13, NULL, 0, &z, 1);
    CHECK(h_match_f32(&o, FV(0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f), 8, t));
    h_free(&o);
    /* Hardmax: first max wins */
    h_in hm = t_f32(2, D(2, 3), FV(1, 3, 3, -1, -2, -3));
    o = h_run("Hardmax", 13, NULL, 0, &hm, 1);
    CHECK(h_match_f32(&o, FV(0, 1, 0, 1, 0, 0), 6, 0));
    h_free(&o);
    /* bad axis, rank 0, empty */
    nnf_attr a5[1] = {h_int("axis", 5)};
    o = h_run("Softmax", 13, a5, 1, &x, 1);
    CHECK(o.status == NNF_ERR_INVALID_MODEL);
    h_free(&o);
    h_in s = t_f32(0, NULL, FV(7));
    o = h_run("Softmax", 13, NULL, 0, &s, 1);
    CHECK(o.shape.rank == 0 && h_match_f32(&o, FV(1), 1, 0));
    h_free(&o);
    h_in e = t_f32(2, D(0, 3), NULL);
    o = h_run("LogSoftmax", 13, NULL, 0, &e, 1);
    CHECK(o.status == NNF_OK && o.numel == 0);
    h_free(&o);
}

static void test_activation_epilogue(void) {
    /* the epilogue entry point agrees with the unary ops' formulas */
    struct {
        nnf_activation act;
        float x, want;
    } cases[] = {
        {{NNF_ACT_NONE, 0, 0}, -2, -2},
        {{NNF_ACT_RELU, 0, 0}, -2, 0},
        {{NNF_ACT_CLIP, 0, 6}, 7, 6},
        {{NNF_ACT_CLIP, 0, 6}, -1, 0},
        {{NNF_ACT_LEAKY_RELU, 0.1f, 0}, -2, -0.2f},
        {{NNF_ACT_SIGMOID, 0, 0}, 0, 0.5f},
        {{NNF_ACT_SILU, 0, 0}, 2, 1.7615942f},
        {{NNF_ACT_TANH, 0, 0}, 1, 0.76159416f},
        {{NNF_ACT_HARD_SIGMOID, 0.2f, 0.5f}, 1, 0.7f},
        {{NNF_ACT_HARD_SWISH, 0, 0}, 1, 0.6666667f},
        {{NNF_ACT_GELU_ERF, 0, 0}, 1, 0.84134475f},
        {{NNF_ACT_GELU_TANH, 0, 0}, 1, 0.84119199f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(fabsf(nnf_act_apply(&cases[i].act, cases[i].x) - cases[i].want) < 2e-6f,
                  "activation kind %d", (int)cases[i].act.kind);
}

static void test_costs(void) {
    const nnf_op_def *d = nnf_op_find("", "Add", 14, NULL);
    CHECK(d && d->cost && d->min_inputs == 2 && d->max_inputs == 2);
    const nnf_op_def *s = nnf_op_find("", "Sum", 13, NULL);
    CHECK(s && s->min_inputs == 1 && s->max_inputs > 100);
}

int main(void) {
    test_broadcast_shapes();
    test_legacy_broadcast();
    test_integer_arith();
    test_pow();
    test_variadic();
    test_compare_logic();
    test_where_prelu();
    test_unary();
    test_clip();
    test_softmax();
    test_activation_epilogue();
    test_costs();
    TEST_MAIN_END();
}

/* Reference kernels of ReduceXxx and ArgMax/ArgMin through the op table:
 * axes as attribute (old opsets) and as input (ReduceSum-13, others 18),
 * keepdims, noop_with_empty_axes, negative axes, strided (non-trailing)
 * reductions, rank 0, empty tensors and empty reductions. */
#include "check.h"
#include "ref_op_harness.h"

#include <stdint.h>

#define D(...) ((int64_t[]){__VA_ARGS__})
#define FV(...) ((float[]){__VA_ARGS__})

static h_in t_f32(int rank, const int64_t *dims, const float *data) {
    h_in t = {.dtype = NNF_DTYPE_FLOAT32, .rank = rank, .data = data};
    for (int i = 0; i < rank; i++)
        t.dims[i] = dims[i];
    return t;
}
static h_in t_axes(int n, const int64_t *axes) {
    h_in t = {.dtype = NNF_DTYPE_INT64, .rank = 1, .data = axes, .data_known = 1};
    t.dims[0] = n;
    return t;
}

/* x = [[[0,1,2],[3,4,5]],[[6,7,8],[9,10,11]]] (2x2x3) */
static const float X[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};

static void red(const char *op, int opset, nnf_attr *at, int n_at, h_in *ins, int n_in, int rank,
                const int64_t *dims, const float *want, size_t n, double tol) {
    h_out o = h_run(op, opset, at, n_at, ins, n_in);
    CHECK_MSG(o.status == NNF_OK, "%s failed at %s", op, o.stage ? o.stage : "-");
    CHECK_MSG(h_shape_is(&o, rank, dims), "%s shape (rank %d)", op, o.shape.rank);
    CHECK_MSG(h_match_f32(&o, want, n, tol), "%s values", op);
    h_free(&o);
}

static void test_axes_forms(void) {
    h_in x = t_f32(3, D(2, 2, 3), X);
    /* attribute axes (opset 11), keepdims default 1, trailing axis */
    nnf_attr a2[1] = {h_ints("axes", D(2), 1)};
    red("ReduceSum", 11, a2, 1, &x, 1, 3, D(2, 2, 1), FV(3, 12, 21, 30), 4, 0);
    /* middle axis (strided), keepdims=0 */
    nnf_attr a1k0[2] = {h_ints("axes", D(1), 1), h_int("keepdims", 0)};
    red("ReduceSum", 11, a1k0, 2, &x, 1, 2, D(2, 3), FV(3, 5, 7, 15, 17, 19), 6, 0);
    /* two non-adjacent axes, negative */
    nnf_attr an[2] = {h_ints("axes", D(0, -1), 2), h_int("keepdims", 0)};
    red("ReduceSum", 11, an, 2, &x, 1, 1, D(2), FV(24, 42), 2, 0);
    /* no axes: everything */
    red("ReduceSum", 11, NULL, 0, &x, 1, 3, D(1, 1, 1), FV(66), 1, 0);
    nnf_attr k0[1] = {h_int("keepdims", 0)};
    red("ReduceSum", 11, k0, 1, &x, 1, 0, NULL, FV(66), 1, 0);

    /* ReduceSum-13 takes axes as an input */
    h_in ins[2] = {x, t_axes(1, D(-2))};
    red("ReduceSum", 13, NULL, 0, ins, 2, 3, D(2, 1, 3), FV(3, 5, 7, 15, 17, 19), 6, 0);
    /* ... and ignores an axes attribute there: an absent input reduces all */
    red("ReduceSum", 13, a2, 1, ins, 1, 3, D(1, 1, 1), FV(66), 1, 0);
    /* empty axes input with noop_with_empty_axes: identity */
    nnf_attr noop[1] = {h_int("noop_with_empty_axes", 1)};
    h_in empty_axes[2] = {x, t_axes(0, NULL)};
    red("ReduceSum", 13, noop, 1, empty_axes, 2, 3, D(2, 2, 3), X, 12, 0);
    /* ... without it: all */
    red("ReduceSum", 13, NULL, 0, empty_axes, 2, 3, D(1, 1, 1), FV(66), 1, 0);
    /* noop still applies the element transform (as the ONNX reference does) */
    h_in sq[1] = {t_f32(1, D(2), FV(-2, 3))};
    red("ReduceSumSquare", 18, noop, 1, sq, 1, 1, D(2), FV(4, 9), 2, 0);
    /* ReduceMean-13 still uses the attribute; 18 the input */
    red("ReduceMean", 13, a2, 1, &x, 1, 3, D(2, 2, 1), FV(1, 4, 7, 10), 4, 0);
    h_in mins[2] = {x, t_axes(2, D(0, 1))};
    red("ReduceMean", 18, k0, 1, mins, 2, 1, D(3), FV(4.5f, 5.5f, 6.5f), 3, 0);

    /* axes input not known at load: keepdims keeps the rank with unknown dims */
    h_in unknown[2] = {x, t_axes(1, D(1))};
    unknown[1].data_known = 0;
    h_out o = h_run_ex("ReduceSum", 13, NULL, 0, unknown, 2, 1);
    CHECK(o.status == NNF_OK && h_shape_is(&o, 3, D(-1, -1, -1)));
    o = h_run_ex("ReduceSum", 13, k0, 1, unknown, 2, 1);
    CHECK(o.status == NNF_OK && h_shape_is(&o, 2, D(-1, -1)));
    /* at run time infer sees the data and the kernel reads the same axes */
    unknown[1].data_known = 1;
    red("ReduceSum", 13, k0, 1, unknown, 2, 2, D(2, 3), FV(3, 5, 7, 15, 17, 19), 6, 0);

    /* bad axes */
    nnf_attr bad[1] = {h_ints("axes", D(3), 1)};
    o = h_run("ReduceMax", 11, bad, 1, &x, 1);
    CHECK(o.status == NNF_ERR_INVALID_MODEL && strstr(nnf_last_error(), "axis"));
    h_free(&o);
    nnf_attr dup[1] = {h_ints("axes", D(1, -2), 2)};
    o = h_run("ReduceMax", 11, dup, 1, &x, 1);
    CHECK(o.status == NNF_ERR_INVALID_MODEL && strstr(nnf_last_error(), "repeated"));
    h_free(&o);
}

static void test_kinds(void) {
    /* x = [[1,-2],[3,-4]] reduced along axis 1 */
    h_in x = t_f32(2, D(2, 2), FV(1, -2, 3, -4));
    nnf_attr a1[2] = {h_ints("axes", D(1), 1), h_int("keepdims", 0)};
    const double t = 1e-6;
    red("ReduceSum", 11, a1, 2, &x, 1, 1, D(2), FV(-1, -1), 2, t);
    red("ReduceMean", 11, a1, 2, &x, 1, 1, D(2), FV(-0.5f, -0.5f), 2, t);
    red("ReduceMax", 11, a1, 2, &x, 1, 1, D(2), FV(1, 3), 2, t);
    red("ReduceMin", 11, a1, 2, &x, 1, 1, D(2), FV(-2, -4), 2, t);
    red("ReduceProd", 11, a1, 2, &x, 1, 1, D(2), FV(-2, -12), 2, t);
    red("ReduceL1", 11, a1, 2, &x, 1, 1, D(2), FV(3, 7), 2, t);
    red("ReduceL2", 11, a1, 2, &x, 1, 1, D(2), FV(2.2360680f, 5), 2, t);
    red("ReduceSumSquare", 11, a1, 2, &x, 1, 1, D(2), FV(5, 25), 2, t);
    h_in p = t_f32(2, D(2, 2), FV(1, 2, 3, 4));
    red("ReduceLogSum", 11, a1, 2, &p, 1, 1, D(2), FV(1.0986123f, 1.9459101f), 2, t);
    red("ReduceLogSumExp", 11, a1, 2, &p, 1, 1, D(2), FV(2.3132617f, 4.3132617f), 2, t);
    /* LogSumExp does not overflow on large inputs */
    h_in big = t_f32(2, D(1, 2), FV(1000, 1000));
    red("ReduceLogSumExp", 11, a1, 2, &big, 1, 1, D(1), FV(1000.6931472f), 1, t);
    /* Max propagates NaN */
    h_in nan = t_f32(2, D(1, 3), FV(1, NAN, 2));
    red("ReduceMax", 11, a1, 2, &nan, 1, 1, D(1), FV(NAN), 1, 0);

    nnf_attr a1k[1] = {h_int("keepdims", 0)};
    /* integers */
    h_in xi = {
        .dtype = NNF_DTYPE_INT64, .rank = 2, .dims = {2, 2}, .data = (int64_t[]){1, -2, 3, -4}};
    h_out o = h_run("ReduceSum", 11, a1, 2, &xi, 1);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT64, (int64_t[]){-1, -1}, 2));
    h_free(&o);
    o = h_run("ReduceProd", 11, a1, 2, &xi, 1);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT64, (int64_t[]){-2, -12}, 2));
    h_free(&o);
    o = h_run("ReduceMin", 11, a1, 2, &xi, 1);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT64, (int64_t[]){-2, -4}, 2));
    h_free(&o);
    o = h_run("ReduceMean", 11, a1, 2, &xi, 1);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT64, (int64_t[]){0, 0}, 2)); /* -0.5 truncates */
    h_free(&o);
    h_in xi32 = {.dtype = NNF_DTYPE_INT32, .rank = 1, .dims = {3}, .data = (int32_t[]){5, -7, 2}};
    o = h_run("ReduceMax", 11, NULL, 0, &xi32, 1);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT32, (int32_t[]){5}, 1));
    h_free(&o);
    /* bool Max/Min (ReduceMax-20): any / all; empty gives false / true */
    h_in xb = {.dtype = NNF_DTYPE_BOOL, .rank = 2, .dims = {2, 2}, .data = (uint8_t[]){0, 1, 1, 1}};
    h_in xbs[2] = {xb, t_axes(1, D(1))};
    o = h_run("ReduceMax", 20, a1k, 1, xbs, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_BOOL, (uint8_t[]){1, 1}, 2));
    h_free(&o);
    o = h_run("ReduceMin", 20, a1k, 1, xbs, 2);
    CHECK(h_match_bytes(&o, NNF_DTYPE_BOOL, (uint8_t[]){0, 1}, 2));
    h_free(&o);
    o = h_run("ReduceSum", 13, NULL, 0, &xb, 1);
    CHECK(o.status == NNF_ERR_UNSUPPORTED);
    h_free(&o);
    o = h_run("ReduceL2", 11, NULL, 0, &xi32, 1);
    CHECK(o.status == NNF_ERR_UNSUPPORTED);
    h_free(&o);
}

static void test_edges(void) {
    /* rank 0: a reduction over nothing but itself */
    h_in s = t_f32(0, NULL, FV(-3));
    red("ReduceSum", 11, NULL, 0, &s, 1, 0, NULL, FV(-3), 1, 0);
    red("ReduceL1", 18, NULL, 0, &s, 1, 0, NULL, FV(3), 1, 0);
    /* empty reduction: the op's identity */
    h_in e = t_f32(2, D(2, 0), NULL);
    nnf_attr a1[2] = {h_ints("axes", D(1), 1), h_int("keepdims", 1)};
    red("ReduceSum", 11, a1, 2, &e, 1, 2, D(2, 1), FV(0, 0), 2, 0);
    red("ReduceProd", 11, a1, 2, &e, 1, 2, D(2, 1), FV(1, 1), 2, 0);
    red("ReduceMax", 11, a1, 2, &e, 1, 2, D(2, 1), FV(-INFINITY, -INFINITY), 2, 0);
    red("ReduceMin", 11, a1, 2, &e, 1, 2, D(2, 1), FV(INFINITY, INFINITY), 2, 0);
    red("ReduceLogSumExp", 11, a1, 2, &e, 1, 2, D(2, 1), FV(-INFINITY, -INFINITY), 2, 0);
    red("ReduceMean", 11, a1, 2, &e, 1, 2, D(2, 1), FV(NAN, NAN), 2, 0);
    /* empty output */
    nnf_attr a0[1] = {h_ints("axes", D(1), 1)};
    h_in e2 = t_f32(2, D(0, 3), NULL);
    h_out o = h_run("ReduceSum", 11, a0, 1, &e2, 1);
    CHECK(o.status == NNF_OK && h_shape_is(&o, 2, D(0, 1)) && o.numel == 0);
    h_free(&o);
    /* a big strided reduction (axis 0 of 3x5x7) against a plain loop */
    static float big[105];
    for (int i = 0; i < 105; i++)
        big[i] = (float)((i * 37) % 11) - 5.0f;
    float want[35];
    for (int j = 0; j < 35; j++)
        want[j] = big[j] + big[35 + j] + big[70 + j];
    h_in b = t_f32(3, D(3, 5, 7), big);
    nnf_attr ax0[2] = {h_ints("axes", D(0), 1), h_int("keepdims", 0)};
    red("ReduceSum", 11, ax0, 2, &b, 1, 2, D(5, 7), want, 35, 0);
    /* axes 0 and 2 of 3x5x7 */
    float want02[5] = {0};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 5; j++)
            for (int k = 0; k < 7; k++)
                want02[j] += big[(i * 5 + j) * 7 + k];
    nnf_attr ax02[2] = {h_ints("axes", D(0, 2), 2), h_int("keepdims", 0)};
    red("ReduceSum", 11, ax02, 2, &b, 1, 1, D(5), want02, 5, 0);
}

static void test_argminmax(void) {
    /* [[2,5,5],[7,1,7]] */
    h_in x = t_f32(2, D(2, 3), FV(2, 5, 5, 7, 1, 7));
    h_out o = h_run("ArgMax", 13, NULL, 0, &x, 1); /* axis 0, keepdims */
    CHECK(h_shape_is(&o, 2, D(1, 3)) &&
          h_match_bytes(&o, NNF_DTYPE_INT64, (int64_t[]){1, 0, 1}, 3));
    h_free(&o);
    nnf_attr a[2] = {h_int("axis", -1), h_int("keepdims", 0)};
    o = h_run("ArgMax", 13, a, 2, &x, 1);
    CHECK(h_shape_is(&o, 1, D(2)) && h_match_bytes(&o, NNF_DTYPE_INT64, (int64_t[]){1, 0}, 2));
    h_free(&o);
    nnf_attr al[3] = {h_int("axis", 1), h_int("keepdims", 0), h_int("select_last_index", 1)};
    o = h_run("ArgMax", 13, al, 3, &x, 1);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT64, (int64_t[]){2, 2}, 2));
    h_free(&o);
    o = h_run("ArgMin", 13, a, 2, &x, 1);
    CHECK(h_match_bytes(&o, NNF_DTYPE_INT64, (int64_t[]){0, 1}, 2));
    h_free(&o);
    h_in xi = {.dtype = NNF_DTYPE_INT32, .rank = 1, .dims = {4}, .data = (int32_t[]){3, -1, 9, -1}};
    nnf_attr last[1] = {h_int("select_last_index", 1)};
    o = h_run("ArgMin", 13, last, 1, &xi, 1);
    CHECK(h_shape_is(&o, 1, D(1)) && h_match_bytes(&o, NNF_DTYPE_INT64, (int64_t[]){3}, 1));
    h_free(&o);
    /* selecting from an empty axis is an error; an empty output is not */
    h_in e = t_f32(2, D(2, 0), NULL);
    nnf_attr a1[1] = {h_int("axis", 1)};
    o = h_run("ArgMax", 13, a1, 1, &e, 1);
    CHECK(o.status == NNF_ERR_SHAPE);
    h_free(&o);
    o = h_run("ArgMax", 13, NULL, 0, &e, 1);
    CHECK(o.status == NNF_OK && h_shape_is(&o, 2, D(1, 0)));
    h_free(&o);
    nnf_attr a9[1] = {h_int("axis", 9)};
    o = h_run("ArgMax", 13, a9, 1, &x, 1);
    CHECK(o.status == NNF_ERR_INVALID_MODEL);
    h_free(&o);
}

int main(void) {
    test_axes_forms();
    test_kinds();
    test_edges();
    test_argminmax();
    TEST_MAIN_END();
}

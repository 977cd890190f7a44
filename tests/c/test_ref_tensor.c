/* Tensor / shape / data-movement operators: init + infer + reference kernel
 * on hand-built nodes, against hand-computed expectations. */
#include "ops/tensor_common.h"
#include "check.h"

/* tin literals leave the trailing "hide" flag out on purpose */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <stdlib.h>
#include <string.h>

#define I64 NNF_DTYPE_INT64
#define I32 NNF_DTYPE_INT32
#define F32 NNF_DTYPE_FLOAT32

typedef struct tin {
    nnf_dtype dtype; /* UNDEFINED = omitted optional input */
    int rank;
    int64_t dims[NNF_MAX_RANK];
    const void *data;
    bool hide; /* infer sees the shape only */
} tin;

typedef struct trun {
    nnf_arena arena;
    nnf_node node;
    nnf_tinfo out[8];
    nnf_buf bufs[8];
    nnf_status st_init, st_infer, st_ref;
} trun;

static nnf_attr A_INT(const char *name, int64_t v) {
    return (nnf_attr){.name = name, .type = NNF_ATTR_INT, .i = v};
}
static nnf_attr A_INTS(const char *name, const int64_t *v, int n) {
    return (nnf_attr){.name = name, .type = NNF_ATTR_INTS, .ints = v, .count = n};
}
static nnf_attr A_STR(const char *name, const char *s) {
    return (nnf_attr){.name = name, .type = NNF_ATTR_STRING, .s = s, .s_len = strlen(s)};
}
static nnf_attr A_FLOAT(const char *name, float f) {
    return (nnf_attr){.name = name, .type = NNF_ATTR_FLOAT, .f = f};
}

/* Run init, infer and (when every output shape is known and run_ref) the
 * reference kernel. Outputs stay in r->bufs until run_free. */
static void run_op(trun *r, const char *op, int opset, nnf_attr *attrs, int n_attrs, const tin *ins,
                   int n_in, int n_out, bool run_ref) {
    memset(r, 0, sizeof *r);
    r->st_init = r->st_infer = r->st_ref = NNF_ERR_INTERNAL;
    static int in_ids[16], out_ids[8];
    for (int i = 0; i < n_in; i++)
        in_ids[i] = ins[i].dtype == NNF_DTYPE_UNDEFINED ? NNF_NO_VALUE : i;
    for (int i = 0; i < n_out; i++)
        out_ids[i] = 100 + i;
    nnf_node *n = &r->node;
    n->name = "n0";
    n->op_type = op;
    n->domain = "";
    n->opset = opset;
    n->n_inputs = n_in;
    n->inputs = in_ids;
    n->n_outputs = n_out;
    n->outputs = out_ids;
    n->attrs = attrs;
    n->n_attrs = n_attrs;
    n->op = nnf_op_find("", op, opset, NULL);
    if (!n->op) {
        fprintf(stderr, "no op %s-%d\n", op, opset);
        return;
    }
    CHECK(n_in >= n->op->min_inputs && n_in <= n->op->max_inputs);
    r->st_init = n->op->init(n, &r->arena);
    if (r->st_init != NNF_OK)
        return;
    nnf_tinfo ti[16];
    nnf_buf ib[16];
    nnf_buf *ibp[16];
    for (int i = 0; i < n_in; i++) {
        memset(&ti[i], 0, sizeof ti[i]);
        ibp[i] = NULL;
        if (ins[i].dtype == NNF_DTYPE_UNDEFINED)
            continue;
        ti[i].present = true;
        ti[i].dtype = ins[i].dtype;
        nnf_shape_unknown(&ti[i].shape, ins[i].rank);
        for (int k = 0; k < ins[i].rank; k++)
            ti[i].shape.dims[k] = ins[i].dims[k];
        ti[i].data = ins[i].hide ? NULL : ins[i].data;
        memset(&ib[i], 0, sizeof ib[i]);
        ib[i].dtype = ins[i].dtype;
        ib[i].rank = ins[i].rank;
        ib[i].numel = 1;
        for (int k = 0; k < ins[i].rank; k++) {
            ib[i].dims[k] = ins[i].dims[k];
            ib[i].numel *= (size_t)ins[i].dims[k];
        }
        ib[i].data = (void *)ins[i].data;
        ibp[i] = &ib[i];
    }
    for (int i = 0; i < n_out; i++)
        r->out[i].present = true;
    r->st_infer = n->op->infer(n, ti, r->out);
    if (r->st_infer != NNF_OK || !run_ref)
        return;
    nnf_buf *obp[8];
    for (int i = 0; i < n_out; i++) {
        nnf_buf *b = &r->bufs[i];
        b->dtype = r->out[i].dtype;
        b->rank = r->out[i].shape.rank;
        b->numel = 1;
        for (int k = 0; k < b->rank; k++) {
            b->dims[k] = r->out[i].shape.dims[k];
            if (b->dims[k] < 0) {
                fprintf(stderr, "%s: output %d dim %d unknown\n", op, i, k);
                return;
            }
            b->numel *= (size_t)b->dims[k];
        }
        b->data = calloc(b->numel ? b->numel : 1, nnf_dtype_size(b->dtype) ? nnf_dtype_size(b->dtype) : 1);
        obp[i] = b;
    }
    nnf_kctx ctx = {0};
    r->st_ref = n->op->ref(n, ibp, obp, &ctx);
}

static void run_free(trun *r) {
    for (int i = 0; i < 8; i++)
        free(r->bufs[i].data);
    nnf_arena_free(&r->arena);
}

static bool shape_is(const nnf_shape *s, int rank, const int64_t *dims) {
    if (s->rank != rank)
        return false;
    for (int i = 0; i < rank; i++)
        if (s->dims[i] != dims[i])
            return false;
    return true;
}

#define SHAPE_IS(s, ...)                                                                           \
    do {                                                                                           \
        const int64_t want_[] = {__VA_ARGS__};                                                     \
        CHECK_MSG(shape_is(&(s), (int)(sizeof want_ / sizeof want_[0]), want_), "rank %d",         \
                  (s).rank);                                                                       \
    } while (0)
#define SHAPE_RANK0(s) CHECK((s).rank == 0)

static bool i64_eq(const void *got, const int64_t *want, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (((const int64_t *)got)[i] != want[i]) {
            fprintf(stderr, "  [%zu] = %lld, want %lld\n", i, (long long)((const int64_t *)got)[i],
                    (long long)want[i]);
            return false;
        }
    return true;
}
static bool f32_eq(const void *got, const float *want, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (((const float *)got)[i] != want[i]) {
            fprintf(stderr, "  [%zu] = %g, want %g\n", i, ((const float *)got)[i], want[i]);
            return false;
        }
    return true;
}
#define DATA_I64(b, ...)                                                                           \
    do {                                                                                           \
        const int64_t want_[] = {__VA_ARGS__};                                                     \
        size_t n_ = sizeof want_ / sizeof want_[0];                                                \
        CHECK((b).numel == n_ && i64_eq((b).data, want_, n_));                                     \
    } while (0)
#define DATA_F32(b, ...)                                                                           \
    do {                                                                                           \
        const float want_[] = {__VA_ARGS__};                                                       \
        size_t n_ = sizeof want_ / sizeof want_[0];                                                \
        CHECK((b).numel == n_ && f32_eq((b).data, want_, n_));                                     \
    } while (0)

static const float iota24[24] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23};

/* ---- Reshape / Flatten / Squeeze / Unsqueeze ---------------------------- */

static void test_reshape(void) {
    trun r;
    int64_t spec[] = {0, -1, 2};
    tin ins[2] = {{F32, 3, {2, 3, 4}, iota24}, {I64, 1, {3}, spec}};
    run_op(&r, "Reshape", 14, NULL, 0, ins, 2, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 2, 6, 2);
    CHECK(r.bufs[0].numel == 24 && !memcmp(r.bufs[0].data, iota24, sizeof iota24));
    run_free(&r);

    /* allowzero=1: 0 is a real zero extent */
    int64_t spec0[] = {0, 4};
    tin e[2] = {{F32, 2, {0, 4}, iota24}, {I64, 1, {2}, spec0}};
    nnf_attr az = A_INT("allowzero", 1);
    run_op(&r, "Reshape", 14, &az, 1, e, 2, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 0, 4);
    run_free(&r);

    /* mismatched element count is a shape error */
    int64_t bad[] = {5, -1};
    tin b[2] = {{F32, 3, {2, 3, 4}, iota24}, {I64, 1, {2}, bad}};
    run_op(&r, "Reshape", 14, NULL, 0, b, 2, 1, false);
    CHECK(r.st_infer == NNF_ERR_SHAPE);
    run_free(&r);

    /* two -1 */
    int64_t two[] = {-1, -1};
    b[1].data = two;
    run_op(&r, "Reshape", 14, NULL, 0, b, 2, 1, false);
    CHECK(r.st_infer == NNF_ERR_INVALID_MODEL);
    run_free(&r);

    /* unknown shape values: rank only */
    tin u[2] = {{F32, 3, {2, 3, 4}, iota24}, {I64, 1, {3}, spec, true}};
    run_op(&r, "Reshape", 14, NULL, 0, u, 2, 1, false);
    CHECK(r.st_infer == NNF_OK);
    SHAPE_IS(r.out[0].shape, -1, -1, -1);
    run_free(&r);

    /* symbolic batch: [?, 3, 4] -> [-1, 12] keeps the name */
    int64_t s12[] = {-1, 12};
    tin sy[2] = {{F32, 3, {-1, 3, 4}, NULL}, {I64, 1, {2}, s12}};
    run_op(&r, "Reshape", 14, NULL, 0, sy, 2, 1, false);
    CHECK(r.st_infer == NNF_OK);
    SHAPE_IS(r.out[0].shape, -1, 12);
    run_free(&r);

    /* to a scalar, and opset 1 shape attribute */
    tin sc[2] = {{F32, 1, {1}, iota24}, {I64, 1, {0}, spec}};
    run_op(&r, "Reshape", 13, NULL, 0, sc, 2, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_RANK0(r.out[0].shape);
    run_free(&r);
    int64_t sh[] = {4, 6};
    nnf_attr sa = A_INTS("shape", sh, 2);
    run_op(&r, "Reshape", 1, &sa, 1, ins, 1, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 4, 6);
    run_free(&r);
}

static void test_flatten_squeeze(void) {
    trun r;
    tin x = {F32, 4, {2, 3, 1, 4}, iota24};
    nnf_attr ax = A_INT("axis", -1);
    run_op(&r, "Flatten", 13, &ax, 1, &x, 1, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 6, 4);
    run_free(&r);
    ax.i = 0;
    run_op(&r, "Flatten", 13, &ax, 1, &x, 1, 1, true);
    SHAPE_IS(r.out[0].shape, 1, 24);
    run_free(&r);
    ax.i = 4;
    run_op(&r, "Flatten", 13, &ax, 1, &x, 1, 1, true);
    SHAPE_IS(r.out[0].shape, 24, 1);
    run_free(&r);
    ax.i = 5;
    run_op(&r, "Flatten", 13, &ax, 1, &x, 1, 1, false);
    CHECK(r.st_infer == NNF_ERR_INVALID_MODEL);
    run_free(&r);

    /* Squeeze: input axes (13), negative; attribute (11); none = all 1s */
    int64_t axes[] = {-2};
    tin sq[2] = {x, {I64, 1, {1}, axes}};
    run_op(&r, "Squeeze", 13, NULL, 0, sq, 2, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 2, 3, 4);
    run_free(&r);
    run_op(&r, "Squeeze", 13, NULL, 0, sq, 1, 1, true);
    SHAPE_IS(r.out[0].shape, 2, 3, 4);
    run_free(&r);
    int64_t a0[] = {0};
    nnf_attr aa = A_INTS("axes", a0, 1);
    run_op(&r, "Squeeze", 11, &aa, 1, &x, 1, 1, false);
    CHECK(r.st_infer == NNF_ERR_SHAPE); /* extent 2 cannot be squeezed */
    run_free(&r);
    /* unknown extents with no axes: rank unknown */
    tin unk = {F32, 2, {-1, 3}, NULL};
    run_op(&r, "Squeeze", 13, NULL, 0, &unk, 1, 1, false);
    CHECK(r.st_infer == NNF_OK && r.out[0].shape.rank == -1);
    run_free(&r);

    /* Unsqueeze to rank 0 -> [1,1]; axes out of order and negative */
    float one = 7;
    int64_t ua[] = {-1, 0};
    tin us[2] = {{F32, 0, {0}, &one}, {I64, 1, {2}, ua}};
    run_op(&r, "Unsqueeze", 13, NULL, 0, us, 2, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 1, 1);
    DATA_F32(r.bufs[0], 7);
    run_free(&r);
    int64_t ub[] = {1, 3};
    tin us2[2] = {{F32, 2, {2, 3}, iota24}, {I64, 1, {2}, ub}};
    run_op(&r, "Unsqueeze", 13, NULL, 0, us2, 2, 1, true);
    SHAPE_IS(r.out[0].shape, 2, 1, 3, 1);
    run_free(&r);
    int64_t dup[] = {1, -3};
    us2[1].data = dup; /* -3 of rank 4 is 1 again */
    run_op(&r, "Unsqueeze", 13, NULL, 0, us2, 2, 1, false);
    CHECK(r.st_infer == NNF_ERR_INVALID_MODEL);
    run_free(&r);
}

/* ---- Shape / Size / Constant / ConstantOfShape / Range ----------------- */

static void test_shape_size(void) {
    trun r;
    tin x = {F32, 4, {2, 3, 1, 4}, NULL};
    run_op(&r, "Shape", 13, NULL, 0, &x, 1, 1, true);
    CHECK(r.st_ref == NNF_OK);
    DATA_I64(r.bufs[0], 2, 3, 1, 4);
    run_free(&r);
    nnf_attr se[2] = {A_INT("start", -3), A_INT("end", -1)};
    run_op(&r, "Shape", 15, se, 2, &x, 1, 1, true);
    DATA_I64(r.bufs[0], 3, 1);
    run_free(&r);
    se[0].i = 10; /* clamped: empty */
    run_op(&r, "Shape", 15, se, 2, &x, 1, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 0);
    run_free(&r);
    run_op(&r, "Size", 13, NULL, 0, &x, 1, 1, true);
    SHAPE_RANK0(r.out[0].shape);
    DATA_I64(r.bufs[0], 24);
    run_free(&r);
    tin s0 = {F32, 0, {0}, NULL};
    run_op(&r, "Shape", 13, NULL, 0, &s0, 1, 1, true);
    SHAPE_IS(r.out[0].shape, 0);
    run_free(&r);
}

static void test_constants(void) {
    trun r;
    int64_t v[] = {5, 6, 7};
    nnf_attr a = A_INTS("value_ints", v, 3);
    run_op(&r, "Constant", 13, &a, 1, NULL, 0, 1, true);
    CHECK(r.st_ref == NNF_OK && r.out[0].dtype == I64);
    DATA_I64(r.bufs[0], 5, 6, 7);
    run_free(&r);
    nnf_attr f = A_FLOAT("value_float", 2.5f);
    run_op(&r, "Constant", 13, &f, 1, NULL, 0, 1, true);
    SHAPE_RANK0(r.out[0].shape);
    DATA_F32(r.bufs[0], 2.5f);
    run_free(&r);
    nnf_attr s = A_STR("value_string", "x");
    run_op(&r, "Constant", 13, &s, 1, NULL, 0, 1, true);
    CHECK(r.st_init == NNF_ERR_UNSUPPORTED);
    run_free(&r);
    nnf_attr sp = {.name = "sparse_value", .type = (nnf_attr_type)11};
    run_op(&r, "Constant", 13, &sp, 1, NULL, 0, 1, true);
    CHECK(r.st_init == NNF_ERR_UNSUPPORTED);
    run_free(&r);
    int32_t tv[] = {1, 2, 3, 4};
    nnf_const_tensor t = {.dtype = I32, .shape = {.rank = 2, .dims = {2, 2}}, .data = tv,
                          .nbytes = 16};
    nnf_attr ta = {.name = "value", .type = NNF_ATTR_TENSOR, .tensor = &t};
    run_op(&r, "Constant", 13, &ta, 1, NULL, 0, 1, true);
    CHECK(r.st_ref == NNF_OK && r.out[0].dtype == I32 && !memcmp(r.bufs[0].data, tv, 16));
    SHAPE_IS(r.out[0].shape, 2, 2);
    run_free(&r);

    /* ConstantOfShape: default float 0, int64 value, empty shape -> scalar */
    int64_t shp[] = {2, 3};
    tin cs = {I64, 1, {2}, shp};
    run_op(&r, "ConstantOfShape", 9, NULL, 0, &cs, 1, 1, true);
    CHECK(r.st_ref == NNF_OK && r.out[0].dtype == F32);
    DATA_F32(r.bufs[0], 0, 0, 0, 0, 0, 0);
    run_free(&r);
    int64_t seven = 7;
    nnf_const_tensor t7 = {.dtype = I64, .shape = {.rank = 1, .dims = {1}}, .data = &seven,
                           .nbytes = 8};
    nnf_attr a7 = {.name = "value", .type = NNF_ATTR_TENSOR, .tensor = &t7};
    run_op(&r, "ConstantOfShape", 9, &a7, 1, &cs, 1, 1, true);
    DATA_I64(r.bufs[0], 7, 7, 7, 7, 7, 7);
    run_free(&r);
    tin ce = {I64, 1, {0}, shp};
    run_op(&r, "ConstantOfShape", 9, &a7, 1, &ce, 1, 1, true);
    SHAPE_RANK0(r.out[0].shape);
    DATA_I64(r.bufs[0], 7);
    run_free(&r);
    cs.hide = true;
    run_op(&r, "ConstantOfShape", 9, NULL, 0, &cs, 1, 1, false);
    SHAPE_IS(r.out[0].shape, -1, -1);
    run_free(&r);
}

static void test_range_eye(void) {
    trun r;
    int64_t s = 10, l = 4, d = -2;
    tin ri[3] = {{I64, 0, {0}, &s}, {I64, 0, {0}, &l}, {I64, 0, {0}, &d}};
    run_op(&r, "Range", 11, NULL, 0, ri, 3, 1, true);
    CHECK(r.st_ref == NNF_OK);
    DATA_I64(r.bufs[0], 10, 8, 6);
    run_free(&r);
    float fs = 1, fl = 2, fd = 0.25f;
    tin rf[3] = {{F32, 0, {0}, &fs}, {F32, 0, {0}, &fl}, {F32, 0, {0}, &fd}};
    run_op(&r, "Range", 11, NULL, 0, rf, 3, 1, true);
    DATA_F32(r.bufs[0], 1, 1.25f, 1.5f, 1.75f);
    run_free(&r);
    int32_t a = 3, b = 9, c = 3;
    tin r32[3] = {{I32, 0, {0}, &a}, {I32, 0, {0}, &b}, {I32, 0, {0}, &c}};
    run_op(&r, "Range", 11, NULL, 0, r32, 3, 1, true);
    CHECK(r.st_ref == NNF_OK && r.bufs[0].numel == 2 && ((int32_t *)r.bufs[0].data)[1] == 6);
    run_free(&r);
    int64_t zero = 0;
    ri[2].data = &zero;
    run_op(&r, "Range", 11, NULL, 0, ri, 3, 1, false);
    CHECK(r.st_infer == NNF_ERR_INVALID_MODEL);
    run_free(&r);
    ri[2].data = &d;
    ri[1].hide = true;
    run_op(&r, "Range", 11, NULL, 0, ri, 3, 1, false);
    SHAPE_IS(r.out[0].shape, -1);
    run_free(&r);

    tin e = {F32, 2, {3, 4}, iota24};
    nnf_attr ea[2] = {A_INT("k", 1), A_INT("dtype", I64)};
    run_op(&r, "EyeLike", 9, ea, 2, &e, 1, 1, true);
    CHECK(r.st_ref == NNF_OK && r.out[0].dtype == I64);
    DATA_I64(r.bufs[0], 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1);
    run_free(&r);
}

/* ---- Transpose / Concat / Split ---------------------------------------- */

static void test_transpose(void) {
    trun r;
    tin x = {F32, 3, {2, 3, 4}, iota24};
    int64_t perm[] = {1, 0, 2};
    nnf_attr p = A_INTS("perm", perm, 3);
    run_op(&r, "Transpose", 13, &p, 1, &x, 1, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 3, 2, 4);
    DATA_F32(r.bufs[0], 0, 1, 2, 3, 12, 13, 14, 15, 4, 5, 6, 7, 16, 17, 18, 19, 8, 9, 10, 11, 20,
             21, 22, 23);
    run_free(&r);
    tin m = {F32, 2, {2, 3}, iota24};
    run_op(&r, "Transpose", 13, NULL, 0, &m, 1, 1, true); /* default: reverse */
    SHAPE_IS(r.out[0].shape, 3, 2);
    DATA_F32(r.bufs[0], 0, 3, 1, 4, 2, 5);
    run_free(&r);
    int64_t badp[] = {0, 0, 1};
    p.ints = badp;
    run_op(&r, "Transpose", 13, &p, 1, &x, 1, 1, false);
    CHECK(r.st_init == NNF_ERR_INVALID_MODEL);
    run_free(&r);
    /* int64 elements move by size too */
    int64_t iv[] = {1, 2, 3, 4, 5, 6};
    tin xi = {I64, 2, {3, 2}, iv};
    run_op(&r, "Transpose", 13, NULL, 0, &xi, 1, 1, true);
    DATA_I64(r.bufs[0], 1, 3, 5, 2, 4, 6);
    run_free(&r);
}

static void test_concat_split(void) {
    trun r;
    float a[] = {1, 2, 3, 4}, b[] = {5, 6};
    tin ins[3] = {{F32, 2, {2, 2}, a}, {F32, 2, {2, 1}, b}, {F32, 2, {2, 0}, NULL}};
    nnf_attr ax = A_INT("axis", -1);
    run_op(&r, "Concat", 13, &ax, 1, ins, 3, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 2, 3);
    DATA_F32(r.bufs[0], 1, 2, 5, 3, 4, 6);
    run_free(&r);
    ax.i = 0;
    run_op(&r, "Concat", 13, &ax, 1, ins, 2, 1, false);
    CHECK(r.st_infer == NNF_ERR_SHAPE);
    run_free(&r);
    /* shape arithmetic: two known 1-D int64 pieces */
    int64_t p1[] = {1}, p2[] = {-1, 64};
    tin s[2] = {{I64, 1, {1}, p1}, {I64, 1, {2}, p2}};
    run_op(&r, "Concat", 13, &ax, 1, s, 2, 1, true);
    DATA_I64(r.bufs[0], 1, -1, 64);
    run_free(&r);

    /* Split: input sizes (13), equal (11), uneven num_outputs (18) */
    tin x = {F32, 2, {2, 5}, iota24};
    int64_t sizes[] = {2, 3};
    tin sx[2] = {x, {I64, 1, {2}, sizes}};
    nnf_attr sa = A_INT("axis", 1);
    run_op(&r, "Split", 13, &sa, 1, sx, 2, 2, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 2, 2);
    SHAPE_IS(r.out[1].shape, 2, 3);
    DATA_F32(r.bufs[0], 0, 1, 5, 6);
    DATA_F32(r.bufs[1], 2, 3, 4, 7, 8, 9);
    run_free(&r);
    nnf_attr so[2] = {A_INT("axis", 1), A_INT("num_outputs", 3)};
    run_op(&r, "Split", 18, so, 2, &x, 1, 3, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 2, 2);
    SHAPE_IS(r.out[2].shape, 2, 1);
    DATA_F32(r.bufs[2], 4, 9);
    run_free(&r);
    run_op(&r, "Split", 11, &sa, 1, &x, 1, 2, false);
    CHECK(r.st_infer == NNF_ERR_SHAPE); /* 5 not divisible by 2 */
    run_free(&r);
    nnf_attr sp = A_INTS("split", sizes, 2);
    nnf_attr s11[2] = {sa, sp};
    run_op(&r, "Split", 11, s11, 2, &x, 1, 2, true);
    DATA_F32(r.bufs[0], 0, 1, 5, 6);
    run_free(&r);
}

/* ---- Slice ------------------------------------------------------------- */

static void test_slice(void) {
    trun r;
    tin x = {F32, 2, {4, 6}, iota24};
    /* negative step over the whole axis, out-of-range start/end clamp */
    int64_t st[] = {100, 1}, en[] = {INT64_MIN, 1000}, ax[] = {0, -1}, sp[] = {-2, 2};
    tin ins[5] = {x, {I64, 1, {2}, st}, {I64, 1, {2}, en}, {I64, 1, {2}, ax}, {I64, 1, {2}, sp}};
    run_op(&r, "Slice", 13, NULL, 0, ins, 5, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 2, 3);
    /* rows 3, 1; cols 1, 3, 5 */
    DATA_F32(r.bufs[0], 19, 21, 23, 7, 9, 11);
    run_free(&r);
    /* negative start/end, default axes and steps */
    int64_t st2[] = {-3, -4}, en2[] = {-1, 6};
    tin i2[3] = {x, {I64, 1, {2}, st2}, {I64, 1, {2}, en2}};
    run_op(&r, "Slice", 13, NULL, 0, i2, 3, 1, true);
    SHAPE_IS(r.out[0].shape, 2, 4);
    DATA_F32(r.bufs[0], 8, 9, 10, 11, 14, 15, 16, 17);
    run_free(&r);
    /* empty result: start past end with positive step */
    int64_t st3[] = {3}, en3[] = {1}, ax3[] = {1};
    tin i3[4] = {x, {I64, 1, {1}, st3}, {I64, 1, {1}, en3}, {I64, 1, {1}, ax3}};
    run_op(&r, "Slice", 13, NULL, 0, i3, 4, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 4, 0);
    run_free(&r);
    /* int32 inputs, omitted axes with steps given */
    int32_t s4[] = {-1}, e4[] = {-4}, p4[] = {-1};
    tin i4[5] = {x, {I32, 1, {1}, s4}, {I32, 1, {1}, e4}, {NNF_DTYPE_UNDEFINED}, {I32, 1, {1}, p4}};
    run_op(&r, "Slice", 13, NULL, 0, i4, 5, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 3, 6);
    DATA_F32(r.bufs[0], 18, 19, 20, 21, 22, 23, 12, 13, 14, 15, 16, 17, 6, 7, 8, 9, 10, 11);
    run_free(&r);
    /* step 0 is invalid */
    int64_t z[] = {0};
    tin i5[5] = {x, {I64, 1, {1}, st3}, {I64, 1, {1}, en3}, {I64, 1, {1}, ax3}, {I64, 1, {1}, z}};
    run_op(&r, "Slice", 13, NULL, 0, i5, 5, 1, false);
    CHECK(r.st_infer == NNF_ERR_INVALID_MODEL);
    run_free(&r);
    /* opset 1 attributes */
    int64_t as[] = {1}, ae[] = {3}, aa[] = {1};
    nnf_attr at[3] = {A_INTS("starts", as, 1), A_INTS("ends", ae, 1), A_INTS("axes", aa, 1)};
    run_op(&r, "Slice", 1, at, 3, &x, 1, 1, true);
    SHAPE_IS(r.out[0].shape, 4, 2);
    DATA_F32(r.bufs[0], 1, 2, 7, 8, 13, 14, 19, 20);
    run_free(&r);
    /* unknown starts: axes known -> other dims keep extents */
    i3[1].hide = true;
    run_op(&r, "Slice", 13, NULL, 0, i3, 4, 1, false);
    CHECK(r.st_infer == NNF_OK);
    SHAPE_IS(r.out[0].shape, 4, -1);
    run_free(&r);
}

/* ---- Tile / Expand / Pad ----------------------------------------------- */

static void test_tile_expand_pad(void) {
    trun r;
    float a[] = {1, 2, 3, 4};
    int64_t rep[] = {2, 1};
    tin t[2] = {{F32, 2, {2, 2}, a}, {I64, 1, {2}, rep}};
    run_op(&r, "Tile", 13, NULL, 0, t, 2, 1, true);
    SHAPE_IS(r.out[0].shape, 4, 2);
    DATA_F32(r.bufs[0], 1, 2, 3, 4, 1, 2, 3, 4);
    run_free(&r);
    int64_t rep2[] = {1, 3};
    t[1].data = rep2;
    run_op(&r, "Tile", 13, NULL, 0, t, 2, 1, true);
    DATA_F32(r.bufs[0], 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4);
    run_free(&r);

    float col[] = {1, 2, 3};
    int64_t shp[] = {2, 1, 2};
    tin e[2] = {{F32, 2, {3, 1}, col}, {I64, 1, {3}, shp}};
    run_op(&r, "Expand", 13, NULL, 0, e, 2, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 2, 3, 2);
    DATA_F32(r.bufs[0], 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3);
    run_free(&r);
    int64_t bad[] = {2, 2};
    e[1] = (tin){I64, 1, {2}, bad};
    run_op(&r, "Expand", 13, NULL, 0, e, 2, 1, false);
    CHECK(r.st_infer == NNF_ERR_SHAPE);
    run_free(&r);

    /* Pad constant with input value, then reflect / edge / wrap, negative crop */
    float x[] = {1, 2, 3};
    int64_t pads[] = {2, 1};
    float cv = 9;
    tin p[3] = {{F32, 1, {3}, x}, {I64, 1, {2}, pads}, {F32, 0, {0}, &cv}};
    run_op(&r, "Pad", 13, NULL, 0, p, 3, 1, true);
    CHECK(r.st_ref == NNF_OK);
    DATA_F32(r.bufs[0], 9, 9, 1, 2, 3, 9);
    run_free(&r);
    nnf_attr mode = A_STR("mode", "reflect");
    run_op(&r, "Pad", 13, &mode, 1, p, 2, 1, true);
    DATA_F32(r.bufs[0], 3, 2, 1, 2, 3, 2);
    run_free(&r);
    mode.s = "edge";
    run_op(&r, "Pad", 13, &mode, 1, p, 2, 1, true);
    DATA_F32(r.bufs[0], 1, 1, 1, 2, 3, 3);
    run_free(&r);
    mode.s = "wrap";
    run_op(&r, "Pad", 19, &mode, 1, p, 2, 1, true);
    DATA_F32(r.bufs[0], 2, 3, 1, 2, 3, 1);
    run_free(&r);
    run_op(&r, "Pad", 18, &mode, 1, p, 2, 1, false);
    CHECK(r.st_init == NNF_ERR_UNSUPPORTED); /* wrap arrived in opset 19 */
    run_free(&r);
    int64_t crop[] = {-1, 2};
    p[1].data = crop;
    run_op(&r, "Pad", 13, NULL, 0, p, 2, 1, true);
    DATA_F32(r.bufs[0], 2, 3, 0, 0);
    run_free(&r);
    /* wrap after a crop sees only the kept elements (ONNX Runtime semantics) */
    int64_t wc[] = {-1, 2};
    p[1].data = wc;
    mode.s = "wrap";
    run_op(&r, "Pad", 19, &mode, 1, p, 2, 1, true);
    DATA_F32(r.bufs[0], 2, 3, 2, 3);
    run_free(&r);
    mode.s = "reflect";
    int64_t all[] = {-3, 1};
    p[1].data = all; /* nothing left to reflect */
    run_op(&r, "Pad", 19, &mode, 1, p, 2, 1, true);
    CHECK(r.st_ref == NNF_ERR_SHAPE);
    run_free(&r);
    /* opset 18 axes input on a 2-D tensor; opset 2 attribute form */
    int64_t p2[] = {1, 0}, ax[] = {-2};
    tin q[4] = {{F32, 2, {2, 2}, a}, {I64, 1, {2}, p2}, {NNF_DTYPE_UNDEFINED}, {I64, 1, {1}, ax}};
    run_op(&r, "Pad", 18, NULL, 0, q, 4, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 3, 2);
    DATA_F32(r.bufs[0], 0, 0, 1, 2, 3, 4);
    run_free(&r);
    int64_t ap[] = {0, 1, 0, 1};
    nnf_attr pa[2] = {A_INTS("pads", ap, 4), A_FLOAT("value", -1)};
    run_op(&r, "Pad", 2, pa, 2, q, 1, 1, true);
    SHAPE_IS(r.out[0].shape, 2, 4);
    DATA_F32(r.bufs[0], -1, 1, 2, -1, -1, 3, 4, -1);
    run_free(&r);
}

/* ---- Gather family ----------------------------------------------------- */

static void test_gather(void) {
    trun r;
    tin x = {F32, 2, {3, 2}, iota24};
    int64_t idx[] = {-1, 0, 2, 1};
    tin g[2] = {x, {I64, 2, {2, 2}, idx}};
    run_op(&r, "Gather", 13, NULL, 0, g, 2, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 2, 2, 2);
    DATA_F32(r.bufs[0], 4, 5, 0, 1, 4, 5, 2, 3);
    run_free(&r);
    /* scalar index on axis 1: shape arithmetic Shape -> Gather */
    int64_t shp[] = {7, 8, 9}, one = -2;
    tin s[2] = {{I64, 1, {3}, shp}, {I64, 0, {0}, &one}};
    run_op(&r, "Gather", 13, NULL, 0, s, 2, 1, true);
    SHAPE_RANK0(r.out[0].shape);
    DATA_I64(r.bufs[0], 8);
    run_free(&r);
    nnf_attr ax = A_INT("axis", 1);
    int32_t i1[] = {1};
    tin g1[2] = {x, {I32, 1, {1}, i1}};
    run_op(&r, "Gather", 13, &ax, 1, g1, 2, 1, true);
    SHAPE_IS(r.out[0].shape, 3, 1);
    DATA_F32(r.bufs[0], 1, 3, 5);
    run_free(&r);
    int64_t oob[] = {3};
    tin g2[2] = {x, {I64, 1, {1}, oob}};
    run_op(&r, "Gather", 13, NULL, 0, g2, 2, 1, false);
    CHECK(r.st_infer == NNF_ERR_INVALID_ARGUMENT);
    run_free(&r);
    g2[1].hide = true;
    run_op(&r, "Gather", 13, NULL, 0, g2, 2, 1, true);
    CHECK(r.st_ref == NNF_ERR_INVALID_ARGUMENT);
    run_free(&r);

    /* GatherElements axis 1 */
    int64_t ge[] = {1, 0, 0, 0, -1, 1};
    tin e[2] = {x, {I64, 2, {3, 2}, ge}};
    run_op(&r, "GatherElements", 13, &ax, 1, e, 2, 1, true);
    CHECK(r.st_ref == NNF_OK);
    DATA_F32(r.bufs[0], 1, 0, 2, 2, 5, 5);
    run_free(&r);

    /* GatherND: batch_dims 0 and 1 */
    int64_t nd[] = {1, 0, 2, 1};
    tin n[2] = {x, {I64, 2, {2, 2}, nd}};
    run_op(&r, "GatherND", 13, NULL, 0, n, 2, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 2);
    DATA_F32(r.bufs[0], 2, 5);
    run_free(&r);
    int64_t nd1[] = {1, 0, 1};
    tin nb[2] = {x, {I64, 2, {3, 1}, nd1}};
    nnf_attr bd = A_INT("batch_dims", 1);
    run_op(&r, "GatherND", 13, &bd, 1, nb, 2, 1, true);
    SHAPE_IS(r.out[0].shape, 3);
    DATA_F32(r.bufs[0], 1, 2, 5);
    run_free(&r);

    /* ScatterND with add */
    float data[] = {1, 2, 3, 4}, upd[] = {10, 20};
    int64_t si[] = {3, -4};
    tin sc[3] = {{F32, 1, {4}, data}, {I64, 2, {2, 1}, si}, {F32, 1, {2}, upd}};
    run_op(&r, "ScatterND", 13, NULL, 0, sc, 3, 1, true);
    DATA_F32(r.bufs[0], 20, 2, 3, 10);
    run_free(&r);
    nnf_attr red = A_STR("reduction", "add");
    run_op(&r, "ScatterND", 16, &red, 1, sc, 3, 1, true);
    DATA_F32(r.bufs[0], 21, 2, 3, 14);
    run_free(&r);
    run_op(&r, "ScatterND", 13, &red, 1, sc, 3, 1, false);
    CHECK(r.st_init == NNF_ERR_UNSUPPORTED);
    run_free(&r);
}

/* ---- OneHot / NonZero / TopK / Trilu / CumSum -------------------------- */

static void test_misc(void) {
    trun r;
    int64_t oi[] = {0, -1, 5};
    float depth = 3, vals[] = {0, 1};
    tin oh[3] = {{I64, 1, {3}, oi}, {F32, 0, {0}, &depth}, {F32, 1, {2}, vals}};
    run_op(&r, "OneHot", 11, NULL, 0, oh, 3, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 3, 3);
    DATA_F32(r.bufs[0], 1, 0, 0, 0, 0, 1, 0, 0, 0);
    run_free(&r);
    nnf_attr a0 = A_INT("axis", 0);
    run_op(&r, "OneHot", 11, &a0, 1, oh, 3, 1, true);
    DATA_F32(r.bufs[0], 1, 0, 0, 0, 0, 0, 0, 1, 0);
    run_free(&r);

    float nz[] = {0, 1, -0.0f, 2, 0, 3};
    tin n = {F32, 2, {2, 3}, nz};
    run_op(&r, "NonZero", 13, NULL, 0, &n, 1, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 2, 3);
    DATA_I64(r.bufs[0], 0, 1, 1, 1, 0, 2);
    run_free(&r);
    n.hide = true;
    run_op(&r, "NonZero", 13, NULL, 0, &n, 1, 1, false);
    SHAPE_IS(r.out[0].shape, 2, -1);
    run_free(&r);

    float tk[] = {3, 1, 3, 2, 5, 0};
    int64_t k = 2;
    tin t[2] = {{F32, 2, {2, 3}, tk}, {I64, 1, {1}, &k}};
    run_op(&r, "TopK", 11, NULL, 0, t, 2, 2, true);
    CHECK(r.st_ref == NNF_OK);
    DATA_F32(r.bufs[0], 3, 3, 5, 2);
    DATA_I64(r.bufs[1], 0, 2, 1, 0);
    run_free(&r);
    nnf_attr tka[2] = {A_INT("largest", 0), A_INT("axis", 0)};
    int64_t k1 = 1;
    t[1].data = &k1;
    run_op(&r, "TopK", 11, tka, 2, t, 2, 2, true);
    SHAPE_IS(r.out[0].shape, 1, 3);
    DATA_F32(r.bufs[0], 2, 1, 0);
    DATA_I64(r.bufs[1], 1, 0, 1);
    run_free(&r);
    int64_t big = 4;
    t[1].data = &big;
    run_op(&r, "TopK", 11, NULL, 0, t, 2, 2, false);
    CHECK(r.st_infer == NNF_ERR_SHAPE);
    run_free(&r);

    tin tr = {F32, 2, {3, 3}, iota24};
    run_op(&r, "Trilu", 14, NULL, 0, &tr, 1, 1, true);
    DATA_F32(r.bufs[0], 0, 1, 2, 0, 4, 5, 0, 0, 8);
    run_free(&r);
    int64_t kk = -1;
    nnf_attr lo = A_INT("upper", 0);
    tin tr2[2] = {tr, {I64, 0, {0}, &kk}};
    run_op(&r, "Trilu", 14, &lo, 1, tr2, 2, 1, true);
    DATA_F32(r.bufs[0], 0, 0, 0, 3, 0, 0, 6, 7, 0);
    run_free(&r);

    float cs[] = {1, 2, 3, 4, 5, 6};
    int32_t axis = -1;
    tin c[2] = {{F32, 2, {2, 3}, cs}, {I32, 0, {0}, &axis}};
    run_op(&r, "CumSum", 14, NULL, 0, c, 2, 1, true);
    DATA_F32(r.bufs[0], 1, 3, 6, 4, 9, 15);
    run_free(&r);
    nnf_attr ca[2] = {A_INT("exclusive", 1), A_INT("reverse", 1)};
    run_op(&r, "CumSum", 14, ca, 2, c, 2, 1, true);
    DATA_F32(r.bufs[0], 5, 3, 0, 11, 6, 0);
    run_free(&r);
}

/* ---- Cast / Dropout / Identity ----------------------------------------- */

static void test_cast(void) {
    trun r;
    float x[] = {1.5f, -2.7f, 65504.0f, 1e-8f, 0.0f, 3.0f};
    tin in = {F32, 1, {6}, x};
    nnf_attr to = A_INT("to", NNF_DTYPE_FLOAT16);
    run_op(&r, "Cast", 13, &to, 1, &in, 1, 1, true);
    CHECK(r.st_ref == NNF_OK && r.out[0].dtype == NNF_DTYPE_FLOAT16);
    const uint16_t *h = r.bufs[0].data;
    CHECK(h[0] == 0x3e00 && h[2] == 0x7bff && h[3] == 0x0000 && h[5] == 0x4200);
    CHECK(nnf_f16_to_f32(h[1]) == -2.69921875f);
    run_free(&r);
    to.i = I32;
    run_op(&r, "Cast", 13, &to, 1, &in, 1, 1, true);
    CHECK(((int32_t *)r.bufs[0].data)[0] == 1 && ((int32_t *)r.bufs[0].data)[1] == -2);
    run_free(&r);
    to.i = NNF_DTYPE_BOOL;
    run_op(&r, "Cast", 13, &to, 1, &in, 1, 1, true);
    const uint8_t *bo = r.bufs[0].data;
    CHECK(bo[0] == 1 && bo[3] == 1 && bo[4] == 0);
    run_free(&r);
    int64_t big[] = {300, -1, INT64_MAX};
    tin ib = {I64, 1, {3}, big};
    to.i = NNF_DTYPE_UINT8;
    run_op(&r, "Cast", 13, &to, 1, &ib, 1, 1, true);
    const uint8_t *u8 = r.bufs[0].data;
    CHECK(u8[0] == 44 && u8[1] == 255 && u8[2] == 255);
    run_free(&r);
    to.i = NNF_DTYPE_FLOAT64;
    run_op(&r, "Cast", 13, &to, 1, &ib, 1, 1, true);
    CHECK(((double *)r.bufs[0].data)[0] == 300.0);
    run_free(&r);
    /* f16 subnormals and round trips */
    CHECK(nnf_f32_to_f16(5.9604645e-8f) == 0x0001);
    CHECK(nnf_f16_to_f32(0x0001) == 5.9604645e-8f);
    CHECK(nnf_f16_to_f32(0x3c00) == 1.0f);
    CHECK(nnf_f32_to_f16(65520.0f) == 0x7c00);
    CHECK(nnf_f32_to_bf16(1.0f) == 0x3f80);
    for (uint32_t b = 0; b < 0x7c00; b++)
        if (nnf_f32_to_f16(nnf_f16_to_f32((uint16_t)b)) != b) {
            CHECK_MSG(0, "f16 round trip of 0x%04x", b);
            break;
        }
    to.i = NNF_DTYPE_STRING;
    run_op(&r, "Cast", 13, &to, 1, &in, 1, 1, false);
    CHECK(r.st_init == NNF_ERR_UNSUPPORTED);
    run_free(&r);
    to.i = 17; /* float8e4m3fn */
    run_op(&r, "Cast", 19, &to, 1, &in, 1, 1, false);
    CHECK(r.st_init == NNF_ERR_UNSUPPORTED);
    run_free(&r);
    nnf_attr tos = A_STR("to", "INT64");
    run_op(&r, "Cast", 1, &tos, 1, &in, 1, 1, true);
    CHECK(r.out[0].dtype == I64 && ((int64_t *)r.bufs[0].data)[2] == 65504);
    run_free(&r);
    int64_t like = 0;
    tin cl[2] = {in, {I64, 0, {0}, &like}};
    run_op(&r, "CastLike", 15, NULL, 0, cl, 2, 1, true);
    CHECK(r.st_ref == NNF_OK && r.out[0].dtype == I64);
    run_free(&r);

    tin d = {F32, 2, {2, 3}, iota24};
    run_op(&r, "Dropout", 13, NULL, 0, &d, 1, 2, true);
    CHECK(r.st_ref == NNF_OK && r.out[1].dtype == NNF_DTYPE_BOOL);
    DATA_F32(r.bufs[0], 0, 1, 2, 3, 4, 5);
    CHECK(((uint8_t *)r.bufs[1].data)[5] == 1);
    run_free(&r);
    run_op(&r, "Identity", 13, NULL, 0, &d, 1, 1, true);
    DATA_F32(r.bufs[0], 0, 1, 2, 3, 4, 5);
    run_free(&r);
}

static void test_einsum(void) {
    trun r;
    float a[] = {1, 2, 3, 4, 5, 6}, b[] = {1, 0, 0, 1, 1, 1};
    tin mm[2] = {{F32, 2, {2, 3}, a}, {F32, 2, {3, 2}, b}};
    nnf_attr eq = A_STR("equation", "ij, jk -> ik");
    run_op(&r, "Einsum", 12, &eq, 1, mm, 2, 1, true);
    CHECK(r.st_ref == NNF_OK);
    SHAPE_IS(r.out[0].shape, 2, 2);
    DATA_F32(r.bufs[0], 4, 5, 10, 11);
    run_free(&r);
    eq.s = "ji"; /* implicit output: alphabetical, i.e. a transpose */
    run_op(&r, "Einsum", 12, &eq, 1, mm, 1, 1, true);
    SHAPE_IS(r.out[0].shape, 3, 2);
    DATA_F32(r.bufs[0], 1, 4, 2, 5, 3, 6);
    run_free(&r);
    tin sq = {F32, 2, {3, 3}, iota24};
    eq.s = "ii->i";
    run_op(&r, "Einsum", 12, &eq, 1, &sq, 1, 1, true);
    DATA_F32(r.bufs[0], 0, 4, 8);
    run_free(&r);
    eq.s = "ii";
    run_op(&r, "Einsum", 12, &eq, 1, &sq, 1, 1, true);
    SHAPE_RANK0(r.out[0].shape);
    DATA_F32(r.bufs[0], 12);
    run_free(&r);
    eq.s = "ij,jk->iz";
    run_op(&r, "Einsum", 12, &eq, 1, mm, 2, 1, false);
    CHECK(r.st_infer == NNF_ERR_INVALID_MODEL);
    run_free(&r);
    eq.s = "ij,jk->ik";
    tin bad[2] = {{F32, 2, {2, 3}, a}, {F32, 2, {2, 3}, b}};
    run_op(&r, "Einsum", 12, &eq, 1, bad, 2, 1, false);
    CHECK(r.st_infer == NNF_ERR_SHAPE);
    run_free(&r);
}

/* A kernel whose scratch allocation fails reports OUT_OF_MEMORY, not a crash. */
static void test_alloc_failure(void) {
    trun r;
    tin x = {F32, 2, {2, 3}, iota24};
    nnf_alloc_fail_after(0);
    bool saw_oom = false;
    for (uint64_t n = 1; n < 8; n++) {
        memset(&r, 0, sizeof r);
        /* count allocations of init (arena) + the kernel; fail the n-th */
        nnf_alloc_fail_after(n);
        run_op(&r, "Transpose", 13, NULL, 0, &x, 1, 1, true);
        nnf_alloc_fail_after(0);
        nnf_status st = r.st_init != NNF_OK ? r.st_init : r.st_infer != NNF_OK ? r.st_infer : r.st_ref;
        CHECK(st == NNF_OK || st == NNF_ERR_OUT_OF_MEMORY);
        saw_oom |= st == NNF_ERR_OUT_OF_MEMORY;
        if (st == NNF_OK)
            DATA_F32(r.bufs[0], 0, 3, 1, 4, 2, 5);
        run_free(&r);
    }
    CHECK(saw_oom);
}

int main(void) {
    test_reshape();
    test_flatten_squeeze();
    test_shape_size();
    test_constants();
    test_range_eye();
    test_transpose();
    test_concat_split();
    test_slice();
    test_tile_expand_pad();
    test_gather();
    test_misc();
    test_cast();
    test_einsum();
    test_alloc_failure();
    TEST_MAIN_END();
}

/* nn operators (conv, pools, norms, gemm, resize, depth/space) through the op
 * table: init + infer + reference kernel on hand-built nodes, checked against
 * hand-computed expectations; conv/matmul also against a naive independent
 * loop at awkward sizes, and with a thread pool against without. */
#include "base/threadpool.h"
#include "ops/conv.h"
#include "ops/op.h"
#include "ops/params.h"
#include "check.h"

#include <stdlib.h>
#include <string.h>

#define F32 NNF_DTYPE_FLOAT32
#define I64 NNF_DTYPE_INT64

typedef struct tin {
    nnf_dtype dtype; /* UNDEFINED = an omitted optional input */
    int rank;
    int64_t dims[NNF_MAX_RANK];
    const void *data;
    int hidden; /* infer sees the shape but not the contents */
} tin;

typedef struct tres {
    nnf_status st;
    const char *stage;
    nnf_tinfo out[8];
    nnf_buf buf[8];
    double cost;
} tres;

typedef void (*tweak_fn)(nnf_node *node);

static nnf_attr a_int(const char *n, int64_t v) { return (nnf_attr){.name = n, .type = NNF_ATTR_INT, .i = v}; }
static nnf_attr a_float(const char *n, float v) { return (nnf_attr){.name = n, .type = NNF_ATTR_FLOAT, .f = v}; }
static nnf_attr a_str(const char *n, const char *s) {
    return (nnf_attr){.name = n, .type = NNF_ATTR_STRING, .s = s, .s_len = strlen(s)};
}
static nnf_attr a_ints(const char *n, const int64_t *v, int c) {
    return (nnf_attr){.name = n, .type = NNF_ATTR_INTS, .ints = v, .count = c};
}
static nnf_attr a_floats(const char *n, const float *v, int c) {
    return (nnf_attr){.name = n, .type = NNF_ATTR_FLOATS, .floats = v, .count = c};
}

static const char *batch_name = "batch";

/* Run op through init, tweak (may edit params as a fusion pass would), infer,
 * cost and the reference kernel. Inputs whose dims[0] is -1 are given to
 * infer with a symbolic batch; the kernel then needs `batch` as extent. */
static tres run(const char *op, int opset, nnf_attr *attrs, int n_attrs, const tin *ins, int n_in, int n_out,
                tweak_fn tweak, nnf_threadpool *pool, int infer_only) {
    tres r = {.st = NNF_OK};
    nnf_graph *g = NULL;
    int vin[8], vout[8];
    nnf_tinfo ti[8];
    nnf_buf ib[8], *ip[8], *op_[8];
    memset(ti, 0, sizeof ti);
    if (nnf_graph_create(&g) != NNF_OK)
        abort();
    for (int i = 0; i < n_in; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        vin[i] = ins[i].dtype == NNF_DTYPE_UNDEFINED ? NNF_NO_VALUE : nnf_graph_value(g, name);
    }
    for (int k = 0; k < n_out; k++) {
        char name[16];
        snprintf(name, sizeof name, "out%d", k);
        vout[k] = nnf_graph_value(g, name);
    }
    int id = nnf_graph_add_node(g, "n0", op, "", vin, n_in, vout, n_out);
    if (id < 0)
        abort();
    nnf_node *node = &g->nodes[id];
    node->opset = opset;
    node->attrs = attrs;
    node->n_attrs = n_attrs;
    node->op = nnf_op_find("", op, opset, NULL);
    if (!node->op) {
        r.st = NNF_ERR_UNSUPPORTED;
        r.stage = "find";
        goto done;
    }
    if ((r.st = node->op->init(node, &g->arena)) != NNF_OK) {
        r.stage = "init";
        goto done;
    }
    if (tweak)
        tweak(node);
    for (int i = 0; i < n_in; i++) {
        ti[i].present = ins[i].dtype != NNF_DTYPE_UNDEFINED;
        ti[i].dtype = ins[i].dtype;
        ti[i].shape.rank = ins[i].rank;
        for (int d = 0; d < ins[i].rank; d++) {
            ti[i].shape.dims[d] = ins[i].dims[d];
            if (ins[i].dims[d] < 0)
                ti[i].shape.dim_names[d] = batch_name;
        }
        ti[i].data = ins[i].hidden ? NULL : ins[i].data;
    }
    for (int k = 0; k < n_out; k++) {
        r.out[k].present = true;
        r.out[k].shape.rank = -1;
    }
    if ((r.st = node->op->infer(node, ti, r.out)) != NNF_OK) {
        r.stage = "infer";
        goto done;
    }
    r.cost = node->op->cost(node, ti, r.out);
    if (infer_only)
        goto done;
    for (int i = 0; i < n_in; i++) {
        ip[i] = NULL;
        if (!ti[i].present)
            continue;
        ib[i] = (nnf_buf){.dtype = ins[i].dtype, .rank = ins[i].rank, .data = (void *)ins[i].data, .numel = 1};
        for (int d = 0; d < ins[i].rank; d++) {
            ib[i].dims[d] = ins[i].dims[d];
            ib[i].numel *= (size_t)ins[i].dims[d];
        }
        ip[i] = &ib[i];
    }
    for (int k = 0; k < n_out; k++) {
        nnf_buf *b = &r.buf[k];
        int64_t numel = nnf_shape_numel(&r.out[k].shape);
        if (numel < 0) {
            r.st = NNF_ERR_SHAPE;
            r.stage = "shape unknown";
            goto done;
        }
        *b = (nnf_buf){.dtype = r.out[k].dtype, .rank = r.out[k].shape.rank, .numel = (size_t)numel};
        memcpy(b->dims, r.out[k].shape.dims, sizeof b->dims);
        size_t bytes = b->numel * nnf_dtype_size(b->dtype) + 8;
        b->data = malloc(bytes);
        memset(b->data, 0x7f, bytes); /* poison: a forgotten element shows */
        op_[k] = b;
    }
    nnf_kctx ctx = {.pool = pool};
    if ((r.st = node->op->ref(node, ip, op_, &ctx)) != NNF_OK)
        r.stage = "ref";
done:
    if (r.st != NNF_OK && getenv("VERBOSE"))
        fprintf(stderr, "%s %s: %s\n", op, r.stage, nnf_last_error());
    nnf_graph_destroy(g);
    return r;
}

static void tres_free(tres *r) {
    for (int k = 0; k < 8; k++)
        free(r->buf[k].data);
}

static int match(const tres *r, int k, const float *want, size_t n, double tol) {
    if (r->st != NNF_OK || r->buf[k].numel != n || r->buf[k].dtype != F32) {
        fprintf(stderr, "  status %d (%s), numel %zu want %zu\n", r->st, r->stage ? r->stage : "", r->buf[k].numel, n);
        return 0;
    }
    const float *y = r->buf[k].data;
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)y[i] - want[i]) <= tol * (1.0 + fabs((double)want[i])))) {
            fprintf(stderr, "  element %zu: got %.9g want %.9g\n", i, y[i], want[i]);
            return 0;
        }
    return 1;
}

static int shape_is(const tres *r, int k, int rank, const int64_t *dims) {
    if (r->out[k].shape.rank != rank)
        return 0;
    for (int i = 0; i < rank; i++)
        if (r->out[k].shape.dims[i] != dims[i])
            return 0;
    return 1;
}

#define T4(d0, d1, d2, d3) {d0, d1, d2, d3}
#define IN(r, dims, data) {F32, r, dims, data, 0}
#define N_(a) (sizeof(a) / sizeof((a)[0]))

/* ---- Conv ------------------------------------------------------------------ */

static void test_conv_pads_strides(void) {
    static const float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 1, 1, 1};
    int64_t pads[] = {1, 1, 1, 1}, strides[] = {2, 2};
    nnf_attr at[] = {a_ints("pads", pads, 4), a_ints("strides", strides, 2)};
    tin in[] = {IN(4, T4(1, 1, 3, 3), x), IN(4, T4(1, 1, 2, 2), w)};
    tres r = run("Conv", 11, at, 2, in, 2, 1, NULL, NULL, 0);
    static const float want[] = {1, 5, 11, 28};
    CHECK(shape_is(&r, 0, 4, (int64_t[]){1, 1, 2, 2}));
    CHECK(match(&r, 0, want, 4, 0));
    CHECK_NEAR(r.cost, 2.0 * 4 * 4, 0);
    tres_free(&r);
}

static void test_conv_dilation(void) {
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)i;
    static const float w[4] = {1, 0, 0, 1};
    int64_t dil[] = {2, 2};
    nnf_attr at[] = {a_ints("dilations", dil, 2)};
    tin in[] = {IN(4, T4(1, 1, 4, 4), x), IN(4, T4(1, 1, 2, 2), w)};
    tres r = run("Conv", 11, at, 1, in, 2, 1, NULL, NULL, 0);
    static const float want[] = {10, 12, 18, 20};
    CHECK(match(&r, 0, want, 4, 0));
    tres_free(&r);
}

static void test_conv_group_bias(void) {
    static const float x[] = {1, 2, 3, 4, 5, 6, 7, 8}, w[] = {2, 3}, b[] = {1, -1};
    nnf_attr at[] = {a_int("group", 2)};
    tin in[] = {IN(4, T4(1, 2, 2, 2), x), IN(4, T4(2, 1, 1, 1), w), {F32, 1, {2}, b, 0}};
    tres r = run("Conv", 11, at, 1, in, 3, 1, NULL, NULL, 0);
    static const float want[] = {3, 5, 7, 9, 14, 17, 20, 23};
    CHECK(match(&r, 0, want, 8, 0));
    tres_free(&r);
    /* channels must equal W's C/group x group */
    nnf_attr bad[] = {a_int("group", 3)};
    r = run("Conv", 11, bad, 1, in, 3, 1, NULL, NULL, 0);
    CHECK(r.st != NNF_OK);
    tres_free(&r);
}

static void test_conv_depthwise(void) {
    float x[18], w[18];
    for (int i = 0; i < 9; i++) {
        x[i] = 1;
        x[9 + i] = (float)(i + 1);
    }
    for (int i = 0; i < 18; i++)
        w[i] = 1;
    int64_t pads[] = {1, 1, 1, 1};
    nnf_attr at[] = {a_int("group", 2), a_ints("pads", pads, 4)};
    tin in[] = {IN(4, T4(1, 2, 3, 3), x), IN(4, T4(2, 1, 3, 3), w)};
    tres r = run("Conv", 11, at, 2, in, 2, 1, NULL, NULL, 0);
    static const float want[] = {4, 6, 4, 6, 9, 6, 4, 6, 4, 12, 21, 16, 27, 45, 33, 24, 39, 28};
    CHECK(match(&r, 0, want, 18, 0));
    tres_free(&r);
}

static void test_conv_pointwise_and_3d(void) {
    static const float x[] = {1, 2, 3, 4}, w[] = {1, 1, 1, -1, 2, 0};
    tin in[] = {IN(4, T4(1, 2, 1, 2), x), IN(4, T4(3, 2, 1, 1), w)};
    tres r = run("Conv", 11, NULL, 0, in, 2, 1, NULL, NULL, 0);
    static const float want[] = {4, 6, -2, -2, 2, 4};
    CHECK(match(&r, 0, want, 6, 0));
    tres_free(&r);

    float x3[8], w3[8];
    for (int i = 0; i < 8; i++) {
        x3[i] = (float)(i + 1);
        w3[i] = 1;
    }
    tin in3[] = {{F32, 5, {1, 1, 2, 2, 2}, x3, 0}, {F32, 5, {1, 1, 2, 2, 2}, w3, 0}};
    r = run("Conv", 11, NULL, 0, in3, 2, 1, NULL, NULL, 0);
    static const float want3[] = {36};
    CHECK(match(&r, 0, want3, 1, 0));
    tres_free(&r);
}

static void test_conv_auto_pad_1d(void) {
    static const float x[] = {1, 2, 3, 4, 5}, w2[] = {1, 1}, w3[] = {1, 1, 1};
    nnf_attr up[] = {a_str("auto_pad", "SAME_UPPER")}, lo[] = {a_str("auto_pad", "SAME_LOWER")};
    tin in[] = {{F32, 3, {1, 1, 5}, x, 0}, {F32, 3, {1, 1, 2}, w2, 0}};
    tres r = run("Conv", 11, up, 1, in, 2, 1, NULL, NULL, 0);
    static const float want_up[] = {3, 5, 7, 9, 5}, want_lo[] = {1, 3, 5, 7, 9};
    CHECK(match(&r, 0, want_up, 5, 0));
    tres_free(&r);
    r = run("Conv", 11, lo, 1, in, 2, 1, NULL, NULL, 0);
    CHECK(match(&r, 0, want_lo, 5, 0));
    tres_free(&r);
    int64_t s2[] = {2};
    nnf_attr up2[] = {a_str("auto_pad", "SAME_UPPER"), a_ints("strides", s2, 1)};
    tin in3[] = {{F32, 3, {1, 1, 5}, x, 0}, {F32, 3, {1, 1, 3}, w3, 0}};
    r = run("Conv", 11, up2, 2, in3, 2, 1, NULL, NULL, 0);
    static const float want_s2[] = {3, 9, 9};
    CHECK(match(&r, 0, want_s2, 3, 0));
    tres_free(&r);
    nnf_attr valid[] = {a_str("auto_pad", "VALID"), a_ints("strides", s2, 1)};
    r = run("Conv", 11, valid, 2, in3, 2, 1, NULL, NULL, 0);
    static const float want_v[] = {6, 12};
    CHECK(match(&r, 0, want_v, 2, 0));
    tres_free(&r);
    nnf_attr bogus[] = {a_str("auto_pad", "SAME")};
    r = run("Conv", 11, bogus, 1, in3, 2, 1, NULL, NULL, 0);
    CHECK(r.st == NNF_ERR_INVALID_MODEL && !strcmp(r.stage, "init"));
    CHECK(strstr(nnf_last_error(), "n0") && strstr(nnf_last_error(), "auto_pad"));
    tres_free(&r);
}

static void test_conv_resolve_pads(void) {
    nnf_conv_params p = {.spatial = 2, .kernel = {3, 4}, .strides = {2, 1}, .dilations = {1, 2},
                         .auto_pad = NNF_AUTO_PAD_SAME_LOWER};
    int64_t in[2] = {7, 5}, pb[2], pe[2];
    CHECK(nnf_conv_resolve_pads(&p, in, pb, pe) == NNF_OK);
    /* axis 0: out 4, total (3*2 + 3 - 7) = 2; axis 1: out 5, span 7, total 6 */
    CHECK(pb[0] == 1 && pe[0] == 1 && pb[1] == 3 && pe[1] == 3);
    p.kernel[0] = 2;
    p.auto_pad = NNF_AUTO_PAD_SAME_UPPER;
    CHECK(nnf_conv_resolve_pads(&p, in, pb, pe) == NNF_OK);
    CHECK(pb[0] == 0 && pe[0] == 1); /* total 1: the odd pad goes to the end */
    p.auto_pad = NNF_AUTO_PAD_SAME_LOWER;
    CHECK(nnf_conv_resolve_pads(&p, in, pb, pe) == NNF_OK);
    CHECK(pb[0] == 1 && pe[0] == 0);
    CHECK(nnf_conv_out_dim(4, 3, 2, 1, 0, 0, 1) == 2);
    CHECK(nnf_conv_out_dim(4, 3, 2, 1, 0, 0, 0) == 1);
    /* ceil_mode drops a window that would start inside the end padding */
    CHECK(nnf_conv_out_dim(5, 2, 2, 1, 0, 1, 1) == 3);
    CHECK(nnf_conv_out_dim(4, 2, 3, 1, 0, 1, 1) == 2);
    CHECK(nnf_conv_out_dim(2, 3, 1, 1, 0, 0, 0) == 0);
    CHECK(nnf_conv_out_dim(-1, 3, 1, 1, 0, 0, 0) == -1);
}

static void test_conv_symbolic_batch(void) {
    tin in[] = {{F32, 4, {-1, 3, 8, 8}, NULL, 0}, {F32, 4, {4, 3, 3, 3}, NULL, 0}};
    int64_t pads[] = {1, 1, 1, 1};
    nnf_attr at[] = {a_ints("pads", pads, 4)};
    tres r = run("Conv", 11, at, 1, in, 2, 1, NULL, NULL, 1);
    CHECK(r.st == NNF_OK && shape_is(&r, 0, 4, (int64_t[]){-1, 4, 8, 8}));
    CHECK(r.out[0].shape.dim_names[0] == batch_name);
    CHECK(r.cost == 0.0); /* unknown batch: no count */
    tres_free(&r);
    tin known[] = {{F32, 4, {2, 3, 8, 8}, NULL, 0}, {F32, 4, {4, 3, 3, 3}, NULL, 0}};
    r = run("Conv", 11, at, 1, known, 2, 1, NULL, NULL, 1);
    CHECK_NEAR(r.cost, 2.0 * (2 * 4 * 8 * 8) * 27, 0);
    tres_free(&r);
}

static void tweak_relu_residual(nnf_node *node) {
    nnf_conv_params *p = node->params;
    p->act.kind = NNF_ACT_RELU;
    p->residual_input = 3;
}

static void test_conv_epilogue(void) {
    static const float x[] = {1, 2, 3, 4}, w[] = {1, -1}, b[] = {0.5f, 0}, res[] = {1, 1, 1, 1, -1, -1, -1, -10};
    /* out = relu(conv + bias + residual) */
    tin in[] = {IN(4, T4(1, 1, 2, 2), x), IN(4, T4(2, 1, 1, 1), w), {F32, 1, {2}, b, 0}, IN(4, T4(1, 2, 2, 2), res)};
    tres r = run("Conv", 11, NULL, 0, in, 4, 1, tweak_relu_residual, NULL, 0);
    static const float want[] = {2.5f, 3.5f, 4.5f, 5.5f, 0, 0, 0, 0};
    CHECK(match(&r, 0, want, 8, 0));
    tres_free(&r);
    static const float res2[] = {0, 0, 0, 0, 5, 5, 5, 5};
    in[3].data = res2;
    r = run("Conv", 11, NULL, 0, in, 4, 1, tweak_relu_residual, NULL, 0);
    static const float want2[] = {1.5f, 2.5f, 3.5f, 4.5f, 4, 3, 2, 1};
    CHECK(match(&r, 0, want2, 8, 0));
    tres_free(&r);
}

/* Naive conv straight from the definition: the independent oracle. */
static void naive_conv(const float *x, const float *w, const float *b, float *y, int64_t n, int64_t c, int64_t h,
                       int64_t wd, int64_t m, int64_t g, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh,
                       int64_t dw, int64_t ph, int64_t pw, int64_t oh, int64_t ow) {
    int64_t cg = c / g, mg = m / g;
    for (int64_t in = 0; in < n; in++)
        for (int64_t om = 0; om < m; om++)
            for (int64_t oy = 0; oy < oh; oy++)
                for (int64_t ox = 0; ox < ow; ox++) {
                    double acc = b ? b[om] : 0;
                    for (int64_t ic = 0; ic < cg; ic++)
                        for (int64_t ky = 0; ky < kh; ky++)
                            for (int64_t kx = 0; kx < kw; kx++) {
                                int64_t iy = oy * sh + ky * dh - ph, ix = ox * sw + kx * dw - pw;
                                if (iy < 0 || iy >= h || ix < 0 || ix >= wd)
                                    continue;
                                acc += (double)x[((in * c) + (om / mg) * cg + ic) * h * wd + iy * wd + ix] *
                                       w[((om * cg + ic) * kh + ky) * kw + kx];
                            }
                    y[((in * m + om) * oh + oy) * ow + ox] = (float)acc;
                }
}

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void test_conv_vs_naive(nnf_threadpool *pool) {
    struct {
        int64_t n, c, h, w, m, g, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
    } cases[] = {
        {1, 3, 11, 13, 5, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
        {2, 4, 9, 7, 6, 2, 3, 2, 2, 3, 1, 2, 0, 2, 1, 0},
        {1, 6, 10, 10, 6, 6, 5, 5, 2, 2, 1, 1, 2, 2, 2, 2},
        {1, 5, 17, 3, 7, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
        {1, 2, 8, 9, 4, 2, 3, 3, 3, 2, 2, 2, 3, 1, 0, 4},
    };
    unsigned seed = 7;
    for (size_t t = 0; t < N_(cases); t++) {
        __typeof__(cases[0]) k = cases[t];
        int64_t oh = (k.h + k.pt + k.pb - (k.kh - 1) * k.dh - 1) / k.sh + 1;
        int64_t ow = (k.w + k.pl + k.pr - (k.kw - 1) * k.dw - 1) / k.sw + 1;
        size_t nx = (size_t)(k.n * k.c * k.h * k.w), nw = (size_t)(k.m * (k.c / k.g) * k.kh * k.kw);
        size_t ny = (size_t)(k.n * k.m * oh * ow);
        float *x = malloc(nx * 4), *w = malloc(nw * 4), *b = malloc((size_t)k.m * 4), *want = malloc(ny * 4);
        for (size_t i = 0; i < nx; i++)
            x[i] = frand(&seed);
        for (size_t i = 0; i < nw; i++)
            w[i] = frand(&seed);
        for (int64_t i = 0; i < k.m; i++)
            b[i] = frand(&seed);
        naive_conv(x, w, b, want, k.n, k.c, k.h, k.w, k.m, k.g, k.kh, k.kw, k.sh, k.sw, k.dh, k.dw, k.pt, k.pl, oh, ow);
        int64_t pads[] = {k.pt, k.pl, k.pb, k.pr}, st[] = {k.sh, k.sw}, dl[] = {k.dh, k.dw};
        nnf_attr at[] = {a_ints("pads", pads, 4), a_ints("strides", st, 2), a_ints("dilations", dl, 2),
                         a_int("group", k.g)};
        tin in[] = {IN(4, T4(k.n, k.c, k.h, k.w), x), IN(4, T4(k.m, k.c / k.g, k.kh, k.kw), w),
                    {F32, 1, {k.m}, b, 0}};
        tres r = run("Conv", 11, at, 4, in, 3, 1, NULL, pool, 0);
        CHECK_MSG(match(&r, 0, want, ny, 1e-5), "conv case %zu", t);
        tres_free(&r);
        free(x);
        free(w);
        free(b);
        free(want);
    }
}

/* ---- ConvTranspose --------------------------------------------------------- */

static void test_conv_transpose(void) {
    static const float x[] = {1, 2, 3, 4}, w[] = {1, 1, 1, 1};
    int64_t s2[] = {2, 2};
    nnf_attr at[] = {a_ints("strides", s2, 2)};
    tin in[] = {IN(4, T4(1, 1, 2, 2), x), IN(4, T4(1, 1, 2, 2), w)};
    tres r = run("ConvTranspose", 11, at, 1, in, 2, 1, NULL, NULL, 0);
    static const float want[] = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
    CHECK(shape_is(&r, 0, 4, (int64_t[]){1, 1, 4, 4}));
    CHECK(match(&r, 0, want, 16, 0));
    tres_free(&r);

    r = run("ConvTranspose", 11, NULL, 0, in, 2, 1, NULL, NULL, 0);
    static const float want1[] = {1, 3, 2, 4, 10, 6, 3, 7, 4};
    CHECK(match(&r, 0, want1, 9, 0));
    tres_free(&r);

    int64_t pads[] = {1, 1, 1, 1};
    nnf_attr pa[] = {a_ints("pads", pads, 4)};
    r = run("ConvTranspose", 11, pa, 1, in, 2, 1, NULL, NULL, 0);
    static const float want_c[] = {10};
    CHECK(match(&r, 0, want_c, 1, 0));
    tres_free(&r);

    /* output_padding adds a last row/column that only the bias reaches */
    int64_t op[] = {1, 1};
    static const float b[] = {0.5f};
    nnf_attr po[] = {a_ints("strides", s2, 2), a_ints("output_padding", op, 2)};
    tin inb[] = {IN(4, T4(1, 1, 2, 2), x), IN(4, T4(1, 1, 2, 2), w), {F32, 1, {1}, b, 0}};
    r = run("ConvTranspose", 11, po, 2, inb, 3, 1, NULL, NULL, 0);
    CHECK(shape_is(&r, 0, 4, (int64_t[]){1, 1, 5, 5}));
    if (r.st == NNF_OK) {
        const float *y = r.buf[0].data;
        CHECK(y[0] == 1.5f && y[3] == 2.5f && y[4] == 0.5f && y[24] == 0.5f && y[18] == 4.5f);
    }
    tres_free(&r);

    /* output_shape 3x3 with stride 2: full is 4x4, total pad 1 goes to the
     * beginning (NOTSET) */
    int64_t os[] = {3, 3};
    nnf_attr ao[] = {a_ints("strides", s2, 2), a_ints("output_shape", os, 2)};
    r = run("ConvTranspose", 11, ao, 2, in, 2, 1, NULL, NULL, 0);
    static const float want_os[] = {1, 2, 2, 3, 4, 4, 3, 4, 4};
    CHECK(match(&r, 0, want_os, 9, 0));
    tres_free(&r);

    /* groups: each input channel feeds only its own output channel */
    static const float xg[] = {1, 2}, wg[] = {3, 4};
    nnf_attr ag[] = {a_int("group", 2)};
    tin ing[] = {IN(4, T4(1, 2, 1, 1), xg), IN(4, T4(2, 1, 1, 1), wg)};
    r = run("ConvTranspose", 11, ag, 1, ing, 2, 1, NULL, NULL, 0);
    static const float want_g[] = {3, 8};
    CHECK(match(&r, 0, want_g, 2, 0));
    tres_free(&r);
}

/* ---- pools ----------------------------------------------------------------- */

static void test_maxpool(void) {
    float x[16];
    for (int i = 0; i < 16; i++)
        x[i] = (float)i;
    int64_t k3[] = {3, 3}, s2[] = {2, 2};
    nnf_attr at[] = {a_ints("kernel_shape", k3, 2), a_ints("strides", s2, 2), a_int("ceil_mode", 1)};
    tin in[] = {IN(4, T4(1, 1, 4, 4), x)};
    tres r = run("MaxPool", 12, at, 3, in, 1, 2, NULL, NULL, 0);
    static const float want[] = {10, 11, 14, 15};
    CHECK(match(&r, 0, want, 4, 0));
    CHECK(r.buf[1].dtype == I64);
    if (r.st == NNF_OK) {
        const int64_t *ind = r.buf[1].data;
        CHECK(ind[0] == 10 && ind[1] == 11 && ind[2] == 14 && ind[3] == 15);
    }
    tres_free(&r);
    nnf_attr col[] = {a_ints("kernel_shape", k3, 2), a_ints("strides", s2, 2), a_int("ceil_mode", 1),
                      a_int("storage_order", 1)};
    r = run("MaxPool", 12, col, 4, in, 1, 2, NULL, NULL, 0);
    if (r.st == NNF_OK) {
        const int64_t *ind = r.buf[1].data;
        CHECK(ind[0] == 10 && ind[1] == 14 && ind[2] == 11 && ind[3] == 15);
    } else {
        CHECK(0);
    }
    tres_free(&r);
    r = run("MaxPool", 12, at, 2, in, 1, 1, NULL, NULL, 0); /* without ceil_mode */
    static const float want_floor[] = {10};
    CHECK(match(&r, 0, want_floor, 1, 0));
    tres_free(&r);
    int64_t k2[] = {2, 2}, d2[] = {2, 2};
    nnf_attr dil[] = {a_ints("kernel_shape", k2, 2), a_ints("dilations", d2, 2)};
    r = run("MaxPool", 12, dil, 2, in, 1, 1, NULL, NULL, 0);
    CHECK(match(&r, 0, want, 4, 0));
    tres_free(&r);
    nnf_attr none[] = {a_ints("strides", s2, 2)};
    r = run("MaxPool", 12, none, 1, in, 1, 1, NULL, NULL, 0);
    CHECK(r.st == NNF_ERR_INVALID_MODEL); /* kernel_shape is required */
    tres_free(&r);
}

static void test_avgpool(void) {
    static const float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    int64_t k3[] = {3, 3}, p1[] = {1, 1, 1, 1};
    nnf_attr ex[] = {a_ints("kernel_shape", k3, 2), a_ints("pads", p1, 4)};
    nnf_attr inc[] = {a_ints("kernel_shape", k3, 2), a_ints("pads", p1, 4), a_int("count_include_pad", 1)};
    tin in[] = {IN(4, T4(1, 1, 3, 3), x)};
    tres r = run("AveragePool", 11, ex, 2, in, 1, 1, NULL, NULL, 0);
    static const float want_ex[] = {3, 3.5f, 4, 4.5f, 5, 5.5f, 6, 6.5f, 7};
    CHECK(match(&r, 0, want_ex, 9, 1e-6));
    tres_free(&r);
    r = run("AveragePool", 11, inc, 3, in, 1, 1, NULL, NULL, 0);
    static const float want_inc[] = {12 / 9.f, 21 / 9.f, 16 / 9.f, 27 / 9.f, 5, 33 / 9.f, 24 / 9.f, 39 / 9.f, 28 / 9.f};
    CHECK(match(&r, 0, want_inc, 9, 1e-6));
    tres_free(&r);

    static const float row[] = {1, 2, 3, 4, 5};
    int64_t k12[] = {1, 2};
    nnf_attr ceil[] = {a_ints("kernel_shape", k12, 2), a_ints("strides", k12, 2), a_int("ceil_mode", 1)};
    tin inr[] = {IN(4, T4(1, 1, 1, 5), row)};
    r = run("AveragePool", 11, ceil, 3, inr, 1, 1, NULL, NULL, 0);
    static const float want_ceil[] = {1.5f, 3.5f, 5};
    CHECK(match(&r, 0, want_ceil, 3, 1e-6));
    tres_free(&r);
}

static void test_global_pools(void) {
    static const float x[] = {1, 2, 3, 4, -1, -5, 2, 0};
    tin in[] = {IN(4, T4(1, 2, 2, 2), x)};
    tres r = run("GlobalAveragePool", 1, NULL, 0, in, 1, 1, NULL, NULL, 0);
    static const float avg[] = {2.5f, -1};
    CHECK(shape_is(&r, 0, 4, (int64_t[]){1, 2, 1, 1}));
    CHECK(match(&r, 0, avg, 2, 1e-7));
    tres_free(&r);
    r = run("GlobalMaxPool", 1, NULL, 0, in, 1, 1, NULL, NULL, 0);
    static const float mx[] = {4, 2};
    CHECK(match(&r, 0, mx, 2, 0));
    tres_free(&r);
    nnf_attr p1[] = {a_int("p", 1)};
    r = run("GlobalLpPool", 2, p1, 1, in, 1, 1, NULL, NULL, 0);
    static const float l1[] = {10, 8};
    CHECK(match(&r, 0, l1, 2, 1e-6));
    tres_free(&r);
}

/* ---- normalisation ------------------------------------------------------ */

static void test_batchnorm(void) {
    static const float x[] = {1, 2, 3, 4}, sc[] = {1, 2}, b[] = {0, 1}, mean[] = {1, 3}, var[] = {4, 0.25f};
    nnf_attr at[] = {a_float("epsilon", 0)};
    tin in[] = {IN(4, T4(1, 2, 1, 2), x), {F32, 1, {2}, sc, 0}, {F32, 1, {2}, b, 0}, {F32, 1, {2}, mean, 0},
                {F32, 1, {2}, var, 0}};
    tres r = run("BatchNormalization", 15, at, 1, in, 5, 1, NULL, NULL, 0);
    static const float want[] = {0, 0.5f, 1, 5};
    CHECK(match(&r, 0, want, 4, 1e-6));
    tres_free(&r);
    r = run("BatchNormalization", 9, at, 1, in, 5, 1, NULL, NULL, 0);
    CHECK(match(&r, 0, want, 4, 1e-6));
    tres_free(&r);
    nnf_attr tr[] = {a_int("training_mode", 1)};
    r = run("BatchNormalization", 15, tr, 1, in, 5, 1, NULL, NULL, 0);
    CHECK(r.st == NNF_ERR_UNSUPPORTED && !strcmp(r.stage, "init"));
    CHECK(strstr(nnf_last_error(), "training_mode") != NULL);
    tres_free(&r);
    r = run("BatchNormalization", 9, at, 1, in, 5, 5, NULL, NULL, 0);
    CHECK(r.st == NNF_ERR_UNSUPPORTED);
    tres_free(&r);
}

static void test_layernorm(void) {
    static const float x[] = {1, 2, 3, 2, 4, 6}, sc[] = {1, 1, 1}, b[] = {0, 0, 1};
    nnf_attr at[] = {a_float("epsilon", 0)};
    tin in[] = {{F32, 2, {2, 3}, x, 0}, {F32, 1, {3}, sc, 0}, {F32, 1, {3}, b, 0}};
    tres r = run("LayerNormalization", 17, at, 1, in, 3, 3, NULL, NULL, 0);
    const float k = 1.22474487f;
    const float want[] = {-k, 0, k + 1, -k, 0, k + 1}, mean[] = {2, 4}, inv[] = {k, k / 2};
    CHECK(match(&r, 0, want, 6, 1e-6));
    CHECK(shape_is(&r, 1, 2, (int64_t[]){2, 1}));
    CHECK(match(&r, 1, mean, 2, 1e-6));
    CHECK(match(&r, 2, inv, 2, 1e-6));
    tres_free(&r);
    /* axis 0 normalises everything; a scale of shape [1] broadcasts */
    static const float one[] = {2};
    nnf_attr a0[] = {a_float("epsilon", 0), a_int("axis", 0)};
    tin in0[] = {{F32, 2, {2, 3}, x, 0}, {F32, 1, {1}, one, 0}};
    r = run("LayerNormalization", 17, a0, 2, in0, 2, 1, NULL, NULL, 0);
    /* mean 3, var (4+1+0+1+1+9)/6 = 8/3 */
    const float s = 2.0f / sqrtf(8.0f / 3.0f);
    const float want0[] = {-2 * s, -1 * s, 0, -1 * s, 1 * s, 3 * s};
    CHECK(match(&r, 0, want0, 6, 1e-6));
    tres_free(&r);
}

static void test_instance_group_lp_norm(void) {
    static const float x[] = {1, 3, 2, 2, 0, 4, 1, 1}, sc[] = {1, 2}, b[] = {0, 1};
    nnf_attr at[] = {a_float("epsilon", 0)};
    tin in[] = {IN(4, T4(1, 2, 2, 2), x), {F32, 1, {2}, sc, 0}, {F32, 1, {2}, b, 0}};
    tres r = run("InstanceNormalization", 6, at, 1, in, 3, 1, NULL, NULL, 0);
    /* ch0 mean 2 var 0.5; ch1 mean 1.5 var 2.25 */
    const float r2 = 1.41421356f;
    const float want[] = {-r2, r2, 0, 0, 2 * (-1.5f / 1.5f) + 1, 2 * (2.5f / 1.5f) + 1, 2 * (-0.5f / 1.5f) + 1,
                          2 * (-0.5f / 1.5f) + 1};
    CHECK(match(&r, 0, want, 8, 1e-6));
    tres_free(&r);
    /* GroupNormalization with one group per channel equals InstanceNormalization */
    nnf_attr g[] = {a_float("epsilon", 0), a_int("num_groups", 2)};
    r = run("GroupNormalization", 21, g, 2, in, 3, 1, NULL, NULL, 0);
    CHECK(match(&r, 0, want, 8, 1e-6));
    tres_free(&r);
    /* one group over both channels (opset 18: per-group scale) */
    static const float sc1[] = {1}, b1[] = {0};
    nnf_attr g1[] = {a_float("epsilon", 0), a_int("num_groups", 1)};
    tin in1[] = {IN(4, T4(1, 2, 2, 2), x), {F32, 1, {1}, sc1, 0}, {F32, 1, {1}, b1, 0}};
    r = run("GroupNormalization", 18, g1, 2, in1, 3, 1, NULL, NULL, 0);
    /* mean 1.75, var = (0.5625+1.5625+0.0625*2+3.0625+5.0625+0.5625*2)/8 = 11.5/8 */
    const float is = 1.0f / sqrtf(11.5f / 8.0f);
    float want1[8];
    for (int i = 0; i < 8; i++)
        want1[i] = (x[i] - 1.75f) * is;
    CHECK(match(&r, 0, want1, 8, 1e-6));
    tres_free(&r);

    static const float v[] = {3, 4, 0, 0};
    nnf_attr lp[] = {a_int("axis", 1), a_int("p", 2)};
    tin inl[] = {{F32, 2, {2, 2}, v, 0}};
    r = run("LpNormalization", 1, lp, 2, inl, 1, 1, NULL, NULL, 0);
    static const float wl[] = {0.6f, 0.8f, 0, 0};
    CHECK(match(&r, 0, wl, 4, 1e-6));
    tres_free(&r);
    nnf_attr lp3[] = {a_int("p", 3)};
    r = run("LpNormalization", 1, lp3, 1, inl, 1, 1, NULL, NULL, 0);
    CHECK(r.st == NNF_ERR_INVALID_MODEL);
    tres_free(&r);
}

/* ---- Gemm / MatMul ------------------------------------------------------- */

static void test_gemm(void) {
    static const float a[] = {1, 2, 3, 4, 5, 6}, at_[] = {1, 4, 2, 5, 3, 6};
    static const float b[] = {1, 0, 0, 1, 1, 1}, bt[] = {1, 0, 1, 0, 1, 1};
    static const float cv[] = {1, 2};
    nnf_attr ab[] = {a_float("alpha", 2), a_float("beta", 0.5f)};
    tin in[] = {{F32, 2, {2, 3}, a, 0}, {F32, 2, {3, 2}, b, 0}, {F32, 1, {2}, cv, 0}};
    tres r = run("Gemm", 13, ab, 2, in, 3, 1, NULL, NULL, 0);
    static const float want[] = {8.5f, 11, 20.5f, 23};
    CHECK(match(&r, 0, want, 4, 0));
    CHECK_NEAR(r.cost, 2.0 * 2 * 2 * 3, 0);
    tres_free(&r);
    nnf_attr tt[] = {a_float("alpha", 2), a_float("beta", 0.5f), a_int("transA", 1), a_int("transB", 1)};
    tin int_[] = {{F32, 2, {3, 2}, at_, 0}, {F32, 2, {2, 3}, bt, 0}, {F32, 1, {2}, cv, 0}};
    r = run("Gemm", 13, tt, 4, int_, 3, 1, NULL, NULL, 0);
    CHECK(match(&r, 0, want, 4, 0));
    tres_free(&r);
    /* C as a column (M, 1), and C omitted */
    tin incol[] = {{F32, 2, {2, 3}, a, 0}, {F32, 2, {3, 2}, b, 0}, {F32, 2, {2, 1}, cv, 0}};
    r = run("Gemm", 13, NULL, 0, incol, 3, 1, NULL, NULL, 0);
    static const float want_col[] = {5, 6, 12, 13};
    CHECK(match(&r, 0, want_col, 4, 0));
    tres_free(&r);
    static const float ten[] = {10};
    tin insc[] = {{F32, 2, {2, 3}, a, 0}, {F32, 2, {3, 2}, b, 0}, {F32, 0, {0}, ten, 0}};
    r = run("Gemm", 13, NULL, 0, insc, 3, 1, NULL, NULL, 0);
    static const float want_sc[] = {14, 15, 20, 21};
    CHECK(match(&r, 0, want_sc, 4, 0));
    tres_free(&r);
    r = run("Gemm", 13, NULL, 0, in, 2, 1, NULL, NULL, 0);
    static const float want_ab[] = {4, 5, 10, 11};
    CHECK(match(&r, 0, want_ab, 4, 0));
    tres_free(&r);
    tin bad[] = {{F32, 2, {2, 3}, a, 0}, {F32, 2, {2, 3}, b, 0}};
    r = run("Gemm", 13, NULL, 0, bad, 2, 1, NULL, NULL, 0);
    CHECK(r.st == NNF_ERR_SHAPE && !strcmp(r.stage, "infer"));
    tres_free(&r);
}

static void tweak_gemm_epilogue(nnf_node *node) {
    nnf_gemm_params *p = node->params;
    p->act.kind = NNF_ACT_RELU;
    p->residual_input = node->n_inputs - 1;
}

static void test_gemm_matmul_epilogue(void) {
    static const float a[] = {1, 2, 3, 4, 5, 6}, b[] = {1, 0, 0, 1, 1, 1}, res[] = {-5, -20};
    /* relu(AB + residual row [-5, -20]) with AB = [[4,5],[10,11]] */
    tin in[] = {{F32, 2, {2, 3}, a, 0}, {F32, 2, {3, 2}, b, 0}, {0}, {F32, 1, {2}, res, 0}};
    tres r = run("Gemm", 13, NULL, 0, in, 4, 1, tweak_gemm_epilogue, NULL, 0);
    static const float want[] = {0, 0, 5, 0};
    CHECK(match(&r, 0, want, 4, 0));
    tres_free(&r);
    tin inm[] = {{F32, 2, {2, 3}, a, 0}, {F32, 2, {3, 2}, b, 0}, {F32, 1, {2}, res, 0}};
    r = run("MatMul", 13, NULL, 0, inm, 3, 1, tweak_gemm_epilogue, NULL, 0);
    CHECK(match(&r, 0, want, 4, 0));
    tres_free(&r);
}

static void test_matmul(void) {
    static const float a[] = {1, 2, 3, 4}, b[] = {1, 0, 1, 0, 1, 1};
    tin in[] = {{F32, 3, {2, 1, 2}, a, 0}, {F32, 2, {2, 3}, b, 0}};
    tres r = run("MatMul", 13, NULL, 0, in, 2, 1, NULL, NULL, 0);
    static const float want[] = {1, 2, 3, 3, 4, 7};
    CHECK(shape_is(&r, 0, 3, (int64_t[]){2, 1, 3}));
    CHECK(match(&r, 0, want, 6, 0));
    CHECK_NEAR(r.cost, 2.0 * 6 * 2, 0);
    tres_free(&r);
    /* both sides broadcast: (2,1,1,2) x (3,2,1) -> (2,3,1,1) */
    static const float bb[] = {1, 1, 2, 0, 0, -1};
    tin inb[] = {{F32, 4, {2, 1, 1, 2}, a, 0}, {F32, 3, {3, 2, 1}, bb, 0}};
    r = run("MatMul", 13, NULL, 0, inb, 2, 1, NULL, NULL, 0);
    static const float want_b[] = {3, 2, -2, 7, 6, -4};
    CHECK(shape_is(&r, 0, 4, (int64_t[]){2, 3, 1, 1}));
    CHECK(match(&r, 0, want_b, 6, 0));
    tres_free(&r);
    /* 1-D on either side */
    tin in1[] = {{F32, 1, {2}, a, 0}, {F32, 2, {2, 3}, b, 0}};
    r = run("MatMul", 13, NULL, 0, in1, 2, 1, NULL, NULL, 0);
    static const float want1[] = {1, 2, 3};
    CHECK(shape_is(&r, 0, 1, (int64_t[]){3}));
    CHECK(match(&r, 0, want1, 3, 0));
    tres_free(&r);
    static const float m23[] = {1, 2, 3, 4, 5, 6}, v3[] = {1, 0, 1};
    tin in2[] = {{F32, 2, {2, 3}, m23, 0}, {F32, 1, {3}, v3, 0}};
    r = run("MatMul", 13, NULL, 0, in2, 2, 1, NULL, NULL, 0);
    static const float want2[] = {4, 10};
    CHECK(shape_is(&r, 0, 1, (int64_t[]){2}));
    CHECK(match(&r, 0, want2, 2, 0));
    tres_free(&r);
    tin bad[] = {{F32, 3, {2, 2, 3}, m23, 0}, {F32, 3, {3, 3, 2}, m23, 0}};
    r = run("MatMul", 13, NULL, 0, bad, 2, 1, NULL, NULL, 1);
    CHECK(r.st == NNF_ERR_SHAPE);
    tres_free(&r);
    /* a symbolic batch survives */
    tin sym[] = {{F32, 3, {-1, 7, 4}, NULL, 0}, {F32, 2, {4, 5}, NULL, 0}};
    r = run("MatMul", 13, NULL, 0, sym, 2, 1, NULL, NULL, 1);
    CHECK(r.st == NNF_OK && shape_is(&r, 0, 3, (int64_t[]){-1, 7, 5}) && r.out[0].shape.dim_names[0] == batch_name);
    tres_free(&r);
}

static void test_matmul_vs_naive(nnf_threadpool *pool) {
    enum { B = 3, M = 13, K = 17, N = 11 };
    static float a[B * M * K], b[K * N], want[B * M * N];
    unsigned seed = 3;
    for (int i = 0; i < B * M * K; i++)
        a[i] = frand(&seed);
    for (int i = 0; i < K * N; i++)
        b[i] = frand(&seed);
    for (int bt = 0; bt < B; bt++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int k = 0; k < K; k++)
                    s += (double)a[(bt * M + i) * K + k] * b[k * N + j];
                want[(bt * M + i) * N + j] = (float)s;
            }
    tin in[] = {{F32, 3, {B, M, K}, a, 0}, {F32, 2, {K, N}, b, 0}};
    tres r = run("MatMul", 13, NULL, 0, in, 2, 1, NULL, pool, 0);
    CHECK(match(&r, 0, want, B * M * N, 1e-5));
    tres_free(&r);
}

/* ---- Resize / Upsample / DepthToSpace ---------------------------------- */

static void test_resize_nearest(void) {
    static const float x[] = {1, 2, 3, 4}, sc[] = {1, 1, 2, 2};
    nnf_attr at[] = {a_str("mode", "nearest"), a_str("coordinate_transformation_mode", "asymmetric")};
    tin in[] = {IN(4, T4(1, 1, 2, 2), x), {0}, {F32, 1, {4}, sc, 0}};
    tres r = run("Resize", 13, at, 2, in, 3, 1, NULL, NULL, 0);
    static const float want[] = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
    CHECK(shape_is(&r, 0, 4, (int64_t[]){1, 1, 4, 4}));
    CHECK(match(&r, 0, want, 16, 0));
    tres_free(&r);

    /* half_pixel x2 from [10, 20]: x_orig = -0.25, 0.25, 0.75, 1.25 */
    static const float p[] = {10, 20};
    static const int64_t sz4[] = {1, 1, 1, 4}, sz3[] = {1, 1, 1, 3};
    struct {
        const char *nearest, *coord;
        const int64_t *sizes;
        float want[4];
    } cases[] = {
        {"round_prefer_floor", "half_pixel", sz4, {10, 10, 20, 20}},
        {"floor", "half_pixel", sz4, {10, 10, 10, 20}},
        {"ceil", "half_pixel", sz4, {10, 20, 20, 20}},
        {"round_prefer_floor", "align_corners", sz3, {10, 10, 20}},
        {"round_prefer_ceil", "align_corners", sz3, {10, 20, 20}},
    };
    for (size_t i = 0; i < N_(cases); i++) {
        nnf_attr ca[] = {a_str("nearest_mode", cases[i].nearest),
                         a_str("coordinate_transformation_mode", cases[i].coord)};
        tin ci[] = {IN(4, T4(1, 1, 1, 2), p), {0}, {0}, {I64, 1, {4}, cases[i].sizes, 0}};
        r = run("Resize", 13, ca, 2, ci, 4, 1, NULL, NULL, 0);
        CHECK_MSG(match(&r, 0, cases[i].want, (size_t)cases[i].sizes[3], 0), "nearest case %zu", i);
        tres_free(&r);
    }
}

static void test_resize_linear_cubic(void) {
    static const float x[] = {1, 3}, sc[] = {1, 1, 1, 2};
    nnf_attr lin[] = {a_str("mode", "linear")};
    tin in[] = {IN(4, T4(1, 1, 1, 2), x), {0}, {F32, 1, {4}, sc, 0}};
    tres r = run("Resize", 13, lin, 1, in, 3, 1, NULL, NULL, 0);
    static const float want[] = {1, 1.5f, 2.5f, 3};
    CHECK(match(&r, 0, want, 4, 1e-6));
    tres_free(&r);

    static const int64_t sz3[] = {1, 1, 1, 3};
    nnf_attr ac[] = {a_str("mode", "linear"), a_str("coordinate_transformation_mode", "align_corners")};
    tin ina[] = {IN(4, T4(1, 1, 1, 2), x), {0}, {0}, {I64, 1, {4}, sz3, 0}};
    r = run("Resize", 13, ac, 2, ina, 4, 1, NULL, NULL, 0);
    static const float want_ac[] = {1, 2, 3};
    CHECK(match(&r, 0, want_ac, 3, 1e-6));
    tres_free(&r);

    /* tf_crop_and_resize on [1,2,3,4] over roi [0.5, 1.5] of the last axis:
     * x_orig = 1.5, 3.0, 4.5 (the last outside: extrapolated) */
    static const float x4[] = {1, 2, 3, 4}, roi[] = {0, 0, 0, 0.5f, 1, 1, 1, 1.5f};
    nnf_attr tf[] = {a_str("mode", "linear"), a_str("coordinate_transformation_mode", "tf_crop_and_resize"),
                     a_float("extrapolation_value", -1)};
    tin intf[] = {IN(4, T4(1, 1, 1, 4), x4), {F32, 1, {8}, roi, 0}, {0}, {I64, 1, {4}, sz3, 0}};
    r = run("Resize", 13, tf, 3, intf, 4, 1, NULL, NULL, 0);
    static const float want_tf[] = {2.5f, 4, -1};
    CHECK(match(&r, 0, want_tf, 3, 1e-6));
    tres_free(&r);

    /* cubic convolution reproduces a linear ramp away from the borders */
    float ramp[8];
    for (int i = 0; i < 8; i++)
        ramp[i] = (float)i;
    nnf_attr cu[] = {a_str("mode", "cubic"), a_str("coordinate_transformation_mode", "asymmetric")};
    tin inc[] = {IN(4, T4(1, 1, 1, 8), ramp), {0}, {F32, 1, {4}, sc, 0}};
    r = run("Resize", 13, cu, 2, inc, 3, 1, NULL, NULL, 0);
    CHECK(shape_is(&r, 0, 4, (int64_t[]){1, 1, 1, 16}));
    if (r.st == NNF_OK) {
        const float *y = r.buf[0].data;
        for (int o = 2; o <= 11; o++)
            CHECK_NEAR(y[o], o / 2.0, 1e-5);
    } else {
        CHECK(0);
    }
    tres_free(&r);

    /* axes (opset 18) and keep_aspect_ratio_policy */
    static const int64_t axes[] = {3, 2}, sz[] = {4, 9};
    float x6[6] = {1, 2, 3, 4, 5, 6};
    nnf_attr ka[] = {a_ints("axes", axes, 2), a_str("keep_aspect_ratio_policy", "not_larger")};
    tin ink[] = {IN(4, T4(1, 1, 2, 3), x6), {0}, {0}, {I64, 1, {2}, sz, 0}};
    r = run("Resize", 18, ka, 2, ink, 4, 1, NULL, NULL, 1);
    /* scale min(4/3, 9/2) = 4/3: H 2 -> 3 (2.67 rounds up), W 3 -> 4 */
    CHECK(r.st == NNF_OK && shape_is(&r, 0, 4, (int64_t[]){1, 1, 3, 4}));
    tres_free(&r);

    nnf_attr aa[] = {a_str("mode", "linear"), a_int("antialias", 1)};
    r = run("Resize", 18, aa, 2, in, 3, 1, NULL, NULL, 0);
    CHECK(r.st == NNF_ERR_UNSUPPORTED && strstr(nnf_last_error(), "antialias"));
    tres_free(&r);
    /* scales unknown at load: the output extents wait for run time */
    tin hid[] = {IN(4, T4(1, 1, 1, 2), x), {0}, {F32, 1, {4}, sc, 1}};
    r = run("Resize", 13, lin, 1, hid, 3, 1, NULL, NULL, 1);
    CHECK(r.st == NNF_OK && shape_is(&r, 0, 4, (int64_t[]){-1, -1, -1, -1}));
    tres_free(&r);
}

static void test_upsample(void) {
    static const float x[] = {1, 2}, s[] = {1, 1, 1, 3};
    nnf_attr at[] = {a_floats("scales", s, 4), a_str("mode", "nearest")};
    tin in[] = {IN(4, T4(1, 1, 1, 2), x)};
    tres r = run("Upsample", 7, at, 2, in, 1, 1, NULL, NULL, 0);
    static const float want[] = {1, 1, 1, 2, 2, 2};
    CHECK(match(&r, 0, want, 6, 0));
    tres_free(&r);
    nnf_attr m[] = {a_str("mode", "nearest")};
    tin in9[] = {IN(4, T4(1, 1, 1, 2), x), {F32, 1, {4}, s, 0}};
    r = run("Upsample", 9, m, 1, in9, 2, 1, NULL, NULL, 0);
    CHECK(match(&r, 0, want, 6, 0));
    tres_free(&r);
}

static void test_depth_space(void) {
    float x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (float)i;
    nnf_attr dcr[] = {a_int("blocksize", 2)}, crd[] = {a_int("blocksize", 2), a_str("mode", "CRD")};
    tin in[] = {IN(4, T4(1, 8, 1, 1), x)};
    tres r = run("DepthToSpace", 13, dcr, 1, in, 1, 1, NULL, NULL, 0);
    static const float want_dcr[] = {0, 2, 4, 6, 1, 3, 5, 7}, want_crd[] = {0, 1, 2, 3, 4, 5, 6, 7};
    CHECK(shape_is(&r, 0, 4, (int64_t[]){1, 2, 2, 2}));
    CHECK(match(&r, 0, want_dcr, 8, 0));
    /* SpaceToDepth undoes it */
    if (r.st == NNF_OK) {
        tin back[] = {IN(4, T4(1, 2, 2, 2), r.buf[0].data)};
        tres s = run("SpaceToDepth", 13, dcr, 1, back, 1, 1, NULL, NULL, 0);
        CHECK(match(&s, 0, x, 8, 0));
        tres_free(&s);
    }
    tres_free(&r);
    r = run("DepthToSpace", 13, crd, 2, in, 1, 1, NULL, NULL, 0);
    CHECK(match(&r, 0, want_crd, 8, 0));
    tres_free(&r);
    tin odd[] = {IN(4, T4(1, 6, 1, 1), x)};
    r = run("DepthToSpace", 13, dcr, 1, odd, 1, 1, NULL, NULL, 1);
    CHECK(r.st == NNF_ERR_SHAPE);
    tres_free(&r);
}

/* The thread pool splits the same work items: results must be identical. */
static void test_threads_identical(nnf_threadpool *pool) {
    enum { C = 8, H = 15, W = 13, M = 12 };
    static float x[C * H * W], w[M * C * 9], y1[M * H * W];
    unsigned seed = 11;
    for (int i = 0; i < C * H * W; i++)
        x[i] = frand(&seed);
    for (int i = 0; i < M * C * 9; i++)
        w[i] = frand(&seed);
    int64_t pads[] = {1, 1, 1, 1};
    nnf_attr at[] = {a_ints("pads", pads, 4)};
    tin in[] = {IN(4, T4(1, C, H, W), x), IN(4, T4(M, C, 3, 3), w)};
    tres r = run("Conv", 11, at, 1, in, 2, 1, NULL, NULL, 0);
    CHECK(r.st == NNF_OK);
    if (r.st == NNF_OK)
        memcpy(y1, r.buf[0].data, sizeof y1);
    tres_free(&r);
    r = run("Conv", 11, at, 1, in, 2, 1, NULL, pool, 0);
    CHECK(r.st == NNF_OK && !memcmp(y1, r.buf[0].data, sizeof y1));
    tres_free(&r);
}

int main(void) {
    nnf_threadpool *pool = NULL;
    CHECK(nnf_threadpool_create(3, &pool) == NNF_OK);
    test_conv_pads_strides();
    test_conv_dilation();
    test_conv_group_bias();
    test_conv_depthwise();
    test_conv_pointwise_and_3d();
    test_conv_auto_pad_1d();
    test_conv_resolve_pads();
    test_conv_symbolic_batch();
    test_conv_epilogue();
    test_conv_vs_naive(NULL);
    test_conv_vs_naive(pool);
    test_conv_transpose();
    test_maxpool();
    test_avgpool();
    test_global_pools();
    test_batchnorm();
    test_layernorm();
    test_instance_group_lp_norm();
    test_gemm();
    test_gemm_matmul_epilogue();
    test_matmul();
    test_matmul_vs_naive(NULL);
    test_matmul_vs_naive(pool);
    test_resize_nearest();
    test_resize_linear_cubic();
    test_upsample();
    test_depth_space();
    test_threads_identical(pool);
    nnf_threadpool_destroy(pool);
    TEST_MAIN_END();
}

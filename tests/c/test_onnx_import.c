/* ONNX importer tests: hand-encoded protobuf models, valid and hostile.
 *
 * The models are built with a tiny protobuf encoder below, so each test says
 * exactly which bytes the importer sees. Field numbers are those of onnx.proto. */
#include "check.h"

#include "base/alloc.h"
#include "base/status.h"
#include "ir/graph.h"
#include "onnx/import.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- a tiny protobuf encoder ---------------------------------------------------------------- */

typedef struct pbuf {
    uint8_t *p;
    size_t n, cap;
} pbuf;

static void put_raw(pbuf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p)
            abort(); /* the test itself ran out of memory */
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_byte(pbuf *b, uint8_t x) {
    put_raw(b, &x, 1);
}
static void put_varint(pbuf *b, uint64_t v) {
    while (v >= 0x80) {
        put_byte(b, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    put_byte(b, (uint8_t)v);
}
static void put_tag(pbuf *b, uint32_t field, int wire) {
    put_varint(b, (uint64_t)field << 3 | (uint64_t)wire);
}
static void put_int(pbuf *b, uint32_t field, int64_t v) {
    put_tag(b, field, 0);
    put_varint(b, (uint64_t)v);
}
static void put_bytes(pbuf *b, uint32_t field, const void *d, size_t n) {
    put_tag(b, field, 2);
    put_varint(b, n);
    put_raw(b, d, n);
}
static void put_str(pbuf *b, uint32_t field, const char *s) {
    put_bytes(b, field, s, strlen(s));
}
/* Appends sub as a length-delimited field and frees it. */
static void put_msg(pbuf *b, uint32_t field, pbuf *sub) {
    put_bytes(b, field, sub->p, sub->n);
    free(sub->p);
    memset(sub, 0, sizeof *sub);
}
static void put_f32(pbuf *b, uint32_t field, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put_tag(b, field, 5);
    for (int i = 0; i < 4; i++)
        put_byte(b, (uint8_t)(u >> (8 * i)));
}
static void put_packed_ints(pbuf *b, uint32_t field, const int64_t *v, int n) {
    pbuf s = {0};
    for (int i = 0; i < n; i++)
        put_varint(&s, (uint64_t)v[i]);
    put_msg(b, field, &s);
}
static void put_packed_f32(pbuf *b, uint32_t field, const float *v, int n) {
    put_bytes(b, field, v, sizeof(float) * (size_t)n); /* little-endian host */
}

/* onnx.proto field numbers used below. */
enum { M_IR = 1, M_PRODUCER = 2, M_DOC = 6, M_GRAPH = 7, M_OPSET = 8 };
enum {
    G_NODE = 1,
    G_NAME = 2,
    G_INIT = 5,
    G_INPUT = 11,
    G_OUTPUT = 12,
    G_VINFO = 13,
    G_SPARSE = 15
};
enum { N_IN = 1, N_OUT = 2, N_NAME = 3, N_OP = 4, N_ATTR = 5, N_DOMAIN = 7 };
enum {
    A_NAME = 1,
    A_F = 2,
    A_I = 3,
    A_S = 4,
    A_T = 5,
    A_G = 6,
    A_FLOATS = 7,
    A_INTS = 8,
    A_STRINGS = 9,
    A_TENSORS = 10,
    A_GRAPHS = 11,
    A_TYPE = 20
};
enum {
    T_DIMS = 1,
    T_DTYPE = 2,
    T_FLOAT = 4,
    T_INT32 = 5,
    T_STRING = 6,
    T_INT64 = 7,
    T_NAME = 8,
    T_RAW = 9,
    T_DOUBLE = 10,
    T_UINT64 = 11,
    T_EXT = 13,
    T_LOC = 14
};

static pbuf tensor_hdr(const char *name, int dtype, const int64_t *dims, int rank) {
    pbuf t = {0};
    for (int i = 0; i < rank; i++)
        put_int(&t, T_DIMS, dims[i]);
    put_int(&t, T_DTYPE, dtype);
    if (name)
        put_str(&t, T_NAME, name);
    return t;
}

/* ValueInfoProto with a tensor type; dims[i] < 0 with params[i] = name or NULL. */
static pbuf value_info(const char *name, int elem, int rank, const int64_t *dims,
                       const char *const *params) {
    pbuf vi = {0}, type = {0}, tt = {0}, shape = {0};
    put_str(&vi, 1, name);
    put_int(&tt, 1, elem);
    if (rank >= 0) {
        for (int i = 0; i < rank; i++) {
            pbuf dim = {0};
            if (dims[i] >= 0)
                put_int(&dim, 1, dims[i]);
            else if (params && params[i])
                put_str(&dim, 2, params[i]);
            put_msg(&shape, 1, &dim);
        }
        put_msg(&tt, 2, &shape);
    }
    put_msg(&type, 1, &tt);
    put_msg(&vi, 2, &type);
    return vi;
}

static pbuf node(const char *name, const char *op, const char *const *ins, int n_in,
                 const char *const *outs, int n_out) {
    pbuf n = {0};
    for (int i = 0; i < n_in; i++)
        put_str(&n, N_IN, ins[i]);
    for (int i = 0; i < n_out; i++)
        put_str(&n, N_OUT, outs[i]);
    if (name)
        put_str(&n, N_NAME, name);
    put_str(&n, N_OP, op);
    return n;
}

/* Wrap a graph into a model with opset 13 (and com.example 2), graph first
 * as real writers do. */
static pbuf model_of(pbuf *graph) {
    pbuf m = {0}, op = {0}, op2 = {0};
    put_int(&m, M_IR, 8);
    put_str(&m, M_PRODUCER, "nnfuse-test");
    put_msg(&m, M_GRAPH, graph);
    put_str(&op, 1, "");
    put_int(&op, 2, 13);
    put_msg(&m, M_OPSET, &op);
    put_str(&op2, 1, "com.example");
    put_int(&op2, 2, 2);
    put_msg(&m, M_OPSET, &op2);
    return m;
}

/* A minimal graph: y = Relu(x) with whatever extra bytes the caller adds. */
static pbuf relu_graph(void) {
    pbuf g = {0}, n = node("r", "Relu", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1);
    put_msg(&g, G_NODE, &n);
    put_str(&g, G_NAME, "g");
    int64_t d[2] = {1, 4};
    pbuf in = value_info("x", 1, 2, d, NULL), out = value_info("y", 1, 2, d, NULL);
    put_msg(&g, G_INPUT, &in);
    put_msg(&g, G_OUTPUT, &out);
    return g;
}

/* Import b; expect status want and (for failures) a message that starts with
 * the source name and contains `needle` (may be NULL). */
static nnf_graph *expect_import(const pbuf *b, nnf_status want, const char *needle, int line) {
    nnf_graph *g = NULL;
    nnf_status st = nnf_onnx_import(b->p, b->n, "t.onnx", NULL, &g);
    CHECK_MSG(st == want, "line %d: status %s, expected %s: %s", line, nnf_status_name(st),
              nnf_status_name(want), nnf_last_error());
    if (st != NNF_OK) {
        CHECK(g == NULL);
        CHECK_MSG(!strncmp(nnf_last_error(), "t.onnx: ", 8), "line %d: %s", line, nnf_last_error());
        if (needle)
            CHECK_MSG(strstr(nnf_last_error(), needle) != NULL, "line %d: '%s' not in '%s'", line,
                      needle, nnf_last_error());
    }
    if (st != NNF_OK || want != NNF_OK) {
        nnf_graph_destroy(g);
        return NULL;
    }
    return g;
}
#define EXPECT(b, st, needle) expect_import(b, st, needle, __LINE__)

static void import_model_with_init(pbuf *init, nnf_status want, const char *needle, int line) {
    pbuf g = relu_graph();
    put_msg(&g, G_INIT, init);
    pbuf m = model_of(&g);
    expect_import(&m, want, needle, line);
    free(m.p);
}
#define EXPECT_INIT(init, st, needle) import_model_with_init(init, st, needle, __LINE__)

/* ---- the valid model ------------------------------------------------------------------------ */

static const float w_vals[18] = {1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -2, -3, -4, -5, -6, -7, -8, -9};

/* body: out = Add(x, one) where x comes from the enclosing graph. */
static pbuf body_graph(const char *name) {
    pbuf g = {0};
    pbuf n = node(NULL, "Add", (const char *[]){"x", "one"}, 2, (const char *[]){"out"}, 1);
    put_msg(&g, G_NODE, &n);
    put_str(&g, G_NAME, name);
    int64_t d1[1] = {1};
    pbuf one = tensor_hdr("one", 1, d1, 1);
    put_packed_f32(&one, T_FLOAT, (const float[]){1.0f}, 1);
    put_msg(&g, G_INIT, &one);
    pbuf out = value_info("out", 1, -1, NULL, NULL);
    put_msg(&g, G_OUTPUT, &out);
    return g;
}

static void put_attr_int(pbuf *n, const char *name, int64_t v, int typed) {
    pbuf a = {0};
    put_str(&a, A_NAME, name);
    if (typed)
        put_int(&a, A_TYPE, 2);
    put_int(&a, A_I, v);
    put_msg(n, N_ATTR, &a);
}

/* A model using every attribute type, typed and raw initialisers, symbolic
 * dims and a subgraph. pad = bytes of model doc_string in front (shifts the
 * offsets so the test can hit both the aligned and the unaligned raw_data). */
static pbuf full_model(size_t pad) {
    pbuf g = {0};
    /* conv1: Conv(x, W, <omitted>) -> y */
    pbuf conv = node("conv1", "Conv", (const char *[]){"x", "W", ""}, 3, (const char *[]){"y"}, 1);
    {
        pbuf a = {0};
        put_str(&a, A_NAME, "kernel_shape");
        put_int(&a, A_TYPE, 7);
        put_int(&a, A_INTS, 3); /* unpacked */
        put_int(&a, A_INTS, 3);
        put_msg(&conv, N_ATTR, &a);
        a = (pbuf){0};
        put_str(&a, A_NAME, "pads");
        put_int(&a, A_TYPE, 7);
        put_packed_ints(&a, A_INTS, (const int64_t[]){1, 1, -1, 1}, 4);
        put_msg(&conv, N_ATTR, &a);
        put_attr_int(&conv, "group", 1, 1);
        put_attr_int(&conv, "untyped", -7, 0); /* no type field: inferred INT */
        a = (pbuf){0};
        put_str(&a, A_NAME, "alpha");
        put_int(&a, A_TYPE, 1);
        put_f32(&a, A_F, 0.5f);
        put_msg(&conv, N_ATTR, &a);
        a = (pbuf){0};
        put_str(&a, A_NAME, "auto_pad");
        put_int(&a, A_TYPE, 3);
        put_str(&a, A_S, "NOTSET");
        put_msg(&conv, N_ATTR, &a);
        a = (pbuf){0};
        put_str(&a, A_NAME, "scales");
        put_int(&a, A_TYPE, 6);
        put_packed_f32(&a, A_FLOATS, (const float[]){1.0f, 2.5f}, 2);
        put_f32(&a, A_FLOATS, -3.0f); /* unpacked after packed */
        put_msg(&conv, N_ATTR, &a);
        a = (pbuf){0};
        put_str(&a, A_NAME, "names");
        put_int(&a, A_TYPE, 8);
        put_str(&a, A_STRINGS, "a");
        put_str(&a, A_STRINGS, "bc");
        put_msg(&conv, N_ATTR, &a);
        a = (pbuf){0};
        put_str(&a, A_NAME, "value");
        put_int(&a, A_TYPE, 4);
        int64_t d2[2] = {1, 2};
        pbuf t = tensor_hdr(NULL, 7, d2, 2);
        put_int(&t, T_INT64, 5);
        put_int(&t, T_INT64, -6);
        put_msg(&a, A_T, &t);
        put_msg(&conv, N_ATTR, &a);
        a = (pbuf){0};
        put_str(&a, A_NAME, "consts");
        put_int(&a, A_TYPE, 9);
        int64_t d1[1] = {3};
        t = tensor_hdr(NULL, 6, d1, 1);
        put_packed_ints(&t, T_INT32, (const int64_t[]){1, -2, 3}, 3);
        put_msg(&a, A_TENSORS, &t);
        t = tensor_hdr(NULL, 1, NULL, 0); /* a scalar */
        put_f32(&t, T_FLOAT, 4.0f);
        put_msg(&a, A_TENSORS, &t);
        put_msg(&conv, N_ATTR, &a);
        a = (pbuf){0};
        put_str(&a, A_NAME, "then_branch");
        put_int(&a, A_TYPE, 5);
        pbuf body = body_graph("then");
        put_msg(&a, A_G, &body);
        put_msg(&conv, N_ATTR, &a);
        a = (pbuf){0};
        put_str(&a, A_NAME, "branches");
        put_int(&a, A_TYPE, 10);
        body = body_graph("b0");
        put_msg(&a, A_GRAPHS, &body);
        body = body_graph("b1");
        put_msg(&a, A_GRAPHS, &body);
        put_msg(&conv, N_ATTR, &a);
    }
    put_msg(&g, G_NODE, &conv);
    /* z = Custom(y) in com.example */
    pbuf custom = node("c", "Custom", (const char *[]){"y"}, 1, (const char *[]){"z", ""}, 2);
    put_str(&custom, N_DOMAIN, "com.example");
    put_msg(&g, G_NODE, &custom);
    put_str(&g, G_NAME, "main");

    int64_t wd[4] = {2, 1, 3, 3};
    pbuf w = tensor_hdr("W", 1, wd, 4);
    put_bytes(&w, T_RAW, w_vals, sizeof w_vals);
    put_msg(&g, G_INIT, &w);
    int64_t d3[1] = {3};
    pbuf i8 = tensor_hdr("i8", 3, d3, 1);
    put_packed_ints(&i8, T_INT32, (const int64_t[]){-1, 127, 200}, 3);
    put_msg(&g, G_INIT, &i8);
    int64_t d2[1] = {2};
    pbuf h = tensor_hdr("h", 10, d2, 1);
    put_int(&h, T_INT32, 0x3C00);
    put_int(&h, T_INT32, 0xC000);
    put_msg(&g, G_INIT, &h);
    pbuf bl = tensor_hdr("bl", 9, d2, 1);
    put_packed_ints(&bl, T_INT32, (const int64_t[]){0, 5}, 2);
    put_msg(&g, G_INIT, &bl);
    pbuf i64 = tensor_hdr("i64", 7, d2, 1);
    put_packed_ints(&i64, T_INT64, (const int64_t[]){-5, (int64_t)1 << 40}, 2);
    put_msg(&g, G_INIT, &i64);
    pbuf dbl = tensor_hdr("dbl", 11, d2, 1);
    put_bytes(&dbl, T_DOUBLE, (const double[]){0.25, -8.0}, 16);
    put_msg(&g, G_INIT, &dbl);
    pbuf u32 = tensor_hdr("u32", 12, d2, 1);
    put_int(&u32, T_UINT64, 4000000000u);
    put_int(&u32, T_UINT64, 7);
    put_msg(&g, G_INIT, &u32);
    int64_t d0[1] = {0};
    pbuf empty = tensor_hdr("empty", 1, d0, 1); /* no data, 0 elements */
    put_msg(&g, G_INIT, &empty);

    int64_t xd[4] = {-1, 1, 5, -1};
    const char *xp[4] = {"batch", NULL, NULL, NULL};
    pbuf x = value_info("x", 1, 4, xd, xp);
    put_msg(&g, G_INPUT, &x);
    pbuf win = value_info("W", 1, 4, wd, NULL); /* an initialiser also listed as input */
    put_msg(&g, G_INPUT, &win);
    int64_t yd[4] = {-1, 2, 5, 5};
    const char *yp[4] = {"batch", NULL, NULL, NULL};
    pbuf y = value_info("y", 1, 4, yd, yp);
    put_msg(&g, G_VINFO, &y);
    pbuf z = value_info("z", 1, -1, NULL, NULL);
    put_msg(&g, G_OUTPUT, &z);

    pbuf m = {0};
    if (pad) {
        char doc[16] = "...............";
        doc[pad] = 0;
        put_str(&m, M_DOC, doc);
    }
    pbuf body = model_of(&g);
    put_raw(&m, body.p, body.n);
    free(body.p);
    return m;
}

static const nnf_attr *attr(const nnf_node *n, const char *name) {
    return nnf_node_attr(n, name);
}

static void check_body(const nnf_graph *sg, const nnf_graph *parent, const char *name) {
    CHECK(sg != NULL);
    if (!sg)
        return;
    CHECK(sg->parent == parent);
    CHECK(sg->name && !strcmp(sg->name, name));
    CHECK(sg->n_nodes == 1 && sg->n_inputs == 0 && sg->n_outputs == 1);
    CHECK(sg->nodes[0].opset == 13);
    int x = nnf_graph_find_value(sg, "x");
    CHECK(x >= 0 && sg->values[x].producer < 0 && sg->values[x].kind == NNF_VALUE_INTERMEDIATE);
    int one = nnf_graph_find_value(sg, "one");
    CHECK(one >= 0 && sg->values[one].kind == NNF_VALUE_INITIALIZER && sg->values[one].data &&
          *(const float *)sg->values[one].data == 1.0f);
    CHECK(nnf_graph_verify(sg) == NNF_OK);
}

static void test_valid_model(size_t pad, int *saw_borrow, int *saw_copy) {
    pbuf m = full_model(pad);
    /* Copy into 64-byte aligned memory so alignment depends only on offsets. */
    uint8_t *buf = aligned_alloc(64, (m.n + 63) & ~(size_t)63);
    memcpy(buf, m.p, m.n);
    nnf_graph *g = NULL;
    nnf_status st = nnf_onnx_import(buf, m.n, "full.onnx", NULL, &g);
    CHECK_MSG(st == NNF_OK, "%s", nnf_last_error());
    if (st != NNF_OK) {
        free(buf);
        free(m.p);
        return;
    }
    CHECK(g->ir_version == 8);
    CHECK(!strcmp(g->producer_name, "nnfuse-test"));
    CHECK(!strcmp(g->name, "main"));
    CHECK(!strcmp(g->source, "full.onnx"));
    CHECK(g->n_opsets == 2 && nnf_graph_opset(g, "") == 13 &&
          nnf_graph_opset(g, "com.example") == 2);
    CHECK(g->n_nodes == 2);

    /* inputs: x only (W is an initialiser with a default) */
    CHECK(g->n_inputs == 1);
    const nnf_value *x = &g->values[g->inputs[0]];
    CHECK(!strcmp(x->name, "x") && x->kind == NNF_VALUE_INPUT && x->dtype == NNF_DTYPE_FLOAT32);
    CHECK(x->shape.rank == 4 && x->shape.dims[0] == -1 && x->shape.dims[1] == 1 &&
          x->shape.dims[2] == 5 && x->shape.dims[3] == -1);
    CHECK(x->shape.dim_names[0] && !strcmp(x->shape.dim_names[0], "batch"));
    CHECK(x->shape.dim_names[3] == NULL);

    int wid = nnf_graph_find_value(g, "W");
    CHECK(wid >= 0);
    const nnf_value *w = &g->values[wid];
    CHECK(w->kind == NNF_VALUE_INITIALIZER && w->dtype == NNF_DTYPE_FLOAT32 && w->nbytes == 72);
    CHECK(w->shape.rank == 4 && w->shape.dims[0] == 2 && w->shape.dims[3] == 3);
    CHECK(w->data && !memcmp(w->data, w_vals, sizeof w_vals));
    CHECK((uintptr_t)w->data % 4 == 0);
    const uint8_t *raw = memmem(buf, m.n, w_vals, sizeof w_vals);
    CHECK(raw != NULL);
    if (raw && (uintptr_t)raw % 4 == 0) {
        CHECK(w->data == raw); /* zero-copy */
        ++*saw_borrow;
    } else {
        CHECK((const uint8_t *)w->data < buf || (const uint8_t *)w->data >= buf + m.n);
        ++*saw_copy;
    }

    const nnf_value *v;
    v = &g->values[nnf_graph_find_value(g, "i8")];
    CHECK(v->dtype == NNF_DTYPE_INT8 && v->nbytes == 3);
    CHECK(((const int8_t *)v->data)[0] == -1 && ((const int8_t *)v->data)[1] == 127 &&
          ((const int8_t *)v->data)[2] == -56);
    v = &g->values[nnf_graph_find_value(g, "h")];
    CHECK(v->dtype == NNF_DTYPE_FLOAT16 && v->nbytes == 4);
    CHECK(((const uint16_t *)v->data)[0] == 0x3C00 && ((const uint16_t *)v->data)[1] == 0xC000);
    v = &g->values[nnf_graph_find_value(g, "bl")];
    CHECK(v->dtype == NNF_DTYPE_BOOL && ((const uint8_t *)v->data)[0] == 0 &&
          ((const uint8_t *)v->data)[1] == 1);
    v = &g->values[nnf_graph_find_value(g, "i64")];
    CHECK(v->dtype == NNF_DTYPE_INT64 && ((const int64_t *)v->data)[0] == -5 &&
          ((const int64_t *)v->data)[1] == (int64_t)1 << 40);
    v = &g->values[nnf_graph_find_value(g, "dbl")];
    CHECK(v->dtype == NNF_DTYPE_FLOAT64 && ((const double *)v->data)[0] == 0.25 &&
          ((const double *)v->data)[1] == -8.0);
    v = &g->values[nnf_graph_find_value(g, "u32")];
    CHECK(v->dtype == NNF_DTYPE_UINT32 && ((const uint32_t *)v->data)[0] == 4000000000u &&
          ((const uint32_t *)v->data)[1] == 7);
    v = &g->values[nnf_graph_find_value(g, "empty")];
    CHECK(v->kind == NNF_VALUE_INITIALIZER && v->nbytes == 0 && v->shape.rank == 1 &&
          v->shape.dims[0] == 0);

    const nnf_value *y = &g->values[nnf_graph_find_value(g, "y")];
    CHECK(y->producer == 0 && y->dtype == NNF_DTYPE_FLOAT32 && y->shape.rank == 4 &&
          y->shape.dims[1] == 2 && !strcmp(y->shape.dim_names[0], "batch"));
    CHECK(g->n_outputs == 1);
    const nnf_value *z = &g->values[g->outputs[0]];
    CHECK(!strcmp(z->name, "z") && z->is_output && z->producer == 1 && z->shape.rank == -1);

    const nnf_node *conv = &g->nodes[0];
    CHECK(!strcmp(conv->name, "conv1") && !strcmp(conv->op_type, "Conv") &&
          !strcmp(conv->domain, ""));
    CHECK(conv->opset == 13);
    CHECK(conv->n_inputs == 3 && conv->inputs[0] == g->inputs[0] && conv->inputs[1] == wid &&
          conv->inputs[2] == NNF_NO_VALUE);
    CHECK(conv->n_attrs == 12);
    const int64_t *iv = NULL;
    CHECK(nnf_attr_ints(conv, "kernel_shape", &iv) == 2 && iv[0] == 3 && iv[1] == 3);
    CHECK(nnf_attr_ints(conv, "pads", &iv) == 4 && iv[0] == 1 && iv[2] == -1);
    CHECK(nnf_attr_int(conv, "group", 0) == 1);
    CHECK(nnf_attr_int(conv, "untyped", 0) == -7);
    CHECK(nnf_attr_float(conv, "alpha", 0) == 0.5f);
    const nnf_attr *a = attr(conv, "auto_pad");
    CHECK(a && a->type == NNF_ATTR_STRING && !strcmp(a->s, "NOTSET") && a->s_len == 6);
    const float *fv = NULL;
    CHECK(nnf_attr_floats(conv, "scales", &fv) == 3 && fv[0] == 1.0f && fv[1] == 2.5f &&
          fv[2] == -3.0f);
    a = attr(conv, "names");
    CHECK(a && a->type == NNF_ATTR_STRINGS && a->count == 2 && !strcmp(a->strings[0], "a") &&
          !strcmp(a->strings[1], "bc"));
    a = attr(conv, "value");
    CHECK(a && a->type == NNF_ATTR_TENSOR && a->tensor && a->tensor->dtype == NNF_DTYPE_INT64 &&
          a->tensor->shape.rank == 2 && a->tensor->shape.dims[1] == 2 && a->tensor->nbytes == 16 &&
          ((const int64_t *)a->tensor->data)[1] == -6);
    a = attr(conv, "consts");
    CHECK(a && a->type == NNF_ATTR_TENSORS && a->count == 2);
    if (a && a->count == 2) {
        CHECK(a->tensor[0].dtype == NNF_DTYPE_INT32 &&
              ((const int32_t *)a->tensor[0].data)[1] == -2);
        CHECK(a->tensor[1].shape.rank == 0 && a->tensor[1].nbytes == 4 &&
              *(const float *)a->tensor[1].data == 4.0f);
    }
    a = attr(conv, "then_branch");
    CHECK(a && a->type == NNF_ATTR_GRAPH);
    if (a)
        check_body(a->graph, g, "then");
    a = attr(conv, "branches");
    CHECK(a && a->type == NNF_ATTR_GRAPHS && a->count == 2);
    if (a && a->count == 2) {
        check_body(a->graphs[0], g, "b0");
        check_body(a->graphs[1], g, "b1");
    }

    const nnf_node *c = &g->nodes[1];
    CHECK(!strcmp(c->domain, "com.example") && c->opset == 2 && c->n_outputs == 2 &&
          c->outputs[1] == NNF_NO_VALUE);

    CHECK_MSG(nnf_graph_toposort(g) == NNF_OK, "%s", nnf_last_error());
    CHECK_MSG(nnf_graph_verify(g) == NNF_OK, "%s", nnf_last_error());
    nnf_graph_destroy(g);

    /* Every prefix of a valid model: an error or a graph, never a crash. The
     * copy is exactly n bytes so ASan sees any read past the end. */
    int ok = 0, bad = 0, unprefixed = 0;
    for (size_t n = 0; n < m.n; n++) {
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, m.p, n);
        nnf_graph *tg = NULL;
        st = nnf_onnx_import(cut, n, "cut.onnx", NULL, &tg);
        if (st == NNF_OK) {
            ok++;
            nnf_graph_destroy(tg);
        } else {
            bad++;
            unprefixed += strncmp(nnf_last_error(), "cut.onnx: ", 10) != 0;
        }
        free(cut);
    }
    CHECK(bad > 0);
    CHECK_MSG(unprefixed == 0, "%d truncated-model errors lack the file name", unprefixed);

    /* Out of memory at every allocation: OOM or success, no leak (ASan). */
    int oom = 0;
    for (uint64_t k = 1;; k++) {
        nnf_alloc_fail_after(k);
        nnf_graph *tg = NULL;
        st = nnf_onnx_import(buf, m.n, "full.onnx", NULL, &tg);
        nnf_alloc_fail_after(0);
        if (st == NNF_OK) {
            nnf_graph_destroy(tg);
            break;
        }
        CHECK_MSG(st == NNF_ERR_OUT_OF_MEMORY, "alloc %llu: %s", (unsigned long long)k,
                  nnf_last_error());
        oom++;
        if (k > 100000)
            break;
    }
    CHECK(oom > 0);
    free(buf);
    free(m.p);
}

/* ---- hostile inputs ------------------------------------------------------------------------- */

static void test_wire_errors(void) {
    pbuf b = {0};
    /* overlong varint: 11 bytes */
    put_tag(&b, M_IR, 0);
    for (int i = 0; i < 10; i++)
        put_byte(&b, 0x80);
    put_byte(&b, 0);
    EXPECT(&b, NNF_ERR_INVALID_MODEL, "varint");
    b.n = 0;
    /* 10 bytes whose last carries more than bit 63 */
    put_tag(&b, M_IR, 0);
    for (int i = 0; i < 9; i++)
        put_byte(&b, 0xff);
    put_byte(&b, 0x02);
    EXPECT(&b, NNF_ERR_INVALID_MODEL, "varint");
    b.n = 0;
    /* the largest legal varint is fine (and then there is no graph) */
    put_int(&b, M_IR, -1);
    EXPECT(&b, NNF_ERR_INVALID_MODEL, "no graph");
    b.n = 0;
    /* length past the end */
    put_tag(&b, M_GRAPH, 2);
    put_varint(&b, 1000);
    put_raw(&b, "abc", 3);
    EXPECT(&b, NNF_ERR_INVALID_MODEL, "runs past the end");
    b.n = 0;
    /* length near 2^64 */
    put_tag(&b, M_GRAPH, 2);
    put_varint(&b, UINT64_MAX - 2);
    EXPECT(&b, NNF_ERR_INVALID_MODEL, "runs past the end");
    b.n = 0;
    /* invalid wire types 6 and 7, field number 0, stray end-group */
    for (int w = 6; w <= 7; w++) {
        b.n = 0;
        put_tag(&b, 99, w);
        put_byte(&b, 0);
        EXPECT(&b, NNF_ERR_INVALID_MODEL, "wire type");
    }
    b.n = 0;
    put_tag(&b, 0, 0);
    put_byte(&b, 1);
    EXPECT(&b, NNF_ERR_INVALID_MODEL, "tag");
    b.n = 0;
    put_tag(&b, 99, 4);
    EXPECT(&b, NNF_ERR_INVALID_MODEL, "end-group");
    /* a truncated fixed32/fixed64 */
    b.n = 0;
    put_tag(&b, 99, 5);
    put_raw(&b, "ab", 2);
    EXPECT(&b, NNF_ERR_INVALID_MODEL, "fixed32");
    b.n = 0;
    put_tag(&b, 99, 1);
    put_raw(&b, "abcdef", 6);
    EXPECT(&b, NNF_ERR_INVALID_MODEL, "fixed64");
    /* empty and NULL buffers */
    b.n = 0;
    EXPECT(&b, NNF_ERR_INVALID_MODEL, "no graph");
    nnf_graph *g = NULL;
    CHECK(nnf_onnx_import(NULL, 0, NULL, NULL, &g) == NNF_ERR_INVALID_MODEL && g == NULL);
    CHECK(!strncmp(nnf_last_error(), "<memory>: ", 10));
    CHECK(nnf_onnx_import(NULL, 5, NULL, NULL, &g) == NNF_ERR_INVALID_ARGUMENT);
    CHECK(nnf_onnx_import("", 0, NULL, NULL, NULL) == NNF_ERR_INVALID_ARGUMENT);
    free(b.p);
}

static void test_groups(void) {
    /* An unknown group (with nested groups and fields) is skipped. */
    pbuf gr = relu_graph();
    pbuf m = {0};
    put_tag(&m, 99, 3);
    put_int(&m, 1, 5);
    put_tag(&m, 98, 3);
    put_str(&m, 2, "inner");
    put_tag(&m, 98, 4);
    put_tag(&m, 99, 4);
    pbuf rest = model_of(&gr);
    put_raw(&m, rest.p, rest.n);
    free(rest.p);
    nnf_graph *g = EXPECT(&m, NNF_OK, NULL);
    CHECK(g && g->n_nodes == 1);
    nnf_graph_destroy(g);
    free(m.p);

    /* mismatched end group */
    m = (pbuf){0};
    put_tag(&m, 99, 3);
    put_tag(&m, 98, 4);
    EXPECT(&m, NNF_ERR_INVALID_MODEL, "does not match");
    /* unclosed group */
    m.n = 0;
    put_tag(&m, 99, 3);
    put_int(&m, 1, 5);
    EXPECT(&m, NNF_ERR_INVALID_MODEL, "not closed");
    /* groups nested past the limit */
    m.n = 0;
    for (int i = 0; i < 200; i++)
        put_tag(&m, 99, 3);
    for (int i = 0; i < 200; i++)
        put_tag(&m, 99, 4);
    EXPECT(&m, NNF_ERR_INVALID_MODEL, "nested deeper");
    /* a known field (graph) sent as a group */
    m.n = 0;
    put_tag(&m, M_GRAPH, 3);
    put_tag(&m, M_GRAPH, 4);
    EXPECT(&m, NNF_ERR_INVALID_MODEL, "wire type group");
    free(m.p);
}

static void test_tensor_errors(void) {
    int64_t huge[2] = {(int64_t)1 << 62, (int64_t)1 << 62};
    pbuf t = tensor_hdr("big", 1, huge, 2);
    put_bytes(&t, T_RAW, "abcd", 4);
    EXPECT_INIT(&t, NNF_ERR_INVALID_MODEL, "overflow");

    /* product fits int64 but not bytes */
    int64_t big[2] = {(int64_t)1 << 31, (int64_t)1 << 31};
    t = tensor_hdr("big2", 11, big, 2);
    EXPECT_INIT(&t, NNF_ERR_INVALID_MODEL, "big2");

    int64_t neg[2] = {2, -3};
    t = tensor_hdr("neg", 1, neg, 2);
    EXPECT_INIT(&t, NNF_ERR_INVALID_MODEL, "negative");

    int64_t r9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    t = tensor_hdr("r9", 1, r9, 9);
    put_f32(&t, T_FLOAT, 1.0f);
    EXPECT_INIT(&t, NNF_ERR_UNSUPPORTED, "9 dims");

    int64_t cw[4] = {4, 3, 3, 3};
    t = tensor_hdr("conv1.weight", 1, cw, 4);
    char junk[100] = {0};
    put_bytes(&t, T_RAW, junk, sizeof junk);
    EXPECT_INIT(&t, NNF_ERR_INVALID_MODEL,
                "initializer 'conv1.weight': raw_data has 100 bytes, dims need 432");

    int64_t d3[1] = {3};
    t = tensor_hdr("fd", 1, d3, 1);
    put_packed_f32(&t, T_FLOAT, (const float[]){1, 2}, 2);
    EXPECT_INIT(&t, NNF_ERR_INVALID_MODEL, "float_data has 2 values, dims need 3");

    t = tensor_hdr("wrongfield", 7, d3, 1);
    put_packed_f32(&t, T_FLOAT, (const float[]){1, 2, 3}, 3);
    EXPECT_INIT(&t, NNF_ERR_INVALID_MODEL, "float_data");

    t = tensor_hdr("two", 1, d3, 1);
    put_packed_f32(&t, T_FLOAT, (const float[]){1, 2, 3}, 3);
    put_bytes(&t, T_RAW, junk, 12);
    EXPECT_INIT(&t, NNF_ERR_INVALID_MODEL, "more than one");

    t = tensor_hdr("nodata", 1, d3, 1);
    EXPECT_INIT(&t, NNF_ERR_INVALID_MODEL, "no data");

    t = tensor_hdr("notype", 0, d3, 1);
    EXPECT_INIT(&t, NNF_ERR_INVALID_MODEL, "data_type");

    t = tensor_hdr("c64", 14, d3, 1);
    EXPECT_INIT(&t, NNF_ERR_UNSUPPORTED, "data_type 14");

    t = tensor_hdr("str", 8, d3, 1);
    put_str(&t, T_STRING, "a");
    EXPECT_INIT(&t, NNF_ERR_UNSUPPORTED, "string");

    t = tensor_hdr("packedbad", 1, d3, 1);
    put_bytes(&t, T_FLOAT, junk, 11);
    EXPECT_INIT(&t, NNF_ERR_INVALID_MODEL, "multiple of 4");

    t = tensor_hdr("varints", 7, d3, 1);
    put_bytes(&t, T_INT64, "\x01\x02\x83", 3); /* last varint unterminated */
    EXPECT_INIT(&t, NNF_ERR_INVALID_MODEL, "truncated");

    t = tensor_hdr(NULL, 1, d3, 1);
    put_packed_f32(&t, T_FLOAT, (const float[]){1, 2, 3}, 3);
    EXPECT_INIT(&t, NNF_ERR_INVALID_MODEL, "no name");

    t = tensor_hdr("loc", 1, d3, 1);
    put_int(&t, T_LOC, 7);
    EXPECT_INIT(&t, NNF_ERR_INVALID_MODEL, "data_location");

    t = (pbuf){0};
    put_int(&t, T_DIMS, 3);
    put_int(&t, T_DTYPE, 1);
    put_bytes(&t, T_NAME, "a\0b", 3);
    put_packed_f32(&t, T_FLOAT, (const float[]){1, 2, 3}, 3);
    EXPECT_INIT(&t, NNF_ERR_INVALID_MODEL, "NUL");

    /* two initialisers with one name */
    pbuf g = relu_graph();
    for (int i = 0; i < 2; i++) {
        t = tensor_hdr("dup", 1, d3, 1);
        put_packed_f32(&t, T_FLOAT, (const float[]){1, 2, 3}, 3);
        put_msg(&g, G_INIT, &t);
    }
    pbuf m = model_of(&g);
    EXPECT(&m, NNF_ERR_INVALID_MODEL, "defined twice");
    free(m.p);
}

static void test_graph_errors(void) {
    /* rank 9 in a declared shape */
    pbuf g = relu_graph();
    int64_t d9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    pbuf vi = value_info("v9", 1, 9, d9, NULL);
    put_msg(&g, G_VINFO, &vi);
    pbuf m = model_of(&g);
    EXPECT(&m, NNF_ERR_UNSUPPORTED, "9 dims");
    free(m.p);

    /* a value produced twice */
    g = relu_graph();
    pbuf n = node("r2", "Relu", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1);
    put_msg(&g, G_NODE, &n);
    m = model_of(&g);
    EXPECT(&m, NNF_ERR_INVALID_MODEL,
           "node 'r2' (Relu): output 'y' is already produced by node 'r'");
    free(m.p);

    /* a node writing a graph input */
    g = relu_graph();
    n = node(NULL, "Relu", (const char *[]){"y"}, 1, (const char *[]){"x"}, 1);
    put_msg(&g, G_NODE, &n);
    m = model_of(&g);
    EXPECT(&m, NNF_ERR_INVALID_MODEL, "overwrites a graph input");
    free(m.p);

    /* sparse initialisers */
    g = relu_graph();
    put_str(&g, G_SPARSE, "");
    m = model_of(&g);
    EXPECT(&m, NNF_ERR_UNSUPPORTED, "sparse_initializer");
    free(m.p);

    /* no op_type */
    g = relu_graph();
    n = (pbuf){0};
    put_str(&n, N_OUT, "q");
    put_msg(&g, G_NODE, &n);
    m = model_of(&g);
    EXPECT(&m, NNF_ERR_INVALID_MODEL, "op_type");
    free(m.p);

    /* input listed twice; exotic input type */
    g = relu_graph();
    int64_t d[2] = {1, 4};
    vi = value_info("x", 1, 2, d, NULL);
    put_msg(&g, G_INPUT, &vi);
    m = model_of(&g);
    EXPECT(&m, NNF_ERR_INVALID_MODEL, "listed twice");
    free(m.p);
    g = relu_graph();
    vi = value_info("c", 14, 2, d, NULL);
    put_msg(&g, G_INPUT, &vi);
    m = model_of(&g);
    EXPECT(&m, NNF_ERR_UNSUPPORTED, "element type 14");
    free(m.p);

    /* attributes: no value, duplicated, sparse, bad type, no name */
    static const int bad_kind[] = {0, 1, 2, 3, 4, 5};
    static const char *needle[] = {
        "neither a type nor a value", "appears twice", "(imports)", "invalid type", "no name",
        "no type and values of 2"};
    for (int k = 0; k < 6; k++) {
        g = relu_graph();
        n = node("bad", "Relu", (const char *[]){"y"}, 1, (const char *[]){"w"}, 1);
        pbuf a = {0};
        if (bad_kind[k] != 4)
            put_str(&a, A_NAME, "alpha");
        if (k == 0) {
            put_msg(&n, N_ATTR, &a);
        } else if (k == 1) {
            put_f32(&a, A_F, 1.0f);
            pbuf a2 = {0};
            put_raw(&a2, a.p, a.n);
            put_msg(&n, N_ATTR, &a);
            put_msg(&n, N_ATTR, &a2);
        } else if (k == 2) {
            put_int(&a, A_TYPE, 11);
            put_msg(&n, N_ATTR, &a);
        } else if (k == 3) {
            put_int(&a, A_TYPE, 99);
            put_msg(&n, N_ATTR, &a);
        } else if (k == 4) {
            put_f32(&a, A_F, 1.0f);
            put_msg(&n, N_ATTR, &a);
        } else {
            put_f32(&a, A_F, 1.0f);
            put_int(&a, A_I, 1);
            put_msg(&n, N_ATTR, &a);
        }
        put_msg(&g, G_NODE, &n);
        m = model_of(&g);
        nnf_graph *gr = EXPECT(&m, k == 2 ? NNF_OK : NNF_ERR_INVALID_MODEL, needle[k]);
        if (gr) { /* kept untyped, for operator binding to report */
            const nnf_attr *sp = nnf_node_attr(&gr->nodes[1], "alpha");
            CHECK(sp && sp->type == NNF_ATTR_UNDEFINED);
        }
        nnf_graph_destroy(gr);
        free(m.p);
    }

    /* A tensor attribute whose tensor is bad: the message names node and attribute. */
    g = relu_graph();
    n = node("k", "Constant", NULL, 0, (const char *[]){"w"}, 1);
    pbuf a = {0};
    put_str(&a, A_NAME, "value");
    put_int(&a, A_TYPE, 4);
    int64_t d3[1] = {3};
    pbuf t = tensor_hdr(NULL, 1, d3, 1);
    put_f32(&t, T_FLOAT, 1.0f);
    put_msg(&a, A_T, &t);
    put_msg(&n, N_ATTR, &a);
    put_msg(&g, G_NODE, &n);
    m = model_of(&g);
    EXPECT(&m, NNF_ERR_INVALID_MODEL,
           "t.onnx: node 'k' (Constant): attribute 'value': tensor at offset");
    free(m.p);
}

/* Sizes a hostile file can reach cheaply must not cost quadratic time:
 * many attributes on one node, many opset imports with many nodes. */
static void test_scale(void) {
    enum { K = 20000 };
    char name[32];
    for (int dup = 0; dup < 2; dup++) {
        pbuf g = relu_graph();
        pbuf n = node("wide", "Relu", (const char *[]){"y"}, 1, (const char *[]){"w"}, 1);
        for (int i = 0; i < K; i++) {
            snprintf(name, sizeof name, "a%d", dup && i == K - 1 ? 17 : i);
            put_attr_int(&n, name, i, 1);
        }
        put_msg(&g, G_NODE, &n);
        pbuf m = model_of(&g);
        nnf_graph *gr =
            EXPECT(&m, dup ? NNF_ERR_INVALID_MODEL : NNF_OK, "attribute 'a17' appears twice");
        if (gr)
            CHECK(gr->nodes[1].n_attrs == K && nnf_attr_int(&gr->nodes[1], "a12345", 0) == 12345);
        nnf_graph_destroy(gr);
        free(m.p);
    }
    pbuf g = {0}, m = {0};
    const char *prev = "x";
    char out[32];
    for (int i = 0; i < K; i++) {
        snprintf(out, sizeof out, "v%d", i);
        snprintf(name, sizeof name, "d%d", i % 97);
        pbuf n = node(NULL, "Op", (const char *[]){prev}, 1, (const char *[]){out}, 1);
        put_str(&n, N_DOMAIN, name);
        put_msg(&g, G_NODE, &n);
        prev = i % 2 ? "x" : "v0";
    }
    pbuf in = value_info("x", 1, -1, NULL, NULL);
    put_msg(&g, G_INPUT, &in);
    put_msg(&m, M_GRAPH, &g);
    for (int i = 0; i < K; i++) {
        pbuf op = {0};
        snprintf(name, sizeof name, "d%d", i);
        put_str(&op, 1, name);
        put_int(&op, 2, i + 1);
        put_msg(&m, M_OPSET, &op);
    }
    nnf_graph *gr = EXPECT(&m, NNF_OK, NULL);
    if (gr) {
        CHECK(gr->n_nodes == K && gr->nodes[5].opset == 6 && !strcmp(gr->nodes[5].domain, "d5"));
        CHECK(gr->nodes[200].opset == 200 % 97 + 1);
    }
    nnf_graph_destroy(gr);
    free(m.p);
}

/* Subgraphs nested `levels` deep: each level is an If node with a then_branch. */
static pbuf nested(int levels) {
    pbuf g = relu_graph();
    for (int i = 0; i < levels; i++) {
        pbuf outer = {0}, n = node(NULL, "If", (const char *[]){"c"}, 1, (const char *[]){"o"}, 1),
             a = {0};
        put_str(&a, A_NAME, "then_branch");
        put_int(&a, A_TYPE, 5);
        put_msg(&a, A_G, &g);
        put_msg(&n, N_ATTR, &a);
        put_msg(&outer, G_NODE, &n);
        g = outer;
    }
    return model_of(&g);
}

static void test_nesting(void) {
    pbuf m = nested(5);
    nnf_graph *g = EXPECT(&m, NNF_OK, NULL);
    if (g) {
        const nnf_graph *s = g;
        int depth = 0;
        while (s->n_nodes && s->nodes[0].n_attrs) {
            const nnf_graph *inner = s->nodes[0].attrs[0].graph;
            CHECK(inner->parent == s);
            s = inner;
            depth++;
        }
        CHECK(depth == 5);
        CHECK(s->nodes[0].opset == 13);
    }
    nnf_graph_destroy(g);
    free(m.p);
    m = nested(40);
    EXPECT(&m, NNF_ERR_INVALID_MODEL, "nested deeper");
    free(m.p);
}

/* ---- external data -------------------------------------------------------------------------- */

static pbuf ext_tensor(const char *name, const char *loc, const char *offset, const char *length,
                       int64_t n) {
    int64_t d[1] = {n};
    pbuf t = tensor_hdr(name, 1, d, 1);
    const char *keys[3] = {"location", "offset", "length"};
    const char *vals[3] = {loc, offset, length};
    for (int i = 0; i < 3; i++) {
        if (!vals[i])
            continue;
        pbuf e = {0};
        put_str(&e, 1, keys[i]);
        put_str(&e, 2, vals[i]);
        put_msg(&t, T_EXT, &e);
    }
    put_int(&t, T_LOC, 1);
    return t;
}

static nnf_status import_ext(pbuf *t1, pbuf *t2, const char *dir, nnf_graph **out) {
    pbuf g = relu_graph();
    put_msg(&g, G_INIT, t1);
    if (t2)
        put_msg(&g, G_INIT, t2);
    pbuf m = model_of(&g);
    nnf_status st = nnf_onnx_import(m.p, m.n, "ext.onnx", dir, out);
    free(m.p);
    return st;
}

static void test_external(void) {
    char dir[] = "/tmp/nnf_onnx_ext_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(!"mkdtemp failed");
        return;
    }
    char path[256], sub[256];
    snprintf(sub, sizeof sub, "%s/w", dir);
    mkdir(sub, 0700);
    snprintf(path, sizeof path, "%s/w/weights.bin", dir);
    float vals[6] = {1, 2, 3, 4, 5, 6};
    FILE *f = fopen(path, "wb");
    fwrite(vals, sizeof vals, 1, f);
    fwrite("x", 1, 1, f); /* 25 bytes: offset 1 is unaligned */
    fclose(f);

    nnf_graph *g = NULL;
    pbuf a = ext_tensor("a", "w/weights.bin", "8", "16", 4);
    pbuf b = ext_tensor("b", "./w//weights.bin", NULL, NULL, 2); /* no offset/length */
    nnf_status st = import_ext(&a, &b, dir, &g);
    CHECK_MSG(st == NNF_OK, "%s", nnf_last_error());
    nnf_graph_destroy(g);
    /* two tensors in one file share one mapping */
    g = NULL;
    a = ext_tensor("a", "w/weights.bin", "8", "16", 4);
    b = ext_tensor("b", "w/weights.bin", NULL, NULL, 2);
    st = import_ext(&a, &b, dir, &g);
    CHECK(st == NNF_OK && g->mappings && !g->mappings->next);
    CHECK_MSG(st == NNF_OK, "%s", nnf_last_error());
    if (st == NNF_OK) {
        const nnf_value *va = &g->values[nnf_graph_find_value(g, "a")];
        CHECK(va->nbytes == 16 && ((const float *)va->data)[0] == 3 &&
              ((const float *)va->data)[3] == 6);
        const nnf_value *vb = &g->values[nnf_graph_find_value(g, "b")];
        CHECK(((const float *)vb->data)[1] == 2);
        /* zero-copy: a points into a mapping of weights.bin */
        int found = 0;
        for (const nnf_mapping *mp = g->mappings; mp; mp = mp->next)
            found += (const uint8_t *)va->data == (const uint8_t *)mp->addr + 8 && mp->size == 25;
        CHECK(found == 1);
        nnf_graph_destroy(g);
    }

    /* unaligned offset: copied, still correct */
    g = NULL;
    a = ext_tensor("a", "w/weights.bin", "1", NULL, 6);
    st = import_ext(&a, NULL, dir, &g);
    CHECK_MSG(st == NNF_OK, "%s", nnf_last_error());
    if (st == NNF_OK) {
        const nnf_value *va = &g->values[nnf_graph_find_value(g, "a")];
        CHECK((uintptr_t)va->data % 4 == 0);
        float expect;
        memcpy(&expect, (const uint8_t *)vals + 1, 4);
        CHECK(memcmp(va->data, &expect, 4) == 0);
        nnf_graph_destroy(g);
    }

    static const struct {
        const char *loc, *off, *len;
        int64_t n;
        nnf_status st;
        const char *needle;
    } bad[] = {
        {"../weights.bin", NULL, NULL, 1, NNF_ERR_INVALID_MODEL, "leaves the model's folder"},
        {"w/../../x", NULL, NULL, 1, NNF_ERR_INVALID_MODEL, "leaves the model's folder"},
        {"w\\..\\..\\x", NULL, NULL, 1, NNF_ERR_INVALID_MODEL, "leaves the model's folder"},
        {"/etc/passwd", NULL, NULL, 1, NNF_ERR_INVALID_MODEL, "absolute"},
        {"C:\\x", NULL, NULL, 1, NNF_ERR_INVALID_MODEL, "absolute"},
        {"", NULL, NULL, 1, NNF_ERR_INVALID_MODEL, "empty"},
        {"w/weights.bin", "100", NULL, 1, NNF_ERR_INVALID_MODEL, "runs past the end"},
        {"w/weights.bin", "16", NULL, 4, NNF_ERR_INVALID_MODEL, "runs past the end"},
        {"w/weights.bin", "18446744073709551615", NULL, 1, NNF_ERR_INVALID_MODEL,
         "runs past the end"},
        {"w/weights.bin", "99999999999999999999", NULL, 1, NNF_ERR_INVALID_MODEL, "byte count"},
        {"w/weights.bin", "-1", NULL, 1, NNF_ERR_INVALID_MODEL, "byte count"},
        {"w/weights.bin", "0", "8", 1, NNF_ERR_INVALID_MODEL, "length is 8 bytes, dims need 4"},
        {"w/missing.bin", NULL, NULL, 1, NNF_ERR_IO, "missing.bin"},
        {"w", NULL, NULL, 1, NNF_ERR_IO, "not a regular file"},
        {NULL, "0", NULL, 1, NNF_ERR_INVALID_MODEL, "no 'location'"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        g = NULL;
        a = ext_tensor("a", bad[k].loc, bad[k].off, bad[k].len, bad[k].n);
        st = import_ext(&a, NULL, dir, &g);
        CHECK_MSG(st == bad[k].st && g == NULL, "case %zu: %s: %s", k, nnf_status_name(st),
                  nnf_last_error());
        CHECK_MSG(strstr(nnf_last_error(), bad[k].needle) &&
                      !strncmp(nnf_last_error(), "ext.onnx: ", 10),
                  "case %zu: '%s' not in '%s'", k, bad[k].needle, nnf_last_error());
        nnf_graph_destroy(g);
    }
    unlink(path);
    rmdir(sub);
    rmdir(dir);
}

/* Large initialisers whose raw_data is misaligned: a Gather's table stays in
 * the file (misaligned, read a row at a time), one with another reader, or in
 * a graph with subgraphs, gets an aligned copy. pad moves the offsets. */
static void test_gather_tables(size_t pad, int *kept) {
    enum { ROWS = 300, COLS = 8 };
    static float tab[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        tab[i] = (float)i * 0.5f - 3.0f;
    for (int with_if = 0; with_if < 2; with_if++) {
        pbuf g = {0};
        int64_t d[2] = {ROWS, COLS};
        const char *names[2] = {"emb", "w2"};
        for (int t = 0; t < 2; t++) {
            pbuf init = tensor_hdr(names[t], 1, d, 2);
            if (t == 0 && pad) { /* a doc_string before raw_data shifts its offset */
                char doc[8] = "xxxxxxx";
                doc[pad] = 0;
                put_str(&init, 12, doc);
            }
            put_bytes(&init, T_RAW, tab, sizeof tab);
            put_msg(&g, G_INIT, &init);
        }
        pbuf n1 = node("g1", "Gather", (const char *[]){"emb", "ids"}, 2, (const char *[]){"y1"}, 1);
        pbuf n2 = node("g2", "Gather", (const char *[]){"w2", "ids"}, 2, (const char *[]){"y2"}, 1);
        pbuf n3 = node("id", "Identity", (const char *[]){"w2"}, 1, (const char *[]){"y3"}, 1);
        put_msg(&g, G_NODE, &n1);
        put_msg(&g, G_NODE, &n2);
        put_msg(&g, G_NODE, &n3);
        if (with_if) {
            pbuf nif = node("if", "If", (const char *[]){"c"}, 1, (const char *[]){"y4"}, 1);
            pbuf then_g = body_graph("then"), else_g = body_graph("else");
            pbuf at = {0}, ae = {0};
            put_str(&at, A_NAME, "then_branch");
            put_int(&at, A_TYPE, 5);
            put_msg(&at, A_G, &then_g);
            put_str(&ae, A_NAME, "else_branch");
            put_int(&ae, A_TYPE, 5);
            put_msg(&ae, A_G, &else_g);
            put_msg(&nif, N_ATTR, &at);
            put_msg(&nif, N_ATTR, &ae);
            put_msg(&g, G_NODE, &nif);
        }
        put_str(&g, G_NAME, "tables");
        int64_t di[1] = {2};
        pbuf ids = value_info("ids", 7, 1, di, NULL);
        put_msg(&g, G_INPUT, &ids);
        for (int k = 0; k < 3 + with_if; k++) {
            const char *outs[4] = {"y1", "y2", "y3", "y4"};
            pbuf o = value_info(outs[k], 1, -1, NULL, NULL);
            put_msg(&g, G_OUTPUT, &o);
        }
        pbuf m = model_of(&g);
        uint8_t *buf = aligned_alloc(64, (m.n + 63) & ~(size_t)63);
        memcpy(buf, m.p, m.n);
        nnf_graph *gr = NULL;
        nnf_status st = nnf_onnx_import(buf, m.n, "tables.onnx", NULL, &gr);
        CHECK_MSG(st == NNF_OK, "%s", nnf_last_error());
        if (st == NNF_OK) {
            const nnf_value *e = &gr->values[nnf_graph_find_value(gr, "emb")];
            const nnf_value *w = &gr->values[nnf_graph_find_value(gr, "w2")];
            CHECK(e->data && !memcmp(e->data, tab, sizeof tab) && w->data &&
                  !memcmp(w->data, tab, sizeof tab));
            /* w2 has a typed reader (Identity): always aligned, never misaligned */
            CHECK((uintptr_t)w->data % 4 == 0 && !w->misaligned);
            const uint8_t *in_file = e->data;
            bool inside = in_file >= buf && in_file < buf + m.n;
            if ((uintptr_t)e->data % 4) { /* left in place: only with no subgraph */
                CHECK(e->misaligned && inside && !with_if);
                ++*kept;
            } else {
                CHECK(!e->misaligned);
            }
            if (with_if)
                CHECK(!e->misaligned);
            nnf_graph_destroy(gr);
        }
        free(buf);
        free(m.p);
    }
}

int main(void) {
    int kept = 0;
    for (size_t pad = 0; pad < 4; pad++)
        test_gather_tables(pad, &kept);
    CHECK(kept > 0); /* some pad left a misaligned Gather table in place */
    int borrow = 0, copy = 0;
    for (size_t pad = 0; pad < 4; pad++)
        test_valid_model(pad, &borrow, &copy);
    CHECK(borrow > 0 && copy > 0); /* both raw_data paths were taken */
    test_wire_errors();
    test_groups();
    test_tensor_errors();
    test_graph_errors();
    test_nesting();
    test_scale();
    test_external();
    TEST_MAIN_END();
}

/* Layout pass: run convolutions, and the ops between them that do not care
 * about channel order, on NCHWc8 blocked tensors (ops/nchwc.h,
 * docs/ARCHITECTURE.md "Blocked layout").
 *
 * Every value a blocked node produces gets a blocked twin ("<name>.nchwc8",
 * shape [N, C8, H, W]); the original value is then produced only if an NCHW
 * reader or a graph output needs it, by a ReorderOutput of the twin. A
 * blocked node reading a plain value gets a ReorderInput of it (one per
 * value). So reorders appear exactly at the edges of blocked regions:
 * model inputs (except a conv with few input channels, which reads NCHW
 * directly), Reshape/Flatten/Gemm and graph outputs.
 *
 * Blocked:
 *   Conv            2-D float32, constant weight, group 1, depthwise or
 *                   groups of whole 8-channel blocks, a
 *                   blocked kernel for the shape (nnf_nchwc_conv_shape),
 *                   and not a shape the NCHW Winograd kernel takes
 *   MaxPool/AveragePool (one output), GlobalAveragePool/GlobalMaxPool
 *                   (their output plain, or blocked for blocked readers),
 *                   nearest Resize of H and W,
 *                   when the input is blocked
 *   Add/Sub/Mul     two inputs of one 4-D shape, one of them blocked; or
 *                   a blocked one and a per-channel [N or 1, C, 1, 1] one
 *                   (a squeeze-and-excitation scale), as the blocked op
 *   Relu/LeakyRelu  blocked input (f(0) = 0 keeps the padding lanes zero)
 *   Concat          on channels, every input a whole number of blocks
 * Runs on AVX2 and above, where the blocked kernels are the fast ones. */
#include "passes/pass.h"

#include "base/cpu.h"
#include "base/log.h"
#include "kernels/nchwc.h"
#include "ops/elementwise.h"
#include "ops/nchwc.h"
#include "ops/op.h"
#include "ops/resize.h"
#include "plan/kernels.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct layout {
    nnf_graph *g;
    int *rd_start, *rd; /* readers of original value v: rd[rd_start[v] .. rd_start[v + 1]) */
    int *twin;  /* per original value: its blocked twin, or -1 */
    bool *moved; /* the value's producer now writes the twin instead */
    int n0;      /* values before the pass (only they have twins) */
    int count;
} layout;

static bool is_op(const nnf_node *n, const char *type) { return !n->domain[0] && !strcmp(n->op_type, type); }

static const nnf_shape *shape_of(const layout *L, int v) { return &L->g->values[v].shape; }

static bool plain_4d_f32(const layout *L, int v) {
    const nnf_value *val = &L->g->values[v];
    return v >= 0 && v < L->n0 && val->dtype == NNF_DTYPE_FLOAT32 && val->shape.rank == 4 &&
           nnf_shape_known(&val->shape);
}

static bool blocked(const layout *L, int v) { return v >= 0 && v < L->n0 && L->twin[v] >= 0; }

/* A new blocked value shaped like plain value v with `channels` channels
 * (rounded up to the block). */
static int new_blocked_value(layout *L, int v, int64_t channels) {
    nnf_graph *g = L->g;
    char name[512];
    snprintf(name, sizeof name, "%.480s.nchwc8", g->values[v].name);
    for (int k = 2; nnf_graph_find_value(g, name) >= 0; k++)
        snprintf(name, sizeof name, "%.480s.nchwc8_%d", g->values[v].name, k);
    int id = nnf_graph_value(g, name);
    if (id < 0)
        return -1;
    nnf_value *t = &g->values[id];
    t->dtype = NNF_DTYPE_FLOAT32;
    t->shape = g->values[v].shape;
    t->shape.dims[1] = nnf_nchwc_round(channels);
    t->shape.dim_names[1] = NULL;
    t->kind = NNF_VALUE_INTERMEDIATE;
    t->producer = -1;
    t->blocked_of = v;
    return id;
}

static nnf_status oom(const char *what) {
    return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory in the layout pass (%s)", what);
}

/* Append an internal node; returns its id or -1. */
static int add_node(layout *L, const char *name, const char *type, const int *in, int n_in, int out,
                    void *params) {
    nnf_graph *g = L->g;
    int id = nnf_graph_add_node(g, name, type, "nnfuse.nchwc", in, n_in, &out, 1);
    if (id < 0)
        return -1;
    nnf_node *n = &g->nodes[id];
    n->op = nnf_op_find("nnfuse.nchwc", type, 1, NULL);
    n->opset = 1;
    n->params = params;
    g->values[out].producer = id;
    return n->op ? id : -1;
}

static nnf_nchwc_params *new_params(layout *L) {
    nnf_nchwc_params *p = nnf_arena_calloc(&L->g->arena, 1, sizeof *p);
    if (p)
        p->conv.residual_input = -1;
    return p;
}

/* The blocked form of plain value v: its twin, or a new ReorderInput. */
static nnf_status blocked_input(layout *L, int v, int *out) {
    if (L->twin[v] < 0) {
        int t = new_blocked_value(L, v, shape_of(L, v)->dims[1]);
        char name[512];
        snprintf(name, sizeof name, "%.480s:to_nchwc8", L->g->values[v].name);
        nnf_nchwc_params *p = new_params(L);
        if (t < 0 || !p || add_node(L, name, "ReorderInput", &v, 1, t, p) < 0)
            return oom("a reorder");
        L->twin[v] = t;
        L->count++;
    }
    *out = L->twin[v];
    return NNF_OK;
}

/* Make plain value v exist again (its producer was blocked): a
 * ReorderOutput of its twin, once. */
static nnf_status plain_input(layout *L, int v) {
    if (v < 0 || v >= L->n0 || !L->moved[v])
        return NNF_OK;
    char name[512];
    snprintf(name, sizeof name, "%.480s:from_nchwc8", L->g->values[v].name);
    nnf_nchwc_params *p = new_params(L);
    if (!p)
        return oom("a reorder");
    p->channels = shape_of(L, v)->dims[1];
    if (add_node(L, name, "ReorderOutput", &L->twin[v], 1, v, p) < 0)
        return oom("a reorder");
    L->moved[v] = false;
    L->count++;
    return NNF_OK;
}

/* Point node id's input k at the blocked form of its value. */
static nnf_status use_blocked(layout *L, int id, int k) {
    int b;
    NNF_CHECK(blocked_input(L, L->g->nodes[id].inputs[k], &b));
    L->g->nodes[id].inputs[k] = b;
    return NNF_OK;
}

/* Node id (output 0 plain 4-D) now writes a blocked twin with `channels`. */
static nnf_status move_output(layout *L, int id, int64_t channels) {
    nnf_graph *g = L->g;
    int v = g->nodes[id].outputs[0];
    int t = new_blocked_value(L, v, channels);
    if (t < 0)
        return oom("a blocked value");
    g->nodes[id].outputs[0] = t;
    g->values[t].producer = id;
    g->values[v].producer = -1;
    L->twin[v] = t;
    L->moved[v] = true;
    return NNF_OK;
}

static void retype(layout *L, int id, const char *type, void *params) {
    nnf_node *n = &L->g->nodes[id];
    n->op_type = type;
    n->domain = "nnfuse.nchwc";
    n->op = nnf_op_find("nnfuse.nchwc", type, 1, NULL);
    n->opset = 1;
    n->params = params;
    L->count++;
}

/* Ops the pass may run blocked: a value read only by others (and graph
 * outputs) will need a ReorderOutput whatever its producer does. */
static bool blockable_type(const nnf_node *n) {
    static const char *const types[] = {"Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
                                        "Resize", "Add", "Sub", "Mul", "Relu", "LeakyRelu", "Concat"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (is_op(n, types[i]))
            return true;
    return false;
}

/* No reader could take v blocked (graph outputs allowed). */
static bool no_blocked_readers(const layout *L, int v) {
    for (int i = L->rd_start[v]; i < L->rd_start[v + 1]; i++)
        if (blockable_type(&L->g->nodes[L->rd[i]]))
            return false;
    return true;
}

/* Readers, all of them NCHW ones, and not a graph output. */
static bool only_plain_readers(const layout *L, int v) {
    for (int k = 0; k < L->g->n_outputs; k++)
        if (L->g->outputs[k] == v)
            return false; /* kept simple: outputs are rare and small */
    return L->rd_start[v + 1] > L->rd_start[v] && no_blocked_readers(L, v);
}

/* The reader lists of the values that exist before the pass (CSR). */
static nnf_status index_readers(layout *L) {
    nnf_graph *g = L->g;
    size_t total = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].dead)
            total += (size_t)g->nodes[i].n_inputs;
    L->rd_start = nnf_calloc((size_t)L->n0 + 2, sizeof(int));
    L->rd = nnf_malloc(sizeof(int) * (total ? total : 1));
    if (!L->rd_start || !L->rd || total > INT32_MAX)
        return oom("reader lists");
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; !g->nodes[i].dead && k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0)
                L->rd_start[g->nodes[i].inputs[k] + 2]++;
    for (int v = 0; v < L->n0; v++)
        L->rd_start[v + 2] += L->rd_start[v + 1];
    for (int i = 0; i < g->n_nodes; i++)
        for (int k = 0; !g->nodes[i].dead && k < g->nodes[i].n_inputs; k++)
            if (g->nodes[i].inputs[k] >= 0)
                L->rd[L->rd_start[g->nodes[i].inputs[k] + 1]++] = i;
    return NNF_OK;
}

static nnf_status try_conv(layout *L, int id, bool *done) {
    nnf_graph *g = L->g;
    const nnf_node *n = &g->nodes[id];
    const nnf_conv_params *cp = n->params;
    int x = n->inputs[0], w = n->inputs[1], y = n->outputs[0];
    if (!cp || n->n_outputs != 1 || !plain_4d_f32(L, x) || !plain_4d_f32(L, y) || w < 0 || !g->values[w].data ||
        g->values[w].shape.rank != 4 || (n->n_inputs > 2 && n->inputs[2] >= 0 && !g->values[n->inputs[2]].data))
        return NNF_OK;
    if (cp->residual_input >= 0 && (cp->residual_input >= n->n_inputs || !plain_4d_f32(L, n->inputs[cp->residual_input]) ||
                                    memcmp(shape_of(L, n->inputs[cp->residual_input])->dims, shape_of(L, y)->dims,
                                           4 * sizeof(int64_t))))
        return NNF_OK;
    nnf_conv2d_shape s;
    if (!nnf_nchwc_conv_shape(cp, shape_of(L, x)->dims, g->values[w].shape.dims, shape_of(L, y)->dims, &s))
        return NNF_OK;
    /* the grouped conv of narrow groups adds a residual before its
     * activation only (its passes carry their sums as one): with one after
     * it, the conv stays NCHW */
    if (nnf_nchwc_gconv_supported(&s) && cp->residual_input >= 0 && cp->residual_after_act)
        return NNF_OK;
    /* Winograd F(4x4,3x3) does 4x fewer multiplies than any direct kernel:
     * where the blocked Winograd does not win (nnf_nchwc_wino_wins: maps of
     * fewer than 16 tiles) the NCHW one runs 1.5-2x faster than the
     * blocked direct kernel, reorders around it included (not on the
     * AVX-512 tier: nnf_nchwc_direct_wins) */
    if (s.c >= nnf_nchwc_wino_min_c() && nnf_conv_select(&s, nnf_cpu_isa()) == NNF_CONV_ALGO_WINOGRAD &&
        !nnf_nchwc_wino_wins(&s, nnf_cpu_isa()) && !nnf_nchwc_direct_wins(&s, nnf_cpu_isa()))
        return NNF_OK;
    /* A conv on a plain input reads it as it is when that input has few
     * channels: a model's first conv (up to 4), or up to 32 at a stride of
     * 2 or more, whose input, 4x its output pixels, a reorder would move
     * once more than the conv reads it (single-op models, AVX-512, 1
     * thread: YOLOv5s's 32 -> 64 stride-2 3x3 at 320x320 5.8 -> 4.4 ms,
     * 16 -> 32 at 160x160 0.35 -> 0.29; with 64 channels the blocked input
     * won: 64 -> 128 at 80x80 1.04 against 1.21, and so did 32 -> 32 5x5
     * at stride 1, 0.64 against 0.78). */
    bool dense = nnf_nchwc_conv_supported(&s);
    bool few = s.group == 1 && (s.c <= 4 || (s.c <= 32 && s.sh * s.sw >= 4));
    bool in_blocked = blocked(L, x) || !dense || !few, out_plain = false;
    /* Only NCHW readers (a detection head before its Reshape) or the
     * graph's outputs: the dense kernel writes NCHW itself (out_plain, the
     * output reorder fused into its tiles), except a pointwise conv on a
     * plain input with fewer than 128 outputs or a map larger than 14x14,
     * which the NCHW GEMM runs faster than a reorder of its input, the
     * blocked kernel and its NCHW stores (single-op models, AVX-512: 64 ->
     * 64 at 56x56 0.17 ms against 0.03 + 0.14; 64 -> 256 at 56x56 0.66
     * against 0.83, 128 -> 512 at 28x28 0.55 against 0.71 (ab_builds: the
     * GEMM 1.2-1.3x and 1.13-1.19x); at 14x14 the blocked kernel wins by 3-5
     * % (1024 -> 256), at 7x7 more (512 -> 2048 0.53 against 0.63): its
     * stores are few, the GEMM's N short). Else (a
     * residual, the depthwise or a Winograd kernel) blocking trades a
     * reorder of the input for one of the output, which pays only when the
     * input is blocked already and the output is the smaller. */
    if (no_blocked_readers(L, y)) {
        bool gemm_wins = !blocked(L, x) && s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && !s.pt && !s.pl &&
                         (s.oc < 128 || s.oh * s.ow > 196);
        out_plain = cp->residual_input < 0 && !gemm_wins && nnf_nchwc_plain_out_ok(&s, in_blocked, nnf_cpu_isa());
        /* A depthwise conv between plain tensors, a graph output included,
         * whose NCHW kernel is the row kernel (rows wider than 16, or 8 at
         * stride 2: conv_dw.c): it streams each plane once, where the
         * blocked one adds two reorders of as many bytes as it reads and
         * writes (single-op models, AVX-512, 1 thread: 32 channels at
         * 112x112 0.10 ms against 0.22, 144 at 56x56 0.13 against 0.24).
         * Not output rows the blocked kernel runs as whole tiles
         * (nnf_nchwc_dw_small_rows: stride 2 to at most 16 wide): those
         * won blocked, reorders included (192 channels 28 -> 14 0.030 ms
         * against 0.033, 128 5x5 20 -> 10 0.014 against 0.035). */
        bool dw_rows =
            !blocked(L, x) && nnf_conv_select(&s, nnf_cpu_isa()) == NNF_CONV_ALGO_DEPTHWISE &&
            nnf_dw_is_plane(nnf_dw_select(&s, nnf_cpu_isa())) && !nnf_nchwc_dw_small_rows(&s);
        /* Between plain tensors, no residual, where it wins over the row
         * kernel (nnf_nchwc_dw_plain_wins: the small rows, and on AVX-512
         * rows under six full vectors): the blocked kernel reorders each
         * pair of blocks' rows in and out itself, a band at a time in a
         * buffer in L2 (nnf_nchwc_dw_run_plain), instead of two reorders
         * of the whole tensors around it, each a job of its own (single-op
         * models, AVX-512, 2 threads: 192 channels 28 -> 14 0.032 -> 0.020
         * ms, ORT 0.031; 576 at 14 -> 7 0.028 -> 0.014; 1 thread 0.038
         * either way) */
        if (!blocked(L, x) && cp->residual_input < 0 &&
            nnf_nchwc_dw_plain_wins(&s, nnf_cpu_isa())) {
            in_blocked = false;
            out_plain = true;
        }
        /* A blocked input into the F(2x2,3x3) form stays blocked, its
         * output reordered: the NCHW Winograd is F(4x4,3x3) only, with 2.25x
         * the weights (the U-Net's 512-channel 3x3 before its first
         * ConvTranspose: 38 against 17 MB; nnf_nchwc_wino_f4_heavy) */
        bool f2 = blocked(L, x) && nnf_nchwc_wino_f2(&s, nnf_cpu_isa());
        /* A depthwise conv on a blocked input that the rule below leaves
         * NCHW (no larger output than input, plain readers only) runs on
         * the input's plain form as well, but between plain tensors where
         * that wins: ConvNeXt's first block of stages 2-4, whose depthwise
         * conv reads the blocked downsampling conv, which the residual Add
         * reads plain as well (7x7, 192 channels at 28x28, 0.123 ms on the
         * row kernel against 0.104). */
        if (!out_plain && blocked(L, x) && cp->residual_input < 0 && only_plain_readers(L, y) &&
            nnf_shape_numel(shape_of(L, y)) >= nnf_shape_numel(shape_of(L, x)) &&
            nnf_nchwc_dw_plain_wins(&s, nnf_cpu_isa())) {
            NNF_CHECK(plain_input(L, x));
            in_blocked = false;
            out_plain = true;
        }
        if (!out_plain && (gemm_wins || dw_rows ||
                           (only_plain_readers(L, y) && !f2 &&
                            (!blocked(L, x) ||
                             nnf_shape_numel(shape_of(L, y)) >= nnf_shape_numel(shape_of(L, x))))))
            return NNF_OK;
    }
    nnf_nchwc_params *p = new_params(L);
    if (!p)
        return oom("conv attributes");
    p->conv = *cp;
    p->in_blocked = in_blocked;
    p->out_plain = out_plain;
    if (p->in_blocked)
        NNF_CHECK(use_blocked(L, id, 0));
    if (cp->residual_input >= 0)
        NNF_CHECK(use_blocked(L, id, cp->residual_input));
    if (!out_plain)
        NNF_CHECK(move_output(L, id, (int64_t)s.oc));
    retype(L, id, "Conv", p);
    *done = true;
    return NNF_OK;
}

static bool const_nearest_hw_resize(const layout *L, const nnf_node *n) {
    const nnf_resize_params *p = n->params;
    if (!p || n->opset < 11 || p->mode != NNF_RESIZE_NEAREST || p->coord == NNF_COORD_TF_CROP_AND_RESIZE)
        return false;
    int ops[3] = {p->roi_input, p->scales_input, p->sizes_input};
    for (int k = 0; k < 3; k++)
        if (ops[k] >= 0 && ops[k] < n->n_inputs && n->inputs[ops[k]] >= 0 &&
            !L->g->values[n->inputs[ops[k]]].data && nnf_shape_numel(shape_of(L, n->inputs[ops[k]])) != 0)
            return false;
    const nnf_shape *x = shape_of(L, n->inputs[0]), *y = shape_of(L, n->outputs[0]);
    return x->dims[0] == y->dims[0] && x->dims[1] == y->dims[1];
}

/* Binary node n's per-channel operand (0 or 1): the other is blocked and
 * of the output's shape [N, C, H, W] (H x W > 1), this one [N or 1, C, 1,
 * 1]; -1 when not so, or under the legacy (opset < 7) broadcast rules. */
static int per_channel_operand(const layout *L, const nnf_node *n) {
    const nnf_binary_params *p = n->params;
    int y = n->outputs[0];
    if (!p || p->legacy || !plain_4d_f32(L, n->inputs[0]) || !plain_4d_f32(L, n->inputs[1]) ||
        !plain_4d_f32(L, y))
        return -1;
    int k = nnf_nchwc_channel_operand(shape_of(L, n->inputs[0])->dims,
                                      shape_of(L, n->inputs[1])->dims, shape_of(L, y)->dims);
    return k >= 0 && blocked(L, n->inputs[1 - k]) ? k : -1;
}

/* A same-shape binary node whose blocked inputs have their plain form
 * already (a plain reader earlier in the order reordered them out) and
 * whose other input is plain only: blocked it would reorder that input in
 * and, for its plain readers, its result out; plain it needs neither.
 * ConvNeXt's residual Add after each stage's first (blocked) conv: two
 * reorders a block, the whole residual stream of stages 2-4. */
static bool plain_is_cheaper(const layout *L, const nnf_node *n) {
    bool plain_only = false;
    for (int k = 0; k < 2; k++) {
        int v = n->inputs[k];
        if (blocked(L, v) && L->moved[v])
            return false;
        plain_only |= !blocked(L, v);
    }
    return plain_only;
}

static nnf_status try_other(layout *L, int id, bool *done) {
    nnf_graph *g = L->g;
    const nnf_node *n = &g->nodes[id];
    if (n->n_inputs < 1 || n->n_outputs < 1 ||
        (!blocked(L, n->inputs[0]) && !(n->n_inputs == 2 && blocked(L, n->inputs[1]))))
        return NNF_OK;
    int x = n->inputs[0], y = n->outputs[0];
    if (!plain_4d_f32(L, y) && !(is_op(n, "GlobalAveragePool") || is_op(n, "GlobalMaxPool")))
        return NNF_OK;
    int64_t c = shape_of(L, x)->dims[1];
    if ((is_op(n, "MaxPool") || is_op(n, "AveragePool")) && n->n_outputs == 1 &&
        ((const nnf_conv_params *)n->params)->spatial == 2) {
        NNF_CHECK(use_blocked(L, id, 0));
        NNF_CHECK(move_output(L, id, c));
        retype(L, id, is_op(n, "MaxPool") ? "MaxPool" : "AveragePool", n->params);
    } else if ((is_op(n, "GlobalAveragePool") || is_op(n, "GlobalMaxPool")) && plain_4d_f32(L, y)) {
        nnf_nchwc_params *p = new_params(L);
        if (!p)
            return oom("pool attributes");
        p->channels = c;
        NNF_CHECK(use_blocked(L, id, 0));
        /* [N, C, 1, 1] blocked is [N, C8, 1, 1] plain: the padded channel
         * count makes the pool's output blocked where a reader can take it
         * so (a squeeze-and-excitation conv), saving a reorder */
        if (!no_blocked_readers(L, y)) {
            p->channels = nnf_nchwc_round(c);
            NNF_CHECK(move_output(L, id, c));
        }
        retype(L, id, is_op(n, "GlobalAveragePool") ? "GlobalAveragePool" : "GlobalMaxPool", p);
    } else if (is_op(n, "Resize") && const_nearest_hw_resize(L, n)) {
        NNF_CHECK(use_blocked(L, id, 0));
        NNF_CHECK(move_output(L, id, c));
        retype(L, id, "Resize", n->params);
    } else if ((is_op(n, "Add") || is_op(n, "Sub") || is_op(n, "Mul")) && n->n_inputs == 2 &&
               plain_4d_f32(L, n->inputs[0]) && plain_4d_f32(L, n->inputs[1]) &&
               !memcmp(shape_of(L, n->inputs[0])->dims, shape_of(L, n->inputs[1])->dims, 4 * sizeof(int64_t)) &&
               !memcmp(shape_of(L, x)->dims, shape_of(L, y)->dims, 4 * sizeof(int64_t))) {
        if (plain_is_cheaper(L, n))
            return NNF_OK;
        NNF_CHECK(use_blocked(L, id, 0));
        NNF_CHECK(use_blocked(L, id, 1));
        NNF_CHECK(move_output(L, id, c));
        L->count++;
    } else if ((is_op(n, "Add") || is_op(n, "Sub") || is_op(n, "Mul")) && n->n_inputs == 2 &&
               per_channel_operand(L, n) >= 0) {
        /* the vector reordered in is a few KiB; the NCHW op instead needs
         * the whole tensor reordered out and its result back in */
        NNF_CHECK(use_blocked(L, id, 0));
        NNF_CHECK(use_blocked(L, id, 1));
        NNF_CHECK(move_output(L, id, c));
        retype(L, id, n->op_type, n->params);
    } else if ((is_op(n, "Relu") || is_op(n, "LeakyRelu")) && n->n_inputs == 1) {
        NNF_CHECK(use_blocked(L, id, 0));
        NNF_CHECK(move_output(L, id, c));
        L->count++;
    } else if (is_op(n, "Concat")) {
        int64_t axis = nnf_attr_int(n, "axis", 0);
        if (axis != 1 && axis != -3)
            return NNF_OK;
        for (int k = 0; k < n->n_inputs; k++)
            if (!plain_4d_f32(L, n->inputs[k]) || shape_of(L, n->inputs[k])->dims[1] % 8)
                return NNF_OK;
        for (int k = 0; k < n->n_inputs; k++)
            NNF_CHECK(use_blocked(L, id, k));
        NNF_CHECK(move_output(L, id, shape_of(L, y)->dims[1]));
        L->count++;
    } else {
        return NNF_OK;
    }
    *done = true;
    return NNF_OK;
}

nnf_status nnf_pass_layout_nchwc(nnf_pass_ctx *ctx) {
    nnf_graph *g = ctx->graph;
    if (nnf_cpu_isa() < NNF_ISA_AVX2)
        return NNF_OK;
    /* earlier fusions rewired inputs: sort before walking producers first */
    NNF_CHECK(nnf_graph_toposort(g));
    layout L = {.g = g, .n0 = g->n_values};
    int n_order = g->n_order;
    int *order = nnf_malloc(sizeof(int) * (size_t)(n_order ? n_order : 1));
    L.twin = nnf_malloc(sizeof(int) * (size_t)(L.n0 ? L.n0 : 1));
    L.moved = nnf_calloc((size_t)L.n0 + 1, sizeof(bool));
    nnf_status st = NNF_OK;
    if (!order || !L.twin || !L.moved) {
        st = oom("its tables");
        goto done;
    }
    if ((st = index_readers(&L)) != NNF_OK)
        goto done;
    memcpy(order, g->order, sizeof(int) * (size_t)n_order);
    for (int v = 0; v < L.n0; v++)
        L.twin[v] = -1;
    for (int oi = 0; oi < n_order && st == NNF_OK; oi++) {
        int id = order[oi];
        if (g->nodes[id].dead || !g->nodes[id].op)
            continue;
        bool done = false;
        st = is_op(&g->nodes[id], "Conv") ? try_conv(&L, id, &done) : try_other(&L, id, &done);
        for (int k = 0; st == NNF_OK && !done && k < g->nodes[id].n_inputs; k++)
            st = plain_input(&L, g->nodes[id].inputs[k]);
    }
    for (int k = 0; st == NNF_OK && k < g->n_outputs; k++)
        st = plain_input(&L, g->outputs[k]);
    ctx->fusions += L.count;
done:
    nnf_free(order);
    nnf_free(L.twin);
    nnf_free(L.moved);
    nnf_free(L.rd_start);
    nnf_free(L.rd);
    return st;
}

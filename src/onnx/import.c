/* ONNX ModelProto / GraphProto / NodeProto / ValueInfoProto
 * → IR.
 *
 * Each message is walked more than once: a first pass finds names (for
 * messages), counts repeated fields (to size arrays once) and checks wire
 * types; later passes decode. Protobuf allows fields in any order, and
 * real writers put ModelProto.graph (7) before opset_import (8) and
 * GraphProto.node (1) before initializer (5), so single-pass decoding would
 * see nodes before the values and opsets they refer to. Attributes are in
 * attr.c, tensors in tensor.c. */
#include "onnx/import.h"

#include "base/log.h"
#include "onnx/internal.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

enum { /* ModelProto */
       M_IR_VERSION = 1,
       M_PRODUCER_NAME = 2,
       M_GRAPH = 7,
       M_OPSET_IMPORT = 8,
};
enum { /* GraphProto */
       G_NODE = 1,
       G_NAME = 2,
       G_INITIALIZER = 5,
       G_INPUT = 11,
       G_OUTPUT = 12,
       G_VALUE_INFO = 13,
       G_SPARSE_INITIALIZER = 15,
};
enum { /* NodeProto */
       N_INPUT = 1,
       N_OUTPUT = 2,
       N_NAME = 3,
       N_OP_TYPE = 4,
       N_ATTRIBUTE = 5,
       N_DOMAIN = 7,
};

/* Message nesting the importer accepts: model → graph → node → attribute →
 * graph ... Each subgraph level costs three. */
#define MAX_DEPTH NNF_PB_MAX_DEPTH

/* ---- ValueInfoProto / TypeProto ------------------------------------------------------------ */

typedef struct value_type {
    bool has_type;
    int64_t elem; /* TensorProto.DataType as written; 0 when not a tensor */
    nnf_shape shape;
} value_type;

static nnf_status decode_dim(nnf_onnx_ctx *cx, nnf_arena *a, const nnf_pb_field *span, int64_t *dim,
                             const char **dim_name) {
    NNF_CHECK(nnf_pb_expect(span, NNF_PB_LEN, "shape.dim"));
    nnf_pb r = nnf_onnx_msg(cx, span);
    nnf_pb_field f;
    bool more;
    *dim = -1;
    *dim_name = NULL;
    for (;;) {
        NNF_CHECK(nnf_pb_next(&r, &f, &more));
        if (!more)
            break;
        if (f.number == 1) {
            int64_t v;
            NNF_CHECK(nnf_pb_int64(&f, "dim_value", &v));
            /* A negative extent is how some exporters spell "unknown". */
            *dim = v >= 0 ? v : -1;
            *dim_name = NULL;
        } else if (f.number == 2) {
            NNF_CHECK(nnf_onnx_string(a, &f, "dim_param", 0, dim_name));
            *dim = -1;
            if (!(*dim_name)[0])
                *dim_name = NULL;
        }
    }
    return NNF_OK;
}

static nnf_status decode_shape(nnf_onnx_ctx *cx, nnf_arena *a, const nnf_pb_field *span,
                               nnf_shape *s) {
    NNF_CHECK(nnf_pb_expect(span, NNF_PB_LEN, "shape"));
    nnf_pb r = nnf_onnx_msg(cx, span);
    nnf_pb_field f;
    bool more;
    int rank = 0;
    for (;;) {
        NNF_CHECK(nnf_pb_next(&r, &f, &more));
        if (!more)
            break;
        if (f.number != 1)
            continue;
        if (rank == NNF_MAX_RANK) {
            /* Count the rest for the message. */
            size_t total = (size_t)rank + 1;
            for (;;) {
                NNF_CHECK(nnf_pb_next(&r, &f, &more));
                if (!more)
                    break;
                total += f.number == 1;
            }
            return nnf_error(NNF_ERR_UNSUPPORTED, "shape has %zu dims; nnfuse supports at most %d",
                             total, NNF_MAX_RANK);
        }
        NNF_CHECK(decode_dim(cx, a, &f, &s->dims[rank], &s->dim_names[rank]));
        rank++;
    }
    s->rank = rank;
    return NNF_OK;
}

static nnf_status decode_tensor_type(nnf_onnx_ctx *cx, nnf_arena *a, const nnf_pb_field *span,
                                     value_type *vt) {
    NNF_CHECK(nnf_pb_expect(span, NNF_PB_LEN, "tensor_type"));
    nnf_pb r = nnf_onnx_msg(cx, span);
    nnf_pb_field f;
    bool more;
    for (;;) {
        NNF_CHECK(nnf_pb_next(&r, &f, &more));
        if (!more)
            break;
        if (f.number == 1) {
            int32_t t;
            NNF_CHECK(nnf_pb_int32(&f, "elem_type", &t));
            vt->elem = t;
        } else if (f.number == 2) {
            memset(&vt->shape, 0, sizeof vt->shape);
            NNF_CHECK(decode_shape(cx, a, &f, &vt->shape));
        }
    }
    return NNF_OK;
}

/* Only tensor types carry a dtype and shape; sequence, map, optional and
 * sparse types leave the value UNDEFINED with unknown rank. */
static nnf_status decode_type(nnf_onnx_ctx *cx, nnf_arena *a, const nnf_pb_field *span,
                              value_type *vt) {
    NNF_CHECK(nnf_pb_expect(span, NNF_PB_LEN, "type"));
    nnf_pb r = nnf_onnx_msg(cx, span);
    nnf_pb_field f;
    bool more;
    vt->has_type = true;
    for (;;) {
        NNF_CHECK(nnf_pb_next(&r, &f, &more));
        if (!more)
            break;
        if (f.number == 1)
            NNF_CHECK(decode_tensor_type(cx, a, &f, vt));
    }
    return NNF_OK;
}

/* Decode a ValueInfoProto: its name and (when present) tensor type. */
static nnf_status decode_value_info(nnf_onnx_ctx *cx, nnf_graph *g, const nnf_pb_field *span,
                                    const char *what, const char **name, value_type *vt) {
    memset(vt, 0, sizeof *vt);
    vt->shape.rank = -1;
    *name = NULL;
    nnf_status st = nnf_pb_expect(span, NNF_PB_LEN, what);
    if (st != NNF_OK)
        return st;
    /* Name first, so that errors in the type can say whose type it is. */
    nnf_pb r = nnf_onnx_msg(cx, span);
    nnf_pb_field f;
    bool more;
    for (;;) {
        if ((st = nnf_pb_next(&r, &f, &more)) != NNF_OK)
            goto fail;
        if (!more)
            break;
        if (f.number == 1 && (st = nnf_onnx_string(&g->arena, &f, "name", 0, name)) != NNF_OK)
            goto fail;
    }
    if (!*name || !(*name)[0]) {
        st = NNF_CORRUPT("has no name");
        goto fail;
    }
    r = nnf_onnx_msg(cx, span);
    for (;;) {
        if ((st = nnf_pb_next(&r, &f, &more)) != NNF_OK)
            goto fail;
        if (!more)
            break;
        if (f.number == 2 && (st = decode_type(cx, &g->arena, &f, vt)) != NNF_OK)
            goto fail;
    }
    return NNF_OK;
fail:
    if (*name && (*name)[0])
        return nnf_error_prefix(st, "%s '" NNF_ONNX_NAME_FMT "'", what, *name);
    return nnf_error_prefix(st, "%s at offset %zu", what, span->offset);
}

/* A declared element type nnfuse cannot represent (complex, float8, int4...). */
static bool exotic_type(const value_type *vt) {
    return vt->has_type && vt->elem != 0 && !nnf_onnx_dtype_known(vt->elem) &&
           vt->elem != NNF_DTYPE_STRING;
}

static nnf_status reject_exotic(const nnf_graph *g, int id, const value_type *vt,
                                const char *what) {
    if (!exotic_type(vt))
        return NNF_OK;
    return nnf_error(NNF_ERR_UNSUPPORTED,
                     "%s '" NNF_ONNX_NAME_FMT "' has element type %" PRId64
                     ", which nnfuse does not support",
                     what, g->values[id].name, vt->elem);
}

/* Give value id the declared dtype and shape. Exotic types are left
 * UNDEFINED: they matter only where the caller feeds or reads the value, and
 * those places (graph inputs/outputs) reject them first. */
static void apply_type(nnf_graph *g, int id, const value_type *vt) {
    if (!vt->has_type || vt->elem == 0 || exotic_type(vt))
        return;
    nnf_value *v = &g->values[id];
    v->dtype = (nnf_dtype)vt->elem;
    v->shape = vt->shape;
}

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* "" and "ai.onnx" both name the default domain. */
static const char *norm_domain(const char *d) {
    return d && strcmp(d, "ai.onnx") ? d : "";
}

static nnf_status index_opsets(nnf_onnx_ctx *cx, const nnf_graph *g) {
    size_t cap = 16;
    while (cap < 2 * (size_t)g->n_opsets + 2)
        cap *= 2;
    cx->opset_keys = nnf_calloc(cap, sizeof *cx->opset_keys);
    cx->opset_vals = nnf_calloc(cap, sizeof *cx->opset_vals);
    if (!cx->opset_keys || !cx->opset_vals)
        return nnf_onnx_oom("opset_import");
    cx->opset_cap = cap;
    for (int i = 0; i < g->n_opsets; i++) {
        const char *d = norm_domain(g->opsets[i].domain);
        size_t h = hash_name(d) & (cap - 1);
        while (cx->opset_keys[h] && strcmp(cx->opset_keys[h], d))
            h = (h + 1) & (cap - 1);
        if (!cx->opset_keys[h]) { /* the first import of a domain wins, as in nnf_graph_opset */
            cx->opset_keys[h] = d;
            cx->opset_vals[h] = g->opsets[i].version;
        }
    }
    return NNF_OK;
}

static int64_t lookup_opset(const nnf_onnx_ctx *cx, const char *domain) {
    if (!cx->opset_cap)
        return 0;
    const char *d = norm_domain(domain);
    size_t h = hash_name(d) & (cx->opset_cap - 1);
    while (cx->opset_keys[h]) {
        if (!strcmp(cx->opset_keys[h], d))
            return cx->opset_vals[h];
        h = (h + 1) & (cx->opset_cap - 1);
    }
    return 0;
}

/* ---- NodeProto ------------------------------------------------------------------------------ */

typedef struct node_scan {
    const char *name, *op_type, *domain;
    size_t n_inputs, n_outputs, n_attrs;
} node_scan;

static nnf_status scan_node(nnf_onnx_ctx *cx, nnf_arena *a, const nnf_pb_field *span,
                            node_scan *ns) {
    nnf_pb r = nnf_onnx_msg(cx, span);
    nnf_pb_field f;
    bool more;
    for (;;) {
        NNF_CHECK(nnf_pb_next(&r, &f, &more));
        if (!more)
            break;
        switch (f.number) {
        case N_INPUT:
            NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "input"));
            ns->n_inputs++;
            break;
        case N_OUTPUT:
            NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "output"));
            ns->n_outputs++;
            break;
        case N_ATTRIBUTE:
            NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "attribute"));
            ns->n_attrs++;
            break;
        case N_NAME: NNF_CHECK(nnf_onnx_string(a, &f, "name", 0, &ns->name)); break;
        case N_OP_TYPE: NNF_CHECK(nnf_onnx_string(a, &f, "op_type", 0, &ns->op_type)); break;
        case N_DOMAIN: NNF_CHECK(nnf_onnx_string(a, &f, "domain", 0, &ns->domain)); break;
        default: break;
        }
    }
    if (ns->n_inputs > INT_MAX || ns->n_outputs > INT_MAX || ns->n_attrs > INT_MAX)
        return NNF_CORRUPT("has too many inputs, outputs or attributes");
    return NNF_OK;
}

/* Resolve the node's input/output names to value ids ("" = omitted optional). */
static nnf_status node_value_ids(nnf_onnx_ctx *cx, nnf_graph *g, const nnf_pb_field *span, int *ins,
                                 int *outs) {
    nnf_pb r = nnf_onnx_msg(cx, span);
    nnf_pb_field f;
    bool more;
    int ni = 0, no = 0;
    for (;;) {
        NNF_CHECK(nnf_pb_next(&r, &f, &more));
        if (!more)
            break;
        if (f.number != N_INPUT && f.number != N_OUTPUT)
            continue;
        const char *name;
        NNF_CHECK(
            nnf_onnx_string(&g->arena, &f, f.number == N_INPUT ? "input" : "output", 0, &name));
        int id = NNF_NO_VALUE;
        if (name[0] && (id = nnf_graph_value(g, name)) < 0)
            return nnf_onnx_oom("a node");
        if (f.number == N_INPUT)
            ins[ni++] = id;
        else
            outs[no++] = id;
    }
    return NNF_OK;
}

static nnf_status import_node(nnf_onnx_ctx *cx, nnf_graph *g, const nnf_pb_field *span, int index,
                              int depth) {
    node_scan ns;
    memset(&ns, 0, sizeof ns);
    int *ins = NULL, *outs = NULL;
    nnf_status st = nnf_pb_expect(span, NNF_PB_LEN, "node");
    if (st == NNF_OK)
        st = scan_node(cx, &g->arena, span, &ns);
    if (st != NNF_OK)
        goto fail;
    if (!ns.op_type || !ns.op_type[0]) {
        st = NNF_CORRUPT("has no op_type");
        goto fail;
    }
    const char *domain = norm_domain(ns.domain);
    ins = nnf_malloc(sizeof(int) * (ns.n_inputs ? ns.n_inputs : 1));
    outs = nnf_malloc(sizeof(int) * (ns.n_outputs ? ns.n_outputs : 1));
    if (!ins || !outs) {
        st = nnf_onnx_oom("a node");
        goto fail;
    }
    if ((st = node_value_ids(cx, g, span, ins, outs)) != NNF_OK)
        goto fail;
    int id = nnf_graph_add_node(g, ns.name, ns.op_type, domain, ins, (int)ns.n_inputs, outs,
                                (int)ns.n_outputs);
    if (id < 0) {
        st = nnf_onnx_oom("a node");
        goto fail;
    }
    for (size_t k = 0; k < ns.n_outputs; k++) {
        if (outs[k] < 0)
            continue;
        nnf_value *v = &g->values[outs[k]];
        if (v->producer >= 0) {
            st = NNF_CORRUPT("output '" NNF_ONNX_NAME_FMT
                             "' is already produced by node '" NNF_ONNX_NAME_FMT "'",
                             v->name, g->nodes[v->producer].name);
            goto fail;
        }
        if (v->kind == NNF_VALUE_INPUT || v->kind == NNF_VALUE_INITIALIZER) {
            st = NNF_CORRUPT("output '" NNF_ONNX_NAME_FMT "' overwrites a graph %s", v->name,
                             v->kind == NNF_VALUE_INPUT ? "input" : "initializer");
            goto fail;
        }
        v->producer = id;
    }
    nnf_node *n = &g->nodes[id];
    n->opset = (int)lookup_opset(cx, domain);
    if (ns.n_attrs && !(n->attrs = nnf_arena_calloc(&g->arena, ns.n_attrs, sizeof(nnf_attr)))) {
        st = nnf_onnx_oom("a node");
        goto fail;
    }
    nnf_pb r = nnf_onnx_msg(cx, span);
    nnf_pb_field f;
    bool more;
    int k = 0;
    for (;;) {
        if ((st = nnf_pb_next(&r, &f, &more)) != NNF_OK)
            goto fail;
        if (!more)
            break;
        if (f.number == N_ATTRIBUTE &&
            (st = nnf_onnx_attr(cx, g, id, &f, k++, depth + 1)) != NNF_OK)
            goto fail;
    }
    if ((st = nnf_onnx_check_attr_names(&g->nodes[id])) != NNF_OK)
        goto fail;
    nnf_free(ins);
    nnf_free(outs);
    return NNF_OK;
fail:
    nnf_free(ins);
    nnf_free(outs);
    if (ns.name && ns.name[0])
        return nnf_error_prefix(st, "node '" NNF_ONNX_NAME_FMT "' (%.64s)", ns.name,
                                ns.op_type ? ns.op_type : "?");
    return nnf_error_prefix(st, "node #%d (%.64s)", index, ns.op_type ? ns.op_type : "?");
}

/* ---- GraphProto ----------------------------------------------------------------------------- */

typedef struct graph_scan {
    size_t n_nodes, n_inits, n_inputs, n_outputs;
} graph_scan;

static nnf_status scan_graph(nnf_onnx_ctx *cx, nnf_graph *g, const nnf_pb_field *span,
                             graph_scan *gs) {
    nnf_pb r = nnf_onnx_msg(cx, span);
    nnf_pb_field f;
    bool more;
    for (;;) {
        NNF_CHECK(nnf_pb_next(&r, &f, &more));
        if (!more)
            break;
        switch (f.number) {
        case G_NODE:
            NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "node"));
            gs->n_nodes++;
            break;
        case G_NAME: NNF_CHECK(nnf_onnx_string(&g->arena, &f, "graph name", 0, &g->name)); break;
        case G_INITIALIZER:
            NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "initializer"));
            gs->n_inits++;
            break;
        case G_INPUT:
            NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "input"));
            gs->n_inputs++;
            break;
        case G_OUTPUT:
            NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "output"));
            gs->n_outputs++;
            break;
        case G_VALUE_INFO: NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "value_info")); break;
        case G_SPARSE_INITIALIZER:
            return nnf_error(NNF_ERR_UNSUPPORTED,
                             "sparse_initializer (at offset %zu) is not supported", f.offset);
        default: break;
        }
    }
    if (gs->n_nodes > INT_MAX || gs->n_inputs > INT_MAX || gs->n_outputs > INT_MAX)
        return NNF_CORRUPT("graph has too many nodes, inputs or outputs");
    return NNF_OK;
}

static nnf_status graph_initializer(nnf_onnx_ctx *cx, nnf_graph *g, const nnf_pb_field *f) {
    nnf_const_tensor t;
    const char *name = NULL;
    cx->initializers = true;
    nnf_status st = nnf_onnx_tensor(cx, &g->arena, f, "initializer", &name, &t);
    cx->initializers = false;
    NNF_CHECK(st);
    if (!name || !name[0])
        return NNF_CORRUPT("initializer at offset %zu has no name", f->offset);
    if (nnf_graph_find_value(g, name) >= 0)
        return NNF_CORRUPT("initializer '" NNF_ONNX_NAME_FMT "' is defined twice", name);
    int id = nnf_graph_value(g, name);
    if (id < 0)
        return nnf_onnx_oom("an initializer");
    nnf_value *v = &g->values[id];
    v->kind = NNF_VALUE_INITIALIZER;
    v->dtype = t.dtype;
    v->shape = t.shape;
    v->data = t.data;
    v->nbytes = t.nbytes;
    v->misaligned = t.misaligned;
    return NNF_OK;
}

/* A misaligned initialiser stays in the file only if every reader copies it
 * byte-wise (nnf_node_reads_bytewise: the data input of Gather) or is a
 * Conv's weights or a GEMM's B (nnf_graph_typed_reads), in a graph without
 * subgraphs (which could read it by name) and not a graph output; the others
 * get their aligned copy now, before anything reads them typed. A conv's
 * weights are read once by the BatchNormalization fold, byte-wise, into the
 * folded copy: copying them here first was a pass more over every weight
 * (ResNet-50: 100 MB read and written). The passes align those the fold
 * leaves before any other pass reads them (nnf_graph_align_values). A GEMM's
 * B is read first by its plan, which packs it from the file: BERT-base's 239
 * MB of misaligned weights were copied here only to be packed from the copy
 * (its load 264-278 -> 204-214 ms on 1 thread). */
/* The weights a compiled file holds packed (cx->packed_away): float
 * initialisers of rank 2 or more that only the operators whose plans pack
 * weights read (so no pass or inference reads them typed). Other names are
 * ignored: the file is not trusted to say which values nothing reads. */
static nnf_status mark_packed_away(nnf_onnx_ctx *cx, nnf_graph *g) {
    static const char *const packers[] = {"Conv", "ConvTranspose", "Gemm", "MatMul"};
    bool *seen = cx->packed_away_bytes ? nnf_calloc((size_t)g->n_values + 1, 1) : NULL;
    if (cx->packed_away_bytes && !seen)
        return nnf_onnx_oom("the compiled file's names");
    for (size_t i = 0; i < cx->packed_away_bytes;) {
        const char *name = cx->packed_away + i;
        size_t len = strnlen(name, cx->packed_away_bytes - i);
        i += len + 1;
        int v = nnf_graph_find_value(g, name);
        if (v < 0 || seen[v])
            continue;
        seen[v] = true;
        if (g->values[v].kind != NNF_VALUE_INITIALIZER || g->values[v].dtype != NNF_DTYPE_FLOAT32 ||
            g->values[v].shape.rank < 2)
            continue;
        bool ok = true;
        for (int n = 0; n < g->n_nodes && ok; n++) {
            const nnf_node *node = &g->nodes[n];
            bool packer = false;
            for (size_t p = 0; p < sizeof packers / sizeof *packers; p++)
                packer |= !node->domain[0] && !strcmp(node->op_type, packers[p]);
            for (int k = 0; k < node->n_inputs && ok; k++)
                ok = node->inputs[k] != v || packer;
        }
        for (int k = 0; k < g->n_outputs && ok; k++)
            ok = g->outputs[k] != v;
        g->values[v].packed_away = ok;
    }
    nnf_free(seen);
    return NNF_OK;
}

static nnf_status align_initializers(nnf_onnx_ctx *cx, nnf_graph *g) {
    bool any = false;
    for (int v = 0; v < g->n_values && !any; v++)
        any = g->values[v].misaligned;
    if (!any)
        return NNF_OK;
    bool subgraphs = false;
    for (int i = 0; i < g->n_nodes && !subgraphs; i++)
        for (int a = 0; a < g->nodes[i].n_attrs; a++)
            subgraphs |= g->nodes[i].attrs[a].type == NNF_ATTR_GRAPH ||
                         g->nodes[i].attrs[a].type == NNF_ATTR_GRAPHS;
    /* a GEMM's B stays only in a mapping of ours: packed from a caller's
     * buffer, it could not be released, and would be copied after the plans */
    bool *typed = nnf_graph_typed_reads(g, NNF_PENDING_FOLD | NNF_PENDING_PLAN, NULL);
    bool *typed_now = nnf_graph_typed_reads(g, NNF_PENDING_FOLD, NULL);
    if (!typed || !typed_now) {
        nnf_free(typed);
        nnf_free(typed_now);
        return nnf_onnx_oom("initialiser alignment");
    }
    nnf_status st = NNF_OK;
    for (int v = 0; v < g->n_values && st == NNF_OK; v++) {
        nnf_value *val = &g->values[v];
        if (!val->misaligned ||
            !(subgraphs || typed[v] ||
              (typed_now[v] && !nnf_onnx_in_own_mapping(cx, val->data, val->nbytes))))
            continue;
        NNF_LOG_TRACE("initializer '" NNF_ONNX_NAME_FMT "' copied aligned (%zu bytes)", val->name,
                      val->nbytes);
        st = nnf_onnx_copy_aligned(cx, &g->arena, &val->data, val->nbytes);
        if (st == NNF_OK)
            val->misaligned = false;
        else
            nnf_error_prefix(st, "initializer '" NNF_ONNX_NAME_FMT "'", val->name);
    }
    nnf_free(typed);
    nnf_free(typed_now);
    return st;
}

static nnf_status graph_input(nnf_onnx_ctx *cx, nnf_graph *g, const nnf_pb_field *f) {
    const char *name;
    value_type vt;
    NNF_CHECK(decode_value_info(cx, g, f, "input", &name, &vt));
    int id = nnf_graph_find_value(g, name);
    if (id >= 0) {
        /* ONNX lets an initialiser also be an input (an overridable default);
         * nnfuse treats it as the constant it names. */
        if (g->values[id].kind == NNF_VALUE_INITIALIZER)
            return NNF_OK;
        return NNF_CORRUPT("input '" NNF_ONNX_NAME_FMT "' is listed twice", name);
    }
    if ((id = nnf_graph_value(g, name)) < 0)
        return nnf_onnx_oom("an input");
    NNF_CHECK(reject_exotic(g, id, &vt, "input"));
    g->values[id].kind = NNF_VALUE_INPUT;
    apply_type(g, id, &vt);
    g->inputs[g->n_inputs++] = id;
    return NNF_OK;
}

static nnf_status graph_value_info(nnf_onnx_ctx *cx, nnf_graph *g, const nnf_pb_field *f) {
    const char *name;
    value_type vt;
    NNF_CHECK(decode_value_info(cx, g, f, "value_info", &name, &vt));
    int id = nnf_graph_value(g, name);
    if (id < 0)
        return nnf_onnx_oom("value_info");
    /* Inputs and initialisers already carry their own types. */
    if (g->values[id].kind != NNF_VALUE_INTERMEDIATE)
        return NNF_OK;
    apply_type(g, id, &vt);
    return NNF_OK;
}

static nnf_status graph_output(nnf_onnx_ctx *cx, nnf_graph *g, const nnf_pb_field *f) {
    const char *name;
    value_type vt;
    NNF_CHECK(decode_value_info(cx, g, f, "output", &name, &vt));
    int id = nnf_graph_value(g, name);
    if (id < 0)
        return nnf_onnx_oom("an output");
    NNF_CHECK(reject_exotic(g, id, &vt, "output"));
    nnf_value *v = &g->values[id];
    v->is_output = true;
    /* value_info may have said more already; a declaration never overrides. */
    if (v->kind == NNF_VALUE_INTERMEDIATE && v->dtype == NNF_DTYPE_UNDEFINED && v->shape.rank < 0)
        apply_type(g, id, &vt);
    g->outputs[g->n_outputs++] = id;
    return NNF_OK;
}

nnf_status nnf_onnx_graph(nnf_onnx_ctx *cx, nnf_graph *g, const nnf_pb_field *span, int depth) {
    if (depth > MAX_DEPTH)
        return NNF_CORRUPT("subgraphs nested deeper than %d messages (at offset %zu)", MAX_DEPTH,
                           span->offset);
    NNF_CHECK(nnf_pb_expect(span, NNF_PB_LEN, "graph"));
    graph_scan gs;
    memset(&gs, 0, sizeof gs);
    NNF_CHECK(scan_graph(cx, g, span, &gs));
    g->inputs = nnf_malloc(sizeof(int) * (gs.n_inputs ? gs.n_inputs : 1));
    g->outputs = nnf_malloc(sizeof(int) * (gs.n_outputs ? gs.n_outputs : 1));
    if (!g->inputs || !g->outputs)
        return nnf_onnx_oom("a graph");
    /* Definitions before uses: initialisers, inputs, declared types, nodes,
     * then the outputs that name node results. */
    static const int order[] = {G_INITIALIZER, G_INPUT, G_VALUE_INFO, G_NODE, G_OUTPUT};
    int node_index = 0;
    for (size_t pass = 0; pass < sizeof order / sizeof order[0]; pass++) {
        nnf_pb r = nnf_onnx_msg(cx, span);
        nnf_pb_field f;
        bool more;
        for (;;) {
            NNF_CHECK(nnf_pb_next(&r, &f, &more));
            if (!more)
                break;
            if ((int)f.number != order[pass])
                continue;
            switch (f.number) {
            case G_INITIALIZER: NNF_CHECK(graph_initializer(cx, g, &f)); break;
            case G_INPUT: NNF_CHECK(graph_input(cx, g, &f)); break;
            case G_VALUE_INFO: NNF_CHECK(graph_value_info(cx, g, &f)); break;
            case G_NODE: NNF_CHECK(import_node(cx, g, &f, node_index++, depth + 1)); break;
            case G_OUTPUT: NNF_CHECK(graph_output(cx, g, &f)); break;
            default: break;
            }
        }
    }
    if (g == cx->root)
        NNF_CHECK(mark_packed_away(cx, g));
    return align_initializers(cx, g);
}

/* ---- ModelProto ----------------------------------------------------------------------------- */

static nnf_status decode_opset(nnf_onnx_ctx *cx, nnf_graph *g, const nnf_pb_field *span,
                               nnf_opset_import *op) {
    NNF_CHECK(nnf_pb_expect(span, NNF_PB_LEN, "opset_import"));
    nnf_pb r = nnf_onnx_msg(cx, span);
    nnf_pb_field f;
    bool more;
    op->domain = "";
    op->version = 0;
    for (;;) {
        NNF_CHECK(nnf_pb_next(&r, &f, &more));
        if (!more)
            break;
        if (f.number == 1)
            NNF_CHECK(nnf_onnx_string(&g->arena, &f, "opset_import domain", 0, &op->domain));
        else if (f.number == 2)
            NNF_CHECK(nnf_pb_int64(&f, "opset_import version", &op->version));
    }
    if (op->version < 0 || op->version > INT_MAX)
        return NNF_CORRUPT("opset_import for domain '%.64s' has version %" PRId64, op->domain,
                           op->version);
    return NNF_OK;
}

static nnf_status import_model(nnf_onnx_ctx *cx, nnf_graph *g) {
    nnf_pb r;
    nnf_pb_init(&r, cx->base, cx->size);
    nnf_pb_field f, graph = {0};
    bool more, has_graph = false;
    size_t n_opsets = 0;
    for (;;) {
        NNF_CHECK(nnf_pb_next(&r, &f, &more));
        if (!more)
            break;
        switch (f.number) {
        case M_IR_VERSION: NNF_CHECK(nnf_pb_int64(&f, "ir_version", &g->ir_version)); break;
        case M_PRODUCER_NAME:
            NNF_CHECK(nnf_onnx_string(&g->arena, &f, "producer_name", 0, &g->producer_name));
            break;
        case M_GRAPH:
            NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "graph"));
            if (has_graph)
                return NNF_CORRUPT("model has more than one graph (second at offset %zu)",
                                   f.offset);
            graph = f;
            has_graph = true;
            break;
        case M_OPSET_IMPORT:
            NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "opset_import"));
            n_opsets++;
            break;
        default: break;
        }
    }
    if (!has_graph)
        return NNF_CORRUPT("no graph in the model (is this an ONNX file?)");
    if (n_opsets > INT_MAX)
        return NNF_CORRUPT("too many opset_import entries");
    if (n_opsets) {
        g->opsets = nnf_arena_calloc(&g->arena, n_opsets, sizeof *g->opsets);
        if (!g->opsets)
            return nnf_onnx_oom("opset_import");
        nnf_pb_init(&r, cx->base, cx->size);
        for (;;) {
            NNF_CHECK(nnf_pb_next(&r, &f, &more));
            if (!more)
                break;
            if (f.number == M_OPSET_IMPORT)
                NNF_CHECK(decode_opset(cx, g, &f, &g->opsets[g->n_opsets++]));
        }
    }
    NNF_CHECK(index_opsets(cx, g));
    return nnf_onnx_graph(cx, g, &graph, 1);
}

static nnf_status import_buffer(const void *data, size_t size, bool is_mapping, const char *source,
                                const char *base_dir, const char *packed_away,
                                size_t packed_away_bytes, nnf_graph **graph_out) {
    if (!graph_out)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "nnf_onnx_import: graph_out is NULL");
    *graph_out = NULL;
    if (!source)
        source = "<memory>";
    if (!data && size)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: data is NULL", source);
    nnf_graph *g = NULL;
    nnf_status st = nnf_graph_create(&g);
    if (st != NNF_OK)
        goto fail;
    if (!(g->source = nnf_arena_strdup(&g->arena, source))) {
        st = nnf_onnx_oom("the model");
        goto fail;
    }
    static const uint8_t empty[1];
    nnf_onnx_ctx cx = {.base = data ? data : empty,
                       .size = size,
                       .base_dir = base_dir,
                       .root = g,
                       .base_is_mapping = is_mapping && data,
                       .packed_away = packed_away,
                       .packed_away_bytes = packed_away_bytes};
    st = import_model(&cx, g);
    nnf_free(cx.opset_keys);
    nnf_free(cx.opset_vals);
    if (st != NNF_OK)
        goto fail;
    *graph_out = g;
    return NNF_OK;
fail:
    nnf_graph_destroy(g);
    return nnf_error_prefix(st, "%s", source);
}

nnf_status nnf_onnx_import(const void *data, size_t size, const char *source, const char *base_dir,
                           nnf_graph **graph_out) {
    return import_buffer(data, size, false, source, base_dir, NULL, 0, graph_out);
}

nnf_status nnf_onnx_import_mapping(const void *data, size_t size, const char *source,
                                   const char *base_dir, const char *packed_away,
                                   size_t packed_away_bytes, nnf_graph **graph_out) {
    return import_buffer(data, size, true, source, base_dir, packed_away, packed_away_bytes,
                         graph_out);
}

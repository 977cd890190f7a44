/* AttributeProto → nnf_attr, including subgraph-valued attributes. */
#include "onnx/internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

enum { /* AttributeProto */
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
       A_TP = 14,
       A_TYPE_PROTOS = 15,
       A_TYPE = 20,
       A_REF_ATTR_NAME = 21,
       A_SPARSE_TENSOR = 22,
       A_SPARSE_TENSORS = 23,
};

typedef struct attr_scan {
    const char *name;
    int32_t type;
    bool has_type;
    size_t n[24]; /* occurrences (or elements, for packed scalars) by field number */
} attr_scan;

static nnf_status scan_attr(nnf_onnx_ctx *cx, nnf_arena *a, const nnf_pb_field *span,
                            attr_scan *as) {
    nnf_pb r = nnf_onnx_msg(cx, span);
    nnf_pb_field f;
    bool more;
    for (;;) {
        NNF_CHECK(nnf_pb_next(&r, &f, &more));
        if (!more)
            break;
        switch (f.number) {
        case A_NAME: NNF_CHECK(nnf_onnx_string(a, &f, "name", 0, &as->name)); break;
        case A_TYPE:
            NNF_CHECK(nnf_pb_int32(&f, "type", &as->type));
            as->has_type = true;
            break;
        case A_F: NNF_CHECK(nnf_pb_expect(&f, NNF_PB_FIXED32, "f")); break;
        case A_I: NNF_CHECK(nnf_pb_expect(&f, NNF_PB_VARINT, "i")); break;
        case A_S: NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "s")); break;
        case A_T: NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "t")); break;
        case A_G: NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "g")); break;
        case A_STRINGS: NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "strings")); break;
        case A_TENSORS: NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "tensors")); break;
        case A_GRAPHS: NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "graphs")); break;
        case A_FLOATS:
            NNF_CHECK(nnf_pb_repeated_count(&f, NNF_PB_SCALAR_FIXED32, "floats", &as->n[A_FLOATS]));
            continue; /* counted as elements, not occurrences */
        case A_INTS:
            NNF_CHECK(nnf_pb_repeated_count(&f, NNF_PB_SCALAR_VARINT, "ints", &as->n[A_INTS]));
            continue;
        default: break;
        }
        if (f.number < sizeof as->n / sizeof as->n[0])
            as->n[f.number]++;
    }
    return NNF_OK;
}

/* ONNX writers before IR v2 left AttributeProto.type unset; the value field
 * that is present says the type then. Exactly one must be. */
static nnf_status infer_attr_type(const attr_scan *as, int32_t *type) {
    static const struct {
        int field;
        int32_t type;
    } map[] = {{A_F, NNF_ATTR_FLOAT},
               {A_I, NNF_ATTR_INT},
               {A_S, NNF_ATTR_STRING},
               {A_T, NNF_ATTR_TENSOR},
               {A_G, NNF_ATTR_GRAPH},
               {A_FLOATS, NNF_ATTR_FLOATS},
               {A_INTS, NNF_ATTR_INTS},
               {A_STRINGS, NNF_ATTR_STRINGS},
               {A_TENSORS, NNF_ATTR_TENSORS},
               {A_GRAPHS, NNF_ATTR_GRAPHS},
               {A_SPARSE_TENSOR, 11},
               {A_SPARSE_TENSORS, 12},
               {A_TP, 13},
               {A_TYPE_PROTOS, 14}};
    int found = 0;
    for (size_t k = 0; k < sizeof map / sizeof map[0]; k++)
        if (as->n[map[k].field]) {
            *type = map[k].type;
            found++;
        }
    if (found == 0)
        return NNF_CORRUPT("has neither a type nor a value");
    if (found > 1)
        return NNF_CORRUPT("has no type and values of %d different kinds", found);
    return NNF_OK;
}

static nnf_status import_subgraph(nnf_onnx_ctx *cx, nnf_graph *g, const nnf_pb_field *f, int depth,
                                  nnf_graph **out) {
    nnf_graph *sg = NULL;
    nnf_status st = nnf_graph_create(&sg);
    if (st != NNF_OK)
        return st;
    sg->parent = g;
    sg->source = nnf_arena_strdup(&sg->arena, g->source);
    if (!sg->source) {
        st = nnf_onnx_oom("a subgraph");
        goto fail;
    }
    if ((st = nnf_onnx_graph(cx, sg, f, depth)) != NNF_OK)
        goto fail;
    *out = sg;
    return NNF_OK;
fail:
    nnf_graph_destroy(sg);
    return st;
}

/* Decode the value of an attribute whose type is known into at. Subgraphs are
 * owned by at once it is appended to the node; until then by this function. */
static nnf_status decode_attr_value(nnf_onnx_ctx *cx, nnf_graph *g, const nnf_pb_field *span,
                                    const attr_scan *as, nnf_attr *at, int depth) {
    nnf_arena *a = &g->arena;
    nnf_pb r = nnf_onnx_msg(cx, span);
    nnf_pb_field f;
    bool more;
    nnf_status st = NNF_OK;
    size_t k = 0, cap = 0;
    switch (at->type) {
    case NNF_ATTR_FLOATS: cap = as->n[A_FLOATS]; break;
    case NNF_ATTR_INTS: cap = as->n[A_INTS]; break;
    case NNF_ATTR_STRINGS: cap = as->n[A_STRINGS]; break;
    case NNF_ATTR_TENSORS: cap = as->n[A_TENSORS]; break;
    case NNF_ATTR_GRAPHS: cap = as->n[A_GRAPHS]; break;
    default: break;
    }
    if (cap > INT_MAX)
        return NNF_CORRUPT("has %zu values", cap);
    if (at->type == NNF_ATTR_FLOATS && !(at->floats = nnf_arena_calloc(a, cap, sizeof(float))))
        return nnf_onnx_oom("floats");
    if (at->type == NNF_ATTR_INTS && !(at->ints = nnf_arena_calloc(a, cap, sizeof(int64_t))))
        return nnf_onnx_oom("ints");
    if (at->type == NNF_ATTR_STRINGS && !(at->strings = nnf_arena_calloc(a, cap, sizeof(char *))))
        return nnf_onnx_oom("strings");
    if (at->type == NNF_ATTR_TENSORS &&
        !(at->tensor = nnf_arena_calloc(a, cap, sizeof(nnf_const_tensor))))
        return nnf_onnx_oom("tensors");
    if (at->type == NNF_ATTR_GRAPHS &&
        !(at->graphs = nnf_arena_calloc(a, cap, sizeof(nnf_graph *))))
        return nnf_onnx_oom("graphs");
    if (at->type == NNF_ATTR_STRING && !(at->s = nnf_arena_strdup(a, "")))
        return nnf_onnx_oom("s");

    for (;;) {
        if ((st = nnf_pb_next(&r, &f, &more)) != NNF_OK)
            goto fail;
        if (!more)
            break;
        switch (at->type) {
        case NNF_ATTR_FLOAT:
            if (f.number == A_F && (st = nnf_pb_float(&f, "f", &at->f)) != NNF_OK)
                goto fail;
            break;
        case NNF_ATTR_INT:
            if (f.number == A_I && (st = nnf_pb_int64(&f, "i", &at->i)) != NNF_OK)
                goto fail;
            break;
        case NNF_ATTR_STRING:
            if (f.number == A_S) {
                if ((st = nnf_onnx_string(a, &f, "s", 1, &at->s)) != NNF_OK)
                    goto fail;
                at->s_len = f.len;
            }
            break;
        case NNF_ATTR_TENSOR:
            if (f.number == A_T) {
                if (!at->tensor && !(at->tensor = nnf_arena_calloc(a, 1, sizeof *at->tensor))) {
                    st = nnf_onnx_oom("t");
                    goto fail;
                }
                if ((st = nnf_onnx_tensor(cx, a, &f, "tensor", NULL, at->tensor)) != NNF_OK)
                    goto fail;
            }
            break;
        case NNF_ATTR_GRAPH:
            if (f.number == A_G) {
                /* Protobuf would merge repeated singular messages; a model
                 * that relies on that is not one any exporter writes. */
                if (at->graph) {
                    st = NNF_CORRUPT("has more than one graph");
                    goto fail;
                }
                if ((st = import_subgraph(cx, g, &f, depth, &at->graph)) != NNF_OK)
                    goto fail;
            }
            break;
        case NNF_ATTR_FLOATS:
        case NNF_ATTR_INTS:
            if ((int)f.number == (at->type == NNF_ATTR_FLOATS ? A_FLOATS : A_INTS)) {
                nnf_pb_scalar kind =
                    at->type == NNF_ATTR_FLOATS ? NNF_PB_SCALAR_FIXED32 : NNF_PB_SCALAR_VARINT;
                nnf_pb_iter it;
                uint64_t u;
                nnf_pb_iter_init(&it, &f, kind);
                while (nnf_pb_iter_next(&it, &u)) {
                    if (k >= cap) {
                        st = nnf_error(NNF_ERR_INTERNAL, "more values than counted");
                        goto fail;
                    }
                    if (at->type == NNF_ATTR_FLOATS) {
                        uint32_t bits = (uint32_t)u;
                        memcpy((float *)at->floats + k, &bits, sizeof bits);
                    } else {
                        ((int64_t *)at->ints)[k] = (int64_t)u;
                    }
                    k++;
                }
            }
            break;
        case NNF_ATTR_STRINGS:
            if (f.number == A_STRINGS &&
                (st = nnf_onnx_string(a, &f, "strings", 1, &at->strings[k++])) != NNF_OK)
                goto fail;
            break;
        case NNF_ATTR_TENSORS:
            if (f.number == A_TENSORS &&
                (st = nnf_onnx_tensor(cx, a, &f, "tensor", NULL, &at->tensor[k++])) != NNF_OK)
                goto fail;
            break;
        case NNF_ATTR_GRAPHS:
            if (f.number == A_GRAPHS) {
                if ((st = import_subgraph(cx, g, &f, depth, &at->graphs[k])) != NNF_OK)
                    goto fail;
                at->count = (int)++k; /* the graphs imported so far, for cleanup */
            }
            break;
        default: break;
        }
    }
    if (at->type == NNF_ATTR_TENSOR && !at->tensor) {
        st = NNF_CORRUPT("has type TENSOR but no tensor");
        goto fail;
    }
    if (at->type == NNF_ATTR_GRAPH && !at->graph) {
        st = NNF_CORRUPT("has type GRAPH but no graph");
        goto fail;
    }
    at->count = (int)cap;
    return NNF_OK;
fail:
    if (at->type == NNF_ATTR_GRAPH)
        nnf_graph_destroy(at->graph);
    if (at->type == NNF_ATTR_GRAPHS)
        for (int j = 0; j < at->count; j++)
            nnf_graph_destroy(at->graphs[j]);
    at->graph = NULL;
    at->count = 0;
    return st;
}

nnf_status nnf_onnx_attr(nnf_onnx_ctx *cx, nnf_graph *g, int node_id, const nnf_pb_field *span,
                         int index, int depth) {
    attr_scan as;
    memset(&as, 0, sizeof as);
    nnf_status st = nnf_pb_expect(span, NNF_PB_LEN, "attribute");
    if (st == NNF_OK)
        st = scan_attr(cx, &g->arena, span, &as);
    if (st != NNF_OK)
        goto fail;
    if (!as.name || !as.name[0]) {
        st = NNF_CORRUPT("has no name");
        goto fail;
    }
    if (as.n[A_REF_ATTR_NAME]) {
        st = nnf_error(NNF_ERR_UNSUPPORTED, "refers to a function attribute (ref_attr_name), "
                                            "which is only valid inside a function body");
        goto fail;
    }
    int32_t type = as.type;
    if (!as.has_type || type == NNF_ATTR_UNDEFINED) {
        if ((st = infer_attr_type(&as, &type)) != NNF_OK)
            goto fail;
    }
    nnf_attr at;
    memset(&at, 0, sizeof at);
    at.name = as.name;
    if (type >= 11 && type <= 14) {
        /* Sparse tensors and type protos are valid ONNX that nnfuse cannot
         * hold. The attribute stays, typed UNDEFINED and without a value, so
         * the node reaches operator binding, which names every unsupported
         * node at once instead of the import stopping at the first. */
        nnf_node *n = &g->nodes[node_id];
        n->attrs[n->n_attrs++] = at;
        return NNF_OK;
    }
    if (type < NNF_ATTR_FLOAT || type > NNF_ATTR_GRAPHS) {
        st = NNF_CORRUPT("has invalid type %d", (int)type);
        goto fail;
    }
    at.type = (nnf_attr_type)type;
    if ((st = decode_attr_value(cx, g, span, &as, &at, depth + 1)) != NNF_OK)
        goto fail;
    nnf_node *n = &g->nodes[node_id];
    n->attrs[n->n_attrs++] = at;
    return NNF_OK;
fail:
    if (as.name && as.name[0])
        return nnf_error_prefix(st, "attribute '" NNF_ONNX_NAME_FMT "'", as.name);
    return nnf_error_prefix(st, "attribute #%d", index);
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Attribute names must be unique within a node. Sorting keeps a node with a
 * hostile number of attributes from costing quadratic time. */
nnf_status nnf_onnx_check_attr_names(const nnf_node *n) {
    const char *dup = NULL;
    if (n->n_attrs <= 16) {
        for (int i = 0; i < n->n_attrs && !dup; i++)
            for (int j = 0; j < i; j++)
                if (!strcmp(n->attrs[i].name, n->attrs[j].name)) {
                    dup = n->attrs[i].name;
                    break;
                }
    } else {
        const char **names = nnf_malloc(sizeof(char *) * (size_t)n->n_attrs);
        if (!names)
            return nnf_onnx_oom("a node");
        for (int i = 0; i < n->n_attrs; i++)
            names[i] = n->attrs[i].name;
        qsort(names, (size_t)n->n_attrs, sizeof *names, cmp_names);
        for (int i = 1; i < n->n_attrs && !dup; i++)
            if (!strcmp(names[i], names[i - 1]))
                dup = names[i];
        nnf_free(names);
    }
    if (dup)
        return NNF_CORRUPT("attribute '" NNF_ONNX_NAME_FMT "' appears twice", dup);
    return NNF_OK;
}

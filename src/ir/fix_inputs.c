/* Input shapes fixed at load (nnf_model_options.input_shapes), as
 * onnxruntime's free-dimension overrides: the listed graph inputs take
 * concrete extents before anything is inferred, and every declared dim that
 * bears a symbolic name they fixed takes its extent too (the outputs' "batch"),
 * so the passes and kernel plans see concrete shapes. */
#include "ir/graph.h"

#include <inttypes.h>
#include <string.h>

typedef struct named_dim {
    const char *name;
    int64_t extent;
    const char *input; /* the input that fixed it */
} named_dim;

/* Records that symbolic dim `name` is `extent` (fixed by `input`); an error
 * if another entry fixed it to another extent, unless lenient (the name is
 * then left symbolic: extent -1). */
static nnf_status name_dim(named_dim *named, size_t *n, const char *name, int64_t extent,
                           const char *input, bool lenient) {
    for (size_t i = 0; i < *n; i++)
        if (!strcmp(named[i].name, name)) {
            if (named[i].extent == extent || named[i].extent < 0)
                return NNF_OK;
            if (lenient) {
                named[i].extent = -1;
                return NNF_OK;
            }
            return nnf_error(NNF_ERR_INVALID_ARGUMENT,
                             "input shapes: dim '%.100s' is %" PRId64
                             " for input '%.200s' and %" PRId64 " for input '%.200s'",
                             name, named[i].extent, named[i].input, extent, input);
        }
    named[(*n)++] = (named_dim){name, extent, input};
    return NNF_OK;
}

static nnf_status check_entry(const nnf_graph *g, const nnf_input_shape *s, size_t k, int *value) {
    if (!s->name)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "input shapes: entry %zu has no name", k);
    if (s->rank < 0 || s->rank > NNF_MAX_RANK || (s->rank > 0 && !s->dims))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "input shapes: '%.200s' has rank %d%s", s->name,
                         s->rank, s->rank > 0 ? " and no dims" : "");
    int v = nnf_graph_find_value(g, s->name);
    if (v < 0 || g->values[v].kind != NNF_VALUE_INPUT)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "input shapes: the model has no input '%.200s'",
                         s->name);
    const nnf_shape *sh = &g->values[v].shape;
    if (sh->rank >= 0 && sh->rank != s->rank)
        return nnf_error(NNF_ERR_SHAPE, "input shapes: input '%.200s' has rank %d, not %d", s->name,
                         sh->rank, s->rank);
    for (int d = 0; d < s->rank; d++) {
        if (s->dims[d] < 0)
            return nnf_error(NNF_ERR_INVALID_ARGUMENT,
                             "input shapes: input '%.200s' dim %d is %" PRId64, s->name, d,
                             s->dims[d]);
        if (sh->rank >= 0 && sh->dims[d] >= 0 && sh->dims[d] != s->dims[d])
            return nnf_error(NNF_ERR_SHAPE,
                             "input shapes: input '%.200s' dim %d is %" PRId64
                             " in the model, not %" PRId64,
                             s->name, d, sh->dims[d], s->dims[d]);
    }
    *value = v;
    return NNF_OK;
}

nnf_status nnf_graph_fix_inputs(nnf_graph *g, const nnf_input_shape *shapes, size_t n,
                                bool lenient) {
    if (n == 0)
        return NNF_OK;
    if (!shapes)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "input shapes: NULL with %zu entries", n);
    if (n > (size_t)g->n_inputs)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "input shapes: %zu entries for %d inputs", n,
                         g->n_inputs);
    int *ids = nnf_calloc(n, sizeof *ids);
    named_dim *named = nnf_calloc(n * NNF_MAX_RANK, sizeof *named);
    size_t n_named = 0;
    nnf_status st = ids && named
                        ? NNF_OK
                        : nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory fixing input shapes");
    for (size_t k = 0; k < n && st == NNF_OK; k++) {
        const nnf_input_shape *s = &shapes[k];
        if ((st = check_entry(g, s, k, &ids[k])) != NNF_OK)
            break;
        for (size_t j = 0; j < k && st == NNF_OK; j++)
            if (ids[j] == ids[k])
                st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "input shapes: '%.200s' is listed twice",
                               s->name);
        const nnf_shape *sh = &g->values[ids[k]].shape;
        for (int d = 0; d < s->rank && st == NNF_OK && sh->rank >= 0; d++)
            if (sh->dims[d] < 0 && sh->dim_names[d])
                st = name_dim(named, &n_named, sh->dim_names[d], s->dims[d], s->name, lenient);
    }
    if (st == NNF_OK) {
        for (size_t k = 0; k < n; k++) {
            nnf_shape *sh = &g->values[ids[k]].shape;
            sh->rank = shapes[k].rank;
            for (int d = 0; d < sh->rank; d++) {
                sh->dims[d] = shapes[k].dims[d];
                sh->dim_names[d] = NULL;
            }
        }
        for (int v = 0; v < g->n_values; v++) {
            nnf_shape *sh = &g->values[v].shape;
            for (int d = 0; d < sh->rank; d++)
                for (size_t i = 0; i < n_named && sh->dims[d] < 0; i++)
                    if (named[i].extent >= 0 && sh->dim_names[d] &&
                        !strcmp(sh->dim_names[d], named[i].name)) {
                        sh->dims[d] = named[i].extent;
                        sh->dim_names[d] = NULL;
                    }
        }
    }
    nnf_free(ids);
    nnf_free(named);
    return st;
}

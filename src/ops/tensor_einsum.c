/* Einsum: the equation is parsed at load; labels are bound to dimensions
 * (ellipsis included) from the input ranks by nnf_einsum_resolve, which both
 * shape inference and the reference kernel use. */
#include "ops/tensor_common.h"

#include <ctype.h>

nnf_status nnf_einsum_init(NNF_INIT_ARGS) {
    const char *eq = nnf_attr_string(node, "equation", NULL);
    if (!eq)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "attribute 'equation' is missing");
    if (node->n_inputs > NNF_EINSUM_MAX_INPUTS)
        return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "%d operands (at most %d)",
                              node->n_inputs, NNF_EINSUM_MAX_INPUTS);
    nnf_einsum_params *p = nnf_arena_calloc(arena, 1, sizeof *p);
    char *buf = nnf_arena_alloc(arena, strlen(eq) + 1);
    if (!p || !buf)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for attributes");
    /* drop spaces; split at "->" and ',' in place */
    size_t n = 0;
    for (const char *c = eq; *c; c++)
        if (!isspace((unsigned char)*c))
            buf[n++] = *c;
    buf[n] = 0;
    char *arrow = strstr(buf, "->");
    if (arrow) {
        *arrow = 0;
        p->out = arrow + 2;
    }
    p->terms[0] = buf;
    p->n_terms = 1;
    for (char *c = buf; *c; c++) {
        if (*c == ',') {
            if (p->n_terms == NNF_EINSUM_MAX_INPUTS)
                return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "too many operands");
            *c = 0;
            p->terms[p->n_terms++] = c + 1;
        } else if (!isalpha((unsigned char)*c) && *c != '.') {
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "equation '%s': bad character '%c'",
                                  eq, *c);
        }
    }
    if (p->n_terms != node->n_inputs)
        return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "equation '%s' has %d operands, node %d",
                              eq, p->n_terms, node->n_inputs);
    node->params = p;
    return NNF_OK;
}

/* Letters of a term and whether it holds "..."; false if malformed. */
static bool term_scan(const char *t, int *letters, bool *ellipsis) {
    *letters = 0;
    *ellipsis = false;
    for (const char *c = t; *c; c++) {
        if (*c == '.') {
            if (*ellipsis || strncmp(c, "...", 3))
                return false;
            *ellipsis = true;
            c += 2;
        } else {
            ++*letters;
        }
    }
    return true;
}

static nnf_status bind_label(const nnf_node *node, nnf_einsum_plan *pl, int label, int64_t d) {
    int64_t *e = &pl->extent[label];
    if (*e == -2 || *e == 1 || (*e == -1 && d >= 0)) {
        *e = d;
    } else if (d >= 0 && d != 1 && *e >= 0 && *e != d) {
        return nnf_node_error(node, NNF_ERR_SHAPE, "label extents %lld and %lld disagree",
                              (long long)*e, (long long)d);
    }
    return NNF_OK;
}

nnf_status nnf_einsum_resolve(const nnf_node *node, int n_in, const int *ranks,
                              const int64_t *const *dims, nnf_einsum_plan *pl) {
    const nnf_einsum_params *p = node->params;
    memset(pl, 0, sizeof *pl);
    int letter_label[128];
    for (int i = 0; i < 128; i++)
        letter_label[i] = -1;
    int n_ell = 0, counts[128] = {0};
    /* ellipsis labels come first (0..n_ell-1), letters after */
    for (int i = 0; i < n_in; i++) {
        int letters;
        bool ell;
        if (!term_scan(p->terms[i], &letters, &ell) || letters > ranks[i] ||
            (!ell && letters != ranks[i]))
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                                  "term '%s' does not fit input %d of rank %d", p->terms[i], i,
                                  ranks[i]);
        if (ell && ranks[i] - letters > n_ell)
            n_ell = ranks[i] - letters;
    }
    pl->n_labels = n_ell;
    for (int l = 0; l < NNF_EINSUM_MAX_LABELS; l++)
        pl->extent[l] = -2; /* unbound */
    for (int i = 0; i < n_in; i++) {
        const char *t = p->terms[i];
        int letters;
        bool ell;
        term_scan(t, &letters, &ell);
        int k = 0, e = ranks[i] - letters;
        pl->in_rank[i] = ranks[i];
        for (const char *c = t; *c; c++) {
            if (*c == '.') {
                for (int j = 0; j < e; j++, k++) {
                    pl->in_label[i][k] = n_ell - e + j;
                    NNF_CHECK(bind_label(node, pl, pl->in_label[i][k], dims[i][k]));
                }
                c += 2;
                continue;
            }
            int ch = (unsigned char)*c;
            if (letter_label[ch] < 0) {
                if (pl->n_labels == NNF_EINSUM_MAX_LABELS)
                    return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "too many labels");
                letter_label[ch] = pl->n_labels++;
            }
            counts[ch]++;
            pl->in_label[i][k] = letter_label[ch];
            NNF_CHECK(bind_label(node, pl, letter_label[ch], dims[i][k]));
            k++;
        }
    }
    pl->out_rank = 0;
    if (p->out) {
        int letters;
        bool ell;
        if (!term_scan(p->out, &letters, &ell) || letters + (ell ? n_ell : 0) > NNF_MAX_RANK)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "bad output term '%s'", p->out);
        for (const char *c = p->out; *c; c++) {
            if (*c == '.') {
                for (int j = 0; j < n_ell; j++)
                    pl->out_label[pl->out_rank++] = j;
                c += 2;
                continue;
            }
            int ch = (unsigned char)*c, l = letter_label[ch];
            if (l < 0)
                return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                                      "output label '%c' is in no input", *c);
            for (int j = 0; j < pl->out_rank; j++)
                if (pl->out_label[j] == l)
                    return nnf_node_error(node, NNF_ERR_INVALID_MODEL,
                                          "output label '%c' repeats", *c);
            pl->out_label[pl->out_rank++] = l;
        }
    } else {
        /* implicit: broadcast dims, then labels seen once, alphabetically */
        for (int j = 0; j < n_ell; j++)
            pl->out_label[pl->out_rank++] = j;
        for (int ch = 0; ch < 128; ch++)
            if (counts[ch] == 1) {
                if (pl->out_rank == NNF_MAX_RANK)
                    return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "output rank too large");
                pl->out_label[pl->out_rank++] = letter_label[ch];
            }
    }
    return NNF_OK;
}

nnf_status nnf_einsum_infer(NNF_INFER_ARGS) {
    nnf_dtype t = in[0].dtype;
    int ranks[NNF_EINSUM_MAX_INPUTS];
    const int64_t *dims[NNF_EINSUM_MAX_INPUTS];
    bool known = true;
    for (int i = 0; i < node->n_inputs; i++) {
        if (in[i].dtype != NNF_DTYPE_UNDEFINED && !nnf_is_numeric_dtype(in[i].dtype))
            return nnf_node_error(node, NNF_ERR_UNSUPPORTED, "dtype %s is not supported",
                                  nnf_dtype_name(in[i].dtype));
        if (in[i].dtype != t)
            return nnf_node_error(node, NNF_ERR_INVALID_MODEL, "operands differ in dtype");
        ranks[i] = in[i].shape.rank;
        dims[i] = in[i].shape.dims;
        known &= ranks[i] >= 0;
    }
    out[0].dtype = t;
    nnf_shape_unknown(&out[0].shape, -1);
    if (!known)
        return NNF_OK;
    nnf_einsum_plan pl;
    NNF_CHECK(nnf_einsum_resolve(node, node->n_inputs, ranks, dims, &pl));
    nnf_shape_unknown(&out[0].shape, pl.out_rank);
    for (int j = 0; j < pl.out_rank; j++)
        out[0].shape.dims[j] = pl.extent[pl.out_label[j]] < 0 ? -1 : pl.extent[pl.out_label[j]];
    return NNF_OK;
}

/* Each output element sums a product of the inputs over the labels it does
 * not carry: about (inputs) operations per point of the full label space. */
double nnf_einsum_cost(NNF_COST_ARGS) {
    int ranks[NNF_EINSUM_MAX_INPUTS];
    const int64_t *dims[NNF_EINSUM_MAX_INPUTS];
    (void)out;
    if (node->n_inputs > NNF_EINSUM_MAX_INPUTS)
        return 0.0;
    for (int i = 0; i < node->n_inputs; i++) {
        if (in[i].shape.rank < 0)
            return 0.0;
        ranks[i] = in[i].shape.rank;
        dims[i] = in[i].shape.dims;
    }
    nnf_einsum_plan pl;
    if (nnf_einsum_resolve(node, node->n_inputs, ranks, dims, &pl) != NNF_OK)
        return 0.0;
    double points = 1.0;
    for (int l = 0; l < pl.n_labels; l++)
        points *= pl.extent[l] > 0 ? (double)pl.extent[l] : 1.0;
    return points * (double)node->n_inputs;
}

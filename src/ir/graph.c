/* Graph construction, lookup and attribute access. */
#include "ir/graph.h"

#include "base/file.h"
#include "base/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct name_index {
    int *slots; /* value id + 1; 0 = empty */
    size_t cap;
} name_index;

/* The name index lives in a side table keyed by graph pointer to keep the
 * public struct simple; it is rebuilt when the graph grows. */
typedef struct graph_private {
    nnf_graph g;
    name_index idx;
    void **blocks; /* nnf_graph_block_alloc; NULL entries were released */
    size_t n_blocks, cap_blocks;
} graph_private;

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

nnf_status nnf_graph_create(nnf_graph **out) {
    graph_private *p = nnf_calloc(1, sizeof *p);
    if (!p)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory creating a graph");
    p->g.source = "<memory>";
    *out = &p->g;
    return NNF_OK;
}

static void destroy_attr_graphs(nnf_graph *g) {
    for (int n = 0; n < g->n_nodes; n++)
        for (int a = 0; a < g->nodes[n].n_attrs; a++) {
            nnf_attr *at = &g->nodes[n].attrs[a];
            if (at->type == NNF_ATTR_GRAPH)
                nnf_graph_destroy(at->graph);
            if (at->type == NNF_ATTR_GRAPHS)
                for (int k = 0; k < at->count; k++)
                    nnf_graph_destroy(at->graphs[k]);
        }
}

void nnf_graph_destroy(nnf_graph *g) {
    if (!g)
        return;
    graph_private *p = (graph_private *)g;
    destroy_attr_graphs(g);
    for (int n = 0; n < g->n_nodes; n++) {
        nnf_free(g->nodes[n].inputs);
        nnf_free(g->nodes[n].outputs);
    }
    nnf_free(g->values);
    nnf_free(g->nodes);
    nnf_free(g->inputs);
    nnf_free(g->outputs);
    nnf_free(g->order);
    nnf_free(p->idx.slots);
    for (size_t i = 0; i < p->n_blocks; i++)
        nnf_free_aligned(p->blocks[i]);
    nnf_free(p->blocks);
    nnf_mappings_free(g->mappings);
    nnf_arena_free(&g->arena);
    nnf_free(p);
}

static int index_insert(name_index *ix, const nnf_value *values, int id) {
    size_t mask = ix->cap - 1, h = hash_str(values[id].name) & mask;
    while (ix->slots[h])
        h = (h + 1) & mask;
    ix->slots[h] = id + 1;
    return 0;
}

static int index_rebuild(graph_private *p, size_t cap) {
    int *slots = nnf_calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    nnf_free(p->idx.slots);
    p->idx.slots = slots;
    p->idx.cap = cap;
    for (int i = 0; i < p->g.n_values; i++)
        index_insert(&p->idx, p->g.values, i);
    return 0;
}

static graph_private *root_of(nnf_graph *g) {
    while (g->parent)
        g = g->parent;
    return (graph_private *)g;
}

void *nnf_graph_block_alloc(nnf_graph *g, size_t size) {
    graph_private *p = root_of(g);
    if (p->n_blocks == p->cap_blocks) {
        size_t cap = p->cap_blocks ? p->cap_blocks * 2 : 64;
        void **b = nnf_realloc(p->blocks, cap * sizeof *b);
        if (!b)
            return NULL;
        p->blocks = b;
        p->cap_blocks = cap;
    }
    void *d = nnf_malloc_aligned(size);
    if (d)
        p->blocks[p->n_blocks++] = d;
    return d;
}

/* The slot of the graph block that starts at d, or NULL (borrowed, in the
 * arena, none). */
static void **block_slot(graph_private *p, const void *d) {
    for (size_t i = 0; d && i < p->n_blocks; i++)
        if (p->blocks[i] == d)
            return &p->blocks[i];
    return NULL;
}

/* The block holding value v's data, or NULL. */
static void **value_block(graph_private *p, const nnf_value *val) {
    return block_slot(p, val->data);
}

void *nnf_graph_take_value_block(nnf_graph *g, int v) {
    nnf_value *val = &g->values[v];
    void **b = value_block(root_of(g), val);
    if (!b)
        return NULL;
    val->data = NULL;
    val->released = true;
    return *b;
}

/* Data borrowed from a file mapping of the graph: hands back the whole pages
 * inside it (the partial pages at its ends may hold neighbouring tensors).
 * False if d is not in a mapping. */
static bool release_mapped_pages(const graph_private *p, const void *data, size_t nbytes) {
    const char *d = data;
    const nnf_mapping *lists[2] = {p->g.mappings, p->g.borrowed_mappings};
    for (int l = 0; l < 2; l++)
        for (const nnf_mapping *m = lists[l]; m; m = m->next) {
            const char *base = m->addr;
            if (!base || d < base || d + nbytes > base + m->size)
                continue;
            uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
            uintptr_t lo = ((uintptr_t)d + page - 1) & ~(page - 1),
                      hi = ((uintptr_t)d + nbytes) & ~(page - 1);
            if (hi > lo)
                madvise((void *)lo, hi - lo, MADV_DONTNEED);
            return true;
        }
    return false;
}

bool nnf_graph_release_value_data(nnf_graph *g, int v) {
    graph_private *p = root_of(g);
    nnf_value *val = &g->values[v];
    if (!val->data)
        return false;
    void **b = value_block(p, val);
    if (b) {
        nnf_free_aligned(*b);
        *b = NULL;
        val->data = NULL;
        val->released = true;
        return true;
    }
    if (!release_mapped_pages(p, val->data, val->nbytes))
        return false;
    val->data = NULL;
    val->released = true;
    return true;
}

bool nnf_graph_drop_value_pages(const nnf_graph *g, int v) {
    const nnf_value *val = &g->values[v];
    return val->data && release_mapped_pages(root_of((nnf_graph *)g), val->data, val->nbytes);
}

/* The nbytes at data, inside one of g's file mappings, read from the file
 * into dst. False where data is in none with its file open, or a read
 * fails (dst then unspecified). Read through the mapping, the copy faulted
 * each 64 KiB of it in (fault-around) and the pages went back after it
 * (release_mapped_pages): 102 MB took 21-26 ms that way, 13-17 with pread. */
static bool read_from_file(const nnf_graph *g, const void *data, size_t nbytes, void *dst) {
    const char *d = data;
    const nnf_mapping *lists[2] = {g->mappings, g->borrowed_mappings};
    for (int l = 0; l < 2; l++)
        for (const nnf_mapping *m = lists[l]; m; m = m->next) {
            const char *base = m->addr;
            if (m->fd < 0 || !base || d < base || d + nbytes > base + m->size)
                continue;
            size_t done = 0;
            while (done < nbytes) {
                ssize_t r = pread(m->fd, (char *)dst + done, nbytes - done,
                                  (off_t)(d - base) + (off_t)done);
                if (r < 0 && errno == EINTR)
                    continue;
                if (r <= 0)
                    return false;
                done += (size_t)r;
            }
            return true;
        }
    return false;
}

void nnf_value_scale_rows(const nnf_graph *g, const nnf_value *val, float *dst) {
    size_t n = val->nbytes / sizeof(float);
    size_t rows = val->shape.rank > 0 && val->shape.dims[0] > 0 ? (size_t)val->shape.dims[0] : 1;
    size_t per = n / rows;
    const unsigned char *src = val->data;
    bool read = read_from_file(&root_of((nnf_graph *)g)->g, val->data, n * sizeof(float), dst);
    for (size_t r = 0; r < rows; r++) {
        /* a row is copied (any alignment) and scaled while in L1; four at
         * a time, which the compiler turns into one vector multiply */
        float s = val->row_scale[r], *d = dst + r * per;
        if (!read)
            memcpy(d, src + r * per * sizeof(float), per * sizeof(float));
        size_t i = 0;
        for (; i + 4 <= per; i += 4) {
            d[i] *= s;
            d[i + 1] *= s;
            d[i + 2] *= s;
            d[i + 3] *= s;
        }
        for (; i < per; i++)
            d[i] *= s;
    }
}

void nnf_graph_set_value_block(nnf_graph *g, int v, void *block) {
    graph_private *p = root_of(g);
    nnf_value *val = &g->values[v];
    void **scale = block_slot(p, val->row_scale);
    if (scale) {
        nnf_free_aligned(*scale);
        *scale = NULL;
    }
    nnf_graph_release_value_data(g, v);
    val->data = block;
    val->released = false;
    val->misaligned = false;
    val->row_scale = NULL;
}

bool nnf_node_reads_bytewise(const nnf_node *n, int k) {
    return k == 0 && !n->domain[0] && !strcmp(n->op_type, "Gather");
}

/* Whether the plan of n is what reads its input k first: the B of a GEMM,
 * which the plan packs (nnf_gemm_pack_b reads any alignment) */
static bool plan_reads_first(const nnf_node *n, int k) {
    return k == 1 && !n->domain[0] &&
           (!strcmp(n->op_type, "MatMul") || !strcmp(n->op_type, "Gemm"));
}

bool *nnf_graph_typed_reads(const nnf_graph *g, unsigned pending, const unsigned *packed) {
    bool *typed = nnf_calloc((size_t)g->n_values + 1, sizeof *typed);
    if (!typed)
        return NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        const nnf_node *n = &g->nodes[i];
        bool conv = (pending & NNF_PENDING_FOLD) && !n->domain[0] && !strcmp(n->op_type, "Conv");
        for (int k = 0; k < n->n_inputs && !n->dead; k++)
            if (n->inputs[k] >= 0 && !nnf_node_reads_bytewise(n, k) && !(conv && k == 1) &&
                !((pending & NNF_PENDING_PLAN) && plan_reads_first(n, k)) &&
                !(packed && k < 32 && (packed[i] >> k & 1)))
                typed[n->inputs[k]] = true;
    }
    for (int k = 0; k < g->n_outputs; k++)
        typed[g->outputs[k]] = true;
    for (int v = 0; v < g->n_values; v++) /* the plan reads it byte-wise, or not at all */
        typed[v] &= !g->values[v].row_scale && !g->values[v].packed_away;
    return typed;
}

nnf_status nnf_graph_align_values(nnf_graph *g, unsigned pending, const unsigned *packed) {
    bool any = false;
    for (int v = 0; v < g->n_values && !any; v++)
        any = g->values[v].misaligned;
    if (!any)
        return NNF_OK;
    bool *need = nnf_graph_typed_reads(g, pending, packed);
    if (!need)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory aligning initializers");
    nnf_status st = NNF_OK;
    for (int v = 0; v < g->n_values && st == NNF_OK; v++)
        if (need[v])
            st = nnf_graph_align_value(g, v);
    nnf_free(need);
    return st;
}

nnf_status nnf_graph_align_value(nnf_graph *g, int v) {
    nnf_value *val = &g->values[v];
    if (!val->misaligned || !val->data)
        return NNF_OK;
    void *copy = nnf_graph_block_alloc(g, val->nbytes);
    if (!copy)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY,
                         "out of memory aligning initializer '%.200s' (%zu bytes)", val->name,
                         val->nbytes);
    NNF_LOG_TRACE("initializer '%s' copied aligned (%zu bytes)", val->name, val->nbytes);
    if (!read_from_file(&root_of(g)->g, val->data, val->nbytes, copy))
        memcpy(copy, val->data, val->nbytes);
    release_mapped_pages(root_of(g), val->data, val->nbytes);
    val->data = copy;
    val->misaligned = false;
    return NNF_OK;
}

int nnf_graph_find_node(const nnf_graph *g, const char *name, size_t len) {
    int node = -1;
    for (int i = 0; i < g->n_nodes && node < 0; i++)
        if (strlen(g->nodes[i].name) == len && !strncmp(g->nodes[i].name, name, len))
            node = i;
    for (int i = 0; node >= 0 && g->nodes[node].dead && i < g->n_nodes; i++) {
        const nnf_node *f = &g->nodes[i];
        for (int k = 0; !f->dead && f->fused_from && k < f->n_fused_from; k++)
            if (!strcmp(f->fused_from[k], g->nodes[node].name))
                return i;
    }
    return node;
}

int nnf_graph_find_value(const nnf_graph *g, const char *name) {
    const graph_private *p = (const graph_private *)g;
    if (!p->idx.cap)
        return -1;
    size_t mask = p->idx.cap - 1, h = hash_str(name) & mask;
    while (p->idx.slots[h]) {
        int id = p->idx.slots[h] - 1;
        if (!strcmp(g->values[id].name, name))
            return id;
        h = (h + 1) & mask;
    }
    return -1;
}

int nnf_graph_value(nnf_graph *g, const char *name) {
    graph_private *p = (graph_private *)g;
    int id = nnf_graph_find_value(g, name);
    if (id >= 0)
        return id;
    if (g->n_values == g->cap_values) {
        int cap = g->cap_values ? g->cap_values * 2 : 64;
        nnf_value *v = nnf_realloc(g->values, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        g->values = v;
        g->cap_values = cap;
    }
    if ((size_t)(g->n_values + 1) * 2 > p->idx.cap &&
        index_rebuild(p, p->idx.cap ? p->idx.cap * 2 : 128) != 0)
        return -1;
    nnf_value *v = &g->values[g->n_values];
    memset(v, 0, sizeof *v);
    v->name = nnf_arena_strdup(&g->arena, name);
    if (!v->name)
        return -1;
    v->shape.rank = -1;
    v->producer = -1;
    v->blocked_of = -1;
    id = g->n_values++;
    index_insert(&p->idx, g->values, id);
    return id;
}

int nnf_graph_add_node(nnf_graph *g, const char *name, const char *op_type, const char *domain,
                       const int *inputs, int n_inputs, const int *outputs, int n_outputs) {
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
        nnf_node *n = nnf_realloc(g->nodes, (size_t)cap * sizeof *n);
        if (!n)
            return -1;
        g->nodes = n;
        g->cap_nodes = cap;
    }
    nnf_node *n = &g->nodes[g->n_nodes];
    memset(n, 0, sizeof *n);
    n->inputs = nnf_malloc(sizeof(int) * (size_t)(n_inputs ? n_inputs : 1));
    n->outputs = nnf_malloc(sizeof(int) * (size_t)(n_outputs ? n_outputs : 1));
    if (!n->inputs || !n->outputs) {
        nnf_free(n->inputs);
        nnf_free(n->outputs);
        return -1;
    }
    if (n_inputs)
        memcpy(n->inputs, inputs, sizeof(int) * (size_t)n_inputs);
    if (n_outputs)
        memcpy(n->outputs, outputs, sizeof(int) * (size_t)n_outputs);
    n->n_inputs = n_inputs;
    n->n_outputs = n_outputs;
    char synth[64];
    if (!name || !name[0]) {
        snprintf(synth, sizeof synth, "%.40s_%d", op_type, g->n_nodes);
        name = synth;
    }
    n->name = nnf_arena_strdup(&g->arena, name);
    n->op_type = nnf_arena_strdup(&g->arena, op_type);
    n->domain = nnf_arena_strdup(&g->arena, domain ? domain : "");
    if (!n->name || !n->op_type || !n->domain) {
        nnf_free(n->inputs);
        nnf_free(n->outputs);
        return -1;
    }
    return g->n_nodes++;
}

int64_t nnf_graph_opset(const nnf_graph *g, const char *domain) {
    while (g->parent && g->n_opsets == 0)
        g = g->parent;
    int dflt = !domain || !domain[0] || !strcmp(domain, "ai.onnx");
    for (int i = 0; i < g->n_opsets; i++) {
        const char *d = g->opsets[i].domain;
        int ddflt = !d || !d[0] || !strcmp(d, "ai.onnx");
        if (dflt ? ddflt : (d && !strcmp(d, domain)))
            return g->opsets[i].version;
    }
    return 0;
}

nnf_status nnf_graph_consumers(const nnf_graph *g, int **cstart_out, int **cons_out) {
    *cstart_out = *cons_out = NULL;
    int *cstart = nnf_calloc((size_t)g->n_values + 2, sizeof(int)), *cons = NULL;
    if (!cstart)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory listing the graph's consumers");
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0 counts into cstart[v + 2], pass 1 fills through cstart[v + 1] */
        for (int i = 0; i < g->n_nodes; i++) {
            const nnf_node *nd = &g->nodes[i];
            for (int k = 0; !nd->dead && k < nd->n_inputs; k++) {
                int v = nd->inputs[k], p = v >= 0 ? g->values[v].producer : -1;
                if (p == i) {
                    nnf_free(cstart);
                    nnf_free(cons);
                    return nnf_error(NNF_ERR_INVALID_MODEL,
                                     "node '%s' (%s) consumes its own output '%s'", nd->name,
                                     nd->op_type, g->values[v].name);
                }
                if (p < 0 || g->nodes[p].dead)
                    continue;
                if (pass == 0)
                    cstart[v + 2]++;
                else
                    cons[cstart[v + 1]++] = i;
            }
        }
        if (pass == 0) {
            for (int v = 0; v < g->n_values; v++)
                cstart[v + 2] += cstart[v + 1];
            if (!(cons = nnf_malloc(((size_t)cstart[g->n_values + 1] + 1) * sizeof(int)))) {
                nnf_free(cstart);
                return nnf_error(NNF_ERR_OUT_OF_MEMORY,
                                 "out of memory listing the graph's consumers");
            }
        }
    }
    *cstart_out = cstart;
    *cons_out = cons;
    return NNF_OK;
}

nnf_status nnf_graph_toposort(nnf_graph *g) {
    int n = g->n_nodes;
    int *order = nnf_malloc(sizeof(int) * (size_t)(n ? n : 1));
    int *pending = nnf_calloc((size_t)(n ? n : 1), sizeof(int));
    int *cstart = NULL, *cons = NULL;
    nnf_status st = NNF_OK;
    if (!order || !pending) {
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory sorting the graph");
        goto done;
    }
    if ((st = nnf_graph_consumers(g, &cstart, &cons)) != NNF_OK)
        goto done;
    for (int v = 0; v < g->n_values; v++)
        for (int c = cstart[v]; c < cstart[v + 1]; c++)
            pending[cons[c]]++;
    /* Kahn's algorithm; a FIFO over file order keeps the order stable. */
    int head = 0, tail = 0;
    for (int i = 0; i < n; i++)
        if (!g->nodes[i].dead && pending[i] == 0)
            order[tail++] = i;
    while (head < tail) {
        const nnf_node *nd = &g->nodes[order[head++]];
        for (int k = 0; k < nd->n_outputs; k++) {
            int v = nd->outputs[k];
            if (v < 0)
                continue;
            for (int c = cstart[v]; c < cstart[v + 1]; c++)
                if (--pending[cons[c]] == 0)
                    order[tail++] = cons[c];
        }
    }
    int live = 0;
    for (int i = 0; i < n; i++)
        live += !g->nodes[i].dead;
    if (tail != live) {
        for (int i = 0; i < n; i++)
            if (!g->nodes[i].dead && pending[i] > 0) {
                st = nnf_error(NNF_ERR_INVALID_MODEL,
                               "graph has a cycle through node '%s' (%s)", g->nodes[i].name,
                               g->nodes[i].op_type);
                break;
            }
        goto done;
    }
    nnf_free(g->order);
    g->order = order;
    g->n_order = tail;
    order = NULL;
done:
    nnf_free(order);
    nnf_free(pending);
    nnf_free(cstart);
    nnf_free(cons);
    return st;
}

/* A value visible from g: its own, or (for subgraphs) one of an enclosing graph. */
static int defined_outside(const nnf_graph *g, const char *name) {
    for (const nnf_graph *p = g->parent; p; p = p->parent)
        if (nnf_graph_find_value(p, name) >= 0)
            return 1;
    return 0;
}

nnf_status nnf_graph_verify(const nnf_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const nnf_node *nd = &g->nodes[i];
        if (nd->dead)
            continue;
        for (int k = 0; k < nd->n_inputs; k++) {
            int v = nd->inputs[k];
            if (v < NNF_NO_VALUE || v >= g->n_values)
                return nnf_error(NNF_ERR_INTERNAL, "node '%s' input %d has bad id %d", nd->name, k, v);
            if (v < 0)
                continue;
            const nnf_value *val = &g->values[v];
            if (val->producer < 0 && val->kind == NNF_VALUE_INTERMEDIATE &&
                !defined_outside(g, val->name))
                return nnf_error(NNF_ERR_INVALID_MODEL,
                                 "node '%s' (%s) reads '%s', which no node, input or initializer defines",
                                 nd->name, nd->op_type, val->name);
        }
        for (int k = 0; k < nd->n_outputs; k++) {
            int v = nd->outputs[k];
            if (v < NNF_NO_VALUE || v >= g->n_values)
                return nnf_error(NNF_ERR_INTERNAL, "node '%s' output %d has bad id %d", nd->name, k, v);
            if (v >= 0 && g->values[v].producer != i)
                return nnf_error(NNF_ERR_INVALID_MODEL, "value '%s' is produced by more than one node ('%s')",
                                 g->values[v].name, nd->name);
        }
    }
    for (int k = 0; k < g->n_outputs; k++) {
        const nnf_value *val = &g->values[g->outputs[k]];
        if (val->producer < 0 && val->kind == NNF_VALUE_INTERMEDIATE && !defined_outside(g, val->name))
            return nnf_error(NNF_ERR_INVALID_MODEL, "graph output '%s' is never produced", val->name);
    }
    return NNF_OK;
}

const nnf_attr *nnf_node_attr(const nnf_node *n, const char *name) {
    for (int i = 0; i < n->n_attrs; i++)
        if (!strcmp(n->attrs[i].name, name))
            return &n->attrs[i];
    return NULL;
}

int64_t nnf_attr_int(const nnf_node *n, const char *name, int64_t dflt) {
    const nnf_attr *a = nnf_node_attr(n, name);
    return a && a->type == NNF_ATTR_INT ? a->i : dflt;
}

float nnf_attr_float(const nnf_node *n, const char *name, float dflt) {
    const nnf_attr *a = nnf_node_attr(n, name);
    return a && a->type == NNF_ATTR_FLOAT ? a->f : dflt;
}

const char *nnf_attr_string(const nnf_node *n, const char *name, const char *dflt) {
    const nnf_attr *a = nnf_node_attr(n, name);
    return a && a->type == NNF_ATTR_STRING ? a->s : dflt;
}

int nnf_attr_ints(const nnf_node *n, const char *name, const int64_t **vals) {
    const nnf_attr *a = nnf_node_attr(n, name);
    if (!a || a->type != NNF_ATTR_INTS)
        return -1;
    *vals = a->ints;
    return a->count;
}

int nnf_attr_floats(const nnf_node *n, const char *name, const float **vals) {
    const nnf_attr *a = nnf_node_attr(n, name);
    if (!a || a->type != NNF_ATTR_FLOATS)
        return -1;
    *vals = a->floats;
    return a->count;
}

int64_t nnf_shape_numel(const nnf_shape *s) {
    if (s->rank < 0)
        return -1;
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) {
        if (s->dims[i] < 0 || __builtin_mul_overflow(n, s->dims[i], &n))
            return -1;
    }
    return n;
}

bool nnf_value_static_bytes(const nnf_value *v, size_t *bytes) {
    int64_t numel = nnf_shape_numel(&v->shape);
    size_t es = nnf_dtype_size(v->dtype);
    return nnf_shape_known(&v->shape) && numel >= 0 && es && nnf_mul_size((size_t)numel, es, bytes);
}

bool nnf_shape_known(const nnf_shape *s) {
    if (s->rank < 0)
        return false;
    for (int i = 0; i < s->rank; i++)
        if (s->dims[i] < 0)
            return false;
    return true;
}

bool nnf_shape_same(const nnf_shape *a, const nnf_shape *b) {
    if (a->rank < 0 || a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++) {
        if (a->dims[i] != b->dims[i])
            return false;
        if (a->dims[i] < 0 &&
            (!a->dim_names[i] || !b->dim_names[i] || strcmp(a->dim_names[i], b->dim_names[i])))
            return false;
    }
    return true;
}

char *nnf_shape_str(const nnf_shape *s, char *buf, size_t size) {
    if (s->rank < 0) {
        snprintf(buf, size, "?");
        return buf;
    }
    size_t off = 0;
    buf[0] = 0;
    if (s->rank == 0)
        snprintf(buf, size, "scalar");
    for (int i = 0; i < s->rank && off < size; i++) {
        int w;
        if (s->dims[i] >= 0)
            w = snprintf(buf + off, size - off, "%s%" PRId64, i ? "x" : "", s->dims[i]);
        else
            w = snprintf(buf + off, size - off, "%s%s", i ? "x" : "",
                         s->dim_names[i] ? s->dim_names[i] : "?");
        if (w < 0)
            break;
        off += (size_t)w;
    }
    return buf;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

nnf_status nnf_graph_fingerprint(const nnf_graph *g, uint64_t *out) {
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, &g->n_nodes, sizeof g->n_nodes);
    h = fnv(h, &g->n_values, sizeof g->n_values);
    for (int i = 0; i < g->n_nodes; i++) {
        const nnf_node *n = &g->nodes[i];
        unsigned char dead = n->dead;
        h = fnv(h, &dead, 1);
        h = fnv(h, n->op_type, strlen(n->op_type) + 1);
        h = fnv(h, n->domain, strlen(n->domain) + 1);
        h = fnv(h, &n->n_inputs, sizeof n->n_inputs);
        h = fnv(h, n->inputs, (size_t)n->n_inputs * sizeof *n->inputs);
        h = fnv(h, &n->n_outputs, sizeof n->n_outputs);
        h = fnv(h, n->outputs, (size_t)n->n_outputs * sizeof *n->outputs);
    }
    for (int v = 0; v < g->n_values; v++) {
        const nnf_value *val = &g->values[v];
        int rank = val->shape.rank, kind = (int)val->kind, dtype = (int)val->dtype;
        unsigned char scaled = val->row_scale != NULL;
        h = fnv(h, &kind, sizeof kind);
        h = fnv(h, &dtype, sizeof dtype);
        h = fnv(h, &scaled, 1);
        h = fnv(h, &rank, sizeof rank);
        if (rank > 0)
            h = fnv(h, val->shape.dims, (size_t)rank * sizeof *val->shape.dims);
    }
    *out = h;
    return NNF_OK;
}

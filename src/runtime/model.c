/* Loading a model: map → import → bind → init → sort → verify → infer. */
#include "runtime/model.h"

#include "base/file.h"
#include "base/log.h"
#include "format/nnf.h"
#include "ir/bind.h"
#include "onnx/import.h"
#include "passes/pass.h"
#include "plan/plan.h"
#include "runtime/compile.h"
#include "runtime/schedule.h"

#include <libgen.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

NNF_API nnf_model_options nnf_model_options_default(void) {
    return (nnf_model_options){
        .struct_size = sizeof(nnf_model_options), .opt_level = 3, .shape_plans = 4};
}

static nnf_status build_info(nnf_model *m) {
    nnf_graph *g = m->graph;
    m->input_info = nnf_calloc((size_t)g->n_inputs + 1, sizeof *m->input_info);
    m->output_info = nnf_calloc((size_t)g->n_outputs + 1, sizeof *m->output_info);
    if (!m->input_info || !m->output_info)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory");
    for (int pass = 0; pass < 2; pass++) {
        int n = pass ? g->n_outputs : g->n_inputs;
        for (int i = 0; i < n; i++) {
            const nnf_value *v = &g->values[pass ? g->outputs[i] : g->inputs[i]];
            nnf_value_info *info = pass ? &m->output_info[i] : &m->input_info[i];
            info->name = v->name;
            info->dtype = v->dtype;
            info->rank = v->shape.rank;
            info->dims = v->shape.dims;
            info->dim_names = v->shape.dim_names;
        }
    }
    return NNF_OK;
}

/* Folding and inference read weights from the file mapping; much of it is
 * now held in folded form and will be held packed. Give the file's pages back
 * before packing so the copies do not all peak together: a value still read
 * from the mapping faults its pages in again from the page cache. */
static void release_file_pages(nnf_model *m) {
    const nnf_mapping *lists[2] = {m->graph->mappings, m->graph->borrowed_mappings};
    for (int l = 0; l < 2; l++)
        for (const nnf_mapping *x = lists[l]; x; x = x->next)
            if (x->addr)
                madvise(x->addr, x->size, MADV_DONTNEED);
}

/* Whether node i waits for shapes: its op plans kernels, its shapes are
 * unknown at load (symbolic input dims), and it got no plan (before
 * planning: its op plans for known shapes only). */
static bool waits_for_shapes(const nnf_model *m, int i) {
    const nnf_graph *g = m->graph;
    const nnf_node *n = &g->nodes[i];
    if (n->dead || !n->op->plan || n->op->plan == nnf_plan_none ||
        (m->plans ? m->plans[i].run != NULL : n->op->plan_symbolic))
        return false;
    for (int k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0 && !nnf_shape_known(&g->values[n->outputs[k]].shape))
            return true;
    return false;
}

/* The share of m's FLOPs (every unknown extent taken as 1) in the nodes that
 * wait for shapes. */
static double waiting_share(const nnf_model *m) {
    const nnf_graph *g = m->graph;
    double total = 0, waiting = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        double c = g->nodes[i].dead ? 0 : nnf_node_cost(g, &g->nodes[i], true);
        c = c > 0 ? c : 0;
        total += c;
        waiting += waits_for_shapes(m, i) ? c : 0;
    }
    return total > 0 ? waiting / total : 0;
}

/* Whether the weights that planned kernels do not read are kept, so that
 * reference-kernel sessions can run the model. */
static bool keeps_unpacked(const nnf_model *m) {
    return m->opt_level == 0 || m->keep_unpacked;
}

/* Where the nodes waiting for shapes carry a tenth of the model's FLOPs or
 * more (unknown extents taken as 1), each new set of input shapes is planned
 * on its first run (shape_plans.c), unless the options allow no shape plans:
 * true then, with m->shape_plans made and a warning. Otherwise a warning
 * names the nodes left to reference kernels. */
static nnf_status plan_shapes_later(nnf_model *m, int max, bool *planned) {
    *planned = false;
    int first = -1, waiting = 0;
    for (int i = 0; i < m->graph->n_nodes; i++)
        if (waits_for_shapes(m, i) && ++waiting == 1)
            first = i;
    if (!waiting)
        return NNF_OK;
    const nnf_node *n = &m->graph->nodes[first];
    const char *s = waiting == 1 ? "" : "s";
    bool symbolic = false;
    for (int i = 0; i < m->graph->n_inputs && !symbolic; i++)
        symbolic = !nnf_shape_known(&m->graph->values[m->graph->inputs[i]].shape);
    if (m->parent || !symbolic) { /* the inputs are fixed: what stays unknown depends on data */
        if (m->plans)
            NNF_LOG_INFO(
                "%s: %d node%s (first '%s', %s) have shapes that depend on data: reference kernels",
                m->source, waiting, s, n->name, n->op_type);
        return NNF_OK;
    }
    double share = waiting_share(m);
    if (max > 0 && share >= 0.1) {
        NNF_LOG_WARN(
            "%s: %d node%s (first '%s', %s; %.0f %% of the FLOPs) wait for shapes (an input has "
            "symbolic dims): each new set of input shapes is planned on its first run, which costs "
            "about a load. To plan at load, fix the shapes (nnf_model_options.input_shapes, the "
            "CLI's --input-shape, Python's input_shapes=)",
            m->source, waiting, s, n->name, n->op_type, 100 * share);
        *planned = true;
        return nnf_shape_plans_create(max, &m->shape_plans);
    }
    if (m->plans) /* before planning, the caller plans and asks again */
        NNF_LOG_WARN(
            "%s: %d node%s (first '%s', %s; %.0f %% of the FLOPs) planned without shapes, so on "
            "reference kernels: an input has symbolic dims; fixing them at load plans these nodes "
            "too (nnf_model_options.input_shapes, the CLI's --input-shape, Python's input_shapes=)",
            m->source, waiting, s, n->name, n->op_type, 100 * share);
    return NNF_OK;
}

/* Recording, the optimised graph's fingerprint goes to the file; replaying,
 * it must equal the file's: the blocks are keyed by node, so they fit only
 * the graph they were packed for. Where it does not (a file edited, or a pass
 * that decided otherwise), the weights are packed here as for the .onnx. */
static nnf_status check_fingerprint(nnf_model *m) {
    uint64_t h;
    NNF_CHECK(nnf_graph_fingerprint(m->graph, &h));
    if (!m->packs->replay) {
        m->packs->graph_hash = h;
        return NNF_OK;
    }
    if (h == m->packs->graph_hash)
        return NNF_OK;
    NNF_LOG_WARN("%s: the compiled file's graph is not the one this load made of its model: its "
                 "weights are packed again",
                 m->source);
    snprintf(m->differs, sizeof m->differs, "graph");
    for (int v = 0; v < m->graph->n_values; v++)
        m->graph->values[v].packed_away = false;
    m->packs = NULL;
    return NNF_OK;
}

/* The misaligned values a node reads typed from here on: every reader that
 * the plans did not pack, every reader where reference-kernel sessions may
 * run. A weight tied between a Gather and a MatMul, or read by two MatMuls,
 * is not copied for readers that never read it again. */
static nnf_status align_unpacked(nnf_model *m) {
    nnf_graph *g = m->graph;
    if (keeps_unpacked(m))
        return nnf_graph_align_values(g, 0, NULL);
    unsigned *packed = nnf_calloc((size_t)g->n_nodes + 1, sizeof *packed);
    if (!packed)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory aligning weights", m->source);
    for (int i = 0; i < g->n_nodes; i++)
        packed[i] = m->plans[i].run ? m->plans[i].packed_inputs : 0;
    nnf_status st = nnf_graph_align_values(g, 0, packed);
    nnf_free(packed);
    return st;
}

/* opts: whole, as load() makes them */
static nnf_status prepare(nnf_model *m, const nnf_model_options *opts) {
    nnf_graph *g = m->graph;
    NNF_CHECK(nnf_graph_fix_inputs(g, opts->input_shapes, opts->n_input_shapes, m->parent != NULL));
    NNF_CHECK(nnf_graph_bind_ops(g));
    NNF_CHECK(nnf_graph_init_params(g));
    NNF_CHECK(nnf_graph_toposort(g));
    NNF_CHECK(nnf_graph_verify(g));
    g->opt_level = m->opt_level;
    NNF_CHECK(nnf_graph_infer(g));
    int max = opts->shape_plans;
    bool planned = false;
    /* A model whose runs all go to shape plans never runs itself: no
     * passes, no kernel plans, its weights left in the file. Unless it keeps
     * unpacked weights for reference-kernel sessions, which need all that. */
    if (!keeps_unpacked(m))
        NNF_CHECK(plan_shapes_later(m, max, &planned));
    if (planned)
        return build_info(m);
    /* -O0 is "no graph optimisation" (as ORT's ORT_DISABLE_ALL): the graph
     * runs as imported, on the same planned kernels, so -O0 against -O3
     * measures what the passes bring. It keeps the unpacked weights, so a
     * reference-kernel session (what `nnfuse compare` runs) works on it. */
    if (m->opt_level > 0) {
        NNF_CHECK(nnf_passes_run(g, m->opt_level, NULL));
        NNF_CHECK(nnf_graph_verify(g));
        release_file_pages(m);
    }
    if (m->packs)
        NNF_CHECK(check_fingerprint(m));
    /* the weights the passes did not read byte-wise (all of them at -O0)
     * but a GEMM's B, which its plan packs from where it is */
    NNF_CHECK(nnf_graph_align_values(g, NNF_PENDING_PLAN, NULL));
    /* the plans (weight transforms and packing: most of a load's own work)
     * on the threads the load may use; without a pool, on this one */
    int threads = opts->threads; /* 0: all cores */
    nnf_threadpool *pool = NULL;
    if (threads != 1 && nnf_threadpool_create(threads, &pool) != NNF_OK) {
        pool = NULL;
        nnf_error_clear();
    }
    nnf_status st =
        nnf_graph_plan(g, !keeps_unpacked(m), pool, m->packs ? m->packs->packs : NULL, &m->plans);
    nnf_threadpool_destroy(pool);
    NNF_CHECK(st);
    /* a packed-away weight that no replayed plan released after all (one a
     * reference-kernel session keeps, a file that lists too much) is read
     * typed from here on */
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].packed_away)
            NNF_CHECK(nnf_graph_align_value(g, v));
    /* a GEMM's B left in the file that some node reads other than through a
     * packed plan (every reader, where reference-kernel sessions may run) */
    NNF_CHECK(align_unpacked(m));
    /* the order sessions run, for memory (-O0 keeps the file's; switched off
     * like a pass, NNF_DISABLE_PASSES=schedule) */
    if (m->opt_level > 0 && !nnf_pass_listed(getenv("NNF_DISABLE_PASSES"), "schedule"))
        NNF_CHECK(nnf_schedule_for_memory(g, m->plans));
    NNF_CHECK(plan_shapes_later(m, max, &planned));
    return build_info(m);
}

/* opts: whole, as load() makes them */
static nnf_status load_model(const void *data, size_t size, const char *source,
                             const char *base_dir, const nnf_model_options *opts, nnf_mapping *file,
                             const nnf_model *parent, nnf_load_packs *packs, nnf_model **out) {
    nnf_model *m = nnf_calloc(1, sizeof *m);
    nnf_status st = NNF_OK;
    if (!m || !(m->source = nnf_strdup(source)) ||
        (base_dir && !(m->base_dir = nnf_strdup(base_dir))) ||
        !(m->meta = nnf_compile_meta(opts))) {
        if (m) {
            nnf_free(m->source);
            nnf_free(m->base_dir);
        }
        nnf_free(m);
        nnf_mappings_free(file);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory", source);
    }
    m->file = file;
    m->packs = packs;
    m->bytes = data;
    m->size = size;
    m->parent = parent;
    m->opt_level = opts->opt_level;
    m->keep_unpacked = opts->keep_unpacked_weights;
    /* a shape plan reads its parent's file mapping as one (its pages go
     * back as weights are copied), without owning it */
    const nnf_mapping *from = file;
    for (const nnf_mapping *x = parent ? parent->graph->mappings : NULL; x && !from; x = x->next)
        if (x->addr == data && x->size == size)
            from = x;
    bool replay = packs && packs->replay;
    st = from ? nnf_onnx_import_mapping(data, size, source, base_dir,
                                        replay ? packs->packed_away : NULL,
                                        replay ? packs->packed_away_bytes : 0, &m->graph)
              : nnf_onnx_import(data, size, source, base_dir, &m->graph);
    if (st != NNF_OK)
        goto fail;
    m->graph->source = m->source;
    if (parent) /* a shape plan's values point into its parent's files */
        m->graph->borrowed_mappings = parent->graph->mappings;
    /* the graph owns every mapping its values point into */
    if (file) {
        file->next = m->graph->mappings;
        m->graph->mappings = file;
        m->file = NULL;
    }
    /* import copied what it could not point at; the rest faults back in on use */
    release_file_pages(m);
    st = prepare(m, opts);
    if (st != NNF_OK) {
        nnf_error_prefix(st, "%s", source);
        goto fail;
    }
    nnf_mappings_close_files(m->graph->mappings); /* planned: nothing reads them any more */
    NNF_LOG_INFO("loaded %s: %d nodes, %d values", source, m->graph->n_nodes, m->graph->n_values);
    m->packs = NULL;
    *out = m;
    return NNF_OK;
fail:
    nnf_model_destroy(m);
    return st;
}

/* Bytes every run holds at once at least: the intermediate values its
 * largest node reads and writes (static shapes; a value of unknown size
 * counts nothing). The load's leftover pages kept for the first run are
 * capped at this, so they are about all taken: BERT-base's load left 9.4
 * MB, its first run took 3. */
static size_t live_floor(const nnf_graph *g) {
    size_t most = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const nnf_node *n = &g->nodes[i];
        size_t sum = 0, bytes;
        for (int k = 0; k < n->n_inputs + n->n_outputs && !n->dead; k++) {
            int v = k < n->n_inputs ? n->inputs[k] : n->outputs[k - n->n_inputs];
            if (v >= 0 && g->values[v].producer >= 0 &&
                nnf_value_static_bytes(&g->values[v], &bytes) && !nnf_add_size(sum, bytes, &sum))
                sum = SIZE_MAX;
        }
        most = sum > most ? sum : most;
    }
    return most;
}

/* A compiled file (format/nnf.h): its ONNX model, loaded with the input
 * shapes the file records where the caller fixes none, replaying the file's
 * packed blocks where it was compiled for this build, CPU and options (and
 * rec is NULL: nnf_compile records instead). Otherwise the model is planned
 * as its .onnx would be, and the log says why. */
static nnf_status load_compiled(const void *data, size_t size, const char *source,
                                const char *base_dir, nnf_model_options *o, nnf_mapping *file,
                                const nnf_model *parent, nnf_load_packs *rec, nnf_model **out) {
    nnf_compiled c = {0};
    nnf_status st =
        (uintptr_t)data % 64
            ? nnf_error(NNF_ERR_INVALID_ARGUMENT,
                        "%s: a compiled .nnf file in memory must be 64-byte aligned", source)
            : nnf_compiled_parse(data, size, source, &c);
    void *own = NULL;
    if (st == NNF_OK && !o->n_input_shapes)
        st =
            nnf_compile_meta_shapes(c.meta, c.meta_bytes, source,
                                    (nnf_input_shape **)&o->input_shapes, &o->n_input_shapes, &own);
    char *want = st == NNF_OK ? nnf_compile_meta(o) : NULL;
    if (st == NNF_OK && !want)
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory", source);
    nnf_load_packs replay = {.replay = true,
                             .packed_away = c.names,
                             .packed_away_bytes = c.names_bytes,
                             .graph_hash = c.graph_hash};
    nnf_load_packs *packs = rec;
    char key[32] = "";
    if (st == NNF_OK && !rec) {
        if (strlen(want) == c.meta_bytes && !memcmp(want, c.meta, c.meta_bytes)) {
            st = nnf_packs_replayer(c.blocks, c.n_blocks, &replay.packs);
            if (st != NNF_OK) {
                nnf_error_prefix(st, "%s", source);
            } else {
                packs = &replay;
                NNF_LOG_INFO("%s: %zu packed blocks read in place", source, c.n_blocks);
            }
        } else {
            nnf_compile_meta_diff(c.meta, c.meta_bytes, want, strlen(want), key, sizeof key);
            NNF_LOG_WARN("%s was compiled for another %s than this load's: its weights are packed "
                         "again (compile it again to load it without that work)",
                         source, key);
        }
    }
    if (st == NNF_OK)
        st = load_model(c.onnx, c.onnx_bytes, source, base_dir, o, file, parent, packs, out);
    else
        nnf_mappings_free(file);
    if (st == NNF_OK && !rec) {
        if (key[0])
            snprintf((*out)->differs, sizeof(*out)->differs, "%s", key);
        (*out)->compiled = (*out)->differs[0] ? 2 : 1;
    }
    nnf_packs_free(replay.packs);
    nnf_free(want);
    nnf_free(own);
    nnf_compiled_free(&c);
    return st;
}

/* Import, fold and pack replace each weight by a new copy: the pages of the
 * copy freed go to the next one (base/alloc.h, the page bank), and with a
 * second thread allowed, a helper faults fresh pages in ahead of them. */
static nnf_status load(const void *data, size_t size, const char *source, const char *base_dir,
                       const nnf_model_options *opts, nnf_mapping *file, const nnf_model *parent,
                       nnf_load_packs *rec, nnf_model **out) {
    /* the caller's options, as large as this build's (older callers pass fewer fields) */
    nnf_model_options o = nnf_model_options_default();
    if (opts)
        memcpy(&o, opts, opts->struct_size < sizeof o ? opts->struct_size : sizeof o);
    o.struct_size = sizeof o;
    int threads = o.threads; /* the threads the load may use; 0: all cores */
    nnf_page_bank_open(threads > 1 || (threads == 0 && sysconf(_SC_NPROCESSORS_ONLN) > 1));
    nnf_status st = nnf_compiled_is(data, size)
                        ? load_compiled(data, size, source, base_dir, &o, file, parent, rec, out)
                        : load_model(data, size, source, base_dir, &o, file, parent, rec, out);
    if (st != NNF_OK) {
        nnf_page_bank_close();
        return st;
    }
    (*out)->threads = threads;
    atomic_store(&(*out)->warm_pages, nnf_page_bank_detach(live_floor((*out)->graph)));
    return st;
}

void *nnf_model_take_warm_pages(const nnf_model *m) {
    /* not a const object: every model is made by load() */
    return atomic_exchange(&((nnf_model *)m)->warm_pages, NULL);
}

nnf_status nnf_model_load_shaped(const nnf_model *base, const nnf_input_shape *shapes, size_t n,
                                 nnf_model **out) {
    nnf_model_options o = nnf_model_options_default();
    o.opt_level = base->opt_level;
    o.keep_unpacked_weights = base->keep_unpacked;
    o.threads = base->threads;
    o.input_shapes = shapes;
    o.n_input_shapes = n;
    o.shape_plans = 0;
    return load(base->bytes, base->size, base->source, base->base_dir, &o, NULL, base, NULL, out);
}

static nnf_status load_path(const char *path, const nnf_model_options *opts, nnf_load_packs *rec,
                            nnf_model **out) {
    if (!path || !out)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "nnf_model_load: path and model_out are required");
    *out = NULL;
    nnf_mapping *file = NULL;
    NNF_CHECK(nnf_file_map(path, &file));
    char *dir_copy = nnf_strdup(path);
    if (!dir_copy) {
        nnf_mappings_free(file);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    nnf_status st =
        load(file->addr, file->size, path, dirname(dir_copy), opts, file, NULL, rec, out);
    nnf_free(dir_copy);
    return st;
}

NNF_API nnf_status nnf_model_load(const char *path, const nnf_model_options *opts,
                                  nnf_model **out) {
    return load_path(path, opts, NULL, out);
}

nnf_status nnf_model_load_recording(const char *path, const nnf_model_options *opts,
                                    nnf_load_packs *rec, nnf_model **out) {
    return load_path(path, opts, rec, out);
}

NNF_API nnf_status nnf_model_compile(const char *path, const nnf_model_options *opts,
                                     const char *out_path) {
    if (!path || !out_path)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT,
                         "nnf_model_compile: path and out_path are required");
    return nnf_compile(path, opts, out_path, NULL, NULL);
}

NNF_API nnf_status nnf_model_load_buffer(const void *data, size_t size, const char *base_dir,
                                         const nnf_model_options *opts, nnf_model **out) {
    if ((!data && size) || !out)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "nnf_model_load_buffer: data and model_out are required");
    *out = NULL;
    return load(data, size, "<memory>", base_dir, opts, NULL, NULL, NULL, out);
}

NNF_API void nnf_model_destroy(nnf_model *m) {
    if (!m)
        return;
    nnf_shape_plans_free(m->shape_plans); /* they read m's bytes */
    nnf_page_bank_free(atomic_load(&m->warm_pages));
    if (m->graph)
        nnf_graph_plans_free(m->graph, m->plans);
    nnf_graph_destroy(m->graph);
    nnf_mappings_free(m->file);
    nnf_free(m->input_info);
    nnf_free(m->output_info);
    nnf_free(m->source);
    nnf_free(m->base_dir);
    nnf_free(m->meta);
    nnf_free(m);
}

NNF_API size_t nnf_model_input_count(const nnf_model *m) { return m ? (size_t)m->graph->n_inputs : 0; }
NNF_API size_t nnf_model_output_count(const nnf_model *m) { return m ? (size_t)m->graph->n_outputs : 0; }

NNF_API nnf_status nnf_model_input_info(const nnf_model *m, size_t i, nnf_value_info *info) {
    if (!m || !info || i >= (size_t)m->graph->n_inputs)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "input index %zu out of range", i);
    *info = m->input_info[i];
    return NNF_OK;
}

NNF_API nnf_status nnf_model_output_info(const nnf_model *m, size_t i, nnf_value_info *info) {
    if (!m || !info || i >= (size_t)m->graph->n_outputs)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "output index %zu out of range", i);
    *info = m->output_info[i];
    return NNF_OK;
}

#include "runtime/compile.h"

#include "base/alloc.h"
#include "base/cpu.h"
#include "base/strbuf.h"
#include "format/nnf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const char nnf_build_id[]; /* generated: cmake/build_id.cmake */

char *nnf_compile_meta(const nnf_model_options *o) {
    const nnf_cpu *c = nnf_cpu_get();
    nnf_strbuf t = {0};
    const char *off = getenv("NNF_DISABLE_PASSES");
    nnf_strbuf_printf(&t, "nnfuse %s\nbuild %s\n", NNFUSE_VERSION, nnf_build_id);
    /* everything a plan may read of the CPU */
    nnf_strbuf_printf(
        &t,
        "cpu %s|%s|%u/%u|%d%d%d%d%d%d%d%d%d%d|halves %d%d|bcast %d|max %s|l1d %zu|l2 %zu|l3 %zu\n",
        c->vendor, c->brand, c->family, c->model, c->avx, c->avx2, c->fma, c->f16c, c->avx512f,
        c->avx512bw, c->avx512dq, c->avx512vl, c->os_ymm, c->os_zmm, c->zmm_halves, c->ymm_halves,
        c->bcast_costly, nnf_isa_name(c->max_isa), c->l1d, c->l2, c->l3);
    nnf_strbuf_printf(&t, "isa %s\nopt %d\npasses-off %s\n", nnf_isa_name(nnf_cpu_isa()),
                      o->opt_level, off && *off ? off : "-");
    if (o->n_input_shapes && !o->input_shapes) /* fix_inputs.c refuses it */
        nnf_strbuf_printf(&t, "shape ? none\n");
    for (size_t i = 0; o->input_shapes && i < o->n_input_shapes; i++) {
        const nnf_input_shape *s = &o->input_shapes[i];
        if (!s->name || strchr(s->name, '\n') || s->rank < 0 || (s->rank && !s->dims)) {
            nnf_strbuf_printf(&t, "shape ? %zu\n",
                              i); /* fix_inputs.c refuses a malformed one, compile all */
            continue;
        }
        nnf_strbuf_printf(&t, "shape ");
        for (int d = 0; d < s->rank; d++)
            nnf_strbuf_printf(&t, "%s%lld", d ? "," : "", (long long)s->dims[d]);
        nnf_strbuf_printf(&t, "%s %s\n", s->rank ? "" : "scalar", s->name);
    }
    return nnf_strbuf_take(&t);
}

nnf_status nnf_compile_meta_shapes(const char *meta, size_t bytes, const char *source,
                                   nnf_input_shape **shapes, size_t *n, void **own) {
    *shapes = NULL;
    *n = 0;
    *own = NULL;
    /* one block: the shapes, then their dims, then a copy of the text for
     * the names (each line's end turned into a NUL) */
    size_t lines = 0, dims = 0;
    for (size_t i = 0; i < bytes; i++) {
        lines += meta[i] == '\n';
        dims += meta[i] == ',';
    }
    size_t need =
        (lines + 1) * sizeof(nnf_input_shape) + (lines + dims + 1) * sizeof(int64_t) + bytes + 1;
    unsigned char *block = nnf_calloc(1, need);
    if (!block)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory", source);
    nnf_input_shape *sh = (nnf_input_shape *)block;
    int64_t *dv = (int64_t *)(block + (lines + 1) * sizeof *sh);
    char *txt = (char *)(dv + lines + dims + 1);
    memcpy(txt, meta, bytes);
    size_t k = 0;
    for (char *line = txt, *end; line < txt + bytes; line = end + 1) {
        end = memchr(line, '\n', (size_t)(txt + bytes - line));
        end = end ? end : txt + bytes;
        *end = 0;
        if (strncmp(line, "shape ", 6))
            continue;
        char *p = line + 6, *name = strchr(p, ' ');
        nnf_input_shape *s = &sh[k];
        s->dims = dv;
        if (!name)
            goto bad;
        *name++ = 0;
        if (strcmp(p, "scalar"))
            for (char *q = p;; q++) {
                char *e;
                long long v = strtoll(q, &e, 10);
                if (e == q || v < 0 || (*e && *e != ','))
                    goto bad;
                *dv++ = v;
                s->rank++;
                if (!*(q = e))
                    break;
            }
        s->name = name;
        k++;
    }
    *shapes = sh;
    *n = k;
    *own = block;
    return NNF_OK;
bad:
    nnf_free(block);
    return nnf_error(NNF_ERR_INVALID_MODEL, "%s: the compiled file's input shapes are unreadable",
                     source);
}

void nnf_compile_meta_diff(const char *a, size_t na, const char *b, size_t nb, char *key,
                           size_t cap) {
    size_t i = 0, line = 0;
    while (i < na && i < nb && a[i] == b[i])
        if (a[i++] == '\n')
            line = i;
    /* the key from b (the load's own text) where it has that line */
    const char *s = line < nb ? b + line : a + line;
    size_t left = line < nb ? nb - line : line < na ? na - line : 0, len = 0;
    while (len < left && s[len] != ' ' && s[len] != '\n' && len + 1 < cap) {
        key[len] = (s[len] >= 'a' && s[len] <= 'z') || s[len] == '-' ? s[len] : '?';
        len++;
    }
    key[len] = 0;
    if (!len)
        snprintf(key, cap, "shape");
}

nnf_status nnf_compile(const char *path, const nnf_model_options *opts, const char *out_path,
                       nnf_model **model_out, size_t *packed_bytes) {
    if (model_out)
        *model_out = NULL;
    if (packed_bytes)
        *packed_bytes = 0;
    nnf_load_packs rec = {.packs = nnf_packs_recorder()};
    if (!rec.packs)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    nnf_model *m = NULL;
    nnf_status st = nnf_model_load_recording(path, opts, &rec, &m);
    if (st == NNF_OK && strstr(m->meta, "\nshape ? "))
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT,
                       "%s: an input name with a line break cannot be compiled", path);
    nnf_strbuf names = {0};
    for (int v = 0; st == NNF_OK && v < m->graph->n_values; v++) {
        /* packed, so released: a load replaying the blocks never reads it */
        const nnf_value *val = &m->graph->values[v];
        if (val->kind == NNF_VALUE_INITIALIZER && val->packed_away && val->name[0])
            nnf_strbuf_printf(&names, "%s%c", val->name, 0);
    }
    size_t names_bytes = names.len;
    bool names_failed = names.failed;
    char *names_text = nnf_strbuf_take(&names);
    if (st == NNF_OK && names_failed)
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    if (st == NNF_OK) {
        size_t n;
        const nnf_pack_entry *e = nnf_packs_entries(rec.packs, &n);
        size_t bytes = 0;
        st = nnf_compiled_write(out_path, m->meta, names_text ? names_text : "", names_bytes,
                                rec.graph_hash, m->bytes, m->size, e, n, &bytes);
        if (packed_bytes)
            *packed_bytes = bytes;
    }
    nnf_free(names_text);
    nnf_packs_free(rec.packs);
    if (st == NNF_OK && model_out)
        *model_out = m;
    else
        nnf_model_destroy(m);
    return st;
}

/* Readable text and Graphviz dumps of a graph. */
#include "ir/graph.h"
#include "ops/op.h"

#include <stdio.h>

static void print_value(const nnf_graph *g, int v, FILE *f) {
    if (v < 0) {
        fputs("<none>", f);
        return;
    }
    char buf[128];
    const nnf_value *val = &g->values[v];
    fprintf(f, "%s:%s[%s]", val->name, nnf_dtype_name(val->dtype), nnf_shape_str(&val->shape, buf, sizeof buf));
}

void nnf_graph_dump(const nnf_graph *g, FILE *f) {
    int n = g->order ? g->n_order : g->n_nodes;
    for (int i = 0; i < n; i++) {
        const nnf_node *nd = &g->nodes[g->order ? g->order[i] : i];
        if (nd->dead)
            continue;
        fprintf(f, "  %s = %s%s%s(", nd->name, nd->domain[0] ? nd->domain : "", nd->domain[0] ? "::" : "",
                nd->op_type);
        for (int k = 0; k < nd->n_inputs; k++) {
            if (k)
                fputs(", ", f);
            print_value(g, nd->inputs[k], f);
        }
        fputs(") -> ", f);
        for (int k = 0; k < nd->n_outputs; k++) {
            if (k)
                fputs(", ", f);
            print_value(g, nd->outputs[k], f);
        }
        fputc('\n', f);
    }
}

static void dot_escape(const char *s, FILE *f) {
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
}

void nnf_graph_dump_dot(const nnf_graph *g, FILE *f) {
    fputs("digraph nnfuse {\n  rankdir=TB;\n  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n", f);
    for (int k = 0; k < g->n_inputs; k++) {
        fprintf(f, "  v%d [shape=ellipse, label=\"", g->inputs[k]);
        dot_escape(g->values[g->inputs[k]].name, f);
        fputs("\"];\n", f);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const nnf_node *nd = &g->nodes[i];
        if (nd->dead)
            continue;
        fprintf(f, "  n%d [label=\"", i);
        if (nd->domain[0]) {
            dot_escape(nd->domain, f);
            fputs("::", f);
        }
        dot_escape(nd->op_type, f);
        fputs("\\n", f);
        dot_escape(nd->name, f);
        fputs("\"];\n", f);
        for (int k = 0; k < nd->n_inputs; k++) {
            int v = nd->inputs[k];
            if (v < 0 || g->values[v].kind == NNF_VALUE_INITIALIZER || g->values[v].kind == NNF_VALUE_CONSTANT)
                continue;
            char buf[128];
            if (g->values[v].producer >= 0)
                fprintf(f, "  n%d -> n%d [label=\"%s\"];\n", g->values[v].producer, i,
                        nnf_shape_str(&g->values[v].shape, buf, sizeof buf));
            else if (g->values[v].kind == NNF_VALUE_INPUT)
                fprintf(f, "  v%d -> n%d;\n", v, i);
        }
    }
    for (int k = 0; k < g->n_outputs; k++) {
        int v = g->outputs[k];
        fprintf(f, "  o%d [shape=ellipse, label=\"", v);
        dot_escape(g->values[v].name, f);
        fputs("\"];\n", f);
        if (g->values[v].producer >= 0)
            fprintf(f, "  n%d -> o%d;\n", g->values[v].producer, v);
    }
    fputs("}\n", f);
}

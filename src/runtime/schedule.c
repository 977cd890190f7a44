/* The order sessions run a model's nodes in, chosen for memory once the
 * kernels are planned. The graph's topological sort takes ready nodes first
 * in, first out (file order among them), which runs the consumers of one
 * tensor side by side: in ResNet-50's first block of layer 2 the downsample
 * conv ran right after conv1, so the block's 3 MiB input and the two 1.5 MiB
 * outputs lived together, the model's peak of live intermediates. A second
 * order follows each chain as far as it goes before taking up another ready
 * node (depth first; among siblings, file order): conv1, conv2, then the
 * downsample. The model keeps whichever order has the lower peak of live
 * intermediate bytes, simulated with the session's rules (runtime/session.c):
 * a node's outputs allocated while it runs, unless output 0 takes over an
 * input that dies there (its plan's in_place_inputs, same size) or a view
 * passes its dying input on; a value freed after its last reader; graph
 * outputs kept to the end. Graphs whose sizes are not all known at load
 * (symbolic dims) or that hold subgraphs (which may read outer values by
 * name) keep the first order. The order changes no node's arithmetic. */
#include "runtime/schedule.h"

#include "base/alloc.h"
#include "base/log.h"
#include "runtime/session.h"

#include <stdint.h>
#include <string.h>

/* Input k of node i, whose buffer output 0 takes (as the session would), or
 * -1. last[v]: the position of v's last reader in the order. */
static int takes_over(const nnf_graph *g, const nnf_node *nd, const nnf_kernel_plan *p, int i,
                      const size_t *bytes, const int *last) {
    int out = nd->n_outputs > 0 ? nd->outputs[0] : -1;
    if (out < 0 || g->values[out].is_output)
        return -1;
    unsigned allowed = p && p->run ? p->in_place_inputs : 0;
    bool view = nnf_is_view_op(nd);
    for (int k = 0; k < nd->n_inputs && k < 32; k++) {
        int v = nd->inputs[k], twice = 0;
        if (v < 0 || g->values[v].producer < 0 || last[v] != i ||
            !(view ? k == 0 : allowed >> k & 1u))
            continue;
        for (int q = 0; q < nd->n_inputs; q++)
            twice |= q != k && nd->inputs[q] == v;
        if (!twice && (view || bytes[v] == bytes[out]))
            return k;
    }
    return -1;
}

/* The peak of live intermediate bytes when the live nodes run in `order`. */
static size_t simulate_peak(const nnf_graph *g, const nnf_kernel_plan *plans, const int *order,
                            int n, const size_t *bytes, int *last) {
    for (int v = 0; v < g->n_values; v++)
        last[v] = -1;
    for (int i = 0; i < n; i++) {
        const nnf_node *nd = &g->nodes[order[i]];
        for (int k = 0; k < nd->n_inputs; k++)
            if (nd->inputs[k] >= 0)
                last[nd->inputs[k]] = i;
    }
    for (int k = 0; k < g->n_outputs; k++)
        last[g->outputs[k]] = n; /* the caller reads it after the run */
    size_t live = 0, peak = 0;
    for (int i = 0; i < n; i++) {
        const nnf_node *nd = &g->nodes[order[i]];
        int over = takes_over(g, nd, plans ? &plans[order[i]] : NULL, i, bytes, last);
        for (int k = 0; k < nd->n_outputs; k++)
            if (nd->outputs[k] >= 0 && !(k == 0 && over >= 0))
                live += bytes[nd->outputs[k]];
        peak = live > peak ? live : peak;
        if (over >= 0) { /* the output holds the input's bytes from here on */
            int v = nd->inputs[over];
            live += bytes[nd->outputs[0]];
            live -= bytes[v];
            last[v] = -2;
        }
        for (int k = 0; k < nd->n_outputs; k++) {
            int v = nd->outputs[k];
            if (v >= 0 && last[v] < 0 && last[v] != -2)
                live -= bytes[v]; /* nothing reads it */
        }
        for (int k = 0; k < nd->n_inputs; k++) {
            int v = nd->inputs[k];
            if (v >= 0 && last[v] == i && g->values[v].producer >= 0) {
                live -= bytes[v];
                last[v] = -2; /* counted once when a node reads it twice */
            }
        }
    }
    return peak;
}

/* Depth first over ready nodes: a stack, each node's newly ready consumers
 * (cons[cstart[v]..cstart[v + 1]) for each output v, ascending node ids)
 * pushed so that the lowest id comes off first. Returns the count. */
static int depth_first(const nnf_graph *g, const int *cstart, const int *cons, int *pending,
                       int *stack, int *order) {
    int n = 0, top = 0;
    for (int v = 0; v < g->n_values; v++)
        for (int c = cstart[v]; c < cstart[v + 1]; c++)
            pending[cons[c]]++;
    for (int i = g->n_nodes - 1; i >= 0; i--)
        if (!g->nodes[i].dead && pending[i] == 0)
            stack[top++] = i;
    while (top > 0) {
        int id = stack[--top], mark = top;
        order[n++] = id;
        const nnf_node *nd = &g->nodes[id];
        for (int k = 0; k < nd->n_outputs; k++) {
            int v = nd->outputs[k];
            for (int c = v >= 0 ? cstart[v] : 0; v >= 0 && c < cstart[v + 1]; c++)
                if (--pending[cons[c]] == 0)
                    stack[top++] = cons[c];
        }
        /* the newly ready, highest id first, so the lowest comes off next */
        for (int a = mark; a < top; a++)
            for (int b = a + 1; b < top; b++)
                if (stack[b] > stack[a]) {
                    int t = stack[a];
                    stack[a] = stack[b];
                    stack[b] = t;
                }
    }
    return n;
}

/* The bytes of every value a live node produces; false if one is unknown. */
static bool value_bytes(const nnf_graph *g, size_t *bytes) {
    for (int v = 0; v < g->n_values; v++) {
        const nnf_value *val = &g->values[v];
        bytes[v] = 0;
        if (val->producer < 0 || g->nodes[val->producer].dead)
            continue;
        if (!nnf_value_static_bytes(val, &bytes[v]))
            return false;
    }
    return true;
}

static bool has_subgraphs(const nnf_graph *g) {
    for (int i = 0; i < g->n_nodes; i++)
        for (int a = 0; !g->nodes[i].dead && a < g->nodes[i].n_attrs; a++)
            if (g->nodes[i].attrs[a].type == NNF_ATTR_GRAPH ||
                g->nodes[i].attrs[a].type == NNF_ATTR_GRAPHS)
                return true;
    return false;
}

nnf_status nnf_schedule_for_memory(nnf_graph *g, const nnf_kernel_plan *plans) {
    if (has_subgraphs(g))
        return NNF_OK;
    int nn = g->n_nodes, nv = g->n_values;
    size_t *bytes = nnf_calloc((size_t)nv + 1, sizeof *bytes);
    int *last = nnf_calloc((size_t)nv + 1, sizeof(int));
    int *pending = nnf_calloc((size_t)nn + 1, sizeof(int));
    int *stack = nnf_calloc((size_t)nn + 1, sizeof(int));
    int *order = nnf_calloc((size_t)nn + 1, sizeof(int));
    int *cstart = NULL, *cons = NULL;
    nnf_status st = NNF_OK;
    if (!bytes || !last || !pending || !stack || !order) {
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory ordering the graph's nodes");
        goto done;
    }
    if (!value_bytes(g, bytes) || (st = nnf_graph_consumers(g, &cstart, &cons)) != NNF_OK)
        goto done;
    if (depth_first(g, cstart, cons, pending, stack, order) != g->n_order)
        goto done; /* cannot happen on a sorted graph; keep its order */
    size_t fifo = simulate_peak(g, plans, g->order, g->n_order, bytes, last);
    size_t deep = simulate_peak(g, plans, order, g->n_order, bytes, last);
    NNF_LOG_DEBUG("schedule: peak of live intermediates %zu bytes in file order, %zu depth first",
                  fifo, deep);
    if (deep < fifo)
        memcpy(g->order, order, (size_t)g->n_order * sizeof(int));
done:
    nnf_free(bytes);
    nnf_free(cstart);
    nnf_free(last);
    nnf_free(pending);
    nnf_free(stack);
    nnf_free(order);
    nnf_free(cons);
    return st;
}

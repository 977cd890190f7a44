/* nnfuse info MODEL [--json] [--graph] */
#include "cli.h"

#include "ops/op.h"
#include "runtime/model.h"

#include <stdio.h>
#include <string.h>

typedef struct op_count {
    const char *name;
    int count;
} op_count;

static void print_values(const nnf_graph *g, const int *ids, int n, int json) {
    for (int i = 0; i < n; i++) {
        const nnf_value *v = &g->values[ids[i]];
        if (json) {
            printf("%s{\"name\": ", i ? ", " : "");
            cli_json_string(stdout, v->name);
            printf(", \"dtype\": \"%s\", \"shape\": ", nnf_dtype_name(v->dtype));
            if (v->shape.rank < 0)
                printf("null");
            else {
                putchar('[');
                for (int d = 0; d < v->shape.rank; d++) {
                    if (d)
                        printf(", ");
                    if (v->shape.dims[d] >= 0)
                        printf("%lld", (long long)v->shape.dims[d]);
                    else if (v->shape.dim_names[d])
                        cli_json_string(stdout, v->shape.dim_names[d]);
                    else
                        printf("null");
                }
                putchar(']');
            }
            putchar('}');
        } else {
            char buf[256];
            printf("  %-32s %-8s %s\n", v->name, nnf_dtype_name(v->dtype), nnf_shape_str(&v->shape, buf, sizeof buf));
        }
    }
}

int cmd_info(int argc, char **argv) {
    cli_common c;
    cli_common_init(&c);
    int json = 0, graph = 0;
    for (int i = 1; i < argc; i++) {
        int r = cli_common_flag(&c, argc, argv, &i);
        if (r > 0)
            continue;
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--graph"))
            graph = 1;
        else
            return cli_usage("info", "MODEL [--json] [--graph]");
    }
    if (!c.model)
        return cli_usage("info", "MODEL [--json] [--graph]");
    /* The statistics describe the model as exported (-O0: only shape
     * arithmetic folded); the optimised graph is loaded for its node count. */
    nnf_model *model = NULL, *optimised = NULL;
    nnf_model_options mo = nnf_model_options_default();
    mo.opt_level = 0;
    nnf_status st = cli_load(&c, mo, c.opt_level > 0, &model);
    if (st != NNF_OK)
        return cli_fail("info", st, nnf_last_error());
    mo.opt_level = c.opt_level;
    if (c.opt_level > 0 && (st = cli_load(&c, mo, false, &optimised)) != NNF_OK) {
        nnf_model_destroy(model);
        return cli_fail("info", st, nnf_last_error());
    }
    const nnf_graph *g = nnf_model_graph(model);
    const nnf_graph *og = nnf_model_graph(optimised ? optimised : model);
    /* a compiled file: as a run at -O (the load at -O0 plans from its ONNX model) */
    const nnf_model *cm = optimised ? optimised : model;

    op_count hist[512];
    int n_hist = 0, live = 0, unknown_cost = 0;
    double flops = 0, unit_flops = 0; /* unit: unknown extents taken as 1 */
    for (int i = 0; i < g->n_nodes; i++) {
        const nnf_node *n = &g->nodes[i];
        int h = 0;
        while (h < n_hist && strcmp(hist[h].name, n->op_type))
            h++;
        if (h == n_hist && n_hist < 512)
            hist[n_hist++] = (op_count){n->op_type, 0};
        if (h < n_hist)
            hist[h].count++;
        if (n->dead)
            continue;
        double f = nnf_node_cost(g, n, false), u = nnf_node_cost(g, n, true);
        unknown_cost += f < 0;
        flops += f > 0 ? f : 0;
        unit_flops += u > 0 ? u : 0;
    }
    for (int i = 0; i < og->n_nodes; i++)
        live += !og->nodes[i].dead;
    /* sort histogram by count, descending */
    for (int a = 0; a < n_hist; a++)
        for (int b = a + 1; b < n_hist; b++)
            if (hist[b].count > hist[a].count) {
                op_count t = hist[a];
                hist[a] = hist[b];
                hist[b] = t;
            }
    int64_t params = 0;
    size_t weight_bytes = 0;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].kind == NNF_VALUE_INITIALIZER) {
            int64_t ne = nnf_shape_numel(&g->values[v].shape);
            params += ne > 0 ? ne : 0;
            weight_bytes += g->values[v].nbytes;
        }
    if (json) {
        printf("{\"model\": ");
        cli_json_string(stdout, c.model);
        printf(", \"producer\": ");
        cli_json_string(stdout, g->producer_name ? g->producer_name : "");
        printf(", \"opset\": %lld, \"compiled\": ", (long long)nnf_graph_opset(g, ""));
        if (!cm->compiled)
            printf("null");
        else if (cm->compiled == 1)
            printf("{\"packed_weights_read_in_place\": true, \"compiled_for_another\": null}");
        else
            printf("{\"packed_weights_read_in_place\": false, \"compiled_for_another\": \"%s\"}",
                   cm->differs);
        printf(", \"inputs\": [");
        print_values(g, g->inputs, g->n_inputs, 1);
        printf("], \"outputs\": [");
        print_values(g, g->outputs, g->n_outputs, 1);
        printf("], \"nodes\": %d, \"nodes_after_optimisation\": %d, \"opt_level\": %d, \"op_histogram\": {", g->n_nodes, live, c.opt_level);
        for (int h = 0; h < n_hist; h++) {
            printf("%s", h ? ", " : "");
            cli_json_string(stdout, hist[h].name);
            printf(": %d", hist[h].count);
        }
        printf("}, \"parameters\": %lld, \"weights_bytes\": %zu, \"gflops\": %.6f, "
               "\"nodes_without_cost\": %d, \"gflops_unknown_extents_1\": %.6f}\n",
               (long long)params, weight_bytes, flops / 1e9, unknown_cost, unit_flops / 1e9);
    } else {
        printf("model:      %s\n", c.model);
        printf("producer:   %s, opset %lld\n", g->producer_name ? g->producer_name : "?",
               (long long)nnf_graph_opset(g, ""));
        if (cm->compiled == 1)
            printf("compiled:   for this build, CPU and options: packed weights read in place\n");
        else if (cm->compiled)
            printf("compiled:   for another %s: planned from its ONNX model (compile it again)\n",
                   cm->differs);
        printf("inputs:\n");
        print_values(g, g->inputs, g->n_inputs, 0);
        printf("outputs:\n");
        print_values(g, g->outputs, g->n_outputs, 0);
        /* a template for shape plans: see runtime/shape_plans.c */
        if (optimised && optimised->shape_plans && !optimised->plans)
            printf("nodes:      %d (folded and fused per set of input shapes, on its first run)\n",
                   g->n_nodes);
        else
            printf("nodes:      %d (%d after constant folding and fusion at -O%d)\n", g->n_nodes,
                   live, c.opt_level);
        printf("parameters: %lld (%.2f MiB)\n", (long long)params, (double)weight_bytes / (1 << 20));
        if (unknown_cost)
            printf("GFLOPs:     %.3f (%d nodes with symbolic shapes not counted; %.3f taking each\n"
                   "            unknown extent as 1; --input-shape counts them)\n",
                   flops / 1e9, unknown_cost, unit_flops / 1e9);
        else
            printf("GFLOPs:     %.3f\n", flops / 1e9);
        printf("operators:\n");
        for (int h = 0; h < n_hist; h++)
            printf("  %-24s %d\n", hist[h].name, hist[h].count);
        if (graph) {
            printf("graph:\n");
            nnf_graph_dump(og, stdout);
        }
    }
    nnf_model_destroy(optimised);
    nnf_model_destroy(model);
    return EXIT_OK;
}

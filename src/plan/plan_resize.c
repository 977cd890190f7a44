/* Plan for Resize: the fast kernels of kernels/resize_fast.h when roi,
 * scales and sizes are known at load (constants) and the tables builder
 * takes the case; otherwise the reference kernel. The plan is only used
 * with the planned shapes, and constant operands cannot change, so the
 * tables built here hold for every run. */
#include "kernels/eltwise_fast.h"
#include "kernels/resize_fast.h"

#include "base/alloc.h"
#include "plan/kernels.h"

#include <stdio.h>
#include <string.h>

/* Output floats per block handed to a thread. */
#define RESIZE_GRAIN 16384

typedef struct resize_state {
    nnf_resize_tables t;
    nnf_isa isa;
    size_t in_numel, out_numel;
    char name[48];
} resize_state;

typedef struct resize_job {
    const resize_state *s;
    const float *x;
    float *y;
} resize_job;

static void resize_range(void *p, size_t first, size_t count) {
    const resize_job *j = p;
    nnf_resize_rows(&j->s->t, j->s->isa, j->x, j->y, first, count);
}

static nnf_status resize_fast_run(NNF_KERNEL_ARGS) {
    const resize_state *s = ctx->state;
    if (in[0]->dtype != NNF_DTYPE_FLOAT32 || in[0]->numel != s->in_numel ||
        out[0]->numel != s->out_numel)
        return nnf_node_error(node, NNF_ERR_SHAPE, "%s: shapes do not match the plan", s->name);
    resize_job j = {s, in[0]->data, out[0]->data};
    size_t rows = (size_t)(s->t.planes * s->t.od * s->t.oh), ow = (size_t)s->t.ow;
    nnf_ew_parallel_ranges(ctx->pool, rows, ow >= RESIZE_GRAIN ? 1 : RESIZE_GRAIN / ow,
                           resize_range, &j);
    return NNF_OK;
}

static void resize_state_free(void *p) {
    resize_state *s = p;
    if (s)
        nnf_resize_tables_free(&s->t);
    nnf_free(s);
}

/* A constant operand as nnf_resize_resolve takes it; 0 when the operand is
 * given but unknown at load. */
static int arg_from_tinfo(const nnf_node *node, const nnf_tinfo *in, int idx, nnf_resize_arg *a) {
    *a = (nnf_resize_arg){0};
    if (idx < 0 || idx >= node->n_inputs || !in[idx].present)
        return 1;
    int64_t n = nnf_shape_numel(&in[idx].shape);
    if (n < 0)
        return 0;
    if (n > 0 && !in[idx].data)
        return 0;
    a->present = n > 0;
    a->known = 1;
    a->dtype = in[idx].dtype;
    a->count = n;
    a->data = in[idx].data;
    return 1;
}

/* The tables of the fast kernels for a Resize whose roi, scales and sizes
 * are known at load; t->kind NONE (nothing allocated) when the reference
 * kernel must run. Shared with the blocked nearest Resize (plan_nchwc.c). */
nnf_status nnf_resize_tables_for(const nnf_node *node, const nnf_tinfo *in, const nnf_tinfo *out,
                                 nnf_resize_tables *t) {
    const nnf_resize_params *p = node->params;
    const nnf_shape *xs = &in[0].shape, *ys = &out[0].shape;
    memset(t, 0, sizeof *t);
    if (!p || in[0].dtype != NNF_DTYPE_FLOAT32 || !nnf_shape_known(xs) || !nnf_shape_known(ys) ||
        xs->rank != ys->rank || xs->rank < 2 || nnf_shape_numel(ys) <= 0)
        return NNF_OK;
    nnf_resize_arg roi, scales, sizes;
    if (!arg_from_tinfo(node, in, p->roi_input, &roi) ||
        !arg_from_tinfo(node, in, p->scales_input, &scales) ||
        !arg_from_tinfo(node, in, p->sizes_input, &sizes))
        return NNF_OK;
    int64_t od[NNF_MAX_RANK];
    float sc[NNF_MAX_RANK], r[2 * NNF_MAX_RANK];
    if (nnf_resize_resolve(node, p, xs->rank, xs->dims, &roi, &scales, &sizes, od, sc, r) !=
        NNF_OK) {
        nnf_error_clear(); /* the reference kernel reports it */
        return NNF_OK;
    }
    for (int a = 0; a < xs->rank; a++)
        if (od[a] != ys->dims[a])
            return NNF_OK;
    nnf_status st = nnf_resize_tables_build(p, xs->rank, xs->dims, ys->dims, sc, r, t);
    return st == NNF_OK ? st : nnf_node_error(node, st, "out of memory for resize tables");
}

nnf_status nnf_plan_resize(NNF_PLAN_ARGS) {
    resize_state *s = nnf_calloc(1, sizeof *s);
    if (!s)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for a kernel plan");
    nnf_status st = nnf_resize_tables_for(node, in, out, &s->t);
    if (st != NNF_OK || s->t.kind == NNF_RSZ_NONE) {
        resize_state_free(s);
        return st;
    }
    const nnf_shape *xs = &in[0].shape, *ys = &out[0].shape;
    s->isa = nnf_cpu_isa() >= NNF_ISA_AVX2 ? NNF_ISA_AVX2 : NNF_ISA_SCALAR;
    s->in_numel = (size_t)nnf_shape_numel(xs);
    s->out_numel = (size_t)nnf_shape_numel(ys);
    const char *how = s->t.kind == NNF_RSZ_LINEAR      ? (s->t.didx ? "trilinear" : "linear")
                      : s->t.cols == NNF_RSZ_COLS_COPY ? "nearest_rows"
                      : s->t.cols == NNF_RSZ_COLS_DUP && s->t.dup == 2 && s->isa != NNF_ISA_SCALAR
                          ? "nearest_2x"
                          : "nearest_table";
    snprintf(s->name, sizeof s->name, "f32_resize_%s_%s", how, nnf_isa_name(s->isa));
    plan->name = s->name;
    plan->run = resize_fast_run;
    plan->state = s;
    plan->free_state = resize_state_free;
    return NNF_OK;
}

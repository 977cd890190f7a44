/* The pass pipeline: which passes run, in which order, at which -O level. */
#include "passes/pass.h"

#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

nnf_status nnf_pass_fold_batchnorm(nnf_pass_ctx *ctx);
nnf_status nnf_pass_fuse_scale(nnf_pass_ctx *ctx);
nnf_status nnf_pass_fuse_residual(nnf_pass_ctx *ctx);
nnf_status nnf_pass_fuse_activation(nnf_pass_ctx *ctx);
nnf_status nnf_pass_fuse_layernorm(nnf_pass_ctx *ctx);
nnf_status nnf_pass_fold_transpose(nnf_pass_ctx *ctx);
nnf_status nnf_pass_fold_slice_concat(nnf_pass_ctx *ctx);
nnf_status nnf_pass_fuse_attention(nnf_pass_ctx *ctx);
nnf_status nnf_pass_layout_nchwc(nnf_pass_ctx *ctx);
nnf_status nnf_pass_fuse_pw_dw(nnf_pass_ctx *ctx);
nnf_status nnf_pass_fuse_conv_transpose(nnf_pass_ctx *ctx);

static const nnf_pass pipeline[] = {
    /* Conv → BN: scale weights, shift bias */
    {"fold_batchnorm", 1, nnf_pass_fold_batchnorm, 1},
    /* MatMul → Mul/Div(scalar): its alpha */
    {"fuse_scale", 2, nnf_pass_fuse_scale, 0},
    /* Conv → Add(x): residual epilogue */
    {"fuse_residual", 2, nnf_pass_fuse_residual, 0},
    /* Conv/Gemm/MatMul (→ Reshape/Transpose…) → act (SiLU, GELU chains too) */
    {"fuse_activation", 2, nnf_pass_fuse_activation, 0},
    /* Conv+act → Add(x): residual after the act */
    {"fuse_residual", 2, nnf_pass_fuse_residual, 0},
    /* ReduceMean…Div·gamma+beta → LayerNormalization */
    {"fuse_layernorm", 2, nnf_pass_fuse_layernorm, 0},
    /* Transpose → MatMul operand: read in place, permuted */
    {"fold_transpose", 2, nnf_pass_fold_transpose, 0},
    /* MatMul (Q·Kᵀ, scaled, masked) → Softmax → MatMul (·V): one Attention */
    {"fuse_attention", 2, nnf_pass_fuse_attention, 0},
    /* Concat of a Slice of X at its own place: X with the other inputs written over */
    {"fold_slice_concat", 2, nnf_pass_fold_slice_concat, 0},
    /* convs and their neighbours on NCHWc8 blocked tensors */
    {"layout_nchwc", 3, nnf_pass_layout_nchwc, 0},
    /* blocked 1x1 Conv → depthwise Conv: one ConvPwDw */
    {"fuse_pw_dw", 3, nnf_pass_fuse_pw_dw, 0},
    /* NCHW-writing Conv (→ Reshape) → Transpose: writes channel-last */
    {"fuse_conv_transpose", 3, nnf_pass_fuse_conv_transpose, 0},
};

int nnf_pass_listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !strncmp(p, name, n))
            return 1;
        p += l + (e ? 1 : 0);
    }
    return 0;
}

nnf_status nnf_passes_run(nnf_graph *g, int opt_level, const char *disabled) {
    const char *env = getenv("NNF_DISABLE_PASSES");
    nnf_pass_ctx ctx = {.graph = g};
    ctx.uses = nnf_calloc((size_t)g->n_values + 1, sizeof(int));
    if (!ctx.uses)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory running graph passes");
    nnf_status st = NNF_OK;
    bool aligned = false;
    for (size_t i = 0; i < sizeof pipeline / sizeof pipeline[0]; i++) {
        const nnf_pass *p = &pipeline[i];
        if (!p->bytewise && !aligned) {
            aligned = true;
            if ((st = nnf_graph_align_values(g, NNF_PENDING_PLAN, NULL)) != NNF_OK)
                break;
        }
        if (opt_level < p->min_level || nnf_pass_listed(disabled, p->name) ||
            nnf_pass_listed(env, p->name))
            continue;
        ctx.fusions = 0;
        nnf_pass_count_uses(&ctx);
        st = p->run(&ctx);
        if (st != NNF_OK) {
            nnf_error_prefix(st, "pass %s", p->name);
            break;
        }
        NNF_LOG_INFO("pass %s: %d rewrite%s", p->name, ctx.fusions, ctx.fusions == 1 ? "" : "s");
        /* passes may add values: resize the use counts before counting again */
        int *u = nnf_realloc(ctx.uses, ((size_t)g->n_values + 1) * sizeof(int));
        if (!u) {
            st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory running graph passes");
            break;
        }
        ctx.uses = u;
        if (ctx.fusions)
            nnf_pass_release_unused(&ctx);
    }
    nnf_free(ctx.uses);
    if (st == NNF_OK)
        st = nnf_graph_toposort(g);
    return st;
}

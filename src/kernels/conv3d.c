/* 3-D Conv as implicit-im2col GEMMs, one per output depth (conv3d.h). */
#include "kernels/conv3d.h"

#include "base/alloc.h"

#include <stdio.h>
#include <string.h>

bool nnf_conv3d_fits(const nnf_conv3d_shape *s) {
    return s->n && s->c && s->d && s->h && s->w && s->oc && s->group && !(s->c % s->group) &&
           !(s->oc % s->group) && s->kd && s->kh && s->kw && s->sd && s->sh && s->sw && s->dd &&
           s->dh && s->dw && s->od && s->oh && s->ow;
}

void nnf_conv3d_kernel_destroy(nnf_conv3d_kernel *k) {
    if (!k)
        return;
    nnf_gemm_packed_destroy_all(k->packed_w, k->s.group);
    nnf_free(k);
}

nnf_status nnf_conv3d_kernel_create(const nnf_conv3d_shape *s, nnf_isa isa, const float *w,
                                    nnf_conv3d_kernel **out) {
    *out = NULL;
    if (!nnf_conv3d_fits(s))
        return nnf_error(NNF_ERR_UNSUPPORTED,
                         "3-D convolution: not a shape the GEMM kernel computes");
    size_t plane, taps, kdim, all;
    if (!nnf_mul_size(s->kd, s->kh, &plane) || !nnf_mul_size(plane, s->kw, &taps) ||
        !nnf_mul_size(s->c / s->group, taps, &kdim) || !nnf_mul_size(kdim, s->oc, &all))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "3-D convolution weights are too large");
    nnf_conv3d_kernel *k = nnf_calloc(1, sizeof *k);
    if (!k || !(k->packed_w = nnf_calloc(s->group, sizeof *k->packed_w))) {
        nnf_free(k);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for a 3-D convolution kernel");
    }
    k->s = *s;
    k->isa = isa > nnf_cpu_get()->max_isa ? nnf_cpu_get()->max_isa : isa;
    k->cfg = nnf_gemm_cfg_for(k->isa);
    k->plane = (nnf_conv2d_shape){.n = 1,
                                  .c = s->c / s->group * s->kd,
                                  .h = s->h,
                                  .w = s->w,
                                  .oc = s->oc / s->group,
                                  .group = 1,
                                  .kh = s->kh,
                                  .kw = s->kw,
                                  .sh = s->sh,
                                  .sw = s->sw,
                                  .dh = s->dh,
                                  .dw = s->dw,
                                  .pt = s->pt,
                                  .pl = s->pl,
                                  .oh = s->oh,
                                  .ow = s->ow};
    size_t ocg = s->oc / s->group;
    for (size_t g = 0; g < s->group; g++) {
        nnf_status st =
            nnf_gemm_pack_a(k->cfg, ocg, kdim, w + g * ocg * kdim, kdim, 0, &k->packed_w[g]);
        if (st != NNF_OK) {
            nnf_conv3d_kernel_destroy(k);
            return st;
        }
    }
    /* "f32_gemm_6x16_avx2" -> "f32_conv3d_im2col_6x16_avx2" */
    snprintf(k->name, sizeof k->name, "f32_conv3d_im2col_%s", k->cfg->name + strlen("f32_gemm_"));
    *out = k;
    return NNF_OK;
}

nnf_status nnf_conv3d_kernel_run(const nnf_conv3d_kernel *k, const float *x, float *y,
                                 const nnf_epilogue *ep, nnf_threadpool *pool) {
    const nnf_conv3d_shape *s = &k->s;
    nnf_epilogue plain = nnf_epilogue_default();
    if (!ep)
        ep = &plain;
    if (ep->bias && ep->bias_kind != NNF_BIAS_PER_ROW)
        return nnf_error(NNF_ERR_INTERNAL, "%s: convolution bias must be per output channel",
                         k->name);
    size_t icg = s->c / s->group, ocg = s->oc / s->group, hw = s->h * s->w, ohw = s->oh * s->ow;
    size_t dhw = s->d * hw, odhw = s->od * ohw, kdim = k->plane.c * s->kh * s->kw;
    const float **planes = nnf_malloc(k->plane.c * sizeof *planes);
    if (!planes)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory", k->name);
    int vec = k->isa >= NNF_ISA_AVX2 && k->cfg->nr % 8 == 0 && hw <= (size_t)INT32_MAX / 2;
    nnf_status st = NNF_OK;
    for (size_t b = 0; b < s->n && st == NNF_OK; b++)
        for (size_t g = 0; g < s->group && st == NNF_OK; g++) {
            nnf_epilogue e = nnf_epilogue_at_group(ep, s->oc, ocg, odhw, b, g);
            const float *xg = x + (b * s->c + g * icg) * dhw;
            nnf_gemm_src a = nnf_gemm_src_packed(k->packed_w[g]);
            for (size_t od = 0; od < s->od && st == NNF_OK; od++) {
                /* the planes the taps of output depth od read, NULL in the padding */
                for (size_t ic = 0; ic < icg; ic++)
                    for (size_t kd = 0; kd < s->kd; kd++) {
                        ptrdiff_t id = (ptrdiff_t)(od * s->sd + kd * s->dd) - (ptrdiff_t)s->pf;
                        planes[ic * s->kd + kd] = id >= 0 && id < (ptrdiff_t)s->d
                                                      ? xg + ic * dhw + (size_t)id * hw
                                                      : NULL;
                    }
                nnf_im2col_ctx ctx = {.x = xg, .s = &k->plane, .planes = planes};
                nnf_gemm_src bsrc = {.pack = vec ? nnf_im2col_pack_avx2 : nnf_im2col_pack_scalar,
                                     .pack_ctx = &ctx};
                nnf_epilogue ed = e;
                if (ed.residual)
                    ed.residual += od * ohw;
                st = nnf_gemm_run(k->cfg, ocg, ohw, kdim, &a, &bsrc,
                                  y + (b * s->oc + g * ocg) * odhw + od * ohw, odhw, &ed, pool);
            }
        }
    nnf_free(planes);
    return st;
}

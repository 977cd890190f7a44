/* Depthwise convolution (group == C == OC): the kernel choice, the weight
 * copy and the driver that spreads planes over the thread pool. The kernels
 * are nnf_dw_plane_* (one plane; 3x3 or 5x5 at stride 1 or 2 on AVX2),
 * nnf_dw_c8_avx2 (8 planes, channel-interleaved, the same shapes) and
 * nnf_dw_any_avx2 and the scalar plane kernel (any window: 1-D convs,
 * 7x7, dilations, strides past 2). */
#include "kernels/conv_fast.h"

#include "base/alloc.h"
#include "base/packs.h"

#include <stdio.h>
#include <string.h>

/* The plane kernel computes 8 outputs of a row per vector and 4 rows per
 * pass; at 7 outputs wide each row is one vector with a lane idle and the
 * per-pass and per-row-preparation costs are spread over 7 outputs, so
 * there the channel-interleaved kernel (two 8x8 transposes per 8 outputs
 * of 8 channels) is faster. At 14 wide they are close: in MobileNetV2 (1
 * thread, ms plane / c8) 384@14 s1 0.178 / 0.147, 576@14 s1 0.27 /
 * 0.23-0.27, but 192 28->14 s2 0.116 / 0.132 (the c8 kernel's strided
 * reads of its interleaved rows). From 28 wide the plane kernel wins
 * clearly: 192@28 0.13-0.20 / 0.24, 144@56 0.38 / 0.73, 96 112->56 s2
 * 0.39-0.65 / 0.76-0.90 (measured right after the 1x1 conv that writes
 * the input). */
bool nnf_dw_specialised(const nnf_conv2d_shape *s) {
    return s->kh == s->kw && (s->kh == 3 || s->kh == 5 || s->kh == 7) && s->sh == s->sw &&
           (s->sh == 1 || s->sh == 2) && s->dh == 1 && s->dw == 1 && s->pt < s->kh && s->pl < s->kw;
}

/* On the AVX-512 tier the plane kernel's 16-lane form (x86/dwconv_avx512.c)
 * takes every 7x7, whose 49 FMAs an output make it FMA-bound (single-op,
 * 1 thread, ms against the 8-lane plane / c8 kernels: ConvNeXt-T's 96@56
 * 0.20 / 0.43, 192@28 0.11 / 0.26, 384@14 0.068 / 0.13 (c8), 768@7 0.060 /
 * 0.093 (c8)), and the stride-1 3x3/5x5 more than 8 wide (384@14 0.036
 * against c8's 0.048, 576@14 0.053 / 0.071; even with the 8-lane plane
 * kernel from 28 wide). Stride 2 and 8-wide rows stay on the AVX2 kernels
 * (576 14 -> 7 0.059 against c8's 0.036, 192 28 -> 14 0.041 / 0.034). */
nnf_dw_kernel nnf_dw_select(const nnf_conv2d_shape *s, nnf_isa isa) {
    if (isa < NNF_ISA_AVX2)
        return NNF_DW_PLANE_SCALAR;
    if (!nnf_dw_specialised(s))
        return NNF_DW_ANY_AVX2;
    size_t wp = (s->ow - 1) * s->sw + s->kw;
    if (isa >= NNF_ISA_AVX512 && (s->kh == 7 || (s->sw == 1 && s->ow > 8)))
        return NNF_DW_PLANE_AVX512;
    if ((s->ow <= 8 || (s->ow <= 16 && s->sw == 1)) && wp <= NNF_DW_C8_MAX / s->kh)
        return NNF_DW_C8_AVX2;
    return NNF_DW_PLANE_AVX2;
}

const char *nnf_dw_kernel_name(nnf_dw_kernel kern) {
    switch (kern) {
    case NNF_DW_PLANE_SCALAR: return "scalar";
    case NNF_DW_PLANE_AVX2: return "r4_avx2";
    case NNF_DW_C8_AVX2: return "c8_avx2";
    case NNF_DW_ANY_AVX2: return "any_avx2";
    case NNF_DW_PLANE_AVX512: return "r4_avx512";
    }
    return "?";
}

nnf_status nnf_conv_dw_prepare(nnf_conv_kernel *k, const float *w) {
    const nnf_conv2d_shape *s = &k->s;
    size_t n;
    if (!nnf_mul_size(s->c, s->kh * s->kw, &n))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "depthwise weights are too large");
    bool ready;
    k->dw_w = nnf_pack_alloc(n * sizeof(float), &ready);
    if (!k->dw_w)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for depthwise weights");
    if (!ready)
        memcpy(k->dw_w, w, n * sizeof(float));
    k->dw_kern = (int)nnf_dw_select(s, k->isa);
    snprintf(k->name, sizeof k->name, "f32_dwconv%zux%zu_s%zu_%s", s->kh, s->kw, s->sh,
             nnf_dw_kernel_name((nnf_dw_kernel)k->dw_kern));
    return NNF_OK;
}

/* Output (oh, o) reads input rows oh sh - pt + i dh and columns
 * o sw - pl + j dw. The inside outputs (window within the plane) skip the
 * bounds checks. Each sum is formed row i, then tap j, like the AVX2
 * kernels. */
void nnf_dw_plane_scalar(const nnf_conv2d_shape *s, const float *x, const float *w, float *y,
                         const nnf_tile_ep *t) {
    const size_t kh = s->kh, kw = s->kw;
    const ptrdiff_t h = (ptrdiff_t)s->h, wi = (ptrdiff_t)s->w;
    const ptrdiff_t spanh = (ptrdiff_t)((kh - 1) * s->dh), spanw = (ptrdiff_t)((kw - 1) * s->dw);
    for (size_t oh = 0; oh < s->oh; oh++) {
        ptrdiff_t ih0 = (ptrdiff_t)(oh * s->sh) - (ptrdiff_t)s->pt;
        int rows_in = ih0 >= 0 && ih0 + spanh < h;
        nnf_tile_ep tr = *t;
        if (tr.residual)
            tr.residual += oh * s->ow;
        for (size_t o = 0; o < s->ow; o++) {
            ptrdiff_t iw0 = (ptrdiff_t)(o * s->sw) - (ptrdiff_t)s->pl;
            float acc = 0.0f;
            if (rows_in && iw0 >= 0 && iw0 + spanw < wi) {
                const float *xp = x + (size_t)ih0 * s->w + (size_t)iw0;
                for (size_t i = 0; i < kh; i++)
                    for (size_t j = 0; j < kw; j++)
                        acc += w[i * kw + j] * xp[i * s->dh * s->w + j * s->dw];
            } else {
                for (size_t i = 0; i < kh; i++) {
                    ptrdiff_t ih = ih0 + (ptrdiff_t)(i * s->dh);
                    if (ih < 0 || ih >= h)
                        continue;
                    for (size_t j = 0; j < kw; j++) {
                        ptrdiff_t iw = iw0 + (ptrdiff_t)(j * s->dw);
                        if (iw >= 0 && iw < wi)
                            acc += w[i * kw + j] * x[(size_t)ih * s->w + (size_t)iw];
                    }
                }
            }
            y[oh * s->ow + o] = nnf_epilogue_scalar(&tr, 0, o, acc);
        }
    }
}

typedef struct dw_job {
    const nnf_conv_kernel *k;
    const float *x;
    float *y;
    const nnf_epilogue *ep;
} dw_job;

/* One plane (image b = plane / C, channel plane % C). */
static void dw_plane_task(void *ctx, size_t plane) {
    const dw_job *j = ctx;
    const nnf_conv2d_shape *s = &j->k->s;
    size_t ch = plane % s->c, ohw = s->oh * s->ow;
    const float *w = j->k->dw_w + ch * s->kh * s->kw;
    nnf_tile_ep t = {.ep = j->ep,
                     .bias = j->ep->bias ? j->ep->bias + ch : NULL,
                     .residual = j->ep->residual ? j->ep->residual + plane * ohw : NULL};
    const float *x = j->x + plane * s->h * s->w;
    if (j->k->dw_kern == NNF_DW_PLANE_AVX512)
        nnf_dw_plane_avx512(s, x, w, j->y + plane * ohw, &t);
    else if (j->k->dw_kern == NNF_DW_PLANE_AVX2)
        nnf_dw_plane_avx2(s, x, w, j->y + plane * ohw, &t);
    else if (j->k->dw_kern == NNF_DW_ANY_AVX2)
        nnf_dw_any_avx2(s, x, w, j->y + plane * ohw, &t);
    else
        nnf_dw_plane_scalar(s, x, w, j->y + plane * ohw, &t);
}

/* One block of up to 8 channels of one image (nnf_dw_c8_avx2). */
static void dw_c8_task(void *ctx, size_t item) {
    const dw_job *j = ctx;
    const nnf_conv2d_shape *s = &j->k->s;
    size_t blocks = (s->c + 7) / 8, b = item / blocks, c0 = item % blocks * 8;
    size_t nc = s->c - c0 < 8 ? s->c - c0 : 8, plane = b * s->c + c0, ohw = s->oh * s->ow;
    const float *res = j->ep->residual ? j->ep->residual + plane * ohw : NULL;
    nnf_dw_c8_avx2(s, j->k->dw_w, j->x + plane * s->h * s->w, j->y + plane * ohw, c0, nc, j->ep, res);
}

nnf_status nnf_conv_dw_run(const nnf_conv_kernel *k, const float *x, float *y,
                           const nnf_epilogue *ep, nnf_threadpool *pool) {
    const nnf_conv2d_shape *s = &k->s;
    dw_job j = {.k = k, .x = x, .y = y, .ep = ep};
    if (k->dw_kern == NNF_DW_C8_AVX2)
        nnf_parallel_for(pool, s->n * ((s->c + 7) / 8), dw_c8_task, &j);
    else
        nnf_parallel_for(pool, s->n * s->c, dw_plane_task, &j);
    return NNF_OK;
}

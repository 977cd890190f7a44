/* 3-D Conv as implicit-im2col GEMMs, one per output depth (conv3d.h). */
#include "kernels/conv3d.h"

#include "base/alloc.h"

#include <stdatomic.h>
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

/* A K block for the PLANES form: the largest divisor of a plane's rows that
 * is a multiple of 8 and at most the tier's kc (so nnf_gemm_kc cuts one
 * plane and KD planes alike into whole blocks of it); 0 when that would
 * leave blocks under 64 rows of a plane of more. */
static size_t planes_kc(const nnf_gemm_cfg *cfg, size_t rows) {
    if (rows % 8)
        return 0;
    for (size_t j = 1; j <= rows / 8; j++) {
        size_t kc = rows / j;
        if (rows % j == 0 && kc % 8 == 0 && kc <= cfg->kc)
            return kc >= 64 || kc == rows ? kc : 0;
    }
    return 0;
}

nnf_status nnf_conv3d_kernel_create(const nnf_conv3d_shape *s, nnf_isa isa, const float *w,
                                    nnf_conv3d_kernel **out) {
    *out = NULL;
    if (!nnf_conv3d_fits(s))
        return nnf_error(NNF_ERR_UNSUPPORTED,
                         "3-D convolution: not a shape the GEMM kernel computes");
    size_t taps, plane_k, kdim, all;
    size_t icg = s->c / s->group, ocg = s->oc / s->group;
    if (!nnf_mul_size(s->kh, s->kw, &taps) || !nnf_mul_size(icg, taps, &plane_k) ||
        !nnf_mul_size(plane_k, s->kd, &kdim) || !nnf_mul_size(kdim, s->oc, &all))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "3-D convolution weights are too large");
    nnf_conv3d_kernel *k = nnf_calloc(1, sizeof *k);
    if (!k || !(k->packed_w = nnf_calloc(s->group, sizeof *k->packed_w))) {
        nnf_free(k);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for a 3-D convolution kernel");
    }
    k->s = *s;
    k->isa = isa > nnf_cpu_get()->max_isa ? nnf_cpu_get()->max_isa : isa;
    k->cfg = nnf_gemm_cfg_for(k->isa);
    size_t kc = s->dd == 1 ? planes_kc(k->cfg, plane_k) : 0;
    k->by_planes = kc != 0;
    k->plane_k = plane_k;
    if (k->by_planes) {
        k->plane_cfg = *k->cfg;
        k->plane_cfg.kc = kc;
        k->cfg = &k->plane_cfg;
        /* the ring of KD slices in half of L2 */
        size_t nr = k->cfg->nr, cols = nnf_cpu_get()->l2 / 2 / (s->kd * plane_k * sizeof(float));
        size_t ohw_pad = (s->oh * s->ow + nr - 1) / nr * nr;
        cols = cols / nr * nr;
        k->block_cols = cols < nr ? nr : cols > ohw_pad ? ohw_pad : cols;
    }
    k->plane = (nnf_conv2d_shape){.n = 1,
                                  .c = k->by_planes ? icg : icg * s->kd,
                                  .h = s->h,
                                  .w = s->w,
                                  .oc = ocg,
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
    /* PLANES: a group's weights reordered kd-major, (oc, kd, ic, kh, kw) */
    float *kd_major = k->by_planes ? nnf_malloc(ocg * kdim * sizeof(float)) : NULL;
    nnf_status st = k->by_planes && !kd_major
                        ? nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for 3-D conv weights")
                        : NNF_OK;
    for (size_t g = 0; g < s->group && st == NNF_OK; g++) {
        const float *wg = w + g * ocg * kdim;
        if (kd_major) {
            for (size_t o = 0; o < ocg; o++)
                for (size_t ic = 0; ic < icg; ic++)
                    for (size_t d = 0; d < s->kd; d++)
                        memcpy(kd_major + (o * s->kd + d) * plane_k + ic * taps,
                               wg + ((o * icg + ic) * s->kd + d) * taps, taps * sizeof(float));
            wg = kd_major;
        }
        st = nnf_gemm_pack_a(k->cfg, ocg, kdim, wg, kdim, 0, &k->packed_w[g]);
    }
    nnf_free(kd_major);
    if (st != NNF_OK) {
        nnf_conv3d_kernel_destroy(k);
        return st;
    }
    /* "f32_gemm_6x16_avx2" -> "f32_conv3d_planes_6x16_avx2" */
    snprintf(k->name, sizeof k->name, "f32_conv3d_%s_%s", k->by_planes ? "planes" : "im2col",
             k->cfg->name + strlen("f32_gemm_"));
    *out = k;
    return NNF_OK;
}

static nnf_gemm_pack_fn im2col_packer(const nnf_conv3d_kernel *k) {
    size_t hw = k->s.h * k->s.w;
    return k->isa >= NNF_ISA_AVX2 && k->cfg->nr % 8 == 0 && hw <= (size_t)INT32_MAX / 2
               ? nnf_im2col_pack_avx2
               : nnf_im2col_pack_scalar;
}

/* ---- PLANES ------------------------------------------------------------------------ */

typedef struct planes_job {
    const nnf_conv3d_kernel *k;
    const float *x;
    float *y;
    const nnf_epilogue *ep;
    size_t blocks;     /* column blocks an image's group */
    atomic_int failed; /* a task that could not run (no scratch, a GEMM error) */
} planes_job;

/* Task i: image b, group g, output columns [c0, c0 + nb) (column block i %
 * blocks) through every output depth. A ring of KD slots in L2 holds the
 * packed slices (those columns) of the last KD input planes, virtual plane
 * v (input depth v - pf, zeros outside the input) in slot v % KD; output
 * depth od needs planes od sd .. od sd + KD - 1, packs those it lacks, and
 * hands the GEMM their K blocks in order. */
static void planes_task(void *p, size_t i) {
    planes_job *j = p;
    const nnf_conv3d_kernel *k = j->k;
    const nnf_conv3d_shape *s = &k->s;
    const nnf_gemm_cfg *cfg = k->cfg;
    size_t icg = s->c / s->group, ocg = s->oc / s->group, hw = s->h * s->w, dhw = s->d * hw;
    size_t ohw = s->oh * s->ow, odhw = s->od * ohw;
    size_t bg = i / j->blocks, b = bg / s->group, g = bg % s->group;
    size_t c0 = i % j->blocks * k->block_cols;
    size_t nb = ohw - c0 < k->block_cols ? ohw - c0 : k->block_cols;
    size_t pad = (nb + cfg->nr - 1) / cfg->nr * cfg->nr, kc = cfg->kc;
    size_t per_plane = k->plane_k / kc, slot_floats = k->plane_k * pad;
    /* the ring, then the K blocks' table, then a plane's channel table */
    size_t ring = s->kd * slot_floats;
    float *buf = nnf_thread_scratch(NNF_SCRATCH_CONV_COLS, ring);
    float **blocks = nnf_malloc(s->kd * per_plane * sizeof *blocks + icg * sizeof(float *));
    if (!buf || !blocks) {
        nnf_free(blocks);
        atomic_store(&j->failed, 1);
        return;
    }
    const float **chan = (const float **)(blocks + s->kd * per_plane);
    const float *xg = j->x + (b * s->c + g * icg) * dhw;
    nnf_epilogue e = nnf_epilogue_at_group(j->ep, s->oc, ocg, odhw, b, g);
    nnf_gemm_src a = nnf_gemm_src_packed(k->packed_w[g]);
    nnf_gemm_pack_fn pack = im2col_packer(k);
    size_t next = 0; /* virtual planes [.., next) have been packed */
    for (size_t od = 0; od < s->od; od++) {
        size_t v0 = od * s->sd;
        for (size_t v = next > v0 ? next : v0; v < v0 + s->kd; v++) {
            ptrdiff_t id = (ptrdiff_t)v - (ptrdiff_t)s->pf;
            for (size_t ic = 0; ic < icg; ic++)
                chan[ic] = id >= 0 && id < (ptrdiff_t)s->d ? xg + ic * dhw + (size_t)id * hw : NULL;
            nnf_im2col_ctx ctx = {.s = &k->plane, .planes = chan};
            float *slot = buf + v % s->kd * slot_floats;
            for (size_t pc = 0; pc < k->plane_k; pc += kc)
                pack(&ctx, c0, nb, pc, kc, cfg->nr, slot + pc * pad);
        }
        next = v0 + s->kd;
        for (size_t t = 0; t < s->kd; t++)
            for (size_t q = 0; q < per_plane; q++)
                blocks[t * per_plane + q] = buf + (v0 + t) % s->kd * slot_floats + q * kc * pad;
        nnf_gemm_packed bv = {.side = NNF_GEMM_B,
                              .mn = nb,
                              .k = s->kd * k->plane_k,
                              .kc = kc,
                              .r = cfg->nr,
                              .mn_pad = pad,
                              .blocks = blocks,
                              .tail_from = nb,
                              .tail = cfg->nr};
        nnf_gemm_src bsrc = nnf_gemm_src_packed(&bv);
        nnf_epilogue ed = e;
        if (ed.residual)
            ed.residual += od * ohw + c0;
        if (nnf_gemm_run(cfg, ocg, nb, bv.k, &a, &bsrc,
                         j->y + (b * s->oc + g * ocg) * odhw + od * ohw + c0, odhw, &ed,
                         NULL) != NNF_OK)
            atomic_store(&j->failed, 1);
    }
    nnf_free(blocks);
}

/* ---- IM2COL ------------------------------------------------------------------------ */

static nnf_status run_im2col(const nnf_conv3d_kernel *k, const nnf_gemm_packed *w, const float *xg,
                             float *yg, const nnf_epilogue *e, const float **planes,
                             nnf_threadpool *pool) {
    const nnf_conv3d_shape *s = &k->s;
    size_t hw = s->h * s->w, dhw = s->d * hw, ohw = s->oh * s->ow, icg = s->c / s->group;
    nnf_gemm_src a = nnf_gemm_src_packed(w);
    for (size_t od = 0; od < s->od; od++) {
        /* the planes the taps of output depth od read, NULL in the padding */
        for (size_t ic = 0; ic < icg; ic++)
            for (size_t kd = 0; kd < s->kd; kd++) {
                ptrdiff_t id = (ptrdiff_t)(od * s->sd + kd * s->dd) - (ptrdiff_t)s->pf;
                planes[ic * s->kd + kd] =
                    id >= 0 && id < (ptrdiff_t)s->d ? xg + ic * dhw + (size_t)id * hw : NULL;
            }
        nnf_im2col_ctx ctx = {.x = xg, .s = &k->plane, .planes = planes};
        nnf_gemm_src bsrc = {.pack = im2col_packer(k), .pack_ctx = &ctx};
        nnf_epilogue ed = *e;
        if (ed.residual)
            ed.residual += od * ohw;
        nnf_status st = nnf_gemm_run(k->cfg, k->plane.oc, ohw, k->plane_k * s->kd, &a, &bsrc,
                                     yg + od * ohw, s->od * ohw, &ed, pool);
        if (st != NNF_OK)
            return st;
    }
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
    size_t icg = s->c / s->group, ocg = s->oc / s->group;
    size_t dhw = s->d * s->h * s->w, odhw = s->od * s->oh * s->ow;
    if (k->by_planes) {
        size_t ohw = s->oh * s->ow;
        planes_job j = {k, x, y, ep, (ohw + k->block_cols - 1) / k->block_cols, 0};
        nnf_parallel_for(pool, s->n * s->group * j.blocks, planes_task, &j);
        return atomic_load(&j.failed)
                   ? nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory", k->name)
                   : NNF_OK;
    }
    /* the (channel, depth tap) planes of one output depth */
    const float **planes = nnf_malloc(icg * s->kd * sizeof *planes);
    if (!planes)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory", k->name);
    nnf_status st = NNF_OK;
    for (size_t b = 0; b < s->n && st == NNF_OK; b++)
        for (size_t g = 0; g < s->group && st == NNF_OK; g++) {
            nnf_epilogue e = nnf_epilogue_at_group(ep, s->oc, ocg, odhw, b, g);
            st = run_im2col(k, k->packed_w[g], x + (b * s->c + g * icg) * dhw,
                            y + (b * s->oc + g * ocg) * odhw, &e, planes, pool);
        }
    nnf_free(planes);
    return st;
}

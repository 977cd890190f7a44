/* Grouped convolution with 2 or 4 channels a group on NCHWc8, as cpg
 * depthwise convs (kernels/nchwc.h, nnf_nchwc_gconv). Work items are
 * (image, pair of blocks) x a band of output rows; for each, pass j spreads
 * lane j of every group over the group's lanes in the band's input rows (a
 * buffer in L2) and runs the depthwise rows over them (on AVX-512 the pair
 * as one, nnf_nchwc_dw_pair_ok), the passes' sums carried in two more band
 * buffers as the next pass's residual. Every pixel is computed the same
 * way whatever the split, so threads never change results. */
#include "kernels/nchwc.h"

#include "base/alloc.h"
#include "kernels/x86/nchwc_avx2.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

bool nnf_nchwc_gconv_supported(const nnf_conv2d_shape *s) {
    if (!s || s->group < 2 || s->c != s->oc || s->c % s->group || s->kh == 0 || s->kw == 0 ||
        s->sh == 0 || s->sw == 0 || s->dh == 0 || s->dw == 0 || s->c > SIZE_MAX / 16)
        return false;
    size_t cpg = s->c / s->group;
    return (cpg == 2 || cpg == 4) && nnf_nchwc_band_fits(s, 2);
}

/* Channels a group: 2 or 4. */
static size_t cpg_of(const nnf_nchwc_gconv *k) {
    return k->s.c / k->s.group;
}

nnf_status nnf_nchwc_gconv_create(const nnf_conv2d_shape *s, nnf_isa isa, const float *w,
                                  nnf_nchwc_gconv **out) {
    if (!out || !s || !w)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT,
                         "NCHWc grouped conv: NULL shape, weights or result");
    *out = NULL;
    if (!nnf_nchwc_gconv_supported(s))
        return nnf_error(
            NNF_ERR_UNSUPPORTED,
            "NCHWc grouped conv: group %zu, %zu -> %zu channels is not 2 or 4 channels a group",
            s->group, s->c, s->oc);
    size_t taps, floats;
    if (!nnf_mul_size(s->kh, s->kw, &taps) || !nnf_mul_size(taps, s->c, &floats))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT,
                         "NCHWc grouped conv: %zux%zu weights of %zu channels overflow", s->kh,
                         s->kw, s->c);
    nnf_nchwc_gconv *k = nnf_calloc(1, sizeof *k);
    float *wj = nnf_malloc(floats * sizeof(float));
    nnf_status st = NNF_OK;
    if (!k || !wj) {
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "NCHWc grouped conv: out of memory for %zu weights",
                       floats);
        goto done;
    }
    k->s = *s;
    nnf_conv2d_shape ds = *s; /* each pass: a depthwise conv */
    ds.group = s->c;
    /* W is [oc][cpg][kh][kw]: pass j takes each output channel's j-th slice */
    for (size_t j = 0, cpg = cpg_of(k); j < cpg && st == NNF_OK; j++) {
        for (size_t o = 0; o < s->c; o++)
            memcpy(wj + o * taps, w + (o * cpg + j) * taps, taps * sizeof(float));
        st = nnf_nchwc_dw_create(&ds, isa, wj, &k->dw[j]);
    }
    if (st == NNF_OK)
        snprintf(k->name, sizeof k->name, "f32_gconv%zu_nchwc_%zux%zu_s%zu_%s", cpg_of(k), s->kh,
                 s->kw, s->sh, nnf_isa_name(k->dw[0]->isa));
done:
    nnf_free(wj);
    if (st != NNF_OK) {
        nnf_nchwc_gconv_destroy(k);
        return st;
    }
    *out = k;
    return NNF_OK;
}

void nnf_nchwc_gconv_destroy(nnf_nchwc_gconv *k) {
    if (!k)
        return;
    for (size_t j = 0; j < 4; j++)
        nnf_nchwc_dw_destroy(k->dw[j]);
    nnf_free(k);
}

typedef struct gconv_job {
    const nnf_nchwc_gconv *k;
    const float *x;
    float *y;
    const nnf_epilogue *ep;
    size_t cb, pairs, rows, bands;
    atomic_int failed;
} gconv_job;

static void spread(const nnf_nchwc_gconv *k, const float *x, float *y, size_t np, size_t j) {
    if (k->dw[0]->isa >= NNF_ISA_AVX2) {
        nnf_nchwc_lane_spread_avx2(x, y, np, cpg_of(k), j);
        return;
    }
    size_t cpg = cpg_of(k);
    for (size_t p = 0; p < np; p++)
        for (size_t l = 0; l < NNF_NCHWC_B; l++)
            y[p * NNF_NCHWC_B + l] = x[p * NNF_NCHWC_B + l - l % cpg + j];
}

/* Item i: image i / bands / pairs, blocks 2 (i / bands % pairs) and the
 * next (if any), band i % bands. */
static void gconv_task(void *ctx, size_t i) {
    gconv_job *d = ctx;
    const nnf_nchwc_gconv *k = d->k;
    const nnf_conv2d_shape *s = &k->s;
    /* a pair's spread rows and two partial sums (outs 2) */
    float *buf = nnf_thread_scratch(NNF_SCRATCH_CONV_IN, nnf_nchwc_band_floats(s, d->rows, 2));
    if (!buf) {
        atomic_store(&d->failed, 1);
        return;
    }
    const size_t B = NNF_NCHWC_B;
    size_t band = i % d->bands, blk = i / d->bands % d->pairs * 2, b = i / d->bands / d->pairs;
    size_t nb = blk + 1 < d->cb ? 2 : 1;
    size_t oh0 = band * d->rows, noh = s->oh - oh0 < d->rows ? s->oh - oh0 : d->rows;
    size_t plane = b * d->cb + blk, hw = s->h * s->w, ohw = s->oh * s->ow;
    size_t r0, r1; /* the input rows the band's windows reach (none: all padding) */
    nnf_nchwc_band_reach(s, oh0, noh, &r0, &r1);
    /* a pair's planes: xband apart in the spread rows, yband in the sums,
     * ohw * B in x, y and the residual */
    size_t xband = nnf_nchwc_band_in_rows(s, d->rows) * s->w * B, yband = d->rows * s->ow * B;
    float *xs = buf, *acc[2] = {buf + 2 * xband, buf + 2 * xband + 2 * yband};
    const float *x = d->x + (plane * hw + r0 * s->w) * B;
    float *y = d->y + (plane * ohw + oh0 * s->ow) * B;
    /* a residual of the conv's own goes into the first pass, the bias and
     * the activation into the last */
    const float *res = d->ep->residual ? d->ep->residual + (plane * ohw + oh0 * s->ow) * B : NULL;
    size_t rplane = ohw * B;
    for (size_t j = 0, cpg = cpg_of(k); j < cpg; j++) {
        int last = j + 1 == cpg;
        nnf_epilogue e = nnf_epilogue_default();
        e.alpha = d->ep->alpha;
        if (j == 0) {
            e.residual = d->ep->residual;
            e.residual_scale = d->ep->residual_scale;
        } else {
            e.residual = acc[(j - 1) % 2];
            res = acc[(j - 1) % 2];
            rplane = yband;
        }
        if (last) {
            e.bias_kind = d->ep->bias_kind;
            e.bias = d->ep->bias;
            e.act = d->ep->act;
        }
        for (size_t o = 0; o < nb; o++)
            spread(k, x + o * hw * B, xs + o * xband, (r1 - r0) * s->w, j);
        float *out = last ? y : acc[j % 2];
        size_t oplane = last ? ohw * B : yband;
        if (nb == 2)
            nnf_nchwc_dw_rows2(k->dw[j], xs, xband, r0, r1, blk, out, oplane, oh0, res, rplane, &e,
                               oh0, noh);
        else
            nnf_nchwc_dw_rows(k->dw[j], xs, r0, r1, blk, out, oh0, res, &e, oh0, noh);
    }
}

nnf_status nnf_nchwc_gconv_run(const nnf_nchwc_gconv *k, const float *x, float *y,
                               const nnf_epilogue *ep, nnf_threadpool *pool) {
    if (!k || !x || !y)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "NCHWc grouped conv: NULL argument");
    const nnf_conv2d_shape *s = &k->s;
    nnf_epilogue none = nnf_epilogue_default();
    ep = ep ? ep : &none;
    if (ep->residual && ep->residual_after_act)
        return nnf_error(NNF_ERR_UNSUPPORTED, "%s: a residual after the activation", k->name);
    if (s->n == 0 || s->oh == 0 || s->ow == 0)
        return NNF_OK;
    gconv_job d = {.k = k, .x = x, .y = y, .ep = ep, .cb = nnf_nchwc_blocks(s->c)};
    d.pairs = (d.cb + 1) / 2;
    d.rows = nnf_nchwc_band_rows(s, 2, s->n * d.pairs, nnf_threadpool_size(pool));
    d.bands = (s->oh + d.rows - 1) / d.rows;
    atomic_init(&d.failed, 0);
    nnf_parallel_for(pool, s->n * d.pairs * d.bands, gconv_task, &d);
    if (atomic_load(&d.failed))
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu floats of band buffers",
                         k->name, nnf_nchwc_band_floats(s, d.rows, 2));
    return NNF_OK;
}

/* A pointwise conv and the depthwise conv that alone reads its output, run as
 * one (kernels/nchwc.h; oneDNN calls this a depthwise post-op). Run apart,
 * MobileNetV2's 16 -> 96 expansion at 112x112 writes 4.8 MB that its stride-2
 * depthwise conv reads back: inside the model the expansion took 0.78 ms and
 * the depthwise conv 0.62, against 0.60 and 0.35 in a model of the two
 * alone, because the 4.8 MB went through L3 and partly DRAM in between.
 *
 * Here a task is (image, tile group of the pointwise conv, band of output
 * rows). It walks its band a few output rows at a time; the pointwise rows
 * those read are kept in a per-thread buffer [nob][rows][w][8]: the rows
 * the next step reads again move to the buffer's top, the new ones are
 * computed below them (nnf_nchwc_conv_rows), and the depthwise conv reads
 * the buffer for each block of the group (nnf_nchwc_dw_rows). Only the
 * first rows of a band are computed twice (by the band above too), and
 * each pointwise value is the one the whole run would give, so the output
 * is the two kernels' bit for bit, at any thread count. */
#include "kernels/nchwc.h"

#include "base/alloc.h"

#include <stdatomic.h>
#include <string.h>

bool nnf_nchwc_pw_dw_supported(const nnf_nchwc_conv *pw, const nnf_nchwc_dw *dw) {
    const nnf_conv2d_shape *p = &pw->s, *d = &dw->s;
    return nnf_nchwc_conv_pointwise(pw) && d->n == p->n && d->c == p->oc && d->h == p->oh &&
           d->w == p->ow;
}

typedef struct pw_dw_job {
    const nnf_nchwc_conv *pw;
    const nnf_nchwc_dw *dw;
    const float *x;
    float *y;
    const nnf_epilogue *ep_pw, *ep_dw;
    size_t groups, bands, band_rows, step; /* step: output rows per pass of the buffer */
    /* per > 0: items [0, whole) whole, each of the rest in `bands` bands;
     * each thread's range of tasks (per of them) takes whole / threads
     * whole items and one band of each of the rest (pw_dw_run) */
    size_t whole, per;
    size_t cap_rows, buf_floats;           /* the buffer: rows per block, floats */
    atomic_int failed;
} pw_dw_job;

/* The input rows [*lo, *hi) that output rows [a, b) read (clipped). */
static void rows_read(const nnf_conv2d_shape *s, size_t a, size_t b, size_t *lo, size_t *hi) {
    ptrdiff_t first = (ptrdiff_t)(a * s->sh) - (ptrdiff_t)s->pt;
    ptrdiff_t last = (ptrdiff_t)((b - 1) * s->sh + (s->kh - 1) * s->dh) - (ptrdiff_t)s->pt + 1;
    *lo = first < 0 ? 0 : (size_t)first;
    *hi = last < 0 ? 0 : (size_t)last > s->h ? s->h : (size_t)last;
    if (*hi < *lo)
        *hi = *lo;
}

static void pw_dw_task(void *ctx, size_t i) {
    pw_dw_job *j = ctx;
    const nnf_conv2d_shape *ps = &j->pw->s, *ds = &j->dw->s;
    float *buf = nnf_thread_scratch(NNF_SCRATCH_PW_DW, j->buf_floats);
    if (!buf) {
        atomic_store(&j->failed, 1);
        return;
    }
    size_t band = i % j->bands, item = i / j->bands, band_rows = j->band_rows;
    if (j->per) {
        size_t q = i / j->per, w = i % j->per, own = j->whole / j->bands;
        band = w < own ? 0 : q;
        item = w < own ? q * own + w : j->whole + (w - own);
        band_rows = w < own ? ds->oh : j->band_rows;
    }
    size_t g = item % j->groups, b = item / j->groups;
    size_t nob, ocb0 = nnf_nchwc_conv_tile_group(j->pw, g, &nob);
    size_t row = ds->w * NNF_NCHWC_B, blk = j->cap_rows * row, cb = nnf_nchwc_blocks(ds->c);
    size_t out_plane = ds->oh * ds->ow * NNF_NCHWC_B;
    const float *x = j->x + b * nnf_nchwc_blocks(ps->c) * ps->h * ps->w * NNF_NCHWC_B;
    size_t oh0 = band * band_rows, oh1 = oh0 + band_rows < ds->oh ? oh0 + band_rows : ds->oh;
    size_t lo = 0, hi = 0; /* rows held */
    for (size_t a = oh0; a < oh1; a += j->step) {
        size_t e = a + j->step < oh1 ? a + j->step : oh1, need_lo, need_hi;
        rows_read(ds, a, e, &need_lo, &need_hi);
        if (need_lo >= hi || need_lo < lo) {
            lo = hi = need_lo;
        } else if (need_lo > lo) {
            for (size_t o = 0; o < nob; o++)
                memmove(buf + o * blk, buf + o * blk + (need_lo - lo) * row,
                        (hi - need_lo) * row * sizeof(float));
            lo = need_lo;
        }
        if (need_hi > hi) {
            nnf_nchwc_conv_rows(j->pw, x, hi, need_hi, g, buf + (hi - lo) * row, blk, j->ep_pw);
            hi = need_hi;
        }
        for (size_t o = 0; o < nob; o += 2) {
            float *y = j->y + (b * cb + ocb0 + o) * out_plane;
            if (o + 1 < nob)
                nnf_nchwc_dw_rows2(j->dw, buf + o * blk, blk, lo, hi, ocb0 + o, y, out_plane, 0,
                                   NULL, 0, j->ep_dw, a, e - a);
            else
                nnf_nchwc_dw_rows(j->dw, buf + o * blk, lo, hi, ocb0 + o, y, 0, NULL, j->ep_dw, a,
                                  e - a);
        }
    }
}

/* Output rows per pass: as many as keep the buffer within a quarter of L2
 * (the rest for the input rows, the weights and the output rows), at least
 * one. */
static size_t step_rows(const nnf_nchwc_conv *pw, const nnf_conv2d_shape *ds) {
    size_t l2 = nnf_cpu_get()->l2;
    size_t per_row = pw->gblk * ds->w * NNF_NCHWC_B * sizeof(float), rows = l2 / 4 / per_row;
    size_t span = (ds->kh - 1) * ds->dh + 1;
    return rows > span ? (rows - span) / ds->sh + 1 : 1;
}

nnf_status nnf_nchwc_pw_dw_run(const nnf_nchwc_conv *pw, const nnf_nchwc_dw *dw, const float *x,
                               float *y, const nnf_epilogue *ep_pw, const nnf_epilogue *ep_dw,
                               nnf_threadpool *pool) {
    if (!pw || !dw || !x || !y || !ep_pw || !ep_dw)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "fused pointwise/depthwise conv: NULL argument");
    if (!nnf_nchwc_pw_dw_supported(pw, dw))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT,
                         "%s -> %s: not a pointwise conv and its depthwise conv", pw->name,
                         dw->name);
    if (ep_pw->residual || ep_dw->residual)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s -> %s: fused, neither conv takes a residual",
                         pw->name, dw->name);
    const nnf_conv2d_shape *ds = &dw->s;
    if (ds->n == 0 || ds->oh == 0 || ds->ow == 0)
        return NNF_OK;
    pw_dw_job j = {.pw = pw, .dw = dw, .x = x, .y = y, .ep_pw = ep_pw, .ep_dw = ep_dw};
    j.groups = nnf_nchwc_conv_tile_groups(pw);
    j.step = step_rows(pw, ds);
    /* Bands: one per (image, group) on one thread (no row computed twice);
     * fewer items than threads: about four tasks per thread, their count a
     * multiple of the threads where the rows allow. */
    size_t threads = (size_t)nnf_threadpool_size(pool), items = ds->n * j.groups, bands = 1, last;
    nnf_nchwc_conv_tile_group(pw, j.groups - 1, &last);
    /* equal items, whole ones per thread (MobileNetV2's 384-channel
     * expansions at 14x14: 6 groups of 8 blocks): no bands, no row computed
     * twice (in two bands each, 52 -> 46 us on 2 threads) */
    bool even_items = items >= 2 * threads && items % threads == 0 && last == pw->gblk;
    size_t split_rows = (ds->oh + threads - 1) / threads;
    bool per =
        threads > 1 && items > threads && items % threads && split_rows * (threads - 1) < ds->oh;
    if (threads > 1 && items < 4 * threads && !even_items && !per) {
        bands = (4 * threads + items - 1) / items;
        while ((items * bands) % threads && bands < ds->oh)
            bands++;
    }
    /* More items than threads, in a count they do not share evenly
     * (MobileNetV2's 576-channel expansions at 14x14 in 8-block groups: 9
     * items, 5 + 4 on two threads, 90 % busy): the remainder's items in a
     * band per thread, each thread's range whole / threads whole items and
     * a band of each of the rest (only those bands' first rows computed
     * twice). Three groups on two threads took four bands each (12 tasks,
     * every band's rows next to another band's computed twice: at 28x28, 7
     * output rows a band read 9 expansion rows, and the 2-thread run took
     * 1.26x the 1-thread work): now a group each and the third in two
     * bands, 1.08x (MobileNetV2 ab_builds 0.984 on 2 threads). */
    if (per) {
        j.whole = items - items % threads;
        j.per = j.whole / threads + items % threads;
        bands = threads; /* every band holds rows (split_rows) */
    }
    j.band_rows = bands < ds->oh ? (ds->oh + bands - 1) / bands : 1;
    j.bands = (ds->oh + j.band_rows - 1) / j.band_rows;
    size_t tasks = j.per ? j.per * threads : items * j.bands;
    size_t longest = j.per ? ds->oh : j.band_rows;
    j.step = j.step < longest ? j.step : longest;
    j.cap_rows = (j.step - 1) * ds->sh + (ds->kh - 1) * ds->dh + 1;
    j.cap_rows = j.cap_rows < ds->h ? j.cap_rows : ds->h;
    size_t blk_floats;
    if (!nnf_mul_size(j.cap_rows, ds->w * NNF_NCHWC_B, &blk_floats) ||
        !nnf_mul_size(blk_floats, pw->gblk, &j.buf_floats))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s -> %s: rows too large", pw->name, dw->name);
    nnf_parallel_for(pool, tasks, pw_dw_task, &j);
    if (atomic_load(&j.failed))
        return nnf_error(NNF_ERR_OUT_OF_MEMORY,
                         "%s -> %s: out of memory for %zu floats of row buffer", pw->name, dw->name,
                         j.buf_floats);
    return NNF_OK;
}

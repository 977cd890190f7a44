/* Strided convolution through a phase-split input copy.
 *
 * Stride s turns an output row's taps into every s-th input: the implicit
 * im2col packer had to gather or de-interleave them 8 lanes at a time, for
 * every tap, with bounds checks at every edge, and spent 35 % of the YOLOv5
 * stem there. Here each input row is split once into its s column phases
 * (column j of phase p holds input column j s + p), with the zero padding
 * written in: the stride-s conv becomes a stride-1 read. Tap (ic, kh, kw) of
 * output pixel (oh, ow) lies at one fixed offset from the pixel's origin,
 * so the GEMM's B panels are packed with straight copies along output rows
 * (koff[k] per tap, no bounds checks, no gathers). The copy costs one pass
 * over the input (rows that no tap reads are skipped, as in a 1x1 stride-2
 * conv). The GEMM, its blocking and the epilogue are the ordinary ones.
 * Selected for few input channels only (nnf_conv_select): with many, the
 * GEMM dominates, the implicit packer is cheap relative to it, and the copy
 * made these convs 10-20 % slower. */
#include "kernels/conv_fast.h"

#include "base/alloc.h"
#include "base/threadpool.h"

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

/* Output rows are done in bands whose split copy (all channels of the
 * group) stays in L2: one whole-input copy of a 32 x 320 x 320 input went
 * to memory and back and cost as much as packing did. */
enum { BAND_FLOATS = 48 * 1024, BAND_MIN_PIXELS = 256, MAX_SLOTS = 256 };

typedef struct split_geom {
    size_t rows;  /* output rows per band */
    size_t hb;    /* padded input rows per band: (rows - 1) sh + (kh - 1) dh + 1 */
    size_t wq;    /* floats per phase row: ow + ((kw - 1) dw) / sw */
    size_t row;   /* floats per padded row: sw wq */
    size_t plane; /* floats per channel: hb row */
} split_geom;

static size_t band_in_rows(const nnf_conv2d_shape *s, size_t rows) {
    return (rows - 1) * s->sh + (s->kh - 1) * s->dh + 1;
}

/* Bands fill BAND_FLOATS but hold at least BAND_MIN_PIXELS outputs (a
 * GEMM on a few dozen columns spends its time in setup). */
static int split_geom_of(const nnf_conv2d_shape *s, size_t icg, split_geom *g) {
    g->wq = s->ow + ((s->kw - 1) * s->dw) / s->sw;
    if (!nnf_mul_size(s->sw, g->wq, &g->row))
        return 0;
    size_t rows = 1;
    while (rows < s->oh) {
        size_t f;
        if (!nnf_mul_size(band_in_rows(s, rows + 1), g->row, &f) || !nnf_mul_size(f, icg, &f) ||
            f > BAND_FLOATS)
            break;
        rows++;
    }
    size_t min_rows = (BAND_MIN_PIXELS + s->ow - 1) / s->ow;
    if (rows < min_rows)
        rows = min_rows < s->oh ? min_rows : s->oh;
    g->rows = rows;
    g->hb = band_in_rows(s, rows);
    return nnf_mul_size(g->hb, g->row, &g->plane);
}

typedef void (*split_row2_fn)(const float *src, size_t n, float *d0, float *d1);

static void split_row2_scalar(const float *src, size_t n, float *d0, float *d1) {
    for (size_t i = 0; i < n; i++) {
        d0[i] = src[2 * i];
        d1[i] = src[2 * i + 1];
    }
}

/* Padded row r of the band (input row ih, or padding when outside) into
 * its sw phases at d. Columns: padded column q sw + p is input column
 * q sw + p - pl. */
static void split_row(const nnf_conv2d_shape *s, const split_geom *g, const float *src, ptrdiff_t ih,
                      float *d, split_row2_fn row2) {
    const size_t sw = s->sw, wq = g->wq;
    if (ih < 0 || ih >= (ptrdiff_t)s->h) {
        memset(d, 0, g->row * sizeof(float));
        return;
    }
    src += (size_t)ih * s->w;
    size_t qlo[2], qhi[2];
    for (size_t p = 0; p < sw; p++) {
        float *dp = d + p * wq;
        size_t lo = s->pl > p ? (s->pl - p + sw - 1) / sw : 0;
        size_t hi = (s->w + s->pl + sw - 1 - p) / sw;
        if (hi > wq)
            hi = wq;
        if (lo > hi)
            lo = hi;
        memset(dp, 0, lo * sizeof(float));
        memset(dp + hi, 0, (wq - hi) * sizeof(float));
        if (sw == 2) {
            qlo[p] = lo;
            qhi[p] = hi;
            continue;
        }
        const float *sp = src + (lo * sw + p - s->pl);
        for (size_t q = lo; q < hi; q++)
            dp[q] = sp[(q - lo) * sw];
    }
    if (sw != 2)
        return;
    /* stride 2: the phase holding even input columns and the odd one are
     * filled together from input pairs (2i, 2i + 1) */
    size_t pe = s->pl % 2, po = 1 - pe; /* the phase of input column 0 / 1 */
    float *de = d + pe * wq + qlo[pe], *dq = d + po * wq + qlo[po];
    size_t ne = qhi[pe] - qlo[pe], no = qhi[po] - qlo[po];
    /* first input column of each phase's run: 2 qlo + p - pl */
    size_t ce = 2 * qlo[pe] + pe - s->pl, co = 2 * qlo[po] + po - s->pl;
    size_t pairs = 0;
    if (ce + 1 == co) {
        pairs = ne < no ? ne : no;
        row2(src + ce, pairs, de, dq);
    }
    for (size_t i = pairs; i < ne; i++)
        de[i] = src[ce + 2 * i];
    for (size_t i = pairs; i < no; i++)
        dq[i] = src[co + 2 * i];
}

typedef struct split_pack_ctx {
    const nnf_conv2d_shape *s;
    const float *xs;
    const size_t *koff;
    size_t row; /* split_geom.row */
} split_pack_ctx;

enum { PIECES = 128 };

typedef struct piece {
    size_t src; /* the first pixel's origin in the copy */
    size_t dst; /* floats from the block to its first lane */
    size_t len; /* pixels */
} piece;

/* nnf_gemm_pack_fn: columns [n0, n0 + nc) (output pixels), rows [k0, k0 +
 * kc). The block is cut into pieces (a panel's pixels within one output
 * row); k runs outside the pieces so each k streams one input row run in
 * order, which the hardware prefetcher follows (piece-outer walked all kc
 * rows per 16 pixels and waited on every line). */
static void split_pack(const void *vctx, size_t n0, size_t nc, size_t k0, size_t kc, size_t r,
                       float *dst) {
    const split_pack_ctx *c = vctx;
    const nnf_conv2d_shape *s = c->s;
    const size_t *koff = c->koff + k0, pstride = kc * r;
    piece pc[PIECES];
    size_t pos = 0, oh = n0 / s->ow, ow = n0 % s->ow;
    while (pos < nc) {
        size_t np = 0;
        for (; pos < nc && np < PIECES; np++) {
            size_t len = r - pos % r;
            if (len > nc - pos)
                len = nc - pos;
            if (len > s->ow - ow)
                len = s->ow - ow;
            pc[np] = (piece){.src = oh * s->sh * c->row + ow, .dst = pos / r * pstride + pos % r, .len = len};
            pos += len;
            ow += len;
            if (ow == s->ow) {
                ow = 0;
                oh++;
            }
        }
        for (size_t kk = 0; kk < kc; kk++) {
            const float *src = c->xs + koff[kk];
            float *d = dst + kk * r;
            for (size_t i = 0; i < np; i++) {
                const float *sp = src + pc[i].src;
                float *dp = d + pc[i].dst;
                if (pc[i].len == 16)
                    __builtin_memcpy(dp, sp, 16 * sizeof(float));
                else if (pc[i].len == 8)
                    __builtin_memcpy(dp, sp, 8 * sizeof(float));
                else
                    for (size_t e = 0; e < pc[i].len; e++)
                        dp[e] = sp[e];
            }
        }
    }
    if (nc % r) {
        float *last = dst + nc / r * pstride;
        for (size_t kk = 0; kk < kc; kk++)
            for (size_t e = nc % r; e < r; e++)
                last[kk * r + e] = 0.0f;
    }
}

typedef struct strided_job {
    const nnf_conv_kernel *k;
    split_geom g;
    const float *x;           /* the group's first input channel */
    float *y;                 /* the group's first output channel */
    const nnf_epilogue *ep;   /* bias and residual at the group's origin */
    const size_t *koff;       /* per k of the group: the tap's offset from a pixel's origin */
    float *scratch;           /* slots of g.plane * icg floats */
    size_t slot_floats;
    split_row2_fn row2;
    size_t group;
    nnf_threadpool *pool;     /* GEMM pool when bands run one after another */
    nnf_status st;
    int slots;
    atomic_int busy[MAX_SLOTS];
} strided_job;

typedef struct split_rows_ctx {
    const strided_job *j;
    float *xs;
    size_t oh0, rows;
} split_rows_ctx;

/* Padded row r of a band, every channel of the group. */
static void split_rows_task(void *ctx, size_t r) {
    const split_rows_ctx *c = ctx;
    const strided_job *j = c->j;
    const nnf_conv2d_shape *s = &j->k->s;
    const split_geom *g = &j->g;
    /* rows between the taps of a sparse kernel (1x1 stride 2) are never read */
    int used = 0;
    for (size_t kh = 0; kh < s->kh && !used; kh++) {
        size_t t = kh * s->dh;
        used = r >= t && (r - t) % s->sh == 0 && (r - t) / s->sh < c->rows;
    }
    if (!used)
        return;
    ptrdiff_t ih = (ptrdiff_t)(c->oh0 * s->sh + r) - (ptrdiff_t)s->pt;
    for (size_t ic = 0; ic < s->c / s->group; ic++)
        split_row(s, g, j->x + ic * s->h * s->w, ih, c->xs + ic * g->plane + r * g->row, j->row2);
}

/* One band of output rows: split the input rows it reads, then one GEMM. */
static void band_task(void *ctx, size_t band) {
    strided_job *j = ctx;
    const nnf_conv2d_shape *s = &j->k->s;
    const split_geom *g = &j->g;
    size_t icg = s->c / s->group, ocg = s->oc / s->group, ohw = s->oh * s->ow;
    size_t oh0 = band * g->rows, rows = s->oh - oh0 < g->rows ? s->oh - oh0 : g->rows;
    int slot = nnf_slot_claim(j->busy, j->slots);
    float *xs = j->scratch + (size_t)slot * j->slot_floats;
    size_t hb = band_in_rows(s, rows);
    split_rows_ctx sc = {.j = j, .xs = xs, .oh0 = oh0, .rows = rows};
    if (j->pool) /* bands one after another: their copies over the pool too */
        nnf_parallel_for(j->pool, hb, split_rows_task, &sc);
    else
        for (size_t r = 0; r < hb; r++)
            split_rows_task(&sc, r);
    nnf_epilogue e = *j->ep;
    if (e.residual)
        e.residual += oh0 * s->ow;
    nnf_gemm_src a = nnf_gemm_src_packed(j->k->packed_w[j->group]);
    split_pack_ctx pc = {.s = s, .xs = xs, .koff = j->koff, .row = g->row};
    nnf_gemm_src bsrc = {.pack = split_pack, .pack_ctx = &pc};
    nnf_status st = nnf_gemm_run(j->k->cfg, ocg, rows * s->ow, icg * s->kh * s->kw, &a, &bsrc,
                                 j->y + oh0 * s->ow, ohw, &e, j->pool);
    if (st != NNF_OK)
        j->st = st;
    nnf_slot_release(j->busy, slot);
}

/* Row k = (ic, kh, kw) of a group's K reads its tap at a fixed offset from
 * an output pixel's origin in the split band: computed once, at plan time. */
nnf_status nnf_conv_strided_prepare(nnf_conv_kernel *k) {
    const nnf_conv2d_shape *s = &k->s;
    size_t icg = s->c / s->group, taps = s->kh * s->kw, kdim;
    split_geom g;
    if (!s->sw || !s->group || !split_geom_of(s, icg, &g) || !nnf_mul_size(icg, taps, &kdim))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "strided convolution: input too large");
    k->tap_off = nnf_malloc((kdim ? kdim : 1) * sizeof *k->tap_off);
    if (!k->tap_off)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for strided tap offsets");
    for (size_t kk = 0; kk < kdim; kk++) {
        size_t ic = kk / taps, tap = kk % taps, kh = tap / s->kw, kw = tap % s->kw;
        size_t cw = kw * s->dw;
        k->tap_off[kk] = ic * g.plane + kh * s->dh * g.row + (cw % s->sw) * g.wq + cw / s->sw;
    }
    return NNF_OK;
}

nnf_status nnf_conv_strided_run(const nnf_conv_kernel *k, const float *x, float *y,
                                const nnf_epilogue *ep, nnf_threadpool *pool) {
    const nnf_conv2d_shape *s = &k->s;
    size_t icg = s->c / s->group, ocg = s->oc / s->group;
    size_t hw = s->h * s->w, ohw = s->oh * s->ow;
    nnf_status st = NNF_OK;
    if (!s->oh || !s->ow || !s->sh || !s->sw || !s->dh || !s->dw || !s->group)
        return nnf_error(NNF_ERR_INTERNAL, "%s: empty or invalid convolution shape", k->name);
    strided_job *j = nnf_calloc(1, sizeof *j);
    if (!j)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory for a strided job", k->name);
    if (!split_geom_of(s, icg, &j->g)) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: input too large", k->name);
        goto fail;
    }
    size_t bands = (s->oh + j->g.rows - 1) / j->g.rows;
    int threads = nnf_threadpool_size(pool);
    /* enough bands: each thread runs whole bands (no hand-off per GEMM);
     * else one band after another, each GEMM over the pool */
    int per_band = threads > 1 && bands >= (size_t)threads * 2;
    j->slots = per_band ? (threads < MAX_SLOTS ? threads : MAX_SLOTS) : 1;
    size_t floats;
    if (!nnf_mul_size(j->g.plane, icg, &j->slot_floats) ||
        !nnf_mul_size(j->slot_floats, (size_t)j->slots, &floats)) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: input too large", k->name);
        goto fail;
    }
    /* the split bands, kept per calling thread: a warm run allocates nothing */
    j->scratch = nnf_thread_scratch(NNF_SCRATCH_CONV_IN, floats);
    if (!j->scratch) {
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory for split input bands (%zu floats)",
                       k->name, floats);
        goto fail;
    }
    j->k = k;
    j->koff = k->tap_off;
    j->row2 = k->isa >= NNF_ISA_AVX2 ? nnf_split_row2_avx2 : split_row2_scalar;
    j->pool = per_band ? NULL : pool;
    for (size_t b = 0; b < s->n && st == NNF_OK; b++) {
        for (size_t gi = 0; gi < s->group && st == NNF_OK; gi++) {
            nnf_epilogue e = nnf_conv_group_epilogue(ep, s, b, gi);
            j->x = x + (b * s->c + gi * icg) * hw;
            j->y = y + (b * s->oc + gi * ocg) * ohw;
            j->ep = &e;
            j->group = gi;
            if (per_band) {
                nnf_parallel_for(pool, bands, band_task, j);
            } else {
                for (size_t band = 0; band < bands; band++)
                    band_task(j, band);
            }
            st = j->st;
        }
    }
fail:
    nnf_free(j);
    return st;
}

/* Tables and row drivers of the fast Resize (see resize_fast.h). The
 * coordinate arithmetic below is the reference's (src/kernels/ref/resize.c)
 * operation for operation; tests/c/test_eltwise_fast.c holds the two
 * together over every coordinate and nearest mode. */
#include "kernels/resize_fast.h"

#include "base/alloc.h"

#include <math.h>
#include <string.h>

static int64_t clamp_index(int64_t i, int64_t in) {
    return i < 0 ? 0 : (i >= in ? in - 1 : i);
}

/* Taps of output position o (nearest or linear): *n of them. */
static void position_taps(const nnf_resize_params *p, int64_t o, int64_t in, int64_t out,
                          float scale, float rs, float re, int64_t *idx, float *w, int *n) {
    float x = nnf_resize_source_coord(p, o, in, out, scale, rs, re);
    if (p->mode == NNF_RESIZE_NEAREST) {
        idx[0] = clamp_index(nnf_resize_nearest_index(p, x, scale), in);
        w[0] = 1.0f;
        *n = 1;
        return;
    }
    float xc = x < 0.0f ? 0.0f : (x > (float)(in - 1) ? (float)(in - 1) : x);
    int64_t i0 = (int64_t)xc, i1 = i0 + 1 < in ? i0 + 1 : in - 1;
    float d = xc - (float)i0;
    idx[0] = i0;
    idx[1] = i1;
    w[0] = 1.0f - d;
    w[1] = d;
    *n = 2;
}

/* The axis's taps, collapsed to one per position when every position has a
 * single non-zero weight (as the reference does: it changes NaN/Inf
 * propagation, 0 * Inf being NaN). idx/w hold 2 * out entries; returns the
 * taps per position. */
static int axis_taps(const nnf_resize_params *p, int64_t in, int64_t out, float scale, float rs,
                     float re, int64_t *idx, float *w) {
    int taps = 1;
    for (int64_t o = 0; o < out; o++)
        position_taps(p, o, in, out, scale, rs, re, idx + 2 * o, w + 2 * o, &taps);
    if (taps == 1) {
        for (int64_t o = 0; o < out; o++) {
            idx[o] = idx[2 * o];
            w[o] = w[2 * o];
        }
        return 1;
    }
    for (int64_t o = 0; o < out; o++)
        if ((w[2 * o] != 0.0f) + (w[2 * o + 1] != 0.0f) > 1)
            return 2;
    for (int64_t o = 0; o < out; o++) {
        int keep = w[2 * o + 1] != 0.0f ? 1 : 0;
        idx[o] = idx[2 * o + keep];
        w[o] = w[2 * o + keep];
    }
    return 1;
}

/* An axis before the last two must map every output position to itself. */
static int axis_is_identity(const nnf_resize_params *p, int64_t in, int64_t out, float scale,
                            float rs, float re) {
    if (in != out)
        return 0;
    for (int64_t o = 0; o < out; o++) {
        int64_t idx[2];
        float w[2];
        int n;
        position_taps(p, o, in, out, scale, rs, re, idx, w, &n);
        int ok = 0;
        for (int k = 0; k < n; k++) {
            if (w[k] == 0.0f)
                continue;
            if (ok || idx[k] != o || w[k] != 1.0f)
                return 0;
            ok = 1;
        }
        if (!ok)
            return 0;
    }
    return 1;
}

void nnf_resize_tables_free(nnf_resize_tables *t) {
    nnf_free(t->didx);
    nnf_free(t->dwt);
    nnf_free(t->hidx);
    nnf_free(t->widx);
    nnf_free(t->hw);
    nnf_free(t->ww);
    memset(t, 0, sizeof *t);
}

/* Axis a's taps as the kernels' tables: *idx (int32) and *w, out * 2 each,
 * allocated here; tmp_idx / tmp_w are axis_taps' scratch (out * 2). 0 when
 * the tables cannot be allocated. */
static int axis_table(const nnf_resize_params *p, int a, int rank, const int64_t *in_dims,
                      const int64_t *out_dims, const float *scales, const float *roi,
                      int64_t *tmp_idx, float *tmp_w, int32_t **idx, float **w, int *taps) {
    int64_t out = out_dims[a];
    *idx = nnf_malloc((size_t)out * 2 * sizeof **idx);
    *w = nnf_malloc((size_t)out * 2 * sizeof **w);
    if (!*idx || !*w)
        return 0;
    *taps = axis_taps(p, in_dims[a], out, scales[a], roi[a], roi[rank + a], tmp_idx, tmp_w);
    for (int64_t k = 0; k < out * *taps; k++) {
        (*idx)[k] = (int32_t)tmp_idx[k];
        (*w)[k] = tmp_w[k];
    }
    return 1;
}

nnf_status nnf_resize_tables_build(const nnf_resize_params *p, int rank, const int64_t *in_dims,
                                   const int64_t *out_dims, const float *scales, const float *roi,
                                   nnf_resize_tables *t) {
    memset(t, 0, sizeof *t);
    int64_t *idx = NULL;
    float *w = NULL;
    nnf_status st = NNF_OK;
    if (rank < 2 || p->mode == NNF_RESIZE_CUBIC || p->coord == NNF_COORD_TF_CROP_AND_RESIZE)
        return NNF_OK;
    int64_t planes = 1;
    /* int32 table entries, and table sizes that cannot overflow */
    for (int a = 0; a < rank; a++)
        if (in_dims[a] <= 0 || out_dims[a] <= 0 || in_dims[a] > INT32_MAX ||
            out_dims[a] > INT32_MAX)
            return NNF_OK;
    /* the axis before the last two may be resized (linear only: a
     * volume's depth); the ones before it must map to themselves */
    int ad = rank - 3;
    if (ad >= 0 &&
        (p->mode != NNF_RESIZE_LINEAR ||
         axis_is_identity(p, in_dims[ad], out_dims[ad], scales[ad], roi[ad], roi[rank + ad])))
        ad = -1;
    for (int a = 0; a < rank - 2; a++) {
        if (a == ad)
            continue;
        if (!axis_is_identity(p, in_dims[a], out_dims[a], scales[a], roi[a], roi[rank + a]))
            return NNF_OK;
        planes *= in_dims[a];
    }
    int ah = rank - 2, aw = rank - 1;
    t->planes = planes;
    t->id = t->od = t->td = 1;
    t->ih = in_dims[ah];
    t->iw = in_dims[aw];
    t->oh = out_dims[ah];
    t->ow = out_dims[aw];
    if (ad >= 0) {
        t->id = in_dims[ad];
        t->od = out_dims[ad];
    }
    /* the axis_taps scratch, for the longest resized axis */
    int64_t longest = t->oh > t->ow ? t->oh : t->ow;
    longest = ad >= 0 && t->od > longest ? t->od : longest;
    idx = nnf_malloc((size_t)longest * 2 * sizeof *idx);
    w = nnf_malloc((size_t)longest * 2 * sizeof *w);
    if (!idx || !w ||
        (ad >= 0 && !axis_table(p, ad, rank, in_dims, out_dims, scales, roi, idx, w, &t->didx,
                                &t->dwt, &t->td)) ||
        !axis_table(p, ah, rank, in_dims, out_dims, scales, roi, idx, w, &t->hidx, &t->hw,
                    &t->th) ||
        !axis_table(p, aw, rank, in_dims, out_dims, scales, roi, idx, w, &t->widx, &t->ww,
                    &t->tw)) {
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for resize tables");
        goto fail;
    }
    int ones = t->th == 1 && t->tw == 1;
    for (int64_t k = 0; ones && k < t->oh; k++)
        ones = t->hw[k] == 1.0f;
    for (int64_t k = 0; ones && k < t->ow; k++)
        ones = t->ww[k] == 1.0f;
    if (!ones || t->didx) { /* the depth runs only in the linear rows */
        t->kind = NNF_RSZ_LINEAR;
        goto done;
    }
    /* one tap of weight 1 everywhere: the reference's sums are the input */
    t->kind = NNF_RSZ_NEAREST;
    t->cols = NNF_RSZ_COLS_TABLE;
    if (t->ow % t->iw == 0 && t->ow / t->iw <= INT32_MAX) {
        int64_t f = t->ow / t->iw;
        int dup = 1;
        for (int64_t o = 0; dup && o < t->ow; o++)
            dup = t->widx[o] == o / f;
        if (dup) {
            t->cols = f == 1 ? NNF_RSZ_COLS_COPY : NNF_RSZ_COLS_DUP;
            t->dup = (int)f;
        }
    }
done:
    nnf_free(idx);
    nnf_free(w);
    return NNF_OK;
fail:
    nnf_free(idx);
    nnf_free(w);
    nnf_resize_tables_free(t);
    return st;
}

static void gather_scalar(const float *x, const int32_t *idx, float *y, size_t n) {
    for (size_t o = 0; o < n; o++)
        y[o] = x[idx[o]];
}

/* The reference's sums for one output row (ref/resize.c): over the row
 * taps k (outer), acc += a[k] s[k], where s[k] = 0 + b0 x[k][c0] (+ b1
 * x[k][c1]) is the weighted sum over the column taps, each accumulated
 * onto 0. s[k] depends only on input row k, so it is formed once per input
 * row (horizontal) and kept while the next output rows read that row too;
 * the output row is then the blend of at most two of them (vertical), the
 * same float operations in the same order. Columns go in chunks of
 * RSZ_CHUNK so the kept rows fit the stack. */
#define RSZ_CHUNK 1024

static void linear_h(const nnf_resize_tables *t, const float *xr, size_t o0, size_t n, float *h) {
    const int32_t *widx = t->widx + o0 * (size_t)t->tw;
    const float *ww = t->ww + o0 * (size_t)t->tw;
    if (t->tw == 2) {
        for (size_t o = 0; o < n; o++) {
            float s = 0.0f;
            s += ww[2 * o] * xr[widx[2 * o]];
            s += ww[2 * o + 1] * xr[widx[2 * o + 1]];
            h[o] = s;
        }
    } else {
        for (size_t o = 0; o < n; o++) {
            float s = 0.0f;
            s += ww[o] * xr[widx[o]];
            h[o] = s;
        }
    }
}

static void linear_v_scalar(const float *const *h, const float *a, int terms, float *y, size_t n) {
    for (size_t o = 0; o < n; o++) {
        float acc = 0.0f;
        for (int k = 0; k < terms; k++)
            acc += a[k] * h[k][o];
        y[o] = acc;
    }
}

/* Horizontal sums kept: a row's at most 4 taps (2 depths x 2 rows) and as
 * many more that the next output rows read again. */
#define RSZ_SLOTS 6

/* Output rows [first, end) of a LINEAR table set: row r is output depth
 * (r / oh) % od, row r % oh of plane r / (od oh). Its taps are every pair
 * of a depth tap and a row tap, weighted by their product (the reference's
 * wt, depth first), summed in that order. */
static void linear_rows(const nnf_resize_tables *t, int simd, const float *x, float *y,
                        size_t first, size_t end) {
    size_t oh = (size_t)t->oh, ow = (size_t)t->ow, od = (size_t)t->od,
           plane_in = (size_t)(t->ih * t->iw);
    _Alignas(32) float h[RSZ_SLOTS][RSZ_CHUNK];
    for (size_t o0 = 0; o0 < ow; o0 += RSZ_CHUNK) {
        size_t n = ow - o0 < RSZ_CHUNK ? ow - o0 : RSZ_CHUNK;
        /* the input rows ((plane id + depth) ih + row) whose sums h holds */
        size_t held[RSZ_SLOTS], next = 0;
        for (int k = 0; k < RSZ_SLOTS; k++)
            held[k] = SIZE_MAX;
        for (size_t r = first; r < end; r++) {
            size_t plane = r / (od * oh), zo = r / oh % od, o = r % oh;
            const float *hk[4];
            float a[4];
            int terms = 0;
            unsigned used = 0;
            for (int dk = 0; dk < t->td; dk++) {
                size_t dz = t->didx ? (size_t)t->didx[zo * (size_t)t->td + (size_t)dk] : 0;
                float wd = t->didx ? t->dwt[zo * (size_t)t->td + (size_t)dk] : 1.0f;
                for (int k = 0; k < t->th; k++) {
                    size_t row = (size_t)t->hidx[o * (size_t)t->th + (size_t)k],
                           key = (plane * (size_t)t->id + dz) * (size_t)t->ih + row;
                    int slot = -1;
                    for (int q = 0; q < RSZ_SLOTS && slot < 0; q++)
                        if (held[q] == key)
                            slot = q;
                    if (slot < 0) { /* a slot this row's other taps do not hold, in turn */
                        while (used >> next & 1u)
                            next = (next + 1) % RSZ_SLOTS;
                        slot = (int)next;
                        next = (next + 1) % RSZ_SLOTS;
                        held[slot] = key;
                        linear_h(t,
                                 x + (plane * (size_t)t->id + dz) * plane_in + row * (size_t)t->iw,
                                 o0, n, h[slot]);
                    }
                    used |= 1u << slot;
                    hk[terms] = h[slot];
                    a[terms++] = wd * t->hw[o * (size_t)t->th + (size_t)k];
                }
            }
            float *yr = y + r * ow + o0;
            if (simd)
                nnf_resize_blend_avx2(hk, a, terms, yr, n);
            else
                linear_v_scalar(hk, a, terms, yr, n);
        }
    }
}

void nnf_resize_rows(const nnf_resize_tables *t, nnf_isa isa, const float *x, float *y,
                     size_t first, size_t count) {
    size_t oh = (size_t)t->oh, ow = (size_t)t->ow, plane_in = (size_t)(t->ih * t->iw);
    int simd = isa != NNF_ISA_SCALAR;
    size_t r = first, end = first + count;
    while (r < end) {
        size_t plane = r / oh, o = r % oh;
        const float *xplane = x + plane * plane_in;
        float *yr = y + r * ow;
        if (t->kind == NNF_RSZ_LINEAR) {
            linear_rows(t, simd, x, y, r, end);
            return;
        }
        /* output rows reading the same input row: fill one, copy it */
        size_t n = 1;
        while (r + n < end && o + n < oh && t->hidx[o + n] == t->hidx[o])
            n++;
        const float *xr = xplane + (size_t)t->hidx[o] * (size_t)t->iw;
        size_t fill = 1;
        if (t->cols == NNF_RSZ_COLS_COPY) {
            memcpy(yr, xr, ow * sizeof(float));
        } else if (t->cols == NNF_RSZ_COLS_DUP && t->dup == 2 && simd) {
            nnf_resize_dup2_avx2(xr, (size_t)t->iw, yr, ow, n);
            fill = n;
        } else if (simd) {
            nnf_resize_gather_avx2(xr, t->widx, yr, ow);
        } else {
            gather_scalar(xr, t->widx, yr, ow);
        }
        for (size_t k = fill; k < n; k++)
            memcpy(yr + k * ow, yr, ow * sizeof(float));
        r += n;
    }
}

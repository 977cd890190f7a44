/* Optimised convolution: algorithm selection, weight preparation, implicit
 * im2col packing for the GEMM, and the depthwise driver. */
#include "kernels/conv_fast.h"

#include "base/alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

const double nnf_wino_g[6][3] = {{1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                  {-1.0 / 6, 1.0 / 6, -1.0 / 6}, {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                  {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
const double nnf_wino_bt[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                   {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
const double nnf_wino_at[4][6] = {
    {1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};

/* Winograd pays when the 36 GEMMs are big enough to run near peak (some
 * channels) and the tiles, counted in groups of 8 for the transforms, are
 * mostly useful: a 7x7 output (4 tiles of 8) would waste 60 %. */
static int winograd_fits(const nnf_conv2d_shape *s, nnf_isa isa) {
    if (isa < NNF_ISA_AVX2 || nnf_gemm_cfg_for(isa)->nr % 8 || s->group != 1 || s->kh != 3 ||
        s->kw != 3 || s->sh != 1 || s->sw != 1 || s->dh != 1 || s->dw != 1 || s->c < 16 ||
        s->oc < 16)
        return 0;
    size_t tiles = ((s->oh + 3) / 4) * ((s->ow + 3) / 4), t8 = (tiles + 7) / 8 * 8;
    /* useful outputs over computed outputs at least 5/8 */
    return s->oh * s->ow * 8 >= t8 * 16 * 5 && s->w <= (1u << 20) && s->oh <= (1u << 20);
}

nnf_conv_algo nnf_conv_select(const nnf_conv2d_shape *s, nnf_isa isa) {
    if (!s->group || s->c % s->group || s->oc % s->group || !s->kh || !s->kw || !s->sh || !s->sw ||
        !s->dh || !s->dw || !s->oh || !s->ow)
        return NNF_CONV_ALGO_NONE;
    if (s->group == s->c && s->oc == s->c && s->kh == s->kw && (s->kh == 3 || s->kh == 5) &&
        s->sh == s->sw && (s->sh == 1 || s->sh == 2) && s->dh == 1 && s->dw == 1 &&
        s->pt < s->kh && s->pl < s->kw)
        return NNF_CONV_ALGO_DEPTHWISE;
    if (s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 && s->pt == 0 && s->pl == 0 &&
        s->oh == s->h && s->ow == s->w)
        return NNF_CONV_ALGO_GEMM_1X1;
    if (winograd_fits(s, isa))
        return NNF_CONV_ALGO_WINOGRAD;
    return NNF_CONV_ALGO_IM2COL;
}

const char *nnf_conv_algo_name(nnf_conv_algo algo) {
    switch (algo) {
    case NNF_CONV_ALGO_NONE: return "reference";
    case NNF_CONV_ALGO_GEMM_1X1: return "gemm1x1";
    case NNF_CONV_ALGO_IM2COL: return "im2col";
    case NNF_CONV_ALGO_DEPTHWISE: return "dw";
    case NNF_CONV_ALGO_WINOGRAD: return "winograd4x4";
    }
    return "?";
}

void nnf_conv_kernel_destroy(nnf_conv_kernel *k) {
    if (!k)
        return;
    if (k->packed_w)
        for (size_t g = 0; g < k->n_packed; g++)
            nnf_gemm_packed_destroy(k->packed_w[g]);
    nnf_free(k->packed_w);
    nnf_free(k->dw_w);
    nnf_free(k);
}

/* U = G g G^T per (oc, c), computed in double and rounded once, then packed
 * per point xi = 6k + l as a GEMM A operand (OC x C). */
static nnf_status winograd_weights(nnf_conv_kernel *k, const float *w) {
    const nnf_conv2d_shape *s = &k->s;
    nnf_status st = NNF_OK;
    size_t n;
    float *u = NULL;
    if (!nnf_mul_size(s->oc, s->c, &n) || !nnf_mul_size(n, 36, &n))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "convolution weights are too large");
    k->cfg = nnf_gemm_cfg_for(k->isa);
    k->packed_w = nnf_calloc(36, sizeof *k->packed_w);
    u = nnf_malloc(n * sizeof(float));
    if (!k->packed_w || !u) {
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for Winograd weights");
        goto fail;
    }
    k->n_packed = 36;
    size_t occ = s->oc * s->c;
    for (size_t i = 0; i < occ; i++) {
        const float *g = w + i * 9;
        double t[6][3]; /* G g */
        for (int a = 0; a < 6; a++)
            for (int b = 0; b < 3; b++)
                t[a][b] = nnf_wino_g[a][0] * g[b] + nnf_wino_g[a][1] * g[3 + b] +
                          nnf_wino_g[a][2] * g[6 + b];
        for (int a = 0; a < 6; a++)
            for (int b = 0; b < 6; b++)
                u[(size_t)(a * 6 + b) * occ + i] =
                    (float)(t[a][0] * nnf_wino_g[b][0] + t[a][1] * nnf_wino_g[b][1] +
                            t[a][2] * nnf_wino_g[b][2]);
    }
    for (size_t xi = 0; xi < 36; xi++) {
        st = nnf_gemm_pack_a(k->cfg, s->oc, s->c, u + xi * occ, s->c, 0, &k->packed_w[xi]);
        if (st != NNF_OK)
            goto fail;
    }
fail:
    nnf_free(u);
    return st;
}

nnf_status nnf_conv_kernel_create(const nnf_conv2d_shape *s, nnf_conv_algo algo, nnf_isa isa,
                                  const float *w, nnf_conv_kernel **out) {
    *out = NULL;
    nnf_status st = NNF_OK;
    if (algo == NNF_CONV_ALGO_NONE)
        return nnf_error(NNF_ERR_INTERNAL, "no optimised convolution for this shape");
    nnf_conv_kernel *k = nnf_calloc(1, sizeof *k);
    if (!k)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for a convolution kernel");
    k->s = *s;
    k->algo = algo;
    k->isa = isa > nnf_cpu_get()->max_isa ? nnf_cpu_get()->max_isa : isa;
    size_t taps = s->kh * s->kw, icg = s->c / s->group, ocg = s->oc / s->group;
    size_t kdim, wcount;
    if (!nnf_mul_size(icg, taps, &kdim) || !nnf_mul_size(kdim, s->oc, &wcount)) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "convolution weights are too large");
        goto fail;
    }
    if (algo == NNF_CONV_ALGO_DEPTHWISE) {
        k->dw_w = nnf_calloc(wcount, sizeof(float));
        if (!k->dw_w) {
            st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for depthwise weights");
            goto fail;
        }
        memcpy(k->dw_w, w, wcount * sizeof(float));
        snprintf(k->name, sizeof k->name, "f32_dwconv%zux%zu_s%zu_%s", s->kh, s->kw, s->sh,
                 k->isa == NNF_ISA_SCALAR ? "scalar" : "avx2");
    } else if (algo == NNF_CONV_ALGO_WINOGRAD) {
        st = winograd_weights(k, w);
        if (st != NNF_OK)
            goto fail;
        snprintf(k->name, sizeof k->name, "f32_conv_%s_%s", nnf_conv_algo_name(algo),
                 k->cfg->name + strlen("f32_gemm_"));
    } else {
        k->cfg = nnf_gemm_cfg_for(k->isa);
        k->n_packed = s->group;
        k->packed_w = nnf_calloc(s->group, sizeof *k->packed_w);
        if (!k->packed_w) {
            st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for packed weights");
            goto fail;
        }
        for (size_t g = 0; g < s->group; g++) {
            st = nnf_gemm_pack_a(k->cfg, ocg, kdim, w + g * ocg * kdim, kdim, 0, &k->packed_w[g]);
            if (st != NNF_OK)
                goto fail;
        }
        /* "f32_gemm_6x16_avx2" -> "f32_conv_im2col_6x16_avx2" */
        snprintf(k->name, sizeof k->name, "f32_conv_%s_%s", nnf_conv_algo_name(algo),
                 k->cfg->name + strlen("f32_gemm_"));
    }
    *out = k;
    return NNF_OK;
fail:
    nnf_conv_kernel_destroy(k);
    return st;
}

/* ---- implicit im2col ------------------------------------------------------ */


/* Column n of the virtual im2col matrix is output pixel (n / ow, n % ow); row
 * k is (ic, kh, kw). Writes panel-major as gemm.h describes; r is a power of
 * two. Runs along output rows so stride-1 taps become contiguous copies. */
void nnf_im2col_pack_scalar(const void *vctx, size_t n0, size_t nc, size_t k0, size_t kc, size_t r,
                            float *dst) {
    const nnf_im2col_ctx *c = vctx;
    const nnf_conv2d_shape *s = c->s;
    const size_t taps = s->kh * s->kw, rmask = r - 1, pstride = kc * r;
    size_t shift = (size_t)__builtin_ctzll((unsigned long long)r);
    for (size_t kk = 0; kk < kc; kk++) {
        size_t k = k0 + kk, ic = k / taps, tap = k % taps;
        size_t kh = tap / s->kw, kw = tap % s->kw;
        const float *xc = c->x + ic * s->h * s->w;
        float *drow = dst + kk * r;
        size_t oh = n0 / s->ow, ow = n0 % s->ow, pos = 0;
        while (pos < nc) {
            size_t run = s->ow - ow < nc - pos ? s->ow - ow : nc - pos;
            ptrdiff_t ih = (ptrdiff_t)(oh * s->sh + kh * s->dh) - (ptrdiff_t)s->pt;
            bool row_ok = ih >= 0 && ih < (ptrdiff_t)s->h;
            const float *xr = xc + (row_ok ? (size_t)ih * s->w : 0);
            ptrdiff_t iw0 = (ptrdiff_t)(ow * s->sw + kw * s->dw) - (ptrdiff_t)s->pl;
            for (size_t q = 0; q < run;) {
                size_t p = pos + q;
                size_t chunk = r - (p & rmask);
                if (chunk > run - q)
                    chunk = run - q;
                float *d = drow + (p >> shift) * pstride + (p & rmask);
                ptrdiff_t iw = iw0 + (ptrdiff_t)(q * s->sw);
                if (!row_ok) {
                    for (size_t e = 0; e < chunk; e++)
                        d[e] = 0.0f;
                } else if (s->sw == 1) {
                    /* zeros left of the image, a straight copy, zeros right of it */
                    ptrdiff_t lo = iw < 0 ? -iw : 0, hi = (ptrdiff_t)s->w - iw;
                    if (lo > (ptrdiff_t)chunk)
                        lo = (ptrdiff_t)chunk;
                    if (hi > (ptrdiff_t)chunk)
                        hi = (ptrdiff_t)chunk;
                    if (hi < lo)
                        hi = lo;
                    if (lo == 0 && hi == (ptrdiff_t)chunk && chunk == 16) {
                        /* the common interior case: one fixed-size (vector) copy */
                        __builtin_memcpy(d, xr + iw, 16 * sizeof(float));
                    } else {
                        for (ptrdiff_t e = 0; e < lo; e++)
                            d[e] = 0.0f;
                        for (ptrdiff_t e = lo; e < hi; e++)
                            d[e] = xr[iw + e];
                        for (ptrdiff_t e = hi; e < (ptrdiff_t)chunk; e++)
                            d[e] = 0.0f;
                    }
                } else {
                    for (size_t e = 0; e < chunk; e++, iw += (ptrdiff_t)s->sw)
                        d[e] = iw >= 0 && iw < (ptrdiff_t)s->w ? xr[iw] : 0.0f;
                }
                q += chunk;
            }
            pos += run;
            oh++;
            ow = 0;
        }
        for (size_t p = nc; p & rmask; p++)
            drow[(p >> shift) * pstride + (p & rmask)] = 0.0f;
    }
}

static nnf_status conv_gemm(const nnf_conv_kernel *k, const float *x, float *y,
                            const nnf_epilogue *ep, nnf_threadpool *pool) {
    const nnf_conv2d_shape *s = &k->s;
    size_t icg = s->c / s->group, ocg = s->oc / s->group;
    size_t hw = s->h * s->w, ohw = s->oh * s->ow, kdim = icg * s->kh * s->kw;
    for (size_t b = 0; b < s->n; b++) {
        for (size_t g = 0; g < s->group; g++) {
            const float *xg = x + (b * s->c + g * icg) * hw;
            size_t yoff = (b * s->oc + g * ocg) * ohw;
            nnf_epilogue e = *ep;
            if (e.bias)
                e.bias += g * ocg;
            if (e.residual) {
                e.residual += yoff;
                e.ld_residual = ohw;
            }
            nnf_gemm_src a = nnf_gemm_src_packed(k->packed_w[g]);
            nnf_im2col_ctx ctx = {.x = xg, .s = s};
            nnf_gemm_src bsrc;
            if (k->algo == NNF_CONV_ALGO_GEMM_1X1) {
                bsrc = nnf_gemm_src_matrix(xg, hw, 0);
            } else {
                /* the AVX2 packer serves every tier whose panels are a
                 * multiple of 8 wide (AVX-512 CPUs have AVX2) */
                int vec = k->isa >= NNF_ISA_AVX2 && k->cfg->nr % 8 == 0 &&
                          s->h * s->w <= (size_t)INT32_MAX / 2;
                bsrc = (nnf_gemm_src){.pack = vec ? nnf_im2col_pack_avx2 : nnf_im2col_pack_scalar,
                                      .pack_ctx = &ctx};
            }
            NNF_CHECK(nnf_gemm_run(k->cfg, ocg, ohw, kdim, &a, &bsrc, y + yoff, ohw, &e, pool));
        }
    }
    return NNF_OK;
}

/* ---- depthwise ------------------------------------------------------------- */

void nnf_dw_row_scalar(const float *const *x, const float *w, size_t k, size_t s, float *y,
                       size_t ow, const nnf_tile_ep *t) {
    for (size_t o = 0; o < ow; o++) {
        float acc = 0.0f;
        for (size_t i = 0; i < k; i++)
            for (size_t j = 0; j < k; j++)
                acc += w[i * k + j] * x[i][o * s + j];
        y[o] = nnf_epilogue_scalar(t, 0, o, acc);
    }
}

#define NNF_DW_MAX_SLOTS 256

typedef struct dw_job {
    const nnf_conv_kernel *k;
    const float *x;
    float *y;
    const nnf_epilogue *ep;
    nnf_dw_row_fn row;
    /* stride 2 (streaming) */
    const float *zero_row; /* w + 64 zeros: rows in the vertical padding */
    const float *x_end;    /* one past the input */
    /* stride 1 (padded plane) */
    float *scratch;
    size_t hp, wp, slot_floats;
    int slots;
    atomic_int busy[NNF_DW_MAX_SLOTS];
} dw_job;

/* The row kernels read a window of 16 s + k - 1 inputs per 16 outputs. */
#define DW_EDGE_W (16 * 2 + 5 - 1)

/* Outputs [o0, o0 + n) (n <= 16) through a zero-padded copy of their
 * window: only for rows whose vector reads would run past the end of the
 * input buffer (the last rows of the last plane). */
static void dw_edge(const dw_job *j, const float *const *rp, const float *w, size_t o0, size_t n,
                    float *y, const nnf_tile_ep *t) {
    const nnf_conv2d_shape *s = &j->k->s;
    float buf[5][DW_EDGE_W + 16];
    const float *bp[5];
    ptrdiff_t ws = (ptrdiff_t)(o0 * s->sw) - (ptrdiff_t)s->pl, wi = (ptrdiff_t)s->w;
    for (size_t i = 0; i < s->kh; i++) {
        for (ptrdiff_t c = 0; c < (ptrdiff_t)(DW_EDGE_W + 16); c++)
            buf[i][c] = rp[i] != j->zero_row && ws + c >= 0 && ws + c < wi ? rp[i][ws + c] : 0.0f;
        bp[i] = buf[i];
    }
    nnf_tile_ep te = *t;
    if (te.residual)
        te.residual += o0;
    j->row(bp, w, s->kh, s->sh, y + o0, n, &te);
}

/* One output whose window touches the left or right padding. */
static void dw_one(const dw_job *j, const float *const *rp, const float *w, size_t o, float *y,
                   const nnf_tile_ep *t) {
    const nnf_conv2d_shape *s = &j->k->s;
    ptrdiff_t ws = (ptrdiff_t)(o * s->sw) - (ptrdiff_t)s->pl;
    float acc = 0.0f;
    for (size_t i = 0; i < s->kh; i++)
        for (size_t q = 0; q < s->kw; q++) {
            ptrdiff_t iw = ws + (ptrdiff_t)q;
            if (iw >= 0 && iw < (ptrdiff_t)s->w)
                acc += w[i * s->kw + q] * rp[i][iw];
        }
    y[o] = nnf_epilogue_scalar(t, 0, o, acc);
}

/* Stride 2: one channel plane, row by row straight from the input rows
 * (rows in the vertical padding point at zeros). The outputs whose windows lie inside
 * the row go to the row kernel; its last 16-wide step may read past the
 * row into the next one, which only feeds lanes that are not stored. The
 * one or two outputs per side that touch the horizontal padding are
 * computed one by one. Copying the plane into a zero-padded buffer first
 * cost 12 % more here (each input row feeds only 1.5 output rows). */
static void dw_task(void *ctx, size_t plane) {
    dw_job *j = ctx;
    const nnf_conv2d_shape *s = &j->k->s;
    const float *xs = j->x + plane * s->h * s->w;
    size_t ch = plane % s->c, k = s->kh, st = s->sh;
    const nnf_epilogue *ep = j->ep;
    float *yp = j->y + plane * s->oh * s->ow;
    const float *res = ep->residual ? ep->residual + plane * s->oh * s->ow : NULL;
    const float *w = j->k->dw_w + ch * k * k;
    /* inside outputs [lo, hi): o s - pl >= 0 and o s - pl + k <= w */
    size_t lo = (s->pl + st - 1) / st, hi = 0;
    if (s->w + s->pl >= k)
        hi = (s->w + s->pl - k) / st + 1;
    if (hi > s->ow)
        hi = s->ow;
    if (lo > hi)
        lo = hi;
    /* the vector reads' end for the run, from the first tap of output lo */
    size_t span = (hi - lo + 15) / 16 * 16 * st + k - 1;
    for (size_t oh = 0; oh < s->oh; oh++) {
        const float *rp[5], *ip[5];
        int past_end = 0;
        for (size_t i = 0; i < k; i++) {
            ptrdiff_t ih = (ptrdiff_t)(oh * st + i) - (ptrdiff_t)s->pt;
            rp[i] = ih >= 0 && ih < (ptrdiff_t)s->h ? xs + (size_t)ih * s->w : j->zero_row;
            ip[i] = rp[i] + (lo * st - s->pl);
            if (rp[i] != j->zero_row && (size_t)(j->x_end - ip[i]) < span)
                past_end = 1;
        }
        nnf_tile_ep t = {.ep = ep,
                         .bias = ep->bias ? ep->bias + ch : NULL,
                         .residual = res ? res + oh * s->ow : NULL};
        float *yr = yp + oh * s->ow;
        for (size_t o = 0; o < lo; o++)
            dw_one(j, rp, w, o, yr, &t);
        if (past_end) {
            for (size_t o = lo; o < hi; o += 16)
                dw_edge(j, rp, w, o, hi - o < 16 ? hi - o : 16, yr, &t);
        } else if (hi > lo) {
            nnf_tile_ep te = t;
            if (te.residual)
                te.residual += lo;
            j->row(ip, w, k, st, yr + lo, hi - lo, &te);
        }
        for (size_t o = hi; o < s->ow; o++)
            dw_one(j, rp, w, o, yr, &t);
    }
}

/* Stride 1: each input row feeds k output rows, so a zero-padded copy of
 * the plane (in per-thread scratch) is cheaper than streaming, whose 1-2
 * edge outputs per side and row, computed one by one, cost 30 % more at
 * 56 and 112 wide. */
static void dw_task_padded(void *ctx, size_t plane) {
    dw_job *j = ctx;
    const nnf_conv2d_shape *s = &j->k->s;
    int slot;
    for (;;) {
        for (slot = 0; slot < j->slots; slot++)
            if (!atomic_load_explicit(&j->busy[slot], memory_order_relaxed) &&
                !atomic_exchange_explicit(&j->busy[slot], 1, memory_order_acquire))
                goto claimed;
    }
claimed:;
    float *xp = j->scratch + (size_t)slot * j->slot_floats;
    const float *xs = j->x + plane * s->h * s->w;
    size_t ch = plane % s->c;
    for (size_t r = 0; r < j->hp; r++) {
        float *d = xp + r * j->wp;
        ptrdiff_t ih = (ptrdiff_t)r - (ptrdiff_t)s->pt;
        if (ih < 0 || ih >= (ptrdiff_t)s->h) {
            memset(d, 0, j->wp * sizeof(float));
            continue;
        }
        size_t cols = s->w < j->wp - s->pl ? s->w : j->wp - s->pl;
        memset(d, 0, s->pl * sizeof(float));
        memcpy(d + s->pl, xs + (size_t)ih * s->w, cols * sizeof(float));
        memset(d + s->pl + cols, 0, (j->wp - s->pl - cols) * sizeof(float));
    }
    const nnf_epilogue *ep = j->ep;
    float *yp = j->y + plane * s->oh * s->ow;
    const float *res = ep->residual ? ep->residual + plane * s->oh * s->ow : NULL;
    const float *w = j->k->dw_w + ch * s->kh * s->kw;
    for (size_t oh = 0; oh < s->oh; oh++) {
        nnf_tile_ep t = {.ep = ep,
                         .bias = ep->bias ? ep->bias + ch : NULL,
                         .residual = res ? res + oh * s->ow : NULL};
        const float *rows[5];
        for (size_t i = 0; i < s->kh; i++)
            rows[i] = xp + (oh * s->sh + i) * j->wp;
        j->row(rows, w, s->kh, s->sh, yp + oh * s->ow, s->ow, &t);
    }
    atomic_store_explicit(&j->busy[slot], 0, memory_order_release);
}

/* One block of up to 8 channels of one image (nnf_dw_c8_avx2). */
static void dw_c8_task(void *ctx, size_t item) {
    dw_job *j = ctx;
    const nnf_conv2d_shape *s = &j->k->s;
    size_t blocks = (s->c + 7) / 8, b = item / blocks, c0 = item % blocks * 8;
    size_t nc = s->c - c0 < 8 ? s->c - c0 : 8, plane = b * s->c + c0, ohw = s->oh * s->ow;
    const float *res = j->ep->residual ? j->ep->residual + plane * ohw : NULL;
    nnf_dw_c8_avx2(s, j->k->dw_w, j->x + plane * s->h * s->w, j->y + plane * ohw, c0, nc, j->ep, res);
}

/* The channel-interleaved kernel up to 32 outputs wide (measured, 3x3 s1
 * with ReLU6 on one thread: 576 x 14x14 0.59 -> 0.18 ms, 192 x 28x28
 * 0.46 -> 0.23 ms, 144 x 56x56 s2 0.52 -> 0.38 ms; at 56 wide s1 the two
 * kernels tie, at 112 the row kernel is twice as fast). */
static int dw_c8_fits(const nnf_conv2d_shape *s, nnf_isa isa) {
    if (isa < NNF_ISA_AVX2 || s->ow > 32)
        return 0;
    size_t wp = (s->ow - 1) * s->sw + s->kw;
    return wp <= NNF_DW_C8_MAX / s->kh;
}

static _Thread_local float *t_dw_scratch;
static _Thread_local size_t t_dw_floats;

static nnf_status conv_depthwise(const nnf_conv_kernel *k, const float *x, float *y,
                                 const nnf_epilogue *ep, nnf_threadpool *pool) {
    const nnf_conv2d_shape *s = &k->s;
    nnf_status st = NNF_OK;
    float *zero = NULL;
    dw_job *j = nnf_calloc(1, sizeof *j);
    if (!j)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory for a depthwise job", k->name);
    j->k = k;
    j->x = x;
    j->y = y;
    j->ep = ep;
    j->row = k->isa >= NNF_ISA_AVX2 ? nnf_dw_row_avx2 : nnf_dw_row_scalar;
    size_t planes = s->n * s->c;
    if (dw_c8_fits(s, k->isa)) {
        nnf_parallel_for(pool, s->n * ((s->c + 7) / 8), dw_c8_task, j);
        goto fail;
    }
    if (s->sh == 2) {
        size_t zw;
        if (!nnf_add_size(s->w, 64, &zw)) {
            st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: input too wide", k->name);
            goto fail;
        }
        zero = nnf_calloc(zw, sizeof(float));
        if (!zero) {
            st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory for a zero row", k->name);
            goto fail;
        }
        j->zero_row = zero;
        j->x_end = x + planes * s->h * s->w;
        nnf_parallel_for(pool, planes, dw_task, j);
        goto fail;
    }
    /* the row kernel reads 16 outputs' windows per step */
    size_t ow16 = (s->ow + 15) / 16 * 16;
    j->hp = (s->oh - 1) * s->sh + s->kh;
    j->wp = ow16 * s->sw + s->kw + 16;
    if (j->wp < s->w + s->pl)
        j->wp = s->w + s->pl;
    j->slot_floats = j->hp * j->wp;
    int threads = nnf_threadpool_size(pool);
    j->slots = threads < NNF_DW_MAX_SLOTS ? threads : NNF_DW_MAX_SLOTS;
    size_t total = j->slot_floats * (size_t)j->slots;
    if (total > t_dw_floats) {
        float *p = nnf_malloc_aligned(total * sizeof(float));
        if (!p) {
            st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory for depthwise scratch", k->name);
            goto fail;
        }
        nnf_free_aligned(t_dw_scratch);
        t_dw_scratch = p;
        t_dw_floats = total;
    }
    j->scratch = t_dw_scratch;
    nnf_parallel_for(pool, planes, dw_task_padded, j);
fail:
    nnf_free(zero);
    nnf_free(j);
    return st;
}

nnf_status nnf_conv_kernel_run(const nnf_conv_kernel *k, const float *x, float *y,
                               const nnf_epilogue *ep, nnf_threadpool *pool) {
    nnf_epilogue plain = nnf_epilogue_default();
    if (!ep)
        ep = &plain;
    if (ep->bias && ep->bias_kind != NNF_BIAS_PER_ROW)
        return nnf_error(NNF_ERR_INTERNAL, "%s: convolution bias must be per output channel", k->name);
    if (k->algo == NNF_CONV_ALGO_DEPTHWISE)
        return conv_depthwise(k, x, y, ep, pool);
    if (k->algo == NNF_CONV_ALGO_WINOGRAD)
        return nnf_conv_winograd_avx2(k, x, y, ep, pool);
    return conv_gemm(k, x, y, ep, pool);
}

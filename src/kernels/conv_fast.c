/* Optimised convolution: algorithm selection, weight preparation, implicit
 * im2col packing for the GEMM (the depthwise driver is in conv_dw.c). */
#include "kernels/conv_fast.h"

#include "base/alloc.h"
#include "base/packs.h"

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

/* A shape every algorithm needs: whole groups, no zero extent. */
static bool shape_valid(const nnf_conv2d_shape *s) {
    return s->group && s->c % s->group == 0 && s->oc % s->group == 0 && s->kh && s->kw && s->sh &&
           s->sw && s->dh && s->dw && s->oh && s->ow;
}

bool nnf_conv_algo_fits(const nnf_conv2d_shape *s, nnf_conv_algo algo, nnf_isa isa) {
    if (!s || !shape_valid(s))
        return false;
    switch (algo) {
    case NNF_CONV_ALGO_NONE: return false;
    case NNF_CONV_ALGO_IM2COL:
    case NNF_CONV_ALGO_STRIDED: return true;
    case NNF_CONV_ALGO_GEMM_1X1: /* the input is the GEMM operand as it lies */
        return s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 && s->pt == 0 && s->pl == 0 &&
               s->oh == s->h && s->ow == s->w;
    case NNF_CONV_ALGO_DEPTHWISE: /* the plane kernels (conv_dw.c): any window */
        return s->group == s->c && s->oc == s->c;
    case NNF_CONV_ALGO_WINOGRAD: /* AVX2 transforms around 8-column GEMM panels */
        return isa >= NNF_ISA_AVX2 && nnf_gemm_cfg_for(isa)->nr % 8 == 0 && s->group == 1 &&
               s->kh == 3 && s->kw == 3 && s->sh == 1 && s->sw == 1 && s->dh == 1 && s->dw == 1 &&
               s->w <= (1u << 20) && s->oh <= (1u << 20);
    }
    return false;
}

/* Winograd pays when the 36 GEMMs are big enough to run near peak (some
 * channels) and the tiles, counted in groups of 8 for the transforms, are
 * mostly useful: a 7x7 output (4 tiles of 8) would waste 60 %. */
static int winograd_wins(const nnf_conv2d_shape *s, nnf_isa isa) {
    if (!nnf_conv_algo_fits(s, NNF_CONV_ALGO_WINOGRAD, isa) || s->c < 16 || s->oc < 16)
        return 0;
    size_t tiles = ((s->oh + 3) / 4) * ((s->ow + 3) / 4), t8 = (tiles + 7) / 8 * 8;
    /* useful outputs over computed outputs at least 5/8 */
    return s->oh * s->ow * 8 >= t8 * 16 * 5;
}

nnf_conv_algo nnf_conv_select(const nnf_conv2d_shape *s, nnf_isa isa) {
    if (!shape_valid(s))
        return NNF_CONV_ALGO_NONE;
    if (nnf_conv_algo_fits(s, NNF_CONV_ALGO_DEPTHWISE, isa))
        return NNF_CONV_ALGO_DEPTHWISE;
    if (nnf_conv_algo_fits(s, NNF_CONV_ALGO_GEMM_1X1, isa))
        return NNF_CONV_ALGO_GEMM_1X1;
    if (winograd_wins(s, isa))
        return NNF_CONV_ALGO_WINOGRAD;
    /* few input channels (the stems, K = 27..147): packing was a third of
     * the time; with many channels the GEMM dominates and the split copy
     * lost 10-20 % (measured at K = 288, 1152, 2304) */
    if ((s->sh > 1 || s->sw > 1) && s->c / s->group * s->kh * s->kw <= 160)
        return NNF_CONV_ALGO_STRIDED;
    return NNF_CONV_ALGO_IM2COL;
}

const char *nnf_conv_algo_name(nnf_conv_algo algo) {
    switch (algo) {
    case NNF_CONV_ALGO_NONE: return "reference";
    case NNF_CONV_ALGO_GEMM_1X1: return "gemm1x1";
    case NNF_CONV_ALGO_IM2COL: return "im2col";
    case NNF_CONV_ALGO_DEPTHWISE: return "dw";
    case NNF_CONV_ALGO_WINOGRAD: return "winograd4x4";
    case NNF_CONV_ALGO_STRIDED: return "strided";
    }
    return "?";
}

void nnf_conv_kernel_destroy(nnf_conv_kernel *k) {
    if (!k)
        return;
    nnf_gemm_packed_destroy_all(k->packed_w, k->n_packed);
    nnf_free_aligned(k->dw_w);
    nnf_free(k->tap_off);
    nnf_free(k);
}

/* U = G g G^T per (oc, c) (nnf_wino_weight_8_avx2), packed per point
 * xi = 6k + l as a GEMM operand. */
size_t nnf_wino_round16(size_t n) {
    return (n + 15) / 16 * 16;
}

size_t nnf_wino_odd_lines(size_t n) {
    n = nnf_wino_round16(n);
    return (n / 16) % 2 ? n : n + 16;
}

/* U_xi packed as the GEMMs' A (oc rows, c columns), a slice of output
 * channels at a time: the slice's 36 matrices transformed into a buffer
 * of about 1 MiB, then packed into place. (All 36 row-major first, then
 * packed, took 38 MB more for 512 channels, faulted in, written, read and
 * unmapped: 15 % of loading the U-Net.) */
static nnf_status winograd_weights(nnf_conv_kernel *k, const float *w) {
    const nnf_conv2d_shape *s = &k->s;
    if (k->isa < NNF_ISA_AVX2)
        return nnf_error(NNF_ERR_UNSUPPORTED, "Winograd needs the AVX2 tier");
    k->cfg = nnf_gemm_cfg_for(k->isa);
    size_t mr = k->cfg->mr, rows = ((size_t)1 << 20) / (36 * sizeof(float) * (s->c ? s->c : 1));
    rows = rows < mr ? mr : rows / mr * mr;
    if (rows > s->oc)
        rows = s->oc;
    size_t n;
    if (!nnf_mul_size(rows, s->c, &n) || !nnf_mul_size(n, 36, &n) || n > SIZE_MAX / sizeof(float))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "convolution weights are too large");
    k->packed_w = nnf_calloc(36, sizeof *k->packed_w);
    if (!k->packed_w)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for Winograd weights");
    k->n_packed = 36;
    NNF_CHECK(nnf_gemm_packed_create_n(k->cfg, NNF_GEMM_A, s->oc, s->c, 36, k->packed_w));
    if (k->packed_w[0]->ready) /* from a compiled file: packed already */
        return NNF_OK;
    float *u = nnf_malloc(n * sizeof(float));
    if (!u)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for Winograd weights");
    size_t per = rows * s->c; /* floats of a slice's matrix */
    for (size_t o0 = 0; o0 < s->oc; o0 += rows) {
        size_t ro = s->oc - o0 < rows ? s->oc - o0 : rows, occ = ro * s->c;
        for (size_t i0 = 0; i0 < occ; i0 += 8) { /* (oc, c) kernels, 8 at a time */
            float *dst[36];
            for (size_t xi = 0; xi < 36; xi++)
                dst[xi] = u + xi * per + i0;
            nnf_wino_weight_8_avx2(w + (o0 * s->c + i0) * 9, 9, occ - i0 < 8 ? occ - i0 : 8, dst);
        }
        for (size_t xi = 0; xi < 36; xi++) {
            nnf_gemm_src src = nnf_gemm_src_matrix(u + xi * per, s->c, 0);
            nnf_gemm_pack_slice(k->cfg, k->packed_w[xi], o0, ro, &src);
        }
    }
    nnf_free(u);
    return NNF_OK;
}

nnf_status nnf_conv_kernel_create(const nnf_conv2d_shape *s, nnf_conv_algo algo, nnf_isa isa,
                                  const float *w, nnf_conv_kernel **out) {
    *out = NULL;
    nnf_status st = NNF_OK;
    nnf_isa tier = isa > nnf_cpu_get()->max_isa ? nnf_cpu_get()->max_isa : isa;
    if (!nnf_conv_algo_fits(s, algo, tier))
        return nnf_error(NNF_ERR_UNSUPPORTED,
                         "convolution %zux%zu stride %zux%zu dilation %zux%zu group %zu: not a "
                         "shape the %s algorithm computes",
                         s->kh, s->kw, s->sh, s->sw, s->dh, s->dw, s->group,
                         nnf_conv_algo_name(algo));
    nnf_conv_kernel *k = nnf_calloc(1, sizeof *k);
    if (!k)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for a convolution kernel");
    k->s = *s;
    k->algo = algo;
    k->isa = tier;
    size_t taps = s->kh * s->kw, icg = s->c / s->group, ocg = s->oc / s->group;
    size_t kdim, wcount;
    if (!nnf_mul_size(icg, taps, &kdim) || !nnf_mul_size(kdim, s->oc, &wcount)) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "convolution weights are too large");
        goto fail;
    }
    if (algo == NNF_CONV_ALGO_DEPTHWISE) {
        st = nnf_conv_dw_prepare(k, w);
        if (st != NNF_OK)
            goto fail;
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
        if (algo == NNF_CONV_ALGO_STRIDED && (st = nnf_conv_strided_prepare(k)) != NNF_OK)
            goto fail;
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
        const float *xc = c->planes ? c->planes[ic] : c->x + ic * s->h * s->w;
        float *drow = dst + kk * r;
        size_t oh = n0 / s->ow, ow = n0 % s->ow, pos = 0;
        while (pos < nc) {
            size_t run = s->ow - ow < nc - pos ? s->ow - ow : nc - pos;
            ptrdiff_t ih = (ptrdiff_t)(oh * s->sh + kh * s->dh) - (ptrdiff_t)s->pt;
            bool row_ok = xc && ih >= 0 && ih < (ptrdiff_t)s->h;
            const float *xr = row_ok ? xc + (size_t)ih * s->w : NULL;
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
            nnf_epilogue e = nnf_conv_group_epilogue(ep, s, b, g);
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

nnf_status nnf_conv_kernel_run(const nnf_conv_kernel *k, const float *x, float *y,
                               const nnf_epilogue *ep, nnf_threadpool *pool) {
    nnf_epilogue plain = nnf_epilogue_default();
    if (!ep)
        ep = &plain;
    if (ep->bias && ep->bias_kind != NNF_BIAS_PER_ROW)
        return nnf_error(NNF_ERR_INTERNAL, "%s: convolution bias must be per output channel", k->name);
    if (k->algo == NNF_CONV_ALGO_DEPTHWISE)
        return nnf_conv_dw_run(k, x, y, ep, pool);
    if (k->algo == NNF_CONV_ALGO_WINOGRAD)
        return nnf_conv_winograd_avx2(k, x, y, ep, pool);
    if (k->algo == NNF_CONV_ALGO_STRIDED)
        return nnf_conv_strided_run(k, x, y, ep, pool);
    return conv_gemm(k, x, y, ep, pool);
}

/* ConvTranspose as a GEMM and a col2im (conv_transpose.h): the weight
 * packing, the bands, and the gather of each output row from its taps'
 * columns. */
#include "kernels/conv_transpose.h"

#include "base/alloc.h"
#include "kernels/vmath.h"

#include <stdio.h>
#include <string.h>

/* Floats of one band's columns (OCg kh kw x band pixels): 2 MiB, which the
 * gather reads back from L2 and L3 (256 and 128 KiB bands measured no
 * faster); a band is at least one input row. */
#define CONVT_COLS_MAX ((size_t)512 * 1024)

bool nnf_convt_fits(const nnf_conv2d_shape *s) {
    /* any crop and output extent: outputs no tap reaches are the bias */
    return s->n && s->c && s->h && s->w && s->oc && s->group && s->kh && s->kw && s->sh && s->sw &&
           s->dh && s->dw && s->oh && s->ow && !(s->c % s->group) && !(s->oc % s->group) &&
           s->sw <= CONVT_SW_MAX && s->dh < ((size_t)1 << 30) / s->kh &&
           s->dw < ((size_t)1 << 30) / s->kw && s->sh < ((size_t)1 << 30) &&
           s->pt < ((size_t)1 << 40) && s->pl < ((size_t)1 << 40) &&
           s->h * s->w <= ((size_t)1 << 40);
}

void nnf_convt_kernel_destroy(nnf_convt_kernel *k) {
    if (!k)
        return;
    nnf_gemm_packed_destroy_all(k->packed_w, k->kd * k->s.group);
    nnf_free(k->kw_phase);
    nnf_free(k);
}

nnf_status nnf_convt_kernel_create(const nnf_conv2d_shape *s, nnf_isa isa, const float *w,
                                   nnf_convt_kernel **out) {
    return nnf_convt_kernel_create_3d(s, 1, 1, isa, w, out);
}

nnf_status nnf_convt_kernel_create_3d(const nnf_conv2d_shape *s, size_t d, size_t kd, nnf_isa isa,
                                      const float *w, nnf_convt_kernel **out) {
    *out = NULL;
    if (!d || !kd)
        return nnf_error(NNF_ERR_UNSUPPORTED, "transposed convolution: no depth");
    if (!nnf_convt_fits(s))
        return nnf_error(NNF_ERR_UNSUPPORTED,
                         "transposed convolution %zux%zu stride %zux%zu group %zu: not a shape the "
                         "GEMM kernel computes",
                         s->kh, s->kw, s->sh, s->sw, s->group);
    size_t icg = s->c / s->group, ocg = s->oc / s->group, taps, rows, cols;
    if (!nnf_mul_size(s->kh, s->kw, &taps) || !nnf_mul_size(ocg, taps, &rows) ||
        !nnf_mul_size(rows, s->c, &cols))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "transposed convolution weights are too large");
    size_t slices;
    if (!nnf_mul_size(kd, s->group, &slices) || !nnf_mul_size(cols, kd, &cols))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "transposed convolution weights are too large");
    nnf_convt_kernel *k = nnf_calloc(1, sizeof *k);
    if (!k || !(k->packed_w = nnf_calloc(slices, sizeof *k->packed_w))) {
        nnf_free(k);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY,
                         "out of memory for a transposed convolution kernel");
    }
    k->s = *s;
    k->d = d;
    k->kd = kd;
    k->isa = isa > nnf_cpu_get()->max_isa ? nnf_cpu_get()->max_isa : isa;
    k->cfg = nnf_gemm_cfg_for(k->isa);
    /* depth tap t's slice of W (C x OCg x KD x kh kw) as C x OCg kh kw */
    float *slice = kd > 1 ? nnf_malloc(s->c * rows * sizeof(float)) : NULL;
    if (kd > 1 && !slice) {
        nnf_convt_kernel_destroy(k);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory for transposed convolution weights");
    }
    for (size_t t = 0; t < kd; t++) {
        const float *wt = w;
        if (slice) {
            for (size_t r = 0; r < s->c * ocg; r++)
                memcpy(slice + r * taps, w + (r * kd + t) * taps, taps * sizeof(float));
            wt = slice;
        }
        for (size_t g = 0; g < s->group; g++) {
            /* group g's rows of W are ICg x (OCg kh kw): A transposed */
            nnf_status st = nnf_gemm_pack_a(k->cfg, rows, icg, wt + g * icg * rows, rows, 1,
                                            &k->packed_w[t * s->group + g]);
            if (st != NNF_OK) {
                nnf_free(slice);
                nnf_convt_kernel_destroy(k);
                return st;
            }
        }
    }
    nnf_free(slice);
    /* output column ox = iw sw + kw dw - pl: phase ox mod sw, at iw + shift */
    if (!(k->kw_phase = nnf_calloc(2 * s->kw, sizeof *k->kw_phase))) {
        nnf_convt_kernel_destroy(k);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY,
                         "out of memory for a transposed convolution kernel");
    }
    k->kw_shift = k->kw_phase + s->kw;
    for (size_t kw = 0; kw < s->kw; kw++) {
        ptrdiff_t off = (ptrdiff_t)(kw * s->dw) - (ptrdiff_t)s->pl, sw = (ptrdiff_t)s->sw;
        k->kw_phase[kw] = (off % sw + sw) % sw;
        k->kw_shift[kw] = (off - k->kw_phase[kw]) / sw;
    }
    k->tiled2 = s->kw == 2 && s->sw == 2 && s->kh == s->sh && s->dh == 1 && s->dw == 1 && !s->pt &&
                !s->pl && s->oh == s->h * s->sh && s->ow == s->w * 2;
    /* output rows take input rows from (kh - 1) dh / sh before their last */
    k->halo = (s->kh - 1) * s->dh / s->sh;
    size_t band = CONVT_COLS_MAX / rows / s->w;
    band = band > k->halo ? band - k->halo : 1;
    /* bands of equal rows, each GEMM streaming the whole packed W: one fewer
     * where the others then take at most a quarter more (16 rows of 15 were
     * a band of 15 and one of 1: W streamed twice, 6 % of DCGAN's 4x4) */
    size_t nb = (s->h + band - 1) / band;
    if (nb > 1 && s->h * 4 <= band * 5 * (nb - 1))
        nb--;
    k->band_rows = (s->h + nb - 1) / nb;
    /* + 8: the row primitives read whole vectors past a run's end */
    size_t held;
    if (!nnf_mul_size(k->halo + k->band_rows, s->w, &held) ||
        !nnf_mul_size(rows, held, &k->cols_floats) ||
        !nnf_add_size(k->cols_floats, 8, &k->cols_floats)) {
        nnf_convt_kernel_destroy(k);
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "transposed convolution rows are too large");
    }
    /* "f32_gemm_6x16_avx2" -> "f32_convtranspose_gemm_6x16_avx2" */
    snprintf(k->name, sizeof k->name, "f32_convtranspose%s_%s", kd > 1 || d > 1 ? "3d" : "",
             k->cfg->name + strlen("f32_"));
    *out = k;
    return NNF_OK;
}

/* The portable row primitives (conv_transpose_rows.h says what each does). */
static inline void convt_fill(float *d, float v, size_t n) {
    for (size_t i = 0; i < n; i++)
        d[i] = v;
}

static inline void convt_set(float *restrict d, const float *restrict s, float v, size_t n) {
    for (size_t i = 0; i < n; i++)
        d[i] = s[i] + v;
}

static inline void convt_add(float *restrict d, const float *restrict s, size_t n) {
    for (size_t i = 0; i < n; i++)
        d[i] += s[i];
}

static inline void convt_add_exact(float *restrict d, const float *restrict s, size_t n) {
    convt_add(d, s, n);
}

static inline void convt_interleave2(float *restrict y, const float *restrict p0,
                                     const float *restrict p1, size_t n) {
    for (size_t t = 0; t < n; t++) {
        y[2 * t] = p0[t];
        y[2 * t + 1] = p1[t];
    }
}

static inline void convt_interleave2_bias(float *restrict y, const float *restrict p0,
                                          const float *restrict p1, float b, size_t n) {
    for (size_t t = 0; t < n; t++) {
        y[2 * t] = p0[t] + b;
        y[2 * t + 1] = p1[t] + b;
    }
}

#define NNF_CONVT_ROWS nnf_convt_rows_scalar
#include "kernels/conv_transpose_rows.h"

/* One image's planes: x's channels ldx floats apart, y's ldy apart, the
 * weights packed[g] per group. */
static nnf_status run_planes(const nnf_convt_kernel *k, nnf_gemm_packed *const *packed,
                             const float *x, size_t ldx, float *y, size_t ldy,
                             const nnf_epilogue *ep, float *cols, nnf_threadpool *pool) {
    const nnf_conv2d_shape *s = &k->s;
    size_t icg = s->c / s->group, ocg = s->oc / s->group, rows = ocg * s->kh * s->kw;
    size_t ldc = (k->halo + k->band_rows) * s->w;
    nnf_activation none = {.kind = NNF_ACT_NONE};
    for (size_t g = 0; g < s->group; g++) {
        const float *xg = x + g * icg * ldx;
        nnf_convt_band band = {
            .k = k,
            .cols = cols,
            .ldc = ldc,
            .y = y + g * ocg * ldy,
            .ldy = ldy,
            .bias = ep && ep->bias ? ep->bias + g * ocg : NULL,
            .act = ep ? &ep->act : &none,
        };
        for (size_t ih0 = 0; ih0 < s->h; ih0 += k->band_rows) {
            size_t ih1 = ih0 + k->band_rows < s->h ? ih0 + k->band_rows : s->h;
            /* the columns of the last halo rows before ih0 move to the
             * front; the band's go after them */
            if (ih0 && k->halo)
                for (size_t r = 0; r < rows; r++)
                    memmove(cols + r * ldc, cols + r * ldc + k->band_rows * s->w,
                            k->halo * s->w * sizeof(float));
            band.base = (ptrdiff_t)ih0 - (ptrdiff_t)k->halo;
            nnf_gemm_src a = nnf_gemm_src_packed(packed[g]);
            nnf_gemm_src bsrc = nnf_gemm_src_matrix(xg + ih0 * s->w, ldx, 0);
            NNF_CHECK(nnf_gemm_run(k->cfg, rows, (ih1 - ih0) * s->w, icg, &a, &bsrc,
                                   cols + k->halo * s->w, ldc, NULL, pool));
            /* output row oy takes input rows up to (oy + pt) / sh: the
             * rows with oy + pt < ih1 sh are complete */
            size_t done = ih1 == s->h ? s->oh : ih1 * s->sh > s->pt ? ih1 * s->sh - s->pt : 0;
            band.oy0 = band.oy1;
            band.oy1 = done < s->oh ? done : s->oh;
            if (band.oy1 > band.oy0)
                nnf_parallel_for(
                    pool, ocg, k->isa >= NNF_ISA_AVX2 ? nnf_convt_rows_avx2 : nnf_convt_rows_scalar,
                    &band);
        }
    }
    return NNF_OK;
}

nnf_status nnf_convt_kernel_run(const nnf_convt_kernel *k, const float *x, float *y,
                                const nnf_epilogue *ep, nnf_threadpool *pool) {
    const nnf_conv2d_shape *s = &k->s;
    if (ep &&
        (ep->alpha != 1.0f || ep->residual || (ep->bias && ep->bias_kind != NNF_BIAS_PER_ROW)))
        return nnf_error(NNF_ERR_INTERNAL,
                         "%s: the epilogue must be a per-channel bias and an "
                         "activation",
                         k->name);
    float *cols = nnf_thread_scratch(NNF_SCRATCH_CONV_COLS, k->cols_floats);
    if (!cols)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY,
                         "%s: out of memory for the columns of %zu input rows", k->name,
                         k->band_rows);
    /* input plane id goes to output planes id kd .. id kd + kd - 1, one a
     * depth tap (2-D: one of each) */
    size_t hw = s->h * s->w, ohw = s->oh * s->ow, dhw = k->d * hw, odhw = k->d * k->kd * ohw;
    for (size_t b = 0; b < s->n; b++)
        for (size_t id = 0; id < k->d; id++)
            for (size_t t = 0; t < k->kd; t++)
                NNF_CHECK(run_planes(k, k->packed_w + t * s->group, x + b * s->c * dhw + id * hw,
                                     dhw, y + b * s->oc * odhw + (id * k->kd + t) * ohw, odhw, ep,
                                     cols, pool));
    return NNF_OK;
}

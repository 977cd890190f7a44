/* The transposed convolution's col2im rows, written once for each tier's
 * row primitives (kernels/conv_transpose.c for the portable ones,
 * x86/conv_transpose_avx2.c for AVX2): the includer defines, static
 * inline, convt_fill, convt_set and convt_add (n a multiple of 8, reading
 * (s) past the run's end into the columns' slack), convt_add_exact,
 * convt_interleave2 and convt_interleave2_bias (exactly n), and
 * NNF_CONVT_ROWS, the name of the entry (a parallel_for task over a
 * group's output channels, ctx an nnf_convt_band). Inlined, the primitives
 * cost no call each: a row of a 4x4 s2 makes ten of them on 16 floats. */
#include "kernels/conv_transpose.h"
#include "kernels/vmath.h"

#include <stdbool.h>
#include <string.h>

#ifndef NNF_CONVT_ROWS
#error "define NNF_CONVT_ROWS and the row primitives before including conv_transpose_rows.h"
#endif

/* Row oy of output channel m, outputs t0 s .. t1 s of each phase: output
 * ox = iw s + kw d - pad lies in phase r = ox mod s at t = ox div s, so
 * each tap adds a contiguous run of its columns to one phase's sums (ph,
 * tch floats per phase, a multiple of 8), which then go to the row
 * (interleaved where s > 1). Runs that reach the chunk's end are rounded up
 * to whole vectors into the phase's slack. */
static void convt_row(const nnf_convt_band *b, size_t m, size_t oy, size_t t0, size_t t1,
                      size_t tch, float *ph) {
    const nnf_conv2d_shape *s = &b->k->s;
    const size_t sw = s->sw, n = t1 - t0, n8 = (n + 7) & ~(size_t)7;
    float *y = b->y + m * b->ldy + oy * s->ow;
    float bias = b->bias ? b->bias[m] : 0.0f;
    /* a phase's first tap that covers the whole chunk sets its sums (bias
     * + columns); otherwise the phase starts as the bias */
    bool set[CONVT_SW_MAX];
    for (size_t r = 0; r < sw; r++)
        set[r] = false;
    for (size_t kh = 0; kh < s->kh; kh++) {
        ptrdiff_t num = (ptrdiff_t)(oy + s->pt) - (ptrdiff_t)(kh * s->dh);
        if (num < 0 || num % (ptrdiff_t)s->sh || (size_t)num / s->sh >= s->h)
            continue;
        size_t ih = (size_t)num / s->sh;
        const float *rowc = b->cols + (size_t)((ptrdiff_t)ih - b->base) * s->w;
        for (size_t kw = 0; kw < s->kw; kw++) {
            ptrdiff_t r = b->k->kw_phase[kw], e = b->k->kw_shift[kw]; /* t = iw + e */
            ptrdiff_t lo = e > (ptrdiff_t)t0 ? e : (ptrdiff_t)t0;
            ptrdiff_t hi =
                (ptrdiff_t)s->w + e < (ptrdiff_t)t1 ? (ptrdiff_t)s->w + e : (ptrdiff_t)t1;
            if (lo < 0)
                lo = 0;
            if (lo >= hi)
                continue;
            float *d = ph + (size_t)r * tch + (size_t)lo - t0;
            const float *c = rowc + ((m * s->kh + kh) * s->kw + kw) * b->ldc + (size_t)(lo - e);
            size_t len = (size_t)(hi - lo), to_end = n8 - ((size_t)lo - t0);
            if (!set[r]) {
                set[r] = true;
                if ((size_t)lo == t0 && (size_t)hi == t1) {
                    convt_set(d, c, bias, n8);
                    continue;
                }
                convt_fill(ph + (size_t)r * tch, bias, n8);
            }
            if ((size_t)hi == t1 && to_end % 8 == 0)
                convt_add(d, c, to_end);
            else
                convt_add_exact(d, c, len);
        }
    }
    for (size_t r = 0; r < sw; r++)
        if (!set[r])
            convt_fill(ph + r * tch, bias, n8);
    if (b->act->kind != NNF_ACT_NONE)
        for (size_t r = 0; r < sw; r++)
            nnf_act_array(b->k->isa, b->act, ph + r * tch, ph + r * tch, n);
    if (sw == 1) {
        memcpy(y + t0, ph, n * sizeof(float));
    } else if (sw == 2) {
        /* phase 1 has one output fewer where the row's width is odd */
        size_t pairs = (s->ow - 2 * t0) / 2 < n ? (s->ow - 2 * t0) / 2 : n;
        convt_interleave2(y + 2 * t0, ph, ph + tch, pairs);
        if (pairs < n)
            y[2 * (t0 + pairs)] = ph[pairs];
    } else {
        for (size_t r = 0; r < sw; r++)
            for (size_t t = t0; t < t1 && t * sw + r < s->ow; t++)
                y[t * sw + r] = ph[r * tch + t - t0];
    }
}

/* Output channel m of the group: the rows the band completes, in chunks of
 * phases that fit CONVT_ROW_MAX floats; where the taps tile the output
 * (tiled2), each row straight from its two columns (the same sums: column
 * + bias, then the activation). The general row's phase bookkeeping took a
 * tenth of the U-Net's 512 -> 256 upsampling at 16x16 (8192 rows of 32). */
void NNF_CONVT_ROWS(void *ctx, size_t m) {
    const nnf_convt_band *b = ctx;
    const nnf_conv2d_shape *s = &b->k->s;
    if (b->k->tiled2) {
        float bias = b->bias ? b->bias[m] : 0.0f;
        for (size_t oy = b->oy0; oy < b->oy1; oy++) {
            size_t ih = oy / s->sh, kh = oy % s->sh;
            const float *c =
                b->cols + (size_t)((ptrdiff_t)ih - b->base) * s->w + (m * s->kh + kh) * 2 * b->ldc;
            float *y = b->y + m * b->ldy + oy * s->ow;
            convt_interleave2_bias(y, c, c + b->ldc, bias, s->w);
            if (b->act->kind != NNF_ACT_NONE)
                nnf_act_array(b->k->isa, b->act, y, y, s->ow);
        }
        return;
    }
    _Alignas(32) float ph[CONVT_ROW_MAX];
    size_t tn = (s->ow + s->sw - 1) / s->sw, tch = CONVT_ROW_MAX / s->sw & ~(size_t)7;
    if (tch > tn)
        tch = (tn + 7) & ~(size_t)7;
    for (size_t oy = b->oy0; oy < b->oy1; oy++)
        for (size_t t0 = 0; t0 < tn; t0 += tch)
            convt_row(b, m, oy, t0, t0 + tch < tn ? t0 + tch : tn, tch, ph);
}

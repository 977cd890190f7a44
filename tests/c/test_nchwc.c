/* The NCHWc8 kernels of kernels/nchwc.h owned by nchwc_{reorder,dw,pool,resize}.c
 * and x86/nchwc_avx2.c, on every tier this machine has, against plain loop
 * oracles written here on NCHW data:
 *   reorders   round trip exact, padding lanes written as +0;
 *   depthwise  double-precision sum; tolerance K 2^-22 sum|w x| + 2e-6 (1 + |y|)
 *              with K = KH KW taps (float FMA/add chains of K terms) and the
 *              second term for the vector activations' stated error
 *              (vmath_avx2.h: <= 4e-7 abs for tanh/erf, 3e-7 rel for exp);
 *   pools      the reference pool kernel's window rules (kernels/ref/pool.c)
 *              restated as loops: max exact, average within 1e-6 relative;
 *   global     double sum / hw, max skipping NaN like the reference;
 *   resize     exact gather.
 * Every kernel also runs on a 2-thread pool and must be bit-identical to the
 * inline run, and must not write past its output (a guard of sentinels).
 * NNF_TEST_SOAK=N adds N random cases of each family on a wider grid, on
 * 3 threads too (soak() below). */
#include "base/alloc.h"
#include "base/cpu.h"
#include "base/threadpool.h"
#include "kernels/nchwc.h"

#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static nnf_threadpool *pool2;
static nnf_threadpool *pool3; /* the soak's third thread count; NULL in the fixed cases */

static size_t out_dim(size_t in, size_t k, size_t s, size_t d, size_t p0, size_t p1) {
    size_t span = (k - 1) * d + 1;
    return in + p0 + p1 < span ? 0 : (in + p0 + p1 - span) / s + 1;
}

static float *nan_buf(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

/* Every output buffer is followed by GUARD sentinels that no kernel may
 * write. */
#define GUARD 16
#define SENTINEL 12345.0f

/* n floats of `fill`, then the guard. The runs on 1, 2 and 3 threads fill
 * their outputs differently, so an element that no call writes makes them
 * differ even where the oracle would accept the filler (a NaN window). */
static float *out_buf(size_t n, float fill) {
    float *p = malloc((n + GUARD) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = fill;
    for (size_t i = 0; i < GUARD; i++)
        p[n + i] = SENTINEL;
    return p;
}

#define FILL1 NAN
#define FILL2 (-1e30f)
#define FILL3 1e30f

/* NULL when y1, y2 and y3 (NULL: no 3-thread run) hold the same n floats,
 * bit for bit, and their guards are intact; else what differs. */
static const char *outputs_differ(const float *y1, const float *y2, const float *y3, size_t n) {
    static char why[160];
    const float *ys[3] = {y1, y2, y3};
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; ys[t] && i < GUARD; i++)
            if (ys[t][n + i] != SENTINEL) {
                snprintf(why, sizeof why, "the %d-thread run wrote past the end (guard %zu = %.9g)",
                         t + 1, i, ys[t][n + i]);
                return why;
            }
    for (int t = 1; t < 3; t++)
        if (ys[t] && memcmp(y1, ys[t], n * sizeof(float)) != 0) {
            size_t i = 0;
            while (!memcmp(y1 + i, ys[t] + i, sizeof(float)))
                i++;
            snprintf(why, sizeof why, "1 and %d threads differ first at %zu of %zu: %.9g vs %.9g",
                     t + 1, i, n, y1[i], ys[t][i]);
            return why;
        }
    return NULL;
}

static int bits_zero(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u == 0;
}

/* Index of logical (b, c, p) in a blocked tensor with cb blocks of hw pixels. */
static size_t blk_at(size_t b, size_t c, size_t p, size_t cb, size_t hw) {
    return ((b * cb + c / 8) * hw + p) * 8 + c % 8;
}

/* ---- reorders ---- */

/* One round trip of n images of c channels and hw pixels. */
static void check_reorder(size_t n, size_t c, size_t hw, nnf_isa isa) {
    size_t cb = nnf_nchwc_blocks(c), xn = n * c * hw, bn = n * cb * 8 * hw;
    float *x = check_rand_buf(xn), *yb = out_buf(bn, FILL1), *yb2 = out_buf(bn, FILL2),
          *yb3 = pool3 ? out_buf(bn, FILL3) : NULL, *back = out_buf(xn, FILL1),
          *back2 = out_buf(xn, FILL2), *back3 = pool3 ? out_buf(xn, FILL3) : NULL;
    nnf_nchwc_from_nchw(x, yb, n, c, hw, isa, NULL);
    nnf_nchwc_from_nchw(x, yb2, n, c, hw, isa, pool2);
    if (pool3)
        nnf_nchwc_from_nchw(x, yb3, n, c, hw, isa, pool3);
    int bad = 0, pad_bad = 0;
    for (size_t b = 0; b < n; b++)
        for (size_t k = 0; k < cb * 8; k++)
            for (size_t p = 0; p < hw; p++) {
                float v = yb[blk_at(b, k, p, cb, hw)];
                if (k < c)
                    bad += v != x[(b * c + k) * hw + p];
                else
                    pad_bad += !bits_zero(v);
            }
    CHECK_MSG(bad == 0, "from_nchw %s n %zu c %zu hw %zu: %d wrong", nnf_isa_name(isa), n, c, hw,
              bad);
    CHECK_MSG(pad_bad == 0, "from_nchw %s n %zu c %zu hw %zu: %d padding lanes not +0",
              nnf_isa_name(isa), n, c, hw, pad_bad);
    const char *why = outputs_differ(yb, yb2, yb3, bn);
    CHECK_MSG(!why, "from_nchw %s n %zu c %zu hw %zu: %s", nnf_isa_name(isa), n, c, hw, why);
    nnf_nchwc_to_nchw(yb, back, n, c, hw, isa, NULL);
    nnf_nchwc_to_nchw(yb, back2, n, c, hw, isa, pool2);
    if (pool3)
        nnf_nchwc_to_nchw(yb, back3, n, c, hw, isa, pool3);
    CHECK_MSG(memcmp(back, x, xn * sizeof(float)) == 0, "round trip %s n %zu c %zu hw %zu",
              nnf_isa_name(isa), n, c, hw);
    why = outputs_differ(back, back2, back3, xn);
    CHECK_MSG(!why, "to_nchw %s n %zu c %zu hw %zu: %s", nnf_isa_name(isa), n, c, hw, why);
    free(x), free(yb), free(yb2), free(yb3), free(back), free(back2), free(back3);
}

static void test_reorder(nnf_isa isa) {
    static const size_t cs[] = {1, 3, 7, 8, 9, 17, 64}, hws[] = {1, 13, 16, 47, 61};
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++)
        for (size_t hi = 0; hi < sizeof hws / sizeof hws[0]; hi++)
            check_reorder(2, cs[ci], hws[hi], isa);
}

/* ---- depthwise ---- */

typedef struct dw_case {
    size_t c, h, w, k_h, k_w, s, d, pt, pl, pb, pr;
    nnf_activation act;
    int bias, res, nan;
    int res_after;          /* residual after the activation, scaled by 0.5 */
    size_t n;               /* batch; 0: 2 */
    size_t s_w, d_w;        /* column stride and dilation; 0: as s and d */
    float alpha, res_scale; /* 0: 1, and the residual's scale as res_after says */
    size_t cpg;             /* 2 or 4: the grouped conv of that many channels a group
                             * (nchwc_gconv.c); 0: depthwise */
} dw_case;

static double worst_dw;

static int run_dw(const dw_case *q, nnf_isa isa) {
    size_t cpg = q->cpg ? q->cpg : 1;
    int grouped = cpg > 1;
    nnf_conv2d_shape s = {.n = q->n ? q->n : 2,
                          .c = q->c,
                          .h = q->h,
                          .w = q->w,
                          .oc = q->c,
                          .group = q->c / cpg,
                          .kh = q->k_h,
                          .kw = q->k_w,
                          .sh = q->s,
                          .sw = q->s_w ? q->s_w : q->s,
                          .dh = q->d,
                          .dw = q->d_w ? q->d_w : q->d,
                          .pt = q->pt,
                          .pl = q->pl};
    s.oh = out_dim(q->h, q->k_h, s.sh, s.dh, q->pt, q->pb);
    s.ow = out_dim(q->w, q->k_w, s.sw, s.dw, q->pl, q->pr);
    if (!s.oh || !s.ow)
        return 0;
    size_t cb = nnf_nchwc_blocks(s.c), taps = s.kh * s.kw, ihw = s.h * s.w, ohw = s.oh * s.ow;
    size_t xn = s.n * s.c * ihw, yn = s.n * s.c * ohw, xbn = s.n * cb * 8 * ihw, ybn = s.n * cb * 8 * ohw;
    float *x = check_rand_buf(xn), *w = check_rand_buf(s.c * cpg * taps),
          *bias = check_rand_buf(s.c);
    float *r = check_rand_buf(yn), *xb = nan_buf(xbn), *rb = nan_buf(ybn),
          *y1 = out_buf(ybn, FILL1), *y2 = out_buf(ybn, FILL2),
          *y3 = pool3 ? out_buf(ybn, FILL3) : NULL;
    if (q->nan)
        x[(s.c / 2) * ihw + ihw / 2] = NAN; /* image 0, a middle channel, the middle pixel */
    nnf_nchwc_from_nchw(x, xb, s.n, s.c, ihw, NNF_ISA_SCALAR, NULL);
    nnf_nchwc_from_nchw(r, rb, s.n, s.c, ohw, NNF_ISA_SCALAR, NULL);
    nnf_epilogue ep = nnf_epilogue_default();
    ep.act = q->act;
    if (q->alpha != 0.0f)
        ep.alpha = q->alpha;
    if (q->bias) {
        ep.bias_kind = NNF_BIAS_PER_ROW;
        ep.bias = bias;
    }
    if (q->res) {
        ep.residual = rb;
        if (q->res_after) {
            ep.residual_after_act = 1;
            ep.residual_scale = 0.5f;
        }
        if (q->res_scale != 0.0f)
            ep.residual_scale = q->res_scale;
    }
    nnf_nchwc_dw *k = NULL;
    nnf_nchwc_gconv *gk = NULL;
    int bad = 0;
    const char *why = NULL;
    CHECK(grouped ? nnf_nchwc_gconv_supported(&s) : nnf_nchwc_dw_supported(&s));
    CHECK((grouped ? nnf_nchwc_gconv_create(&s, isa, w, &gk)
                   : nnf_nchwc_dw_create(&s, isa, w, &k)) == NNF_OK);
    if (!k && !gk)
        goto done;
#define RUN_DW(y, pool)                                                                            \
    (grouped ? nnf_nchwc_gconv_run(gk, xb, y, &ep, pool) : nnf_nchwc_dw_run(k, xb, y, &ep, pool))
    if (grouped && q->res && q->res_after) {
        /* the passes add their sums before the activation */
        CHECK(RUN_DW(y1, NULL) == NNF_ERR_UNSUPPORTED);
        nnf_error_clear();
        goto done;
    }
    CHECK(RUN_DW(y1, NULL) == NNF_OK);
    CHECK(RUN_DW(y2, pool2) == NNF_OK);
    if (pool3)
        CHECK(RUN_DW(y3, pool3) == NNF_OK);
#undef RUN_DW
    why = outputs_differ(y1, y2, y3, ybn);
    CHECK_MSG(!why,
              "dw %s cpg %zu n %zu c %zu h %zu w %zu %zux%zu s %zu,%zu d %zu,%zu pads "
              "%zu,%zu,%zu,%zu: %s",
              nnf_isa_name(isa), cpg, s.n, s.c, s.h, s.w, s.kh, s.kw, s.sh, s.sw, s.dh, s.dw, q->pt,
              q->pl, q->pb, q->pr, why);
    if (!grouped && !q->res && nnf_nchwc_dw_plain_ok(&s)) {
        /* between NCHW tensors: the blocked run's values after its output
         * reorder, bit for bit, on 1, 2 and 3 threads, nothing written past
         * the output */
        float *want = out_buf(yn, FILL1), *p1 = out_buf(yn, FILL1), *p2 = out_buf(yn, FILL2),
              *p3 = pool3 ? out_buf(yn, FILL3) : NULL;
        nnf_nchwc_to_nchw(y1, want, s.n, s.c, ohw, NNF_ISA_SCALAR, NULL);
        CHECK(nnf_nchwc_dw_run_plain(k, x, p1, &ep, NULL) == NNF_OK);
        CHECK(nnf_nchwc_dw_run_plain(k, x, p2, &ep, pool2) == NNF_OK);
        if (pool3)
            CHECK(nnf_nchwc_dw_run_plain(k, x, p3, &ep, pool3) == NNF_OK);
        why = outputs_differ(p1, p2, p3, yn);
        if (!why && (why = outputs_differ(want, p1, NULL, yn)) != NULL)
            why = "not the blocked run's values";
        CHECK_MSG(!why, "dw between NCHW tensors %s n %zu c %zu h %zu w %zu %zux%zu s %zu,%zu: %s",
                  nnf_isa_name(isa), s.n, s.c, s.h, s.w, s.kh, s.kw, s.sh, s.sw, why);
        free(want), free(p1), free(p2), free(p3);
    }
    for (size_t b = 0; b < s.n; b++)
        for (size_t c = 0; c < cb * 8; c++)
            for (size_t oh = 0; oh < s.oh; oh++)
                for (size_t ow = 0; ow < s.ow; ow++) {
                    float got = y1[blk_at(b, c, oh * s.ow + ow, cb, ohw)];
                    if (c >= s.c) {
                        if (!bits_zero(got) && bad++ < 3)
                            fprintf(stderr, "  padding lane %zu = %g\n", c, got);
                        continue;
                    }
                    double acc = 0, mag = 0;
                    for (size_t g = 0; g < cpg; g++) /* output c reads input c - c % cpg + g */
                        for (size_t i = 0; i < s.kh; i++)
                            for (size_t j = 0; j < s.kw; j++) {
                                ptrdiff_t ih = (ptrdiff_t)(oh * s.sh + i * s.dh) - (ptrdiff_t)s.pt;
                                ptrdiff_t iw = (ptrdiff_t)(ow * s.sw + j * s.dw) - (ptrdiff_t)s.pl;
                                if (ih < 0 || iw < 0 || ih >= (ptrdiff_t)s.h ||
                                    iw >= (ptrdiff_t)s.w)
                                    continue;
                                double p = (double)w[(c * cpg + g) * taps + i * s.kw + j] *
                                           x[(b * s.c + c - c % cpg + g) * ihw + (size_t)ih * s.w +
                                             (size_t)iw];
                                acc += p;
                                mag += fabs(p);
                            }
                    double pre = ep.alpha * acc + (q->bias ? bias[c] : 0.0);
                    double rv = ep.residual_scale * (double)r[(b * s.c + c) * ohw + oh * s.ow + ow];
                    if (q->res && !q->res_after)
                        pre += rv;
                    double want = nnf_act_apply(&q->act, (float)pre);
                    if (q->res && q->res_after)
                        want += rv;
                    /* alpha scales the sum's rounding error with it */
                    mag *= fabs(ep.alpha) > 1 ? fabs(ep.alpha) : 1;
                    double tol = (double)(taps * cpg) * ldexp(1.0, -22) * (mag + 1.0) +
                                 2e-6 * (1.0 + fabs(want));
                    int ok = isnan(want) ? isnan(got) : !isnan(got) && fabs(got - want) <= tol;
                    if (!isnan(want) && !isnan(got) && tol > 0 && fabs(got - want) / tol > worst_dw)
                        worst_dw = fabs(got - want) / tol;
                    if (!ok && bad++ < 3)
                        fprintf(stderr, "  b %zu c %zu (%zu,%zu): %.9g want %.9g tol %g\n", b, c, oh, ow, got,
                                want, tol);
                }
    CHECK_MSG(bad == 0,
              "dw %s cpg %zu n %zu c %zu h %zu w %zu %zux%zu s %zu,%zu d %zu,%zu pads "
              "%zu,%zu,%zu,%zu act %d "
              "(%g, %g) bias %d res %d%s alpha %g res_scale %g nan %d",
              nnf_isa_name(isa), cpg, s.n, s.c, s.h, s.w, s.kh, s.kw, s.sh, s.sw, s.dh, s.dw, q->pt,
              q->pl, q->pb, q->pr, q->act.kind, q->act.alpha, q->act.beta, q->bias, q->res,
              q->res_after ? " after" : "", ep.alpha, ep.residual_scale, q->nan);
done:
    nnf_nchwc_dw_destroy(k);
    nnf_nchwc_gconv_destroy(gk);
    free(x), free(w), free(bias), free(r), free(xb), free(rb), free(y1), free(y2), free(y3);
    return bad + (why != NULL);
}

static const nnf_activation acts[] = {
    {NNF_ACT_NONE, 0, 0},         {NNF_ACT_RELU, 0, 0},         {NNF_ACT_CLIP, 0.0f, 6.0f},
    {NNF_ACT_LEAKY_RELU, 0.1f, 0}, {NNF_ACT_SIGMOID, 0, 0},      {NNF_ACT_SILU, 0, 0},
    {NNF_ACT_TANH, 0, 0},         {NNF_ACT_HARD_SIGMOID, 0.2f, 0.5f}, {NNF_ACT_HARD_SWISH, 0, 0},
    {NNF_ACT_GELU_ERF, 0, 0},     {NNF_ACT_GELU_TANH, 0, 0},    {NNF_ACT_CLIP, 0.25f, 0.5f},
};
#define N_ACTS (sizeof acts / sizeof acts[0])

static void test_dw(nnf_isa isa) {
    static const size_t cs[] = {1, 7, 8, 9, 24, 31}, widths[] = {1, 2, 5, 13, 61};
    static const size_t kers[][2] = {{3, 3}, {5, 5}, {7, 7}, {1, 3}};
    static const size_t pads[][4] = {{0, 0, 0, 0}, {1, 1, 1, 1}, {2, 2, 2, 2}, {0, 1, 2, 0}, {2, 0, 1, 3}};
    size_t n = 0;
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++)
        for (size_t ki = 0; ki < 4; ki++)
            for (size_t st = 1; st <= 2; st++)
                for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++, n++) {
                    const size_t *pd = pads[n % 5];
                    dw_case q = {.c = cs[ci], .h = 3 + n % 6, .w = widths[wi], .k_h = kers[ki][0],
                                 .k_w = kers[ki][1], .s = st, .d = n % 3 == 2 ? 2 : 1, .pt = pd[0], .pl = pd[1],
                                 .pb = pd[2], .pr = pd[3], .act = acts[n % N_ACTS], .bias = n % 4 != 3,
                                 .res = n % 3 == 1};
                    run_dw(&q, isa);
                }
    /* every epilogue on one interior-heavy shape, and the unspecialised interior (7x7, dilation 2) */
    for (size_t a = 0; a < N_ACTS; a++)
        for (int res = 0; res <= 2; res++) {
            dw_case q = {.c = 9, .h = 9, .w = 29, .k_h = 3, .k_w = 3, .s = 1 + a % 2, .d = 1, .pt = 1, .pl = 1,
                         .pb = 1, .pr = 1, .act = acts[a], .bias = 1, .res = res > 0, .res_after = res == 2};
            run_dw(&q, isa);
            q.k_h = q.k_w = 5, q.d = 2, q.pt = q.pl = q.pb = q.pr = 4;
            run_dw(&q, isa);
        }
    /* the dilated rows at stride 1 with constant taps (3x3 at 2 and 4, 5x5
     * at 2: DeepLab's MobileNet and Xception backbones), their borders in
     * tiles of up to 8 pixels: rows narrower than the window, borders
     * wider than a tile, "same" and short right padding */
    static const size_t dks[][2] = {{3, 2}, {3, 4}, {5, 2}};
    static const size_t dws[] = {3, 7, 9, 14, 30};
    n = 0;
    for (size_t ki = 0; ki < 3; ki++)
        for (size_t wi = 0; wi < 5; wi++)
            for (int v = 0; v < 2; v++, n++) {
                size_t k = dks[ki][0], d = dks[ki][1], p = k / 2 * d;
                dw_case q = {.c = 12 + 8 * (size_t)v,
                             .h = 5 + wi,
                             .w = dws[wi],
                             .k_h = k,
                             .k_w = k,
                             .s = 1,
                             .d = d,
                             .pt = p,
                             .pl = p,
                             .pb = p,
                             .pr = v ? p / 2 : p,
                             .act = acts[n % N_ACTS],
                             .bias = v == 0,
                             .res = n % 3 == 0,
                             .res_after = n % 6 == 3};
                if (out_dim(q.w, k, 1, d, q.pl, q.pr) == 0)
                    continue;
                run_dw(&q, isa);
            }
    /* MobileNet's shape class at a width with every interior tile size (8, 4, 1) */
    dw_case mb = {.c = 32, .h = 14, .w = 23, .k_h = 3, .k_w = 3, .s = 1, .d = 1, .pt = 1, .pl = 1, .pb = 1,
                  .pr = 1, .act = {NNF_ACT_CLIP, 0.0f, 6.0f}, .bias = 1};
    run_dw(&mb, isa);
    mb.s = 2;
    run_dw(&mb, isa);
    /* the late layers' small maps, rows mostly border: 7 and 14 wide, 3x3,
     * 5x5 and 7x7 (ConvNeXt's), with a residual */
    for (size_t hw = 7; hw <= 14; hw += 7)
        for (size_t k = 3; k <= 7; k += 2) {
            dw_case q = {.c = 20, .h = hw, .w = hw, .k_h = k, .k_w = k, .s = 1, .d = 1, .pt = k / 2,
                         .pl = k / 2, .pb = k / 2, .pr = k / 2, .act = {NNF_ACT_CLIP, 0.0f, 6.0f},
                         .bias = 1, .res = 1};
            run_dw(&q, isa);
        }
    /* rows of 1-16 pixels, tiles with their borders (dw_row_small): 3x3,
     * 5x5 and 7x7 at "same" left padding, strides 1 and 2, both input
     * widths that give the row at stride 2, right padding short or long */
    for (size_t k = 3; k <= 7; k += 2)
        for (size_t st = 1; st <= 2; st++)
            for (size_t ow = 1; ow <= 17; ow++)
                for (size_t wv = 0; wv < st; wv++) {
                    size_t w = (ow - 1) * st + 1 + wv, p = k / 2;
                    /* the right padding that makes the row ow wide */
                    size_t reach = (ow - 1) * st + k, pr = reach > w + p ? reach - w - p : 0;
                    /* the row stride and dilation vary apart from the column's */
                    dw_case q = {.c = 11, .h = 6 + ow % 3, .w = w, .k_h = k, .k_w = k,
                                 .s = ow % 2 ? st : 3 - st, .s_w = st, .d = 1 + (ow % 3 == 1),
                                 .d_w = 1, .pt = p, .pl = p, .pb = p, .pr = pr,
                                 .act = acts[(ow + k) % N_ACTS], .bias = ow % 3 != 0,
                                 .res = ow % 2, .res_after = ow % 4 == 3};
                    run_dw(&q, isa);
                }
    /* NaN in the input reaches exactly the outputs whose window holds it */
    static const nnf_act_kind nan_acts[] = {NNF_ACT_NONE, NNF_ACT_RELU, NNF_ACT_CLIP, NNF_ACT_SILU};
    for (size_t a = 0; a < 4; a++) {
        dw_case q = {.c = 17, .h = 7, .w = 21, .k_h = 3, .k_w = 3, .s = 1 + a % 2, .d = 1, .pt = 1, .pl = 1,
                     .pb = 1, .pr = 1, .act = {nan_acts[a], 0.0f, 6.0f}, .bias = 1, .nan = 1};
        run_dw(&q, isa);
    }
    /* the grouped conv of 2 and 4 channels a group: channel counts with
     * padding lanes (4, 12, 20) and without, kernels 1x1 to 5x5 and 1x3,
     * strides, dilation, pads, every epilogue (a residual after the
     * activation refused), on the dw grid */
    static const size_t gcs[] = {4, 8, 12, 20, 36};
    static const size_t gkers[][2] = {{3, 3}, {1, 1}, {5, 5}, {1, 3}};
    n = 0;
    for (size_t cpg = 2; cpg <= 4; cpg += 2)
        for (size_t ci = 0; ci < sizeof gcs / sizeof gcs[0]; ci++)
            for (size_t ki = 0; ki < 4 && gcs[ci] / cpg >= 2; ki++, n++) {
                const size_t *pd = pads[n % 5];
                dw_case q = {.c = gcs[ci],
                             .h = 4 + n % 7,
                             .w = 3 + n % 11,
                             .k_h = gkers[ki][0],
                             .k_w = gkers[ki][1],
                             .s = 1 + n % 2,
                             .d = n % 5 == 3 ? 2 : 1,
                             .pt = pd[0],
                             .pl = pd[1],
                             .pb = pd[2],
                             .pr = pd[3],
                             .act = acts[n % N_ACTS],
                             .bias = n % 4 != 3,
                             .res = n % 3 == 1,
                             .res_after = n % 6 == 4,
                             .alpha = n % 7 == 5 ? 0.75f : 0.0f,
                             .cpg = cpg};
                run_dw(&q, isa);
            }
    /* maps whose pairs of blocks run in several bands of rows (a pair's
     * input and output planes, 1 MB here, over a quarter of L2: between
     * NCHW tensors nnf_nchwc_dw_run_plain, grouped nnf_nchwc_gconv_run), the
     * first band's windows all padding at stride 1 (pt 5); and ResNeXt-50's
     * first stage scaled down */
    const nnf_activation clip6 = {NNF_ACT_CLIP, 0.0f, 6.0f}, relu = {NNF_ACT_RELU, 0, 0};
    /* clang-format off */
    const dw_case wide[] = {
        {.c = 17, .h = 97, .w = 83, .k_h = 3, .k_w = 3, .s = 1, .d = 1, .pt = 5, .pl = 1, .pb = 1, .pr = 1, .act = clip6, .bias = 1},
        {.c = 17, .h = 97, .w = 83, .k_h = 7, .k_w = 7, .s = 2, .d = 2, .pt = 3, .pl = 3, .pb = 3, .pr = 3, .act = clip6, .bias = 1},
        {.c = 12, .h = 97, .w = 83, .k_h = 3, .k_w = 3, .s = 1, .d = 1, .pt = 5, .pl = 1, .pb = 1, .pr = 1, .act = relu, .bias = 1, .cpg = 2},
        {.c = 32, .h = 28, .w = 28, .k_h = 3, .k_w = 3, .s = 1, .d = 1, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .act = relu, .bias = 1, .cpg = 4},
    };
    /* clang-format on */
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++)
        run_dw(&wide[i], isa);
    /* a kernel taller than the row-pointer table (65 rows) takes the per-pixel path */
    dw_case tall = {.c = 3, .h = 70, .w = 4, .k_h = 65, .k_w = 1, .s = 1, .d = 1, .pt = 2, .pl = 0, .pb = 0,
                    .pr = 0, .act = {NNF_ACT_RELU, 0, 0}, .bias = 1};
    run_dw(&tall, isa);
}

/* ---- pools ---- */

typedef struct pool_case {
    size_t c, h, w, k, s, d, p, ceil;
    int is_max, cip;
} pool_case;

static size_t pool_out(size_t in, size_t k, size_t s, size_t d, size_t p0, size_t p1, int ceil_mode) {
    size_t span = (k - 1) * d + 1, room = in + p0 + p1 - span, o = room / s + 1;
    if (ceil_mode && room % s) {
        o++;
        if ((o - 1) * s >= in + p0) /* the last window must start inside the input or the begin padding */
            o--;
    }
    return o;
}

/* One pool of shape s (its oh, ow as ceil_mode gave them) on input data with
 * a NaN at flat NCHW index nan_at (none when past the input). */
static void check_pool(const nnf_nchwc_pool_shape *sp, int ceil_mode, size_t nan_at, nnf_isa isa) {
    const nnf_nchwc_pool_shape s = *sp;
    size_t cb = nnf_nchwc_blocks(s.c), ihw = s.h * s.w, ohw = s.oh * s.ow, ybn = s.n * cb * 8 * ohw;
    float *x = check_rand_buf(s.n * s.c * ihw), *xb = nan_buf(s.n * cb * 8 * ihw);
    float *y1 = out_buf(ybn, FILL1), *y2 = out_buf(ybn, FILL2),
          *y3 = pool3 ? out_buf(ybn, FILL3) : NULL;
    if (nan_at < s.n * s.c * ihw)
        x[nan_at] = NAN;
    nnf_nchwc_from_nchw(x, xb, s.n, s.c, ihw, NNF_ISA_SCALAR, NULL);
    nnf_nchwc_pool(&s, xb, y1, isa, NULL);
    nnf_nchwc_pool(&s, xb, y2, isa, pool2);
    if (pool3)
        nnf_nchwc_pool(&s, xb, y3, isa, pool3);
    const char *why = outputs_differ(y1, y2, y3, ybn);
    int bad = 0;
    for (size_t b = 0; b < s.n; b++)
        for (size_t c = 0; c < cb * 8; c++)
            for (size_t oh = 0; oh < s.oh; oh++)
                for (size_t ow = 0; ow < s.ow; ow++) {
                    float got = y1[blk_at(b, c, oh * s.ow + ow, cb, ohw)];
                    if (c >= s.c) {
                        bad += !bits_zero(got);
                        continue;
                    }
                    float acc = s.is_max ? -INFINITY : 0.0f;
                    int first = 1;
                    size_t count = 0, padded = 0;
                    for (size_t i = 0; i < s.kh; i++)
                        for (size_t j = 0; j < s.kw; j++) {
                            ptrdiff_t ih = (ptrdiff_t)(oh * s.sh + i * s.dh) - (ptrdiff_t)s.pt;
                            ptrdiff_t iw = (ptrdiff_t)(ow * s.sw + j * s.dw) - (ptrdiff_t)s.pl;
                            if (ih >= -(ptrdiff_t)s.pt && ih < (ptrdiff_t)(s.h + s.pb) && iw >= -(ptrdiff_t)s.pl &&
                                iw < (ptrdiff_t)(s.w + s.pr))
                                padded++;
                            if (ih < 0 || iw < 0 || ih >= (ptrdiff_t)s.h || iw >= (ptrdiff_t)s.w)
                                continue;
                            float v = x[(b * s.c + c) * ihw + (size_t)ih * s.w + (size_t)iw];
                            count++;
                            if (!s.is_max)
                                acc += v;
                            else if (first || v > acc)
                                acc = v;
                            first = 0;
                        }
                    float want = acc;
                    if (!s.is_max) {
                        size_t div = s.count_include_pad ? padded : count;
                        want = div ? acc / (float)div : 0.0f;
                    }
                    int ok = isnan(want) ? isnan(got)
                             : s.is_max  ? got == want
                                         : fabsf(got - want) <= 1e-6f * (1 + fabsf(want));
                    if (!ok && bad++ < 3)
                        fprintf(stderr, "  b %zu c %zu (%zu,%zu): %.9g want %.9g\n", b, c, oh, ow, got, want);
                }
    CHECK_MSG(bad == 0 && !why,
              "pool %s %s n %zu c %zu %zux%zu k %zux%zu s %zu,%zu d %zu,%zu pads %zu,%zu,%zu,%zu "
              "-> %zux%zu ceil %d cip %d nan at %zu: %s",
              nnf_isa_name(isa), s.is_max ? "max" : "avg", s.n, s.c, s.h, s.w, s.kh, s.kw, s.sh,
              s.sw, s.dh, s.dw, s.pt, s.pl, s.pb, s.pr, s.oh, s.ow, ceil_mode, s.count_include_pad,
              nan_at, why ? why : "wrong values");
    free(x), free(xb), free(y1), free(y2), free(y3);
}

static void run_pool(const pool_case *q, nnf_isa isa) {
    nnf_nchwc_pool_shape s = {.n = 2, .c = q->c, .h = q->h, .w = q->w, .kh = q->k, .kw = q->k,
                              .sh = q->s, .sw = q->s, .dh = q->d, .dw = q->d, .pt = q->p,
                              .pl = q->p, .pb = q->p, .pr = q->p, .is_max = q->is_max,
                              .count_include_pad = q->cip};
    s.oh = pool_out(q->h, q->k, q->s, q->d, q->p, q->p, (int)q->ceil);
    s.ow = pool_out(q->w, q->k, q->s, q->d, q->p, q->p, (int)q->ceil);
    /* image 0, channel 1: NaN stays only where it is a window's first tap */
    check_pool(&s, (int)q->ceil, s.h * s.w + 2, isa);
}

static void test_pool(nnf_isa isa) {
    static const pool_case base[] = {
        {.k = 2, .s = 2, .d = 1, .p = 0}, {.k = 3, .s = 2, .d = 1, .p = 1}, {.k = 5, .s = 1, .d = 1, .p = 2},
        {.k = 3, .s = 2, .d = 1, .p = 0, .ceil = 1}, {.k = 3, .s = 2, .d = 1, .p = 1, .ceil = 1},
        {.k = 2, .s = 2, .d = 1, .p = 0, .ceil = 1}, {.k = 3, .s = 1, .d = 2, .p = 1},
    };
    /* widths up to 61 so the AVX2 rows' 8-pixel interior groups run for every (k, s) */
    static const size_t cs[] = {3, 8, 13}, hs[] = {7, 8, 13}, ws[] = {7, 13, 29, 61};
    for (size_t bi = 0; bi < sizeof base / sizeof base[0]; bi++)
        for (size_t ci = 0; ci < 3; ci++)
            for (int kind = 0; kind < 3; kind++) {
                pool_case q = base[bi];
                q.c = cs[ci];
                q.h = hs[(ci + bi) % 3];
                q.w = ws[(ci + bi + (size_t)kind) % 4];
                q.is_max = kind == 0;
                q.cip = kind == 2;
                run_pool(&q, isa);
            }
}

/* One global pool; a NaN at flat NCHW index nan_at (none when past the input). */
static void check_global(size_t n, size_t c, size_t hw, int is_max, size_t nan_at, nnf_isa isa) {
    size_t cb = nnf_nchwc_blocks(c);
    float *x = check_rand_buf(n * c * hw), *xb = nan_buf(n * cb * 8 * hw);
    float *y1 = out_buf(n * c, FILL1), *y2 = out_buf(n * c, FILL2),
          *y3 = pool3 ? out_buf(n * c, FILL3) : NULL;
    if (nan_at < n * c * hw)
        x[nan_at] = NAN;
    nnf_nchwc_from_nchw(x, xb, n, c, hw, NNF_ISA_SCALAR, NULL);
    nnf_nchwc_global_pool(xb, y1, n, c, hw, is_max, isa, NULL);
    nnf_nchwc_global_pool(xb, y2, n, c, hw, is_max, isa, pool2);
    if (pool3)
        nnf_nchwc_global_pool(xb, y3, n, c, hw, is_max, isa, pool3);
    const char *why = outputs_differ(y1, y2, y3, n * c);
    CHECK_MSG(!why, "global %s %s n %zu c %zu hw %zu: %s", nnf_isa_name(isa),
              is_max ? "max" : "avg", n, c, hw, why);
    int bad = 0;
    for (size_t i = 0; i < n * c; i++) {
        double acc = 0;
        float m = -INFINITY;
        for (size_t p = 0; p < hw; p++) {
            acc += x[i * hw + p];
            m = x[i * hw + p] > m ? x[i * hw + p] : m; /* the reference's global max skips NaN */
        }
        float want = is_max ? m : (float)(acc / (double)hw);
        int ok = isnan(want) ? isnan(y1[i]) : is_max ? y1[i] == want : fabsf(y1[i] - want) <= 1e-7f;
        if (!ok && bad++ < 3)
            fprintf(stderr, "  [%zu][%zu]: %.9g want %.9g\n", i / c, i % c, y1[i], want);
    }
    CHECK_MSG(bad == 0, "global %s %s n %zu c %zu hw %zu nan at %zu: %d wrong", nnf_isa_name(isa),
              is_max ? "max" : "avg", n, c, hw, nan_at, bad);
    free(x), free(xb), free(y1), free(y2), free(y3);
}

static void test_global(nnf_isa isa) {
    static const size_t cs[] = {1, 7, 8, 9, 17}, hws[] = {1, 49, 61};
    for (size_t ci = 0; ci < 5; ci++)
        for (size_t hi = 0; hi < 3; hi++)
            for (int is_max = 0; is_max <= 1; is_max++)
                check_global(2, cs[ci], hws[hi], is_max,
                             is_max && hws[hi] > 1 ? hws[hi] / 2 : SIZE_MAX, isa);
}

/* One nearest resize by the tables rows[oh], cols[ow]. */
static void check_resize(size_t n, size_t c, size_t ih, size_t iw, size_t oh, size_t ow,
                         const int32_t *rows, const int32_t *cols, nnf_isa isa) {
    size_t cb = nnf_nchwc_blocks(c), ybn = n * cb * 8 * oh * ow;
    float *x = check_rand_buf(n * c * ih * iw), *xb = nan_buf(n * cb * 8 * ih * iw);
    float *y1 = out_buf(ybn, FILL1), *y2 = out_buf(ybn, FILL2),
          *y3 = pool3 ? out_buf(ybn, FILL3) : NULL;
    nnf_nchwc_from_nchw(x, xb, n, c, ih * iw, NNF_ISA_SCALAR, NULL);
    nnf_nchwc_resize_nearest(xb, y1, n, c, ih, iw, oh, ow, rows, cols, isa, NULL);
    nnf_nchwc_resize_nearest(xb, y2, n, c, ih, iw, oh, ow, rows, cols, isa, pool2);
    if (pool3)
        nnf_nchwc_resize_nearest(xb, y3, n, c, ih, iw, oh, ow, rows, cols, isa, pool3);
    const char *why = outputs_differ(y1, y2, y3, ybn);
    CHECK_MSG(!why, "resize %s n %zu c %zu %zux%zu -> %zux%zu: %s", nnf_isa_name(isa), n, c, ih, iw,
              oh, ow, why);
    int bad = 0;
    for (size_t b = 0; b < n; b++)
        for (size_t k = 0; k < cb * 8; k++)
            for (size_t i = 0; i < oh; i++)
                for (size_t j = 0; j < ow; j++) {
                    float got = y1[blk_at(b, k, i * ow + j, cb, oh * ow)];
                    if (k >= c)
                        bad += !bits_zero(got);
                    else
                        bad +=
                            got != x[((b * c + k) * ih + (size_t)rows[i]) * iw + (size_t)cols[j]];
                }
    CHECK_MSG(bad == 0, "resize %s n %zu c %zu %zux%zu -> %zux%zu: %d wrong", nnf_isa_name(isa), n,
              c, ih, iw, oh, ow, bad);
    free(x), free(xb), free(y1), free(y2), free(y3);
}

static void test_resize(nnf_isa isa) {
    static const size_t dims[][4] = {{5, 6, 10, 12}, {7, 3, 5, 11}, {1, 1, 3, 2}, {6, 9, 6, 9}};
    for (size_t di = 0; di < 4; di++)
        for (size_t c = 3; c <= 17; c += 7) {
            size_t ih = dims[di][0], iw = dims[di][1], oh = dims[di][2], ow = dims[di][3];
            int32_t *rows = malloc(oh * sizeof *rows), *cols = malloc(ow * sizeof *cols);
            for (size_t i = 0; i < oh; i++) /* 2x tables where the sizes say so, else odd ones */
                rows[i] = oh == 2 * ih ? (int32_t)(i / 2) : (int32_t)((i * 7 + 3) % ih);
            for (size_t j = 0; j < ow; j++)
                cols[j] = ow == 2 * iw ? (int32_t)(j / 2) : (int32_t)((j * 5 + 1) % iw);
            check_resize(2, c, ih, iw, oh, ow, rows, cols, isa);
            free(rows), free(cols);
        }
}

/* ---- Add / Sub / Mul with a per-channel operand ---- */

/* One op (0 add, 1 sub, 2 mul, as nnf_ew_binop) against the plain loop, bit
 * for bit: NaN and infinities in both operands, the padding lanes zero, 1,
 * 2 and (in the soak) 3 threads the same. */
static void check_channel(size_t n, size_t c, size_t hw, int op, int per_image, int v_first,
                          nnf_isa isa) {
    size_t cb = nnf_nchwc_blocks(c), bn = n * cb * 8 * hw, vn = per_image ? n : 1;
    float *x = check_rand_buf(n * c * hw), *v = check_rand_buf(vn * c);
    float *xb = nan_buf(bn), *vb = nan_buf(vn * cb * 8);
    float *y1 = out_buf(bn, FILL1), *y2 = out_buf(bn, FILL2),
          *y3 = pool3 ? out_buf(bn, FILL3) : NULL;
    x[n * c * hw / 2] = NAN;
    x[0] = INFINITY;
    v[vn * c - 1] = -INFINITY;
    nnf_nchwc_from_nchw(x, xb, n, c, hw, NNF_ISA_SCALAR, NULL);
    nnf_nchwc_from_nchw(v, vb, vn, c, 1, NNF_ISA_SCALAR, NULL);
    nnf_nchwc_channel_binary(op, xb, vb, y1, n, cb, hw, per_image, v_first, isa, NULL);
    nnf_nchwc_channel_binary(op, xb, vb, y2, n, cb, hw, per_image, v_first, isa, pool2);
    if (pool3)
        nnf_nchwc_channel_binary(op, xb, vb, y3, n, cb, hw, per_image, v_first, isa, pool3);
    const char *why = outputs_differ(y1, y2, y3, bn);
    CHECK_MSG(!why, "channel op %d %s n %zu c %zu hw %zu: %s", op, nnf_isa_name(isa), n, c, hw,
              why);
    int bad = 0;
    for (size_t b = 0; b < n; b++)
        for (size_t k = 0; k < cb * 8; k++)
            for (size_t p = 0; p < hw; p++) {
                float got = y1[blk_at(b, k, p, cb, hw)];
                if (k >= c) {
                    bad += !bits_zero(got);
                    continue;
                }
                float a = x[(b * c + k) * hw + p], e = v[(per_image ? b : 0) * c + k];
                float want = op == 2 ? a * e : op == 0 ? a + e : v_first ? e - a : a - e;
                bad += isnan(want) ? !isnan(got) : memcmp(&got, &want, sizeof got) != 0;
            }
    CHECK_MSG(bad == 0, "channel op %d %s n %zu c %zu hw %zu per_image %d v_first %d: %d wrong", op,
              nnf_isa_name(isa), n, c, hw, per_image, v_first, bad);
    free(x), free(v), free(xb), free(vb), free(y1), free(y2), free(y3);
}

static void test_channel(nnf_isa isa) {
    /* 1 and 3 pixels (no 4-pixel group), primes, a run of 2048 +- 1 */
    static const size_t cs[] = {1, 8, 13, 17}, hws[] = {1, 3, 49, 61, 2047, 2049};
    for (size_t ci = 0; ci < 4; ci++)
        for (size_t hi = 0; hi < 6; hi++)
            for (int op = 0; op < 3; op++)
                check_channel(hi % 2 ? 2 : 1, cs[ci], hws[hi], op, (int)(ci + hi) % 2,
                              op == 1 && ci % 2, isa);
}

/* ---- the soak ---- */

/* Uniform in [lo, hi]. */
static size_t uniform(size_t lo, size_t hi) {
    return lo + (size_t)(check_unit() * (double)(hi - lo + 1));
}

static size_t pick(const size_t *v, size_t n) {
    return v[(size_t)(check_unit() * (double)n) % n];
}

/* Any small count, or a multiple of 8 up to 296 off by -1, 0 or +1 (a last
 * block of 7, 8 or 1 real lanes behind many whole ones). */
static size_t soak_channels(void) {
    if (check_unit() < 0.3)
        return uniform(1, 24);
    size_t blocks = uniform(1, 37); /* one draw per statement: a seed replays anywhere */
    size_t c = 8 * blocks + uniform(0, 2) - 1;
    return c > 300 ? 300 : c;
}

/* A map extent: half the time one at the edges of the AVX2 rows' groups of
 * 8, 4 and 1 pixels, else any of 1..60. */
static size_t soak_extent(void) {
    static const size_t edges[] = {1, 2, 7, 8, 9, 13, 14, 15, 16, 17};
    return check_unit() < 0.5 ? pick(edges, 10) : uniform(1, 60);
}

/* Padding 0..3 per side, symmetric most of the time. */
static void soak_pads(size_t *pt, size_t *pl, size_t *pb, size_t *pr) {
    *pt = uniform(0, 3);
    *pl = uniform(0, 3);
    *pb = check_unit() < 0.6 ? *pt : uniform(0, 3);
    *pr = check_unit() < 0.6 ? *pl : uniform(0, 3);
}

/* The oracles' work per case, in multiply-adds: bounds a soak case's cost. */
#define SOAK_WORK 3e6

static void soak_dw(nnf_isa top) {
    for (;;) {
        dw_case q = {.n = 1 + (size_t)(check_unit() < 0.3), .c = soak_channels(), .d = 1};
        q.h = soak_extent();
        q.w = soak_extent();
        double u = check_unit();
        if (u < 0.6) { /* the specialised rows: 3x3 and 5x5 at column stride 1 and 2 */
            q.k_h = q.k_w = u < 0.35 ? 3 : 5;
        } else if (u < 0.85) {
            static const size_t ks[] = {1, 2, 7};
            q.k_h = q.k_w = pick(ks, 3);
        } else if (u < 0.98) {
            q.k_h = uniform(1, 7);
            q.k_w = uniform(1, 7);
        } else { /* around the 64-row pointer table: the per-pixel path from 65 rows */
            q.k_h = uniform(63, 66);
            q.k_w = uniform(1, 3);
            q.h = q.k_h - 6 + uniform(0, 8);
        }
        q.s = uniform(1, 3);
        q.s_w = check_unit() < 0.7 ? q.s : uniform(1, 3);
        if (check_unit() < 0.2)
            q.d = 2;
        q.d_w = check_unit() < 0.8 ? q.d : uniform(1, 2);
        if (q.k_h > 7)
            q.d = 1;
        soak_pads(&q.pt, &q.pl, &q.pb, &q.pr);
        size_t oh = out_dim(q.h, q.k_h, q.s, q.d, q.pt, q.pb),
               ow = out_dim(q.w, q.k_w, q.s_w, q.d_w, q.pl, q.pr);
        if (!oh || !ow || (double)(q.n * q.c * oh * ow * q.k_h * q.k_w) > SOAK_WORK)
            continue;
        q.act = acts[uniform(0, N_ACTS - 1)];
        if (q.act.kind == NNF_ACT_CLIP && check_unit() < 0.3) { /* lo > hi too: every value is hi */
            q.act.alpha = check_frand();
            q.act.beta = check_frand();
        }
        q.bias = check_unit() < 0.7;
        q.res = check_unit() < 0.4;
        q.res_after = q.res && check_unit() < 0.3;
        if (check_unit() < 0.2) { /* the general epilogue */
            q.alpha = 0.5f + (float)check_unit();
            q.res_scale = 0.25f + (float)check_unit();
        }
        q.nan = check_unit() < 0.1;
        for (int t = NNF_ISA_SCALAR; t <= (int)top; t++)
            run_dw(&q, (nnf_isa)t);
        return;
    }
}

static void soak_pool(nnf_isa top) {
    for (;;) {
        nnf_nchwc_pool_shape s = {
            .n = 1 + (size_t)(check_unit() < 0.3), .c = soak_channels(), .dh = 1, .dw = 1};
        s.h = soak_extent();
        s.w = soak_extent();
        if (check_unit() < 0.5) { /* the specialised rows: 2x2 s2, 3x3 s1/s2, 5x5 s1 */
            static const size_t ks[][2] = {{2, 2}, {3, 1}, {3, 2}, {5, 1}};
            size_t i = uniform(0, 3);
            s.kw = ks[i][0];
            s.sw = ks[i][1];
            s.kh = check_unit() < 0.8 ? s.kw : uniform(1, 7);
        } else {
            s.kh = uniform(1, 7);
            s.kw = check_unit() < 0.6 ? s.kh : uniform(1, 7);
            s.sw = uniform(1, 3);
        }
        s.sh = check_unit() < 0.7 ? s.sw : uniform(1, 3);
        if (check_unit() < 0.15)
            s.dh = 2;
        if (check_unit() < 0.15)
            s.dw = 2;
        soak_pads(&s.pt, &s.pl, &s.pb, &s.pr);
        int ceil_mode = check_unit() < 0.3;
        if (s.h + s.pt + s.pb < (s.kh - 1) * s.dh + 1 || s.w + s.pl + s.pr < (s.kw - 1) * s.dw + 1)
            continue;
        s.oh = pool_out(s.h, s.kh, s.sh, s.dh, s.pt, s.pb, ceil_mode);
        s.ow = pool_out(s.w, s.kw, s.sw, s.dw, s.pl, s.pr, ceil_mode);
        if ((double)(s.n * s.c * s.oh * s.ow * s.kh * s.kw) > SOAK_WORK)
            continue;
        s.is_max = check_unit() < 0.5;
        s.count_include_pad = !s.is_max && check_unit() < 0.5;
        size_t xn = s.n * s.c * s.h * s.w,
               nan_at = check_unit() < 0.3 ? uniform(0, xn - 1) : SIZE_MAX;
        for (int t = NNF_ISA_SCALAR; t <= (int)top; t++)
            check_pool(&s, ceil_mode, nan_at, (nnf_isa)t);
        return;
    }
}

/* Images, channels and pixels of a random plane-wise case within the
 * soak's work (drawn again until it fits). */
static void soak_planes(size_t *n, size_t *c, size_t *hw) {
    do {
        *n = 1 + (size_t)(check_unit() < 0.3);
        *c = soak_channels();
        *hw = check_unit() < 0.5 ? soak_extent() : soak_extent() * soak_extent();
    } while ((double)(*n * *c * *hw) > SOAK_WORK);
}

static void soak_channel(nnf_isa top) {
    size_t n, c, hw;
    soak_planes(&n, &c, &hw);
    int op = (int)uniform(0, 2), per_image = check_unit() < 0.5, v_first = check_unit() < 0.5;
    for (int t = NNF_ISA_SCALAR; t <= (int)top; t++)
        check_channel(n, c, hw, op, per_image, v_first, (nnf_isa)t);
}

static void soak_global(nnf_isa top) {
    size_t n, c, hw;
    soak_planes(&n, &c, &hw);
    int is_max = check_unit() < 0.5;
    size_t nan_at = check_unit() < 0.3 ? uniform(0, n * c * hw - 1) : SIZE_MAX;
    for (int t = NNF_ISA_SCALAR; t <= (int)top; t++)
        check_global(n, c, hw, is_max, nan_at, (nnf_isa)t);
}

/* Tables of 2x upsampling, or of any indices in range. */
static void soak_resize(nnf_isa top) {
    size_t n = 1 + (size_t)(check_unit() < 0.3), c = soak_channels(), ih = uniform(1, 30),
           iw = uniform(1, 30);
    int twice = check_unit() < 0.4;
    size_t oh = twice ? 2 * ih : uniform(1, 60), ow = twice ? 2 * iw : uniform(1, 60);
    int32_t *rows = malloc(oh * sizeof *rows), *cols = malloc(ow * sizeof *cols);
    for (size_t i = 0; i < oh; i++)
        rows[i] = (int32_t)(twice ? i / 2 : uniform(0, ih - 1));
    for (size_t j = 0; j < ow; j++)
        cols[j] = (int32_t)(twice ? j / 2 : uniform(0, iw - 1));
    for (int t = NNF_ISA_SCALAR; t <= (int)top; t++)
        check_resize(n, c, ih, iw, oh, ow, rows, cols, (nnf_isa)t);
    free(rows), free(cols);
}

/* Maps around the reorders' 1024-pixel work items too. */
static void soak_reorder(nnf_isa top) {
    size_t n = 1 + (size_t)(check_unit() < 0.3), c = soak_channels(), hw;
    double u = check_unit();
    hw = u < 0.5 ? uniform(1, 64) : u < 0.8 ? uniform(1, 1000) : uniform(1000, 2100);
    if (n * c * hw > 600000)
        hw = 600000 / (n * c);
    for (int t = NNF_ISA_SCALAR; t <= (int)top; t++)
        check_reorder(n, c, hw, (nnf_isa)t);
}

/* NNF_TEST_SOAK=N runs N more random cases of each family (depthwise, pool,
 * global pool, resize, reorder, per-channel Add / Sub / Mul) from NNF_TEST_SEED (default 1) on
 * every tier, on 1, 2 and 3 threads: channels to 300, maps to 60 x 60, kernels 1..7 on each axis
 * (and 63..66 rows), strides 1..3 and dilation 1..2 per axis, asymmetric padding 0..3, batch 1..2,
 * every activation with bias, residual and the general epilogue, ceil_mode and count_include_pad,
 * NaN inputs. Off by default (CI runs the fixed cases); for long runs after a kernel change:
 *   NNF_TEST_SOAK=2000 NNF_TEST_SEED=7 build/test_nchwc */
static void soak(nnf_isa top) {
    long count = check_soak_begin();
    if (count <= 0)
        return;
    CHECK(nnf_threadpool_create(3, &pool3) == NNF_OK);
    for (long i = 0; i < count; i++)
        soak_dw(top);
    for (long i = 0; i < count; i++)
        soak_pool(top);
    for (long i = 0; i < count; i++)
        soak_global(top);
    for (long i = 0; i < count; i++)
        soak_resize(top);
    for (long i = 0; i < count; i++)
        soak_reorder(top);
    for (long i = 0; i < count; i++)
        soak_channel(top);
    nnf_threadpool_destroy(pool3);
    pool3 = NULL;
    check_soak_end(count, "random cases");
}

int main(void) {
    const nnf_cpu *cpu = nnf_cpu_get();
    CHECK(nnf_threadpool_create(2, &pool2) == NNF_OK);
    nnf_conv2d_shape s = {.n = 1, .c = 8, .h = 4, .w = 4, .oc = 8, .group = 8, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
                          .dh = 1, .dw = 1, .oh = 2, .ow = 2};
    CHECK(nnf_nchwc_dw_supported(&s));
    s.group = 4;
    CHECK(!nnf_nchwc_dw_supported(&s));
    nnf_nchwc_dw *k = NULL;
    float w[72] = {0};
    CHECK(nnf_nchwc_dw_create(&s, NNF_ISA_SCALAR, w, &k) == NNF_ERR_UNSUPPORTED && k == NULL);
    s.group = 8;
    CHECK(nnf_nchwc_dw_create(&s, NNF_ISA_SCALAR, NULL, &k) == NNF_ERR_INVALID_ARGUMENT && k == NULL);
    /* every allocation of create failing in turn: an error and no result (the
     * sanitizer build checks for leaks) */
    int failed = 0;
    for (uint64_t n = 1; n <= 3; n++) {
        nnf_alloc_fail_after(n);
        nnf_status st = nnf_nchwc_dw_create(&s, NNF_ISA_AVX2, w, &k);
        nnf_alloc_fail_after(0);
        if (st != NNF_OK) {
            failed++;
            CHECK(st == NNF_ERR_OUT_OF_MEMORY && k == NULL);
        }
        nnf_nchwc_dw_destroy(k);
        k = NULL;
    }
    CHECK(failed == 2); /* the kernel, its weights */
    for (int t = NNF_ISA_SCALAR; t <= (int)cpu->max_isa && t <= NNF_ISA_AVX2; t++) {
        nnf_isa isa = (nnf_isa)t;
        printf("tier %s\n", nnf_isa_name(isa));
        test_reorder(isa);
        test_dw(isa);
        test_pool(isa);
        test_global(isa);
        test_resize(isa);
        test_channel(isa);
    }
    /* the AVX-512 tier's depthwise conv (two blocks per zmm where it can)
     * and global average pool (the other kernels here are the AVX2 ones on
     * that tier) */
    if (cpu->max_isa >= NNF_ISA_AVX512) {
        printf("tier avx512: depthwise, global average pool\n");
        test_dw(NNF_ISA_AVX512);
        test_global(NNF_ISA_AVX512);
    }
    soak(cpu->max_isa < NNF_ISA_AVX2 ? cpu->max_isa : NNF_ISA_AVX2);
    printf("depthwise: worst |error| / tolerance %.3g\n", worst_dw);
    nnf_threadpool_destroy(pool2);
    TEST_MAIN_END();
}

/* Dense NCHWc8 convolution (kernels/nchwc.h) against a double-precision
 * oracle, on every tier this machine has, NCHWc8 and plain NCHW input.
 *
 * Tolerance per output: 2 (K + 2) 2^-23 S + 1e-6 (1 + |y|), where K =
 * C*KH*KW is the length of the sum and S = sum |w x| + |bias| + |residual|
 * (the float accumulation error bound, doubled for the epilogue's adds,
 * plus the vector activations' measured error, test_gemm.c: <= 4e-7 abs). */
#include "base/alloc.h"
#include "base/cpu.h"
#include "base/threadpool.h"
#include "kernels/conv_fast.h"
#include "kernels/nchwc.h"

#include "check.h"
#include "wino_bound.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t out_dim(size_t in, size_t k, size_t s, size_t d, size_t p0, size_t p1) {
    size_t span = (k - 1) * d + 1;
    return in + p0 + p1 < span ? 0 : (in + p0 + p1 - span) / s + 1;
}

typedef struct tcase {
    size_t n, c, h, w, oc, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
    int in_blocked;
    nnf_activation act;
    int bias, res, res_after;
    float alpha, res_scale;
    int nonfinite; /* put NaN and Inf into x */
    size_t group;  /* 0: 1 */
} tcase;

/* NCHW [n][c][hw] <-> NCHWc8 [n][cb][hw][8], test-local so the test does
 * not depend on the reorder kernels. */
static float *to_blocked(const float *x, size_t n, size_t c, size_t hw) {
    size_t cb = nnf_nchwc_blocks(c);
    float *y = calloc(n * cb * hw * 8 + 1, sizeof(float));
    for (size_t b = 0; b < n; b++)
        for (size_t ch = 0; ch < c; ch++)
            for (size_t i = 0; i < hw; i++)
                y[((b * cb + ch / 8) * hw + i) * 8 + ch % 8] = x[(b * c + ch) * hw + i];
    return y;
}

static float blocked_at(const float *y, size_t c, size_t hw, size_t b, size_t ch, size_t i) {
    size_t cb = nnf_nchwc_blocks(c);
    return y[((b * cb + ch / 8) * hw + i) * 8 + ch % 8];
}

static uint32_t bits(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static const char *const act_names[] = {"none",    "relu",     "clip",     "leaky",
                                        "sigmoid", "silu",     "tanh",     "hsigmoid",
                                        "hswish",  "gelu_erf", "gelu_tanh"};

/* The blocked Winograd kernel on a 3x3 stride-1 case (blocked input, finite
 * values: a NaN or Inf in a tile's input reaches all 16 of its outputs
 * through the transforms). Bound: test_conv_fast.c's Winograd bound on the
 * sum, |alpha| times, plus the epilogue's adds, carried through the
 * activation (slope at most 1.5, HardSwish's). */
static int wino_runs;
static int wino2_runs;          /* of them in the stride-2 form */
static int winof2_runs;         /* in the F(2x2,3x3) form */
static int dil_runs;            /* in the dilated form */
static nnf_threadpool *g_pool3; /* a third pool size for the Winograd splits */

/* Where index y of an axis of extent n sits in the dilated form's mosaic
 * (phase y % d's indices in order, a gutter between phases); with extent
 * set, the mosaic's extent. Counted, not from the kernel's formula. */
static size_t mosaic_at(size_t n, size_t d, size_t y, int extent) {
    size_t at = 0;
    for (size_t r = 0; r < d && r < n; r++) {
        at += r > 0; /* the gutter before phase r */
        for (size_t i = r; i < n; i += d, at++)
            if (!extent && i == y)
                return at;
    }
    return at;
}

static void run_wino_tier(nnf_isa isa, int f2, const nnf_conv2d_shape *s, const tcase *tc,
                          const float *x, const float *xb, const float *w, const nnf_epilogue *ep,
                          const double *ref, const float *bias, const float *res,
                          nnf_threadpool *pool2) {
    nnf_nchwc_wino *k = NULL;
    nnf_status st = nnf_nchwc_wino_create_as(s, isa, f2, w, &k);
    CHECK(st == NNF_OK);
    if (st != NNF_OK)
        return;
    size_t ohw = s->oh * s->ow, ocb = nnf_nchwc_blocks(s->oc), ysize = s->n * ocb * ohw * 8;
    float *y1 = malloc((ysize + 1) * sizeof(float)), *y2 = malloc((ysize + 1) * sizeof(float));
    for (size_t i = 0; i < ysize + 1; i++)
        y1[i] = y2[i] = 12345.0f;
    CHECK(nnf_nchwc_wino_run(k, xb, y1, ep, NULL) == NNF_OK);
    /* 2 and 3 threads: weight-heavy maps with fewer images than threads run
     * in phases (a batch of 2 on 3 threads: image after image), the others
     * split by tiles; the results must not change */
    nnf_threadpool *pools[2] = {pool2, g_pool3};
    for (int pi = 0; pi < 2; pi++) {
        CHECK(nnf_nchwc_wino_run(k, xb, y2, ep, pools[pi]) == NNF_OK);
        CHECK(y1[ysize] == 12345.0f && y2[ysize] == 12345.0f);
        CHECK_MSG(memcmp(y1, y2, ysize * sizeof(float)) == 0,
                  "%s: n%zu c%zu %zux%zu oc%zu p%zu,%zu: 1 vs %d threads differ", k->name, s->n,
                  s->c, s->h, s->w, s->oc, s->pt, s->pl, pi + 2);
    }
    wino_mag wm = {0};
    wino2_mag wm2 = {0};
    /* the dilated form's bound is its phases' mosaic's
     * (nnf_nchwc_wino_phases): x laid out as the mosaic, each output at its
     * phase's pixel there */
    nnf_conv2d_shape ps = *s;
    size_t d = nnf_nchwc_wino_phases(s, &ps);
    float *xp = NULL;
    if (d) {
        CHECK(ps.n == s->n && ps.h == mosaic_at(s->h, d, 0, 1) &&
              ps.w == mosaic_at(s->w, d, 0, 1) && ps.pt == 1);
        xp = calloc(s->n * s->c * ps.h * ps.w, sizeof(float));
        for (size_t b = 0; b < s->n; b++)
            for (size_t c = 0; c < s->c; c++)
                for (size_t yy = 0; yy < s->h; yy++)
                    for (size_t xx = 0; xx < s->w; xx++)
                        xp[((b * s->c + c) * ps.h + mosaic_at(s->h, d, yy, 0)) * ps.w +
                           mosaic_at(s->w, d, xx, 0)] = x[((b * s->c + c) * s->h + yy) * s->w + xx];
        CHECK(k->dil == d && k->phase && !k->s2);
        dil_runs++;
    }
    if (k->s2)
        wino2_mag_init(&wm2, s, x, w);
    else
        wino_mag_init_form(&wm, &ps, d ? xp : x, w, k->f2);
    int bad = 0;
    for (size_t b = 0; b < s->n && bad < 3; b++)
        for (size_t o = 0; o < ocb * 8 && bad < 3; o++)
            for (size_t i = 0; i < ohw && bad < 3; i++) {
                float got = blocked_at(y1, s->oc, ohw, b, o, i);
                if (o >= s->oc) {
                    if (bits(got) != 0) {
                        bad++;
                        CHECK_MSG(0, "%s: padding lane %zu = %g", k->name, o, got);
                    }
                    continue;
                }
                size_t ri = (b * s->oc + o) * ohw + i;
                double want = ref[ri];
                double extra = (tc->bias ? fabs(bias[o]) : 0) + (tc->res ? fabs(ep->residual_scale * res[ri]) : 0);
                size_t oy = i / s->ow, ox = i % s->ow;
                if (d) {
                    oy = mosaic_at(s->h, d, oy, 0);
                    ox = mosaic_at(s->w, d, ox, 0);
                }
                double tol = fabs(ep->alpha) * (double)(s->c + 16) * 0x1p-22 *
                             (k->s2 ? wino2_mag_at(&wm2, s, b, o, oy, ox)
                                    : wino_mag_at(&wm, &ps, b, o, oy, ox));
                tol = 1.5 * (1.2 * (tol + 0x1p-20 * (extra + fabs(want)))) + 4e-7 * (1.0 + fabs(want));
                if (!(fabs(got - want) <= tol)) {
                    bad++;
                    CHECK_MSG(0, "%s: n%zu c%zu %zux%zu oc%zu p%zu,%zu act %s bias %d res %d/%d: y[%zu][%zu][%zu] = %.9g, want %.9g (tol %.3g)",
                              k->name, s->n, s->c, s->h, s->w, s->oc, tc->pt, tc->pl, act_names[ep->act.kind],
                              tc->bias, tc->res, tc->res_after, b, o, i, got, want, tol);
                }
            }
    if (!bad)
        check_passed++;
    wino_runs++;
    wino2_runs += k->s2;
    winof2_runs += k->f2;
    wino_mag_free(&wm);
    wino2_mag_free(&wm2);
    free(xp);
    free(y1);
    free(y2);
    nnf_nchwc_wino_destroy(k);
}

/* 44 blocked 3x3 cases at stride `st` for the Winograd kernels: maps from
 * hs, channels from cs, padding 0, 1, 2 and asymmetric, batch 2, every
 * activation, the residual before and after it, alpha and a scaled
 * residual. */
static void run_case(const tcase *tc, nnf_threadpool *pool2);
static nnf_activation act_of(int kind);

static void wino_sweep(size_t st, const size_t hs[11], const size_t cs[7], nnf_threadpool *pool2) {
    for (int i = 0; i < 44; i++) {
        tcase tc = {.n = 1 + (size_t)(i % 5 == 0), .kh = 3, .kw = 3, .sh = st, .sw = st, .dh = 1,
                    .dw = 1, .in_blocked = 1};
        tc.h = hs[i % 11];
        tc.w = hs[(i * 3 + 1) % 11];
        tc.c = cs[i % 7];
        tc.oc = cs[(i * 5 + 2) % 7];
        tc.pt = tc.pl = tc.pb = tc.pr = (size_t)(i % 3 == 2 ? 2 : 1);
        if (i % 4 == 1) {
            tc.pt = 0;
            tc.pr = 2;
        }
        if (i % 6 == 3)
            tc.pt = tc.pl = tc.pb = tc.pr = 0;
        if (out_dim(tc.h, 3, st, 1, tc.pt, tc.pb) == 0 || out_dim(tc.w, 3, st, 1, tc.pl, tc.pr) == 0)
            continue;
        tc.act = act_of(i % 11);
        tc.bias = i % 3 != 0;
        tc.res = i % 2;
        tc.res_after = i % 4 == 3;
        if (i % 9 == 4) {
            tc.alpha = 0.5f;
            tc.res_scale = 2.0f;
        }
        run_case(&tc, pool2);
    }
}

/* The N-th allocation of nnf_nchwc_wino_create failing, for every N until
 * it succeeds: a clean out-of-memory error each time, nothing leaked (the
 * kernel, its transformed weights, a packed matrix). */
static void wino_alloc_failures(const nnf_conv2d_shape *s, nnf_isa isa, const float *w) {
    int failed = 0;
    for (uint64_t n = 1; n <= 40; n++) {
        nnf_nchwc_wino *k = NULL;
        nnf_alloc_fail_after(n);
        nnf_status st = nnf_nchwc_wino_create(s, isa, w, &k);
        nnf_alloc_fail_after(0);
        if (st != NNF_OK) {
            failed++;
            CHECK(st == NNF_ERR_OUT_OF_MEMORY && k == NULL);
        }
        nnf_nchwc_wino_destroy(k);
    }
    CHECK(failed >= 3);
}

/* Every tier from AVX2 up that this machine (or the SIMDe build) has: the
 * tier picks the GEMM microkernel between the transforms. */
static void run_wino(const nnf_conv2d_shape *s, const tcase *tc, const float *x, const float *xb, const float *w,
                     const nnf_epilogue *ep, const double *ref, const float *bias, const float *res,
                     nnf_threadpool *pool2) {
    for (int t = NNF_ISA_AVX2; t <= (int)nnf_cpu_get()->max_isa; t++)
        run_wino_tier((nnf_isa)t, 0, s, tc, x, xb, w, ep, ref, bias, res, pool2);
    /* and every stride-1 case in the F(2x2,3x3) form */
    for (int t = NNF_ISA_AVX2; s->sh == 1 && t <= (int)nnf_cpu_get()->max_isa; t++)
        run_wino_tier((nnf_isa)t, 1, s, tc, x, xb, w, ep, ref, bias, res, pool2);
}

static int in_place_runs; /* cases run with the output over the residual */
static int plain_runs;    /* cases run with an NCHW output too */

/* nnf_nchwc_conv_run_nchw: the blocked run's values (yb, n x oc8 x ohw x 8)
 * bit for bit in NCHW, on 1, 2 and 3 threads, nothing written past the
 * end; refused with a residual. nnf_nchwc_conv_run_cl likewise, channel-last
 * in groups of oc (NHWC) and of oc's smallest divisor above 1 (groups that
 * straddle blocks: 3 of 9 channels, 5 of 85), refused for groups that do not
 * divide oc. */
static void check_plain_out(const nnf_nchwc_conv *k, const float *xin, const float *yb,
                            const nnf_epilogue *ep, nnf_threadpool *pool2) {
    const nnf_conv2d_shape *s = &k->s;
    size_t ohw = s->oh * s->ow, size = s->n * s->oc * ohw;
    float *yp = malloc((size + 1) * sizeof(float));
    if (ep->residual) {
        CHECK(nnf_nchwc_conv_run_nchw(k, xin, yp, ep, NULL) == NNF_ERR_INVALID_ARGUMENT);
        nnf_error_clear();
        free(yp);
        return;
    }
    nnf_threadpool *pools[3] = {NULL, pool2, g_pool3};
    for (int p = 0; p < 3; p++) {
        for (size_t i = 0; i <= size; i++)
            yp[i] = 12345.0f;
        CHECK(nnf_nchwc_conv_run_nchw(k, xin, yp, ep, pools[p]) == NNF_OK);
        CHECK(yp[size] == 12345.0f);
        size_t bad = 0;
        for (size_t b = 0; b < s->n; b++)
            for (size_t o = 0; o < s->oc; o++)
                for (size_t i = 0; i < ohw; i++)
                    bad += bits(yp[(b * s->oc + o) * ohw + i]) != bits(blocked_at(yb, s->oc, ohw, b, o, i));
        CHECK_MSG(bad == 0, "%s: NCHW output differs from the blocked run at %zu of %zu values (%d threads), "
                  "c%zu %zux%zu oc%zu k%zux%zu s%zu", k->name, bad, size, p + 1, s->c, s->h, s->w, s->oc,
                  s->kh, s->kw, s->sh);
    }
    size_t div = s->oc;
    for (size_t d = s->oc - 1; d >= 2; d--)
        if (s->oc % d == 0)
            div = d;
    size_t groups[2] = {s->oc, div};
    for (int gi = 0; gi < 2; gi++) {
        size_t gs = groups[gi];
        for (int p = 0; p < 3; p++) {
            for (size_t i = 0; i <= size; i++)
                yp[i] = 12345.0f;
            CHECK(nnf_nchwc_conv_run_cl(k, xin, yp, ep, gs, pools[p]) == NNF_OK);
            CHECK(yp[size] == 12345.0f);
            size_t bad = 0;
            for (size_t b = 0; b < s->n; b++)
                for (size_t o = 0; o < s->oc; o++)
                    for (size_t i = 0; i < ohw; i++)
                        bad += bits(yp[((b * (s->oc / gs) + o / gs) * ohw + i) * gs + o % gs]) !=
                               bits(blocked_at(yb, s->oc, ohw, b, o, i));
            CHECK_MSG(
                bad == 0,
                "%s: channel-last output (groups of %zu) differs from the blocked run at %zu of "
                "%zu values (%d threads), c%zu %zux%zu oc%zu k%zux%zu s%zu",
                k->name, gs, bad, size, p + 1, s->c, s->h, s->w, s->oc, s->kh, s->kw, s->sh);
        }
    }
    if (s->oc > 1) {
        CHECK(nnf_nchwc_conv_run_cl(k, xin, yp, ep, s->oc + 1, NULL) == NNF_ERR_INVALID_ARGUMENT);
        nnf_error_clear();
    }
    plain_runs++;
    free(yp);
}

static void run_case(const tcase *tc, nnf_threadpool *pool2) {
    nnf_conv2d_shape s = {.n = tc->n,
                          .c = tc->c,
                          .h = tc->h,
                          .w = tc->w,
                          .oc = tc->oc,
                          .group = tc->group ? tc->group : 1,
                          .kh = tc->kh,
                          .kw = tc->kw,
                          .sh = tc->sh,
                          .sw = tc->sw,
                          .dh = tc->dh,
                          .dw = tc->dw,
                          .pt = tc->pt,
                          .pl = tc->pl};
    s.oh = out_dim(tc->h, tc->kh, tc->sh, tc->dh, tc->pt, tc->pb);
    s.ow = out_dim(tc->w, tc->kw, tc->sw, tc->dw, tc->pl, tc->pr);
    size_t cg = s.c / s.group, ocg = s.oc / s.group;
    size_t hw = s.h * s.w, ohw = s.oh * s.ow, taps = s.kh * s.kw, K = cg * taps;
    size_t ocb = nnf_nchwc_blocks(s.oc), ysize = s.n * ocb * ohw * 8;
    float *x = check_rand_buf(s.n * s.c * hw);
    float *w = check_rand_buf(s.oc * K);
    float *bias = check_rand_buf(s.oc);
    float *res = check_rand_buf(s.n * s.oc * ohw);
    if (tc->nonfinite)
        for (size_t i = 0; i < s.n * s.c * hw; i += 7)
            x[i] = i % 2 ? NAN : (i % 3 ? INFINITY : -INFINITY);
    float *xb = to_blocked(x, s.n, s.c, hw);
    float *resb = to_blocked(res, s.n, s.oc, ohw);
    float *y1 = malloc((ysize + 1) * sizeof(float)), *y2 = malloc((ysize + 1) * sizeof(float));
    double *ref = malloc((s.n * s.oc * ohw + 1) * sizeof(double));
    double *mag = malloc((s.n * s.oc * ohw + 1) * sizeof(double));

    nnf_epilogue ep = nnf_epilogue_default();
    ep.alpha = tc->alpha ? tc->alpha : 1.0f;
    ep.act = tc->act;
    if (tc->bias) {
        ep.bias_kind = NNF_BIAS_PER_ROW;
        ep.bias = bias;
    }
    if (tc->res) {
        ep.residual = resb;
        ep.residual_after_act = tc->res_after;
        ep.residual_scale = tc->res_scale ? tc->res_scale : 1.0f;
    }
    for (size_t b = 0; b < s.n; b++)
        for (size_t o = 0; o < s.oc; o++)
            for (size_t oy = 0; oy < s.oh; oy++)
                for (size_t ox = 0; ox < s.ow; ox++) {
                    double acc = 0, m = 0;
                    size_t c0 = o / ocg * cg; /* the output channel's group's inputs */
                    for (size_t c = c0; c < c0 + cg; c++)
                        for (size_t ky = 0; ky < s.kh; ky++)
                            for (size_t kx = 0; kx < s.kw; kx++) {
                                ptrdiff_t iy = (ptrdiff_t)(oy * s.sh + ky * s.dh) - (ptrdiff_t)s.pt;
                                ptrdiff_t ix = (ptrdiff_t)(ox * s.sw + kx * s.dw) - (ptrdiff_t)s.pl;
                                if (iy < 0 || ix < 0 || iy >= (ptrdiff_t)s.h ||
                                    ix >= (ptrdiff_t)s.w)
                                    continue;
                                double xv =
                                    x[((b * s.c + c) * s.h + (size_t)iy) * s.w + (size_t)ix];
                                double wv = w[(o * cg + c - c0) * taps + ky * s.kw + kx];
                                acc += xv * wv;
                                m += fabs(xv * wv);
                            }
                    size_t i = (b * s.oc + o) * ohw + oy * s.ow + ox;
                    double v = ep.alpha * acc;
                    m *= fabs(ep.alpha);
                    if (tc->bias) {
                        v += bias[o];
                        m += fabs(bias[o]);
                    }
                    double r = tc->res ? (double)ep.residual_scale * res[i] : 0;
                    m += fabs(r);
                    if (!tc->res_after)
                        v += r;
                    v = nnf_act_apply(&ep.act, (float)v);
                    if (tc->res_after)
                        v += r;
                    ref[i] = v;
                    mag[i] = m;
                }

    /* every tier this machine (or the SIMDe build) has */
    for (int ti = NNF_ISA_SCALAR; ti <= (int)nnf_cpu_get()->max_isa; ti++) {
        nnf_nchwc_conv *k = NULL;
        nnf_status st = nnf_nchwc_conv_create(&s, tc->in_blocked, (nnf_isa)ti, w, &k);
        CHECK(st == NNF_OK);
        if (st != NNF_OK)
            continue;
        const float *xin = tc->in_blocked ? xb : x;
        for (size_t i = 0; i < ysize + 1; i++)
            y1[i] = y2[i] = 12345.0f; /* the sentinel past the end must survive */
        CHECK(nnf_nchwc_conv_run(k, xin, y1, &ep, NULL) == NNF_OK);
        CHECK(nnf_nchwc_conv_run(k, xin, y2, &ep, pool2) == NNF_OK);
        CHECK(y1[ysize] == 12345.0f && y2[ysize] == 12345.0f);
        CHECK_MSG(memcmp(y1, y2, ysize * sizeof(float)) == 0,
                  "%s: 1 vs 2 threads differ: n%zu c%zu %zux%zu oc%zu g%zu k%zux%zu s%zux%zu d%zux%zu "
                  "p%zu,%zu,%zu,%zu blocked %d res %d",
                  k->name, s.n, s.c, s.h, s.w, s.oc, s.group, s.kh, s.kw, s.sh, s.sw, s.dh, s.dw, tc->pt,
                  tc->pl, tc->pb, tc->pr, tc->in_blocked, tc->res);
        check_plain_out(k, xin, y1, &ep, pool2);
        nnf_epilogue ip = ep;
        ip.residual = y2;
        if (tc->res && (tc->res_after || !nnf_nchwc_conv_one_pass(k))) { /* refused, nothing written */
            CHECK(nnf_nchwc_conv_run(k, xin, y2, &ip, NULL) == NNF_ERR_INVALID_ARGUMENT);
            CHECK(memcmp(y1, y2, ysize * sizeof(float)) == 0);
            nnf_error_clear();
        } else if (tc->res) {
            /* the output over its residual, as the runtime runs it when the
             * residual dies here: the same bits, on 1 and 2 threads */
            for (int th = 0; th < 2; th++) {
                memcpy(y2, resb, ysize * sizeof(float));
                CHECK(nnf_nchwc_conv_run(k, xin, y2, &ip, th ? pool2 : NULL) == NNF_OK);
                CHECK_MSG(memcmp(y1, y2, ysize * sizeof(float)) == 0,
                          "%s: in place over the residual differs (%d threads)", k->name, th + 1);
            }
            in_place_runs++;
        }
        int bad = 0;
        for (size_t b = 0; b < s.n && bad < 3; b++)
            for (size_t o = 0; o < ocb * 8 && bad < 3; o++)
                for (size_t i = 0; i < ohw && bad < 3; i++) {
                    float got = blocked_at(y1, s.oc, ohw, b, o, i);
                    if (o >= s.oc) {
                        if (bits(got) != 0) {
                            bad++;
                            CHECK_MSG(0, "%s: padding lane %zu = %g", k->name, o, got);
                        }
                        continue;
                    }
                    size_t ri = (b * s.oc + o) * ohw + i;
                    double want = ref[ri];
                    int ok;
                    if (isnan(want))
                        ok = isnan(got);
                    else if (isinf(want))
                        ok = got == want;
                    else
                        ok = fabs(got - want) <=
                             2.0 * (double)(K + 2) * 0x1p-23 * mag[ri] + 1e-6 * (1 + fabs(want));
                    if (!ok) {
                        bad++;
                        CHECK_MSG(
                            0,
                            "%s: n%zu c%zu %zux%zu oc%zu g%zu k%zux%zu s%zux%zu d%zux%zu "
                            "p%zu,%zu,%zu,%zu "
                            "blocked %d act %s bias %d res %d: y[%zu][%zu][%zu] = %.9g, want %.9g",
                            k->name, s.n, s.c, s.h, s.w, s.oc, s.group, s.kh, s.kw, s.sh, s.sw, s.dh, s.dw,
                            tc->pt, tc->pl, tc->pb, tc->pr, tc->in_blocked, act_names[ep.act.kind],
                            tc->bias, tc->res, b, o, i, got, want);
                    }
                }
        if (!bad)
            check_passed++;
        nnf_nchwc_conv_destroy(k);
    }
    if (nnf_nchwc_wino_supported(&s, nnf_cpu_get()->max_isa) && tc->in_blocked && !tc->nonfinite)
        run_wino(&s, tc, x, xb, w, &ep, ref, bias, res, pool2);
    free(x);
    free(w);
    free(bias);
    free(res);
    free(xb);
    free(resb);
    free(y1);
    free(y2);
    free(ref);
    free(mag);
}

static nnf_activation act_of(int kind) {
    nnf_activation a = {.kind = (nnf_act_kind)kind};
    if (kind == NNF_ACT_CLIP) {
        a.alpha = 0.1f; /* lo > 0: padding lanes would read 0.1 if not zeroed */
        a.beta = 0.6f;
    } else if (kind == NNF_ACT_LEAKY_RELU) {
        a.alpha = 0.1f;
    } else if (kind == NNF_ACT_HARD_SIGMOID) {
        a.alpha = 0.2f;
        a.beta = 0.5f;
    }
    return a;
}

static size_t pick(const size_t *v, size_t n) {
    return v[(size_t)(check_unit() * (double)n) % n];
}

/* Channel counts for the soak: any small count, or a multiple of 8 (up to
 * 264, where the weights take several K blocks and tile groups) off by -1, 0
 * or +1. */
static size_t soak_channels(void) {
    if (check_unit() < 0.3)
        return 1 + (size_t)(check_unit() * 24);
    size_t blocks = 1 + (size_t)(check_unit() * 33); /* one draw per statement: a seed */
    size_t c = 8 * blocks + (size_t)(check_unit() * 3) - 1; /* replays on any compiler */
    return c ? c : 1;
}

/* NNF_TEST_SOAK=N runs N more random cases from NNF_TEST_SEED (default 1) on
 * a wider grid than the sweep above: channels to 264, maps to 40 x 40,
 * kernels 1..7 on each axis, strides 1..3, dilation 1..2, asymmetric padding
 * 0..3, grouped convs of whole blocks, batch 2, the general epilogue. Off by
 * default (CI runs the fixed cases); for long runs after a kernel change:
 *   NNF_TEST_SOAK=5000 NNF_TEST_SEED=7 build/test_conv_nchwc */
static void soak(nnf_threadpool *pool2) {
    long count = check_soak_begin();
    if (count <= 0)
        return;
    long ran = 0;
    while (ran < count) {
        tcase tc = {.n = 1 + (size_t)(check_unit() < 0.15), .dh = 1, .dw = 1};
        tc.c = soak_channels();
        tc.oc = soak_channels();
        tc.group = 1;
        if (check_unit() < 0.15) { /* whole 8-channel blocks per group */
            size_t g = 2 + (size_t)(check_unit() * 4), cb = 1 + (size_t)(check_unit() * 3),
                   ob = 1 + (size_t)(check_unit() * 6);
            tc.group = g;
            tc.c = g * cb * 8;
            tc.oc = g * ob * 8;
        }
        tc.kh = 1 + (size_t)(check_unit() * 7);
        tc.kw = check_unit() < 0.7 ? tc.kh : 1 + (size_t)(check_unit() * 7);
        tc.sh = 1 + (size_t)(check_unit() * 3);
        tc.sw = check_unit() < 0.8 ? tc.sh : 1 + (size_t)(check_unit() * 3);
        if (check_unit() < 0.15)
            tc.dh = tc.dw = 2;
        tc.h = 1 + (size_t)(check_unit() * 40);
        tc.w = 1 + (size_t)(check_unit() * 40);
        tc.pt = (size_t)(check_unit() * 4);
        tc.pl = (size_t)(check_unit() * 4);
        tc.pb = check_unit() < 0.7 ? tc.pt : (size_t)(check_unit() * 4);
        tc.pr = check_unit() < 0.7 ? tc.pl : (size_t)(check_unit() * 4);
        size_t oh = out_dim(tc.h, tc.kh, tc.sh, tc.dh, tc.pt, tc.pb),
               ow = out_dim(tc.w, tc.kw, tc.sw, tc.dw, tc.pl, tc.pr);
        /* the double oracle's work, bounded */
        double macs = (double)tc.n * (double)tc.oc * (double)(tc.c / tc.group) * (double)(tc.kh * tc.kw) *
                      (double)oh * (double)ow;
        if (oh == 0 || ow == 0 || macs > 2e7)
            continue;
        tc.in_blocked = tc.group > 1 || tc.c > 4 || check_unit() < 0.5;
        tc.act = act_of((int)(check_unit() * 11));
        tc.bias = check_unit() < 0.7;
        tc.res = check_unit() < 0.4;
        tc.res_after = tc.res && check_unit() < 0.3;
        if (check_unit() < 0.2) {
            tc.alpha = 0.5f + (float)check_unit();
            tc.res_scale = 0.25f + (float)check_unit();
        }
        run_case(&tc, pool2);
        ran++;
    }
    check_soak_end(ran, "random cases");
}

/* The tier choice (nnf_nchwc_conv_tier) on a CPU whose zmm operations run as
 * two halves and on one whose do not: short sums with a light epilogue and
 * narrow groups take the AVX2 tiles on the first only; the tier in force
 * bounds the answer. */
static void check_tier_choice(void) {
    nnf_cpu halves = {.zmm_halves = true, .max_isa = NNF_ISA_AVX512}, full = halves;
    full.zmm_halves = false;
    nnf_conv2d_shape pw64 = {.n = 1, .c = 64, .oc = 256, .group = 1, .kh = 1, .kw = 1};
    nnf_conv2d_shape pw160 = pw64, pw161 = pw64, pw256 = pw64, stem = pw64, k3 = pw64,
                     narrow = pw64;
    pw160.c = 160;
    pw161.c = 161;
    pw256.c = 256;
    stem.c = 3, stem.oc = 32, stem.kh = stem.kw = 3; /* 27 products */
    k3.c = 32, k3.kh = k3.kw = 3;                    /* 288 */
    narrow.c = 512, narrow.oc = 24;                  /* 3 blocks */
    const nnf_cpu *cpus[2] = {&halves, &full};
    for (int ci = 0; ci < 2; ci++) {
        const nnf_cpu *cpu = cpus[ci];
        nnf_isa short_light = ci == 0 ? NNF_ISA_AVX2 : NNF_ISA_AVX512;
        CHECK(nnf_nchwc_conv_tier(&pw64, NNF_ACT_RELU, NNF_ISA_AVX512, cpu) == short_light);
        CHECK(nnf_nchwc_conv_tier(&pw64, NNF_ACT_NONE, NNF_ISA_AVX512, cpu) == short_light);
        CHECK(nnf_nchwc_conv_tier(&pw160, NNF_ACT_CLIP, NNF_ISA_AVX512, cpu) == short_light);
        CHECK(nnf_nchwc_conv_tier(&stem, NNF_ACT_CLIP, NNF_ISA_AVX512, cpu) == short_light);
        CHECK(nnf_nchwc_conv_tier(&narrow, NNF_ACT_SILU, NNF_ISA_AVX512, cpu) == short_light);
        CHECK(nnf_nchwc_conv_tier(&pw64, NNF_ACT_SILU, NNF_ISA_AVX512, cpu) == NNF_ISA_AVX512);
        CHECK(nnf_nchwc_conv_tier(&pw64, NNF_ACT_GELU_ERF, NNF_ISA_AVX512, cpu) == NNF_ISA_AVX512);
        CHECK(nnf_nchwc_conv_tier(&pw161, NNF_ACT_NONE, NNF_ISA_AVX512, cpu) == NNF_ISA_AVX512);
        CHECK(nnf_nchwc_conv_tier(&pw256, NNF_ACT_RELU, NNF_ISA_AVX512, cpu) == NNF_ISA_AVX512);
        CHECK(nnf_nchwc_conv_tier(&k3, NNF_ACT_RELU, NNF_ISA_AVX512, cpu) == NNF_ISA_AVX512);
        for (size_t oc = 8; oc <= 40; oc += 8) { /* 1-5 blocks, a long sum */
            narrow.oc = oc;
            CHECK(nnf_nchwc_conv_tier(&narrow, NNF_ACT_RELU, NNF_ISA_AVX512, cpu) ==
                  (ci == 0 && oc <= 24 ? NNF_ISA_AVX2 : NNF_ISA_AVX512));
        }
        for (int t = NNF_ISA_SCALAR; t <= NNF_ISA_AVX2; t++)
            CHECK(nnf_nchwc_conv_tier(&pw64, NNF_ACT_RELU, (nnf_isa)t, cpu) == (nnf_isa)t);
    }
}

/* The weight transforms (nchwc.h, NNF_WINO_WEIGHTS): each form's panel at
 * awkward channel counts (1, primes, the 8-channel transposes' edges, a
 * full panel) and depths; F(4x4,3x3) and F(2x2,3x3) against G g G^T in
 * double, rounded once (half an ulp, and a little for the double sums);
 * columns past the channels +0; where the CPU has AVX-512, its 8-wide form
 * bit for bit the AVX2 one (a model's weights must not depend on the tier
 * that transformed them). */
static void check_weight_transforms(void) {
    typedef void (*panel_fn)(const float *, size_t, size_t, size_t, size_t, float *const *);
    static const panel_fn narrow[3] = {nnf_wino_weight_panel_avx2,
                                       nnf_nchwc_winof2_weight_panel_avx2,
                                       nnf_nchwc_wino2_weight_panel_avx2};
    static const panel_fn wide[3] = {nnf_wino_weight_panel_avx512,
                                     nnf_nchwc_winof2_weight_panel_avx512,
                                     nnf_nchwc_wino2_weight_panel_avx512};
    static const size_t ms[] = {1, 3, 7, 8, 9, 13, 16, 24, 31, 32}, ks[] = {1, 2, 5, 17};
    const size_t r = 32, c = 17, nmat[3] = {36, 16, 36};
    int has512 = nnf_cpu_get()->max_isa >= NNF_ISA_AVX512;
    float *w = check_rand_buf(r * c * 9);
    w[4] = -0.0f;
    w[13] = 1e30f;
    float *u = nnf_malloc_aligned(36 * r * c * sizeof(float));
    float *u5 = nnf_malloc_aligned(36 * r * c * sizeof(float));
    int bad = 0;
    for (int f = 0; f < 3; f++)
        for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
            for (size_t ki = 0; ki < sizeof ks / sizeof *ks && bad < 3; ki++) {
                size_t m = ms[mi], k = ks[ki], n = nmat[f], sz = n * r * k;
                float *dst[36], *dst5[36];
                for (size_t xi = 0; xi < n; xi++) {
                    dst[xi] = u + xi * r * k;
                    dst5[xi] = u5 + xi * r * k;
                }
                memset(u, 0x7f, sz * sizeof(float));
                narrow[f](w, c * 9, m, r, k, dst);
                for (size_t xi = 0; xi < n; xi++)
                    for (size_t kk = 0; kk < k; kk++)
                        for (size_t o = 0; o < r; o++) {
                            float got = dst[xi][kk * r + o];
                            double want = 0;
                            if (o >= m) {
                                if (bits(got) != 0 && bad++ < 3)
                                    CHECK_MSG(0, "form %d m%zu: column %zu = %g, want +0", f, m, o,
                                              got);
                                continue;
                            }
                            if (f == 2)
                                continue; /* the stride-2 form: end to end (run_case) */
                            /* U[a][b] = sum_ij G[a][i] g[i][j] G[b][j] */
                            size_t t = f == 0 ? 6 : 4, a = xi / t, b = xi % t;
                            const float *g = w + o * c * 9 + kk * 9;
                            double mag = 0;
                            for (int i = 0; i < 3; i++)
                                for (int j = 0; j < 3; j++) {
                                    double term =
                                        (f == 0 ? nnf_wino_g[a][i] * nnf_wino_g[b][j]
                                                : nnf_wino_f2_g[a][i] * nnf_wino_f2_g[b][j]) *
                                        (double)g[i * 3 + j];
                                    want += term;
                                    mag += fabs(term);
                                }
                            double tol = 0x1p-24 * fabs(want) + 0x1p-48 * mag;
                            if (fabs((double)got - want) > tol && bad++ < 3)
                                CHECK_MSG(0,
                                          "form %d m%zu k%zu: U[%zu][%zu][%zu] = %.9g, want %.9g",
                                          f, m, k, xi, kk, o, got, want);
                        }
                if (has512) {
                    memset(u5, 0x3f, sz * sizeof(float));
                    wide[f](w, c * 9, m, r, k, dst5);
                    if (memcmp(u, u5, sz * sizeof(float)) && bad++ < 3)
                        CHECK_MSG(0, "form %d m%zu k%zu: the AVX-512 transform differs", f, m, k);
                }
            }
    if (!bad)
        check_passed++;
    nnf_free_aligned(u);
    nnf_free_aligned(u5);
    free(w);
}

int main(void) {
    nnf_threadpool *pool2 = NULL;
    if (nnf_threadpool_create(2, &pool2) != NNF_OK || nnf_threadpool_create(3, &g_pool3) != NNF_OK)
        return 1;
    check_tier_choice();

    /* fixed shapes of interest: pointwise, 3x3, stems from NCHW, tile edges */
    static const tcase fixed[] = {
        {1, 16, 5, 13, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, {NNF_ACT_CLIP, 0, 6}, 1, 0, 0, 0, 0, 0, 0},
        {2, 17, 3, 61, 31, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, {NNF_ACT_NONE, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
        {1, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, {NNF_ACT_RELU, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
        /* more input channels than a K block (the Winograd weights are
         * written a panel and a K block at a time) and a part panel */
        {1, 461, 6, 7, 21, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, {NNF_ACT_RELU, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
        {1, 9, 9, 13, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, {NNF_ACT_SILU, 0, 0}, 1, 0, 0, 0, 0, 0, 0},
        {1, 3, 13, 13, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, {NNF_ACT_CLIP, 0, 6}, 1, 0, 0, 0, 0, 0, 0},
        {1, 3, 17, 19, 64, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 0, {NNF_ACT_RELU, 0, 0}, 1, 0, 0, 0, 0, 0, 0},
        {1, 3, 12, 12, 32, 6, 6, 2, 2, 1, 1, 2, 2, 2, 2, 0, {NNF_ACT_SILU, 0, 0}, 1, 0, 0, 0, 0, 0, 0},
        {1, 8, 6, 61, 8, 1, 3, 1, 1, 1, 1, 0, 1, 0, 1, 1, {NNF_ACT_NONE, 0, 0}, 0, 0, 0, 0, 0, 0, 0},
        {1, 8, 9, 5, 8, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, {NNF_ACT_NONE, 0, 0}, 0, 0, 0, 0, 0, 0, 0},
        {1, 16, 9, 13, 16, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1, {NNF_ACT_TANH, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
        {1, 7, 8, 13, 9, 5, 5, 3, 3, 1, 1, 2, 1, 0, 2, 1, {NNF_ACT_SIGMOID, 0, 0},
         1, 0, 0, 0,  0, 0, 0},
        {1, 7, 8, 13, 9, 3, 3, 1, 1, 1, 1, 0, 2, 1, 0, 1, {NNF_ACT_HARD_SIGMOID, 0.2f, 0.5f},
         1, 1, 0, 0,  0, 0, 0},
        /* kernel wider than the padded row: every pixel is a border pixel */
        {1, 8, 4, 2, 8, 3, 5, 1, 1, 1, 1, 1, 2, 1, 2, 1, {NNF_ACT_NONE, 0, 0}, 1, 0, 0, 0, 0, 0, 0},
        /* width 1, height 1 */
        {1, 31, 1, 1, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, {NNF_ACT_RELU, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
        /* 1x1 with bottom/right padding: output rows/columns with no taps */
        {1, 9, 3, 5, 9, 1, 1, 1, 1, 1, 1, 0, 0, 2, 1, 1, {NNF_ACT_SIGMOID, 0, 0}, 1, 0, 0, 0, 0, 0, 0},
        /* the general epilogue: alpha, scaled residual after the activation */
        {1, 17, 5, 13,   17,   3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, {NNF_ACT_RELU, 0, 0},
         1, 1,  1, 2.0f, 0.5f, 0, 0},
        {1, 3, 5, 13,   9,    3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, {NNF_ACT_GELU_ERF, 0, 0},
         1, 1, 0, 0.5f, 2.0f, 0, 0},
        /* NaN and Inf in x propagate; padding lanes stay exactly zero */
        {1, 9, 5, 13, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, {NNF_ACT_NONE, 0, 0}, 1, 0, 0, 0, 0, 1, 0},
        {1, 9, 5, 13, 17, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, {NNF_ACT_RELU, 0, 0}, 1, 1, 0, 0, 0, 1, 0},
        {1, 3, 5, 13, 17, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, {NNF_ACT_SIGMOID, 0, 0},
         0, 0, 0, 0,  0,  1, 0},
        /* stems from NCHW with rows wide enough for interior tiles (the
         * AVX-512 tier's 4x6, 3x8 and 2x12 tiles at strides 2 and 1) */
        {1, 3, 9, 61, 64, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 0, {NNF_ACT_RELU, 0, 0}, 1, 0, 0, 0, 0, 0, 0},
        {1, 3, 8, 64, 32, 6, 6, 2, 2, 1, 1, 2, 2, 2, 2, 0, {NNF_ACT_SILU, 0, 0}, 1, 0, 0, 0, 0, 0, 0},
        {1, 3, 7, 61, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, {NNF_ACT_CLIP, 0, 6}, 1, 1, 0, 0, 0, 0, 0},
        {1, 5, 4, 61, 40, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, {NNF_ACT_NONE, 0, 0}, 1, 0, 0, 0, 0, 0, 0},
        /* NCHW input in the AVX2 assembly tiles, an entry per row of kw
         * taps (kw 1, 3, 5, 6, 7): K blocks of a 7x7 (3 channels a block,
         * partial sums in y) with a residual, 5x5 at stride 1, 3x5 at
         * stride 2; kw 4 and dilated rows stay in C */
        {1, 7, 9, 45, 32, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3, 0, {NNF_ACT_RELU, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
        {1, 2, 6, 47, 16, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, 0, {NNF_ACT_CLIP, 0, 6}, 1, 0, 0, 0, 0, 0, 0},
        {1, 4, 7, 53, 8, 3, 5, 2, 2, 1, 1, 1, 2, 1, 2, 0, {NNF_ACT_NONE, 0, 0}, 0, 1, 0, 0, 0, 0, 0},
        {1, 3, 6, 40, 24, 3, 4, 1, 1, 1, 1, 1, 1, 1, 2, 0, {NNF_ACT_RELU, 0, 0}, 1, 0, 0, 0, 0, 0, 0},
        {1, 3, 9, 43, 16, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 0, {NNF_ACT_SILU, 0, 0}, 1, 0, 0, 0, 0, 0, 0},
        /* border columns of the interior rows as column tiles (AVX-512):
         * 19 interior rows of a 20-wide stride-2 map (tiles of 5, 5, 5, 4
         * rows), two K blocks of partial sums, a residual before and after
         * the activation, an odd block count (a half zmm) */
        {1, 48, 40, 40, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, {NNF_ACT_SILU, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
        {1, 48, 39, 41, 40, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, {NNF_ACT_RELU, 0, 0}, 1, 1, 1, 0, 0, 0, 0},
        /* strided 1x1s run on a subsampled copy of their input: a downsample
         * with its residual, odd sizes in a batch, strides 3 x 2 from NCHW,
         * NaN and Inf; with bottom/right padding (outputs past the input)
         * they do not */
        {1, 64, 14, 14, 128, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, {NNF_ACT_RELU, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
        {2, 17, 13, 13, 40, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, {NNF_ACT_NONE, 0, 0}, 1, 0, 0, 0, 0, 0, 0},
        {1, 9, 7, 61, 17, 1, 1, 3, 2, 1, 1, 0, 0, 0, 0, 0, {NNF_ACT_SILU, 0, 0}, 1, 0, 0, 0, 0, 0, 0},
        {1, 9, 5, 13, 17, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, {NNF_ACT_RELU, 0, 0}, 1, 1, 0, 0, 0, 1, 0},
        {1, 16, 5, 9, 24, 1, 1, 2, 2, 1, 1, 0, 0, 1, 1, 1, {NNF_ACT_NONE, 0, 0}, 1, 0, 0, 0, 0, 0, 0},
        /* rows wider than 16 run strided as they are on AVX-512: a
         * downsample to 20x20 with its residual, and 17 wide */
        {1, 64, 40, 40, 128, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, {NNF_ACT_RELU, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
        {1, 24, 9, 34, 40, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, {NNF_ACT_SILU, 0, 0}, 1, 1, 0, 0, 0, 0, 0},
        /* narrow rows (wrapping tiles) whose bands on two threads leave one
         * interior row alone: it must not run as a row of its own, whose
         * 1-pixel border tiles sum in another order (found by the soak: 18
         * values differed in their last bit between 1 and 2 threads) */
        {1, 14, 35, 40, 81, 1, 5, 1, 1, 1, 1, 2, 1, 2, 0, 1, {NNF_ACT_NONE, 0, 0}, 0, 0, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        run_case(&fixed[i], pool2);
    /* AVX-512 1x1s take 4 x 6 zmm tiles where broadcasts are costly (Intel)
     * and 2 x 12 elsewhere: the other form too, whatever this machine is,
     * on the fixed 1x1s and on flattened ones of 8 and 16 blocks (a
     * residual, the 7x7 map of 49 pixels, 56 pixels, the tail of a K block) */
    {
        static const tcase flat[] = {
            {1, 64, 7, 7, 64, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, {NNF_ACT_RELU, 0, 0},
             1, 1,  0, 0, 0,  0, 0},
            {1, 40, 7, 8, 128, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, {NNF_ACT_SILU, 0, 0},
             1, 0,  0, 0, 0,   0, 0},
            {2, 461, 3, 5, 64, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, {NNF_ACT_CLIP, 0, 6},
             1, 1,   1, 0, 0,  0, 0},
        };
        const size_t nflat = sizeof flat / sizeof flat[0];
        bool was = nnf_cpu_force_bcast_costly(!nnf_cpu_get()->bcast_costly);
        for (size_t i = 0; i < nflat; i++)
            run_case(&flat[i], pool2);
        for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
            if (fixed[i].kh == 1 && fixed[i].kw == 1)
                run_case(&fixed[i], pool2);
        nnf_cpu_force_bcast_costly(was);
        for (size_t i = 0; i < nflat; i++) /* and in this machine's form */
            run_case(&flat[i], pool2);
    }

    /* AVX-512 3x3s on rows of up to 14 with 16k output blocks take tile
     * groups of 6, 6 and 4 blocks where broadcasts are costly (Intel): 16
     * and 32 blocks at strides 1 and 2, a batch of 2 on an odd map, K
     * blocks of partial sums, a residual before and after the activation,
     * two conv groups of 16 blocks each; in both forms on any machine */
    {
        static const tcase mixed[] = {
            {1, 128, 7, 7, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, {NNF_ACT_RELU, 0, 0},
             1, 1,   0, 0, 0,   0, 0},
            {1, 24, 28, 28, 256, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, {NNF_ACT_SILU, 0, 0},
             1, 1,  1,  0,  0,   0, 0},
            {2, 17, 13, 11, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, {NNF_ACT_CLIP, 0, 6},
             1, 0,  0,  0,  0,   0, 0},
            {1, 461, 7, 7, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, {NNF_ACT_NONE, 0, 0},
             1, 1,   0, 0, 0,   0, 0},
            {1, 32, 14, 14, 256, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, {NNF_ACT_RELU, 0, 0},
             1, 1,  0,  0,  0,   0, 2},
        };
        for (int form = 0; form < 2; form++) {
            bool was = nnf_cpu_force_bcast_costly(form ? !nnf_cpu_get()->bcast_costly
                                                       : nnf_cpu_get()->bcast_costly);
            for (size_t i = 0; i < sizeof mixed / sizeof mixed[0]; i++)
                run_case(&mixed[i], pool2);
            nnf_cpu_force_bcast_costly(was);
        }
    }

    /* grouped convs of whole blocks: groups of 8, 16, 24 channels (RegNet's
     * widths), output groups of 1-10 blocks (tiles must not cross a group:
     * the last tile of a group is shorter), 1x1 and 3x3 at strides 1 and 2, the padded-copy
     * small maps and wider rows, batch 2, the residual, every tier */
    {
        static const size_t gc[][3] = {/* c, oc, group */
                                       {16, 16, 2}, {48, 48, 2}, {24, 72, 3}, {32, 32, 4},  {64, 48, 2},
                                       {96, 96, 6}, {48, 96, 6}, {80, 80, 5}, {120, 120, 5}, {16, 64, 2},
                                       /* 5, 7 and 10 blocks per group: tile heights that do not divide */
                                       {80, 80, 2}, {16, 112, 2}, {16, 160, 2}};
        for (size_t i = 0; i < sizeof gc / sizeof gc[0]; i++)
            for (int v = 0; v < 3; v++) {
                tcase tc = {.n = 1 + (size_t)(v == 2), .c = gc[i][0], .oc = gc[i][1], .group = gc[i][2],
                            .in_blocked = 1, .dh = 1, .dw = 1};
                tc.kh = tc.kw = v == 1 ? 1 : 3;
                tc.sh = tc.sw = 1 + (size_t)((i + (size_t)v) % 2);
                tc.h = v == 0 ? 7 : 11;
                tc.w = v == 0 ? 7 : 29;
                tc.pt = tc.pl = tc.pb = tc.pr = tc.kh / 2;
                tc.act = act_of((int)((i + (size_t)v) % 11));
                tc.bias = v != 1;
                tc.res = (i + (size_t)v) % 3 == 0;
                tc.res_after = i % 4 == 3;
                run_case(&tc, pool2);
            }
    }

    /* dilation past the stride (DeepLabV3's ASPP and dilated backbone):
     * runs of columns with the same taps inside the row run as interior
     * tiles over those taps alone (nnf_nchwc_row_parts), no interior at all
     * where the dilation reaches past the map, asymmetric pads, rows of
     * every tile width, one and several K blocks, residuals, stride 2,
     * taps with no column inside, a 5x5 and a 1x3 */
    {
        static const size_t dc[][9] = {/* c, oc, h, w, k, d, pad, stride, pad right/bottom */
                                       {16, 16, 9, 9, 3, 4, 4, 1, 4},
                                       {24, 40, 13, 13, 3, 6, 6, 1, 6},
                                       {16, 32, 9, 9, 3, 12, 12, 1, 12},
                                       {8, 16, 11, 29, 3, 24, 24, 1, 24},
                                       {72, 24, 7, 30, 3, 9, 9, 1, 9},
                                       {300, 16, 6, 17, 3, 5, 5, 1, 5},
                                       {16, 24, 12, 25, 3, 5, 3, 2, 7},
                                       {17, 9, 10, 14, 5, 3, 6, 1, 2},
                                       {16, 16, 8, 20, 3, 2, 2, 1, 2},
                                       {32, 64, 6, 31, 3, 36, 36, 1, 36},
                                       {16, 8, 5, 26, 3, 7, 0, 1, 14},
                                       /* "same" 3x3s: the Winograd's dilated form too (a
                                        * mosaic of the phases), maps of whole multiples of d */
                                       {32, 40, 28, 28, 3, 2, 2, 1, 2},
                                       {40, 24, 12, 16, 3, 4, 4, 1, 4},
                                       {16, 24, 12, 18, 3, 3, 3, 1, 3},
                                       {64, 64, 8, 8, 3, 2, 2, 1, 2},
                                       {24, 16, 18, 12, 3, 6, 6, 1, 6},
                                       /* maps that are not: phases of two sizes, and fewer phases
                                        * than d on an axis */
                                       {32, 40, 27, 29, 3, 2, 2, 1, 2},
                                       {40, 16, 20, 22, 3, 6, 6, 1, 6},
                                       {16, 24, 13, 7, 3, 3, 3, 1, 3},
                                       {32, 8, 9, 17, 3, 5, 5, 1, 5}};
        for (size_t i = 0; i < sizeof dc / sizeof dc[0]; i++)
            for (int v = 0; v < 2; v++) {
                tcase tc = {.n = 1 + (size_t)(v == 1 && i % 3 == 0),
                            .c = dc[i][0],
                            .oc = dc[i][1],
                            .h = dc[i][2],
                            .w = dc[i][3],
                            .in_blocked = 1};
                tc.kh = v == 1 && i % 4 == 1 ? 1 : dc[i][4];
                tc.kw = dc[i][4];
                tc.dh = tc.dw = dc[i][5];
                tc.pt = tc.pl = dc[i][6];
                tc.pb = tc.pr = dc[i][8];
                if (tc.kh == 1)
                    tc.pt = tc.pb = 0;
                tc.sh = tc.sw = dc[i][7];
                tc.act = act_of((int)((i + (size_t)v) % 11));
                tc.bias = v == 0 || i % 2;
                tc.res = (i + (size_t)v) % 3 == 0;
                tc.res_after = i % 5 == 4;
                run_case(&tc, pool2);
            }
    }

    /* a seeded sweep over the brief's grid, every activation in turn */
    static const size_t chans[] = {1, 3, 7, 8, 9, 16, 17, 31, 64};
    static const size_t widths[] = {1, 2, 5, 13, 61};
    static const size_t ks[][2] = {{1, 1}, {3, 3}, {5, 5}, {7, 7}, {1, 3}, {3, 1}};
    static const size_t strides[] = {1, 2, 3};
    for (int i = 0; i < 160; i++) {
        tcase tc = {.n = 1 + (size_t)(i % 7 == 0), .alpha = 0, .res_scale = 0};
        tc.c = pick(chans, 9);
        tc.oc = pick(chans, 9);
        size_t kk = (size_t)(check_unit() * 6) % 6;
        tc.kh = ks[kk][0];
        tc.kw = ks[kk][1];
        tc.sh = tc.sw = pick(strides, 3);
        tc.dh = tc.dw = check_unit() < 0.2 ? 2 : 1;
        tc.w = pick(widths, 5);
        tc.h = 1 + (size_t)(check_unit() * 9);
        size_t pad = (size_t)(check_unit() * 3);
        tc.pt = tc.pb = tc.pl = tc.pr = pad;
        if (check_unit() < 0.25) { /* asymmetric */
            tc.pb = (size_t)(check_unit() * 3);
            tc.pr = (size_t)(check_unit() * 3);
        }
        if (out_dim(tc.h, tc.kh, tc.sh, tc.dh, tc.pt, tc.pb) == 0 ||
            out_dim(tc.w, tc.kw, tc.sw, tc.dw, tc.pl, tc.pr) == 0)
            continue;
        tc.in_blocked = check_unit() < 0.8 || tc.c > 8;
        tc.act = act_of(i % 11);
        tc.bias = check_unit() < 0.7;
        tc.res = check_unit() < 0.4;
        run_case(&tc, pool2);
    }
    soak(pool2);
    /* every allocation of create failing in turn: an error, no crash, no leak
     * (the sanitizer build checks the last) */
    {
        nnf_conv2d_shape s = {.n = 1,
                              .c = 9,
                              .h = 5,
                              .w = 5,
                              .oc = 9,
                              .group = 1,
                              .kh = 3,
                              .kw = 3,
                              .sh = 1,
                              .sw = 1,
                              .dh = 1,
                              .dw = 1,
                              .pt = 1,
                              .pl = 1,
                              .oh = 5,
                              .ow = 5};
        float *w = check_rand_buf(9 * 9 * 9);
        int failed = 0;
        for (uint64_t n = 1; n <= 4; n++) {
            nnf_nchwc_conv *k = NULL;
            nnf_alloc_fail_after(n);
            nnf_status st = nnf_nchwc_conv_create(&s, 1, NNF_ISA_AVX2, w, &k);
            nnf_alloc_fail_after(0);
            if (st != NNF_OK) {
                failed++;
                CHECK(st == NNF_ERR_OUT_OF_MEMORY && k == NULL);
            }
            nnf_nchwc_conv_destroy(k);
        }
        CHECK(failed == 2); /* the kernel, its packed weights */
        /* a padded 5x5 map runs on a zero-padded copy of its input on the
         * AVX2 tier: its allocation failing is a status, nothing written (the
         * copy goes to the thread's scratch, kept between runs: released
         * first, so this run allocates it) */
        {
            nnf_nchwc_conv *k = NULL;
            CHECK(nnf_nchwc_conv_create(&s, 1, NNF_ISA_AVX2, w, &k) == NNF_OK);
            float *x = check_rand_buf(2 * 8 * 5 * 5), *y = check_rand_buf(2 * 8 * 5 * 5);
            float y0 = y[0];
            nnf_epilogue ep = nnf_epilogue_default();
            nnf_thread_scratch_release(NNF_SCRATCH_CONV_IN);
            nnf_alloc_fail_after(1);
            nnf_status st = nnf_nchwc_conv_run(k, x, y, &ep, NULL);
            nnf_alloc_fail_after(0);
            if (k->isa >= NNF_ISA_AVX2)
                CHECK(st == NNF_ERR_OUT_OF_MEMORY && y[0] == y0);
            else
                CHECK(st == NNF_OK);
            CHECK(nnf_nchwc_conv_run(k, x, y, &ep, NULL) == NNF_OK);
            nnf_nchwc_conv_destroy(k);
            free(x);
            free(y);
        }
        /* what it rejects: groups that are not whole blocks (9 channels in
         * 3 groups, 16 in 2 groups into 12 outputs), a grouped conv on NCHW
         * input, zero strides; NULL arguments */
        nnf_conv2d_shape g = s;
        g.group = 3;
        nnf_nchwc_conv *k = NULL;
        CHECK(!nnf_nchwc_conv_supported(&g));
        CHECK(nnf_nchwc_conv_create(&g, 1, NNF_ISA_AVX2, w, &k) == NNF_ERR_UNSUPPORTED && !k);
        g.c = 16;
        g.oc = 12;
        g.group = 2;
        CHECK(!nnf_nchwc_conv_supported(&g));
        g.oc = 16;
        CHECK(nnf_nchwc_conv_supported(&g));
        CHECK(nnf_nchwc_conv_create(&g, 0, NNF_ISA_AVX2, w, &k) == NNF_ERR_UNSUPPORTED && !k);
        g = s;
        g.sw = 0;
        CHECK(nnf_nchwc_conv_create(&g, 1, NNF_ISA_AVX2, w, &k) == NNF_ERR_UNSUPPORTED && !k);
        CHECK(nnf_nchwc_conv_create(&s, 1, NNF_ISA_AVX2, NULL, &k) == NNF_ERR_INVALID_ARGUMENT);
        CHECK(nnf_nchwc_conv_create(&s, 1, NNF_ISA_AVX2, w, &k) == NNF_OK);
        float x[1], y[1];
        CHECK(nnf_nchwc_conv_run(k, NULL, y, NULL, NULL) == NNF_ERR_INVALID_ARGUMENT);
        nnf_epilogue ep = nnf_epilogue_default();
        ep.bias_kind = NNF_BIAS_PER_COL;
        ep.bias = w;
        CHECK(nnf_nchwc_conv_run(k, x, y, &ep, NULL) == NNF_ERR_INVALID_ARGUMENT);
        nnf_nchwc_conv_destroy(k);
        nnf_nchwc_conv_destroy(NULL);
        free(w);
    }
    /* the blocked Winograd at awkward sizes: maps of 1, 2, primes and the
     * 4-pixel tile edges +-1, channels around the 8-lane blocks, padding 0, 1,
     * 2 and asymmetric, batch 2, every activation, the residual before and
     * after it, alpha and a scaled residual; its allocation failures */
    if (nnf_cpu_get()->max_isa >= NNF_ISA_AVX2) {
        check_weight_transforms();
        static const size_t hs[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 14, 17};
        static const size_t cs[] = {1, 7, 8, 9, 16, 17, 64};
        wino_sweep(1, hs, cs, pool2);
        /* the stride-2 form (both SIMD tiers) likewise: output maps of 1, 2,
         * 4, 5, 8, 9 and 13 (a 9x9 patch a 4x4 tile, the odd last row and
         * column of an even map inside the padding), odd channel blocks,
         * weight-heavy maps that run in phases on 2 and 3 threads */
        static const size_t hs2[] = {1, 2, 3, 7, 8, 9, 10, 15, 17, 25, 33};
        static const size_t cs2[] = {1, 7, 8, 9, 17, 24, 64};
        wino_sweep(2, hs2, cs2, pool2);
        /* 1 x 37 tiles: one work item on one thread, 12 + 12 + 12 + 1 tiles
         * on two before the last item took the one-tile remainder (whose
         * one-row GEMM ran the GEMV kernel: the 1 vs 2 thread check failed) */
        tcase tc = {.n = 1, .c = 9, .h = 4, .w = 148, .oc = 9, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
                    .dh = 1, .dw = 1, .pt = 1, .pl = 1, .pb = 1, .pr = 1, .in_blocked = 1,
                    .act = act_of(NNF_ACT_RELU), .bias = 1, .alpha = 1.0f, .res_scale = 1.0f};
        run_case(&tc, pool2);
        printf("blocked winograd: %d cases, %d of them stride 2, %d F(2x2,3x3), %d dilated\n",
               wino_runs, wino2_runs, winof2_runs, dil_runs);
        /* run_wino takes each case through every tier from AVX2 up: 40 dilated
         * runs a tier (the sixty-fourth round wrote 80, on an AVX-512 machine,
         * and an AVX2-only CPU's 60 failed it) */
        CHECK(dil_runs >= 40 * ((int)nnf_cpu_get()->max_isa - NNF_ISA_AVX2 + 1));
        CHECK(winof2_runs >= 40);
        CHECK(wino_runs >= 40);
        CHECK(wino2_runs >= 40);
        nnf_conv2d_shape s = {.n = 1, .c = 9, .h = 6, .w = 6, .oc = 17, .group = 1, .kh = 3, .kw = 3, .sh = 1,
                              .sw = 1, .dh = 1, .dw = 1, .pt = 1, .pl = 1, .oh = 6, .ow = 6};
        float *w = check_rand_buf(17 * 9 * 9);
        wino_alloc_failures(&s, NNF_ISA_AVX2, w);
        nnf_conv2d_shape s2 = s;
        s2.sh = 2;
        nnf_nchwc_wino *k = NULL;
        CHECK(nnf_nchwc_wino_create(&s2, NNF_ISA_AVX2, w, &k) == NNF_ERR_UNSUPPORTED && !k);
        CHECK(nnf_nchwc_wino_create(&s, NNF_ISA_SCALAR, w, &k) == NNF_ERR_UNSUPPORTED && !k);
        free(w);
        /* the choice (nnf_nchwc_wino_wins): ResNet-50's 14x14 maps (16
         * tiles) and YOLOv5s's 20x20 (25) on every SIMD tier, 32 channels on cores
         * with 1 MiB of L2 or more; 7x7 (4) as F(2x2,3x3) where FMAs are
         * 8 wide (the AVX2 tier, Zen 4); never 16 channels or the scalar
         * tier */
        if (nnf_cpu_get()->max_isa >= NNF_ISA_AVX2) {
            bool was_half = nnf_cpu_force_ymm_halves(false); /* Zen 1's rule below */
            nnf_conv2d_shape q = {.n = 1, .c = 256, .h = 14, .w = 14, .oc = 256, .group = 1,
                                  .kh = 3, .kw = 3, .sh = 1, .sw = 1, .dh = 1, .dw = 1, .pt = 1,
                                  .pl = 1, .oh = 14, .ow = 14};
            CHECK(nnf_nchwc_wino_wins(&q, NNF_ISA_AVX2));
            CHECK(!nnf_nchwc_wino_wins(&q, NNF_ISA_SCALAR));
            /* the AVX-512 tier runs 14x14 (16 tiles) on Winograd too, 7x7
             * (4) direct (nnf_nchwc_direct_wins) */
            CHECK(!nnf_nchwc_direct_wins(&q, NNF_ISA_AVX512));
            if (nnf_cpu_get()->max_isa >= NNF_ISA_AVX512)
                CHECK(nnf_nchwc_wino_wins(&q, NNF_ISA_AVX512));
            /* as F(2x2,3x3) (16 tiles of 4x4, 49 of 2x2), on both tiers (a rule
             * answers for the tier asked, whatever the machine has) */
            CHECK(nnf_nchwc_wino_f2(&q, NNF_ISA_AVX512));
            CHECK(nnf_nchwc_wino_f2(&q, NNF_ISA_AVX2));
            q.h = q.w = q.oh = q.ow = 7;
            /* 16 tiles of 2x2: F(2x2,3x3) on both tiers, though the
             * AVX-512 tier's direct kernel beats F(4x4,3x3) there */
            CHECK(nnf_nchwc_wino_f2(&q, NNF_ISA_AVX512));
            CHECK(nnf_nchwc_wino_f2(&q, NNF_ISA_AVX2));
            CHECK(nnf_nchwc_direct_wins(&q, NNF_ISA_AVX512) && !nnf_nchwc_direct_wins(&q, NNF_ISA_AVX2));
            CHECK(nnf_nchwc_wino_wins(&q, NNF_ISA_AVX512));
            q.h = q.w = q.oh = q.ow = 6; /* 9 tiles of 2x2: direct on AVX-512 */
            CHECK(!nnf_nchwc_wino_f2(&q, NNF_ISA_AVX512) &&
                  !nnf_nchwc_wino_wins(&q, NNF_ISA_AVX512));
            q.h = q.w = q.oh = q.ow = 20;
            CHECK(!nnf_nchwc_wino_f2(&q, NNF_ISA_AVX512)); /* 25 tiles of 4x4 */
            CHECK(!nnf_nchwc_wino_f2(&q, NNF_ISA_AVX2));
            CHECK(nnf_nchwc_wino_wins(&q, NNF_ISA_AVX2));
            CHECK(!nnf_nchwc_direct_wins(&q, NNF_ISA_AVX512));
            if (nnf_cpu_get()->max_isa >= NNF_ISA_AVX512)
                CHECK(nnf_nchwc_wino_wins(&q, NNF_ISA_AVX512));
            q.c = 32;
            CHECK(nnf_nchwc_wino_wins(&q, NNF_ISA_AVX2));
            CHECK(nnf_nchwc_wino_min_c() == 32u);
            q.c = 16;
            CHECK(!nnf_nchwc_wino_wins(&q, NNF_ISA_AVX2));
            q.c = 512;
            q.oc = 512;
            q.h = q.w = q.oh = q.ow = 7;
            CHECK(nnf_nchwc_wino_wins(&q, NNF_ISA_AVX2));
            /* the stride-2 form: on both SIMD tiers, from 64 channels and
             * 25 tiles (YOLOv5s's 128 -> 256 at 40x40 and 256 -> 512 at
             * 20x20, ResNet-50's 128 at 28x28; not its 256 at 14x14 nor
             * YOLOv5s's 32 -> 64 at 160x160) */
            nnf_conv2d_shape r = {.n = 1,
                                  .c = 128,
                                  .h = 80,
                                  .w = 80,
                                  .oc = 256,
                                  .group = 1,
                                  .kh = 3,
                                  .kw = 3,
                                  .sh = 2,
                                  .sw = 2,
                                  .dh = 1,
                                  .dw = 1,
                                  .pt = 1,
                                  .pl = 1,
                                  .oh = 40,
                                  .ow = 40};
            CHECK(nnf_nchwc_wino_wins(&r, NNF_ISA_AVX512));
            CHECK(nnf_nchwc_wino_wins(&r, NNF_ISA_AVX2));
            r.c = 32;
            CHECK(!nnf_nchwc_wino_wins(&r, NNF_ISA_AVX512));
            r.c = 256;
            r.oc = 512;
            r.h = r.w = 40;
            r.oh = r.ow = 20;
            CHECK(nnf_nchwc_wino_wins(&r, NNF_ISA_AVX512));
            r.oc = 256;
            r.h = r.w = 28;
            r.oh = r.ow = 14;
            CHECK(!nnf_nchwc_wino_wins(&r, NNF_ISA_AVX512));
            CHECK(!nnf_nchwc_wino_wins(&r, NNF_ISA_AVX2));
            /* where ymm FMAs run as halves (Zen 1), the AVX2 tier takes the
             * forms with fewer multiplies: the stride-2 form at 16 tiles
             * (not 9), F(4x4,3x3) at 14x14 (16 tiles), F(2x2,3x3) at 7x7
             * still; the AVX-512 tier keeps its rules */
            nnf_cpu_force_ymm_halves(true);
            CHECK(nnf_nchwc_wino_wins(&r, NNF_ISA_AVX2));
            CHECK(!nnf_nchwc_wino_wins(&r, NNF_ISA_AVX512));
            r.h = r.w = 24;
            r.oh = r.ow = 12;
            CHECK(!nnf_nchwc_wino_wins(&r, NNF_ISA_AVX2));
            q.c = q.oc = 256;
            q.h = q.w = q.oh = q.ow = 14;
            CHECK(!nnf_nchwc_wino_f2(&q, NNF_ISA_AVX2) && nnf_nchwc_wino_wins(&q, NNF_ISA_AVX2));
            CHECK(nnf_nchwc_wino_f2(&q, NNF_ISA_AVX512));
            q.h = q.w = q.oh = q.ow = 12; /* 9 tiles of 4x4, 36 of 2x2 */
            CHECK(nnf_nchwc_wino_f2(&q, NNF_ISA_AVX2));
            q.h = q.w = q.oh = q.ow = 7;
            CHECK(nnf_nchwc_wino_f2(&q, NNF_ISA_AVX2));
            /* but F(4x4,3x3) weights of more than 16 MiB take F(2x2,3x3)
             * at 16 tiles too (the U-Net's 512-channel 3x3s at 16x16):
             * 512 x 256 channels and up, not at 64 tiles */
            q.h = q.w = q.oh = q.ow = 16;
            CHECK(!nnf_nchwc_wino_f4_heavy(&q) && !nnf_nchwc_wino_f2(&q, NNF_ISA_AVX2));
            q.c = 512;
            CHECK(nnf_nchwc_wino_f4_heavy(&q) && nnf_nchwc_wino_f2(&q, NNF_ISA_AVX2));
            q.oc = 512;
            CHECK(nnf_nchwc_wino_f2(&q, NNF_ISA_AVX2) && nnf_nchwc_wino_wins(&q, NNF_ISA_AVX2));
            q.h = q.w = q.oh = q.ow = 32;
            CHECK(!nnf_nchwc_wino_f2(&q, NNF_ISA_AVX2));
            q.c = q.oc = 256;
            nnf_cpu_force_ymm_halves(was_half);
            r.sw = 1;
            CHECK(!nnf_nchwc_wino_supported(&r, NNF_ISA_AVX512));
        }
    }
    /* the stride-2 form's allocation failures */
    if (nnf_cpu_get()->max_isa >= NNF_ISA_AVX2) {
        nnf_conv2d_shape s = {.n = 1, .c = 9, .h = 11, .w = 11, .oc = 17, .group = 1, .kh = 3, .kw = 3,
                              .sh = 2, .sw = 2, .dh = 1, .dw = 1, .pt = 1, .pl = 1, .oh = 6, .ow = 6};
        float *w = check_rand_buf(17 * 9 * 9);
        for (int t = NNF_ISA_AVX2; t <= (int)nnf_cpu_get()->max_isa; t++)
            wino_alloc_failures(&s, (nnf_isa)t, w);
        nnf_nchwc_wino *k = NULL;
        CHECK(nnf_nchwc_wino_create(&s, NNF_ISA_SCALAR, w, &k) == NNF_ERR_UNSUPPORTED && !k);
        free(w);
    }
    /* ResNet's bottleneck ends (1x1 + residual + ReLU: one pass over K, so
     * run over their residual as well, in run_case); a 3x3 over 256
     * channels takes several passes on every tier and L1 size, so its
     * output may not overwrite the residual */
    {
        static const size_t rc[][3] = {{64, 256, 28}, {128, 512, 13}, {256, 1024, 7}}; /* c, oc, h = w */
        for (size_t i = 0; i < sizeof rc / sizeof rc[0]; i++) {
            tcase tc = {.n = 1, .c = rc[i][0], .h = rc[i][2], .w = rc[i][2], .oc = rc[i][1], .kh = 1, .kw = 1,
                        .sh = 1, .sw = 1, .dh = 1, .dw = 1, .in_blocked = 1, .act = act_of(NNF_ACT_RELU),
                        .bias = 1, .res = 1};
            run_case(&tc, pool2);
        }
        nnf_conv2d_shape s = {.n = 1, .c = 256, .h = 7, .w = 7, .oc = 16, .group = 1, .kh = 3, .kw = 3, .sh = 1,
                              .sw = 1, .dh = 1, .dw = 1, .pt = 1, .pl = 1, .oh = 7, .ow = 7};
        float *w = check_rand_buf(16 * 256 * 9);
        for (int ti = NNF_ISA_SCALAR; ti <= (int)nnf_cpu_get()->max_isa; ti++) {
            nnf_nchwc_conv *k = NULL;
            CHECK(nnf_nchwc_conv_create(&s, 1, (nnf_isa)ti, w, &k) == NNF_OK);
            CHECK(k && !nnf_nchwc_conv_one_pass(k));
            nnf_nchwc_conv_destroy(k);
        }
        CHECK(!nnf_nchwc_conv_one_pass(NULL));
        free(w);
        printf("in place over the residual: %d cases\n", in_place_runs);
        CHECK(in_place_runs >= 20);
    }
    /* 3-block groups (24 output channels) on the AVX-512 tier, whose
     * interior tiles share a zmm between two pixels' third block
     * (tile3_taps): the bits of two zmm a pixel, at odd and even tile
     * widths, strides 1 and 2, one K block and several, with a residual */
    if (nnf_cpu_get()->max_isa >= NNF_ISA_AVX512) {
        static const size_t pc[][6] = {/* c, h, w, k, stride, pad */
                                       {144, 56, 56, 1, 1, 0}, {96, 13, 11, 1, 1, 0},
                                       {40, 9, 23, 3, 1, 1},   {1024, 7, 7, 3, 1, 1},
                                       {32, 15, 30, 3, 2, 1},  {16, 5, 5, 1, 2, 0}};
        int diff = 0;
        for (size_t i = 0; i < sizeof pc / sizeof pc[0]; i++) {
            nnf_conv2d_shape s = {.n = 1,
                                  .c = pc[i][0],
                                  .h = pc[i][1],
                                  .w = pc[i][2],
                                  .oc = 24,
                                  .group = 1,
                                  .kh = pc[i][3],
                                  .kw = pc[i][3],
                                  .sh = pc[i][4],
                                  .sw = pc[i][4],
                                  .dh = 1,
                                  .dw = 1,
                                  .pt = pc[i][5],
                                  .pl = pc[i][5]};
            s.oh = out_dim(s.h, s.kh, s.sh, 1, s.pt, s.pt);
            s.ow = out_dim(s.w, s.kw, s.sw, 1, s.pl, s.pl);
            size_t hw = s.h * s.w, ysize = 3 * 8 * s.oh * s.ow;
            float *x = check_rand_buf(s.c * hw), *w = check_rand_buf(24 * s.c * s.kh * s.kw);
            float *bias = check_rand_buf(24), *res = check_rand_buf(ysize);
            float *xb = to_blocked(x, 1, s.c, hw);
            float *y[2] = {malloc(ysize * sizeof(float)), malloc(ysize * sizeof(float))};
            nnf_epilogue ep = nnf_epilogue_default();
            ep.act = act_of(i % 2 ? NNF_ACT_RELU : NNF_ACT_SILU);
            ep.bias_kind = NNF_BIAS_PER_ROW;
            ep.bias = bias;
            ep.residual = i % 3 ? res : NULL;
            nnf_nchwc_conv *k = NULL;
            CHECK(nnf_nchwc_conv_create(&s, 1, NNF_ISA_AVX512, w, &k) == NNF_OK);
            for (int t = 0; t < 2 && k; t++) {
                nnf_nchwc_no_pair3 = t;
                CHECK(nnf_nchwc_conv_run(k, xb, y[t], &ep, i % 2 ? pool2 : NULL) == NNF_OK);
            }
            nnf_nchwc_no_pair3 = 0;
            nnf_nchwc_conv_destroy(k);
            diff += memcmp(y[0], y[1], ysize * sizeof(float)) != 0;
            free(x);
            free(w);
            free(bias);
            free(res);
            free(xb);
            free(y[0]);
            free(y[1]);
        }
        CHECK_MSG(diff == 0, "%d 24-channel convs differ with a zmm shared by two pixels", diff);
    }
    /* Patch convs (kernel at most the stride, no padding: the stems of
     * ConvNeXt, Swin and ViT from NCHW, ConvNeXt's 2x2 downsamples on
     * blocked input) run as a 1x1 over a blocked copy of their windows
     * (NCHW input: where c * kh * kw is whole blocks; 3 x 2 x 2 stays on
     * the NCHW tiles), and so do blocked convs of any window on rows too
     * narrow for full tiles (padded, overlapping, dilated: ResNet-50's
     * stride-2 3x3 to 7x7): against the double reference (run_case: every
     * tier, 1 and 2 threads, NCHW and channel-last output), and bit for bit
     * against the direct tiles (nnf_nchwc_no_patch_copy). */
    {
        static const size_t pc[][12] = {
            /* n, c, h, w, oc, kh, kw, sh, sw, blocked, pad, dilation */
            {1, 3, 36, 36, 96, 4, 4, 4, 4, 0, 0, 1},     {2, 3, 35, 38, 40, 4, 4, 4, 4, 0, 0, 1},
            {1, 3, 48, 50, 24, 16, 16, 16, 16, 0, 0, 1}, {1, 1, 17, 19, 8, 4, 2, 4, 2, 0, 0, 1},
            {1, 2, 13, 14, 20, 2, 2, 3, 3, 0, 0, 1},     {1, 8, 9, 10, 13, 3, 3, 3, 3, 0, 0, 1},
            {1, 3, 16, 16, 16, 2, 2, 2, 2, 0, 0, 1},     {1, 24, 28, 28, 48, 2, 2, 2, 2, 1, 0, 1},
            {2, 20, 15, 13, 36, 2, 2, 2, 2, 1, 0, 1},    {1, 16, 14, 15, 24, 3, 2, 3, 2, 1, 0, 1},
            {1, 9, 11, 9, 16, 2, 3, 3, 3, 1, 0, 1},      {1, 16, 14, 14, 32, 3, 3, 2, 2, 1, 1, 1},
            {2, 24, 9, 9, 40, 3, 3, 1, 1, 1, 1, 1},      {1, 8, 11, 10, 64, 5, 5, 2, 2, 1, 2, 1},
            {1, 20, 7, 7, 24, 3, 3, 1, 1, 1, 2, 2},      {1, 13, 6, 13, 16, 3, 1, 2, 3, 1, 1, 1}};
        int diff = 0, runs = 0;
        for (size_t i = 0; i < sizeof pc / sizeof pc[0]; i++) {
            tcase tc = {.n = pc[i][0],
                        .c = pc[i][1],
                        .h = pc[i][2],
                        .w = pc[i][3],
                        .oc = pc[i][4],
                        .kh = pc[i][5],
                        .kw = pc[i][6],
                        .sh = pc[i][7],
                        .sw = pc[i][8],
                        .dh = pc[i][11],
                        .dw = pc[i][11],
                        .pt = pc[i][10],
                        .pl = pc[i][10],
                        .pb = pc[i][10],
                        .pr = pc[i][10],
                        .act = act_of((int)(i % 3 == 0   ? NNF_ACT_SILU
                                            : i % 3 == 1 ? NNF_ACT_RELU
                                                         : NNF_ACT_NONE)),
                        .bias = (int)(i % 2),
                        .res = i % 3 == 2,
                        .alpha = i == 4 ? 0.5f : 0,
                        .in_blocked = (int)pc[i][9]};
            run_case(&tc, pool2);
            nnf_conv2d_shape s = {.n = tc.n,
                                  .c = tc.c,
                                  .h = tc.h,
                                  .w = tc.w,
                                  .oc = tc.oc,
                                  .group = 1,
                                  .kh = tc.kh,
                                  .kw = tc.kw,
                                  .sh = tc.sh,
                                  .sw = tc.sw,
                                  .dh = tc.dh,
                                  .dw = tc.dw,
                                  .pt = tc.pt,
                                  .pl = tc.pl};
            s.oh = out_dim(s.h, s.kh, s.sh, s.dh, s.pt, s.pt);
            s.ow = out_dim(s.w, s.kw, s.sw, s.dw, s.pl, s.pl);
            size_t ysize = s.n * nnf_nchwc_blocks(s.oc) * 8 * s.oh * s.ow;
            float *x = check_rand_buf(s.n * s.c * s.h * s.w),
                  *xb = to_blocked(x, s.n, s.c, s.h * s.w);
            float *w = check_rand_buf(s.oc * s.c * s.kh * s.kw), *bias = check_rand_buf(s.oc);
            float *y[2] = {malloc(ysize * sizeof(float)), malloc(ysize * sizeof(float))};
            nnf_epilogue ep = nnf_epilogue_default();
            ep.act = act_of(NNF_ACT_SILU);
            ep.bias_kind = NNF_BIAS_PER_ROW;
            ep.bias = bias;
            for (int ti = NNF_ISA_AVX2; ti <= (int)nnf_cpu_get()->max_isa; ti++) {
                nnf_nchwc_conv *k = NULL;
                CHECK(nnf_nchwc_conv_create(&s, tc.in_blocked, (nnf_isa)ti, w, &k) == NNF_OK);
                for (int t = 0; t < 2 && k; t++) {
                    nnf_nchwc_no_patch_copy = t;
                    CHECK(nnf_nchwc_conv_run(k, tc.in_blocked ? xb : x, y[t], &ep,
                                             t ? pool2 : NULL) == NNF_OK);
                }
                nnf_nchwc_no_patch_copy = 0;
                nnf_nchwc_conv_destroy(k);
                diff += memcmp(y[0], y[1], ysize * sizeof(float)) != 0;
                runs++;
            }
            free(x);
            free(xb);
            free(w);
            free(bias);
            free(y[0]);
            free(y[1]);
        }
        printf("patch convs: %d runs against the direct tiles\n", runs);
        CHECK_MSG(diff == 0, "%d patch convs differ from the direct tiles", diff);
    }
    /* NCHW output on maps large enough that a task's band takes several
     * passes through its buffer (a quarter of L2): a padded 3x3, a
     * flattened 1x1 and a stem from NCHW, against the blocked run */
    {
        static const size_t pc[][8] = {/* c, h = w, oc, k, stride, pad, in_blocked */
                                       {8, 200, 64, 3, 1, 1, 1},
                                       {16, 160, 72, 1, 1, 0, 1},
                                       {3, 230, 64, 7, 2, 3, 0}};
        for (size_t i = 0; i < sizeof pc / sizeof pc[0]; i++) {
            nnf_conv2d_shape s = {.n = 1, .c = pc[i][0], .h = pc[i][1], .w = pc[i][1], .oc = pc[i][2],
                                  .group = 1, .kh = pc[i][3], .kw = pc[i][3], .sh = pc[i][4], .sw = pc[i][4],
                                  .dh = 1, .dw = 1, .pt = pc[i][5], .pl = pc[i][5]};
            s.oh = s.ow = out_dim(s.h, s.kh, s.sh, 1, s.pt, s.pt);
            size_t hw = s.h * s.w, ysize = nnf_nchwc_blocks(s.oc) * 8 * s.oh * s.ow;
            float *x = check_rand_buf(s.c * hw), *w = check_rand_buf(s.oc * s.c * s.kh * s.kw);
            float *bias = check_rand_buf(s.oc), *xb = to_blocked(x, 1, s.c, hw);
            float *yb = malloc(ysize * sizeof(float));
            nnf_epilogue ep = nnf_epilogue_default();
            ep.act = act_of(NNF_ACT_SILU);
            ep.bias_kind = NNF_BIAS_PER_ROW;
            ep.bias = bias;
            for (int ti = NNF_ISA_SCALAR; ti <= (int)nnf_cpu_get()->max_isa; ti++) {
                nnf_nchwc_conv *k = NULL;
                CHECK(nnf_nchwc_conv_create(&s, (int)pc[i][6], (nnf_isa)ti, w, &k) == NNF_OK);
                if (!k)
                    continue;
                const float *xin = pc[i][6] ? xb : x;
                CHECK(nnf_nchwc_conv_run(k, xin, yb, &ep, NULL) == NNF_OK);
                check_plain_out(k, xin, yb, &ep, pool2);
                nnf_nchwc_conv_destroy(k);
            }
            free(x);
            free(w);
            free(bias);
            free(xb);
            free(yb);
        }
        printf("NCHW output: %d cases\n", plain_runs);
        CHECK(plain_runs >= 40);
    }
    nnf_threadpool_destroy(pool2);
    nnf_threadpool_destroy(g_pool3);
    TEST_MAIN_END();
}

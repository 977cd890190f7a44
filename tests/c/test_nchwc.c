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
 * inline run. */
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

static void test_reorder(nnf_isa isa) {
    static const size_t cs[] = {1, 3, 7, 8, 9, 17, 64}, hws[] = {1, 13, 61};
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++)
        for (size_t hi = 0; hi < sizeof hws / sizeof hws[0]; hi++) {
            size_t n = 2, c = cs[ci], hw = hws[hi], cb = nnf_nchwc_blocks(c);
            size_t xn = n * c * hw, bn = n * cb * 8 * hw;
            float *x = check_rand_buf(xn), *yb = nan_buf(bn), *yb2 = nan_buf(bn), *back = nan_buf(xn),
                  *back2 = nan_buf(xn);
            nnf_nchwc_from_nchw(x, yb, n, c, hw, isa, NULL);
            nnf_nchwc_from_nchw(x, yb2, n, c, hw, isa, pool2);
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
            CHECK_MSG(bad == 0, "from_nchw c %zu hw %zu: %d wrong", c, hw, bad);
            CHECK_MSG(pad_bad == 0, "from_nchw c %zu hw %zu: %d padding lanes not +0", c, hw, pad_bad);
            CHECK_MSG(memcmp(yb, yb2, bn * sizeof(float)) == 0, "from_nchw c %zu hw %zu: threads differ", c, hw);
            nnf_nchwc_to_nchw(yb, back, n, c, hw, isa, NULL);
            nnf_nchwc_to_nchw(yb, back2, n, c, hw, isa, pool2);
            CHECK_MSG(memcmp(back, x, xn * sizeof(float)) == 0, "round trip c %zu hw %zu", c, hw);
            CHECK_MSG(memcmp(back2, x, xn * sizeof(float)) == 0, "round trip (2 threads) c %zu hw %zu", c, hw);
            free(x), free(yb), free(yb2), free(back), free(back2);
        }
}

/* ---- depthwise ---- */

typedef struct dw_case {
    size_t c, h, w, k_h, k_w, s, d, pt, pl, pb, pr;
    nnf_activation act;
    int bias, res, nan;
    int res_after; /* residual after the activation, scaled by 0.5 */
} dw_case;

static double worst_dw;

static int run_dw(const dw_case *q, nnf_isa isa) {
    nnf_conv2d_shape s = {.n = 2, .c = q->c, .h = q->h, .w = q->w, .oc = q->c, .group = q->c, .kh = q->k_h,
                          .kw = q->k_w, .sh = q->s, .sw = q->s, .dh = q->d, .dw = q->d, .pt = q->pt, .pl = q->pl};
    s.oh = out_dim(q->h, q->k_h, q->s, q->d, q->pt, q->pb);
    s.ow = out_dim(q->w, q->k_w, q->s, q->d, q->pl, q->pr);
    if (!s.oh || !s.ow)
        return 0;
    size_t cb = nnf_nchwc_blocks(s.c), taps = s.kh * s.kw, ihw = s.h * s.w, ohw = s.oh * s.ow;
    size_t xn = s.n * s.c * ihw, yn = s.n * s.c * ohw, xbn = s.n * cb * 8 * ihw, ybn = s.n * cb * 8 * ohw;
    float *x = check_rand_buf(xn), *w = check_rand_buf(s.c * taps), *bias = check_rand_buf(s.c);
    float *r = check_rand_buf(yn), *xb = nan_buf(xbn), *rb = nan_buf(ybn), *y1 = nan_buf(ybn), *y2 = nan_buf(ybn);
    if (q->nan)
        x[(s.c / 2) * ihw + ihw / 2] = NAN; /* image 0, a middle channel, the middle pixel */
    nnf_nchwc_from_nchw(x, xb, s.n, s.c, ihw, NNF_ISA_SCALAR, NULL);
    nnf_nchwc_from_nchw(r, rb, s.n, s.c, ohw, NNF_ISA_SCALAR, NULL);
    nnf_epilogue ep = nnf_epilogue_default();
    ep.act = q->act;
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
    }
    nnf_nchwc_dw *k = NULL;
    int bad = 0;
    CHECK(nnf_nchwc_dw_supported(&s));
    CHECK(nnf_nchwc_dw_create(&s, isa, w, &k) == NNF_OK);
    if (!k)
        goto done;
    CHECK(nnf_nchwc_dw_run(k, xb, y1, &ep, NULL) == NNF_OK);
    CHECK(nnf_nchwc_dw_run(k, xb, y2, &ep, pool2) == NNF_OK);
    CHECK_MSG(memcmp(y1, y2, ybn * sizeof(float)) == 0, "dw c %zu %zux%zu s %zu w %zu: threads differ", s.c,
              s.kh, s.kw, s.sh, s.w);
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
                    for (size_t i = 0; i < s.kh; i++)
                        for (size_t j = 0; j < s.kw; j++) {
                            ptrdiff_t ih = (ptrdiff_t)(oh * s.sh + i * s.dh) - (ptrdiff_t)s.pt;
                            ptrdiff_t iw = (ptrdiff_t)(ow * s.sw + j * s.dw) - (ptrdiff_t)s.pl;
                            if (ih < 0 || iw < 0 || ih >= (ptrdiff_t)s.h || iw >= (ptrdiff_t)s.w)
                                continue;
                            double p = (double)w[c * taps + i * s.kw + j] *
                                       x[(b * s.c + c) * ihw + (size_t)ih * s.w + (size_t)iw];
                            acc += p;
                            mag += fabs(p);
                        }
                    double pre = acc + (q->bias ? bias[c] : 0.0);
                    double rv = r[(b * s.c + c) * ohw + oh * s.ow + ow];
                    if (q->res && !q->res_after)
                        pre += rv;
                    double want = nnf_act_apply(&q->act, (float)pre);
                    if (q->res && q->res_after)
                        want += 0.5 * rv;
                    double tol = (double)taps * ldexp(1.0, -22) * (mag + 1.0) + 2e-6 * (1.0 + fabs(want));
                    int ok = isnan(want) ? isnan(got) : !isnan(got) && fabs(got - want) <= tol;
                    if (!isnan(want) && !isnan(got) && tol > 0 && fabs(got - want) / tol > worst_dw)
                        worst_dw = fabs(got - want) / tol;
                    if (!ok && bad++ < 3)
                        fprintf(stderr, "  b %zu c %zu (%zu,%zu): %.9g want %.9g tol %g\n", b, c, oh, ow, got,
                                want, tol);
                }
    CHECK_MSG(bad == 0, "dw %s c %zu h %zu w %zu %zux%zu s %zu d %zu pads %zu,%zu,%zu,%zu act %d bias %d res %d%s nan %d",
              nnf_isa_name(isa), s.c, s.h, s.w, s.kh, s.kw, s.sh, s.dh, q->pt, q->pl, q->pb, q->pr, q->act.kind,
              q->bias, q->res, q->res_after ? " after" : "", q->nan);
done:
    nnf_nchwc_dw_destroy(k);
    free(x), free(w), free(bias), free(r), free(xb), free(rb), free(y1), free(y2);
    return bad;
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
    /* MobileNet's shape class at a width with every interior tile size (8, 4, 1) */
    dw_case mb = {.c = 32, .h = 14, .w = 23, .k_h = 3, .k_w = 3, .s = 1, .d = 1, .pt = 1, .pl = 1, .pb = 1,
                  .pr = 1, .act = {NNF_ACT_CLIP, 0.0f, 6.0f}, .bias = 1};
    run_dw(&mb, isa);
    mb.s = 2;
    run_dw(&mb, isa);
    /* NaN in the input reaches exactly the outputs whose window holds it */
    static const nnf_act_kind nan_acts[] = {NNF_ACT_NONE, NNF_ACT_RELU, NNF_ACT_CLIP, NNF_ACT_SILU};
    for (size_t a = 0; a < 4; a++) {
        dw_case q = {.c = 17, .h = 7, .w = 21, .k_h = 3, .k_w = 3, .s = 1 + a % 2, .d = 1, .pt = 1, .pl = 1,
                     .pb = 1, .pr = 1, .act = {nan_acts[a], 0.0f, 6.0f}, .bias = 1, .nan = 1};
        run_dw(&q, isa);
    }
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

static void run_pool(const pool_case *q, nnf_isa isa) {
    nnf_nchwc_pool_shape s = {.n = 2, .c = q->c, .h = q->h, .w = q->w, .kh = q->k, .kw = q->k, .sh = q->s,
                              .sw = q->s, .dh = q->d, .dw = q->d, .pt = q->p, .pl = q->p, .pb = q->p, .pr = q->p,
                              .is_max = q->is_max, .count_include_pad = q->cip};
    s.oh = pool_out(q->h, q->k, q->s, q->d, q->p, q->p, (int)q->ceil);
    s.ow = pool_out(q->w, q->k, q->s, q->d, q->p, q->p, (int)q->ceil);
    size_t cb = nnf_nchwc_blocks(s.c), ihw = s.h * s.w, ohw = s.oh * s.ow;
    float *x = check_rand_buf(s.n * s.c * ihw), *xb = nan_buf(s.n * cb * 8 * ihw);
    float *y1 = nan_buf(s.n * cb * 8 * ohw), *y2 = nan_buf(s.n * cb * 8 * ohw);
    x[ihw + 2] = NAN; /* image 0, channel 1: NaN stays only where it is a window's first tap */
    nnf_nchwc_from_nchw(x, xb, s.n, s.c, ihw, NNF_ISA_SCALAR, NULL);
    nnf_nchwc_pool(&s, xb, y1, isa, NULL);
    nnf_nchwc_pool(&s, xb, y2, isa, pool2);
    CHECK(memcmp(y1, y2, s.n * cb * 8 * ohw * sizeof(float)) == 0);
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
                    float acc = q->is_max ? -INFINITY : 0.0f;
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
                            if (!q->is_max)
                                acc += v;
                            else if (first || v > acc)
                                acc = v;
                            first = 0;
                        }
                    float want = acc;
                    if (!q->is_max) {
                        size_t div = q->cip ? padded : count;
                        want = div ? acc / (float)div : 0.0f;
                    }
                    int ok = isnan(want) ? isnan(got)
                                         : q->is_max ? got == want : fabsf(got - want) <= 1e-6f * (1 + fabsf(want));
                    if (!ok && bad++ < 3)
                        fprintf(stderr, "  b %zu c %zu (%zu,%zu): %.9g want %.9g\n", b, c, oh, ow, got, want);
                }
    CHECK_MSG(bad == 0, "pool %s %s c %zu %zux%zu k %zu s %zu d %zu p %zu ceil %zu cip %d", nnf_isa_name(isa),
              q->is_max ? "max" : "avg", s.c, s.h, s.w, q->k, q->s, q->d, q->p, q->ceil, q->cip);
    free(x), free(xb), free(y1), free(y2);
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

static void test_global(nnf_isa isa) {
    static const size_t cs[] = {1, 7, 8, 9, 17}, hws[] = {1, 49, 61};
    for (size_t ci = 0; ci < 5; ci++)
        for (size_t hi = 0; hi < 3; hi++)
            for (int is_max = 0; is_max <= 1; is_max++) {
                size_t n = 2, c = cs[ci], hw = hws[hi], cb = nnf_nchwc_blocks(c);
                float *x = check_rand_buf(n * c * hw), *xb = nan_buf(n * cb * 8 * hw);
                float *y1 = nan_buf(n * c), *y2 = nan_buf(n * c);
                if (is_max && hw > 1)
                    x[hw / 2] = NAN; /* the reference's global max skips NaN */
                nnf_nchwc_from_nchw(x, xb, n, c, hw, NNF_ISA_SCALAR, NULL);
                nnf_nchwc_global_pool(xb, y1, n, c, hw, is_max, isa, NULL);
                nnf_nchwc_global_pool(xb, y2, n, c, hw, is_max, isa, pool2);
                CHECK(memcmp(y1, y2, n * c * sizeof(float)) == 0);
                int bad = 0;
                for (size_t i = 0; i < n * c; i++) {
                    double acc = 0;
                    float m = -INFINITY;
                    for (size_t p = 0; p < hw; p++) {
                        acc += x[i * hw + p];
                        m = x[i * hw + p] > m ? x[i * hw + p] : m;
                    }
                    float want = is_max ? m : (float)(acc / (double)hw);
                    bad += is_max ? y1[i] != want : fabsf(y1[i] - want) > 1e-7f;
                }
                CHECK_MSG(bad == 0, "global %s %s c %zu hw %zu: %d wrong", nnf_isa_name(isa), is_max ? "max" : "avg",
                          c, hw, bad);
                free(x), free(xb), free(y1), free(y2);
            }
}

static void test_resize(nnf_isa isa) {
    static const size_t dims[][4] = {{5, 6, 10, 12}, {7, 3, 5, 11}, {1, 1, 3, 2}, {6, 9, 6, 9}};
    for (size_t di = 0; di < 4; di++)
        for (size_t c = 3; c <= 17; c += 7) {
            size_t n = 2, ih = dims[di][0], iw = dims[di][1], oh = dims[di][2], ow = dims[di][3];
            size_t cb = nnf_nchwc_blocks(c);
            int32_t *rows = malloc(oh * sizeof *rows), *cols = malloc(ow * sizeof *cols);
            for (size_t i = 0; i < oh; i++) /* 2x tables where the sizes say so, else odd ones */
                rows[i] = oh == 2 * ih ? (int32_t)(i / 2) : (int32_t)((i * 7 + 3) % ih);
            for (size_t j = 0; j < ow; j++)
                cols[j] = ow == 2 * iw ? (int32_t)(j / 2) : (int32_t)((j * 5 + 1) % iw);
            float *x = check_rand_buf(n * c * ih * iw), *xb = nan_buf(n * cb * 8 * ih * iw);
            float *y1 = nan_buf(n * cb * 8 * oh * ow), *y2 = nan_buf(n * cb * 8 * oh * ow);
            nnf_nchwc_from_nchw(x, xb, n, c, ih * iw, NNF_ISA_SCALAR, NULL);
            nnf_nchwc_resize_nearest(xb, y1, n, c, ih, iw, oh, ow, rows, cols, isa, NULL);
            nnf_nchwc_resize_nearest(xb, y2, n, c, ih, iw, oh, ow, rows, cols, isa, pool2);
            CHECK(memcmp(y1, y2, n * cb * 8 * oh * ow * sizeof(float)) == 0);
            int bad = 0;
            for (size_t b = 0; b < n; b++)
                for (size_t k = 0; k < cb * 8; k++)
                    for (size_t i = 0; i < oh; i++)
                        for (size_t j = 0; j < ow; j++) {
                            float got = y1[blk_at(b, k, i * ow + j, cb, oh * ow)];
                            if (k >= c)
                                bad += !bits_zero(got);
                            else
                                bad += got != x[((b * c + k) * ih + (size_t)rows[i]) * iw + (size_t)cols[j]];
                        }
            CHECK_MSG(bad == 0, "resize %s c %zu %zux%zu -> %zux%zu: %d wrong", nnf_isa_name(isa), c, ih, iw, oh,
                      ow, bad);
            free(rows), free(cols), free(x), free(xb), free(y1), free(y2);
        }
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
    }
    printf("depthwise: worst |error| / tolerance %.3g\n", worst_dw);
    nnf_threadpool_destroy(pool2);
    TEST_MAIN_END();
}

/* Optimised convolutions (1x1 GEMM, implicit-im2col GEMM, depthwise) against
 * a double-precision oracle on every tier this machine has, and the Conv plan
 * against the reference kernel. Tolerance as in test_gemm.c:
 * K * 2^-22 * sum|w x| with K = IC/group * KH * KW, plus the epilogue's. */
#include "base/cpu.h"
#include "base/threadpool.h"
#include "kernels/conv3d.h"
#include "kernels/conv_fast.h"
#include "plan/kernels.h"

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

static nnf_conv2d_shape shape(size_t n, size_t c, size_t h, size_t w, size_t oc, size_t g, size_t kh,
                              size_t kw, size_t s, size_t d, size_t pt, size_t pl, size_t pb, size_t pr) {
    nnf_conv2d_shape sh = {.n = n, .c = c, .h = h, .w = w, .oc = oc, .group = g, .kh = kh, .kw = kw,
                           .sh = s, .sw = s, .dh = d, .dw = d, .pt = pt, .pl = pl};
    sh.oh = out_dim(h, kh, s, d, pt, pb);
    sh.ow = out_dim(w, kw, s, d, pl, pr);
    return sh;
}

static double worst_ratio; /* largest |error| / tolerance seen by run_conv */
static nnf_conv_algo force_algo; /* set: run this algorithm whatever selection says */
static int force_dw = -1;        /* >= 0: run this nnf_dw_kernel for DEPTHWISE */

/* The epilogue of a test conv: act (NULL: none), the bias b if use_bias,
 * the residual r before (use_res 1) or after (2) the activation. */
static nnf_epilogue conv_ep(const nnf_activation *act, const float *b, int use_bias, const float *r,
                            int use_res) {
    nnf_epilogue ep = nnf_epilogue_default();
    if (act)
        ep.act = *act;
    if (use_bias) {
        ep.bias_kind = NNF_BIAS_PER_ROW;
        ep.bias = b;
    }
    if (use_res) {
        ep.residual = r;
        ep.residual_after_act = use_res == 2;
    }
    return ep;
}

/* Runs the conv, compares with the oracle; 0 when everything is within
 * tolerance. use_res: 1 adds a residual before the activation, 2 after it. */
static int run_conv(const nnf_conv2d_shape *s, nnf_isa isa, const nnf_activation *act, int use_bias,
                    int use_res, nnf_threadpool *pool, nnf_conv_algo expect) {
    /* expect: run that algorithm (each is tested on shapes selection may
     * give to another; selection has its own checks); NONE: what selection says */
    nnf_conv_algo algo = force_algo ? force_algo : expect ? expect : nnf_conv_select(s, isa);
    size_t icg = s->c / s->group, ocg = s->oc / s->group, taps = s->kh * s->kw;
    size_t xn = s->n * s->c * s->h * s->w, yn = s->n * s->oc * s->oh * s->ow;
    float *x = check_rand_buf(xn), *w = check_rand_buf(s->oc * icg * taps), *b = check_rand_buf(s->oc);
    float *r = check_rand_buf(yn), *y = malloc(yn * sizeof(float));
    nnf_conv_kernel *k = NULL;
    int bad = 0;
    if (nnf_conv_kernel_create(s, algo, isa, w, &k) != NNF_OK)
        return 1;
    if (algo == NNF_CONV_ALGO_DEPTHWISE && force_dw >= 0)
        k->dw_kern = force_dw;
    nnf_epilogue ep = conv_ep(act, b, use_bias, r, use_res);
    if (nnf_conv_kernel_run(k, x, y, &ep, pool) != NNF_OK)
        bad++;
    wino_mag wm = {0};
    if (algo == NNF_CONV_ALGO_WINOGRAD)
        wino_mag_init(&wm, s, x, w);
    for (size_t bi = 0; bi < s->n && !bad; bi++)
        for (size_t o = 0; o < s->oc && bad < 3; o++) {
            size_t g = o / ocg;
            for (size_t oh = 0; oh < s->oh; oh++)
                for (size_t ow = 0; ow < s->ow; ow++) {
                    double acc = 0, mag = 0;
                    for (size_t ic = 0; ic < icg; ic++)
                        for (size_t i = 0; i < s->kh; i++)
                            for (size_t j = 0; j < s->kw; j++) {
                                ptrdiff_t ih = (ptrdiff_t)(oh * s->sh + i * s->dh) - (ptrdiff_t)s->pt;
                                ptrdiff_t iw = (ptrdiff_t)(ow * s->sw + j * s->dw) - (ptrdiff_t)s->pl;
                                if (ih < 0 || iw < 0 || ih >= (ptrdiff_t)s->h || iw >= (ptrdiff_t)s->w)
                                    continue;
                                double xv = x[((bi * s->c + g * icg + ic) * s->h + (size_t)ih) * s->w + (size_t)iw];
                                double wv = w[(o * icg + ic) * taps + i * s->kw + j];
                                acc += xv * wv;
                                mag += fabs(xv * wv);
                            }
                    size_t yi = ((bi * s->oc + o) * s->oh + oh) * s->ow + ow;
                    double extra = 0;
                    if (use_bias)
                        acc += b[o], extra += fabs(b[o]);
                    if (use_res == 1)
                        acc += r[yi], extra += fabs(r[yi]);
                    double want = act ? (double)nnf_act_apply(act, (float)acc) : acc;
                    if (use_res == 2)
                        want += r[yi], extra += fabs(r[yi]);
                    double tol = (double)(icg * taps) * ldexp(1.0, -22) * mag;
                    if (algo == NNF_CONV_ALGO_WINOGRAD)
                        tol = (double)(icg + 16) * ldexp(1.0, -22) * wino_mag_at(&wm, s, bi, o, oh, ow);
                    tol += ldexp(1.0, -20) * (extra + fabs(want));
                    tol = 1.2 * tol + 4e-7 * (1.0 + fabs(acc));
                    if (fabs(y[yi] - want) / tol > worst_ratio)
                        worst_ratio = fabs(y[yi] - want) / tol;
                    if (!(fabs(y[yi] - want) <= tol)) {
                        fprintf(stderr, "%s: y[%zu,%zu,%zu,%zu] = %.9g want %.9g (tol %.3g)\n", k->name,
                                bi, o, oh, ow, y[yi], want, tol);
                        bad++;
                        break;
                    }
                }
        }
    nnf_conv_kernel_destroy(k);
    free(wm.u);
    free(wm.v);
    free(x);
    free(w);
    free(b);
    free(r);
    free(y);
    return bad;
}

static void test_tier(nnf_isa isa) {
    const nnf_activation relu = {NNF_ACT_RELU, 0, 0}, silu = {NNF_ACT_SILU, 0, 0},
                         relu6 = {NNF_ACT_CLIP, 0, 6}, hsw = {NNF_ACT_HARD_SWISH, 0, 0};
    const char *t = nnf_isa_name(isa);
    /* 1x1 stride 1: GEMM on NCHW directly */
    size_t cs[] = {1, 2, 7, 13, 31};
    size_t hws[] = {1, 2, 7, 13, 17};
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 5; j++) {
            nnf_conv2d_shape s = shape(1 + (i & 1), cs[i], hws[j], hws[(j + 1) % 5], cs[(i + 2) % 5] * 3, 1, 1, 1, 1, 1, 0, 0, 0, 0);
            CHECK_MSG(run_conv(&s, isa, &relu, 1, (int)(j & 1), NULL, NNF_CONV_ALGO_GEMM_1X1) == 0,
                      "%s 1x1 c=%zu hw=%zux%zu", t, s.c, s.h, s.w);
        }
    /* general: strides, pads (asymmetric), dilation, groups, 1-D */
    struct {
        size_t n, c, h, w, oc, g, kh, kw, s, d, pt, pl, pb, pr;
    } gen[] = {
        {1, 3, 13, 13, 8, 1, 3, 3, 1, 1, 1, 1, 1, 1},   {2, 5, 9, 11, 7, 1, 3, 3, 2, 1, 1, 1, 1, 1},
        {1, 4, 17, 15, 6, 1, 5, 5, 1, 1, 2, 2, 2, 2},   {1, 3, 23, 23, 16, 1, 7, 7, 2, 1, 3, 3, 3, 3},
        {1, 6, 12, 12, 6, 1, 3, 3, 1, 2, 2, 2, 2, 2},   {1, 8, 10, 9, 12, 4, 3, 3, 1, 1, 1, 1, 1, 1},
        {1, 6, 11, 11, 4, 2, 3, 3, 2, 1, 0, 1, 1, 0},   {1, 16, 8, 8, 32, 1, 1, 1, 2, 1, 0, 0, 0, 0},
        {1, 5, 1, 37, 9, 1, 1, 3, 1, 1, 0, 1, 0, 1},    {1, 33, 7, 7, 40, 1, 3, 3, 1, 1, 1, 1, 1, 1},
        {1, 8, 6, 6, 8, 8, 3, 3, 1, 2, 2, 2, 2, 2},     {1, 8, 9, 9, 16, 8, 3, 3, 1, 1, 1, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof gen / sizeof gen[0]; i++) {
        nnf_conv2d_shape s = shape(gen[i].n, gen[i].c, gen[i].h, gen[i].w, gen[i].oc, gen[i].g, gen[i].kh,
                                   gen[i].kw, gen[i].s, gen[i].d, gen[i].pt, gen[i].pl, gen[i].pb, gen[i].pr);
        CHECK_MSG(run_conv(&s, isa, i & 1 ? &silu : NULL, (int)(i % 3 != 0), (int)(i % 4 == 1), NULL,
                           NNF_CONV_ALGO_IM2COL) == 0,
                  "%s general case %zu", t, i);
    }
    /* depthwise 3x3/5x5, stride 1/2, widths around the 16-wide step */
    size_t ws[] = {1, 2, 7, 13, 16, 17, 31, 33};
    for (size_t k = 3; k <= 5; k += 2)
        for (size_t st = 1; st <= 2; st++)
            for (size_t wi = 0; wi < sizeof ws / sizeof ws[0]; wi++) {
                size_t p = k / 2 - (wi & 1 && k == 5 ? 1 : 0);
                if (ws[wi] + 2 * p < k)
                    continue;
                nnf_conv2d_shape s = shape(1 + (wi & 1), 3 + wi, ws[(wi + 3) % 8] + 4, ws[wi], 3 + wi, 3 + wi, k, k,
                                           st, 1, p, p, p, p);
                CHECK_MSG(run_conv(&s, isa, wi & 2 ? &relu6 : &hsw, (int)(wi & 1), (int)(wi % 3 == 0), NULL,
                                   NNF_CONV_ALGO_DEPTHWISE) == 0,
                          "%s dw %zux%zu s%zu w=%zu", t, k, k, st, ws[wi]);
            }
    /* depthwise small planes (8 channels per vector on AVX2): channel counts
     * around 8, 3x3/5x5, strides 1/2, windows at the stack buffer's limit,
     * clamp (vector) and SiLU (scalar) epilogues, residual, batch 2 */
    size_t sc[] = {1, 7, 8, 9, 17, 960};
    size_t sw[] = {1, 3, 7, 14, 15, 28};
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++)
        for (size_t k = 3; k <= 5; k += 2)
            for (size_t st = 1; st <= 2; st++) {
                size_t p = k / 2, hh = sw[(i + k) % 6], ww = sw[i];
                if (hh + 2 * p - (i % 3 == 2) < k)
                    continue;
                nnf_conv2d_shape s = shape(1 + (i & 1), sc[i], hh, ww, sc[i], sc[i], k, k, st, 1, p, p,
                                           p - (i % 3 == 2), p);
                CHECK_MSG(run_conv(&s, isa, i % 3 ? &relu6 : &silu, (int)((i + k) & 1), (int)((i + st) % 2),
                                   NULL, NNF_CONV_ALGO_DEPTHWISE) == 0,
                          "%s dw small c=%zu %zux%zu k%zu s%zu", t, sc[i], hh, ww, k, st);
            }
    /* the channel-interleaved depthwise kernel at the widths it takes (up
     * to 32 out) and just past them: row tiles of the stack buffer, 8x8
     * transposes with column and channel tails, clamp (vector) and SiLU
     * (scalar) epilogues, residual, batch 2 */
    size_t cw[] = {1, 7, 13, 14, 15, 16, 17, 28, 32, 33, 56};
    size_t cc[] = {1, 7, 8, 9, 17};
    for (size_t wi = 0; wi < sizeof cw / sizeof cw[0]; wi++)
        for (size_t k = 3; k <= 5; k += 2)
            for (size_t st = 1; st <= 2; st++) {
                size_t c = cc[(wi + k + st) % 5], p = k / 2, hh = cw[(wi + 5) % 11];
                size_t pb = p - (wi % 3 == 2);
                if (cw[wi] + 2 * p < k || hh + p + pb < k)
                    continue;
                nnf_conv2d_shape s = shape(1 + (wi & 1), c, hh, cw[wi], c, c, k, k, st, 1, p, p, pb, p);
                CHECK_MSG(run_conv(&s, isa, wi % 4 == 3 ? &silu : &relu6, (int)((wi + st) & 1),
                                   (int)((wi + k) % 2), NULL, NNF_CONV_ALGO_DEPTHWISE) == 0,
                          "%s dw c8 c=%zu %zux%zu k%zu s%zu", t, c, hh, cw[wi], k, st);
            }
    /* widths around the packer's 8-lane groups and the 16-wide panels,
     * strides 1 and 2, every clamp-only epilogue (the fast path) and a
     * residual; depthwise with the same epilogues */
    const nnf_activation none = {NNF_ACT_NONE, 0, 0};
    const nnf_activation *clamps[3] = {&none, &relu, &relu6};
    size_t ew[] = {7, 8, 9, 15, 16, 17, 23, 24, 25};
    for (size_t wi = 0; wi < sizeof ew / sizeof ew[0]; wi++)
        for (size_t st = 1; st <= 2; st++) {
            nnf_conv2d_shape s = shape(1, 5, 6, ew[wi], 7, 1, 3, 3, st, 1, 1, 1, 1, 1);
            CHECK_MSG(run_conv(&s, isa, clamps[wi % 3], (int)(wi & 1), (int)(st == 1 || wi % 3 == 0), NULL,
                               NNF_CONV_ALGO_IM2COL) == 0,
                      "%s im2col w=%zu s%zu", t, ew[wi], st);
            nnf_conv2d_shape d = shape(1, 4, 5, ew[wi], 4, 4, 3, 3, st, 1, 1, 1, 1, 1);
            CHECK_MSG(run_conv(&d, isa, clamps[(wi + st) % 3], (int)(wi & 1), (int)(wi % 2 == 0), NULL,
                               NNF_CONV_ALGO_DEPTHWISE) == 0,
                      "%s dw clamp epilogue w=%zu s%zu", t, ew[wi], st);
            nnf_conv2d_shape p1 = shape(1, 3 + wi, 2, ew[wi], 2 * wi + 1, 1, 1, 1, 1, 1, 0, 0, 0, 0);
            CHECK_MSG(run_conv(&p1, isa, clamps[(wi + st) % 3], (int)(st & 1), 1, NULL,
                               NNF_CONV_ALGO_GEMM_1X1) == 0,
                      "%s 1x1 residual w=%zu", t, ew[wi]);
        }
    /* the residual after the activation (YOLOv5's bottleneck: x + SiLU(conv))
     * on every algorithm, odd sizes, ReLU (clamp fast path refused) and SiLU */
    {
        nnf_conv2d_shape ra[] = {
            shape(1, 13, 7, 9, 11, 1, 1, 1, 1, 1, 0, 0, 0, 0),  shape(2, 5, 9, 11, 7, 1, 3, 3, 1, 1, 1, 1, 1, 1),
            shape(1, 16, 13, 13, 24, 1, 3, 3, 2, 1, 1, 1, 1, 1), shape(1, 9, 17, 13, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1),
            shape(1, 9, 7, 7, 9, 9, 5, 5, 2, 1, 2, 2, 2, 2),     shape(1, 33, 13, 13, 19, 1, 3, 3, 1, 1, 1, 1, 1, 1)};
        nnf_conv_algo aa[] = {NNF_CONV_ALGO_GEMM_1X1, NNF_CONV_ALGO_IM2COL, NNF_CONV_ALGO_STRIDED,
                              NNF_CONV_ALGO_DEPTHWISE, NNF_CONV_ALGO_DEPTHWISE, NNF_CONV_ALGO_WINOGRAD};
        for (size_t i = 0; i < sizeof ra / sizeof ra[0]; i++)
            for (int a = 0; a < 2; a++) {
                if (aa[i] == NNF_CONV_ALGO_WINOGRAD && isa < NNF_ISA_AVX2)
                    continue;
                CHECK_MSG(run_conv(&ra[i], isa, a ? &silu : &relu, (int)(i & 1), 2, NULL, aa[i]) == 0,
                          "%s residual after act, case %zu, %s", t, i, a ? "SiLU" : "ReLU");
            }
    }
    /* real layers: ResNet-50 3x3 and 1x1, MobileNetV2 depthwise, YOLOv5s stem */
    nnf_conv2d_shape r1 = shape(1, 64, 28, 28, 64, 1, 3, 3, 1, 1, 1, 1, 1, 1);
    CHECK_MSG(run_conv(&r1, isa, &relu, 1, 1, NULL,
                       isa >= NNF_ISA_AVX2 ? NNF_CONV_ALGO_WINOGRAD : NNF_CONV_ALGO_IM2COL) == 0,
              "%s resnet 3x3", t);
    nnf_conv2d_shape r0 = shape(1, 3, 224, 224, 64, 1, 7, 7, 2, 1, 3, 3, 3, 3);
    CHECK_MSG(run_conv(&r0, isa, &relu, 1, 0, NULL, NNF_CONV_ALGO_IM2COL) == 0, "%s resnet conv1", t);
    nnf_conv2d_shape r3 = shape(1, 64, 56, 56, 256, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    CHECK_MSG(run_conv(&r3, isa, &relu, 1, 1, NULL, NNF_CONV_ALGO_GEMM_1X1) == 0, "%s resnet 1x1 + residual", t);
    nnf_conv2d_shape r2 = shape(1, 256, 14, 14, 64, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    CHECK_MSG(run_conv(&r2, isa, &relu, 1, 0, NULL, NNF_CONV_ALGO_GEMM_1X1) == 0, "%s resnet 1x1", t);
    nnf_conv2d_shape m1 = shape(1, 32, 56, 56, 32, 32, 3, 3, 2, 1, 1, 1, 1, 1);
    CHECK_MSG(run_conv(&m1, isa, &relu6, 1, 0, NULL, NNF_CONV_ALGO_DEPTHWISE) == 0, "%s mobilenet dw", t);
    nnf_conv2d_shape y1 = shape(1, 3, 64, 64, 16, 1, 6, 6, 2, 1, 2, 2, 2, 2);
    CHECK_MSG(run_conv(&y1, isa, &silu, 1, 0, NULL, NNF_CONV_ALGO_IM2COL) == 0, "%s yolo stem", t);
    /* Winograd F(4x4,3x3), forced, at awkward sizes: 1, 2, primes, 4-row and
     * 32-column (8-tile) edges +-1, channels around the GEMM tiles, every
     * padding the transforms see, batch 2, all epilogue kinds */
    if (isa >= NNF_ISA_AVX2) {
        size_t wh[] = {1, 2, 3, 4, 5, 7, 13, 31, 32, 33, 35, 37};
        size_t ch[] = {1, 5, 16, 17, 31};
        const nnf_activation *acts[5] = {&none, &relu, &relu6, &silu, &hsw};
        force_algo = NNF_CONV_ALGO_WINOGRAD;
        worst_ratio = 0;
        for (size_t i = 0; i < sizeof wh / sizeof wh[0]; i++)
            for (size_t pi = 0; pi < 3; pi++) {
                size_t p0 = pi == 0 ? 1 : pi == 1 ? 0 : 2, p1 = pi == 2 ? 0 : p0;
                size_t hh = wh[(i + 5) % 12], ww = wh[i];
                if (hh + p0 + p1 < 3 || ww + p0 + p1 < 3)
                    continue;
                nnf_conv2d_shape s = shape(1 + (i % 4 == 1), ch[i % 5], hh, ww, ch[(i + pi + 2) % 5], 1, 3, 3, 1,
                                           1, p0, p0, p1, p1);
                CHECK_MSG(run_conv(&s, isa, acts[(i + pi) % 5], (int)((i + pi) & 1), (int)(i % 3 != 1), NULL,
                                   NNF_CONV_ALGO_WINOGRAD) == 0,
                          "%s winograd c=%zu oc=%zu %zux%zu pad %zu/%zu", t, s.c, s.oc, hh, ww, p0, p1);
            }
        force_algo = NNF_CONV_ALGO_NONE;
        /* real layers through selection: ResNet-50 layer 1 / 3, YOLOv5s (half size) */
        nnf_conv2d_shape wr1 = shape(1, 64, 56, 56, 64, 1, 3, 3, 1, 1, 1, 1, 1, 1);
        CHECK_MSG(run_conv(&wr1, isa, &relu, 1, 0, NULL, NNF_CONV_ALGO_WINOGRAD) == 0, "%s winograd r50 l1", t);
        nnf_conv2d_shape wr3 = shape(1, 256, 14, 14, 256, 1, 3, 3, 1, 1, 1, 1, 1, 1);
        CHECK_MSG(run_conv(&wr3, isa, &relu, 1, 1, NULL, NNF_CONV_ALGO_NONE) == 0, "%s r50 l3", t);
        /* many channels: blocks of 32 tiles cut the 12-tile rows */
        nnf_conv2d_shape wc = shape(2, 160, 10, 45, 160, 1, 3, 3, 1, 1, 1, 1, 1, 1);
        CHECK_MSG(run_conv(&wc, isa, &relu6, 1, 1, NULL, NNF_CONV_ALGO_WINOGRAD) == 0, "%s winograd cut rows", t);
        nnf_conv2d_shape wy = shape(1, 32, 80, 80, 32, 1, 3, 3, 1, 1, 1, 1, 1, 1);
        CHECK_MSG(run_conv(&wy, isa, &silu, 1, 1, NULL, NNF_CONV_ALGO_WINOGRAD) == 0, "%s winograd yolo", t);
        printf("%s winograd: worst error / bound %.3g\n", t, worst_ratio);
        /* The bound above is worst case (every rounding aligned); measured
         * errors sit near 0.005 of it. A transform coefficient off by 1e-5
         * relative still passes the bound (0.3 of it) but not this guard. */
        CHECK_MSG(worst_ratio < 0.05, "%s winograd error %.3g of the bound: a transform is off", t, worst_ratio);
    }
    /* ResNet-50 v1.5 downsampling: strided 1x1 (im2col) */
    nnf_conv2d_shape ds = shape(1, 256, 56, 56, 128, 1, 1, 1, 2, 1, 0, 0, 0, 0);
    CHECK_MSG(run_conv(&ds, isa, NULL, 1, 1, NULL, NNF_CONV_ALGO_NONE) == 0, "%s resnet downsample", t);
    /* ResNet-50 layer 4: 7x7, im2col (Winograd's tiles would be 60 % empty) */
    nnf_conv2d_shape l4 = shape(1, 512, 7, 7, 512, 1, 3, 3, 1, 1, 1, 1, 1, 1);
    CHECK_MSG(run_conv(&l4, isa, &relu, 1, 1, NULL, NNF_CONV_ALGO_NONE) == 0, "%s resnet l4 3x3", t);
    /* threads: same bits for 1 and 3 threads (im2col and depthwise) */
    nnf_threadpool *pool = NULL;
    CHECK(nnf_threadpool_create(3, &pool) == NNF_OK);
    CHECK_MSG(run_conv(&r1, isa, &relu, 1, 1, pool, NNF_CONV_ALGO_NONE) == 0, "%s threaded resnet", t);
    CHECK_MSG(run_conv(&m1, isa, &relu6, 1, 1, pool, NNF_CONV_ALGO_DEPTHWISE) == 0, "%s threaded dw", t);
    nnf_conv2d_shape m14 = shape(2, 75, 14, 14, 75, 75, 3, 3, 1, 1, 1, 1, 1, 1);
    CHECK_MSG(run_conv(&m14, isa, &relu6, 1, 1, pool, NNF_CONV_ALGO_DEPTHWISE) == 0, "%s threaded dw 14x14", t);
    nnf_conv2d_shape m7 = shape(1, 100, 7, 7, 100, 100, 3, 3, 1, 1, 1, 1, 1, 1);
    CHECK_MSG(run_conv(&m7, isa, &relu6, 1, 1, pool, NNF_CONV_ALGO_DEPTHWISE) == 0, "%s threaded dw 7x7", t);
    if (isa >= NNF_ISA_AVX2) {
        /* Winograd cut across output channels (few tiles, 3 threads): 183
         * rows end in balanced tail panels, which the last part's view must
         * count from its own first row (the soak's seed 1 found it: rows
         * from 96 wrong or never written on 2 threads) */
        nnf_conv2d_shape wp = shape(1, 10, 23, 10, 183, 1, 3, 3, 1, 1, 1, 3, 1, 0);
        CHECK_MSG(run_conv(&wp, isa, &relu, 1, 1, pool, NNF_CONV_ALGO_WINOGRAD) == 0, "%s threaded winograd parts",
                  t);
        nnf_conv2d_shape wq = shape(1, 16, 8, 8, 520, 1, 3, 3, 1, 1, 1, 1, 1, 1);
        CHECK_MSG(run_conv(&wq, isa, &none, 0, 0, pool, NNF_CONV_ALGO_WINOGRAD) == 0, "%s threaded winograd 520", t);
    }
    for (int algo = 0; algo < 3; algo++) {
        nnf_conv2d_shape s = algo == 2 ? m7 : algo ? m1 : r1;
        size_t xn = s.n * s.c * s.h * s.w, yn = s.n * s.oc * s.oh * s.ow;
        float *x = check_rand_buf(xn), *w = check_rand_buf(s.oc * s.c / s.group * s.kh * s.kw);
        float *y1b = malloc(yn * sizeof(float)), *y3 = malloc(yn * sizeof(float));
        nnf_conv_kernel *k = NULL;
        CHECK(nnf_conv_kernel_create(&s, nnf_conv_select(&s, isa), isa, w, &k) == NNF_OK);
        nnf_epilogue ep = nnf_epilogue_default();
        ep.act = silu;
        CHECK(nnf_conv_kernel_run(k, x, y1b, &ep, NULL) == NNF_OK);
        CHECK(nnf_conv_kernel_run(k, x, y3, &ep, pool) == NNF_OK);
        CHECK_MSG(!memcmp(y1b, y3, yn * sizeof(float)), "%s %s: threads change bits", t, k->name);
        nnf_conv_kernel_destroy(k);
        free(x);
        free(w);
        free(y1b);
        free(y3);
    }
    nnf_threadpool_destroy(pool);
}

/* Every depthwise kernel the tier has, forced, against the oracle: every
 * MobileNetV2 depthwise shape (narrowed to a few channels where the plane
 * count does not matter), ConvNeXt's 7x7s, output widths 1, 2, 7, 31, 33,
 * 57 and the 128-column strip edge, strides 1/2, pads 0/1 (and
 * asymmetric; 3 for the 7x7s), 3x3, 5x5 and 7x7, channels 1 and 13, fused
 * Clip (ReLU6) and ReLU, a residual, SiLU (the generic epilogue), batch
 * 2. */
static void test_depthwise_kernels(nnf_isa isa) {
    const nnf_activation relu = {NNF_ACT_RELU, 0, 0}, relu6 = {NNF_ACT_CLIP, 0, 6},
                         silu = {NNF_ACT_SILU, 0, 0}, none = {NNF_ACT_NONE, 0, 0};
    const nnf_activation *acts[4] = {&relu6, &relu, &silu, &none};
    const char *t = nnf_isa_name(isa);
    int kerns[5] = {NNF_DW_PLANE_SCALAR, NNF_DW_PLANE_AVX2, NNF_DW_C8_AVX2, NNF_DW_ANY_AVX2,
                    NNF_DW_PLANE_AVX512};
    int nk = isa >= NNF_ISA_AVX512 ? 5 : isa >= NNF_ISA_AVX2 ? 4 : 1;
    /* MobileNetV2 (3x3) and ConvNeXt-T (7x7): channels, input size, stride, kernel */
    size_t mb[][4] = {{32, 112, 1, 3}, {96, 112, 2, 3}, {144, 56, 1, 3}, {144, 56, 2, 3},
                      {192, 28, 1, 3}, {192, 28, 2, 3}, {384, 14, 1, 3}, {576, 14, 1, 3},
                      {576, 14, 2, 3}, {960, 7, 1, 3},  {96, 56, 1, 7},  {192, 28, 1, 7},
                      {384, 14, 1, 7}, {768, 7, 1, 7}};
    for (int ki = 0; ki < nk; ki++) {
        force_dw = kerns[ki];
        for (size_t i = 0; i < sizeof mb / sizeof mb[0]; i++) {
            size_t c = mb[i][1] >= 56 ? 5 : mb[i][0], k = mb[i][3], p = k / 2;
            nnf_conv2d_shape s =
                shape(1, c, mb[i][1], mb[i][1], c, c, k, k, mb[i][2], 1, p, p, p, p);
            if (kerns[ki] == NNF_DW_C8_AVX2 && ((s.ow - 1) * s.sw + k) * k > NNF_DW_C8_MAX)
                continue;
            if (kerns[ki] == NNF_DW_C8_AVX2 && s.ow > 32)
                continue; /* its stack buffer holds rows up to 32 outputs wide (stride 2) */
            CHECK_MSG(run_conv(&s, isa, &relu6, 1, (int)(i % 3 == 2), NULL, NNF_CONV_ALGO_DEPTHWISE) == 0,
                      "%s dw kernel %d mbv2 c=%zu %zu s%zu", t, kerns[ki], c, mb[i][1], mb[i][2]);
        }
        size_t ows[] = {1, 2, 7, 31, 33, 57, 128, 129};
        size_t chs[] = {1, 13};
        for (size_t wi = 0; wi < sizeof ows / sizeof ows[0]; wi++)
            for (size_t k = 3; k <= 7; k += 2)
                for (size_t st = 1; st <= 2; st++)
                    for (size_t p = 0; p <= (k == 7 ? 3 : 1); p += (k == 7 ? 3 : 1)) {
                        /* input width giving ows[wi] outputs: (w + 2p - k) / st + 1 */
                        size_t w = (ows[wi] - 1) * st + k - 2 * p + (wi & 1 ? st - 1 : 0);
                        size_t h = (wi * 3 + k + st + p) % 9 + k, c = chs[(wi + k + p) % 2];
                        size_t pb = p + (wi % 3 == 1), pr = p;
                        nnf_conv2d_shape s = shape(1 + (wi + p) % 2, c, h, w, c, c, k, k, st, 1, p, p, pb, pr);
                        if (kerns[ki] == NNF_DW_C8_AVX2 &&
                            ((s.ow - 1) * st + k) * k > NNF_DW_C8_MAX)
                            continue;
                        size_t ai = (wi + k + st + p) % 4;
                        CHECK_MSG(run_conv(&s, isa, acts[ai], (int)((wi + p) & 1), (int)((wi + st) % 3 == 0), NULL,
                                           NNF_CONV_ALGO_DEPTHWISE) == 0,
                                  "%s dw kernel %d c=%zu %zux%zu k%zu s%zu p%zu ow=%zu", t, kerns[ki], c, h, w, k,
                                  st, p, s.ow);
                    }
    }
    /* any window (the scalar kernel and nnf_dw_any_avx2): 1-D rows (a
     * Conformer's k31, a causal k4, a strided k10), 7x7, 3x5 dilated 2,
     * stride 3, asymmetric padding past the kernel, output widths around
     * the 8-lane vectors, all four epilogue forms */
    static const size_t anys[][12] = {
        /* c, h, w, kh, kw, s, d, pt, pl, pb, pr, n */
        {7, 1, 61, 1, 31, 1, 1, 0, 15, 0, 15, 1}, {3, 1, 40, 1, 4, 1, 1, 0, 3, 0, 0, 2},
        {5, 1, 163, 1, 10, 5, 1, 0, 0, 0, 0, 1},  {4, 13, 17, 7, 7, 1, 1, 3, 3, 3, 3, 1},
        {3, 11, 23, 3, 5, 1, 2, 2, 4, 1, 3, 2},   {2, 19, 29, 3, 3, 3, 1, 1, 1, 1, 1, 1},
        {3, 6, 9, 5, 5, 1, 1, 6, 7, 6, 7, 1},     {5, 1, 1, 1, 3, 1, 1, 0, 1, 0, 1, 1},
        {2, 4, 8, 2, 2, 2, 1, 0, 0, 0, 0, 1},     {9, 1, 16, 1, 9, 1, 1, 0, 4, 0, 4, 1},
    };
    int akerns[2] = {NNF_DW_PLANE_SCALAR, NNF_DW_ANY_AVX2};
    for (int ki = 0; ki < (isa >= NNF_ISA_AVX2 ? 2 : 1); ki++) {
        force_dw = akerns[ki];
        for (size_t i = 0; i < sizeof anys / sizeof anys[0]; i++) {
            const size_t *a = anys[i];
            nnf_conv2d_shape s = shape(a[11], a[0], a[1], a[2], a[0], a[0], a[3], a[4], a[5], a[6],
                                       a[7], a[8], a[9], a[10]);
            s.kh = a[3];
            s.sh = a[1] == 1 ? 1 : a[5]; /* 1-D: one row, whatever the W stride */
            s.oh = out_dim(a[1], a[3], s.sh, a[6], a[7], a[9]);
            CHECK_MSG(run_conv(&s, isa, acts[i % 4], (int)(i & 1), (int)(i % 3), NULL,
                               NNF_CONV_ALGO_DEPTHWISE) == 0,
                      "%s dw any kernel %d case %zu", t, akerns[ki], i);
        }
    }
    force_dw = -1;
    /* selection is pure and picks what the tier has */
    nnf_conv2d_shape m = shape(1, 144, 56, 56, 144, 144, 3, 3, 2, 1, 1, 1, 1, 1);
    CHECK(nnf_dw_select(&m, NNF_ISA_SCALAR) == NNF_DW_PLANE_SCALAR);
    CHECK(nnf_dw_select(&m, NNF_ISA_AVX2) == NNF_DW_PLANE_AVX2);
    m = shape(1, 960, 7, 7, 960, 960, 3, 3, 1, 1, 1, 1, 1, 1);
    CHECK(nnf_dw_select(&m, NNF_ISA_AVX2) == NNF_DW_C8_AVX2);
    CHECK(nnf_dw_select(&m, NNF_ISA_SCALAR) == NNF_DW_PLANE_SCALAR);
    m = shape(1, 384, 14, 14, 384, 384, 3, 3, 1, 1, 1, 1, 1, 1);
    CHECK(nnf_dw_select(&m, NNF_ISA_AVX2) == NNF_DW_C8_AVX2);
    m = shape(1, 192, 28, 28, 192, 192, 3, 3, 2, 1, 1, 1, 1, 1);
    CHECK(nnf_dw_select(&m, NNF_ISA_AVX2) == NNF_DW_PLANE_AVX2);
    CHECK(nnf_dw_select(&m, NNF_ISA_AVX512) == NNF_DW_PLANE_AVX2);
    /* AVX-512: the 16-lane rows for every 7x7 and stride-1 rows past 8 */
    m = shape(1, 768, 7, 7, 768, 768, 7, 7, 1, 1, 3, 3, 3, 3);
    CHECK(nnf_dw_select(&m, NNF_ISA_AVX512) == NNF_DW_PLANE_AVX512);
    CHECK(nnf_dw_select(&m, NNF_ISA_AVX2) == NNF_DW_C8_AVX2);
    m = shape(1, 384, 14, 14, 384, 384, 3, 3, 1, 1, 1, 1, 1, 1);
    CHECK(nnf_dw_select(&m, NNF_ISA_AVX512) == NNF_DW_PLANE_AVX512);
    m = shape(1, 960, 7, 7, 960, 960, 3, 3, 1, 1, 1, 1, 1, 1);
    CHECK(nnf_dw_select(&m, NNF_ISA_AVX512) == NNF_DW_C8_AVX2);
}

/* 3-D convs (conv3d.h) against a double oracle: depth taps in the padding
 * (whole planes of zeros), strides and dilations per axis, groups, batch 2,
 * output planes around the 8-lane groups, bias + activation, a residual
 * before or after it, 1 and 2 threads. Tolerance as run_conv's. */
/* small_blocks: PLANES tasks of 3 register panels of columns (any L2 then
 * cuts the output into several blocks, the last partial) */
static int run_conv3d(const nnf_conv3d_shape *s, nnf_isa isa, const nnf_activation *act,
                      int use_res, nnf_threadpool *pool, bool small_blocks) {
    size_t icg = s->c / s->group, ocg = s->oc / s->group, taps = s->kd * s->kh * s->kw;
    size_t xn = s->n * s->c * s->d * s->h * s->w, yn = s->n * s->oc * s->od * s->oh * s->ow;
    float *x = check_rand_buf(xn), *w = check_rand_buf(s->oc * icg * taps),
          *b = check_rand_buf(s->oc);
    float *r = check_rand_buf(yn), *y = malloc(yn * sizeof(float));
    nnf_conv3d_kernel *k = NULL;
    int bad = 0;
    if (nnf_conv3d_kernel_create(s, isa, w, &k) != NNF_OK)
        return 1;
    /* PLANES where each input plane's im2col rows come in whole K blocks */
    bool planes = s->dd == 1 && icg * s->kh * s->kw % 8 == 0;
    if (k->by_planes != planes || !strstr(k->name, planes ? "planes" : "im2col")) {
        fprintf(stderr, "%s: the wrong form\n", k->name);
        bad++;
    }
    if (planes && small_blocks)
        k->block_cols = 3 * k->cfg->nr;
    nnf_epilogue ep = conv_ep(act, b, 1, r, use_res);
    if (nnf_conv3d_kernel_run(k, x, y, &ep, pool) != NNF_OK)
        bad++;
    size_t yi = 0;
    for (size_t bi = 0; bi < s->n; bi++)
        for (size_t o = 0; o < s->oc; o++)
            for (size_t od = 0; od < s->od; od++)
                for (size_t oh = 0; oh < s->oh; oh++)
                    for (size_t ow = 0; ow < s->ow && bad < 3; ow++, yi++) {
                        size_t g = o / ocg;
                        double acc = 0, mag = 0;
                        for (size_t ic = 0; ic < icg; ic++)
                            for (size_t t = 0; t < taps; t++) {
                                size_t kd = t / (s->kh * s->kw), kh = t / s->kw % s->kh,
                                       kw = t % s->kw;
                                ptrdiff_t id =
                                    (ptrdiff_t)(od * s->sd + kd * s->dd) - (ptrdiff_t)s->pf;
                                ptrdiff_t ih =
                                    (ptrdiff_t)(oh * s->sh + kh * s->dh) - (ptrdiff_t)s->pt;
                                ptrdiff_t iw =
                                    (ptrdiff_t)(ow * s->sw + kw * s->dw) - (ptrdiff_t)s->pl;
                                if (id < 0 || ih < 0 || iw < 0 || id >= (ptrdiff_t)s->d ||
                                    ih >= (ptrdiff_t)s->h || iw >= (ptrdiff_t)s->w)
                                    continue;
                                double xv =
                                    x[(((bi * s->c + g * icg + ic) * s->d + (size_t)id) * s->h +
                                       (size_t)ih) *
                                          s->w +
                                      (size_t)iw];
                                double wv = w[(o * icg + ic) * taps + t];
                                acc += xv * wv;
                                mag += fabs(xv * wv);
                            }
                        double extra = fabs(b[o]);
                        acc += b[o];
                        if (use_res == 1)
                            acc += r[yi], extra += fabs(r[yi]);
                        double want = act ? (double)nnf_act_apply(act, (float)acc) : acc;
                        if (use_res == 2)
                            want += r[yi], extra += fabs(r[yi]);
                        double tol = (double)(icg * taps) * ldexp(1.0, -22) * mag;
                        tol += ldexp(1.0, -20) * (extra + fabs(want));
                        tol = 1.2 * tol + 4e-7 * (1.0 + fabs(acc));
                        if (!(fabs(y[yi] - want) <= tol)) {
                            fprintf(stderr, "%s: y[%zu] = %.9g want %.9g (tol %.3g)\n", k->name, yi,
                                    y[yi], want, tol);
                            bad++;
                        }
                    }
    nnf_conv3d_kernel_destroy(k);
    free(x);
    free(w);
    free(b);
    free(r);
    free(y);
    return bad;
}

static void test_conv3d(nnf_isa isa) {
    nnf_threadpool *pool = NULL;
    CHECK(nnf_threadpool_create(2, &pool) == NNF_OK);
    const nnf_activation relu = {NNF_ACT_RELU, 0, 0}, silu = {NNF_ACT_SILU, 0, 0};
    static const size_t cs[][19] = {
        /* n, c, d, h, w, oc, group, kd, kh, kw, sd, sh, sw, dd, dh, dw, pf, pt, pl (pads
         * at the end: the same as at the start) */
        {1, 3, 5, 6, 7, 4, 1, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
        {2, 4, 7, 9, 13, 6, 2, 2, 3, 2, 2, 1, 2, 1, 2, 1, 0, 2, 1},
        {1, 2, 4, 5, 17, 3, 1, 3, 1, 5, 1, 2, 1, 2, 1, 1, 2, 0, 2},
        {1, 5, 3, 1, 1, 7, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0},
        {1, 8, 6, 8, 8, 16, 4, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
        {1, 2, 2, 3, 3, 2, 1, 3, 3, 3, 3, 1, 1, 1, 1, 1, 2, 1, 1},
        /* PLANES: ICg KH KW a multiple of 8; two column blocks (the second
         * partial), depth stride 2, KD 2 with a 1x1 window (one K block of
         * 8 rows), a plane of 576 rows in K blocks of 288 with 7 rows of M */
        {1, 8, 4, 20, 20, 16, 1, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
        {2, 16, 5, 7, 9, 8, 2, 3, 3, 3, 2, 1, 2, 1, 1, 1, 1, 1, 0},
        {1, 8, 5, 6, 6, 5, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0},
        {1, 64, 4, 5, 6, 7, 1, 3, 3, 3, 1, 1, 1, 1, 2, 1, 1, 2, 1},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        const size_t *a = cs[i];
        nnf_conv3d_shape s = {.n = a[0],
                              .c = a[1],
                              .d = a[2],
                              .h = a[3],
                              .w = a[4],
                              .oc = a[5],
                              .group = a[6],
                              .kd = a[7],
                              .kh = a[8],
                              .kw = a[9],
                              .sd = a[10],
                              .sh = a[11],
                              .sw = a[12],
                              .dd = a[13],
                              .dh = a[14],
                              .dw = a[15],
                              .pf = a[16],
                              .pt = a[17],
                              .pl = a[18]};
        s.od = out_dim(s.d, s.kd, s.sd, s.dd, s.pf, s.pf);
        s.oh = out_dim(s.h, s.kh, s.sh, s.dh, s.pt, s.pt);
        s.ow = out_dim(s.w, s.kw, s.sw, s.dw, s.pl, s.pl);
        for (int small = 0; small < 2; small++)
            CHECK_MSG(run_conv3d(&s, isa, i % 2 ? &silu : &relu, (int)(i % 3), i % 2 ? pool : NULL,
                                 small) == 0,
                      "%s conv3d case %zu%s", nnf_isa_name(isa), i, small ? " small blocks" : "");
    }
    nnf_conv3d_shape none = {.n = 1, .c = 4, .d = 2, .h = 2, .w = 2, .oc = 4, .group = 3};
    CHECK(!nnf_conv3d_fits(&none));
    nnf_threadpool_destroy(pool);
}

/* The AVX2 im2col packer only moves values: it must match the scalar packer
 * bit for bit (including the zero tail of the last panel) for every block
 * the GEMM driver can ask for: offsets into N and K, widths around the
 * 8-lane groups, strides 1/2 (vector paths) and 3 (gather), dilation,
 * asymmetric padding, 1-D. */
static void test_im2col_packer(void) {
    if (nnf_cpu_get()->max_isa < NNF_ISA_AVX2)
        return;
    struct {
        size_t c, h, w, kh, kw, s, d, pt, pl, pb, pr;
    } cs[] = {
        {3, 9, 1, 3, 3, 1, 1, 1, 1, 1, 1},  {2, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1},
        {2, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1},  {2, 5, 9, 3, 3, 2, 1, 1, 1, 1, 1},
        {3, 4, 15, 3, 3, 1, 1, 0, 0, 0, 0}, {2, 3, 16, 5, 5, 2, 1, 2, 2, 2, 2},
        {2, 4, 17, 7, 7, 2, 1, 3, 3, 3, 3}, {2, 3, 33, 3, 3, 3, 1, 1, 1, 1, 1},
        {2, 5, 31, 3, 3, 1, 2, 2, 2, 2, 2}, {1, 3, 57, 3, 3, 1, 1, 1, 1, 1, 1},
        {1, 3, 55, 3, 3, 2, 1, 1, 1, 1, 1}, {1, 1, 61, 1, 7, 1, 1, 0, 3, 0, 3},
        {2, 2, 20, 6, 6, 2, 1, 2, 2, 2, 2}, {2, 7, 13, 3, 3, 2, 1, 0, 1, 1, 0},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0] && !bad; i++) {
        nnf_conv2d_shape s = shape(1, cs[i].c, cs[i].h, cs[i].w, 4, 1, cs[i].kh, cs[i].kw, cs[i].s, cs[i].d,
                                   cs[i].pt, cs[i].pl, cs[i].pb, cs[i].pr);
        size_t K = s.c * s.kh * s.kw, N = s.oh * s.ow;
        float *x = check_rand_buf(s.c * s.h * s.w);
        nnf_im2col_ctx ctx = {.x = x, .s = &s};
        size_t ns[4][2] = {{0, N}, {N > 1, N - (N > 1)}, {N / 3, N - N / 3 < 13 ? N - N / 3 : 13}, {N - 1, 1}};
        size_t ks[4][2] = {{0, K}, {K > 1, K - (K > 1)}, {K / 2, K - K / 2}, {K - 1, 1}};
        for (size_t r = 16; r <= 32; r += 16)
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++) {
                    size_t n0 = ns[a][0], nc = ns[a][1], k0 = ks[b][0], kc = ks[b][1];
                    size_t floats = (nc + r - 1) / r * r * kc;
                    float *d1 = malloc(floats * sizeof(float)), *d2 = malloc(floats * sizeof(float));
                    for (size_t q = 0; q < floats; q++)
                        d1[q] = d2[q] = NAN;
                    nnf_im2col_pack_scalar(&ctx, n0, nc, k0, kc, r, d1);
                    nnf_im2col_pack_avx2(&ctx, n0, nc, k0, kc, r, d2);
                    if (memcmp(d1, d2, floats * sizeof(float)) && bad++ < 3)
                        fprintf(stderr, "im2col case %zu r=%zu n0=%zu nc=%zu k0=%zu kc=%zu differs\n", i, r,
                                n0, nc, k0, kc);
                    free(d1);
                    free(d2);
                }
        free(x);
    }
    CHECK_MSG(bad == 0, "AVX2 im2col packer differs from the scalar one in %d blocks", bad);
}

/* The Conv plan against the reference kernel, through the op table's types. */
static void test_plan(void) {
    nnf_conv_params p;
    memset(&p, 0, sizeof p);
    p.spatial = 2;
    for (int i = 0; i < 2; i++) {
        p.kernel[i] = 3;
        p.strides[i] = 2;
        p.dilations[i] = 1;
        p.pads_begin[i] = 1;
        p.pads_end[i] = 1;
    }
    p.group = 1;
    p.act.kind = NNF_ACT_SILU;
    p.residual_input = 3;
    nnf_node node = {.name = "conv0", .op_type = "Conv", .domain = "", .n_inputs = 4, .n_outputs = 1, .params = &p};
    int64_t xd[4] = {2, 5, 11, 13}, wd[4] = {7, 5, 3, 3}, bd[1] = {7}, yd[4] = {2, 7, 6, 7};
    size_t xn = 2 * 5 * 11 * 13, wn = 7 * 5 * 9, yn = 2 * 7 * 6 * 7;
    float *x = check_rand_buf(xn), *w = check_rand_buf(wn), *b = check_rand_buf(7), *r = check_rand_buf(yn);
    float *y = malloc(yn * sizeof(float)), *yref = malloc(yn * sizeof(float));
    nnf_tinfo in[4] = {{.present = true, .dtype = NNF_DTYPE_FLOAT32, .shape = {.rank = 4}},
                       {.present = true, .dtype = NNF_DTYPE_FLOAT32, .shape = {.rank = 4}, .data = w},
                       {.present = true, .dtype = NNF_DTYPE_FLOAT32, .shape = {.rank = 1}, .data = b},
                       {.present = true, .dtype = NNF_DTYPE_FLOAT32, .shape = {.rank = 4}}};
    nnf_tinfo out[1] = {{.present = true, .dtype = NNF_DTYPE_FLOAT32, .shape = {.rank = 4}}};
    memcpy(in[0].shape.dims, xd, sizeof xd);
    memcpy(in[1].shape.dims, wd, sizeof wd);
    memcpy(in[2].shape.dims, bd, sizeof bd);
    memcpy(in[3].shape.dims, yd, sizeof yd);
    memcpy(out[0].shape.dims, yd, sizeof yd);
    nnf_kernel_plan plan = {0};
    CHECK(nnf_plan_conv(&node, in, out, &plan) == NNF_OK);
    CHECK(plan.run != NULL);
    if (plan.run) {
        nnf_buf bx = {.dtype = NNF_DTYPE_FLOAT32, .rank = 4, .data = x, .numel = xn};
        nnf_buf bw = {.dtype = NNF_DTYPE_FLOAT32, .rank = 4, .data = w, .numel = wn};
        nnf_buf bb = {.dtype = NNF_DTYPE_FLOAT32, .rank = 1, .data = b, .numel = 7};
        nnf_buf br = {.dtype = NNF_DTYPE_FLOAT32, .rank = 4, .data = r, .numel = yn};
        nnf_buf by = {.dtype = NNF_DTYPE_FLOAT32, .rank = 4, .data = y, .numel = yn};
        nnf_buf byr = by;
        byr.data = yref;
        memcpy(bx.dims, xd, sizeof xd);
        memcpy(bw.dims, wd, sizeof wd);
        memcpy(bb.dims, bd, sizeof bd);
        memcpy(br.dims, yd, sizeof yd);
        memcpy(by.dims, yd, sizeof yd);
        memcpy(byr.dims, yd, sizeof yd);
        nnf_buf *ins[4] = {&bx, &bw, &bb, &br}, *outs[1] = {&by}, *routs[1] = {&byr};
        nnf_kctx ctx = {.state = plan.state}, rctx = {0};
        CHECK(plan.run(&node, ins, outs, &ctx) == NNF_OK);
        CHECK(nnf_conv_ref(&node, ins, routs, &rctx) == NNF_OK);
        double worst = 0;
        for (size_t i = 0; i < yn; i++) {
            double e = fabs(y[i] - yref[i]) / (1.0 + fabs(yref[i]));
            if (!(e <= worst))
                worst = e;
        }
        CHECK_MSG(worst < 1e-5, "conv plan %s vs reference: %g", plan.name, worst);
        plan.free_state(plan.state);
    }
    /* weights not constant: keep the reference kernel */
    in[1].data = NULL;
    nnf_kernel_plan plan2 = {0};
    CHECK(nnf_plan_conv(&node, in, out, &plan2) == NNF_OK && plan2.run == NULL);
    free(x);
    free(w);
    free(b);
    free(r);
    free(y);
    free(yref);
}

/* STRIDED (phase-split input, conv_strided.c): few channels (1, 3, 4, 5),
 * odd widths, every padding up to 3, strides 2 and 3, kernels 1..7,
 * dilation, groups, every epilogue kind; the model stems scaled down; band
 * edges, K blocks (K over the GEMM's kc) and the per-band threaded path,
 * bit-identical to one thread. */
static void test_strided(nnf_isa isa) {
    const char *t = nnf_isa_name(isa);
    const nnf_activation acts[5] = {{NNF_ACT_NONE, 0, 0}, {NNF_ACT_RELU, 0, 0}, {NNF_ACT_CLIP, 0, 6},
                                    {NNF_ACT_SILU, 0, 0}, {NNF_ACT_HARD_SWISH, 0, 0}};
    size_t cs[] = {1, 3, 4, 5}, ws[] = {1, 7, 31, 33};
    size_t cases = 0;
    for (size_t k = 1; k <= 7; k++)
        for (size_t st = 2; st <= 3; st++)
            for (size_t wi = 0; wi < 4; wi++) {
                size_t i = k * 8 + st * 4 + wi, c = cs[i % 4], p = (k + wi + st) % 4;
                size_t pb = (p + wi) % 4, w = ws[wi], h = ws[(wi + k) % 4] + 2;
                size_t d = i % 5 == 0 && k > 1 ? 2 : 1, span = (k - 1) * d + 1;
                size_t pl = (p + 1) % 4 < k ? (p + 1) % 4 : p;
                if (w + pl + pb < span || h + p + p < span || p >= span || pl >= span || pb >= span)
                    continue;
                size_t g = c % 2 == 0 && i % 3 == 0 ? 2 : 1;
                nnf_conv2d_shape s = shape(1 + (i % 7 == 0), c, h, w, g * (1 + i % 9), g, k, k, st, d, p,
                                           pl, p, pb);
                CHECK_MSG(run_conv(&s, isa, &acts[i % 5], (int)(i & 1), (int)(i % 3 == 1), NULL,
                                   NNF_CONV_ALGO_STRIDED) == 0,
                          "%s strided c=%zu %zux%zu k%zu s%zu p%zu/%zu/%zu d%zu g%zu", t, c, h, w, k, st, p, pl, pb, d,
                          g);
                cases++;
            }
    CHECK_MSG(cases >= 30, "%s strided: only %zu cases", t, cases);
    /* asymmetric kernel and strides */
    nnf_conv2d_shape a = shape(1, 3, 11, 20, 5, 1, 2, 5, 2, 1, 1, 2, 0, 1);
    a.sh = 3;
    a.oh = (11 + 1 + 0 - 2) / 3 + 1;
    CHECK_MSG(run_conv(&a, isa, &acts[3], 1, 1, NULL, NNF_CONV_ALGO_STRIDED) == 0, "%s strided 2x5 s3x2", t);
    /* the model layers, scaled down (SiLU / ReLU / ReLU6 as in the models) */
    struct {
        const char *name;
        nnf_conv2d_shape s;
        int act, res;
    } real[] = {
        {"yolo stem 6x6s2", shape(1, 3, 64, 64, 32, 1, 6, 6, 2, 1, 2, 2, 2, 2), 3, 0},
        {"yolo 3x3s2 32-64", shape(1, 32, 40, 40, 64, 1, 3, 3, 2, 1, 1, 1, 1, 1), 3, 0},
        {"yolo 3x3s2 64-128", shape(1, 64, 20, 20, 128, 1, 3, 3, 2, 1, 1, 1, 1, 1), 3, 1},
        {"r50 conv1 7x7s2", shape(1, 3, 56, 56, 64, 1, 7, 7, 2, 1, 3, 3, 3, 3), 1, 0},
        {"r50 l2 3x3s2 (K blocks)", shape(1, 128, 28, 28, 128, 1, 3, 3, 2, 1, 1, 1, 1, 1), 1, 1},
        {"r50 downsample 1x1s2", shape(1, 64, 14, 14, 48, 1, 1, 1, 2, 1, 0, 0, 0, 0), 0, 1},
        {"mbv2 stem 3x3s2", shape(1, 3, 32, 32, 32, 1, 3, 3, 2, 1, 1, 1, 1, 1), 2, 0},
        {"bands", shape(1, 16, 64, 64, 8, 1, 3, 3, 2, 1, 1, 1, 1, 1), 4, 1},
    };
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++)
        CHECK_MSG(run_conv(&real[i].s, isa, &acts[real[i].act], 1, real[i].res, NULL,
                           NNF_CONV_ALGO_STRIDED) == 0,
                  "%s strided %s", t, real[i].name);
    /* many bands: each thread runs whole bands; same bits as one thread */
    nnf_threadpool *pool = NULL;
    CHECK(nnf_threadpool_create(3, &pool) == NNF_OK);
    nnf_conv2d_shape mb = shape(1, 32, 64, 256, 8, 1, 3, 3, 2, 1, 1, 1, 1, 1);
    CHECK_MSG(run_conv(&mb, isa, &acts[3], 1, 1, pool, NNF_CONV_ALGO_STRIDED) == 0, "%s strided threaded", t);
    CHECK_MSG(run_conv(&real[4].s, isa, &acts[1], 1, 1, pool, NNF_CONV_ALGO_STRIDED) == 0,
              "%s strided threaded K blocks", t);
    for (int which = 0; which < 2; which++) {
        nnf_conv2d_shape s = which ? real[4].s : mb;
        size_t xn = s.n * s.c * s.h * s.w, yn = s.n * s.oc * s.oh * s.ow;
        float *x = check_rand_buf(xn), *w = check_rand_buf(s.oc * s.c / s.group * s.kh * s.kw);
        float *y1 = malloc(yn * sizeof(float)), *y3 = malloc(yn * sizeof(float));
        nnf_conv_kernel *k = NULL;
        nnf_epilogue ep = nnf_epilogue_default();
        ep.act = acts[3];
        CHECK(nnf_conv_kernel_create(&s, NNF_CONV_ALGO_STRIDED, isa, w, &k) == NNF_OK);
        CHECK(nnf_conv_kernel_run(k, x, y1, &ep, NULL) == NNF_OK);
        CHECK(nnf_conv_kernel_run(k, x, y3, &ep, pool) == NNF_OK);
        CHECK_MSG(memcmp(y1, y3, yn * sizeof(float)) == 0, "%s strided: 1 and 3 threads differ (%d)", t, which);
        nnf_conv_kernel_destroy(k);
        free(x);
        free(w);
        free(y1);
        free(y3);
    }
    nnf_threadpool_destroy(pool);
}

/* 1, 2 and 3 threads give the same bits (0 when they do). */
static int threads_agree(const nnf_conv2d_shape *s, nnf_conv_algo algo, nnf_isa isa,
                         const nnf_activation *act, int use_bias, int use_res,
                         nnf_threadpool *pool2, nnf_threadpool *pool3) {
    size_t xn = s->n * s->c * s->h * s->w, yn = s->n * s->oc * s->oh * s->ow;
    float *x = check_rand_buf(xn), *w = check_rand_buf(s->oc * (s->c / s->group) * s->kh * s->kw);
    float *b = check_rand_buf(s->oc), *r = check_rand_buf(yn);
    float *y[3] = {malloc((yn + 1) * sizeof(float)), malloc((yn + 1) * sizeof(float)),
                   malloc((yn + 1) * sizeof(float))};
    nnf_threadpool *pools[3] = {NULL, pool2, pool3};
    nnf_conv_kernel *k = NULL;
    int bad = nnf_conv_kernel_create(s, algo, isa, w, &k) != NNF_OK;
    nnf_epilogue ep = conv_ep(act, b, use_bias, r, use_res);
    for (int t = 0; t < 3 && !bad; t++) {
        y[t][yn] = 12345.0f; /* the sentinel past the end must survive */
        bad |= nnf_conv_kernel_run(k, x, y[t], &ep, pools[t]) != NNF_OK || y[t][yn] != 12345.0f;
        bad |= t > 0 && memcmp(y[0], y[t], yn * sizeof(float)) != 0;
    }
    nnf_conv_kernel_destroy(k);
    free(x);
    free(w);
    free(b);
    free(r);
    for (int t = 0; t < 3; t++)
        free(y[t]);
    return bad;
}

/* NNF_TEST_SOAK=N runs N random shapes from NNF_TEST_SEED (default 1) through
 * every algorithm that takes them, on every tier: the oracle as above, and 1,
 * 2, 3 threads bit-identical. Off by default (CI runs the fixed cases); for
 * long runs after a kernel change:
 *   NNF_TEST_SOAK=2000 NNF_TEST_SEED=7 build/test_conv_fast */
static void soak(void) {
    long count = check_soak_begin();
    if (count <= 0)
        return;
    nnf_threadpool *pool2 = NULL, *pool3 = NULL;
    CHECK(nnf_threadpool_create(2, &pool2) == NNF_OK && nnf_threadpool_create(3, &pool3) == NNF_OK);
    static const nnf_conv_algo algos[] = {NNF_CONV_ALGO_GEMM_1X1, NNF_CONV_ALGO_IM2COL,
                                          NNF_CONV_ALGO_DEPTHWISE, NNF_CONV_ALGO_WINOGRAD,
                                          NNF_CONV_ALGO_STRIDED};
    long ran = 0, runs = 0;
    while (ran < count) {
        size_t n = 1 + (check_unit() < 0.15), g = 1, c, oc;
        double kind = check_unit();
        if (kind < 0.25) { /* depthwise */
            c = oc = g = 1 + (size_t)(check_unit() * 200);
        } else if (kind < 0.35) { /* grouped */
            g = 2 + (size_t)(check_unit() * 4);
            c = g * (1 + (size_t)(check_unit() * 12));
            oc = g * (1 + (size_t)(check_unit() * 12));
        } else {
            /* one draw per expression: a seed replays on any compiler */
            double cmax = check_unit() < 0.5 ? 24 : 260;
            c = 1 + (size_t)(check_unit() * cmax);
            double ocmax = check_unit() < 0.5 ? 24 : 260;
            oc = 1 + (size_t)(check_unit() * ocmax);
        }
        size_t kh = 1 + (size_t)(check_unit() * 7);
        size_t kw = check_unit() < 0.7 ? kh : 1 + (size_t)(check_unit() * 7);
        if (check_unit() < 0.3)
            kh = kw = 3;
        size_t st = 1 + (size_t)(check_unit() * 3), d = check_unit() < 0.15 ? 2 : 1;
        size_t h = 1 + (size_t)(check_unit() * 48), w = 1 + (size_t)(check_unit() * 48);
        size_t pt = (size_t)(check_unit() * 4), pl = (size_t)(check_unit() * 4);
        size_t pb = check_unit() < 0.7 ? pt : (size_t)(check_unit() * 4);
        size_t pr = check_unit() < 0.7 ? pl : (size_t)(check_unit() * 4);
        nnf_conv2d_shape s = shape(n, c, h, w, oc, g, kh, kw, st, d, pt, pl, pb, pr);
        double macs = (double)n * (double)oc * (double)(c / g) * (double)(kh * kw) * (double)s.oh *
                      (double)s.ow;
        if (s.oh == 0 || s.ow == 0 || macs > 2e7)
            continue;
        nnf_activation act = {.kind = (nnf_act_kind)(check_unit() * (NNF_ACT_GELU_TANH + 1))};
        if (act.kind == NNF_ACT_CLIP)
            act.alpha = 0.1f, act.beta = 0.6f;
        else if (act.kind == NNF_ACT_LEAKY_RELU)
            act.alpha = 0.1f;
        else if (act.kind == NNF_ACT_HARD_SIGMOID)
            act.alpha = 0.2f, act.beta = 0.5f;
        int use_bias = check_unit() < 0.7, use_res = (int)(check_unit() * 3);
        ran++;
        for (int t = NNF_ISA_SCALAR; t <= (int)nnf_cpu_get()->max_isa; t++)
            for (size_t a = 0; a < sizeof algos / sizeof algos[0]; a++) {
                nnf_conv_kernel *k = NULL;
                float *wt = check_rand_buf(oc * (c / g) * kh * kw);
                nnf_status cs = nnf_conv_kernel_create(&s, algos[a], (nnf_isa)t, wt, &k);
                nnf_conv_kernel_destroy(k);
                free(wt);
                if (cs != NNF_OK) { /* not a shape this algorithm takes */
                    nnf_error_clear();
                    continue;
                }
                runs++;
                const char *name = nnf_isa_name((nnf_isa)t);
                CHECK_MSG(run_conv(&s, (nnf_isa)t, &act, use_bias, use_res, pool2, algos[a]) == 0,
                          "soak %s algo %d: n%zu c%zu %zux%zu oc%zu g%zu k%zux%zu s%zu d%zu "
                          "p%zu,%zu,%zu,%zu",
                          name, (int)algos[a], n, c, h, w, oc, g, kh, kw, st, d, pt, pl, pb, pr);
                CHECK_MSG(threads_agree(&s, algos[a], (nnf_isa)t, &act, use_bias, use_res, pool2,
                                        pool3) == 0,
                          "soak %s algo %d: 1, 2, 3 threads differ: n%zu c%zu %zux%zu oc%zu g%zu "
                          "k%zux%zu s%zu d%zu p%zu,%zu,%zu,%zu",
                          name, (int)algos[a], n, c, h, w, oc, g, kh, kw, st, d, pt, pl, pb, pr);
            }
    }
    nnf_threadpool_destroy(pool2);
    nnf_threadpool_destroy(pool3);
    char what[64];
    snprintf(what, sizeof what, "random shapes (%ld kernel runs)", runs);
    check_soak_end(ran, what);
}

int main(void) {
    const nnf_cpu *cpu = nnf_cpu_get();
    /* selection is pure */
    nnf_conv2d_shape s = shape(1, 32, 112, 112, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1);
    CHECK(nnf_conv_select(&s, NNF_ISA_AVX2) == NNF_CONV_ALGO_DEPTHWISE);
    s = shape(1, 64, 56, 56, 256, 1, 1, 1, 1, 1, 0, 0, 0, 0);
    CHECK(nnf_conv_select(&s, NNF_ISA_SCALAR) == NNF_CONV_ALGO_GEMM_1X1);
    s = shape(1, 64, 56, 56, 64, 1, 3, 3, 1, 1, 1, 1, 1, 1);
    CHECK(nnf_conv_select(&s, NNF_ISA_AVX2) == NNF_CONV_ALGO_WINOGRAD);
    CHECK(nnf_conv_select(&s, NNF_ISA_SCALAR) == NNF_CONV_ALGO_IM2COL);
    s = shape(1, 512, 7, 7, 512, 1, 3, 3, 1, 1, 1, 1, 1, 1); /* 7x7: Winograd's tiles 60 % empty */
    CHECK(nnf_conv_select(&s, NNF_ISA_AVX2) == NNF_CONV_ALGO_IM2COL);
    s = shape(1, 256, 14, 14, 256, 1, 3, 3, 1, 1, 1, 1, 1, 1); /* 14x14: 16 tiles, all used */
    CHECK(nnf_conv_select(&s, NNF_ISA_AVX2) == NNF_CONV_ALGO_WINOGRAD);
    s = shape(1, 64, 56, 56, 64, 1, 3, 3, 2, 1, 1, 1, 1, 1); /* K = 576: im2col */
    CHECK(nnf_conv_select(&s, NNF_ISA_AVX2) == NNF_CONV_ALGO_IM2COL);
    s = shape(1, 16, 56, 56, 64, 1, 3, 3, 2, 1, 1, 1, 1, 1); /* K = 144: strided */
    CHECK(nnf_conv_select(&s, NNF_ISA_AVX2) == NNF_CONV_ALGO_STRIDED);
    CHECK(nnf_conv_select(&s, NNF_ISA_SCALAR) == NNF_CONV_ALGO_STRIDED);
    s = shape(1, 3, 224, 224, 64, 1, 7, 7, 2, 1, 3, 3, 3, 3); /* ResNet conv1, K = 147 */
    CHECK(nnf_conv_select(&s, NNF_ISA_AVX2) == NNF_CONV_ALGO_STRIDED);
    s = shape(1, 3, 224, 224, 32, 1, 3, 3, 1, 1, 1, 1, 1, 1); /* stride 1 stays */
    CHECK(nnf_conv_select(&s, NNF_ISA_AVX2) == NNF_CONV_ALGO_IM2COL);
    s = shape(1, 3, 640, 640, 32, 1, 6, 6, 2, 1, 2, 2, 2, 2); /* YOLOv5 stem */
    CHECK(nnf_conv_select(&s, NNF_ISA_AVX2) == NNF_CONV_ALGO_STRIDED);
    s = shape(1, 256, 56, 56, 512, 1, 1, 1, 2, 1, 0, 0, 0, 0); /* ResNet downsample, K = 256 */
    CHECK(nnf_conv_select(&s, NNF_ISA_AVX2) == NNF_CONV_ALGO_IM2COL);
    s = shape(1, 32, 112, 112, 32, 32, 3, 3, 2, 1, 1, 1, 1, 1); /* depthwise s2 stays */
    CHECK(nnf_conv_select(&s, NNF_ISA_AVX2) == NNF_CONV_ALGO_DEPTHWISE);
    s = shape(1, 32, 56, 56, 32, 32, 7, 7, 1, 1, 3, 3, 3, 3); /* 7x7: the row kernels */
    CHECK(nnf_conv_select(&s, NNF_ISA_AVX2) == NNF_CONV_ALGO_DEPTHWISE);
    CHECK(nnf_dw_select(&s, NNF_ISA_AVX2) == NNF_DW_PLANE_AVX2);
    CHECK(nnf_dw_select(&s, NNF_ISA_AVX512) == NNF_DW_PLANE_AVX512);
    s = shape(1, 32, 56, 56, 32, 32, 7, 7, 1, 2, 6, 6, 6, 6); /* dilated: the generic kernel */
    CHECK(nnf_dw_select(&s, NNF_ISA_AVX2) == NNF_DW_ANY_AVX2);
    CHECK(nnf_dw_select(&s, NNF_ISA_AVX512) == NNF_DW_ANY_AVX2);
    CHECK(nnf_dw_select(&s, NNF_ISA_SCALAR) == NNF_DW_PLANE_SCALAR);
    s = shape(1, 512, 1, 1024, 512, 512, 1, 31, 1, 1, 0, 15, 0, 15); /* a Conformer's 1-D */
    CHECK(nnf_conv_select(&s, NNF_ISA_AVX2) == NNF_CONV_ALGO_DEPTHWISE);
    CHECK(nnf_dw_select(&s, NNF_ISA_AVX2) == NNF_DW_ANY_AVX2);
    s = shape(1, 32, 56, 56, 32, 16, 7, 7, 1, 1, 3, 3, 3, 3); /* groups of two: not depthwise */
    CHECK(nnf_conv_select(&s, NNF_ISA_AVX2) == NNF_CONV_ALGO_IM2COL);
    /* an algorithm given a shape it does not compute is refused, not run out
     * of bounds (the soak below forces every algorithm on every shape) */
    {
        static const struct {
            nnf_conv2d_shape s;
            nnf_conv_algo algo;
        } misfits[] = {
            {{.n = 1,
              .c = 8,
              .h = 9,
              .w = 9,
              .oc = 8,
              .group = 4,
              .kh = 4,
              .kw = 3,
              .sh = 1,
              .sw = 1,
              .dh = 1,
              .dw = 1,
              .oh = 6,
              .ow = 7},
             NNF_CONV_ALGO_DEPTHWISE},
            {{.n = 1,
              .c = 8,
              .h = 9,
              .w = 9,
              .oc = 8,
              .group = 1,
              .kh = 3,
              .kw = 3,
              .sh = 1,
              .sw = 1,
              .dh = 1,
              .dw = 1,
              .oh = 7,
              .ow = 7},
             NNF_CONV_ALGO_GEMM_1X1},
            {{.n = 1,
              .c = 8,
              .h = 9,
              .w = 9,
              .oc = 8,
              .group = 1,
              .kh = 3,
              .kw = 3,
              .sh = 2,
              .sw = 2,
              .dh = 1,
              .dw = 1,
              .oh = 4,
              .ow = 4},
             NNF_CONV_ALGO_WINOGRAD},
            {{.n = 1,
              .c = 8,
              .h = 9,
              .w = 9,
              .oc = 8,
              .group = 1,
              .kh = 3,
              .kw = 3,
              .sh = 1,
              .sw = 1,
              .dh = 1,
              .dw = 1,
              .oh = 7,
              .ow = 7},
             NNF_CONV_ALGO_NONE},
        };
        float wm[8 * 8 * 12] = {0};
        for (size_t i = 0; i < sizeof misfits / sizeof misfits[0]; i++) {
            nnf_conv_kernel *k = (nnf_conv_kernel *)&wm; /* must come back NULL */
            CHECK(!nnf_conv_algo_fits(&misfits[i].s, misfits[i].algo, NNF_ISA_AVX2));
            CHECK(nnf_conv_kernel_create(&misfits[i].s, misfits[i].algo, NNF_ISA_AVX2, wm, &k) ==
                      NNF_ERR_UNSUPPORTED &&
                  k == NULL);
            nnf_error_clear();
        }
    }
    s.group = 5; /* does not divide the channels */
    CHECK(nnf_conv_select(&s, NNF_ISA_AVX2) == NNF_CONV_ALGO_NONE);
    test_im2col_packer();
    for (int t = NNF_ISA_SCALAR; t <= (int)cpu->max_isa; t++) {
        nnf_cpu_force_isa((nnf_isa)t);
        printf("tier %s\n", nnf_isa_name((nnf_isa)t));
        test_tier((nnf_isa)t);
        test_depthwise_kernels((nnf_isa)t);
        test_conv3d((nnf_isa)t);
        test_strided((nnf_isa)t);
        test_plan();
    }
    nnf_cpu_force_isa(cpu->max_isa);
    soak();
    TEST_MAIN_END();
}

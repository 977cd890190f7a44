/* The transposed-convolution kernel (GEMM + col2im) against a double-
 * precision oracle on every tier this machine has, at awkward sizes:
 * strides below, at and past the kernel, dilation, crops, output padding,
 * groups, batches, activations, bands of input rows with a halo, 3-D whose
 * depth taps tile the depth; and the same bits on 1 and 3 threads. Tolerance as in
 * test_conv_fast.c, with K = IC/group * KH * KW. */
#include "base/cpu.h"
#include "base/threadpool.h"
#include "kernels/conv_transpose.h"
#include "kernels/ref/activation.h"

#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* n, c, h, w, oc, group, kh, kw, stride h/w, dilation h/w, crop top/left,
 * output padding h/w (the output is the full extent less the crops plus
 * the output padding, cropped equally at the end as at the start) */
static nnf_conv2d_shape shape(size_t n, size_t c, size_t h, size_t w, size_t oc, size_t g,
                              size_t kh, size_t kw, size_t sh, size_t sw, size_t dh, size_t dw,
                              size_t pt, size_t pl, size_t oph, size_t opw) {
    nnf_conv2d_shape s = {.n = n,
                          .c = c,
                          .h = h,
                          .w = w,
                          .oc = oc,
                          .group = g,
                          .kh = kh,
                          .kw = kw,
                          .sh = sh,
                          .sw = sw,
                          .dh = dh,
                          .dw = dw,
                          .pt = pt,
                          .pl = pl};
    s.oh = (h - 1) * sh + (kh - 1) * dh + 1 - 2 * pt + oph;
    s.ow = (w - 1) * sw + (kw - 1) * dw + 1 - 2 * pl + opw;
    return s;
}

/* Runs s on tier isa with the pool, compares with the oracle; copies the
 * output to keep (when not NULL). 0 when everything is within tolerance.
 * d > 1 or kd > 1: 3-D over an input depth d with kd depth taps (the depth
 * stride; output depth d kd). */
static int run(const nnf_conv2d_shape *s, size_t d, size_t kd, nnf_isa isa,
               const nnf_activation *act, int use_bias, nnf_threadpool *pool, float *keep) {
    size_t icg = s->c / s->group, ocg = s->oc / s->group, taps = kd * s->kh * s->kw;
    size_t xn = s->n * s->c * d * s->h * s->w, yn = s->n * s->oc * d * kd * s->oh * s->ow;
    size_t ohw = s->oh * s->ow, od = d * kd;
    check_rng = 0x9E3779B97F4A7C15ull; /* the same data for every tier and thread count */
    float *x = check_rand_buf(xn), *w = check_rand_buf(s->c * ocg * taps), *b = check_rand_buf(s->oc);
    float *y = malloc(yn * sizeof(float));
    double *acc = calloc(yn, sizeof(double)), *mag = calloc(yn, sizeof(double));
    nnf_convt_kernel *k = NULL;
    int bad = 0;
    if (nnf_convt_kernel_create_3d(s, d, kd, isa, w, &k) != NNF_OK) {
        fprintf(stderr, "create failed: %s\n", nnf_error_message());
        return 1;
    }
    nnf_epilogue ep = nnf_epilogue_default();
    if (act)
        ep.act = *act;
    if (use_bias) {
        ep.bias_kind = NNF_BIAS_PER_ROW;
        ep.bias = b;
    }
    memset(y, 0xff, yn * sizeof(float)); /* NaN: every output must be written */
    if (nnf_convt_kernel_run(k, x, y, &ep, pool) != NNF_OK)
        bad++;
    /* the definition: every input pixel times every tap, added where it lands */
    for (size_t bi = 0; bi < s->n; bi++)
        for (size_t ci = 0; ci < s->c; ci++) {
            size_t g = ci / icg;
            for (size_t j = 0; j < ocg; j++)
                for (size_t id = 0; id < d; id++)
                    for (size_t ih = 0; ih < s->h; ih++)
                        for (size_t iw = 0; iw < s->w; iw++)
                            for (size_t z = 0; z < kd; z++)
                                for (size_t i = 0; i < s->kh; i++)
                                    for (size_t t = 0; t < s->kw; t++) {
                                        ptrdiff_t oy =
                                            (ptrdiff_t)(ih * s->sh + i * s->dh) - (ptrdiff_t)s->pt;
                                        ptrdiff_t ox =
                                            (ptrdiff_t)(iw * s->sw + t * s->dw) - (ptrdiff_t)s->pl;
                                        if (oy < 0 || ox < 0 || oy >= (ptrdiff_t)s->oh ||
                                            ox >= (ptrdiff_t)s->ow)
                                            continue;
                                        double p =
                                            (double)
                                                x[(((bi * s->c + ci) * d + id) * s->h + ih) * s->w +
                                                  iw] *
                                            w[(((ci * ocg + j) * kd + z) * s->kh + i) * s->kw + t];
                                        size_t yi =
                                            (((bi * s->oc + g * ocg + j) * od + id * kd + z) *
                                                 s->oh +
                                             (size_t)oy) *
                                                s->ow +
                                            (size_t)ox;
                                        acc[yi] += p;
                                        mag[yi] += fabs(p);
                                    }
        }
    for (size_t yi = 0; yi < yn && bad < 3; yi++) {
        size_t o = yi / (od * ohw) % s->oc;
        double sum = acc[yi] + (use_bias ? b[o] : 0.0), extra = use_bias ? fabs(b[o]) : 0.0;
        double want = act ? (double)nnf_act_apply(act, (float)sum) : sum;
        /* each output takes icg kh kw products (the depth's taps do not overlap) */
        double tol = (double)(icg * s->kh * s->kw) * ldexp(1.0, -22) * mag[yi];
        tol += ldexp(1.0, -20) * (extra + fabs(want));
        tol = 1.2 * tol + 4e-7 * (1.0 + fabs(sum));
        if (!(fabs(y[yi] - want) <= tol)) {
            fprintf(stderr, "%s (%s): y[%zu] = %.9g want %.9g (tol %.3g)\n", k->name,
                    nnf_isa_name(isa), yi, y[yi], want, tol);
            bad++;
        }
    }
    if (keep)
        memcpy(keep, y, yn * sizeof(float));
    nnf_convt_kernel_destroy(k);
    free(x);
    free(w);
    free(b);
    free(y);
    free(acc);
    free(mag);
    return bad;
}

int main(void) {
    const nnf_cpu *cpu = nnf_cpu_get();
    const nnf_activation relu = {NNF_ACT_RELU, 0, 0}, silu = {NNF_ACT_SILU, 0, 0},
                         lrelu = {NNF_ACT_LEAKY_RELU, 0.1f, 0};
    const nnf_conv2d_shape cases[] = {
        shape(1, 8, 7, 9, 6, 1, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0),    /* U-Net's 2x2 s2 */
        shape(2, 6, 5, 7, 9, 3, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0),    /* grouped, batch 2 */
        shape(1, 5, 7, 13, 3, 1, 4, 4, 2, 2, 1, 1, 1, 1, 0, 0),   /* DCGAN's 4x4 s2 p1 */
        shape(1, 4, 6, 5, 4, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1),    /* FCN's 3x3 s2 p1 op1 */
        shape(1, 3, 5, 6, 2, 1, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0),    /* stride 1 */
        shape(1, 3, 6, 5, 5, 1, 3, 2, 3, 4, 1, 1, 2, 1, 2, 3),    /* strides 3 and 4 */
        shape(1, 2, 4, 5, 3, 1, 1, 2, 3, 5, 1, 1, 0, 0, 0, 0),    /* strides past the kernel */
        shape(1, 4, 9, 8, 3, 1, 5, 3, 2, 2, 2, 3, 3, 2, 1, 1),    /* dilated, cropped */
        shape(1, 2, 1, 1, 3, 1, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0),    /* one pixel */
        shape(1, 3, 4, 3, 2, 1, 2, 3, 2, 2, 1, 1, 0, 1, 5, 4),    /* output past every tap */
        shape(1, 13, 3, 31, 7, 1, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0),  /* primes */
        shape(1, 3, 1, 17, 5, 1, 1, 4, 1, 2, 1, 1, 0, 1, 0, 1),   /* 1-D (H = 1) */
        shape(1, 2, 3, 61, 127, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0), /* 1x1 */
        /* bands of one input row (4096 x 130 and 2700 x 200 columns each) that
         * take 1 and 2 earlier rows */
        shape(1, 3, 11, 130, 256, 1, 4, 4, 2, 2, 1, 1, 1, 1, 0, 0),
        shape(1, 2, 9, 200, 300, 1, 3, 3, 1, 1, 1, 1, 1, 1, 0, 0),
        /* 3-D (the depth's taps tiling it: depth kernel = stride): a 3D
         * U-Net's 2x2x2 s2, grouped 3 x 4x4 s2 p1 planes over a batch, a
         * depth stride 1 with a 1x1 plane kernel */
        shape(1, 8, 5, 6, 6, 1, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0),
        shape(2, 6, 4, 5, 9, 3, 4, 4, 2, 2, 1, 1, 1, 1, 0, 0),
        shape(1, 5, 3, 7, 4, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0),
    };
    const size_t ncases = sizeof cases / sizeof cases[0];
    /* input depth and depth taps per case (1, 1: 2-D) */
    size_t depth[sizeof cases / sizeof cases[0]][2];
    for (size_t i = 0; i < ncases; i++)
        depth[i][0] = depth[i][1] = 1;
    depth[ncases - 3][0] = 3, depth[ncases - 3][1] = 2;
    depth[ncases - 2][0] = 2, depth[ncases - 2][1] = 3;
    depth[ncases - 1][0] = 4, depth[ncases - 1][1] = 1;
    /* a shape the kernel does not compute is refused */
    nnf_conv2d_shape bad = cases[0];
    bad.group = 3; /* does not divide 8 channels */
    CHECK(!nnf_convt_fits(&bad));
    nnf_convt_kernel *k = (nnf_convt_kernel *)&bad;
    CHECK(nnf_convt_kernel_create(&bad, NNF_ISA_AVX2, NULL, &k) == NNF_ERR_UNSUPPORTED && !k);
    nnf_error_clear();
    bad = cases[0];
    bad.sw = 1000; /* a row's phases would not fit the kernel's buffer */
    CHECK(!nnf_convt_fits(&bad));
    /* the U-Net's 2x2 s2 writes its rows straight from the columns (tiled2);
     * DCGAN's overlapping 4x4 s2 p1 and a cropped 2x2 s2 take the phases */
    const nnf_conv2d_shape tiled[3] = {cases[0], cases[2],
                                       shape(1, 8, 7, 9, 6, 1, 2, 2, 2, 2, 1, 1, 0, 1, 0, 0)};
    for (int i = 0; i < 3; i++) {
        size_t wn = tiled[i].c * (tiled[i].oc / tiled[i].group) * tiled[i].kh * tiled[i].kw;
        float *w = calloc(wn, sizeof(float));
        nnf_convt_kernel *kt = NULL;
        CHECK(w && nnf_convt_kernel_create(&tiled[i], NNF_ISA_AVX2, w, &kt) == NNF_OK);
        CHECK_MSG(kt && kt->tiled2 == (i == 0), "shape %d: tiled2 %d", i, kt ? kt->tiled2 : -1);
        nnf_convt_kernel_destroy(kt);
        free(w);
    }
    nnf_threadpool *pool = NULL;
    CHECK(nnf_threadpool_create(3, &pool) == NNF_OK);
    for (int t = NNF_ISA_SCALAR; t <= (int)cpu->max_isa; t++) {
        nnf_isa isa = (nnf_isa)t;
        nnf_cpu_force_isa(isa);
        printf("tier %s\n", nnf_isa_name(isa));
        for (size_t i = 0; i < ncases; i++) {
            const nnf_conv2d_shape *s = &cases[i];
            const nnf_activation *act = i % 3 == 0 ? &relu : i % 3 == 1 ? &silu : NULL;
            size_t d = depth[i][0], kd = depth[i][1];
            size_t yn = s->n * s->oc * d * kd * s->oh * s->ow;
            float *one = malloc(yn * sizeof(float)), *three = malloc(yn * sizeof(float));
            CHECK_MSG(run(s, d, kd, isa, act, i % 2 == 0, NULL, one) == 0, "case %zu", i);
            CHECK_MSG(run(s, d, kd, isa, act, i % 2 == 0, pool, three) == 0, "case %zu, 3 threads",
                      i);
            CHECK_MSG(!memcmp(one, three, yn * sizeof(float)), "case %zu: 1 and 3 threads differ",
                      i);
            free(one);
            free(three);
        }
        CHECK(run(&cases[2], 1, 1, isa, &lrelu, 1, pool, NULL) == 0);
    }
    nnf_cpu_force_isa(cpu->max_isa);
    nnf_threadpool_destroy(pool);
    TEST_MAIN_END();
}

/* The fused pointwise -> depthwise conv (kernels/nchwc_pw_dw.c) against the
 * two kernels run one after the other, which test_conv_nchwc and test_nchwc
 * check against their oracles: the fused run must give the same bits, on
 * every tier this machine has and on 1, 2 and 3 threads, and write nothing
 * past its output. Maps wide enough that the row buffer holds only a few
 * rows (its height comes from the L2 size) slide it down the band; NaN and
 * Inf in the input propagate alike. NNF_TEST_SOAK=N NNF_TEST_SEED=S (check.h)
 * runs N random cases after the fixed ones (`make soak`). */
#include "base/alloc.h"
#include "base/cpu.h"
#include "base/threadpool.h"
#include "kernels/nchwc.h"

#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct pcase {
    size_t n, c, h, w, oc; /* the pointwise conv: c -> oc at h x w */
    size_t k, s, d, p;     /* the depthwise conv: k x k, stride, dilation, padding */
    nnf_act_kind act_pw, act_dw;
    int bias, nonfinite;
} pcase;

static nnf_threadpool *pools[3]; /* NULL (inline), 2 and 3 threads */
static int pair_checks;          /* AVX-512 cases on the two-block depthwise rows */

static void run_case(const pcase *q, nnf_isa isa) {
    size_t span = (q->k - 1) * q->d + 1;
    if (q->h + 2 * q->p < span || q->w + 2 * q->p < span)
        return;
    size_t oh = (q->h + 2 * q->p - span) / q->s + 1, ow = (q->w + 2 * q->p - span) / q->s + 1;
    nnf_conv2d_shape ps = {.n = q->n,
                           .c = q->c,
                           .h = q->h,
                           .w = q->w,
                           .oc = q->oc,
                           .group = 1,
                           .kh = 1,
                           .kw = 1,
                           .sh = 1,
                           .sw = 1,
                           .dh = 1,
                           .dw = 1,
                           .oh = q->h,
                           .ow = q->w};
    nnf_conv2d_shape ds = {.n = q->n,
                           .c = q->oc,
                           .h = q->h,
                           .w = q->w,
                           .oc = q->oc,
                           .group = q->oc,
                           .kh = q->k,
                           .kw = q->k,
                           .sh = q->s,
                           .sw = q->s,
                           .dh = q->d,
                           .dw = q->d,
                           .pt = q->p,
                           .pl = q->p,
                           .oh = oh,
                           .ow = ow};
    size_t cb = nnf_nchwc_blocks(q->c), ocb = nnf_nchwc_blocks(q->oc);
    size_t nx = q->n * cb * q->h * q->w * 8, nmid = q->n * ocb * q->h * q->w * 8,
           ny = q->n * ocb * oh * ow * 8;
    float *wp = check_rand_buf(q->oc * q->c), *wd = check_rand_buf(q->oc * q->k * q->k);
    float *bp = check_rand_buf(q->oc), *bd = check_rand_buf(q->oc);
    float *x = check_rand_buf(nx), *mid = malloc(nmid * sizeof(float)),
          *ref = malloc(ny * sizeof(float));
    float *y = malloc((ny + 16) * sizeof(float));
    for (size_t i = 0; i < nx; i++) /* padding lanes of a blocked tensor are zero */
        if ((i % 8) >= q->c - i / 8 / (q->h * q->w) % cb * 8)
            x[i] = 0.0f;
    if (q->nonfinite) {
        x[0] = NAN;
        x[nx / 2 - nx / 2 % 8] = INFINITY;
    }
    nnf_nchwc_conv *pw = NULL;
    nnf_nchwc_dw *dw = NULL;
    CHECK(nnf_nchwc_conv_create(&ps, 1, isa, wp, &pw) == NNF_OK);
    CHECK(nnf_nchwc_dw_create(&ds, isa, wd, &dw) == NNF_OK);
    if (!pw || !dw)
        goto done;
    CHECK(nnf_nchwc_pw_dw_supported(pw, dw));
    nnf_epilogue ep = nnf_epilogue_default(), ed = nnf_epilogue_default();
    ep.act.kind = q->act_pw;
    ed.act.kind = q->act_dw;
    ep.act.beta = ed.act.beta = 6.0f; /* Clip(0, 6) */
    if (q->bias) {
        ep.bias = bp;
        ed.bias = bd;
        ep.bias_kind = ed.bias_kind = NNF_BIAS_PER_ROW;
    }
    CHECK(nnf_nchwc_conv_run(pw, x, mid, &ep, NULL) == NNF_OK);
    CHECK(nnf_nchwc_dw_run(dw, mid, ref, &ed, NULL) == NNF_OK);
    if (isa >= NNF_ISA_AVX512) {
        /* the AVX-512 tier's two-block depthwise rows are the AVX2 kernel's
         * bits (a conv may run blocks on either) */
        nnf_nchwc_dw *d2 = NULL;
        float *ref2 = malloc(ny * sizeof(float));
        CHECK(nnf_nchwc_dw_create(&ds, NNF_ISA_AVX2, wd, &d2) == NNF_OK);
        CHECK(d2 && nnf_nchwc_dw_run(d2, mid, ref2, &ed, NULL) == NNF_OK);
        CHECK_MSG(!memcmp(ref, ref2, ny * sizeof(float)),
                  "depthwise AVX-512 vs AVX2: n%zu c%zu %zux%zu, dw %zux%zu s%zu d%zu p%zu differ",
                  q->n, q->oc, q->h, q->w, q->k, q->k, q->s, q->d, q->p);
        pair_checks += nnf_nchwc_dw_pair_ok(dw, &ed, NULL);
        nnf_nchwc_dw_destroy(d2);
        free(ref2);
    }
    for (int t = 0; t < 3; t++) {
        for (size_t i = 0; i < ny + 16; i++)
            y[i] = -7.0f;
        CHECK(nnf_nchwc_pw_dw_run(pw, dw, x, y, &ep, &ed, pools[t]) == NNF_OK);
        int same = !memcmp(y, ref, ny * sizeof(float)), kept = 1;
        for (size_t i = ny; i < ny + 16; i++)
            kept &= y[i] == -7.0f;
        CHECK_MSG(
            same && kept, "%s, %d threads: n%zu c%zu %zux%zu -> %zu, dw %zux%zu s%zu d%zu p%zu: %s",
            nnf_isa_name(isa), t ? t + 1 : 1, q->n, q->c, q->h, q->w, q->oc, q->k, q->k, q->s, q->d,
            q->p, same ? "wrote past the output" : "differs from the kernels run apart");
    }
    /* a residual has no place in either */
    ed.residual = ref;
    CHECK(nnf_nchwc_pw_dw_run(pw, dw, x, y, &ep, &ed, NULL) == NNF_ERR_INVALID_ARGUMENT);
    nnf_error_clear();
done:
    nnf_nchwc_conv_destroy(pw);
    nnf_nchwc_dw_destroy(dw);
    free(wp), free(wd), free(bp), free(bd), free(x), free(mid), free(ref), free(y);
}

/* Uniform in [lo, hi]. */
static size_t uniform(size_t lo, size_t hi) {
    return lo + (size_t)(check_unit() * (double)(hi - lo + 1));
}

/* A channel count of whole blocks (up to `blocks`) off by -1, 0 or +1; one
 * draw per statement, so a seed replays on any compiler. */
static size_t around_blocks(size_t blocks) {
    size_t b = uniform(1, blocks);
    return 8 * b + uniform(0, 2) - 1;
}

/* Random shapes on a wider grid than the fixed cases: channel counts at and
 * around whole blocks, maps from 1 pixel to rows wide enough that the
 * buffer holds a few of them, every kernel extent the depthwise rows
 * specialise and some they do not, strides 1-3, dilation 2, padding 0-3. */
static void soak(void) {
    static const nnf_act_kind acts[] = {NNF_ACT_NONE, NNF_ACT_RELU,    NNF_ACT_CLIP,
                                        NNF_ACT_SILU, NNF_ACT_SIGMOID, NNF_ACT_HARD_SWISH};
    static const size_t ks[] = {1, 3, 3, 5, 5, 7};
    long cases = check_soak_begin();
    for (long i = 0; i < cases;) {
        pcase q = {.n = 1 + (size_t)(check_unit() < 0.2)};
        q.c = check_unit() < 0.5 ? uniform(1, 20) : around_blocks(8);
        q.oc = check_unit() < 0.3 ? uniform(1, 30) : around_blocks(24);
        q.h = uniform(1, 40);
        q.w = check_unit() < 0.2 ? uniform(200, 900) : uniform(1, 60);
        q.k = ks[uniform(0, 5)];
        q.s = uniform(1, 3);
        q.d = check_unit() < 0.2 ? 2 : 1;
        q.p = uniform(0, 3);
        q.act_pw = acts[uniform(0, 5)];
        q.act_dw = acts[uniform(0, 5)];
        q.bias = check_unit() < 0.7;
        q.nonfinite = check_unit() < 0.1;
        size_t span = (q.k - 1) * q.d + 1;
        if (q.h + 2 * q.p < span || q.w + 2 * q.p < span ||
            (double)(q.n * q.h * q.w * q.oc * (q.c + q.k * q.k)) > 2e7)
            continue;
        for (int t = NNF_ISA_SCALAR; t <= (int)nnf_cpu_get()->max_isa; t++)
            run_case(&q, (nnf_isa)t);
        i++;
    }
    if (cases)
        check_soak_end(cases, "fused pointwise/depthwise cases");
}

int main(void) {
    if (nnf_threadpool_create(2, &pools[1]) != NNF_OK ||
        nnf_threadpool_create(3, &pools[2]) != NNF_OK)
        return 1;
    static const pcase cases[] = {
        /* MobileNetV2's blocks, small maps (one pass of the buffer) */
        {1, 16, 14, 14, 96, 3, 2, 1, 1, NNF_ACT_CLIP, NNF_ACT_CLIP, 1, 0},
        {1, 24, 13, 13, 144, 3, 1, 1, 1, NNF_ACT_CLIP, NNF_ACT_CLIP, 1, 0},
        /* sizes 1, primes, tile and block edges */
        {1, 1, 1, 1, 1, 3, 1, 1, 1, NNF_ACT_NONE, NNF_ACT_NONE, 0, 0},
        {2, 7, 5, 13, 17, 3, 1, 1, 1, NNF_ACT_RELU, NNF_ACT_NONE, 1, 0},
        {1, 9, 7, 31, 31, 5, 2, 1, 2, NNF_ACT_NONE, NNF_ACT_RELU, 1, 0},
        {1, 8, 6, 9, 40, 3, 2, 2, 2, NNF_ACT_SILU, NNF_ACT_CLIP, 1, 0},
        {3, 13, 4, 3, 25, 5, 1, 1, 2, NNF_ACT_CLIP, NNF_ACT_NONE, 1, 0},
        /* no padding: the top rows are never read by a stride-2 window */
        {1, 5, 12, 11, 24, 3, 2, 1, 0, NNF_ACT_CLIP, NNF_ACT_CLIP, 1, 0},
        /* wide maps: the buffer holds a few rows and slides */
        {1, 5, 7, 997, 24, 3, 1, 1, 1, NNF_ACT_CLIP, NNF_ACT_CLIP, 1, 0},
        {1, 16, 11, 301, 96, 3, 2, 1, 1, NNF_ACT_CLIP, NNF_ACT_CLIP, 1, 0},
        {2, 9, 9, 613, 33, 5, 1, 2, 4, NNF_ACT_RELU, NNF_ACT_NONE, 0, 0},
        {1, 8, 10, 509, 16, 5, 2, 1, 2, NNF_ACT_NONE, NNF_ACT_CLIP, 1, 0},
        /* group counts two or three threads do not share evenly (AVX-512: 9
         * and 14 groups of 8 blocks, AVX2: 35 of 3): the remainder's
         * groups a band per thread */
        {1, 96, 14, 14, 576, 3, 1, 1, 1, NNF_ACT_CLIP, NNF_ACT_CLIP, 1, 0},
        {1, 8, 13, 9, 840, 3, 2, 1, 1, NNF_ACT_RELU, NNF_ACT_NONE, 1, 0},
        /* equal groups, a multiple of the threads (AVX-512: 6 of 8 blocks):
         * whole groups, no bands */
        {1, 16, 14, 14, 384, 3, 1, 1, 1, NNF_ACT_CLIP, NNF_ACT_CLIP, 1, 0},
        /* NaN and Inf */
        {1, 9, 6, 257, 24, 3, 1, 1, 1, NNF_ACT_NONE, NNF_ACT_NONE, 1, 1},
        /* EfficientNet's SiLU after the depthwise conv too (the AVX-512
         * pairs' SiLU the AVX2 tier's bits), with an odd last block, NaN and
         * Inf, without a bias */
        {1, 16, 13, 29, 40, 3, 1, 1, 1, NNF_ACT_SILU, NNF_ACT_SILU, 1, 0},
        {1, 8, 12, 17, 24, 3, 2, 1, 1, NNF_ACT_SILU, NNF_ACT_SILU, 1, 1},
        {2, 7, 9, 7, 56, 3, 1, 1, 1, NNF_ACT_SILU, NNF_ACT_SILU, 0, 0},
        /* and its 5x5s (AVX-512 pairs too): 14x14, a 7x7 map (one tile of
         * 7 with two padding columns each side), stride 2 */
        {1, 16, 14, 14, 48, 5, 1, 1, 2, NNF_ACT_SILU, NNF_ACT_SILU, 1, 0},
        {1, 24, 7, 7, 40, 5, 1, 1, 2, NNF_ACT_SILU, NNF_ACT_SILU, 1, 1},
        {1, 8, 15, 27, 24, 5, 2, 1, 2, NNF_ACT_SILU, NNF_ACT_CLIP, 1, 0},
        /* MobileNetV3's HardSwish after the depthwise conv (3x3 and 5x5) */
        {1, 16, 13, 29, 40, 3, 2, 1, 1, NNF_ACT_HARD_SWISH, NNF_ACT_HARD_SWISH, 1, 1},
        {1, 24, 14, 14, 72, 5, 1, 1, 2, NNF_ACT_RELU, NNF_ACT_HARD_SWISH, 1, 0},
        /* 7x7s: ConvNeXt's (stride 1, a bias and clamp: the AVX-512 pairs'
         * one 7x7 form) at 14x14 (a first tile skipping three columns, a last
         * one three) and a 7x7 map (one tile of 7 with three padding columns
         * each side, NaN); stride 2 and SiLU on a wide row (the AVX2 kernel
         * on every tier) */
        {1, 16, 14, 14, 48, 7, 1, 1, 3, NNF_ACT_NONE, NNF_ACT_NONE, 1, 0},
        {1, 24, 7, 7, 40, 7, 1, 1, 3, NNF_ACT_RELU, NNF_ACT_NONE, 1, 1},
        {1, 8, 15, 27, 24, 7, 2, 1, 3, NNF_ACT_SILU, NNF_ACT_CLIP, 1, 0},
        {1, 8, 9, 61, 16, 7, 1, 1, 3, NNF_ACT_NONE, NNF_ACT_SILU, 0, 0},
    };
    for (int t = NNF_ISA_SCALAR; t <= (int)nnf_cpu_get()->max_isa; t++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run_case(&cases[i], (nnf_isa)t);
    soak();
    printf("two-block depthwise rows: %d cases\n", pair_checks);
    CHECK(nnf_cpu_get()->max_isa < NNF_ISA_AVX512 || pair_checks >= 24);
    nnf_threadpool_destroy(pools[1]);
    nnf_threadpool_destroy(pools[2]);
    TEST_MAIN_END();
}

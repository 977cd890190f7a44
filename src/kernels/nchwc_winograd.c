/* Winograd F(4x4,3x3) on NCHWc8 tensors: the transformed weights, the split
 * of the output tiles into work items, and the GEMMs between the AVX2
 * transforms (x86/nchwc_winograd_avx2.c). See nchwc.h for the data flow.
 *
 * A work item is a block of tiles of one image, taken by whichever thread
 * is free; each item's values depend only on its tiles, so results do not
 * depend on the thread count. Its 36 V and 36 M matrices are sized to stay
 * in L2/L3 between the transforms and the GEMMs. */
#include "kernels/nchwc.h"

#include "base/alloc.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

const double nnf_wino2_bt[5][5] = {
    {2, -1, -2, 1, 0}, {0, 2, 1, -1, 0}, {0, -2, 3, -1, 0}, {0, -1, 0, 1, 0}, {0, 2, -1, -2, 1}};
const double nnf_wino2_g[5][2] = {
    {1.0 / 2, 0}, {1.0 / 2, 1.0 / 2}, {1.0 / 6, -1.0 / 6}, {1.0 / 6, 1.0 / 3}, {0, 1}};
const double nnf_wino2_at[4][5] = {
    {1, 1, 1, 1, 0}, {0, 1, -1, 2, 0}, {0, 1, 1, 4, 0}, {0, 1, -1, 8, 1}};

/* The stride-2 form: on both SIMD tiers (its transforms are in
 * x86/nchwc_winograd_s2_avx512.c and x86/nchwc_winograd_s2_avx2.c). */
static bool s2_form(const nnf_conv2d_shape *s, nnf_isa isa) {
    return isa >= NNF_ISA_AVX2 && s->sh == 2 && s->sw == 2;
}

/* One axis of the mosaic (extent n, dilation d): phase r (indices r, r +
 * d, ...) has n / d + (r < n % d) indices and starts after the phases
 * before it and a gutter after each. */
static size_t phase_start(size_t n, size_t d, size_t r) {
    return r * (n / d + 1) + (r < n % d ? r : n % d);
}
/* The mosaic's extent: n and a gutter between every two phases that have
 * indices. */
static size_t mosaic_extent(size_t n, size_t d) {
    return n + (d < n ? d : n) - 1;
}

size_t nnf_nchwc_wino_phases(const nnf_conv2d_shape *s, nnf_conv2d_shape *ps) {
    size_t d = s->dh, hw;
    /* (mosaic_pays counts up to 9 h w taps) */
    if (d < 2 || s->dw != d || s->kh != 3 || s->kw != 3 || s->sh != 1 || s->sw != 1 ||
        s->group != 1 || s->pt != d || s->pl != d || s->oh != s->h || s->ow != s->w ||
        !nnf_mul_size(s->h, s->w, &hw) || hw > SIZE_MAX / 64 || s->h > SIZE_MAX / 4 ||
        s->w > SIZE_MAX / 4)
        return 0;
    size_t mh = mosaic_extent(s->h, d), mw = mosaic_extent(s->w, d);
    *ps = *s;
    ps->h = ps->oh = mh;
    ps->w = ps->ow = mw;
    ps->dh = ps->dw = 1;
    ps->pt = ps->pl = 1;
    return d;
}

/* Whether a dilated conv's mosaic (ps) pays: its F(4x4,3x3) products at
 * most half the taps inside the input, which the direct kernel runs
 * (nnf_nchwc_row_parts). Per product the Winograd ran slower than the
 * direct kernel per tap on ASPP's 2048 -> 256 convs (75 MB of transformed
 * weights; 1 thread): at dilation 12 on 28x28, 3600 products and 3600 taps
 * a channel pair, 29.9 against 17.5 ms; at 6 (2916 against 5184) 22.8
 * against 24.6; at 6 on 33x33 (3600 against 7569) 30.1 against about 37.
 * The backbone's: 256 at d 2 on 28x28 (2304 against 6400) 1.56 against
 * 3.4, 512 at d 4 (2304 against 5776) 8.6 against 12.7. */
static bool mosaic_pays(const nnf_conv2d_shape *s, const nnf_conv2d_shape *ps) {
    size_t d = s->dh;
    size_t taps = (s->h + 2 * (s->h > d ? s->h - d : 0)) * (s->w + 2 * (s->w > d ? s->w - d : 0));
    return 2 * 36 * ((ps->h + 3) / 4) * ((ps->w + 3) / 4) <= taps;
}

/* The shape the kernels run: a dilated conv's phases (nnf_nchwc_wino_phases)
 * or the conv itself. */
static const nnf_conv2d_shape *run_shape(const nnf_conv2d_shape *s, nnf_conv2d_shape *ps) {
    return s && nnf_nchwc_wino_phases(s, ps) ? ps : s;
}

bool nnf_nchwc_wino_supported(const nnf_conv2d_shape *s, nnf_isa isa) {
    nnf_conv2d_shape ps;
    s = run_shape(s, &ps);
    return s && isa >= NNF_ISA_AVX2 && s->group == 1 && s->kh == 3 && s->kw == 3 &&
           ((s->sh == 1 && s->sw == 1) || s2_form(s, isa)) && s->dh == 1 && s->dw == 1 &&
           s->c > 0 && s->oc > 0 && s->oh > 0 && s->ow > 0;
}

/* The fewest tiles the blocked kernel runs on: 16, ResNet-50's 14x14 maps.
 * On Zen 4 (1 MiB L2) it ran ResNet-50's 256-channel 3x3s at 14x14 in
 * 1.10-1.21 ms where the NCHW one took 1.23 plus 0.03 of reorders
 * (ResNet-50 in-process A/B 0.979 on 1 thread, 0.952 on 2). On Zen 3 (512
 * KiB L2) an earlier round measured it 1.18x slower there and kept those
 * maps in NCHW below 24 tiles; the kernel has changed since, and the
 * seventeenth round measured it even with the NCHW kernel and its reorders
 * on 1 thread (2.60 against 2.61 ms, caches swept before each run) and 1.26x
 * faster on 2 (1.65 against 2.08): ResNet-50 A/B 0.978 on 1 thread, 0.953
 * on 2, on Zen 3 too. */
#define WINO_MIN_TILES 16

/* The fewest input channels: 32. YOLOv5s's 32-channel 3x3 at 160x160 ran
 * 4.87 -> 3.80 ms in the model on Zen 4 (2.46 -> 2.23 on 2 threads) against
 * the blocked direct kernel, and 14.2 -> 8.2 ms on a Zen 1 with 512 KiB of
 * L2 (the U-Net's 32-channel 3x3s at 256x256: 32 -> 20 ms, the model 313 ->
 * 267 ms). An earlier round had measured 8.9 against 7.8 ms on another
 * 512 KiB-L2 core and kept 64 there; the transforms have changed since. */
size_t nnf_nchwc_wino_min_c(void) {
    return 32;
}

/* On the AVX-512 tier (two 512-bit FMA pipes) the blocked direct kernel
 * runs maps of fewer than 16 tiles (ResNet-50's 7x7), where the NCHW
 * Winograd and its reorders would. At 16 tiles (ResNet-50's 256-channel 3x3s
 * at 14x14) Winograd wins on AVX-512 too, though its 36 transformed weight
 * matrices are four times the direct kernel's (9.4 against 2.4 MB a conv,
 * streamed from memory for 16 GEMM rows): Zen 5, 0.43 against 1.02 ms a conv
 * in the bench, ResNet-50 in-process A/B 0.942-0.953 on 1 thread and
 * 0.943-0.952 on 2 (peak RSS +35 MiB, ORT's is 2.9x ours); on an Intel Xeon
 * the direct kernel there had measured 0.95-0.98 of Winograd's time before
 * the AVX-512 Winograd transforms and even after them. */
bool nnf_nchwc_direct_wins(const nnf_conv2d_shape *s, nnf_isa isa) {
    size_t tiles = ((s->oh + 3) / 4) * ((s->ow + 3) / 4);
    return isa >= NNF_ISA_AVX512 && tiles < WINO_MIN_TILES;
}

/* The stride-2 form's fewest input channels: its transforms handle 81
 * values a tile for each input and output channel, against 36 for stride 1,
 * so short GEMMs lose to them. Zen 5, 1 thread, against the direct kernel
 * (bench_kernels, SiLU): 32 -> 64 at 160x160 out 5.7 against 4.1 ms,
 * 64 -> 128 at 80x80 3.5-3.7 against 3.98 (1.80 against 2.10 on 2
 * threads; in YOLOv5s 4.11 against 4.29, the model in one process 0.99 /
 * 1.007 in both orders), 128 -> 256 at 40x40 2.97 against 3.97, 128 -> 128
 * at 28x28 (ResNet-50's) 0.74 against 0.96, 256 -> 512 at 20x20 3.13
 * against 3.95. */
#define WINO2_MIN_C 64

/* And its fewest tiles: 25 (YOLOv5s's 20x20 maps). Its 36 weight matrices
 * are 4x the direct kernel's, read from memory in the model: ResNet-50's
 * 256-channel one at 14x14 (16 tiles) ran 0.97 of the direct kernel's time
 * in the bench but 1.11-1.13 against 1.10-1.12 ms in the model, where
 * YOLOv5s's 256 -> 256 at 20x20 ran 1.81 against 2.05 and 256 -> 512 3.18
 * against 4.05 (1 thread). */
#define WINO2_MIN_TILES 25

/* The AVX2 tier on Zen 1 (ymm_halves): each ymm FMA takes two cycles of
 * its pipe, while the transformed weights stream from memory as fast as on
 * Zen 3, so fewer multiplies win where Zen 3 and 4 measured the stream:
 * F(4x4,3x3) at 16 tiles (ResNet-50's 14x14 256-channel 3x3s, ~2.1-2.5
 * against 2.7-3.2 ms as F(2x2) in the model on 1 thread, nnfuse profile)
 * and the stride-2 form from 16 tiles (its 256-channel 3x3 at 14x14 out). */
static bool half_fmas(nnf_isa isa) {
    return isa == NNF_ISA_AVX2 && nnf_cpu_get()->ymm_halves;
}

const double nnf_wino_f2_bt[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
const double nnf_wino_f2_g[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
const double nnf_wino_f2_at[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};

/* F(2x2,3x3) where F(4x4,3x3) has at most 16 tiles (ResNet-50's 14x14: its
 * 9.4 MB of transformed weights a conv come from memory for 16 GEMM rows,
 * 0.69-0.77 ms in the model against 0.41-0.5 with them in cache) and the
 * 2x2 tiles are 16 or more (ResNet-50's 512-channel 3x3s at 7x7: 16.8 MB
 * of transformed weights against the direct kernel's 9.4 MB, both streamed
 * from memory). On Zen 4 (zmm_halves) and on the AVX2 tier the direct
 * kernel's FMAs are 8 wide: 2.45-2.48 -> 1.76-1.98 ms at 7x7 in the model
 * (the model 0.97 on 1 thread, 0.99 on 2, ab_builds). On Zen 5 (full zmm
 * FMAs, 1 MiB of L2, 32 MiB of L3; fifty-seventh round) 1.08 -> 0.66-0.68
 * ms a layer, the model 0.974 on 1 thread and 0.986 on 2 (ab_builds, two
 * processes each); on an AVX-512 Xeon 0.9935 (thirty-ninth round). The
 * price is 15 MiB more of resident weights. */
bool nnf_nchwc_wino_f2(const nnf_conv2d_shape *s, nnf_isa isa) {
    nnf_conv2d_shape ps;
    s = run_shape(s, &ps);
    size_t t4 = ((s->oh + 3) / 4) * ((s->ow + 3) / 4), t2 = ((s->oh + 1) / 2) * ((s->ow + 1) / 2);
    size_t max_t4 =
        half_fmas(isa) && !nnf_nchwc_wino_f4_heavy(s) ? WINO_MIN_TILES - 1 : WINO_MIN_TILES;
    return isa >= NNF_ISA_AVX2 && s->sh == 1 && s->sw == 1 && nnf_nchwc_wino_supported(s, isa) &&
           t4 <= max_t4 && t2 >= 16 && s->c >= 64;
}

/* F(4x4,3x3)'s 36 transformed weight matrices of more than 16 MiB (4x the
 * weights: 512 x 256 channels and up). Where FMAs run as halves (Zen 1),
 * maps of 16 tiles keep F(4x4,3x3) for speed (half_fmas), but these take
 * F(2x2,3x3) and its 16 matrices, trading time for memory: the U-Net's two
 * 512-channel 3x3s at 16x16 keep 25 instead of 57 MB (the model's peak RSS
 * 156 / 164 -> 126 / 133 MiB on 1 / 2 threads, 0.61 / 0.67 -> 0.49 / 0.54
 * of ORT's; its first inference 0.51 -> 0.47, less to fault in) for 1.8x
 * their time (13.6 -> 24.7 ms, 1.78x the products; the model 1.037x /
 * 1.019x in ab_builds). Lazy weights (transformed at run time, a few
 * output panels at a time) were measured instead and kept 14-21 MiB less
 * for 1.25x the time of every 64-tile map they ran. ResNet-50's 256-channel
 * 3x3s at 14x14 (9.4 MB) keep F(4x4,3x3). */
bool nnf_nchwc_wino_f4_heavy(const nnf_conv2d_shape *s) {
    size_t c8 = nnf_nchwc_blocks(s->c) * NNF_NCHWC_B, oc8 = nnf_nchwc_blocks(s->oc) * NNF_NCHWC_B;
    return c8 * oc8 > ((size_t)16 << 20) / (36 * sizeof(float));
}

bool nnf_nchwc_wino_wins(const nnf_conv2d_shape *s, nnf_isa isa) {
    nnf_conv2d_shape ps;
    if (nnf_nchwc_wino_phases(s, &ps)) {
        if (!mosaic_pays(s, &ps))
            return false;
        s = &ps;
    }
    size_t tiles = ((s->oh + 3) / 4) * ((s->ow + 3) / 4);
    if (nnf_nchwc_wino_f2(s, isa))
        return true;
    if (!nnf_nchwc_wino_supported(s, isa) || s->c < nnf_nchwc_wino_min_c() ||
        tiles < WINO_MIN_TILES)
        return false;
    if (s->sh == 2)
        return s->c >= WINO2_MIN_C && tiles >= (half_fmas(isa) ? WINO_MIN_TILES : WINO2_MIN_TILES);
    return !nnf_nchwc_direct_wins(s, isa) && nnf_conv_select(s, isa) == NNF_CONV_ALGO_WINOGRAD;
}

void nnf_nchwc_wino_destroy(nnf_nchwc_wino *k) {
    if (!k)
        return;
    for (size_t xi = 0; xi < k->nmat; xi++)
        nnf_gemm_packed_destroy(k->u[xi]);
    nnf_nchwc_wino_destroy(k->phase);
    nnf_free(k);
}

nnf_status nnf_nchwc_wino_create(const nnf_conv2d_shape *s, nnf_isa isa, const float *w,
                                 nnf_nchwc_wino **out) {
    return nnf_nchwc_wino_create_as(s, isa, s && nnf_nchwc_wino_f2(s, isa), w, out);
}

nnf_status nnf_nchwc_wino_create_as(const nnf_conv2d_shape *s, nnf_isa isa, int f2, const float *w,
                                    nnf_nchwc_wino **out) {
    if (!out || !s || !w)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "nchwc winograd: NULL argument");
    *out = NULL;
    nnf_isa top = isa > nnf_cpu_get()->max_isa ? nnf_cpu_get()->max_isa : isa;
    if (!nnf_nchwc_wino_supported(s, top) || (f2 && s->sh != 1))
        return nnf_error(NNF_ERR_UNSUPPORTED,
                         "nchwc winograd: not a 3x3 dense conv of stride 1 or 2 on a SIMD tier "
                         "(F(2x2,3x3): of stride 1)");
    nnf_conv2d_shape ps;
    size_t dil = nnf_nchwc_wino_phases(s, &ps);
    nnf_nchwc_wino *phase = NULL;
    if (dil) {
        nnf_status st = nnf_nchwc_wino_create_as(&ps, isa, f2, w, &phase);
        if (st != NNF_OK)
            return st;
    }
    nnf_nchwc_wino *k = nnf_calloc(1, sizeof *k);
    if (!k) {
        nnf_nchwc_wino_destroy(phase);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "nchwc winograd: out of memory for the kernel");
    }
    if (phase) {
        *k = *phase;
        k->s = *s;
        k->nmat = 0; /* the weights are phase's */
        k->dil = dil;
        k->phase = phase;
        snprintf(k->name, sizeof k->name, "%s_dil%zu", phase->name, dil);
        *out = k;
        return NNF_OK;
    }
    nnf_status st = NNF_OK;
    k->s = *s;
    k->s2 = s->sh == 2;
    k->f2 = f2 != 0;
    k->nmat = k->f2 ? 16 : 36;
    k->tile = k->f2 ? 2 : 4;
    k->cfg = nnf_gemm_cfg_for(isa);
    k->c8 = nnf_nchwc_blocks(s->c) * NNF_NCHWC_B;
    k->oc8 = nnf_nchwc_blocks(s->oc) * NNF_NCHWC_B;
    size_t wn; /* w's floats (nnf_gemm_packed_create checks the packed sizes) */
    if (!nnf_mul_size(s->oc, s->c, &wn) || !nnf_mul_size(wn, 9, &wn)) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "nchwc winograd: weights too large");
        goto fail;
    }
    /* U_xi as B (K = c8 rows of input channels, N = oc8 columns), zeros
     * past c and oc, the transform writing the packed layout itself (a
     * row-major copy of the 36 matrices, then packed, took 38 MB for 512
     * channels and two more passes over it) */
    st = nnf_gemm_packed_create_n(k->cfg, NNF_GEMM_B, k->oc8, k->c8, k->nmat, k->u);
    if (st != NNF_OK)
        goto fail;
    for (size_t xi = 0; xi < k->nmat; xi++)
        nnf_gemm_packed_zero_outside(k->u[xi], s->oc, s->c);
    /* a panel (r output channels) over one K block at a time: each of the
     * 36 matrices written front to back in whole lines. (Input channels
     * outermost, 8 output channels a call, wrote half lines across every
     * panel of every matrix, each line read before it was written.) */
    size_t r = k->u[0]->r, kc = k->u[0]->kc;
    if (r > 32 || r % 8) {
        st = nnf_error(NNF_ERR_UNSUPPORTED, "nchwc winograd: GEMM panels of %zu columns", r);
        goto fail;
    }
    /* the same bits from either tier's transform; 8 doubles a vector: a
     * 256 -> 256 conv's F(4x4,3x3) weights 1.23 -> 0.93 ms, the stride-2
     * form's 0.97 -> 0.73, F(2x2,3x3)'s 0.62 -> 0.46 (then the 9.4 MB of
     * streamed stores bound it: ~10 GB/s) */
    int wide = top >= NNF_ISA_AVX512;
    void (*panel)(const float *, size_t, size_t, size_t, size_t, float *const *) =
        k->s2   ? (wide ? nnf_nchwc_wino2_weight_panel_avx512 : nnf_nchwc_wino2_weight_panel_avx2)
        : k->f2 ? (wide ? nnf_nchwc_winof2_weight_panel_avx512 : nnf_nchwc_winof2_weight_panel_avx2)
                : (wide ? nnf_wino_weight_panel_avx512 : nnf_wino_weight_panel_avx2);
    for (size_t p0 = 0; p0 < s->oc && !k->u[0]->ready; p0 += r)
        for (size_t k0 = 0; k0 < s->c; k0 += kc) {
            float *dst[36];
            for (size_t xi = 0; xi < k->nmat; xi++)
                dst[xi] = nnf_gemm_packed_at(k->u[xi], p0, k0);
            const float *wp = w + (p0 * s->c + k0) * 9;
            size_t m = s->oc - p0 < r ? s->oc - p0 : r, kk = s->c - k0 < kc ? s->c - k0 : kc;
            panel(wp, s->c * 9, m, r, kk, dst);
        }
    snprintf(k->name, sizeof k->name,
             k->s2   ? "f32_conv_nchwc_winograd_s2_4x4_%s"
             : k->f2 ? "f32_conv_nchwc_winograd2x2_%s"
                     : "f32_conv_nchwc_winograd4x4_%s",
             k->cfg->name + strlen("f32_gemm_"));
    *out = k;
    return NNF_OK;
fail:
    nnf_nchwc_wino_destroy(k);
    return st;
}

#define WINO_MAX_SLOTS 256

/* Where each of the 36 matrices starts for `rows` tiles of `width` floats
 * (c8 for V, oc8 for M): unit-major, nnf_nchwc_wino_rows units of rows x
 * width, each matrix padded to an odd number of lines; base[36] is the
 * total. False on overflow. */
static bool wino_bases(const nnf_nchwc_wino *k, size_t rows, size_t width, size_t base[37]) {
    size_t at = 0, f;
    for (size_t xi = 0; xi < 36; xi++) {
        if (xi >= k->nmat) { /* past the form's matrices: empty */
            base[xi] = at;
            continue;
        }
        base[xi] = at;
        if (!nnf_mul_size(rows * nnf_nchwc_wino_rows(k, xi), width, &f) ||
            !nnf_add_size(at, nnf_wino_odd_lines(f), &at))
            return false;
    }
    base[36] = at;
    return true;
}

typedef struct wino_job {
    const nnf_nchwc_wino *k;
    const float *x, *res;
    float *y;
    const nnf_epilogue *ep;
    size_t tiles, blocks; /* tiles and items per image */
    int even;             /* items of tiles / blocks tiles each, not whole panels */
    size_t slot_floats;
    size_t x_img, y_img; /* floats per image */
    float *scratch;
    int slots;
    atomic_int failed;
    atomic_int busy[WINO_MAX_SLOTS];
} wino_job;

/* Item i of an image (see the split in nnf_nchwc_wino_run): on one thread
 * the image's whole register panels (mr tiles) dealt out evenly, the last
 * item also taking the tiles past them; on several (even) the tiles dealt
 * out evenly. Returns the count, *t0 the first tile. */
static size_t item_tiles(const wino_job *j, size_t i, size_t *t0) {
    if (j->even) {
        *t0 = i * j->tiles / j->blocks;
        return (i + 1) * j->tiles / j->blocks - *t0;
    }
    size_t mr = j->k->cfg->mr, panels = j->tiles / mr, n = j->blocks;
    size_t p0 = i * panels / n, p1 = (i + 1) * panels / n;
    *t0 = p0 * mr;
    return i + 1 == n ? j->tiles - *t0 : (p1 - p0) * mr;
}

/* The tier's and form's transforms of tiles [t0, t0 + nt), the matrices at
 * vb / mb (offset by the first tile's row), `rows` tiles a unit. Stride 1:
 * two blocks per zmm on AVX-512. */
static void wino_input(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt, float *v,
                       const size_t *vb, size_t rows) {
    if (k->s2 && k->cfg->isa >= NNF_ISA_AVX512)
        nnf_nchwc_wino2_input_avx512(k, x, t0, nt, v, vb, rows * k->c8);
    else if (k->s2)
        nnf_nchwc_wino2_input_avx2(k, x, t0, nt, v, vb, rows * k->c8);
    else if (k->f2 && k->cfg->isa >= NNF_ISA_AVX512)
        nnf_nchwc_winof2_input_avx512(k, x, t0, nt, v, vb[1]);
    else if (k->f2)
        nnf_nchwc_winof2_input_avx2(k, x, t0, nt, v, vb[1]);
    else if (k->cfg->isa >= NNF_ISA_AVX512)
        nnf_nchwc_wino_input_avx512(k, x, t0, nt, v, vb[1]);
    else
        nnf_nchwc_wino_input_avx2(k, x, t0, nt, v, vb[1]);
}

static void wino_output(const nnf_nchwc_wino *k, const float *m, const size_t *mb, size_t rows,
                        size_t t0, size_t nt, float *y, const float *res, const nnf_epilogue *ep) {
    if (k->s2 && k->cfg->isa >= NNF_ISA_AVX512)
        nnf_nchwc_wino2_output_avx512(k, m, mb, rows * k->oc8, t0, nt, y, res, ep);
    else if (k->s2)
        nnf_nchwc_wino2_output_avx2(k, m, mb, rows * k->oc8, t0, nt, y, res, ep);
    else if (k->f2 && k->cfg->isa >= NNF_ISA_AVX512)
        nnf_nchwc_winof2_output_avx512(k, m, mb[1], t0, nt, y, res, ep);
    else if (k->f2)
        nnf_nchwc_winof2_output_avx2(k, m, mb[1], t0, nt, y, res, ep);
    else if (k->cfg->isa >= NNF_ISA_AVX512)
        nnf_nchwc_wino_output_avx512(k, m, mb[1], t0, nt, y, res, ep);
    else
        nnf_nchwc_wino_output_avx2(k, m, mb[1], t0, nt, y, res, ep);
}

/* M_xi = V_xi U_xi for `rows` tiles a unit; false if the GEMM failed. */
static bool wino_gemm(const nnf_nchwc_wino *k, size_t xi, const float *v, const size_t *vb,
                      float *m, const size_t *mb, size_t rows) {
    nnf_gemm_src a = nnf_gemm_src_matrix(v + vb[xi], k->c8, 0), u = nnf_gemm_src_packed(k->u[xi]);
    return nnf_gemm_run(k->cfg, rows * nnf_nchwc_wino_rows(k, xi), k->oc8, k->c8, &a, &u,
                        m + mb[xi], k->oc8, NULL, NULL) == NNF_OK;
}

static void wino_task(void *ctx, size_t item) {
    wino_job *j = ctx;
    const nnf_nchwc_wino *k = j->k;
    int slot = nnf_slot_claim(j->busy, j->slots);
    size_t b = item / j->blocks, t0, nt = item_tiles(j, item % j->blocks, &t0), vb[37], mb[37];
    /* the slot holds the largest item's (nnf_nchwc_wino_run) */
    wino_bases(k, nt, k->c8, vb);
    wino_bases(k, nt, k->oc8, mb);
    float *v = j->scratch + (size_t)slot * j->slot_floats, *m = v + vb[36];
    wino_input(k, j->x + b * j->x_img, t0, nt, v, vb, nt);
    for (size_t xi = 0; xi < k->nmat; xi++)
        if (!wino_gemm(k, xi, v, vb, m, mb, nt)) {
            atomic_store(&j->failed, 1);
            goto done;
        }
    wino_output(k, m, mb, nt, t0, nt, j->y + b * j->y_img, j->res ? j->res + b * j->y_img : NULL,
                j->ep);
done:
    nnf_slot_release(j->busy, slot);
}

/* Weight-heavy maps on several threads go in three phases over one image,
 * all its tiles at once: the input transform split by tiles, the 36 GEMMs
 * one per task, the output transform split by tiles. Split by tiles instead,
 * every item streamed all 36 transformed weight matrices (9.4 MB for 256
 * channels): YOLOv5s's 256-channel 3x3 at 20x20 ran 1.37x faster on 2
 * threads than on 1. A GEMM's rows do not change its sums, so the results
 * are those of the one-thread split. */
typedef struct wino_phase {
    wino_job *j;
    size_t b, chunk;       /* the image; tiles per transform task */
    size_t vb[37], mb[37]; /* the matrices of all the image's tiles */
} wino_phase;

/* Transform task i's tiles: [*t0, *t0 + the count returned). */
static size_t phase_tiles(const wino_phase *p, size_t i, size_t *t0) {
    *t0 = i * p->chunk;
    return p->j->tiles - *t0 < p->chunk ? p->j->tiles - *t0 : p->chunk;
}

static void phase_input(void *ctx, size_t i) {
    const wino_phase *p = ctx;
    const wino_job *j = p->j;
    size_t t0, nt = phase_tiles(p, i, &t0);
    wino_input(j->k, j->x + p->b * j->x_img, t0, nt, j->scratch + t0 * j->k->c8, p->vb, j->tiles);
}

/* Task i: the matrices largest first (the stride-2 form's 16- and 4-row
 * ones), so no thread starts a long GEMM while the others finish. */
static void phase_gemm(void *ctx, size_t i) {
    const wino_phase *p = ctx;
    wino_job *j = p->j;
    size_t xi = j->k->nmat - 1 - i;
    if (!wino_gemm(j->k, xi, j->scratch, p->vb, j->scratch + p->vb[36], p->mb, j->tiles))
        atomic_store(&j->failed, 1);
}

static void phase_output(void *ctx, size_t i) {
    const wino_phase *p = ctx;
    const wino_job *j = p->j;
    size_t t0, nt = phase_tiles(p, i, &t0);
    wino_output(j->k, j->scratch + p->vb[36] + t0 * j->k->oc8, p->mb, j->tiles, t0, nt,
                j->y + p->b * j->y_img, j->res ? j->res + p->b * j->y_img : NULL, j->ep);
}

static bool weight_heavy(const nnf_nchwc_wino *k, size_t tiles, int threads) {
    return threads > 1 && k->s.n < (size_t)threads && tiles > 1 &&
           k->c8 * k->oc8 > tiles * (k->c8 + k->oc8);
}

/* The dilated form's moves between a tensor (NCHWc8, [n][cb][h][w][8]) and
 * its phases' mosaic (nnf_nchwc_wino_phases; the gutters written as
 * zeros), a plane of 8 channels a task. */
typedef struct phase_move {
    const float *src;
    float *dst;
    size_t d, h, w, mh, mw; /* the tensor's map, the mosaic's */
    int merge;              /* mosaic to tensor */
} phase_move;

static void phase_plane(void *arg, size_t i) {
    const phase_move *m = arg;
    const size_t d = m->d, B = NNF_NCHWC_B;
    if (m->merge) {
        const float *src = m->src + i * m->mh * m->mw * B;
        float *dst = m->dst + i * m->h * m->w * B;
        for (size_t y = 0; y < m->h; y++) {
            const float *row = src + (phase_start(m->h, d, y % d) + y / d) * m->mw * B;
            for (size_t x = 0; x < m->w; x++)
                memcpy(dst + (y * m->w + x) * B, row + (phase_start(m->w, d, x % d) + x / d) * B,
                       B * sizeof(float));
        }
        return;
    }
    /* the mosaic's rows and columns in order: each phase's indices, then
     * its gutter (none after the last) */
    const float *src = m->src + i * m->h * m->w * B;
    float *dst = m->dst + i * m->mh * m->mw * B;
    for (size_t yy = 0, r = 0, y = 0; yy < m->mh; yy++) {
        float *o = dst + yy * m->mw * B;
        if (y >= m->h) { /* a gutter */
            memset(o, 0, m->mw * B * sizeof(float));
            y = ++r;
            continue;
        }
        for (size_t xx = 0, c = 0, x = 0; xx < m->mw; xx++, o += B) {
            if (x >= m->w) {
                memset(o, 0, B * sizeof(float));
                x = ++c;
                continue;
            }
            memcpy(o, src + (y * m->w + x) * B, B * sizeof(float));
            x += d;
        }
        y += d;
    }
}

static void phases_move(const nnf_nchwc_wino *k, const float *src, float *dst, size_t c8, int merge,
                        nnf_threadpool *pool) {
    phase_move m = {.src = src,
                    .dst = dst,
                    .d = k->dil,
                    .h = k->s.oh,
                    .w = k->s.ow,
                    .mh = k->phase->s.h,
                    .mw = k->phase->s.w,
                    .merge = merge};
    nnf_parallel_for(pool, k->s.n * (c8 / NNF_NCHWC_B), phase_plane, &m);
}

/* The dilated form: the input's mosaic (and the residual's) into scratch,
 * the undilated kernel over it, the output's phases back. */
static nnf_status run_phases(const nnf_nchwc_wino *k, const float *x, float *y,
                             const nnf_epilogue *e, nnf_threadpool *pool) {
    const nnf_conv2d_shape *ps = &k->phase->s;
    size_t px, xf, yf, in;
    if (!nnf_mul_size(ps->n, ps->h, &px) || !nnf_mul_size(px, ps->w, &px) ||
        !nnf_mul_size(px, k->c8, &xf) || !nnf_mul_size(px, k->oc8, &yf) ||
        !nnf_add_size(xf, e->residual ? yf : 0, &in))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: convolution too large", k->name);
    float *xs = nnf_thread_scratch(NNF_SCRATCH_CONV_IN, in);
    float *ys = nnf_thread_scratch(NNF_SCRATCH_CONV_OUT, yf);
    if (!xs || !ys)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory for the phases", k->name);
    nnf_epilogue pe = *e;
    phases_move(k, x, xs, k->c8, 0, pool);
    if (e->residual) {
        pe.residual = xs + xf;
        phases_move(k, e->residual, xs + xf, k->oc8, 0, pool);
    }
    nnf_status st = nnf_nchwc_wino_run(k->phase, xs, ys, &pe, pool);
    if (st == NNF_OK)
        phases_move(k, ys, y, k->oc8, 1, pool);
    return st;
}

nnf_status nnf_nchwc_wino_run(const nnf_nchwc_wino *k, const float *x, float *y,
                              const nnf_epilogue *ep, nnf_threadpool *pool) {
    if (!k || !x || !y)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "nchwc winograd: NULL argument");
    nnf_epilogue e = ep ? *ep : nnf_epilogue_default();
    if (e.bias_kind == NNF_BIAS_PER_COL)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: the bias must be per output channel",
                         k->name);
    if (e.bias_kind == NNF_BIAS_NONE)
        e.bias = NULL;
    const nnf_conv2d_shape *s = &k->s;
    if (s->n == 0)
        return NNF_OK;
    if (k->phase)
        return run_phases(k, x, y, &e, pool);
    wino_job *j = nnf_calloc(1, sizeof *j);
    if (!j)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory for a job", k->name);
    nnf_status st = NNF_OK;
    j->k = k;
    j->x = x;
    j->y = y;
    j->ep = &e;
    j->res = e.residual;
    j->tiles = nnf_nchwc_wino_tiles(k);
    j->x_img = k->c8 * s->h * s->w;
    j->y_img = k->oc8 * s->oh * s->ow;
    /* tiles per item: the V and M matrices (36 rows a tile) within 2 MiB,
     * the stride-2 form's (81 rows) within 512 KiB (YOLOv5s's 64 -> 128 at
     * 80x80 on 2 threads: 1.80 against 1.97 ms with 2 MiB, even on 1), whole
     * register panels (mr rows), at least two items per thread when the
     * image has the tiles */
    size_t mr = k->cfg->mr, budget = k->s2 ? (size_t)512 << 10 : (size_t)2 << 20,
           blk = budget / ((k->s2 ? 81 : k->nmat) * sizeof(float) * (k->c8 + k->oc8));
    blk = blk / mr * mr;
    if (blk < mr)
        blk = mr;
    int threads = nnf_threadpool_size(pool);
    int phased = weight_heavy(k, j->tiles, threads);
    if (phased)
        blk = j->tiles;
    size_t want = threads > 1 ? 2 * (size_t)threads : 1;
    while (!phased && blk > mr && s->n * ((j->tiles + blk - 1) / blk) < want)
        blk = (blk / 2 + mr - 1) / mr * mr;
    if (blk > j->tiles)
        blk = j->tiles;
    /* As many items as blocks of blk tiles, the whole panels dealt out
     * evenly (item_tiles): cut into blocks of blk with the remainder last,
     * two threads ran 54 + 54 and 54 + 34 of ResNet-50's 196 tiles at 56x56
     * (dealt: 0.93x the time, in process) and 30 + 30 and 30 + 10 of
     * YOLOv5s's 100 at 40x40 (within the noise: each item also streams the
     * 36 weight matrices). Every item but the last has a panel or more, and
     * the last one the tiles past the panels too: a one-tile item would be
     * a one-row GEMM, which runs the GEMV kernel (another summation order),
     * and that tile's values would depend on how the thread count split the
     * image. */
    size_t panels = j->tiles / mr;
    j->blocks = (j->tiles + blk - 1) / blk;
    if (j->blocks > panels)
        j->blocks = panels ? panels : 1;
    size_t most = (panels + j->blocks - 1) / j->blocks * mr + j->tiles % mr;
    /* Where the panels do not share out evenly over the threads, items
     * every thread gets as many of, of about the same tiles each
     * (item_tiles, `even`): YOLOv5s's 100 tiles at 40x40 are 7 panels,
     * which went to 4 items as 1 + 2 + 2 + 2 (stride 1) or to 7 items
     * (stride 2), and one thread waited for the other's last one (87-91 %
     * busy on 2 threads; now 98-99 %, those convs 8-12 % faster, YOLOv5s
     * 0.982 in ab_builds over 6 processes). An item more streams every
     * weight matrix once more, but maps whose weights outweigh their tiles
     * run phased instead. Every item keeps two tiles or more, so the
     * results are still the one-thread split's (a row's values do not
     * depend on the rows around it in the GEMM). */
    if (threads > 1 && !phased &&
        ((s->n * j->blocks) % (size_t)threads || panels % (size_t)threads)) {
        size_t b = j->blocks;
        while ((s->n * b) % (size_t)threads && 2 * (b + 1) <= j->tiles)
            b++;
        j->blocks = b;
        j->even = 1;
        most = (j->tiles + b - 1) / b;
    }
    size_t vb[37], mb[37], per, total;
    if (!wino_bases(k, most, k->c8, vb) || !wino_bases(k, most, k->oc8, mb) ||
        !nnf_add_size(vb[36], mb[36], &per)) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: convolution too large", k->name);
        goto fail;
    }
    j->slot_floats = per;
    size_t items = s->n * j->blocks;
    j->slots = phased ? 1 : threads < WINO_MAX_SLOTS ? threads : WINO_MAX_SLOTS;
    if ((size_t)j->slots > items)
        j->slots = (int)items;
    if (!nnf_mul_size(per, (size_t)j->slots, &total) || total > SIZE_MAX / sizeof(float)) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: convolution too large", k->name);
        goto fail;
    }
    j->scratch = nnf_thread_scratch(NNF_SCRATCH_WINOGRAD, total);
    if (!j->scratch) {
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu floats of scratch",
                       k->name, total);
        goto fail;
    }
    if (phased) {
        wino_phase ph = {.j = j, .chunk = (j->tiles + 2 * (size_t)threads - 1) / (2 * (size_t)threads)};
        memcpy(ph.vb, vb, sizeof vb); /* phased, most is every tile */
        memcpy(ph.mb, mb, sizeof mb);
        size_t chunks = (j->tiles + ph.chunk - 1) / ph.chunk;
        for (ph.b = 0; ph.b < s->n && !atomic_load(&j->failed); ph.b++) {
            nnf_parallel_for(pool, chunks, phase_input, &ph);
            nnf_parallel_for(pool, k->nmat, phase_gemm, &ph);
            if (!atomic_load(&j->failed))
                nnf_parallel_for(pool, chunks, phase_output, &ph);
        }
    } else {
        nnf_parallel_for(pool, items, wino_task, j);
    }
    if (atomic_load(&j->failed))
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: a Winograd GEMM failed", k->name);
fail:
    nnf_free(j);
    return st;
}

/* Dense convolution on NCHWc8 tensors (group 1, or groups of whole 8-channel
 * blocks, each group a dense conv on its blocks): weight packing, the work
 * split across the pool, and the portable scalar tier. The AVX2 register
 * tiles are in x86/conv_nchwc_avx2.c, the AVX-512 ones (blocked input) in
 * x86/conv_nchwc_avx512.c.
 *
 * Packed weights: per group of nb output blocks (the register tile's
 * height), [icu][kh][kw][lane][nb][8 output channels], where an input unit
 * is a block of 8 channels (NCHWc8 input, lane = channel in the block) or
 * one channel (NCHW input, one lane); group g starts at block g*nb. Channels past c or oc are
 * zero, so the padding lanes of the accumulators stay zero until the
 * epilogue (which zeroes them again: bias 0 through Sigmoid is 0.5).
 *
 * Work: tasks over (image x share of the groups of output blocks) and bands
 * of output rows (pixel chunks for a flattened 1x1); see the split in
 * nnf_nchwc_conv_run. Every output value is computed by one
 * span call whose summation order (unit, kh, kw, lane; the AVX2 tier's
 * 1-pixel border tiles sum even and odd lanes apart, and those pixels are
 * the same at any split) does not depend on where the band or tile
 * boundaries fall, so results do not depend on the thread count. */
#include "kernels/nchwc.h"

#include "base/alloc.h"
#include "base/packs.h"
#include "kernels/eltwise_fast.h"
#include "kernels/ref/activation.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Task chunks of a flattened 1x1 are a multiple of every tile width (AVX2:
 * 8, 6, 4, 3; AVX-512: 12, 8, 6), so only the image's last chunk has a
 * tail; a tail of less than half of it joins the chunk before (flat_end).
 * On several threads, where that leaves a task count they do not share
 * evenly, the chunks are even instead (task_ctx.even). */
#define FLAT_ALIGN 24

bool nnf_nchwc_conv_supported(const nnf_conv2d_shape *s) {
    if (!s || s->group == 0 || s->c == 0 || s->oc == 0 || s->kh == 0 || s->kw == 0 || s->sh == 0 ||
        s->sw == 0 || s->dh == 0 || s->dw == 0)
        return false;
    /* groups of whole blocks: each group is a dense conv on its own blocks
     * of the input and the output (depthwise has its own kernel) */
    return s->group == 1 || (s->c % s->group == 0 && s->oc % s->group == 0 &&
                             (s->c / s->group) % NNF_NCHWC_B == 0 && (s->oc / s->group) % NNF_NCHWC_B == 0);
}

/* Input units one group reads: blocks of 8 channels (NCHWc8 input) or
 * channels (NCHW input, group 1 only). */
static size_t in_units(const nnf_nchwc_conv *k) {
    size_t cg = k->s.c / k->s.group;
    return k->in_blocked ? nnf_nchwc_blocks(cg) : cg;
}

static size_t in_lanes(const nnf_nchwc_conv *k) {
    return k->in_blocked ? NNF_NCHWC_B : 1;
}

/* Planes of the whole input: images x units. */
static size_t input_planes(const nnf_nchwc_conv *k) {
    return k->s.n * (k->in_blocked ? nnf_nchwc_blocks(k->s.c) : k->s.c);
}

/* The AVX-512 tiles (x86/conv_nchwc_avx512.c), for a blocked or an NCHW
 * input alike. */
static int wide_tiles(const nnf_nchwc_conv *k) {
    return k->isa >= NNF_ISA_AVX512;
}

/* Output blocks of one conv group (every block when group == 1). */
static size_t group_ocb(const nnf_conv2d_shape *s) {
    return nnf_nchwc_blocks(s->oc / s->group);
}

/* A 1x1 whose every output reads an input pixel (no padding) but with a
 * stride: on the SIMD tiers its input is gathered into a compact copy of the
 * pixels it reads (a quarter of the input at stride 2), and it runs as a
 * stride-1 1x1, flattened, in the pointwise convs' tiles. Strided, its
 * 7-wide rows ran 3 + 2 + 2-pixel tiles that each reread the weights
 * (ResNet-50's 1024 -> 2048 downsample at 7x7: 85 GFLOP/s, ORT 94). On
 * the AVX-512 tier rows wider than 16 run strided as they are: their
 * 12-pixel tiles are nearly all full, and the copy cost more than it
 * saved (ResNet-50's 256 -> 512 downsample to 28x28 0.83 -> 0.80 ms alone,
 * 0.85 -> 0.81 in the model; to 14x14 the copy still won, 0.81 against
 * 0.92). */
static int subsampled_1x1(const nnf_conv2d_shape *s, nnf_isa isa) {
    if (isa >= NNF_ISA_AVX512 && s->ow > 16)
        return 0;
    return isa >= NNF_ISA_AVX2 && s->kh == 1 && s->kw == 1 && (s->sh > 1 || s->sw > 1) &&
           !s->pt && !s->pl && s->oh && s->ow && (s->oh - 1) * s->sh < s->h &&
           (s->ow - 1) * s->sw < s->w;
}

/* On Zen 4 (zmm_halves) a zmm FMA costs two ymm ones, so the AVX-512 tiles
 * gain only where their 32 registers and fewer instructions help; for
 * groups of 1-3 blocks they lose. 16 output channels are one zmm a pixel:
 * a broadcast per FMA where the AVX2 2 x 6 tile has one per two. 24 are a
 * zmm and a shared half (tile3_taps), whose join takes a shuffle slot on
 * one of the two FMA pipes; AVX2's 3 x 4 has neither. MobileNetV2 in the
 * model (nnfuse profile, tiers alternating, 4 x 100 runs): 32 -> 16 at
 * 112x112 0.182 against 0.139 ms, 96 -> 24 and 144 -> 24 at 56x56 0.201 /
 * 0.293 against 0.151 / 0.225.
 *
 * Short sums with a light epilogue lose too: a zmm tile holds two blocks,
 * so each accumulator leaves as an extract and two stores (and a residual
 * comes in as two loads and an insert), which a sum of 64-160 products
 * does not hide; the ymm tiles store each block as it is. A heavy
 * activation turns it round: the AVX2 tiles apply it in a second pass
 * over the stored outputs (x86/conv_nchwc_avx2.c, post), the AVX-512 ones
 * in registers. Middle conv of three 1x1s, 1 thread, in the
 * model, AVX-512 -> AVX2 tile time: 32 -> 32 at 160x160 0.90 (none, ReLU),
 * 1.06 (SiLU); 64 -> 256 at 56x56 0.97 / 1.06; 64 -> 64 at 80x80 0.98 /
 * 1.07. Per node (nnfuse profile, tiers alternating): ResNet-50's K = 64
 * and 128 1x1s 0.93-0.98, its K >= 256 ones 1.02-1.11; MobileNetV2's stem
 * (K = 27) 0.81, its expansions (ConvPwDw, K = 16-96) 0.85-0.97, at K =
 * 160 within 1.5 %, its projections (K >= 192) 1.02-1.07. The packed
 * weights are the same either way (groups of 1-3 blocks on both tiers),
 * and so are the outputs, bit for bit: the tiers sum in one order. */
nnf_isa nnf_nchwc_conv_tier(const nnf_conv2d_shape *s, nnf_act_kind act, nnf_isa isa,
                            const nnf_cpu *cpu) {
    if (isa < NNF_ISA_AVX512 || !cpu->zmm_halves)
        return isa;
    size_t k = s->c / s->group * s->kh * s->kw;
    return group_ocb(s) <= 3 || (k <= 160 && !nnf_act_heavy(act)) ? NNF_ISA_AVX2 : isa;
}

/* Output blocks per register tile: one that divides the block count when
 * there is one, so no group runs a short tile; 3x4 and 4x3 before 2x6 for
 * every kernel size. The stride-1 1x1s had 2x6 tiles (each weight vector
 * serves 6 pixels, not 3) from a round where that measured 5-15 % faster;
 * since the K blocks' weights are prefetched as the tiles go (nchwc.h,
 * nnf_nchwc_wfetch) 3x4/4x3 measured 1-2.5 % faster on 17 of the suite's 19
 * 1x1 shapes and equal on the others (Zen 4, the same outputs bit for bit):
 * ResNet-50 in-process A/B 0.980 on 1 thread, 0.983 on 2. */
static size_t group_blocks(nnf_isa isa, const nnf_conv2d_shape *s, int in_blocked) {
    size_t ocb = group_ocb(s);
    if (isa == NNF_ISA_SCALAR || ocb == 1)
        return 1;
    /* AVX-512: two blocks per zmm, up to 4 zmm high; an NCHW-input stem
     * 2 zmm x 12 pixels where 4 x 6 would do: its weights (ResNet-50's 7x7:
     * 37 KB for 64 channels) then stay in L1 as half, and each serves 12
     * pixels (ResNet-50's conv1 1.26 -> 1.16 ms on Intel) */
    if (isa >= NNF_ISA_AVX512 && !in_blocked && ocb % 4 == 0)
        return 4;
    /* rows of at most 8 pixels (ResNet-50's 7x7 maps, not flattened: a
     * 3x3) likewise: a 4 x 6 tile ran a 7-pixel row in two tiles, each
     * reading every weight (512 -> 512 3x3 at 7x7: 1.22 -> 1.15 ms); wider
     * rows lost (3x3 stride 2: 5-6 %). And 1x1s: each lane's weights then
     * take 2 loads per 24 FMAs, not 4, and a group's weights are half as
     * many, so a K block holds twice the channels (fewer passes over the
     * partial sums). Zen 5, bench_kernels --nchwc alternating: 7x7 maps
     * 0.93-0.98 of the 4 x 6 tile's time, 14x14 and 28x28 0.99; ResNet-50
     * in-process A/B 0.986 / 1 / 1.014 on 1 thread, 0.984 / 1 / 1.020 on 2.
     * Rows of up to 14 too: ResNet-50's 256-channel stride-2 3x3 to 14x14
     * ran 5 + 4 + 4-pixel tiles of 4 zmm (each weight for ~4 pixels), now 7
     * + 6 of 2 zmm: 1.35-1.49 -> 1.19-1.26 ms in the model (nnfuse profile,
     * builds alternating). Wider 3x3s stay 4 x 6 (YOLOv5s's 160-wide
     * stride-2 one 1.04x slower as 2 x 12). Where broadcasts cost FMA
     * throughput (Intel) 1x1s take 4 x 6 as wider maps do: half the
     * broadcasts per FMA, ResNet-50's 1x1 shapes 2-6 % faster
     * (bench_kernels --nchwc) and ab_builds 0.99 / 0.96 on 1 / 2 threads,
     * YOLOv5s 0.97 / 0.98, MobileNetV2 0.97 / 1.00; the 3x3s on short rows
     * and the stem stay 2 x 12 there too (7x7 maps 1.10x slower as 4 x 6). */
    bool one = s->kh * s->kw == 1;
    /* Where broadcasts are costly, those short-row 3x3s take 3 zmm x 7
     * pixels (a broadcast every 3 FMAs, not 2) when the blocks come in
     * 16s: tile groups of 6, 6 and 4 blocks (mixed_groups), so any count of
     * whole 16s splits evenly over 2 or 4 threads, where 6-block groups
     * left 64 blocks as 10 x 6 + 4, which two threads ran 6 + 5. Intel,
     * bench_kernels --nchwc: ResNet-50's 512 -> 512 at 7x7 1.50 -> 1.45
     * ms hot, 1.81-1.92 -> 1.58-1.66 with the caches swept; its stride-2
     * 3x3s to 14x14 and 7x7 1.49-1.56 -> 1.41 and 1.54-1.64 -> 1.46-1.48
     * (ORT 1.48 / 1.54); ResNet-50 ab_builds 0.988 / 0.990 on 1 / 2
     * threads (6 / 4 processes). */
    if (isa >= NNF_ISA_AVX512 && !one && s->ow <= 14 && ocb % 16 == 0 &&
        nnf_cpu_get()->bcast_costly)
        return 6;
    if (isa >= NNF_ISA_AVX512 && ocb % 4 == 0 &&
        ((one && !nnf_cpu_get()->bcast_costly) || (!one && s->ow <= 14)))
        return 4;
    if (isa >= NNF_ISA_AVX512) {
        for (size_t g = 8; g >= 4; g -= 2)
            if (ocb % g == 0)
                return g;
        return ocb < 8 ? ocb : 8;
    }
    if (ocb % 3 == 0)
        return 3;
    if (ocb % 4 == 0)
        return 4;
    if (ocb % 2 == 0)
        return 2;
    return 3;
}

/* Tile groups of gblk output blocks (a register tile's height): each conv
 * group's ocb_grp blocks are cut into tile groups of their own, the last
 * one shorter, so no tile crosses a conv group. Mixed groups instead cut
 * every 16 blocks into groups of 6, 6 and 4 (group_blocks; gblk 6 comes
 * from nowhere else with 16k blocks: those divide by 8). */
static int mixed_groups(size_t gblk, size_t ocb_grp) {
    return gblk == 6 && ocb_grp % 16 == 0;
}

static size_t tile_groups(const nnf_conv2d_shape *s, size_t gblk) {
    size_t ocb = group_ocb(s);
    return s->group * (mixed_groups(gblk, ocb) ? ocb / 16 * 3 : (ocb + gblk - 1) / gblk);
}

/* Tile group tg: its first block and its block count. */
static size_t tile_group(size_t tg, size_t gblk, size_t ocb_grp, size_t *nob) {
    if (mixed_groups(gblk, ocb_grp)) {
        size_t per = ocb_grp / 16 * 3, i = tg % per;
        *nob = i % 3 == 2 ? 4 : 6;
        return tg / per * ocb_grp + i / 3 * 16 + i % 3 * 6;
    }
    size_t per = (ocb_grp + gblk - 1) / gblk, first = tg % per * gblk;
    *nob = ocb_grp - first < gblk ? ocb_grp - first : gblk;
    return tg / per * ocb_grp + first;
}

/* Every size the kernels form from the shape fits a ptrdiff_t. */
static int sizes_fit(const nnf_conv2d_shape *s, size_t units, size_t lanes) {
    size_t a, b;
    size_t cb = nnf_nchwc_blocks(s->oc);
    if (!nnf_mul_size(s->n, units, &a) || !nnf_mul_size(a, s->h, &a) ||
        !nnf_mul_size(a, s->w, &a) || !nnf_mul_size(a, lanes, &a) ||
        a > PTRDIFF_MAX / sizeof(float))
        return 0;
    if (!nnf_mul_size(s->n, cb, &b) || !nnf_mul_size(b, s->oh, &b) || !nnf_mul_size(b, s->ow, &b) ||
        !nnf_mul_size(b, NNF_NCHWC_B, &b) || b > PTRDIFF_MAX / sizeof(float))
        return 0;
    /* tap offsets: (o * stride + (k - 1) * dil) stays far from overflow */
    size_t r;
    if (!nnf_mul_size(s->oh, s->sh, &a) || !nnf_mul_size(s->kh, s->dh, &b) ||
        !nnf_add_size(a, b, &r) || !nnf_add_size(r, s->h, &r) || r > PTRDIFF_MAX / 64)
        return 0;
    if (!nnf_mul_size(s->ow, s->sw, &a) || !nnf_mul_size(s->kw, s->dw, &b) ||
        !nnf_add_size(a, b, &r) || !nnf_add_size(r, s->w, &r) || r > PTRDIFF_MAX / 64)
        return 0;
    return 1;
}

nnf_status nnf_nchwc_conv_create(const nnf_conv2d_shape *s, int in_blocked, nnf_isa isa,
                                 const float *w, nnf_nchwc_conv **out) {
    nnf_status st = NNF_OK;
    nnf_nchwc_conv *k = NULL;
    if (!out || !s || !w)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "nchwc conv: NULL argument");
    *out = NULL;
    if (!nnf_nchwc_conv_supported(s))
        return nnf_error(
            NNF_ERR_UNSUPPORTED,
            "nchwc conv: group %zu, kernel %zux%zu, stride %zux%zu, dilation %zux%zu is "
            "not a 2-D convolution this kernel handles (group 1, or groups of whole 8-channel "
            "blocks)",
            s->group, s->kh, s->kw, s->sh, s->sw, s->dh, s->dw);
    k = nnf_calloc(1, sizeof *k);
    if (!k)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "nchwc conv: out of memory for the kernel");
    k->s = *s;
    k->in_blocked = in_blocked ? 1 : 0;
    k->isa = isa > nnf_cpu_get()->max_isa ? nnf_cpu_get()->max_isa : isa;
    if (s->group > 1 && !k->in_blocked) {
        st = nnf_error(NNF_ERR_UNSUPPORTED, "nchwc conv: a grouped conv needs blocked input");
        goto fail;
    }
    size_t units = in_units(k), lanes = in_lanes(k), ocb = nnf_nchwc_blocks(s->oc), taps, per_blk;
    size_t cg = s->c / s->group, all_units = k->in_blocked ? nnf_nchwc_blocks(s->c) : s->c;
    if (!sizes_fit(s, all_units, lanes) || !nnf_mul_size(s->kh, s->kw, &taps) ||
        !nnf_mul_size(taps, units, &per_blk) ||
        !nnf_mul_size(per_blk, lanes * NNF_NCHWC_B, &per_blk) ||
        !nnf_mul_size(per_blk, ocb, &k->w_floats) || k->w_floats > SIZE_MAX / sizeof(float)) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "nchwc conv: tensor sizes overflow");
        goto fail;
    }
    bool ready;
    k->w = nnf_pack_alloc(k->w_floats * sizeof(float), &ready);
    if (!k->w) {
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "nchwc conv: out of memory for %zu packed weights",
                       k->w_floats);
        goto fail;
    }
    /* groups of g blocks (the register tile's height) interleaved per tap
     * and lane, so one tile step reads one contiguous run of weights */
    size_t g = k->gblk = group_blocks(k->isa, s, k->in_blocked);
    void (*tr)(const float *, size_t, float *, size_t, size_t, size_t) =
        nnf_ew_kernels_for(k->isa)->transpose;
    for (size_t tg = 0; tg < tile_groups(s, g) && !ready; tg++) {
        size_t nb, ob0 = tile_group(tg, g, group_ocb(s), &nb), oc0 = ob0 * NNF_NCHWC_B;
        size_t cols = nb * NNF_NCHWC_B, valid = s->oc - oc0 < cols ? s->oc - oc0 : cols;
        float *d = k->w + ob0 * (k->w_floats / ocb);
        /* a unit at a time ([tap][lane][cols], within L1): W's rows (output
         * channels) become its columns, by the tier's 2-D transpose (8x8
         * register blocks), reading W in contiguous runs. One element at a
         * time this was the largest user-space cost of loading ResNet-50
         * (48 of ~390 ms). With one tap, a unit's lanes are W's contiguous
         * columns; with more, each lane's taps are, landing lanes apart. */
        for (size_t u = 0; u < units; u++, d += taps * lanes * cols) {
            size_t ic0 = u * lanes, nic = cg - ic0 < lanes ? cg - ic0 : lanes;
            if (nic < lanes || valid < cols)
                memset(d, 0, taps * lanes * cols * sizeof(float));
            const float *src = w + (oc0 * cg + ic0) * taps;
            if (taps == 1)
                tr(src, cg, d, cols, valid, nic);
            else
                for (size_t l = 0; l < nic; l++)
                    tr(src + l * taps, cg * taps, d + l * cols, lanes * cols, valid, taps);
        }
    }
    if (wide_tiles(k)) {
        size_t px = g > 6 ? 6 : g > 4 ? 8 : 12;
        snprintf(k->name, sizeof k->name, "f32_conv_nchwc_%zux%zu_avx512", g, px);
    } else if (k->isa >= NNF_ISA_AVX2) {
        size_t px = g == 1 ? 8 : g == 2 ? 6 : g == 3 ? 4 : 3;
        snprintf(k->name, sizeof k->name, "f32_conv_nchwc_%zux%zu_avx2", g, px);
    } else {
        snprintf(k->name, sizeof k->name, "f32_conv_nchwc_scalar");
    }
    *out = k;
    return NNF_OK;
fail:
    nnf_nchwc_conv_destroy(k);
    return st;
}

void nnf_nchwc_conv_destroy(nnf_nchwc_conv *k) {
    if (!k)
        return;
    nnf_free_aligned(k->w);
    nnf_free(k);
}

/* The reference formulas on one output block's 8 accumulators. */
static void epilogue_block(const nnf_nchwc_conv_job *j, size_t ob, const float *acc,
                           const float *res, float *y) {
    const nnf_epilogue *e = j->ep;
    for (size_t i = 0; i < NNF_NCHWC_B; i++) {
        size_t oc = ob * NNF_NCHWC_B + i;
        if (oc >= j->k->s.oc) {
            y[i] = 0.0f;
            continue;
        }
        float v = e->alpha * acc[i];
        if (e->bias)
            v += e->bias[oc];
        float r = res ? e->residual_scale * res[i] : 0.0f;
        if (res && !e->residual_after_act)
            v += r;
        v = nnf_act_apply(&e->act, v);
        if (res && e->residual_after_act)
            v += r;
        y[i] = v;
    }
}

static void row_scalar(const nnf_nchwc_conv_job *j, size_t b, size_t ocb0, size_t nob, size_t oh,
                       size_t ow0, size_t ow1) {
    const nnf_conv2d_shape *s = &j->k->s;
    size_t L = j->lanes, kh0, kh1;
    nnf_nchwc_taps(oh, s->sh, s->pt, s->dh, s->kh, j->h, &kh0, &kh1);
    const float *xi = j->x + b * j->x_img;
    for (size_t ow = ow0; ow < ow1; ow++) {
        size_t kw0, kw1;
        nnf_nchwc_taps(ow, s->sw, s->pl, s->dw, s->kw, j->w, &kw0, &kw1);
        for (size_t ob = ocb0; ob < ocb0 + nob; ob++) {
            float acc[NNF_NCHWC_B] = {0};
            const float *wb = j->k->w + ocb0 * j->w_blk + (ob - ocb0) * NNF_NCHWC_B;
            for (size_t u = 0; u < j->icu; u++)
                for (size_t kh = kh0; kh < kh1; kh++) {
                    const float *xr =
                        xi + u * j->x_unit + (oh * s->sh + kh * s->dh - s->pt) * j->x_row;
                    for (size_t kw = kw0; kw < kw1; kw++) {
                        const float *xp = xr + (ow * s->sw + kw * s->dw - s->pl) * L;
                        const float *wp =
                            wb + ((u * s->kh + kh) * s->kw + kw) * L * nob * NNF_NCHWC_B;
                        for (size_t l = 0; l < L; l++)
                            for (size_t i = 0; i < NNF_NCHWC_B; i++)
                                acc[i] += xp[l] * wp[l * nob * NNF_NCHWC_B + i];
                    }
                }
            size_t off =
                b * j->y_img + (ob - j->y_blk0) * j->y_blk + (oh * j->ow + ow - j->y_px0) * NNF_NCHWC_B;
            epilogue_block(j, ob, acc, j->ep->residual ? j->ep->residual + off : NULL, j->y + off);
        }
    }
}

size_t nnf_nchwc_row_parts(const nnf_nchwc_conv_job *j, size_t ow0, size_t ow1, nnf_nchwc_part *p) {
    const nnf_conv2d_shape *s = &j->k->s;
    int restrict_ok = j->lanes == NNF_NCHWC_B && s->sw <= 2 && s->dw > s->sw &&
                      2 * s->kw + 1 <= NNF_NCHWC_PARTS_MAX;
    size_t n = 0;
    for (size_t ow = ow0; ow < ow1;) {
        size_t kw0, kw1, end = ow + 1;
        nnf_nchwc_window_taps((ptrdiff_t)(ow * s->sw) - (ptrdiff_t)s->pl, s->kw, s->dw, j->w, &kw0,
                              &kw1);
        int kind = kw0 == 0 && kw1 == s->kw ? NNF_NCHWC_INTERIOR : NNF_NCHWC_GUARDED;
        if (kind == NNF_NCHWC_INTERIOR) {
            end = j->ow_hi < ow1 ? j->ow_hi : ow1;
        } else if (restrict_ok && kw0 < kw1) {
            for (size_t a, b; end < ow1; end++) {
                nnf_nchwc_window_taps((ptrdiff_t)(end * s->sw) - (ptrdiff_t)s->pl, s->kw, s->dw,
                                      j->w, &a, &b);
                if (a != kw0 || b != kw1)
                    break;
            }
            if (end - ow >= 2)
                kind = NNF_NCHWC_RESTRICTED;
            else
                end = ow + 1;
        }
        if (kind == NNF_NCHWC_GUARDED && n && p[n - 1].kind == NNF_NCHWC_GUARDED)
            p[n - 1].ow1 = end;
        else
            p[n++] = (nnf_nchwc_part){.ow0 = ow, .ow1 = end, .kw0 = kw0, .kw1 = kw1, .kind = kind};
        ow = end;
    }
    return n;
}

static void span_scalar(const nnf_nchwc_conv_job *j, size_t b, size_t ocb0, size_t nob, size_t oh0,
                        size_t oh1, size_t ow0, size_t ow1) {
    for (size_t oh = oh0; oh < oh1; oh++)
        row_scalar(j, b, ocb0, nob, oh, ow0, ow1);
}

typedef struct task_ctx {
    const nnf_nchwc_conv_job *job;
    size_t gblk, groups; /* output blocks per group, groups */
    size_t gsplit;       /* tasks per image along the groups */
    size_t flat, chunk;  /* flattened 1x1: pixels per unit */
    size_t units;        /* flattened: units per image, the last to the image's end */
    void (*span)(const nnf_nchwc_conv_job *, size_t, size_t, size_t, size_t, size_t, size_t,
                 size_t);
    float *y_plain;          /* NCHW output (nnf_nchwc_conv_run_nchw), else NULL */
    size_t cl;               /* y_plain channel-last in groups of cl channels; 0: NCHW */
    size_t sub_units, buf_floats; /* its buffer: units per pass, floats */
    size_t cl_px;                 /* channel-last, flattened: pixels per pass */
    int even;                     /* flattened: units of about ow / units pixels */
    atomic_int *failed; /* the run's: a task had no output buffer (tasks see the rest const) */
} task_ctx;

/* A flattened conv's pixels before unit u1 (u1 <= units), or where unit
 * u1 starts: units of a chunk each, a short tail riding with the last, or
 * (even) ow / units each. Without the tail rule MobileNetV2's 49-pixel 960 -> 160
 * projections ran chunks of 24, 24 and 1 pixels on 2 threads (48 and 1 on
 * one), the 1-pixel tile reading every weight of its group for one pixel. */
static size_t flat_end(const task_ctx *t, size_t u1) {
    return u1 >= t->units ? t->job->ow : t->even ? u1 * t->job->ow / t->units : u1 * t->chunk;
}

/* NCHW output: units [u0, u0 + nu) of blocks [ocb0, ocb0 + nob) of image b,
 * sub_units at a time, computed into the thread's buffer ([nob][pixels][8],
 * the job's partial sums included) and transposed into the planes of y
 * while it is in cache: a separate reorder wrote the blocked output to
 * memory and read it back. */
static void plain_out(const task_ctx *t, const nnf_nchwc_conv_job *j, size_t b, size_t ocb0,
                      size_t nob, size_t u0, size_t nu) {
    float *buf = nnf_thread_scratch(NNF_SCRATCH_CONV_OUT, t->buf_floats);
    if (!buf) {
        atomic_store(t->failed, 1);
        return;
    }
    const nnf_conv2d_shape *s = &j->k->s;
    size_t plane = j->oh * j->ow, per = t->flat ? t->chunk + FLAT_ALIGN / 2 : j->ow;
    nnf_nchwc_conv_job jb = *j;
    jb.y = buf;
    jb.y_img = 0;
    jb.y_blk = t->sub_units * per * NNF_NCHWC_B;
    jb.y_blk0 = ocb0;
    for (size_t s0 = u0; s0 < u0 + nu; s0 += t->sub_units) {
        size_t s1 = u0 + nu - s0 < t->sub_units ? u0 + nu : s0 + t->sub_units, p0, np;
        if (t->flat) {
            p0 = flat_end(t, s0);
            np = flat_end(t, s1) - p0;
            jb.y_px0 = p0;
            t->span(&jb, b, ocb0, nob, 0, 1, p0, p0 + np);
        } else {
            p0 = s0 * j->ow;
            np = (s1 - s0) * j->ow;
            jb.y_px0 = p0;
            t->span(&jb, b, ocb0, nob, s0, s1, 0, j->ow);
        }
        for (size_t o = 0; o < nob && (ocb0 + o) * NNF_NCHWC_B < s->oc; o++) {
            size_t c0 = (ocb0 + o) * NNF_NCHWC_B, nc = s->oc - c0 < NNF_NCHWC_B ? s->oc - c0 : NNF_NCHWC_B;
            nnf_nchwc_to_nchw_block(buf + o * jb.y_blk, plane, nc, np,
                                    t->y_plain + (b * s->oc + c0) * plane + p0, j->k->isa);
        }
    }
}

/* The job of tile group g (a grouped conv: its conv group's input), its
 * first block and count in *ocb0, *nob; jg holds it where it differs. */
static const nnf_nchwc_conv_job *group_job(const task_ctx *t, size_t g, nnf_nchwc_conv_job *jg,
                                           size_t *ocb0, size_t *nob) {
    const nnf_nchwc_conv_job *j = t->job;
    *ocb0 = tile_group(g, t->gblk, j->ocb_grp, nob);
    if (*ocb0 < j->ocb_grp)
        return j;
    *jg = *j;
    jg->x += *ocb0 / j->ocb_grp * j->x_grp;
    return jg;
}

/* Channel-last output (a detection head's [N, anchors, H, W, outputs]):
 * every group of the task over a few pixels (or rows) into the thread's
 * buffer, then each pixel's channels out in order. Group by group, as
 * plain_out goes, each group wrote a 32-channel piece of every row of the
 * band, and a 255-channel head's rows came back from L2 eight times. */
static void cl_out(const task_ctx *t, size_t b, size_t g0, size_t g1, size_t u0, size_t nu) {
    float *buf = nnf_thread_scratch(NNF_SCRATCH_CONV_OUT, t->buf_floats);
    if (!buf) {
        atomic_store(t->failed, 1);
        return;
    }
    const nnf_nchwc_conv_job *j = t->job;
    const nnf_conv2d_shape *s = &j->k->s;
    size_t nob, cb0 = tile_group(g0, t->gblk, j->ocb_grp, &nob),
                last = tile_group(g1 - 1, t->gblk, j->ocb_grp, &nob);
    size_t nb = last + nob - cb0, plane = j->oh * j->ow;
    size_t p_end = t->flat ? flat_end(t, u0 + nu) : (u0 + nu) * j->ow;
    size_t step = t->flat ? t->cl_px : t->sub_units * j->ow;
    for (size_t p0 = t->flat ? flat_end(t, u0) : u0 * j->ow; p0 < p_end; p0 += step) {
        size_t np = p_end - p0 < step ? p_end - p0 : step;
        for (size_t g = g0; g < g1; g++) {
            nnf_nchwc_conv_job jg, jb;
            size_t ocb0;
            jb = *group_job(t, g, &jg, &ocb0, &nob);
            jb.y = buf;
            jb.y_img = 0;
            jb.y_blk = step * NNF_NCHWC_B;
            jb.y_blk0 = cb0;
            jb.y_px0 = p0;
            if (t->flat)
                t->span(&jb, b, ocb0, nob, 0, 1, p0, p0 + np);
            else
                t->span(&jb, b, ocb0, nob, p0 / j->ow, (p0 + np) / j->ow, 0, j->ow);
        }
        nnf_nchwc_to_cl_pixels(buf, step * NNF_NCHWC_B, cb0, nb, s->oc, np,
                               t->y_plain + b * s->oc * plane + p0 * t->cl, plane, t->cl,
                               j->k->isa);
    }
}

/* Task i: image i / gsplit, its (i % gsplit)-th share of the groups; units
 * [u0, u0 + nu) of rows (or pixel chunks). Each group in turn over the
 * task's rows, so the input rows stay in cache across the groups. */
static void conv_task(void *ctx, size_t i, size_t u0, size_t ni, size_t nu) {
    const task_ctx *t = ctx;
    const nnf_nchwc_conv_job *j = t->job;
    for (size_t ii = i; ii < i + ni; ii++) {
        size_t b = ii / t->gsplit, part = ii % t->gsplit;
        size_t g0 = t->groups * part / t->gsplit, g1 = t->groups * (part + 1) / t->gsplit;
        if (t->cl) {
            if (g0 < g1)
                cl_out(t, b, g0, g1, u0, nu);
            continue;
        }
        for (size_t g = g0; g < g1; g++) {
            /* a grouped conv: the job of the conv group the tile is in,
             * its input starting at that group's blocks */
            nnf_nchwc_conv_job jg;
            size_t nob, ocb0;
            const nnf_nchwc_conv_job *jj = group_job(t, g, &jg, &ocb0, &nob);
            if (t->y_plain) {
                plain_out(t, jj, b, ocb0, nob, u0, nu);
            } else if (t->flat) {
                t->span(jj, b, ocb0, nob, 0, 1, flat_end(t, u0), flat_end(t, u0 + nu));
            } else {
                t->span(jj, b, ocb0, nob, u0, u0 + nu, 0, j->ow);
            }
        }
    }
}

/* A K block's weights: three quarters of the core's L1 (24 KiB of 32), the
 * rest for the input and the partial sums. Measured on ResNet-50's 7x7 and
 * 14x14 3x3 layers (AVX2, Zen), 12-128 KiB were within the noise of each
 * other; all of K at once (up to 590 KiB for 512 -> 512 3x3) was slower.
 * The AVX-512 tier: twice L1 (96 KiB of 48), the weights then read from L2
 * as the tiles fetch the next block: each K block's partial sums cost a
 * zmm's two halves loaded and stored per accumulator (shuffles on an FMA
 * port), and 3x3s of 128-256 channels ran 8 K blocks. Intel, bench_kernels:
 * 3x3 stride 2 128 -> 128 1.17-1.20 -> 1.14-1.15 ms, 1024 -> 256 1x1
 * 0.55-0.56 -> 0.49-0.52, YOLOv5s's 3x3 s2 256 -> 512 5.4-5.5 -> 5.0; four
 * times L1 lost on the largest weights. ab_builds (both orders) ResNet-50
 * and YOLOv5s about 2.5 % faster. */
static size_t kc_budget(nnf_isa isa) {
    size_t l1 = nnf_cpu_get()->l1d;
    return isa >= NNF_ISA_AVX512 ? 2 * l1 : l1 / 4 * 3;
}

/* Input units per K block: as many as kc_budget() holds for one register
 * tile's weights (gblk output blocks), at least one. Each block but the
 * last leaves partial sums in y. */
static size_t k_block_units(const nnf_nchwc_conv *k, size_t gblk) {
    size_t unit_bytes = k->s.kh * k->s.kw * in_lanes(k) * gblk * NNF_NCHWC_B * sizeof(float);
    size_t kc = kc_budget(k->isa) / unit_bytes, units = in_units(k);
    if (!kc || kc >= units)
        return kc ? kc : 1;
    /* blocks of equal size (64 units: 32 + 32, not 48 + 16): each block's
     * tiles prefetch the next one a line per tap, and a short block's tiles
     * took too few lines for a long one */
    size_t blocks = (units + kc - 1) / kc;
    return (units + blocks - 1) / blocks;
}

bool nnf_nchwc_conv_one_pass(const nnf_nchwc_conv *k) {
    return k && k_block_units(k, k->gblk) >= in_units(k);
}

/* Padded maps at most this wide get a zero-padded copy of their input on
 * the AVX2 tier: nearly every tile of a 7- or 14-wide row touches a border
 * and ran in C at about half the rate of the assembly interior tiles
 * (ResNet-50's 512-channel 3x3 at 7x7: 166 KiB copied per run, ~48 % of the
 * FMA peak before). Wider rows have few border tiles, and copying their
 * input (1.6 MiB at 56x56) would cost more than it saves. */
#define PAD_COPY_MAX_W 16

/* The padded copy's extent along one axis: every input index a tap of an
 * output reads, from -pad. */
static size_t padded_extent(size_t out, size_t stride, size_t k, size_t dil) {
    return (out - 1) * stride + (k - 1) * dil + 1;
}

/* The input copies below, a plane per pool item: on one thread they were a
 * serial stretch of every such conv on two (ResNet-50's stride-2 1x1
 * downsamples copy 0.4-0.8 MB). */
typedef struct copy_job {
    const nnf_nchwc_conv *k;
    const float *x;
    float *xc;
    size_t hp, wp;
} copy_job;

/* x [n][units][h][w][8] -> xp [n][units][hp][wp][8], the input at (pt, pl)
 * and zeros around it: plane pl. */
static void pad_copy(void *ctx, size_t pl) {
    const copy_job *c = ctx;
    const nnf_conv2d_shape *s = &c->k->s;
    size_t hp = c->hp, wp = c->wp, row = s->w * NNF_NCHWC_B;
    for (size_t r = 0; r < hp; r++) {
        float *d = c->xc + (pl * hp + r) * wp * NNF_NCHWC_B;
        size_t ir = r - s->pt; /* wraps when r < pt */
        if (ir >= s->h) {
            memset(d, 0, wp * NNF_NCHWC_B * sizeof(float));
            continue;
        }
        /* columns [c0, c1) come from the input, the rest are zeros */
        size_t c0 = s->pl < wp ? s->pl : wp, c1 = s->pl + s->w < wp ? s->pl + s->w : wp;
        memset(d, 0, c0 * NNF_NCHWC_B * sizeof(float));
        memcpy(d + c0 * NNF_NCHWC_B, c->x + (pl * s->h + ir) * row,
               (c1 - c0) * NNF_NCHWC_B * sizeof(float));
        memset(d + c1 * NNF_NCHWC_B, 0, (wp - c1) * NNF_NCHWC_B * sizeof(float));
    }
}

/* ow pixels of L lanes, sw pixels apart in src, side by side into d: one
 * output row of the strided copies below. */
static inline void strided_pixels(float *d, const float *src, size_t ow, size_t sw, size_t L) {
    for (size_t q = 0; q < ow; q++)
        memcpy(d + q * L, src + q * sw * L, L * sizeof(float));
}

/* x [n][units][h][w][L] -> xs [n][units][oh][ow][L]: the pixels a
 * subsampled_1x1 conv reads, plane pl. */
static void subsample_copy(void *ctx, size_t pl) {
    const copy_job *c = ctx;
    const nnf_conv2d_shape *s = &c->k->s;
    size_t L = in_lanes(c->k);
    for (size_t r = 0; r < s->oh; r++)
        strided_pixels(c->xc + (pl * s->oh + r) * s->ow * L,
                       c->x + (pl * s->h + r * s->sh) * s->w * L, s->ow, s->sw, L);
}

/* A patch conv: its input cut into disjoint kh x kw windows (kernel at
 * most the stride, no padding or dilation), as the stems of ConvNeXt and
 * Swin (4x4, stride 4) and ViT (16x16, stride 16) do on NCHW input, and
 * ConvNeXt's 2x2 stride-2 downsamples on blocked input. Its products per
 * output are one 1x1 conv's over the windows laid out as channels, in the
 * order the weights are packed in ([unit][kh][kw][lane][cols],
 * conv_create): c' = (c * kh + i) * kw + j from NCHW input (whole blocks
 * of c' only: the packing pads units, not c'), unit (u * kh + i) * kw + j
 * from blocked input. Those are the blocked 1x1's packed weights as they
 * stand. So the windows are copied into an NCHWc8 input of c' channels
 * (patch_copy) and the conv runs as a flattened stride-1 1x1, in the
 * assembly of the pointwise tiles: each output sums its products in the
 * same order as the direct tiles, so the values are the same, bit for
 * bit. The NCHW tiles have assembly only for rows of 1, 3, 5, 6 and 7
 * taps at stride 1 and 2: a 4-wide row at stride 4 ran in C (ConvNeXt-T's
 * stem 1.02 ms against ORT's 0.70 in the model, 28 GFLOP/s; 0.70 now).
 * ConvNeXt-T's blocked 2x2 downsamples ran 7- and 14-wide rows in short
 * tiles, each rereading the weights (2.0-2.2 ms, ORT's time; 1.75-1.85
 * now). Blocked input on the AVX2 tier only: the AVX-512 tiles were not
 * measured (the strided 1x1s' copy lost there on rows wider than 16).
 *
 * Narrow maps take the same path on blocked input whatever the windows
 * (overlapping, padded, dilated: an im2col of the pixels' blocks, the
 * padding as zeros, which the direct tiles multiply too on a padded copy):
 * their rows of at most WINDOW_COPY_MAX_W pixels ran in tiles of 3 + 2 +
 * 2 (7 wide) or 3 + 3 + 3 + 3 + 2 (14), each rereading its K block's
 * weights, where the flattened map runs nearly all in full tiles. The
 * copy is kh kw / (sh sw) times the input (ResNet-50's 3x3 stride-2
 * 512 -> 512 to 7x7: 0.9 MB). nnf_nchwc_no_patch_copy (tests) keeps the
 * direct tiles. */
int nnf_nchwc_no_patch_copy;

#define WINDOW_COPY_MAX_W 16

static int patch_conv(const nnf_nchwc_conv *k) {
    const nnf_conv2d_shape *s = &k->s;
    if (nnf_nchwc_no_patch_copy || k->isa < NNF_ISA_AVX2 || s->group != 1 || s->kh * s->kw == 1)
        return 0;
    /* narrow rows whose tiles are a tenth or more short of full */
    if (k->in_blocked && k->isa == NNF_ISA_AVX2 && s->ow <= WINDOW_COPY_MAX_W) {
        size_t px = nnf_nchwc_avx2_tile_px(k->gblk);
        if (10 * s->ow < 9 * px * ((s->ow + px - 1) / px))
            return 1;
    }
    if (k->in_blocked ? k->isa != NNF_ISA_AVX2 : s->c * s->kh * s->kw % NNF_NCHWC_B != 0)
        return 0;
    return s->kh <= s->sh && s->kw <= s->sw && s->dh == 1 && s->dw == 1 && !s->pt && !s->pl &&
           (s->oh - 1) * s->sh + s->kh <= s->h && (s->ow - 1) * s->sw + s->kw <= s->w;
}

/* The channels of a patch conv's 1x1: its input's units (channels or
 * blocks, padding lanes and all) times the window's taps. */
static size_t patch_channels(const nnf_nchwc_conv *k) {
    return in_units(k) * in_lanes(k) * k->s.kh * k->s.kw;
}

/* Outputs [0, q) whose tap at column offset off (the tap's j * dw) reads
 * left of column `to` of the padded row (pl + w: the right edge; pl: the
 * left one). */
static size_t cols_before(size_t to, size_t off, size_t sw, size_t ow) {
    size_t q = to > off ? (to - off + sw - 1) / sw : 0;
    return q < ow ? q : ow;
}

/* The lanes [l, l + n) of each pixel of a unit from src + off, pixels sw
 * apart: n a constant, so each pixel's run is one or two vector moves. */
#define PATCH_RUNS(n)                                                                              \
    for (size_t q = 0; q < ow; q++)                                                                \
        memcpy(d + q * NNF_NCHWC_B + l, src + off + q * sw, (n) * sizeof(float));

/* x [n][c][h][w] -> xs [n][c * kh * kw / 8][oh][ow][8], lane l of unit u
 * the window tap c' = 8 u + l (see patch_conv): output row r of image b,
 * item b * oh + r. A window row's taps are contiguous in x, so a unit's
 * lanes are runs of 8 (kw a multiple of 8), of kw (kw dividing 8), or of
 * 1: ConvNeXt-T's stem copied lane by lane took a quarter of the conv's
 * time. */
static void patch_copy(void *ctx, size_t item) {
    const copy_job *c = ctx;
    const nnf_conv2d_shape *s = &c->k->s;
    size_t b = item / s->oh, r = item % s->oh, taps = s->kh * s->kw, ow = s->ow, sw = s->sw;
    size_t units = patch_channels(c->k) / NNF_NCHWC_B, plane = s->oh * ow * NNF_NCHWC_B;
    if (c->k->in_blocked) {
        /* unit (u, i, j) of the copy is tap (i, j) of input block u: the
         * blocked weights' order [u][kh][kw][lane]; padding is zeros */
        size_t ub = in_units(c->k), row = s->w * NNF_NCHWC_B, px = NNF_NCHWC_B * sizeof(float);
        float *d = c->xc + (b * units * s->oh + r) * ow * NNF_NCHWC_B;
        for (size_t u = 0; u < ub; u++)
            for (size_t t = 0; t < taps; t++, d += plane) {
                size_t y = r * s->sh + t / s->kw * s->dh - s->pt; /* wraps above the top */
                size_t off = t % s->kw * s->dw;
                size_t q0 = cols_before(s->pl, off, sw, ow);
                size_t q1 = y < s->h ? cols_before(s->pl + s->w, off, sw, ow) : 0;
                q1 = q1 > q0 ? q1 : q0;
                memset(d, 0, q0 * px);
                if (q1 > q0)
                    strided_pixels(d + q0 * NNF_NCHWC_B,
                                   c->x + ((b * ub + u) * s->h + y) * row +
                                       (q0 * sw + off - s->pl) * NNF_NCHWC_B,
                                   q1 - q0, sw, NNF_NCHWC_B);
                memset(d + q1 * NNF_NCHWC_B, 0, (ow - q1) * px);
            }
        return;
    }
    size_t run = s->kw % NNF_NCHWC_B == 0 ? NNF_NCHWC_B : NNF_NCHWC_B % s->kw == 0 ? s->kw : 1;
    const float *src = c->x + (b * s->c * s->h + r * s->sh) * s->w;
    float *d = c->xc + b * units * plane + r * ow * NNF_NCHWC_B;
    for (size_t u = 0; u < units; u++, d += plane)
        for (size_t l = 0; l < NNF_NCHWC_B; l += run) {
            size_t cc = u * NNF_NCHWC_B + l, ch = cc / taps, t = cc % taps;
            size_t off = (ch * s->h + t / s->kw) * s->w + t % s->kw;
            switch (run) {
            case 8: PATCH_RUNS(8) break;
            case 4: PATCH_RUNS(4) break;
            case 2: PATCH_RUNS(2) break;
            default: PATCH_RUNS(1) break;
            }
        }
}
#undef PATCH_RUNS

int nnf_nchwc_no_pair3;

/* A 1x1 stride-1 unpadded conv runs flattened: one row of h*w pixels. */
static int flat_1x1(const nnf_conv2d_shape *s) {
    return s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 && s->pt == 0 && s->pl == 0 &&
           s->oh == s->h && s->ow == s->w;
}

bool nnf_nchwc_conv_pointwise(const nnf_nchwc_conv *k) {
    const nnf_conv2d_shape *s = &k->s;
    return k->in_blocked && s->group == 1 && flat_1x1(s);
}

size_t nnf_nchwc_conv_tile_groups(const nnf_nchwc_conv *k) {
    return tile_groups(&k->s, k->gblk);
}

size_t nnf_nchwc_conv_tile_group(const nnf_nchwc_conv *k, size_t tg, size_t *nob) {
    return tile_group(tg, k->gblk, group_ocb(&k->s), nob);
}

/* The job of conv k (the input copy's geometry, if any) from x to y. */
static nnf_nchwc_conv_job job_of(const nnf_nchwc_conv *k, const float *x, float *y,
                                 const nnf_epilogue *e) {
    const nnf_conv2d_shape *s = &k->s;
    nnf_nchwc_conv_job j = {.k = k,
                            .x = x,
                            .y = y,
                            .ep = e,
                            .lanes = in_lanes(k),
                            .icu = in_units(k),
                            .h = s->h,
                            .w = s->w,
                            .oh = s->oh,
                            .ow = s->ow};
    if (flat_1x1(s)) {
        j.w = j.ow = s->h * s->w;
        j.h = j.oh = 1;
    }
    j.x_row = j.w * j.lanes;
    j.x_unit = j.h * j.x_row;
    j.x_grp = j.icu * j.x_unit;
    j.x_img = s->group * j.x_grp;
    j.ocb = nnf_nchwc_blocks(s->oc);
    j.ocb_grp = group_ocb(s);
    j.y_blk = j.oh * j.ow * NNF_NCHWC_B;
    j.y_img = j.ocb * j.y_blk;
    j.w_blk = k->w_floats / j.ocb;
    nnf_nchwc_interior(j.w, s->pl, s->sw, s->kw, s->dw, j.ow, &j.ow_lo, &j.ow_hi);
    nnf_nchwc_interior(j.h, s->pt, s->sh, s->kh, s->dh, j.oh, &j.oh_lo, &j.oh_hi);
    /* K blocks whose weights stay in the core's L1 with room for the input
     * and the accumulated outputs; the partial sums go through y exactly
     * (a float stored and reloaded), so the blocking changes no result */
    j.kc = k_block_units(k, k->gblk);
    return j;
}

/* The flattened run's job cut to the pixels of rows [r0, r1): the input from
 * row r0 (the blocks' planes still h*w apart), the output block-major at y
 * with y_blk floats per block, holding tile group tg's blocks only. A
 * pixel's sums do not depend on the pixel range a span covers, so the
 * values are the whole run's. */
void nnf_nchwc_conv_rows(const nnf_nchwc_conv *k, const float *x, size_t r0, size_t r1, size_t tg,
                         float *y, size_t y_blk, const nnf_epilogue *ep) {
    nnf_epilogue e = *ep;
    if (e.bias_kind == NNF_BIAS_NONE)
        e.bias = NULL;
    if (!e.bias)
        e.bias_kind = NNF_BIAS_NONE;
    nnf_nchwc_conv_job j = job_of(k, x + r0 * k->s.w * NNF_NCHWC_B, y, &e);
    j.w = j.ow = j.ow_hi = (r1 - r0) * k->s.w;
    j.x_row = j.w * NNF_NCHWC_B;
    j.y_blk = y_blk;
    j.y_img = j.ocb * y_blk;
    size_t nob, ocb0 = tile_group(tg, k->gblk, j.ocb, &nob);
    j.y_blk0 = ocb0; /* y holds the tile group's blocks only */
    if (wide_tiles(k))
        nnf_nchwc_conv_span_avx512(&j, 0, ocb0, nob, 0, 1, 0, j.ow);
    else if (k->isa >= NNF_ISA_AVX2)
        nnf_nchwc_conv_span_avx2(&j, 0, ocb0, nob, 0, 1, 0, j.ow);
    else
        span_scalar(&j, 0, ocb0, nob, 0, 1, 0, j.ow);
}

/* y blocked, or plain when plain (nnf_nchwc_conv_run_nchw): NCHW, or
 * channel-last in groups of cl channels (nnf_nchwc_conv_run_cl). */
static nnf_status conv_run(const nnf_nchwc_conv *k, const float *x, float *y,
                           const nnf_epilogue *ep, int plain, size_t cl, nnf_threadpool *pool) {
    if (!k || !x || !y)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "nchwc conv: NULL argument");
    if (plain && ep && ep->residual)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "nchwc conv %s: no residual with an NCHW output",
                         k->name);
    nnf_epilogue e = ep ? *ep : nnf_epilogue_default();
    if (e.bias_kind == NNF_BIAS_PER_COL)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT,
                         "nchwc conv %s: the bias must be per output channel", k->name);
    if (e.bias_kind == NNF_BIAS_NONE)
        e.bias = NULL;
    if (!e.bias)
        e.bias_kind = NNF_BIAS_NONE;
    if (e.residual == y && (e.residual_after_act || !nnf_nchwc_conv_one_pass(k)))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT,
                         "nchwc conv %s: the output may overwrite its residual only with the residual "
                         "before the activation and one pass over K",
                         k->name);
    const nnf_conv2d_shape *s = &k->s;
    if (s->n == 0 || s->oh == 0 || s->ow == 0)
        return NNF_OK;
    nnf_nchwc_conv kp;
    float *xcopy = NULL; /* the input padded (pad_copy), subsampled (subsample_copy) or in patches
                            (patch_copy) */
    /* sizes_fit() bounded the extents at create time; their product is
     * checked (a hostile padding makes the copy large, not wrong) */
    size_t hp = padded_extent(s->oh, s->sh, s->kh, s->dh);
    size_t wp = padded_extent(s->ow, s->sw, s->kw, s->dw), pad_floats;
    size_t patch_floats;
    bool whole_k = false; /* the copy's 1x1 in one pass over K, as the conv ran */
    if (patch_conv(k) && nnf_mul_size(s->n, patch_channels(k), &patch_floats) &&
        nnf_mul_size(patch_floats, s->oh, &patch_floats) &&
        nnf_mul_size(patch_floats, s->ow, &patch_floats)) {
        xcopy = nnf_thread_scratch(NNF_SCRATCH_CONV_IN, patch_floats);
        if (!xcopy)
            return nnf_error(NNF_ERR_OUT_OF_MEMORY,
                             "nchwc conv %s: out of memory for the input's windows", k->name);
        copy_job cj = {.k = k, .x = x, .xc = xcopy};
        nnf_parallel_for(pool, s->n * s->oh, patch_copy, &cj);
        /* one K pass stays one (an output over its residual needs it),
         * though a unit of more taps than kc_budget() holds ran as one */
        whole_k = nnf_nchwc_conv_one_pass(k);
        kp = *k;
        kp.in_blocked = 1;
        kp.s.c = patch_channels(k);
        kp.s.h = s->oh;
        kp.s.w = s->ow;
        kp.s.kh = kp.s.kw = kp.s.sh = kp.s.sw = kp.s.dh = kp.s.dw = 1;
        kp.s.pt = kp.s.pl = 0;
        k = &kp;
        s = &kp.s;
        x = xcopy;
    }
    if (!xcopy && k->isa >= NNF_ISA_AVX2 && k->in_blocked && s->ow <= PAD_COPY_MAX_W &&
        s->sw <= 2 && (s->pt || s->pl || hp > s->h + s->pt || wp > s->w + s->pl) &&
        nnf_mul_size(s->n, nnf_nchwc_blocks(s->c), &pad_floats) &&
        nnf_mul_size(pad_floats, hp, &pad_floats) && nnf_mul_size(pad_floats, wp, &pad_floats) &&
        nnf_mul_size(pad_floats, NNF_NCHWC_B, &pad_floats)) {
        xcopy = nnf_thread_scratch(NNF_SCRATCH_CONV_IN, pad_floats);
        if (!xcopy)
            return nnf_error(NNF_ERR_OUT_OF_MEMORY,
                             "nchwc conv %s: out of memory for the padded input", k->name);
        copy_job cj = {.k = k, .x = x, .xc = xcopy, .hp = hp, .wp = wp};
        nnf_parallel_for(pool, s->n * nnf_nchwc_blocks(s->c), pad_copy, &cj);
        kp = *k;
        kp.s.h = hp;
        kp.s.w = wp;
        kp.s.pt = kp.s.pl = 0;
        k = &kp;
        s = &kp.s;
        x = xcopy;
    }
    if (!xcopy && subsampled_1x1(s, k->isa)) {
        /* smaller than the input, whose size sizes_fit() checked */
        xcopy = nnf_thread_scratch(NNF_SCRATCH_CONV_IN, input_planes(k) * in_lanes(k) * s->oh * s->ow);
        if (!xcopy)
            return nnf_error(NNF_ERR_OUT_OF_MEMORY,
                             "nchwc conv %s: out of memory for the subsampled input", k->name);
        copy_job cj = {.k = k, .x = x, .xc = xcopy};
        nnf_parallel_for(pool, input_planes(k), subsample_copy, &cj);
        kp = *k;
        kp.s.h = s->oh;
        kp.s.w = s->ow;
        kp.s.sh = kp.s.sw = 1;
        k = &kp;
        s = &kp.s;
        x = xcopy;
    }
    nnf_nchwc_conv_job j = job_of(k, x, y, &e);
    if (whole_k)
        j.kc = j.icu;
    int flat = flat_1x1(s);
    task_ctx t = {.job = &j, .flat = (size_t)flat};
    t.gblk = k->gblk; /* from the shape as created, not the copy's */
    t.groups = tile_groups(s, t.gblk);
    t.span = wide_tiles(k)            ? nnf_nchwc_conv_span_avx512
             : k->isa >= NNF_ISA_AVX2 ? nnf_nchwc_conv_span_avx2
                                      : span_scalar;
    /* About eight equal tasks per thread (an uneven count leaves a core
     * idle for the last one), split where it costs the least traffic: when
     * the weights outweigh the input, one group per task over a band of
     * rows, each group's weights read once; else bands of rows small
     * enough to stay in L2 with every group in turn over them, the input
     * read once (a 1x1 stride-2 256 -> 512 at 56x56 read its 1.6 MB of
     * input rows once per group: 26 MB). A grouped conv reads only its
     * group's input blocks, so split by groups it reads the input once as
     * well, and each task keeps its groups' weights (ResNeXt-50's 512
     * channels in 32 groups at 14x14, bands of one row: each task read all
     * 295 KB of weights for 14 pixels; split by groups 0.190 -> 0.174 ms on
     * 1 thread, 0.107 -> 0.088 on 2, ORT 0.212 / 0.101). */
    size_t threads = (size_t)nnf_threadpool_size(pool);
    size_t want = 8 * threads, rows = flat ? j.ow : j.oh;
    size_t in_bytes = j.x_img * sizeof(float), w_bytes = k->w_floats * sizeof(float);
    size_t band;
    if (w_bytes > in_bytes || s->group > 1) {
        /* runs of consecutive groups per task, not one: each group's last
         * K block prefetches the next group's first, which with one group a
         * task another thread most often ran */
        t.gsplit = t.groups < want ? t.groups : want;
        size_t outer = s->n * t.gsplit, splits = outer >= want ? 1 : (want + outer - 1) / outer;
        /* mixed groups split evenly as they are where each thread takes
         * whole 16-block runs or six groups at least: cutting the rows into
         * bands as well read each group's weights once a band (7 rows as 4
         * + 3: the 512 -> 512 3x3s at 7x7 on 2 threads 0.80 -> 0.73-0.76
         * ms without; the stride-2 256 -> 256 to 14x14 0.78-0.81 -> 0.77) */
        if (mixed_groups(t.gblk, group_ocb(s)) &&
            (outer >= 6 * threads || outer % (3 * threads) == 0))
            splits = 1;
        band = (rows + splits - 1) / splits;
    } else {
        t.gsplit = 1;
        size_t per_row = in_bytes / rows + 1, l2 = nnf_cpu_get()->l2;
        size_t splits = s->n >= want ? 1 : (want + s->n - 1) / s->n;
        band = l2 / 2 / per_row;
        size_t even = (rows + splits - 1) / splits;
        band = band < even ? band : even;
        band = band ? band : 1;
    }
    size_t units = rows;
    if (flat) {
        t.chunk = (band + FLAT_ALIGN - 1) / FLAT_ALIGN * FLAT_ALIGN;
        units = (j.ow + t.chunk - 1) / t.chunk;
        if (units > 1 && j.ow - (units - 1) * t.chunk < FLAT_ALIGN / 2)
            units--;
        /* a task count the threads do not share evenly: as many more units
         * as make it even, of ow / units pixels each (flat_end; tiles are
         * balanced within a span, 49 pixels as 10 + 10 + 10 + 10 + 9). Two
         * threads ran ResNet-50's 784-pixel 1x1s at 28x28 as 11 units of
         * 72 pixels (the last 64), one waiting for the other's sixth: 92 %
         * busy, now 98-99 %; ResNet-50 0.989, YOLOv5s 0.990 on 2 threads
         * (ab_builds, 4-6 processes), MobileNetV2 within the noise. A
         * pixel's sums do not depend on the units, so neither do the
         * results. */
        size_t outer = s->n * t.gsplit, u = units;
        while (threads > 1 && (outer * u) % threads)
            u++;
        if (u != units && u * FLAT_ALIGN / 2 <= j.ow) {
            units = u;
            t.even = 1;
            t.chunk = (j.ow + u - 1) / u;
        }
        t.units = units;
        band = 1;
    }
    atomic_int failed;
    atomic_init(&failed, 0);
    t.failed = &failed;
    if (plain) {
        /* the buffer: a group's blocks (channel-last: a task's groups'
         * blocks) over at most a quarter of L2 (the band's input shares
         * it), at least one unit (flattened, channel-last: FLAT_ALIGN
         * pixels) */
        size_t l2 = nnf_cpu_get()->l2;
        size_t blocks = cl ? (t.groups + t.gsplit - 1) / t.gsplit * t.gblk : t.gblk;
        size_t px_bytes = blocks * NNF_NCHWC_B * sizeof(float);
        size_t per = (flat ? t.chunk + FLAT_ALIGN / 2 : j.ow) * px_bytes;
        t.sub_units = l2 / 4 / per ? l2 / 4 / per : 1;
        t.sub_units = t.sub_units < band ? t.sub_units : band;
        t.buf_floats = t.sub_units * per / sizeof(float);
        if (cl && flat) {
            t.cl_px = l2 / 4 / px_bytes / FLAT_ALIGN * FLAT_ALIGN;
            t.cl_px = t.cl_px < FLAT_ALIGN ? FLAT_ALIGN : t.cl_px < t.chunk ? t.cl_px : t.chunk;
            t.buf_floats = t.cl_px * px_bytes / sizeof(float);
        }
        t.y_plain = y;
        t.cl = cl;
    }
    nnf_parallel_for_2d(pool, s->n * t.gsplit, units, 1, band, conv_task, &t);
    if (atomic_load(&failed))
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "nchwc conv %s: out of memory for the output buffer",
                         k->name);
    return NNF_OK;
}

nnf_status nnf_nchwc_conv_run(const nnf_nchwc_conv *k, const float *x, float *y,
                              const nnf_epilogue *ep, nnf_threadpool *pool) {
    return conv_run(k, x, y, ep, 0, 0, pool);
}

nnf_status nnf_nchwc_conv_run_nchw(const nnf_nchwc_conv *k, const float *x, float *y,
                                   const nnf_epilogue *ep, nnf_threadpool *pool) {
    return conv_run(k, x, y, ep, 1, 0, pool);
}

nnf_status nnf_nchwc_conv_run_cl(const nnf_nchwc_conv *k, const float *x, float *y,
                                 const nnf_epilogue *ep, size_t group, nnf_threadpool *pool) {
    if (k && (!group || k->s.oc % group))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT,
                         "nchwc conv %s: %zu output channels are not groups of %zu", k->name,
                         k->s.oc, group);
    return conv_run(k, x, y, ep, 1, group, pool);
}

bool nnf_nchwc_plain_out_ok(const nnf_conv2d_shape *s, int in_blocked, nnf_isa isa) {
    return nnf_nchwc_conv_supported(s) && !nnf_nchwc_dw_supported(s) &&
           !(in_blocked && nnf_nchwc_wino_wins(s, isa));
}

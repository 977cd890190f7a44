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

bool nnf_nchwc_wino_supported(const nnf_conv2d_shape *s, nnf_isa isa) {
    return s && isa >= NNF_ISA_AVX2 && s->group == 1 && s->kh == 3 && s->kw == 3 && s->sh == 1 &&
           s->sw == 1 && s->dh == 1 && s->dw == 1 && s->c > 0 && s->oc > 0 && s->oh > 0 &&
           s->ow > 0;
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

/* The fewest input channels: 32 on cores with 1 MiB of L2 or more, 64 below.
 * YOLOv5s's 32-channel 3x3 at 160x160 ran 4.87 -> 3.80 ms in the model on Zen
 * 4 (2.46 -> 2.23 on 2 threads) against the blocked direct kernel; an earlier
 * round on a 512 KiB-L2 core measured it 8.9 against 7.8 ms. */
size_t nnf_nchwc_wino_min_c(void) {
    return nnf_cpu_get()->l2 >= ((size_t)1 << 20) ? 32 : 64;
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

bool nnf_nchwc_wino_wins(const nnf_conv2d_shape *s, nnf_isa isa) {
    size_t tiles = ((s->oh + 3) / 4) * ((s->ow + 3) / 4);
    return nnf_nchwc_wino_supported(s, isa) && s->c >= nnf_nchwc_wino_min_c() && tiles >= WINO_MIN_TILES &&
           !nnf_nchwc_direct_wins(s, isa) && nnf_conv_select(s, isa) == NNF_CONV_ALGO_WINOGRAD;
}

void nnf_nchwc_wino_destroy(nnf_nchwc_wino *k) {
    if (!k)
        return;
    for (int xi = 0; xi < 36; xi++)
        nnf_gemm_packed_destroy(k->u[xi]);
    nnf_free(k);
}

nnf_status nnf_nchwc_wino_create(const nnf_conv2d_shape *s, nnf_isa isa, const float *w,
                                 nnf_nchwc_wino **out) {
    if (!out || !s || !w)
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "nchwc winograd: NULL argument");
    *out = NULL;
    if (!nnf_nchwc_wino_supported(s, isa > nnf_cpu_get()->max_isa ? nnf_cpu_get()->max_isa : isa))
        return nnf_error(NNF_ERR_UNSUPPORTED,
                         "nchwc winograd: not a 3x3 stride-1 dense conv on the AVX2 tier");
    nnf_nchwc_wino *k = nnf_calloc(1, sizeof *k);
    if (!k)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "nchwc winograd: out of memory for the kernel");
    nnf_status st = NNF_OK;
    k->s = *s;
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
    for (size_t xi = 0; xi < 36; xi++) {
        st = nnf_gemm_packed_create(k->cfg, NNF_GEMM_B, k->oc8, k->c8, &k->u[xi]);
        if (st != NNF_OK)
            goto fail;
        nnf_gemm_packed_zero_outside(k->u[xi], s->oc, s->c);
    }
    /* a panel (r output channels) over one K block at a time: each of the
     * 36 matrices written front to back in whole lines. (Input channels
     * outermost, 8 output channels a call, wrote half lines across every
     * panel of every matrix, each line read before it was written.) */
    size_t r = k->u[0]->r, kc = k->u[0]->kc;
    if (r > 32 || r % 8) {
        st = nnf_error(NNF_ERR_UNSUPPORTED, "nchwc winograd: GEMM panels of %zu columns", r);
        goto fail;
    }
    for (size_t p0 = 0; p0 < s->oc; p0 += r)
        for (size_t k0 = 0; k0 < s->c; k0 += kc) {
            float *dst[36];
            for (size_t xi = 0; xi < 36; xi++)
                dst[xi] = nnf_gemm_packed_at(k->u[xi], p0, k0);
            nnf_wino_weight_panel_avx2(w + (p0 * s->c + k0) * 9, s->c * 9,
                                       s->oc - p0 < r ? s->oc - p0 : r, r,
                                       s->c - k0 < kc ? s->c - k0 : kc, dst);
        }
    snprintf(k->name, sizeof k->name, "f32_conv_nchwc_winograd4x4_%s",
             k->cfg->name + strlen("f32_gemm_"));
    *out = k;
    return NNF_OK;
fail:
    nnf_nchwc_wino_destroy(k);
    return st;
}

#define WINO_MAX_SLOTS 256

typedef struct wino_job {
    const nnf_nchwc_wino *k;
    const float *x, *res;
    float *y;
    const nnf_epilogue *ep;
    size_t tiles, blocks;      /* tiles and items per image */
    size_t vstride, mstride;   /* floats between the 36 V / M matrices */
    size_t slot_floats;
    size_t x_img, y_img; /* floats per image */
    float *scratch;
    int slots;
    atomic_int failed;
    atomic_int busy[WINO_MAX_SLOTS];
} wino_job;

/* Item i of an image (see the split in nnf_nchwc_wino_run): the image's
 * whole register panels (mr tiles) dealt out evenly, the last item also
 * taking the tiles past them. Returns the count, *t0 the first tile. */
static size_t item_tiles(const wino_job *j, size_t i, size_t *t0) {
    size_t mr = j->k->cfg->mr, panels = j->tiles / mr, n = j->blocks;
    size_t p0 = i * panels / n, p1 = (i + 1) * panels / n;
    *t0 = p0 * mr;
    return i + 1 == n ? j->tiles - *t0 : (p1 - p0) * mr;
}

/* The tier's transforms: two blocks per zmm on AVX-512. */
static void wino_input(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt, float *v,
                       size_t vstride) {
    if (k->cfg->isa >= NNF_ISA_AVX512)
        nnf_nchwc_wino_input_avx512(k, x, t0, nt, v, vstride);
    else
        nnf_nchwc_wino_input_avx2(k, x, t0, nt, v, vstride);
}

static void wino_output(const nnf_nchwc_wino *k, const float *m, size_t mstride, size_t t0,
                        size_t nt, float *y, const float *res, const nnf_epilogue *ep) {
    if (k->cfg->isa >= NNF_ISA_AVX512)
        nnf_nchwc_wino_output_avx512(k, m, mstride, t0, nt, y, res, ep);
    else
        nnf_nchwc_wino_output_avx2(k, m, mstride, t0, nt, y, res, ep);
}

static void wino_task(void *ctx, size_t item) {
    wino_job *j = ctx;
    const nnf_nchwc_wino *k = j->k;
    int slot = nnf_slot_claim(j->busy, j->slots);
    float *v = j->scratch + (size_t)slot * j->slot_floats, *m = v + 36 * j->vstride;
    size_t b = item / j->blocks, t0, nt = item_tiles(j, item % j->blocks, &t0);
    wino_input(k, j->x + b * j->x_img, t0, nt, v, j->vstride);
    for (size_t xi = 0; xi < 36; xi++) {
        nnf_gemm_src a = nnf_gemm_src_matrix(v + xi * j->vstride, k->c8, 0),
                     u = nnf_gemm_src_packed(k->u[xi]);
        if (nnf_gemm_run(k->cfg, nt, k->oc8, k->c8, &a, &u, m + xi * j->mstride, k->oc8, NULL,
                         NULL) != NNF_OK) {
            atomic_store(&j->failed, 1);
            goto done;
        }
    }
    wino_output(k, m, j->mstride, t0, nt, j->y + b * j->y_img,
                               j->res ? j->res + b * j->y_img : NULL, j->ep);
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
    size_t b, chunk; /* the image; tiles per transform task */
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
    wino_input(j->k, j->x + p->b * j->x_img, t0, nt, j->scratch + t0 * j->k->c8,
                              j->vstride);
}

static void phase_gemm(void *ctx, size_t xi) {
    const wino_phase *p = ctx;
    wino_job *j = p->j;
    const nnf_nchwc_wino *k = j->k;
    float *m = j->scratch + 36 * j->vstride;
    nnf_gemm_src a = nnf_gemm_src_matrix(j->scratch + xi * j->vstride, k->c8, 0),
                 u = nnf_gemm_src_packed(k->u[xi]);
    if (nnf_gemm_run(k->cfg, j->tiles, k->oc8, k->c8, &a, &u, m + xi * j->mstride, k->oc8, NULL,
                     NULL) != NNF_OK)
        atomic_store(&j->failed, 1);
}

static void phase_output(void *ctx, size_t i) {
    const wino_phase *p = ctx;
    const wino_job *j = p->j;
    size_t t0, nt = phase_tiles(p, i, &t0);
    wino_output(j->k, j->scratch + 36 * j->vstride + t0 * j->k->oc8, j->mstride, t0,
                               nt, j->y + p->b * j->y_img, j->res ? j->res + p->b * j->y_img : NULL,
                               j->ep);
}

static bool weight_heavy(const nnf_nchwc_wino *k, size_t tiles, int threads) {
    return threads > 1 && k->s.n < (size_t)threads && tiles > 1 &&
           k->c8 * k->oc8 > tiles * (k->c8 + k->oc8);
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
    wino_job *j = nnf_calloc(1, sizeof *j);
    if (!j)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory for a job", k->name);
    nnf_status st = NNF_OK;
    j->k = k;
    j->x = x;
    j->y = y;
    j->ep = &e;
    j->res = e.residual;
    j->tiles = ((s->oh + 3) / 4) * ((s->ow + 3) / 4);
    j->x_img = k->c8 * s->h * s->w;
    j->y_img = k->oc8 * s->oh * s->ow;
    /* tiles per item: the 36 V and M matrices within 2 MiB, whole register
     * panels (mr rows), at least two items per thread when the image has
     * the tiles */
    size_t mr = k->cfg->mr, blk = ((size_t)2 << 20) / (36 * sizeof(float) * (k->c8 + k->oc8));
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
    size_t vf, mf, per, total;
    if (!nnf_mul_size(most, k->c8, &vf) || !nnf_mul_size(most, k->oc8, &mf) ||
        !nnf_add_size(nnf_wino_odd_lines(vf), nnf_wino_odd_lines(mf), &per) ||
        !nnf_mul_size(per, 36, &per)) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: convolution too large", k->name);
        goto fail;
    }
    j->vstride = nnf_wino_odd_lines(vf);
    j->mstride = nnf_wino_odd_lines(mf);
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
        size_t chunks = (j->tiles + ph.chunk - 1) / ph.chunk;
        for (ph.b = 0; ph.b < s->n && !atomic_load(&j->failed); ph.b++) {
            nnf_parallel_for(pool, chunks, phase_input, &ph);
            nnf_parallel_for(pool, 36, phase_gemm, &ph);
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

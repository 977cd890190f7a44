/* Kernels on the channel-blocked layout NCHWc8 (docs/ARCHITECTURE.md,
 * "Blocked layout").
 *
 * A blocked tensor of logical shape [N, C, H, W] is stored as
 * [N][CB][H][W][8] with CB = ceil(C / 8): the 8 channels of one block sit
 * side by side at every pixel, so one AVX2 vector holds one pixel's block.
 * The graph sees it as a 4-D tensor [N, CB*8, H, W] (the padded channel
 * count), which is why layout-blind ops (same-shape Add, ReLU, Concat on
 * axis 1 of whole blocks) run on it unchanged.
 *
 * The padding lanes (channels C .. CB*8-1 of the last block) are ZERO: every
 * kernel here writes zeros there whatever the activation, and may assume
 * zeros in its blocked inputs.
 *
 * Every entry point takes the tier to run (nnf_isa): NNF_ISA_SCALAR is the
 * portable C path (same layout, same results up to rounding), NNF_ISA_AVX2
 * and above use the AVX2 kernels. Work is split across the pool; results do
 * not depend on the thread count. */
#ifndef NNF_KERNELS_NCHWC_H
#define NNF_KERNELS_NCHWC_H

#include "base/cpu.h"
#include "base/prefetch.h"
#include "base/status.h"
#include "base/threadpool.h"
#include "kernels/conv_fast.h"
#include "kernels/epilogue.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NNF_NCHWC_B 8

static inline size_t nnf_nchwc_blocks(size_t c) { return (c + NNF_NCHWC_B - 1) / NNF_NCHWC_B; }

/* Taps [*lo, *hi) of a window of k taps at dilation d starting at input
 * index `start` whose index start + t d lies in [0, in): the clipping at
 * the borders that every blocked conv and pool shares with the reference
 * (kernels/ref/pool.c's window_taps). */
static inline void nnf_nchwc_window_taps(ptrdiff_t start, size_t k, size_t d, size_t in, size_t *lo, size_t *hi) {
    ptrdiff_t dd = (ptrdiff_t)d, a = start >= 0 ? 0 : (-start + dd - 1) / dd;
    ptrdiff_t b = (ptrdiff_t)in - 1 - start < 0 ? 0 : ((ptrdiff_t)in - 1 - start) / dd + 1;
    if (b > (ptrdiff_t)k)
        b = (ptrdiff_t)k;
    if (a > b)
        a = b;
    *lo = (size_t)a;
    *hi = (size_t)b;
}

/* ---- reorders (nchwc_reorder.c) ----
 * x: NCHW [n][c][hw] -> y: NCHWc8 [n][cb][hw][8], padding lanes zeroed. */
void nnf_nchwc_from_nchw(const float *x, float *y, size_t n, size_t c, size_t hw, nnf_isa isa,
                         nnf_threadpool *pool);
/* x: NCHWc8 -> y: NCHW [n][c][hw] (the padding lanes are dropped). */
void nnf_nchwc_to_nchw(const float *x, float *y, size_t n, size_t c, size_t hw, nnf_isa isa,
                       nnf_threadpool *pool);
/* One block's np pixels ([np][8] at x) to nc planes hw floats apart at y. */
void nnf_nchwc_to_nchw_block(const float *x, size_t hw, size_t nc, size_t np, float *y, nnf_isa isa);
/* The reverse: np pixels of nc planes hw floats apart at x to one block
 * ([np][8] at y), the lanes from nc on zero. */
void nnf_nchwc_from_nchw_block(const float *x, size_t hw, size_t nc, size_t np, float *y,
                               nnf_isa isa);
/* Blocks [cb0, cb0 + nb) of np pixels (block o's pixel p at
 * x[(o - cb0) * xblk + p * 8]) as channels [8 cb0, min(8 (cb0 + nb), c)) of
 * channel-last rows in groups of cl: channel ch of pixel p to
 * y[((ch / cl) * plane + p) * cl + ch % cl]. Pixel by pixel, each row's
 * channels in order, so a row's lines are written whole in turn. */
void nnf_nchwc_to_cl_pixels(const float *x, size_t xblk, size_t cb0, size_t nb, size_t c, size_t np,
                            float *y, size_t plane, size_t cl, nnf_isa isa);

/* ---- dense and grouped convolution (conv_nchwc.c, x86/conv_nchwc_avx2.c) ----
 * Any kernel extent, stride, dilation and padding. The input is NCHWc8, or
 * plain NCHW when in_blocked is 0 (a model's first conv with 3 channels:
 * ORT's "NCHW input" path), the output always NCHWc8. A grouped conv whose
 * groups are whole blocks (RegNet's group widths of 8, 16, 24...) is one
 * dense conv per group on its own blocks: the register tiles stay inside a
 * group, each tile's input starts at its group's blocks. */
typedef struct nnf_nchwc_conv {
    nnf_conv2d_shape s; /* logical (unpadded) channel counts; group 1 or of whole blocks */
    int in_blocked;
    nnf_isa isa;
    float *w;           /* weights repacked for the kernel (layout private to conv_nchwc.c) */
    size_t w_floats;
    size_t gblk;        /* output blocks per register tile, the weights' grouping */
    char name[64];      /* "f32_conv_nchwc_avx2" */
} nnf_nchwc_conv;

/* The shapes the dense blocked conv handles: 2-D, group 1 or groups of whole
 * 8-channel blocks of input and output. */
bool nnf_nchwc_conv_supported(const nnf_conv2d_shape *s);
/* The tier a dense conv of shape s with activation act in its epilogue
 * should be created for when isa is in force on cpu: isa, except on a CPU
 * whose 512-bit operations run as two halves (AMD Zen 4), where groups of
 * up to 3 output blocks, and sums of up to 160 products a tap set with no
 * heavy activation, take the AVX2 tiles (conv_nchwc.c says why). Pure; the
 * planner asks; create() takes its tier as given, so tests reach every
 * tier's tiles. */
nnf_isa nnf_nchwc_conv_tier(const nnf_conv2d_shape *s, nnf_act_kind act, nnf_isa isa,
                            const nnf_cpu *cpu);
/* w: OC x C/group x KH x KW (borrowed for the call; repacked, zero-padded).
 * A grouped conv needs blocked input. */
nnf_status nnf_nchwc_conv_create(const nnf_conv2d_shape *s, int in_blocked, nnf_isa isa, const float *w,
                                 nnf_nchwc_conv **out);
void nnf_nchwc_conv_destroy(nnf_nchwc_conv *k);
/* True when a run makes one pass over the input channels (K fits one K
 * block): every output element is then written once, by the tile that
 * reads its residual element just before, so the output may overwrite a
 * residual added before the activation, in place, with the same bits.
 * Several passes leave partial sums in y before the residual is read; a
 * residual after the activation is added by a second pass over y. Depends
 * on the shape and the tier's tiles, so the plan asks once. */
bool nnf_nchwc_conv_one_pass(const nnf_nchwc_conv *k);
/* y = epilogue(conv(x)), y NCHWc8 with s.oc channels. ep->bias: NULL or s.oc
 * values (NNF_BIAS_PER_ROW); ep->residual: NULL or an NCHWc8 tensor shaped
 * like y (ld_residual ignored), which may be y itself when
 * nnf_nchwc_conv_one_pass(k) and the residual comes before the activation
 * (else NNF_ERR_INVALID_ARGUMENT); ep->act; alpha = 1. */
nnf_status nnf_nchwc_conv_run(const nnf_nchwc_conv *k, const float *x, float *y, const nnf_epilogue *ep,
                              nnf_threadpool *pool);
/* The same conv with y plain NCHW [n, oc, oh, ow] (a conv at the edge of a
 * blocked region: the output reorder fused): each task's band of a tile
 * group goes through a per-thread buffer, blocked, and out to y while in
 * cache; the values are nnf_nchwc_conv_run's, bit for bit. ep as there,
 * without a residual. */
nnf_status nnf_nchwc_conv_run_nchw(const nnf_nchwc_conv *k, const float *x, float *y,
                                   const nnf_epilogue *ep, nnf_threadpool *pool);
/* The same with y channel-last in groups of `group` channels (s.oc a
 * multiple of it): [n][oc / group][oh * ow][group], channel a * group + i
 * of pixel p at ((b * oc / group + a) * oh * ow + p) * group + i. A
 * detection head's Conv -> Reshape [n, A, G, h, w] -> Transpose (0, 1, 3, 4,
 * 2) is group G; Conv -> Transpose (0, 2, 3, 1), NHWC, is group oc. */
nnf_status nnf_nchwc_conv_run_cl(const nnf_nchwc_conv *k, const float *x, float *y,
                                 const nnf_epilogue *ep, size_t group, nnf_threadpool *pool);
/* A conv whose blocked kernel would be the dense one (not the depthwise
 * kernel, not a Winograd that wins), so it can write NCHW. */
bool nnf_nchwc_plain_out_ok(const nnf_conv2d_shape *s, int in_blocked, nnf_isa isa);
/* A pointwise conv: 1x1, stride 1, no padding, group 1, blocked input. */
bool nnf_nchwc_conv_pointwise(const nnf_nchwc_conv *k);
/* The output blocks in register-tile groups (the weights' grouping): their
 * count, and group tg's first block and block count (*nob). */
size_t nnf_nchwc_conv_tile_groups(const nnf_nchwc_conv *k);
size_t nnf_nchwc_conv_tile_group(const nnf_nchwc_conv *k, size_t tg, size_t *nob);
/* Rows [r0, r1) of tile group tg of a pointwise conv's output, x at one
 * image: y [nob][(r1 - r0) * w][8], y_blk floats from block to block; ep as
 * nnf_nchwc_conv_run's, without a residual. The same values as a whole
 * run's, on the calling thread. */
void nnf_nchwc_conv_rows(const nnf_nchwc_conv *k, const float *x, size_t r0, size_t r1, size_t tg,
                         float *y, size_t y_blk, const nnf_epilogue *ep);

/* Internal to conv_nchwc.c and its ISA files. A job is the convolution's
 * geometry as the kernels see it (1x1 stride-1 unpadded convs flattened to
 * one row of h*w pixels); a span call computes output pixels [ow0, ow1) of
 * output rows [oh0, oh1) of image b for output blocks [ocb0, ocb0 + nob),
 * epilogue and zeroed padding lanes included. */
typedef struct nnf_nchwc_conv_job {
    const nnf_nchwc_conv *k;
    const float *x;
    float *y;
    const nnf_epilogue *ep;
    size_t lanes;                /* 8: NCHWc8 input; 1: NCHW input */
    size_t icu;                  /* input channel units: blocks (lanes 8) or channels */
    size_t h, w, oh, ow;         /* after flattening */
    size_t x_img, x_unit, x_row; /* input strides in floats */
    size_t x_grp;                /* input floats per conv group (group > 1: x_img / group) */
    size_t ocb, y_img, y_blk;    /* output blocks, output strides in floats */
    size_t y_blk0;               /* the first block at y (nnf_nchwc_conv_rows; else 0) */
    size_t y_px0;                /* the first pixel (oh * ow + ow) at y (a band in a buffer; else 0) */
    size_t ocb_grp;              /* output blocks per conv group (ocb when group == 1) */
    size_t w_blk;                /* packed weight floats per output block */
    size_t ow_lo, ow_hi;         /* interior columns: every kw tap inside the row */
    size_t oh_lo, oh_hi;         /* interior rows: every kh tap inside the input */
    size_t kc;                   /* input units per K block (weights kept in cache) */
} nnf_nchwc_conv_job;
/* Taps [k0, k1) of a kernel extent k whose input index o*stride - pad +
 * t*dil lies in [0, in): the clipping at the borders. */
/* Interior outputs [*lo, *hi) of one axis: every tap of the window inside
 * the input (o s - pad >= 0 and o s - pad + (k - 1) d < in). [0, lo) and
 * [hi, out) are the borders; lo <= hi <= out always. */
static inline void nnf_nchwc_interior(size_t in, size_t pad, size_t stride, size_t k, size_t dil, size_t out,
                                      size_t *lo, size_t *hi) {
    size_t span = (k - 1) * dil, a = (pad + stride - 1) / stride, b = 0;
    if (in + pad > span)
        b = (in - 1 + pad - span) / stride + 1;
    b = b < out ? b : out;
    *lo = a < b ? a : b;
    *hi = b;
}

static inline void nnf_nchwc_taps(size_t o, size_t stride, size_t pad, size_t dil, size_t k, size_t in,
                                  size_t *k0, size_t *k1) {
    nnf_nchwc_window_taps((ptrdiff_t)(o * stride) - (ptrdiff_t)pad, k, dil, in, k0, k1);
}
/* The next K block's weights, fetched into L2 while the current block runs
 * over the band: a block's weights are L1-sized, but a group's outgrow L2
 * on the large layers (590 KiB for 512 -> 512 3x3), so each block came from
 * L3 and the first tile after each block change stalled on it (ResNet-50's
 * 512-channel 3x3 at 7x7: that tile took half the time for 3/7 of the
 * FMAs). The assembly tiles take a line per tap as they go (`take`); each
 * row start brings the cursor up to the row's share of the block, so what
 * the C tiles do not take still arrives a row ahead. */
typedef struct nnf_nchwc_wfetch {
    const char *base;
    size_t off, bytes, per; /* per: bytes per row, whole lines */
} nnf_nchwc_wfetch;

/* The block after the one ending at unit u1 of a tile group whose weights
 * start at w, wunit floats per unit, spread over a band of `rows` rows.
 * After a group's last block comes the next group's first (the weights are
 * group after group, and the thread most often runs that group next): else
 * the first tiles of every group waited on memory for their weights
 * (ResNet-50's 1x1s at 7x7 stream 1-4 MiB of weights a run). */
static inline nnf_nchwc_wfetch nnf_nchwc_wfetch_init(const nnf_nchwc_conv_job *j, const float *w, size_t u1,
                                                     size_t wunit, size_t rows) {
    size_t units = j->icu - u1 < j->kc ? j->icu - u1 : j->kc;
    if (!units)
        units = j->icu < j->kc ? j->icu : j->kc;
    const char *p = (const char *)(w + u1 * wunit), *end = (const char *)(j->k->w + j->k->w_floats);
    size_t left = p < end ? (size_t)(end - p) : 0, want = units * wunit * sizeof(float);
    nnf_nchwc_wfetch f = {p, 0, left < want ? left : want, 0};
    f.per = rows > 1 ? (f.bytes / rows + 63) & ~(size_t)63 : 0;
    return f;
}

/* Up to the share of the first `rows` rows of the band. A band of one row
 * (a flattened 1x1: all its pixels) leaves the block to the tiles' takes:
 * fetched at the row's start, 24 KiB at once, it stalled the tiles behind
 * the queue of misses instead of overlapping them (ResNet-50 1 thread
 * 2.2 % faster, its 512 -> 2048 1x1 at 7x7 after a cache sweep 1.33 ->
 * 1.21 ms). */
static inline void nnf_nchwc_wfetch_upto(nnf_nchwc_wfetch *f, size_t rows) {
    if (!f->per)
        return; /* nothing to fetch */
    size_t stop = f->bytes / f->per < rows ? f->bytes : rows * f->per;
    for (; f->off < stop; f->off += 64)
        __builtin_prefetch(f->base + f->off, 0, 2); /* prefetcht1: into L2 */
}

/* An NCHW input (a model's first conv): the input rows output row oh + 1
 * reads that row oh does not, channels [u0, u1) of the image at x, into L1
 * as row oh starts. The image comes cold, and MobileNetV2's 3 -> 32
 * stride-2 stem (27 FMAs an output) waited on it: 0.152 -> 0.125 ms in the
 * model on the AVX-512 tier, the model 0.981 / 0.980 on 1 / 2 threads
 * (ab_builds, 6 / 4 processes); ResNet-50's 7x7 and YOLOv5s's 6x6 stems,
 * with more work a row, even. The AVX2 tier (NNF_ISA=avx2 on the same Zen
 * 5) waited longer: that stem 0.35 -> 0.21 ms, the model 0.976, YOLOv5s's
 * stem 0.963, ResNet-50's 0.988. */
static inline void nnf_nchwc_fetch_next_rows(const nnf_nchwc_conv_job *j, const float *x, size_t u0,
                                             size_t u1, size_t oh, size_t oh1) {
    const nnf_conv2d_shape *s = &j->k->s;
    if (j->lanes != 1 || oh + 1 >= oh1)
        return;
    ptrdiff_t r0 =
        (ptrdiff_t)(oh * s->sh) - (ptrdiff_t)s->pt + (ptrdiff_t)((s->kh - 1) * s->dh + 1);
    for (size_t u = u0; u < u1; u++)
        for (ptrdiff_t r = r0; r < r0 + (ptrdiff_t)s->sh; r++) {
            if (r < 0 || r >= (ptrdiff_t)j->h)
                continue;
            const char *p = (const char *)(x + u * j->x_unit + (size_t)r * j->x_row);
            for (size_t o = 0; o < j->x_row * sizeof(float); o += 64)
                nnf_prefetch_l1(p + o); /* not __builtin_prefetch: base/prefetch.h */
        }
}

/* Lines not fetched yet. */
static inline size_t nnf_nchwc_wfetch_left(const nnf_nchwc_wfetch *f) {
    return (f->bytes - (f->off < f->bytes ? f->off : f->bytes)) / 64;
}

/* Hands n lines to tiles that prefetch one per tap: returns the first, or
 * NULL when fewer than n are left (the row starts fetch the rest). */
static inline const char *nnf_nchwc_wfetch_take(nnf_nchwc_wfetch *f, size_t n) {
    if (nnf_nchwc_wfetch_left(f) < n)
        return NULL;
    const char *p = f->base + f->off;
    f->off += n * 64;
    return p;
}

/* A row's columns cut where the taps inside the input change. A dilated
 * conv whose dilation exceeds its stride keeps the same taps over runs of
 * columns: DeepLabV3's ASPP (3x3, dilation 12, 24, 36 at 28x28) has no
 * interior column at all at 24 and 36, and its border columns, read as
 * zeros tap by tap, cost 1.7-2.2x ORT's time, which skips them. Such a run
 * (RESTRICTED: two columns or more, blocked input, stride 1 or 2) runs as
 * interior tiles over its taps [kw0, kw1) alone; the values are the same
 * (a sum from +0 is unchanged by adding +-0). The rest as before: the
 * interior (every tap inside) and the single columns between (GUARDED,
 * merged: their taps read as zeros, or column tiles). An undilated conv
 * has no RESTRICTED run. */
enum { NNF_NCHWC_INTERIOR, NNF_NCHWC_RESTRICTED, NNF_NCHWC_GUARDED };
typedef struct nnf_nchwc_part {
    size_t ow0, ow1; /* columns */
    size_t kw0, kw1; /* the taps inside for each of them (INTERIOR: 0, kw) */
    int kind;
} nnf_nchwc_part;
/* At most 2 kw + 1 runs; wider kernels keep the three parts, border,
 * interior, border. */
#define NNF_NCHWC_PARTS_MAX 33
/* The parts of columns [ow0, ow1), left to right; returns their count. */
size_t nnf_nchwc_row_parts(const nnf_nchwc_conv_job *j, size_t ow0, size_t ow1, nnf_nchwc_part *p);

/* The widest AVX2 register tile's pixels for nob (1..4) output blocks: 12
 * accumulators at most. */
static inline size_t nnf_nchwc_avx2_tile_px(size_t nob) {
    static const size_t px[4] = {8, 6, 4, 3};
    return px[nob - 1];
}
/* nob: 1..4 output blocks (the AVX2 register tile's height). */
void nnf_nchwc_conv_span_avx2(const nnf_nchwc_conv_job *j, size_t b, size_t ocb0, size_t nob, size_t oh0,
                              size_t oh1, size_t ow0, size_t ow1);
/* Tests: the AVX-512 tiles run 3-block groups as two zmm a pixel, not with
 * a zmm shared by two pixels' third block (the same bits either way). */
extern int nnf_nchwc_no_pair3;
/* Tests: 1 runs patch convs on the direct tiles, not as a 1x1 over a copy
 * of their windows (conv_nchwc.c, patch_conv; the same bits either way). */
extern int nnf_nchwc_no_patch_copy;
/* nob: 1..8 output blocks (two per zmm); blocked input only. */
void nnf_nchwc_conv_span_avx512(const nnf_nchwc_conv_job *j, size_t b, size_t ocb0, size_t nob, size_t oh0,
                                size_t oh1, size_t ow0, size_t ow1);

/* ---- depthwise convolution (nchwc_dw.c, x86/nchwc_avx2.c) ----
 * group == C == OC, any kernel extent, stride, dilation and padding; input
 * and output NCHWc8. One vector is one pixel's 8 channels, so stride 2 costs
 * no gathers. */
typedef struct nnf_nchwc_dw {
    nnf_conv2d_shape s;
    nnf_isa isa;
    float *w;           /* [cb][kh][kw][8], zero-padded */
    char name[64];
} nnf_nchwc_dw;

bool nnf_nchwc_dw_supported(const nnf_conv2d_shape *s);
/* Rows the SIMD tiers run as one or two register tiles with their borders
 * (at most 16 pixels, 3x3 or 5x5 kernels at stride 1 or 2 along the row,
 * "same" left padding). */
bool nnf_nchwc_dw_small_rows(const nnf_conv2d_shape *s);
nnf_status nnf_nchwc_dw_create(const nnf_conv2d_shape *s, nnf_isa isa, const float *w, nnf_nchwc_dw **out);
void nnf_nchwc_dw_destroy(nnf_nchwc_dw *k);
/* Same epilogue contract as nnf_nchwc_conv_run. */
nnf_status nnf_nchwc_dw_run(const nnf_nchwc_dw *k, const float *x, float *y, const nnf_epilogue *ep,
                            nnf_threadpool *pool);
/* Bands of output rows of a pair of blocks, worked in L2 buffers
 * (nnf_nchwc_dw_run_plain, nnf_nchwc_gconv_run): the input rows a band of
 * noh output rows reads at most; the floats of the pair's buffers, its
 * input rows and `outs` sets of output rows; whether the extents are
 * bounded (nothing below wraps) and a one-row band fits a quarter of L2;
 * the rows a band (the most that fit, fewer where that leaves under ~4
 * items a thread of plane_items pairs); the input rows [r0, r1) the
 * windows of output rows [oh0, oh0 + noh) reach (none: all padding). */
size_t nnf_nchwc_band_in_rows(const nnf_conv2d_shape *s, size_t noh);
size_t nnf_nchwc_band_floats(const nnf_conv2d_shape *s, size_t noh, size_t outs);
bool nnf_nchwc_band_fits(const nnf_conv2d_shape *s, size_t outs);
size_t nnf_nchwc_band_rows(const nnf_conv2d_shape *s, size_t outs, size_t plane_items, int threads);
void nnf_nchwc_band_reach(const nnf_conv2d_shape *s, size_t oh0, size_t noh, size_t *r0,
                          size_t *r1);
/* Shapes nnf_nchwc_dw_run_plain takes: a band of one output row of a pair
 * of blocks, with the input rows it reads, within a quarter of L2. */
bool nnf_nchwc_dw_plain_ok(const nnf_conv2d_shape *s);
/* Shapes nnf_nchwc_dw_run_plain runs faster on tier isa than the NCHW row
 * kernels (conv_dw.c) between the same tensors. */
bool nnf_nchwc_dw_plain_wins(const nnf_conv2d_shape *s, nnf_isa isa);
/* The conv between NCHW tensors x and y, no residual: per pair of blocks
 * and band of output rows, the input rows it reads reordered into a
 * per-thread buffer, the blocked rows run over them into a second one and
 * reordered out to y. The values are those of nnf_nchwc_dw_run between the
 * two reorders, bit for bit. */
nnf_status nnf_nchwc_dw_run_plain(const nnf_nchwc_dw *k, const float *x, float *y,
                                  const nnf_epilogue *ep, nnf_threadpool *pool);
/* Output rows [oh0, oh0 + noh) of block blk of one image on the calling
 * thread: x holds input rows [x_row0, x_row1) of the block's plane (every
 * row those output rows read), y the block's output rows from y_row0 on,
 * res (NULL: none; ep says how it is added) its residual's likewise. */
void nnf_nchwc_dw_rows(const nnf_nchwc_dw *k, const float *x, size_t x_row0, size_t x_row1,
                       size_t blk, float *y, size_t y_row0, const float *res,
                       const nnf_epilogue *ep, size_t oh0, size_t noh);
/* The same for blocks blk and blk + 1 (x + xplane, y + yplane, res +
 * rplane): as one on the AVX-512 tier where nnf_nchwc_dw_pair_ok, else one
 * after the other. */
void nnf_nchwc_dw_rows2(const nnf_nchwc_dw *k, const float *x, size_t xplane, size_t x_row0,
                        size_t x_row1, size_t blk, float *y, size_t yplane, size_t y_row0,
                        const float *res, size_t rplane, const nnf_epilogue *ep, size_t oh0,
                        size_t noh);
/* The AVX-512 tier runs two blocks per zmm: 3x3 and 5x5 at stride 1 or 2
 * across (7x7 at stride 1 with a clamp), no dilation, the epilogue a bias
 * and a clamp, SiLU or HardSwish; a residual only in a 3x3 with a clamp,
 * added before it, unscaled. */
bool nnf_nchwc_dw_pair_ok(const nnf_nchwc_dw *k, const nnf_epilogue *ep, const float *res);

/* Grouped convolution with 2 or 4 channels a group, as many in as out
 * (ResNeXt-50 32x4d's first stage: 32 groups of 4), blocked in and out: a
 * group never straddles a block, so output lane l of a block reads input
 * lanes l - l % cpg to l - l % cpg + cpg - 1 of the same block. The conv is
 * cpg depthwise convs: pass j reads the input with each lane's group's j-th
 * lane spread over the group's lanes, and adds to the passes before it
 * (their sum the residual of its epilogue, in L2), the last one with the
 * conv's bias and activation. The NCHW path ran it as a GEMM per group of 4
 * channels: 23 GFLOP/s. */
typedef struct nnf_nchwc_gconv {
    nnf_conv2d_shape s;
    nnf_nchwc_dw *dw[4]; /* pass j: each output channel's weights for its group's j-th input */
    char name[64];
} nnf_nchwc_gconv;

bool nnf_nchwc_gconv_supported(const nnf_conv2d_shape *s);
nnf_status nnf_nchwc_gconv_create(const nnf_conv2d_shape *s, nnf_isa isa, const float *w,
                                  nnf_nchwc_gconv **out);
void nnf_nchwc_gconv_destroy(nnf_nchwc_gconv *k);
/* Same epilogue contract as nnf_nchwc_conv_run, but a residual after the
 * activation (NNF_ERR_UNSUPPORTED: the passes add theirs before it). */
nnf_status nnf_nchwc_gconv_run(const nnf_nchwc_gconv *k, const float *x, float *y,
                               const nnf_epilogue *ep, nnf_threadpool *pool);

/* ---- pointwise -> depthwise, fused (nchwc_pw_dw.c) ----
 * A pointwise conv whose output only a depthwise conv reads (MobileNet's
 * expansion and its depthwise conv; oneDNN's depthwise post-op): per task
 * of (image, tile group of the pointwise conv, band of output rows), the
 * pointwise rows the band reads go to a per-thread buffer of a few rows
 * that slides down the band, and the depthwise rows are computed from it
 * while it is in L2. The expanded tensor is never written whole. The
 * values are the two kernels' run one after the other, bit for bit. */
bool nnf_nchwc_pw_dw_supported(const nnf_nchwc_conv *pw, const nnf_nchwc_dw *dw);
/* Neither epilogue has a residual. */
nnf_status nnf_nchwc_pw_dw_run(const nnf_nchwc_conv *pw, const nnf_nchwc_dw *dw, const float *x,
                               float *y, const nnf_epilogue *ep_pw, const nnf_epilogue *ep_dw,
                               nnf_threadpool *pool);

/* ---- Winograd F(4x4,3x3) (nchwc_winograd.c, x86/nchwc_winograd_avx2.c) ----
 * Group 1, 3x3, stride 1, dilation 1, NCHWc8 in and out, AVX2 tier and
 * above. Per block of output tiles (4x4 pixels each): the input transform
 * runs on 8-channel vectors, so it needs no transposes, and writes the 36
 * matrices V_xi [tiles][c8] row-major; 36 GEMMs M_xi = V_xi U_xi with the
 * transformed weights U_xi (c8 x oc8) prepacked as the B operand; the
 * output transform applies the epilogue to each output vector and stores
 * it. Channels past c and oc have zero weights; padding lanes come out 0. */
typedef struct nnf_nchwc_wino {
    nnf_conv2d_shape s;
    const nnf_gemm_cfg *cfg;
    size_t c8, oc8; /* channels rounded up to whole blocks */
    int s2;         /* the stride-2 form (below) */
    int f2;         /* F(2x2,3x3) (below) */
    size_t nmat;    /* weight matrices: 36, or 16 for F(2x2,3x3) */
    size_t tile;    /* output tile edge: 4, or 2 for F(2x2,3x3) */
    nnf_gemm_packed *u[36];
    size_t dil;                   /* > 1: the dilated form (below); its u are phase's */
    struct nnf_nchwc_wino *phase; /* ... the undilated kernel that runs the phases */
    char name[64];
} nnf_nchwc_wino;

/* The dilated form (3x3, dilation d > 1 on both axes, stride 1, "same"
 * padding d): the output pixels of one phase (rows = r, columns = c modulo
 * d) read only the input pixels of the same phase, as an undilated 3x3
 * with padding 1 over that phase's map. So each image's phases are laid out
 * as a mosaic, phase after phase along each axis with a zero row or column
 * between two as their padding (an axis of n: n + min(d, n) - 1), the
 * undilated Winograd runs the mosaic, and the phases' outputs interleave
 * back (a residual is laid out like the input; the gutters' outputs are
 * dropped). One mosaic, not d x d images of a batch: the Winograd's tiles
 * are the GEMMs' rows (7x7 phases as images were 4 tiles each). DeepLabV3's
 * dilated ResNet-50 (dilation 2 and 4 at 28x28) ran its 3x3s on the direct
 * kernel. The form wins (nnf_nchwc_wino_wins) only where the mosaic's
 * F(4x4,3x3) products are at most half the taps inside the input, which
 * the direct kernel runs alone (nnf_nchwc_row_parts; a dilation that
 * reaches past much of the map, as ASPP's 12, 24 and 36 on 28x28, stays
 * there). Returns d and the mosaic's shape, or 0 where the form does not
 * apply. */
size_t nnf_nchwc_wino_phases(const nnf_conv2d_shape *s, nnf_conv2d_shape *ps);

/* The stride-2 form (3x3, stride 2, AVX-512 tier): the input splits into
 * its four phases (even/odd rows x even/odd columns), on which the conv is
 * four stride-1 convs with the kernel's 2x2, 2x1, 1x2 and 1x1 parts. Per
 * 4x4 output tile (a 9x9 input patch): the 2x2 part runs as F(4x4,2x2)
 * (25 matrices), the 2x1 and 1x2 parts as F(4,2) along their two-tap axis
 * (5 matrices each, every one used by the 4 pixels of the other axis: a
 * GEMM of 4 rows a tile), the 1x1 part as a plain product (1 matrix, 16
 * rows a tile): 36 weight matrices, 81 products a tile where the direct
 * conv does 144 (1.78x fewer), the outputs summed before the epilogue.
 * Matrix xi's rows: nnf_nchwc_wino_rows(k, xi) a tile, unit-major
 * ([unit][tile][c8]). F(4,2) on points 0, 1, -1, 2, inf: */
extern const double nnf_wino2_bt[5][5], nnf_wino2_g[5][2], nnf_wino2_at[4][5];
static inline size_t nnf_nchwc_wino_rows(const nnf_nchwc_wino *k, size_t xi) {
    return !k->s2 || xi < 25 ? 1 : xi < 35 ? 4 : 16;
}
/* The F(2x2,3x3) form (3x3, stride 1, both SIMD tiers): 2x2 output tiles
 * from 4x4 input patches, 16 weight matrices, 16 products a tile (2.25x
 * fewer than the direct conv; F(4x4,3x3): 4x) for maps whose F(4x4,3x3)
 * tiles are too few to reuse its 36 matrices (nnf_nchwc_wino_f2): 2.25x
 * fewer weight bytes to stream for 1.78x more products (not at 16 tiles
 * where ymm FMAs run as halves: the products cost twice there). Transforms
 * and weight transform in x86/nchwc_winograd_{avx2,avx512}.c, with
 * F(4x4,3x3)'s. */
extern const double nnf_wino_f2_bt[4][4], nnf_wino_f2_g[4][3], nnf_wino_f2_at[2][4];
bool nnf_nchwc_wino_f2(const nnf_conv2d_shape *s, nnf_isa isa);
/* F(4x4,3x3)'s transformed weights would exceed 16 MiB (nchwc_winograd.c):
 * 16-tile maps take F(2x2,3x3) on every core, and the layout pass blocks
 * such convs (the NCHW Winograd has no F(2x2,3x3) form). */
bool nnf_nchwc_wino_f4_heavy(const nnf_conv2d_shape *s);
/* Output tiles of one image. */
static inline size_t nnf_nchwc_wino_tiles(const nnf_nchwc_wino *k) {
    return ((k->s.oh + k->tile - 1) / k->tile) * ((k->s.ow + k->tile - 1) / k->tile);
}

bool nnf_nchwc_wino_supported(const nnf_conv2d_shape *s, nnf_isa isa);
/* Whether a blocked conv runs as Winograd (a pure function of the shape and
 * the CPU, the plan's choice): where the NCHW selection picks Winograd
 * (kernels/conv_fast.h), from nnf_nchwc_wino_min_c() input channels (on
 * fewer its short GEMMs lose to the direct kernel) and 16 tiles (the tiles
 * are the GEMMs' rows, 6 per register panel: ResNet-50's 14x14 maps, 16
 * tiles, ran 1.0x the NCHW kernel with its reorders on Zen 3 on 1 thread,
 * 0.79x on 2, 0.9x on Zen 4; below the threshold the layout pass leaves
 * those convs in NCHW). */
bool nnf_nchwc_wino_wins(const nnf_conv2d_shape *s, nnf_isa isa);
/* Where the blocked direct kernel beats F(4x4,3x3), blocked or NCHW: on
 * the AVX-512 tier, maps of fewer than 16 tiles (nchwc_winograd.c); those
 * with 25 or more 2x2 tiles run F(2x2,3x3) (nnf_nchwc_wino_wins says so). */
bool nnf_nchwc_direct_wins(const nnf_conv2d_shape *s, nnf_isa isa);
/* 32 input channels (nchwc_winograd.c says what it measured). */
size_t nnf_nchwc_wino_min_c(void);
nnf_status nnf_nchwc_wino_create(const nnf_conv2d_shape *s, nnf_isa isa, const float *w, nnf_nchwc_wino **out);
/* The same with the F(2x2,3x3) form forced on (f2, stride 1 on the AVX-512
 * tier) or off, whatever nnf_nchwc_wino_f2 says (tests). */
nnf_status nnf_nchwc_wino_create_as(const nnf_conv2d_shape *s, nnf_isa isa, int f2, const float *w,
                                    nnf_nchwc_wino **out);
void nnf_nchwc_wino_destroy(nnf_nchwc_wino *k);
/* Same epilogue contract as nnf_nchwc_conv_run. */
nnf_status nnf_nchwc_wino_run(const nnf_nchwc_wino *k, const float *x, float *y, const nnf_epilogue *ep,
                              nnf_threadpool *pool);
/* The AVX2 transforms of tiles [t0, t0 + nt) of one image (x, y, res at the
 * image): v[xi * vstride + t * c8 + ch], m[xi * mstride + t * oc8 + oc]. */
void nnf_nchwc_wino_input_avx2(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt, float *v,
                               size_t vstride);
void nnf_nchwc_wino_output_avx2(const nnf_nchwc_wino *k, const float *m, size_t mstride, size_t t0, size_t nt,
                                float *y, const float *res, const nnf_epilogue *ep);
/* The same on two blocks per zmm (x86/nchwc_winograd_avx512.c), the AVX-512
 * tier's: the same bits. */
void nnf_nchwc_wino_input_avx512(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt, float *v,
                                 size_t vstride);
void nnf_nchwc_wino_output_avx512(const nnf_nchwc_wino *k, const float *m, size_t mstride, size_t t0,
                                  size_t nt, float *y, const float *res, const nnf_epilogue *ep);

/* The stride-2 form's transforms (x86/nchwc_winograd_s2_avx512.c, and
 * x86/nchwc_winograd_s2_avx2.c with one block per ymm: the same values),
 * tiles [t0, t0 + nt): matrix xi starts at v + base[xi] (m + base[xi]),
 * its unit u (rows of nnf_nchwc_wino_rows) at + u * ustride, tile t at
 * + t * c8 (oc8). */
void nnf_nchwc_wino2_input_avx512(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt,
                                  float *v, const size_t base[36], size_t ustride);
void nnf_nchwc_wino2_output_avx512(const nnf_nchwc_wino *k, const float *m, const size_t base[36],
                                   size_t ustride, size_t t0, size_t nt, float *y, const float *res,
                                   const nnf_epilogue *ep);
void nnf_nchwc_wino2_input_avx2(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt,
                                float *v, const size_t base[36], size_t ustride);
void nnf_nchwc_wino2_output_avx2(const nnf_nchwc_wino *k, const float *m, const size_t base[36],
                                 size_t ustride, size_t t0, size_t nt, float *y, const float *res,
                                 const nnf_epilogue *ep);
/* The weight transforms of the three forms, on both SIMD tiers
 * (NNF_WINO_WEIGHTS in x86/winograd_avx2.h; the same bits on each): one
 * panel of m <= r (<= 32, a multiple of 8) output channels over k input
 * channels (kernel o of input channel kk at w + o * stride + kk * 9) into
 * dst[xi] + kk * r + o, the 36 (F(2x2,3x3): 16) packed matrices at the
 * panel's K block (nchwc_winograd.c), columns m..r-1 +0, each row written
 * whole with streaming stores. */
void nnf_wino_weight_panel_avx2(const float *w, size_t stride, size_t m, size_t r, size_t k,
                                float *const dst[36]);
void nnf_nchwc_winof2_weight_panel_avx2(const float *w, size_t stride, size_t m, size_t r, size_t k,
                                        float *const dst[16]);
void nnf_nchwc_wino2_weight_panel_avx2(const float *w, size_t stride, size_t m, size_t r, size_t k,
                                       float *const dst[36]);
void nnf_wino_weight_panel_avx512(const float *w, size_t stride, size_t m, size_t r, size_t k,
                                  float *const dst[36]);
void nnf_nchwc_winof2_weight_panel_avx512(const float *w, size_t stride, size_t m, size_t r,
                                          size_t k, float *const dst[16]);
void nnf_nchwc_wino2_weight_panel_avx512(const float *w, size_t stride, size_t m, size_t r,
                                         size_t k, float *const dst[36]);
/* The F(2x2,3x3) form's: the same contracts with 16 matrices (stride vstride /
 * mstride between them) (x86/nchwc_winograd_avx512.c; the AVX2 ones below). */
void nnf_nchwc_winof2_input_avx512(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt,
                                   float *v, size_t vstride);
void nnf_nchwc_winof2_output_avx512(const nnf_nchwc_wino *k, const float *m, size_t mstride,
                                    size_t t0, size_t nt, float *y, const float *res,
                                    const nnf_epilogue *ep);
/* And on the AVX2 tier (x86/nchwc_winograd_avx2.c), one block a ymm. */
void nnf_nchwc_winof2_input_avx2(const nnf_nchwc_wino *k, const float *x, size_t t0, size_t nt,
                                 float *v, size_t vstride);
void nnf_nchwc_winof2_output_avx2(const nnf_nchwc_wino *k, const float *m, size_t mstride,
                                  size_t t0, size_t nt, float *y, const float *res,
                                  const nnf_epilogue *ep);

/* ---- pooling (nchwc_pool.c, x86/nchwc_avx2.c) ---- */
typedef struct nnf_nchwc_pool_shape {
    size_t n, c, h, w;      /* logical input */
    size_t kh, kw, sh, sw, dh, dw;
    size_t pt, pl;          /* top/left padding */
    size_t pb, pr;          /* bottom/right padding as the op resolved it */
    size_t oh, ow;
    int is_max;             /* 1: MaxPool, 0: AveragePool */
    int count_include_pad;  /* AveragePool: as the ONNX attribute */
} nnf_nchwc_pool_shape;

/* MaxPool / AveragePool, NCHWc8 in and out, the reference kernel's semantics
 * (kernels/ref/pool.c: windows clipped to the padded input, ceil_mode
 * windows included, the divisor as count_include_pad says). */
void nnf_nchwc_pool(const nnf_nchwc_pool_shape *s, const float *x, float *y, nnf_isa isa, nnf_threadpool *pool);
/* GlobalAveragePool (is_max 0) / GlobalMaxPool (1): x NCHWc8 [n][cb][hw][8]
 * -> y plain [n][c] (= NCHW [n][c][1][1]). */
void nnf_nchwc_global_pool(const float *x, float *y, size_t n, size_t c, size_t hw, int is_max, nnf_isa isa,
                           nnf_threadpool *pool);

/* ---- Add / Sub / Mul with a per-channel operand (nchwc_binary.c) ----
 * y = x op v, or v op x when v_first (Sub), for op NNF_EWB_ADD, _SUB or
 * _MUL (nnf_ew_binop): x and y blocked [n][cb][hw][8], v blocked too, one
 * [cb][8] vector per image (v_per_image) or one for all images: the
 * [N or 1, C, 1, 1] operand of a squeeze-and-excitation scale or a
 * per-channel shift. Both operands' padding lanes are zero, and 0 op 0 is
 * 0, so y's are too. Each value is the one IEEE operation the reference
 * does. */
void nnf_nchwc_channel_binary(int op, const float *x, const float *v, float *y, size_t n, size_t cb,
                              size_t hw, int v_per_image, int v_first, nnf_isa isa,
                              nnf_threadpool *pool);

/* ---- nearest Resize (nchwc_resize.c) ----
 * y[b][cb][i][j][:] = x[b][cb][rows[i]][cols[j]][:] for i < oh, j < ow;
 * rows[] / cols[] are the source indices the Resize plan computed (each in
 * range), so any nearest mode and scale is one table. */
void nnf_nchwc_resize_nearest(const float *x, float *y, size_t n, size_t c, size_t ih, size_t iw, size_t oh,
                              size_t ow, const int32_t *rows, const int32_t *cols, nnf_isa isa,
                              nnf_threadpool *pool);

#endif

/* Optimised 2-D convolution on NCHW tensors (1-D convs run as H = 1).
 *
 * Algorithms:
 *   GEMM_1X1    1x1, stride 1, no padding: per image and group, Y (OCg x HW)
 *               = W (OCg x ICg, prepacked as GEMM A) · X (ICg x HW, packed on
 *               the fly as B). No im2col at all.
 *   IM2COL      any other kernel/stride/dilation/padding: the same GEMM with
 *               B packed straight from the input through an implicit im2col
 *               (one kc x nc block at a time, so it stays in cache).
 *   STRIDED     stride > 1 with few input channels (K <= 160, the stems):
 *               the IM2COL GEMM over a copy of the input rows, padded and
 *               split into the stride's column phases, so B panels are
 *               plain copies (conv_strided.c).
 *   DEPTHWISE   group == IC == OC, 3x3 or 5x5, stride 1 or 2, no dilation:
 *               per channel plane, 4 output rows per pass from input rows
 *               prepared once each (zero-padded, stride 2 split into
 *               even/odd columns), vectorised over output width; narrow
 *               planes 8 channels per vector instead (conv_dw.c).
 *   WINOGRAD    3x3, stride 1, no dilation, one group, enough channels and
 *               output width (AVX2 tiers): F(4x4,3x3). Per block of tile
 *               rows, the input transform writes 36 GEMM B operands (C x
 *               tiles) straight in the packed layout, 36 GEMMs with the
 *               prepacked transformed weights (OC x C) give 36 OC x tiles
 *               products, the output transform applies the epilogue.
 * Every algorithm applies the same epilogue (bias per output channel,
 * activation, residual add) before the output is stored.
 * Not done: NCHWc blocked layouts. */
#ifndef NNF_KERNELS_CONV_FAST_H
#define NNF_KERNELS_CONV_FAST_H

#include "kernels/gemm.h"

typedef struct nnf_conv2d_shape {
    size_t n, c, h, w; /* input */
    size_t oc, group;
    size_t kh, kw, sh, sw, dh, dw;
    size_t pt, pl;     /* top/left padding; bottom/right follow from oh/ow */
    size_t oh, ow;
} nnf_conv2d_shape;

typedef enum nnf_conv_algo {
    NNF_CONV_ALGO_NONE = 0, /* not handled here: use the reference kernel */
    NNF_CONV_ALGO_GEMM_1X1,
    NNF_CONV_ALGO_IM2COL,
    NNF_CONV_ALGO_DEPTHWISE,
    NNF_CONV_ALGO_WINOGRAD,
    NNF_CONV_ALGO_STRIDED, /* IM2COL over a phase-split copy of the input (conv_strided.c) */
} nnf_conv_algo;

/* Whether algo computes shape s on tier isa: its preconditions, which
 * nnf_conv_kernel_create checks (an algorithm given a shape it does not
 * compute would read and write out of bounds). */
bool nnf_conv_algo_fits(const nnf_conv2d_shape *s, nnf_conv_algo algo, nnf_isa isa);
/* Pure selection from the shape and tier: the fastest algorithm that fits. */
nnf_conv_algo nnf_conv_select(const nnf_conv2d_shape *s, nnf_isa isa);
const char *nnf_conv_algo_name(nnf_conv_algo algo);

typedef struct nnf_conv_kernel {
    nnf_conv2d_shape s;
    nnf_conv_algo algo;
    nnf_isa isa;
    const nnf_gemm_cfg *cfg;     /* GEMM algorithms */
    nnf_gemm_packed **packed_w;  /* per group (GEMM algorithms), per point (WINOGRAD) */
    size_t n_packed;             /* entries in packed_w */
    float *dw_w;                 /* DEPTHWISE: C x kh*kw, a copy */
    int dw_kern;                 /* DEPTHWISE: an nnf_dw_kernel */
    size_t *tap_off;             /* STRIDED: per row k of a group's K, the tap's offset in a split band */
    char name[64];               /* "f32_conv_im2col_6x16_avx2" */
} nnf_conv_kernel;

/* The epilogue of group g of image b: its OC/group bias values and, for a
 * residual shaped like y, its block of output planes. */
static inline nnf_epilogue nnf_conv_group_epilogue(const nnf_epilogue *ep,
                                                   const nnf_conv2d_shape *s, size_t b,
                                                   size_t g) {
    return nnf_epilogue_at_group(ep, s->oc, s->oc / s->group, s->oh * s->ow, b, g);
}

/* Prepare a kernel for algo (from nnf_conv_select) with the weights w
 * (OC x IC/group x KH x KW, borrowed for the call; packed or copied). */
nnf_status nnf_conv_kernel_create(const nnf_conv2d_shape *s, nnf_conv_algo algo, nnf_isa isa,
                                  const float *w, nnf_conv_kernel **out);
void nnf_conv_kernel_destroy(nnf_conv_kernel *k);

/* y = epilogue(conv(x)). ep->bias (if any) holds OC values and must say
 * NNF_BIAS_PER_ROW; ep->residual (if any) is shaped like y (ld_residual is
 * ignored). Borrowed for the call. */
nnf_status nnf_conv_kernel_run(const nnf_conv_kernel *k, const float *x, float *y,
                               const nnf_epilogue *ep, nnf_threadpool *pool);

/* Implicit im2col: the pack callback (nnf_gemm_pack_fn) that fills GEMM B
 * panels straight from the input. Column n of the virtual im2col matrix is
 * output pixel (n / ow, n % ow) and row k is (ic, kh, kw) of the group. */
typedef struct nnf_im2col_ctx {
    const float *x; /* the group's first input channel of one image */
    const nnf_conv2d_shape *s;
    /* optional: channel ic's plane is planes[ic] (NULL: all zeros) instead
     * of x + ic h w; a 3-D conv's (channel, depth tap) pairs (conv3d.c) */
    const float *const *planes;
} nnf_im2col_ctx;
void nnf_im2col_pack_scalar(const void *ctx, size_t n0, size_t nc, size_t k0, size_t kc, size_t r,
                            float *dst);
/* AVX2: r must be a multiple of 8 and h * w at most INT32_MAX / 2. */
void nnf_im2col_pack_avx2(const void *ctx, size_t n0, size_t nc, size_t k0, size_t kc, size_t r,
                          float *dst);

/* STRIDED: stride > 1 with K = C/group kh kw <= 160, through a copy of the
 * input split into column phases (conv_strided.c); weights packed as for
 * IM2COL. */
nnf_status nnf_conv_strided_prepare(nnf_conv_kernel *k);
nnf_status nnf_conv_strided_run(const nnf_conv_kernel *k, const float *x, float *y,
                                const nnf_epilogue *ep, nnf_threadpool *pool);
/* d0[i] = src[2 i], d1[i] = src[2 i + 1] for i < n (AVX2). */
void nnf_split_row2_avx2(const float *src, size_t n, float *d0, float *d1);

/* ---- depthwise (conv_dw.c, x86/dwconv_avx2.c), group == C == OC ----
 * The kernels take one plane (or 8) of one image; t->ep is the epilogue,
 * t->bias the channel's bias (or NULL), t->residual the channel's residual
 * plane (or NULL). */
typedef enum nnf_dw_kernel {
    NNF_DW_PLANE_SCALAR, /* one plane, portable C, any kernel, stride and dilation */
    NNF_DW_PLANE_AVX2,   /* one plane, 8 outputs of a row per vector, 4 rows per pass */
    NNF_DW_C8_AVX2,      /* 8 planes, 8 channels per vector (narrow planes) */
    NNF_DW_ANY_AVX2,     /* one plane, any kernel, stride and dilation (1-D convs too) */
    NNF_DW_PLANE_AVX512, /* the same with 16 outputs a vector and 8 rows a pass (own last bits) */
} nnf_dw_kernel;

/* Pure selection among the depthwise kernels for a DEPTHWISE shape. */
nnf_dw_kernel nnf_dw_select(const nnf_conv2d_shape *s, nnf_isa isa);
/* The row kernels (8 or 16 outputs of a row per vector), which stream each
 * plane once. */
static inline bool nnf_dw_is_plane(nnf_dw_kernel k) {
    return k == NNF_DW_PLANE_AVX2 || k == NNF_DW_PLANE_AVX512;
}
const char *nnf_dw_kernel_name(nnf_dw_kernel kern);

/* Copies the C x k*k weights, picks and names the kernel (the DEPTHWISE
 * part of nnf_conv_kernel_create; w is borrowed for the call). */
nnf_status nnf_conv_dw_prepare(nnf_conv_kernel *k, const float *w);
/* The whole depthwise convolution, planes (or 8-plane blocks) across the pool. */
nnf_status nnf_conv_dw_run(const nnf_conv_kernel *k, const float *x, float *y,
                           const nnf_epilogue *ep, nnf_threadpool *pool);

/* Depthwise on one whole plane (x, y at the plane): the scalar kernel and
 * nnf_dw_any_avx2 take any kernel, stride, dilation and padding;
 * nnf_dw_plane_avx2 square 3x3/5x5/7x7 at stride 1/2 (nnf_dw_specialised). */
void nnf_dw_plane_scalar(const nnf_conv2d_shape *s, const float *x, const float *w, float *y,
                         const nnf_tile_ep *t);
void nnf_dw_plane_avx2(const nnf_conv2d_shape *s, const float *x, const float *w, float *y,
                       const nnf_tile_ep *t);
void nnf_dw_plane_avx512(const nnf_conv2d_shape *s, const float *x, const float *w, float *y,
                         const nnf_tile_ep *t);
void nnf_dw_any_avx2(const nnf_conv2d_shape *s, const float *x, const float *w, float *y,
                     const nnf_tile_ep *t);
/* The shapes the square kernels take: 3x3/5x5/7x7, one stride of 1 or 2, no
 * dilation, padding under the kernel. */
bool nnf_dw_specialised(const nnf_conv2d_shape *s);

/* Depthwise 3x3/5x5/7x7 stride 1/2, 8 channels per vector: nc (<= 8) planes
 * from channel c0 of one image (x, y and res, if not NULL, at the first
 * plane; w is the whole C x k*k weight copy), whole planes with the
 * epilogue. Rows are interleaved a tile at a time into a stack buffer of
 * NNF_DW_C8_MAX floats per channel, which must hold k padded rows:
 * ((ow - 1) s + k) k <= NNF_DW_C8_MAX. */
#define NNF_DW_C8_MAX 1024
void nnf_dw_c8_avx2(const nnf_conv2d_shape *s, const float *w, const float *x, float *y, size_t c0,
                    size_t nc, const nnf_epilogue *ep, const float *res);

/* Winograd F(4x4,3x3) with points 0, +-1, +-2, inf (Lavin & Gray): Y = A^T
 * [(G g G^T) . (B^T d B)] A on 6x6 input tiles d, 4x4 output tiles. */
extern const double nnf_wino_g[6][3];
/* U = G g G^T of m <= 8 3x3 kernels (row-major), kernel i at w + i * stride,
 * computed in double and rounded once; its value (a, b) (a: the rows'
 * transform, b: the columns') goes to dst[a * 6 + b][i], so each of the 36
 * matrices gets a run of m. AVX2 (every Winograd kernel needs it). */
void nnf_wino_weight_8_avx2(const float *w, size_t stride, size_t m, float *const dst[36]);
/* The 36 matrices of a work item are read or written together: a stride of
 * a multiple of 4 KiB (or a large power of two) maps them all to a few L1
 * sets, which cost the first version a third of its transforms. Floats
 * rounded up to whole 64-byte lines, and to an odd number of them. */
size_t nnf_wino_round16(size_t floats);
size_t nnf_wino_odd_lines(size_t floats);
extern const double nnf_wino_bt[6][6];
extern const double nnf_wino_at[4][6];
/* The whole Winograd convolution (AVX2 transforms, the tier's GEMM). */
nnf_status nnf_conv_winograd_avx2(const nnf_conv_kernel *k, const float *x, float *y,
                                  const nnf_epilogue *ep, nnf_threadpool *pool);

#endif

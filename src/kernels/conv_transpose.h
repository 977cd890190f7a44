/* Optimised 2-D ConvTranspose on NCHW tensors (1-D runs as H = 1): the
 * decoder up-sampling of U-Nets, GAN generators and segmentation heads.
 *
 * Per image and group, a GEMM gives every product of an input pixel and a
 * kernel tap, then col2im adds each where it lands:
 *
 *   cols (OCg kh kw x pixels) = W_g^T (OCg kh kw x ICg, prepacked as GEMM A)
 *                               · X_g (ICg x pixels, packed on the fly as B)
 *   Y[oc, ih s - pad + kh d, iw s - pad + kw d] += cols[(oc, kh, kw), (ih, iw)]
 *
 * The products are exactly those the definition sums (none are zeros of an
 * upsampled input), so the GEMM's FLOPs are the operator's. The pixels go
 * in bands of input rows whose columns fit the caches (CONVT_COLS_MAX),
 * after the earlier rows' columns that the band's outputs also need (the
 * halo); after each band's GEMM, output channels are spread over the pool,
 * and each writes the output rows the band completes, once: per row, the
 * stride's phases gather their taps' contiguous runs onto the bias, take
 * the activation, and are interleaved into the row. The sums of one output
 * element are taken in one fixed order (kh, then kw), whatever the thread
 * count. */
#ifndef NNF_KERNELS_CONV_TRANSPOSE_H
#define NNF_KERNELS_CONV_TRANSPOSE_H

#include "kernels/conv_fast.h"

/* The shape uses nnf_conv2d_shape with the transposed meaning: n, c, h, w
 * the input; oc, group; kh, kw, sh, sw, dh, dw the window; pt, pl the pads
 * cropped from the full result's top and left; oh, ow the output. */
typedef struct nnf_convt_kernel {
    nnf_conv2d_shape s;
    nnf_isa isa;
    const nnf_gemm_cfg *cfg;
    /* 3-D (the depth's taps kd equal to its stride, no depth padding, no
     * overlap): output plane id kd + t is the 2-D transposed conv of input
     * plane id by depth tap t's slice of W. 2-D: d = kd = 1. */
    size_t d, kd;
    nnf_gemm_packed **packed_w; /* per depth tap and group: W_g^T, OCg kh kw x ICg */
    size_t band_rows;           /* input rows per GEMM */
    size_t halo;                /* earlier input rows an output row may also take */
    size_t cols_floats;         /* the columns: OCg kh kw x (halo + band_rows) w */
    /* per kw: output column iw sw + kw dw - pl is in phase kw_phase (its
     * remainder mod sw) at index iw + kw_shift within the phase */
    ptrdiff_t *kw_phase, *kw_shift;
    /* the taps tile the output: kernel = stride = 2 along the row, kernel =
     * stride down the columns, no padding, dilation or crop (a decoder's
     * 2x2 stride-2 upsampling): each output takes one column, written
     * straight from the columns to the row (convt_rows) */
    bool tiled2;
    char name[64]; /* "f32_convtranspose_gemm_6x16_avx2" */
} nnf_convt_kernel;

/* Whether the kernel computes s: the counts and extents non-zero, oc and c
 * multiples of group, the stride along a row at most 256. Any crop and
 * output extent (outputs no tap reaches are the bias). */
bool nnf_convt_fits(const nnf_conv2d_shape *s);

/* Packs w (C x OC/group x KH x KW, borrowed for the call) for s on tier isa. */
nnf_status nnf_convt_kernel_create(const nnf_conv2d_shape *s, nnf_isa isa, const float *w,
                                   nnf_convt_kernel **out);
/* 3-D, NCDHW: input depth d, depth taps kd (= the depth stride); s the
 * 2-D transposed conv of each depth plane (n, c, oc, group, the H and W
 * window). w is C x OC/group x kd x KH x KW. */
nnf_status nnf_convt_kernel_create_3d(const nnf_conv2d_shape *s, size_t d, size_t kd, nnf_isa isa,
                                      const float *w, nnf_convt_kernel **out);
void nnf_convt_kernel_destroy(nnf_convt_kernel *k);

/* y = act(convtranspose(x) + bias): ep->bias (if any) holds OC values,
 * NNF_BIAS_PER_ROW; alpha 1 and no residual. Borrowed for the call. */
nnf_status nnf_convt_kernel_run(const nnf_convt_kernel *k, const float *x, float *y,
                                const nnf_epilogue *ep, nnf_threadpool *pool);

/* Floats of an output row chunk split into its stride phases, and the
 * largest stride along a row (each phase a multiple of 8 floats). */
#define CONVT_ROW_MAX 2048
#define CONVT_SW_MAX (CONVT_ROW_MAX / 8)

/* A band of output rows for the col2im (conv_transpose_rows.h): the GEMM's
 * columns of the band's input rows and where the rows go. */
typedef struct nnf_convt_band {
    const nnf_convt_kernel *k;
    const float *cols; /* (oc, kh, kw) rows of ldc floats; input row ih at (ih - base) w */
    size_t ldc;
    ptrdiff_t base;
    float *y;          /* the group's first output plane of the image */
    size_t ldy;        /* floats from one output channel's plane to the next */
    const float *bias; /* the group's first bias value, or NULL */
    const nnf_activation *act;
    size_t oy0, oy1; /* the output rows this band completes */
} nnf_convt_band;

/* Output channel m's rows of the band at ctx, per tier (the portable one in
 * conv_transpose.c, AVX2's in x86/conv_transpose_avx2.c). */
void nnf_convt_rows_scalar(void *ctx, size_t m);
void nnf_convt_rows_avx2(void *ctx, size_t m);

#endif

/* Optimised 3-D Conv on NCDHW tensors (video and volumetric models): per
 * image, group and output depth od, one GEMM
 *
 *   Y_g[:, od] (OCg x OH OW) = W_g (OCg x ICg KD KH KW, prepacked as GEMM A)
 *                              · cols (ICg KD KH KW x OH OW, packed on the fly as B)
 *
 * where a row (ic, kd) of cols is a 2-D im2col of the input plane at depth
 * od sd + kd dd - pf of channel ic (zeros in the depth padding): the 2-D
 * kernels' implicit-im2col packers (scalar and AVX2) over a table of those
 * planes (nnf_im2col_ctx.planes), the column matrix never formed. The
 * epilogue (bias, activation, residual) is the GEMM's. */
#ifndef NNF_KERNELS_CONV3D_H
#define NNF_KERNELS_CONV3D_H

#include "base/cpu.h"
#include "base/status.h"
#include "base/threadpool.h"
#include "kernels/conv_fast.h"

#include <stddef.h>

typedef struct nnf_conv3d_shape {
    size_t n, c, d, h, w; /* input */
    size_t oc, group;
    size_t kd, kh, kw;             /* window */
    size_t sd, sh, sw, dd, dh, dw; /* strides, dilations */
    size_t pf, pt, pl; /* front, top and left padding; the rest follow from the output */
    size_t od, oh, ow; /* output */
} nnf_conv3d_shape;

typedef struct nnf_conv3d_kernel {
    nnf_conv3d_shape s;
    nnf_conv2d_shape plane; /* one output depth's 2-D conv: ICg KD channels, group 1 */
    nnf_isa isa;
    const nnf_gemm_cfg *cfg;
    nnf_gemm_packed **packed_w; /* per group */
    char name[64];              /* "f32_conv3d_im2col_6x16_avx2" */
} nnf_conv3d_kernel;

/* Whether the kernel computes shape s: whole groups, no zero extent. */
bool nnf_conv3d_fits(const nnf_conv3d_shape *s);
/* Packs w (OC x ICg x KD x KH x KW, borrowed for the call). */
nnf_status nnf_conv3d_kernel_create(const nnf_conv3d_shape *s, nnf_isa isa, const float *w,
                                    nnf_conv3d_kernel **out);
void nnf_conv3d_kernel_destroy(nnf_conv3d_kernel *k);
/* y = epilogue(conv(x)); ep's bias per output channel, its residual shaped
 * like y (or NULL). */
nnf_status nnf_conv3d_kernel_run(const nnf_conv3d_kernel *k, const float *x, float *y,
                                 const nnf_epilogue *ep, nnf_threadpool *pool);

#endif

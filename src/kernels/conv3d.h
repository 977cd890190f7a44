/* Optimised 3-D Conv on NCDHW tensors (video and volumetric models): per
 * image, group and output depth od, one GEMM
 *
 *   Y_g[:, od] (OCg x OH OW) = W_g (OCg x KD ICg KH KW, prepacked as GEMM A)
 *                              · cols (KD ICg KH KW x OH OW, GEMM B)
 *
 * where the rows of cols for depth tap kd are the 2-D im2col of the input
 * planes at depth od sd + kd dd - pf (zeros in the depth padding), made by
 * the 2-D kernels' implicit-im2col packers (scalar and AVX2) from a table of
 * those planes (nnf_im2col_ctx.planes). Two forms:
 *
 *   PLANES (dd = 1, ICg KH KW a multiple of 8): a task takes a block of
 *     output columns of one image's group through every output depth,
 *     keeping in L2 a ring of the last KD input planes' 2-D im2col for those
 *     columns, each packed once as GEMM B panels of ICg KH KW rows, in K
 *     blocks that divide that count (the kernel's cfg: the tier's with such
 *     a kc). Output depth od packs the planes it lacks and multiplies the
 *     weights (packed kd-major to match) by its KD planes' blocks in order
 *     (nnf_gemm_packed.blocks). An output depth shares KD - 1 planes with
 *     the last one at depth stride 1: each is packed once, not KD times
 *     (the 32 -> 32 channel 3x3x3 conv spent a third of its run packing).
 *   IM2COL (any other shape): B packed on the fly for each output depth, the
 *     rows ordered (ic, kd, kh, kw) as the weights are.
 *
 * The epilogue (bias, activation, residual) is the GEMM's. */
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
    /* the 2-D conv whose im2col the packers make: PLANES one input depth's
     * (ICg channels), IM2COL one output depth's (ICg KD channels); group 1 */
    nnf_conv2d_shape plane;
    nnf_isa isa;
    const nnf_gemm_cfg *cfg; /* PLANES: &plane_cfg */
    nnf_gemm_cfg plane_cfg;  /* PLANES: the tier's cfg with kc dividing plane_k */
    bool by_planes;
    size_t plane_k;             /* PLANES: ICg KH KW, the rows of one packed plane */
    size_t block_cols;          /* PLANES: output columns a task (a multiple of nr) */
    nnf_gemm_packed **packed_w; /* per group */
    char name[64];              /* "f32_conv3d_planes_6x16_avx2" */
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

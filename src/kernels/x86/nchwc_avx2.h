/* The AVX2 halves of the NCHWc8 kernels (x86/nchwc_avx2.c), called by the
 * portable drivers in nchwc_reorder.c, nchwc_dw.c, nchwc_pool.c and
 * nchwc_resize.c, which own the dispatch and the threading. Each function
 * does one tile of one (image, channel block); "nc" is the number of real
 * channels in that block (1..8), the rest being padding lanes. */
#ifndef NNF_KERNELS_X86_NCHWC_AVX2_H
#define NNF_KERNELS_X86_NCHWC_AVX2_H

#include "kernels/nchwc.h"

/* x at channel plane cb*8, pixel p0 of NCHW (planes hw floats apart); y at
 * pixel p0 of block cb. np pixels. */
void nnf_nchwc_from_nchw_tile_avx2(const float *x, size_t hw, size_t nc, size_t np, float *y);
void nnf_nchwc_to_nchw_tile_avx2(const float *x, size_t hw, size_t nc, size_t np, float *y);
/* nnf_nchwc_to_cl_pixels' AVX2 tier. */
void nnf_nchwc_to_cl_pixels_avx2(const float *x, size_t xblk, size_t cb0, size_t nb, size_t c,
                                 size_t np, float *y, size_t plane, size_t cl);

/* One (image, block) of a depthwise conv: x, y, res at the block's plane,
 * w at the block's [kh][kw][8] taps, bias at the block's first channel (or
 * NULL). */
typedef struct nnf_nchwc_dw_tile {
    const nnf_conv2d_shape *s;
    const float *x, *w, *bias, *res;
    float *y;
    const nnf_epilogue *ep;
    size_t nc;
    size_t x_row0, x_row1; /* x holds input rows [x_row0, x_row1) of the plane */
    size_t y_row0;         /* y (and res) hold output rows from y_row0 on */
} nnf_nchwc_dw_tile;
/* Output rows [oh0, oh0 + noh). */
void nnf_nchwc_dw_rows_avx2(const nnf_nchwc_dw_tile *t, size_t oh0, size_t noh);
/* The same for block t's and the next one's (x + xplane, y + yplane, its
 * residual, if any, t->res + rplane, w and bias one block further, nc2 real
 * lanes) at once, on the AVX-512 tier, where nnf_nchwc_dw_pair_ok
 * (x86/nchwc_dw_avx512.c): the same bits. */
void nnf_nchwc_dw_rows2_avx512(const nnf_nchwc_dw_tile *t, size_t xplane, size_t yplane,
                               size_t rplane, size_t nc2, size_t oh0, size_t noh);

/* np pixels of one block, each lane l taking lane l - l % cpg + j of its
 * pixel (cpg 2 or 4, j < cpg): a grouped conv's pass j (nchwc_gconv.c). */
void nnf_nchwc_lane_spread_avx2(const float *x, float *y, size_t np, size_t cpg, size_t j);

/* Pool output rows [oh0, oh0 + noh) of one (image, block) plane. */
void nnf_nchwc_pool_rows_avx2(const nnf_nchwc_pool_shape *s, const float *x, float *y, size_t nc, size_t oh0,
                              size_t noh);
/* One block's hw pixels reduced to its nc channel values at y (the
 * AVX-512 tier's average: x86/nchwc_pool_avx512.c). */
void nnf_nchwc_global_block_avx2(const float *x, size_t hw, int is_max, size_t nc, float *y);
void nnf_nchwc_global_block_avx512(const float *x, size_t hw, int is_max, size_t nc, float *y);

/* np pixels of one block: y = x op v (v op x when v_first), v the block's
 * 8 lanes (nnf_nchwc_channel_binary). */
void nnf_nchwc_channel_rows_avx2(int op, const float *x, const float *v, float *y, size_t np,
                                 int v_first);

/* Output rows [oh0, oh0 + noh) of one (image, block) plane. */
void nnf_nchwc_resize_rows_avx2(const float *x, float *y, size_t iw, size_t ow, const int32_t *rows,
                                const int32_t *cols, size_t oh0, size_t noh);

#endif

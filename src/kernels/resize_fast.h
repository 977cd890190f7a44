/* Fast Resize (float32, NCHW-like: any rank whose axes before the last two
 * are not resized) for the common cases: nearest with any scale through
 * precomputed index tables (integer factors duplicate each input element and
 * row without tables on AVX2), and linear along any of the last three axes
 * (a volume's trilinear resize) through precomputed taps and weights.
 * Cubic, tf_crop_and_resize, nearest resizes of the third-to-last axis and
 * resizes of axes before it keep the reference kernel
 * (src/kernels/ref/resize.c).
 *
 * The tables are the reference's (same float coordinate arithmetic, the
 * same collapse of linear taps to one where every position has a single
 * non-zero weight), and the linear kernel does the reference's float
 * operations in its order, so results equal the reference's except that
 * the reference turns -0 into +0 (it accumulates onto 0.0f). */
#ifndef NNF_KERNELS_RESIZE_FAST_H
#define NNF_KERNELS_RESIZE_FAST_H

#include "base/cpu.h"
#include "ops/op.h"
#include "ops/resize.h"

#include <stddef.h>
#include <stdint.h>

typedef enum nnf_resize_kind {
    NNF_RSZ_NONE = 0, /* keep the reference kernel */
    NNF_RSZ_NEAREST,  /* one tap per axis: row groups + a column index table */
    NNF_RSZ_LINEAR,   /* one or two taps per axis, weighted */
} nnf_resize_kind;

/* Column pattern of a nearest resize (decides the row kernel). */
typedef enum nnf_resize_cols {
    NNF_RSZ_COLS_TABLE = 0, /* y[o] = x[widx[o]] */
    NNF_RSZ_COLS_COPY,      /* widx[o] = o: the row as is */
    NNF_RSZ_COLS_DUP,       /* widx[o] = o / f, ow = iw * f: each element f times */
} nnf_resize_cols;

typedef struct nnf_resize_tables {
    nnf_resize_kind kind;
    nnf_resize_cols cols; /* NEAREST */
    int dup;              /* COLS_DUP: the factor f */
    int64_t planes;       /* product of the axes before the last two (LINEAR with a depth:
                           * before the last three) */
    /* LINEAR: the axis before the last two (a volume's depth) resized:
     * [od * td] input depths and weights; didx NULL: not resized (id = od =
     * 1, td = 1, the axis in planes) */
    int64_t id, od;
    int td;
    int32_t *didx;
    float *dwt;
    int64_t ih, iw, oh, ow;
    int th, tw;           /* taps per output row / column (1 or 2) */
    int32_t *hidx, *widx; /* [oh * th] input rows, [ow * tw] input columns */
    float *hw, *ww;       /* [oh * th], [ow * tw] weights (LINEAR) */
} nnf_resize_tables;

/* Decide how a resize runs and build its tables: in/out extents of every
 * axis, the resolved per-axis scales and roi (start[rank], end[rank]) as
 * nnf_resize_resolve gives them. t->kind NONE (nothing allocated) when the
 * reference kernel must run; NNF_ERR_OUT_OF_MEMORY when the tables cannot
 * be allocated. Pure apart from the allocation; free with
 * nnf_resize_tables_free. */
nnf_status nnf_resize_tables_build(const nnf_resize_params *p, int rank, const int64_t *in_dims,
                                   const int64_t *out_dims, const float *scales, const float *roi,
                                   nnf_resize_tables *t);
void nnf_resize_tables_free(nnf_resize_tables *t);

/* Output rows [first, first + count) of rows = planes * od * oh, of a
 * NEAREST or LINEAR table set; isa picks the row kernels. */
void nnf_resize_rows(const nnf_resize_tables *t, nnf_isa isa, const float *x, float *y,
                     size_t first, size_t count);

/* AVX2 row kernels. dup2: y[2i] = y[2i + 1] = x[i], i < n, written to nrows
 * rows ystride apart. gather: y[o] = x[idx[o]], o < n. */
void nnf_resize_dup2_avx2(const float *x, size_t n, float *y, size_t ystride, size_t nrows);
void nnf_resize_gather_avx2(const float *x, const int32_t *idx, float *y, size_t n);
/* y[o] = (((0 + a[0] h[0][o]) + a[1] h[1][o]) + ...) over `terms` (1-4)
 * rows, as the reference rounds each step (no fused multiply-add) */
void nnf_resize_blend_avx2(const float *const *h, const float *a, int terms, float *y, size_t n);

nnf_status nnf_plan_resize(NNF_PLAN_ARGS);

#endif

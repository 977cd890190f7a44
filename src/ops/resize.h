/* Resize / Upsample attributes and the output-shape arithmetic their
 * inference and kernels share; DepthToSpace / SpaceToDepth attributes. */
#ifndef NNF_OPS_RESIZE_H
#define NNF_OPS_RESIZE_H

#include "ops/op.h"

typedef enum nnf_resize_mode { NNF_RESIZE_NEAREST, NNF_RESIZE_LINEAR, NNF_RESIZE_CUBIC } nnf_resize_mode;

typedef enum nnf_resize_coord {
    NNF_COORD_HALF_PIXEL,
    NNF_COORD_HALF_PIXEL_SYMMETRIC,
    NNF_COORD_PYTORCH_HALF_PIXEL,
    NNF_COORD_ALIGN_CORNERS,
    NNF_COORD_ASYMMETRIC,
    NNF_COORD_TF_HALF_PIXEL_FOR_NN,
    NNF_COORD_TF_CROP_AND_RESIZE,
} nnf_resize_coord;

typedef enum nnf_nearest_mode {
    NNF_NEAREST_ROUND_PREFER_FLOOR,
    NNF_NEAREST_ROUND_PREFER_CEIL,
    NNF_NEAREST_FLOOR,
    NNF_NEAREST_CEIL,
    /* Upsample and Resize-10 (what onnxruntime does there): truncate when
     * enlarging, round up when shrinking */
    NNF_NEAREST_SIMPLE,
} nnf_nearest_mode;

typedef enum nnf_keep_aspect { NNF_KEEP_STRETCH, NNF_KEEP_NOT_LARGER, NNF_KEEP_NOT_SMALLER } nnf_keep_aspect;

typedef struct nnf_resize_params {
    nnf_resize_mode mode;
    nnf_resize_coord coord;
    nnf_nearest_mode nearest;
    nnf_keep_aspect keep_aspect;
    float cubic_a;
    int exclude_outside;
    float extrapolation_value;
    int n_axes; /* 0 = all axes; else axes[] as written (may be negative) */
    int64_t axes[NNF_MAX_RANK];
    /* where the operands are: input indices, -1 when this form lacks one */
    int roi_input, scales_input, sizes_input;
    int n_scales_attr; /* Upsample-7 carries its scales as an attribute */
    float scales_attr[NNF_MAX_RANK];
} nnf_resize_params;

/* One optional 1-D operand as both inference and kernels see it. */
typedef struct nnf_resize_arg {
    int present; /* given and non-empty */
    int known;   /* contents known (always at run time) */
    nnf_dtype dtype;
    int64_t count;
    const void *data;
} nnf_resize_arg;

/* Output extents (-1 where unknown), per-axis scales and the roi expanded to
 * all rank axes (start[rank], end[rank]; 0 and 1 by default) for input
 * extents in_dims (-1 where unknown). */
nnf_status nnf_resize_resolve(const nnf_node *node, const nnf_resize_params *p, int rank,
                              const int64_t *in_dims, const nnf_resize_arg *roi,
                              const nnf_resize_arg *scales, const nnf_resize_arg *sizes,
                              int64_t *out_dims, float *scale_out, float *roi_out);

/* The source coordinate of output position o on one axis (in -> out
 * elements, this scale, roi start/end on that axis), and the nearest input
 * index of a source coordinate, as the ONNX reference defines them. The
 * reference kernel and the fast kernels' index tables both use these, so
 * they pick the same inputs. (Defined in kernels/ref/resize.c.) */
float nnf_resize_source_coord(const nnf_resize_params *p, int64_t o, int64_t in, int64_t out,
                              float scale, float roi_start, float roi_end);
int64_t nnf_resize_nearest_index(const nnf_resize_params *p, float x, float scale);

typedef struct nnf_space_depth_params {
    int64_t blocksize;
    int crd; /* column-row-depth order; default depth-column-row (DCR) */
} nnf_space_depth_params;

#endif

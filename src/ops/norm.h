/* Attributes of the normalisation operators, shared by their definitions
 * (ops/norm.c) and kernels. */
#ifndef NNF_OPS_NORM_H
#define NNF_OPS_NORM_H

#include <stdint.h>

typedef struct nnf_norm_params {
    float epsilon;
    int64_t axis;       /* LayerNormalization, LpNormalization: as written (may be negative) */
    int64_t num_groups; /* GroupNormalization */
    int per_channel;    /* GroupNormalization: scale/bias per channel (opset 21) or per group (18) */
    int p;              /* LpNormalization: 1 or 2 */
} nnf_norm_params;

#endif

/* A bounds-checked reader for the protobuf wire format.
 *
 * The reader walks a (pointer, length) span that it never writes to and never
 * reads past: every varint, fixed-width value and length prefix is checked
 * against the bytes that remain in the span before it is used. Nothing here
 * allocates; a field hands back a sub-span of the caller's buffer, so a
 * message is decoded straight from the mapped file.
 *
 * Errors are recorded with NNF_CORRUPT and carry the byte offset from `base`
 * (the start of the whole file), so a message points at the bad byte. The
 * caller prefixes the context (file, graph, node, attribute).
 *
 * Groups (wire types 3/4, deprecated since proto2 and never used by ONNX)
 * are skipped as a whole, up to NNF_PB_MAX_DEPTH levels, and reported to the
 * caller as wire type 3 so that a known field arriving as a group is rejected
 * by the wire-type check like any other mismatch. */
#ifndef NNF_ONNX_PB_H
#define NNF_ONNX_PB_H

#include "base/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NNF_PB_MAX_DEPTH 64
#define NNF_PB_MAX_FIELD ((1u << 29) - 1)

enum {
    NNF_PB_VARINT = 0,
    NNF_PB_FIXED64 = 1,
    NNF_PB_LEN = 2,
    NNF_PB_GROUP = 3, /* start group; a field returned with this type spans the group body */
    NNF_PB_END_GROUP = 4,
    NNF_PB_FIXED32 = 5,
};

typedef struct nnf_pb {
    const uint8_t *p;    /* next byte to read */
    const uint8_t *end;  /* one past the last byte of this span */
    const uint8_t *base; /* start of the file, for offsets in messages */
} nnf_pb;

typedef struct nnf_pb_field {
    uint32_t number;
    int wire;
    uint64_t u;          /* VARINT, FIXED32, FIXED64: the value */
    const uint8_t *data; /* LEN, GROUP: the payload (borrowed from the span) */
    size_t len;
    size_t offset; /* offset of the tag from base */
} nnf_pb_field;

/* The kind of element of a repeated scalar field. */
typedef enum nnf_pb_scalar {
    NNF_PB_SCALAR_VARINT,
    NNF_PB_SCALAR_FIXED32,
    NNF_PB_SCALAR_FIXED64,
} nnf_pb_scalar;

/* A reader over the whole buffer (base = data). */
void nnf_pb_init(nnf_pb *r, const void *data, size_t size);
/* A reader over the payload of a LEN field read from parent. */
nnf_pb nnf_pb_sub(const nnf_pb *parent, const nnf_pb_field *f);
/* Offset of the reader's next byte from base. */
size_t nnf_pb_offset(const nnf_pb *r);

/* Read the next field. *more is false at the end of the span (f untouched). */
nnf_status nnf_pb_next(nnf_pb *r, nnf_pb_field *f, bool *more);
/* Decode one varint from [*p, end); advances *p. */
nnf_status nnf_pb_varint(const uint8_t **p, const uint8_t *end, const uint8_t *base, uint64_t *out);

/* Fail unless f has wire type `wire`; `what` names the field in the message. */
nnf_status nnf_pb_expect(const nnf_pb_field *f, int wire, const char *what);
/* A VARINT field as int32 (proto int32 is sign-extended to 64 bits on the wire). */
nnf_status nnf_pb_int32(const nnf_pb_field *f, const char *what, int32_t *out);
nnf_status nnf_pb_int64(const nnf_pb_field *f, const char *what, int64_t *out);
nnf_status nnf_pb_float(const nnf_pb_field *f, const char *what, float *out);

/* Repeated scalar fields may arrive one element per field or packed into one
 * LEN field; these accept both. count adds the elements f holds to *count. */
nnf_status nnf_pb_repeated_count(const nnf_pb_field *f, nnf_pb_scalar kind, const char *what,
                                 size_t *count);
/* Iterates the elements of one repeated scalar field (packed or not). Run
 * nnf_pb_repeated_count on the field first: it validates the payload, after
 * which next() fails only if the two disagree (an internal error). Elements
 * come back raw: the varint value or the fixed bit pattern, zero-extended. */
typedef struct nnf_pb_iter {
    const uint8_t *p, *end, *base;
    nnf_pb_scalar kind;
    uint64_t single;
    int single_left; /* 1 when f was one unpacked element not yet returned */
} nnf_pb_iter;

void nnf_pb_iter_init(nnf_pb_iter *it, const nnf_pb_field *f, nnf_pb_scalar kind);
bool nnf_pb_iter_next(nnf_pb_iter *it, uint64_t *v);

#endif

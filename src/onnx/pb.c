/* Protobuf wire-format reader. See pb.h for the guarantees. */
#include "onnx/pb.h"

#include <string.h>

void nnf_pb_init(nnf_pb *r, const void *data, size_t size) {
    r->base = data;
    r->p = data;
    r->end = r->p ? r->p + size : r->p;
}

nnf_pb nnf_pb_sub(const nnf_pb *parent, const nnf_pb_field *f) {
    nnf_pb r = {.p = f->data, .end = f->data + f->len, .base = parent->base};
    return r;
}

size_t nnf_pb_offset(const nnf_pb *r) {
    return (size_t)(r->p - r->base);
}

nnf_status nnf_pb_varint(const uint8_t **pp, const uint8_t *end, const uint8_t *base,
                         uint64_t *out) {
    const uint8_t *p = *pp;
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (p == end)
            return NNF_CORRUPT("varint truncated at offset %zu", (size_t)(p - base));
        uint8_t b = *p++;
        /* The tenth byte holds bit 63 only; anything more is an overlong or
         * overflowing encoding that real encoders never produce. */
        if (i == 9 && b > 1)
            return NNF_CORRUPT("varint longer than 64 bits at offset %zu", (size_t)(*pp - base));
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *pp = p;
            *out = v;
            return NNF_OK;
        }
    }
    return NNF_CORRUPT("varint longer than 64 bits at offset %zu",
                       (size_t)(*pp - base)); /* unreachable */
}

static nnf_status read_tag(const uint8_t **p, const uint8_t *end, const uint8_t *base,
                           uint32_t *number, int *wire) {
    const uint8_t *start = *p;
    uint64_t tag;
    NNF_CHECK(nnf_pb_varint(p, end, base, &tag));
    if (tag > UINT32_MAX || (tag >> 3) == 0)
        return NNF_CORRUPT("bad field tag %llu at offset %zu", (unsigned long long)tag,
                           (size_t)(start - base));
    *number = (uint32_t)(tag >> 3);
    *wire = (int)(tag & 7);
    return NNF_OK;
}

/* Advance *p over one field value of the given wire type (not a group). */
static nnf_status skip_value(const uint8_t **p, const uint8_t *end, const uint8_t *base, int wire,
                             size_t tag_offset) {
    uint64_t v;
    switch (wire) {
    case NNF_PB_VARINT: return nnf_pb_varint(p, end, base, &v);
    case NNF_PB_FIXED64:
        if ((size_t)(end - *p) < 8)
            return NNF_CORRUPT("fixed64 field at offset %zu runs past the end", tag_offset);
        *p += 8;
        return NNF_OK;
    case NNF_PB_FIXED32:
        if ((size_t)(end - *p) < 4)
            return NNF_CORRUPT("fixed32 field at offset %zu runs past the end", tag_offset);
        *p += 4;
        return NNF_OK;
    case NNF_PB_LEN:
        NNF_CHECK(nnf_pb_varint(p, end, base, &v));
        if (v > (uint64_t)(end - *p))
            return NNF_CORRUPT("length %llu of field at offset %zu runs past the end of its "
                               "message (%zu bytes left)",
                               (unsigned long long)v, tag_offset, (size_t)(end - *p));
        *p += v;
        return NNF_OK;
    default: return NNF_CORRUPT("invalid wire type %d at offset %zu", wire, tag_offset);
    }
}

/* Skip a group body whose start tag (field `number`) was just read; on return
 * *p is past the matching end-group tag and *body_end at its start. */
static nnf_status skip_group(const uint8_t **p, const uint8_t *end, const uint8_t *base,
                             uint32_t number, size_t tag_offset, const uint8_t **body_end) {
    uint32_t stack[NNF_PB_MAX_DEPTH];
    int depth = 0;
    stack[depth++] = number;
    while (depth > 0) {
        if (*p == end)
            return NNF_CORRUPT("group started at offset %zu is not closed", tag_offset);
        const uint8_t *here = *p;
        uint32_t n;
        int w;
        NNF_CHECK(read_tag(p, end, base, &n, &w));
        size_t off = (size_t)(here - base);
        if (w == NNF_PB_GROUP) {
            if (depth == NNF_PB_MAX_DEPTH)
                return NNF_CORRUPT("groups nested deeper than %d at offset %zu", NNF_PB_MAX_DEPTH,
                                   off);
            stack[depth++] = n;
        } else if (w == NNF_PB_END_GROUP) {
            if (stack[depth - 1] != n)
                return NNF_CORRUPT("end of group %u at offset %zu does not match open group %u", n,
                                   off, stack[depth - 1]);
            if (--depth == 0)
                *body_end = here;
        } else {
            NNF_CHECK(skip_value(p, end, base, w, off));
        }
    }
    return NNF_OK;
}

nnf_status nnf_pb_next(nnf_pb *r, nnf_pb_field *f, bool *more) {
    *more = false;
    if (r->p >= r->end)
        return NNF_OK;
    const uint8_t *start = r->p;
    size_t off = (size_t)(start - r->base);
    uint32_t number;
    int wire;
    NNF_CHECK(read_tag(&r->p, r->end, r->base, &number, &wire));
    nnf_pb_field out = {.number = number, .wire = wire, .offset = off};
    const uint8_t *p = r->p;
    switch (wire) {
    case NNF_PB_VARINT: NNF_CHECK(nnf_pb_varint(&p, r->end, r->base, &out.u)); break;
    case NNF_PB_FIXED64:
        if ((size_t)(r->end - p) < 8)
            return NNF_CORRUPT("fixed64 field %u at offset %zu runs past the end", number, off);
        for (int i = 7; i >= 0; i--)
            out.u = (out.u << 8) | p[i];
        p += 8;
        break;
    case NNF_PB_FIXED32:
        if ((size_t)(r->end - p) < 4)
            return NNF_CORRUPT("fixed32 field %u at offset %zu runs past the end", number, off);
        out.u = (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
        p += 4;
        break;
    case NNF_PB_LEN: {
        uint64_t len;
        NNF_CHECK(nnf_pb_varint(&p, r->end, r->base, &len));
        if (len > (uint64_t)(r->end - p))
            return NNF_CORRUPT("field %u at offset %zu: length %llu runs past the end of its "
                               "message (%zu bytes left)",
                               number, off, (unsigned long long)len, (size_t)(r->end - p));
        out.data = p;
        out.len = (size_t)len;
        p += len;
        break;
    }
    case NNF_PB_GROUP: {
        const uint8_t *body_end = NULL;
        out.data = p;
        NNF_CHECK(skip_group(&p, r->end, r->base, number, off, &body_end));
        out.len = (size_t)(body_end - out.data);
        break;
    }
    case NNF_PB_END_GROUP:
        return NNF_CORRUPT("end-group tag for field %u at offset %zu without a matching start",
                           number, off);
    default:
        return NNF_CORRUPT("invalid wire type %d for field %u at offset %zu", wire, number, off);
    }
    r->p = p;
    *f = out;
    *more = true;
    return NNF_OK;
}

static const char *wire_name(int wire) {
    switch (wire) {
    case NNF_PB_VARINT: return "varint";
    case NNF_PB_FIXED64: return "fixed64";
    case NNF_PB_LEN: return "length-delimited";
    case NNF_PB_GROUP: return "group";
    case NNF_PB_FIXED32: return "fixed32";
    default: return "invalid";
    }
}

nnf_status nnf_pb_expect(const nnf_pb_field *f, int wire, const char *what) {
    if (f->wire != wire)
        return NNF_CORRUPT("%s (field %u at offset %zu) has wire type %s, expected %s", what,
                           f->number, f->offset, wire_name(f->wire), wire_name(wire));
    return NNF_OK;
}

nnf_status nnf_pb_int32(const nnf_pb_field *f, const char *what, int32_t *out) {
    NNF_CHECK(nnf_pb_expect(f, NNF_PB_VARINT, what));
    int64_t v = (int64_t)f->u;
    if (v < INT32_MIN || v > INT32_MAX)
        return NNF_CORRUPT("%s at offset %zu: value %lld does not fit int32", what, f->offset,
                           (long long)v);
    *out = (int32_t)v;
    return NNF_OK;
}

nnf_status nnf_pb_int64(const nnf_pb_field *f, const char *what, int64_t *out) {
    NNF_CHECK(nnf_pb_expect(f, NNF_PB_VARINT, what));
    *out = (int64_t)f->u;
    return NNF_OK;
}

nnf_status nnf_pb_float(const nnf_pb_field *f, const char *what, float *out) {
    NNF_CHECK(nnf_pb_expect(f, NNF_PB_FIXED32, what));
    uint32_t bits = (uint32_t)f->u;
    memcpy(out, &bits, sizeof bits);
    return NNF_OK;
}

static int scalar_wire(nnf_pb_scalar kind) {
    return kind == NNF_PB_SCALAR_VARINT    ? NNF_PB_VARINT
           : kind == NNF_PB_SCALAR_FIXED32 ? NNF_PB_FIXED32
                                           : NNF_PB_FIXED64;
}

nnf_status nnf_pb_repeated_count(const nnf_pb_field *f, nnf_pb_scalar kind, const char *what,
                                 size_t *count) {
    size_t n;
    if (f->wire == scalar_wire(kind)) {
        n = 1;
    } else if (f->wire == NNF_PB_LEN) {
        if (kind == NNF_PB_SCALAR_VARINT) {
            /* Each varint ends in exactly one byte with the top bit clear; the
             * last byte must be one, and no varint may exceed 10 bytes. */
            n = 0;
            size_t run = 0;
            for (size_t i = 0; i < f->len; i++) {
                if (f->data[i] & 0x80) {
                    if (++run >= 10)
                        return NNF_CORRUPT("%s (packed, offset %zu): varint longer than 64 bits",
                                           what, f->offset);
                } else {
                    if (run == 9 && f->data[i] > 1)
                        return NNF_CORRUPT("%s (packed, offset %zu): varint longer than 64 bits",
                                           what, f->offset);
                    run = 0;
                    n++;
                }
            }
            if (run)
                return NNF_CORRUPT("%s (packed, offset %zu): last varint is truncated", what,
                                   f->offset);
        } else {
            size_t w = kind == NNF_PB_SCALAR_FIXED32 ? 4 : 8;
            if (f->len % w)
                return NNF_CORRUPT("%s (packed, offset %zu): %zu bytes is not a multiple of %zu",
                                   what, f->offset, f->len, w);
            n = f->len / w;
        }
    } else {
        return NNF_CORRUPT("%s (field %u at offset %zu) has wire type %s, expected %s or packed",
                           what, f->number, f->offset, wire_name(f->wire),
                           wire_name(scalar_wire(kind)));
    }
    if (!nnf_add_size(*count, n, count))
        return NNF_CORRUPT("%s: element count overflows", what);
    return NNF_OK;
}

void nnf_pb_iter_init(nnf_pb_iter *it, const nnf_pb_field *f, nnf_pb_scalar kind) {
    memset(it, 0, sizeof *it);
    it->kind = kind;
    if (f->wire == NNF_PB_LEN) {
        it->p = f->data;
        it->end = f->data + f->len;
    } else {
        it->single = f->u;
        it->single_left = 1;
    }
}

bool nnf_pb_iter_next(nnf_pb_iter *it, uint64_t *v) {
    if (it->single_left) {
        it->single_left = 0;
        *v = it->single;
        return true;
    }
    if (!it->p || it->p >= it->end)
        return false;
    size_t left = (size_t)(it->end - it->p);
    switch (it->kind) {
    case NNF_PB_SCALAR_VARINT: {
        uint64_t x = 0;
        for (int i = 0; i < 10 && it->p < it->end; i++) {
            uint8_t b = *it->p++;
            x |= (uint64_t)(b & 0x7f) << (7 * i);
            if (!(b & 0x80)) {
                *v = x;
                return true;
            }
        }
        return false;
    }
    case NNF_PB_SCALAR_FIXED32:
        if (left < 4)
            return false;
        *v = (uint64_t)it->p[0] | (uint64_t)it->p[1] << 8 | (uint64_t)it->p[2] << 16 |
             (uint64_t)it->p[3] << 24;
        it->p += 4;
        return true;
    case NNF_PB_SCALAR_FIXED64: {
        if (left < 8)
            return false;
        uint64_t x = 0;
        for (int i = 7; i >= 0; i--)
            x = (x << 8) | it->p[i];
        it->p += 8;
        *v = x;
        return true;
    }
    }
    return false;
}

/* TensorProto decoding: dims, typed data fields, raw_data and external data. */
#include "onnx/internal.h"

#include "base/file.h"

#include <inttypes.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum {
    T_DIMS = 1,
    T_DATA_TYPE = 2,
    T_SEGMENT = 3,
    T_FLOAT_DATA = 4,
    T_INT32_DATA = 5,
    T_STRING_DATA = 6,
    T_INT64_DATA = 7,
    T_NAME = 8,
    T_RAW_DATA = 9,
    T_DOUBLE_DATA = 10,
    T_UINT64_DATA = 11,
    T_EXTERNAL_DATA = 13,
    T_DATA_LOCATION = 14,
};

nnf_status nnf_onnx_oom(const char *what) {
    return nnf_error(NNF_ERR_OUT_OF_MEMORY, "out of memory reading %s", what);
}

nnf_status nnf_onnx_string(nnf_arena *a, const nnf_pb_field *f, const char *what, int allow_nul,
                           const char **out) {
    NNF_CHECK(nnf_pb_expect(f, NNF_PB_LEN, what));
    if (!allow_nul && f->len && memchr(f->data, 0, f->len))
        return NNF_CORRUPT("%s at offset %zu contains a NUL byte", what, f->offset);
    char *s = nnf_arena_strndup(a, (const char *)f->data, f->len);
    if (!s)
        return nnf_onnx_oom(what);
    *out = s;
    return NNF_OK;
}

int nnf_onnx_dtype_known(int64_t t) {
    return (t >= NNF_DTYPE_FLOAT32 && t <= NNF_DTYPE_UINT64 && t != NNF_DTYPE_STRING) ||
           t == NNF_DTYPE_BFLOAT16;
}

/* The typed field that holds elements of dtype t (ONNX TensorProto rules). */
static int typed_field(nnf_dtype t) {
    switch (t) {
    case NNF_DTYPE_FLOAT32: return T_FLOAT_DATA;
    case NNF_DTYPE_INT32:
    case NNF_DTYPE_INT16:
    case NNF_DTYPE_INT8:
    case NNF_DTYPE_UINT16:
    case NNF_DTYPE_UINT8:
    case NNF_DTYPE_BOOL:
    case NNF_DTYPE_FLOAT16:
    case NNF_DTYPE_BFLOAT16: return T_INT32_DATA;
    case NNF_DTYPE_INT64: return T_INT64_DATA;
    case NNF_DTYPE_FLOAT64: return T_DOUBLE_DATA;
    case NNF_DTYPE_UINT32:
    case NNF_DTYPE_UINT64: return T_UINT64_DATA;
    case NNF_DTYPE_STRING: return T_STRING_DATA;
    default: return 0;
    }
}

static const char *field_name(int field) {
    switch (field) {
    case T_FLOAT_DATA: return "float_data";
    case T_INT32_DATA: return "int32_data";
    case T_STRING_DATA: return "string_data";
    case T_INT64_DATA: return "int64_data";
    case T_DOUBLE_DATA: return "double_data";
    case T_UINT64_DATA: return "uint64_data";
    case T_RAW_DATA: return "raw_data";
    default: return "?";
    }
}

static nnf_pb_scalar field_kind(int field) {
    return field == T_FLOAT_DATA    ? NNF_PB_SCALAR_FIXED32
           : field == T_DOUBLE_DATA ? NNF_PB_SCALAR_FIXED64
                                    : NNF_PB_SCALAR_VARINT;
}

/* Store element i of a typed field into dst; int32_data carries the narrow
 * integer types and the bit patterns of float16/bfloat16 in its low bits. */
static void store_elem(nnf_dtype t, void *dst, size_t i, uint64_t u) {
    unsigned char *d = dst;
    switch (t) {
    case NNF_DTYPE_FLOAT32:
    case NNF_DTYPE_INT32:
    case NNF_DTYPE_UINT32: {
        uint32_t x = (uint32_t)u;
        memcpy(d + 4 * i, &x, 4);
        break;
    }
    case NNF_DTYPE_INT16:
    case NNF_DTYPE_UINT16:
    case NNF_DTYPE_FLOAT16:
    case NNF_DTYPE_BFLOAT16: {
        uint16_t x = (uint16_t)u;
        memcpy(d + 2 * i, &x, 2);
        break;
    }
    case NNF_DTYPE_INT8:
    case NNF_DTYPE_UINT8: d[i] = (unsigned char)u; break;
    case NNF_DTYPE_BOOL: d[i] = (uint32_t)u != 0; break;
    case NNF_DTYPE_INT64:
    case NNF_DTYPE_FLOAT64:
    case NNF_DTYPE_UINT64: memcpy(d + 8 * i, &u, 8); break;
    default: break;
    }
}

typedef struct tensor_scan {
    const char *name;
    int64_t dtype;
    size_t rank_total; /* dims seen, may exceed NNF_MAX_RANK */
    int64_t dims[NNF_MAX_RANK];
    bool has_raw;
    const uint8_t *raw;
    size_t raw_len;
    size_t n_typed[16]; /* element counts of the typed fields, by field number */
    bool has_segment;
    int64_t data_location;
    bool has_ext, has_location, has_offset, has_length;
    const char *location;
    uint64_t ext_offset, ext_length;
} tensor_scan;

static nnf_status parse_u64(const char *s, const char *key, uint64_t *out) {
    uint64_t v = 0;
    if (!*s)
        return NNF_CORRUPT("external_data '%s' is empty", key);
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || __builtin_mul_overflow(v, 10, &v) ||
            __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
            return NNF_CORRUPT("external_data '%s' is not a valid byte count: '%.40s'", key, s);
    }
    *out = v;
    return NNF_OK;
}

static nnf_status scan_external_entry(nnf_onnx_ctx *cx, nnf_arena *a, const nnf_pb_field *entry,
                                      tensor_scan *ts) {
    NNF_CHECK(nnf_pb_expect(entry, NNF_PB_LEN, "external_data"));
    nnf_pb r = nnf_onnx_msg(cx, entry);
    const char *key = NULL, *value = NULL;
    nnf_pb_field f;
    bool more;
    for (;;) {
        NNF_CHECK(nnf_pb_next(&r, &f, &more));
        if (!more)
            break;
        if (f.number == 1)
            NNF_CHECK(nnf_onnx_string(a, &f, "external_data key", 0, &key));
        else if (f.number == 2)
            NNF_CHECK(nnf_onnx_string(a, &f, "external_data value", 0, &value));
    }
    if (!key)
        return NNF_CORRUPT("external_data entry at offset %zu has no key", entry->offset);
    if (!value)
        value = "";
    ts->has_ext = true;
    if (!strcmp(key, "location")) {
        ts->has_location = true;
        ts->location = value;
    } else if (!strcmp(key, "offset")) {
        ts->has_offset = true;
        NNF_CHECK(parse_u64(value, key, &ts->ext_offset));
    } else if (!strcmp(key, "length")) {
        ts->has_length = true;
        NNF_CHECK(parse_u64(value, key, &ts->ext_length));
    }
    /* "checksum" and unknown keys carry nothing we need. */
    return NNF_OK;
}

static nnf_status scan_tensor(nnf_onnx_ctx *cx, nnf_arena *a, const nnf_pb_field *span,
                              tensor_scan *ts) {
    nnf_pb r = nnf_onnx_msg(cx, span);
    nnf_pb_field f;
    bool more;
    for (;;) {
        NNF_CHECK(nnf_pb_next(&r, &f, &more));
        if (!more)
            break;
        switch (f.number) {
        case T_DIMS: {
            size_t n = 0;
            NNF_CHECK(nnf_pb_repeated_count(&f, NNF_PB_SCALAR_VARINT, "dims", &n));
            nnf_pb_iter it;
            nnf_pb_iter_init(&it, &f, NNF_PB_SCALAR_VARINT);
            for (size_t k = 0; k < n; k++) {
                uint64_t u;
                if (!nnf_pb_iter_next(&it, &u))
                    return nnf_error(NNF_ERR_INTERNAL, "dims: packed count and contents disagree");
                int64_t d = (int64_t)u;
                if (d < 0)
                    return NNF_CORRUPT("dim %zu is negative (%" PRId64 ")", ts->rank_total, d);
                if (ts->rank_total < NNF_MAX_RANK)
                    ts->dims[ts->rank_total] = d;
                ts->rank_total++;
            }
            break;
        }
        case T_DATA_TYPE: {
            int32_t t;
            NNF_CHECK(nnf_pb_int32(&f, "data_type", &t));
            ts->dtype = t;
            break;
        }
        case T_SEGMENT: ts->has_segment = true; break;
        case T_FLOAT_DATA:
        case T_INT32_DATA:
        case T_INT64_DATA:
        case T_DOUBLE_DATA:
        case T_UINT64_DATA:
            NNF_CHECK(nnf_pb_repeated_count(&f, field_kind((int)f.number),
                                            field_name((int)f.number), &ts->n_typed[f.number]));
            break;
        case T_STRING_DATA:
            NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "string_data"));
            ts->n_typed[T_STRING_DATA]++;
            break;
        case T_NAME: NNF_CHECK(nnf_onnx_string(a, &f, "name", 0, &ts->name)); break;
        case T_RAW_DATA:
            NNF_CHECK(nnf_pb_expect(&f, NNF_PB_LEN, "raw_data"));
            ts->has_raw = true;
            ts->raw = f.data;
            ts->raw_len = f.len;
            break;
        case T_EXTERNAL_DATA: NNF_CHECK(scan_external_entry(cx, a, &f, ts)); break;
        case T_DATA_LOCATION: {
            int32_t loc;
            NNF_CHECK(nnf_pb_int32(&f, "data_location", &loc));
            ts->data_location = loc;
            break;
        }
        default: break;
        }
    }
    return NNF_OK;
}

/* Locations come from the file: refuse anything that could reach outside
 * base_dir (absolute paths, drive letters, ".." components with either
 * separator). Symbolic links inside base_dir are followed. */
static nnf_status check_location(const char *loc) {
    if (!loc[0])
        return NNF_CORRUPT("external data location is empty");
    if (loc[0] == '/' || loc[0] == '\\' ||
        (((loc[0] | 0x20) >= 'a' && (loc[0] | 0x20) <= 'z') && loc[1] == ':'))
        return NNF_CORRUPT("external data location '%.200s' is an absolute path", loc);
    const char *p = loc;
    while (*p) {
        size_t n = strcspn(p, "/\\");
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return NNF_CORRUPT("external data location '%.200s' leaves the model's folder", loc);
        p += n;
        if (*p)
            p++;
    }
    return NNF_OK;
}

/* External data files kept open while the model loads (their weights are
 * read with pread where a copy is made); past these, through the mapping. */
#define MAX_OPEN_EXTERNAL 16

static nnf_status map_external(nnf_onnx_ctx *cx, const char *loc, nnf_mapping **out) {
    NNF_CHECK(check_location(loc));
    const char *dir = cx->base_dir && cx->base_dir[0] ? cx->base_dir : NULL;
    size_t dlen = dir ? strlen(dir) : 0, llen = strlen(loc), total;
    if (!nnf_add_size(dlen, llen, &total) || !nnf_add_size(total, 2, &total))
        return NNF_CORRUPT("external data path is too long");
    char *path = nnf_malloc(total);
    if (!path)
        return nnf_onnx_oom("an external data path");
    if (dir)
        snprintf(path, total, "%s/%s", dir, loc);
    else
        snprintf(path, total, "%s", loc);
    nnf_status st = NNF_OK;
    int open_files = 0;
    for (nnf_mapping *m = cx->root->mappings; m; m = m->next) {
        if (!strcmp(m->path, path)) {
            *out = m;
            goto done;
        }
        open_files += m->fd >= 0;
    }
    nnf_mapping *m = NULL;
    st = nnf_file_map(path, &m);
    if (st != NNF_OK)
        goto done;
    /* a file a tensor (ONNX allows it) would keep a descriptor each */
    if (open_files >= MAX_OPEN_EXTERNAL)
        nnf_mappings_close_files(m);
    m->next = cx->root->mappings;
    cx->root->mappings = m;
    *out = m;
done:
    nnf_free(path);
    return st;
}

/* Tensor data the importer must own. Large tensors (weights) get their own
 * block so a later stage can release them once they are folded or packed;
 * small ones go to the arena. */
#define OWN_BLOCK_MIN 4096
static void *tensor_alloc(nnf_onnx_ctx *cx, nnf_arena *a, size_t nbytes) {
    return nbytes >= OWN_BLOCK_MIN ? nnf_graph_block_alloc(cx->root, nbytes) : nnf_arena_alloc(a, nbytes);
}

bool nnf_onnx_in_own_mapping(const nnf_onnx_ctx *cx, const void *data, size_t nbytes) {
    const uint8_t *src = data;
    bool ours = cx->base_is_mapping && src >= cx->base && src + nbytes <= cx->base + cx->size;
    for (const nnf_mapping *m = cx->root->mappings; m && !ours; m = m->next)
        ours = m->addr && src >= (const uint8_t *)m->addr && src + nbytes <= (const uint8_t *)m->addr + m->size;
    return ours;
}

/* After copying from a file mapping of ours, hand its whole pages back so the
 * file and the copy are not both resident (never for a caller's buffer). */
static void release_source_pages(nnf_onnx_ctx *cx, const uint8_t *src, size_t nbytes) {
    if (!nnf_onnx_in_own_mapping(cx, src, nbytes))
        return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)src + page - 1) & ~(page - 1), hi = ((uintptr_t)src + nbytes) & ~(page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

nnf_status nnf_onnx_copy_aligned(nnf_onnx_ctx *cx, nnf_arena *a, const void **data, size_t nbytes) {
    void *copy = tensor_alloc(cx, a, nbytes);
    if (!copy)
        return nnf_onnx_oom("tensor data");
    memcpy(copy, *data, nbytes);
    release_source_pages(cx, *data, nbytes);
    *data = copy;
    return NNF_OK;
}

/* Point at (or copy) data that is already in the tensor's layout. */
static nnf_status borrow_or_copy(nnf_onnx_ctx *cx, nnf_arena *a, const uint8_t *src, size_t nbytes,
                                 size_t esize, const void **out, bool *misaligned) {
    if (nbytes == 0) {
        *out = NULL;
        return NNF_OK;
    }
    *out = src;
    if (((uintptr_t)src % esize) == 0)
        return NNF_OK;
    /* a large initialiser: its readers decide (align_initializers, import.c) */
    if (cx->initializers && nbytes >= OWN_BLOCK_MIN) {
        *misaligned = true;
        return NNF_OK;
    }
    return nnf_onnx_copy_aligned(cx, a, out, nbytes);
}

static nnf_status load_external(nnf_onnx_ctx *cx, nnf_arena *a, const tensor_scan *ts,
                                size_t nbytes, size_t esize, const void **out, bool *misaligned) {
    if (!ts->has_location)
        return NNF_CORRUPT("data_location is EXTERNAL but external_data has no 'location'");
    if (ts->has_length && ts->ext_length != nbytes)
        return NNF_CORRUPT("external data length is %" PRIu64 " bytes, dims need %zu",
                           ts->ext_length, nbytes);
    nnf_mapping *m = NULL;
    NNF_CHECK(map_external(cx, ts->location, &m));
    if (ts->ext_offset > m->size || nbytes > m->size - ts->ext_offset)
        return NNF_CORRUPT("external data at offset %" PRIu64 " + %zu bytes runs past the end of "
                           "'%.200s' (%zu bytes)",
                           ts->ext_offset, nbytes, ts->location, m->size);
    return borrow_or_copy(cx, a, (const uint8_t *)m->addr + ts->ext_offset, nbytes, esize, out,
                          misaligned);
}

static nnf_status decode_typed(nnf_onnx_ctx *cx, nnf_arena *a, const nnf_pb_field *span, int field,
                               nnf_dtype t, size_t numel, size_t nbytes, const void **out) {
    void *dst = tensor_alloc(cx, a, nbytes);
    if (!dst)
        return nnf_onnx_oom("tensor data");
    nnf_pb r = nnf_onnx_msg(cx, span);
    nnf_pb_field f;
    bool more;
    size_t i = 0;
    for (;;) {
        NNF_CHECK(nnf_pb_next(&r, &f, &more));
        if (!more)
            break;
        if ((int)f.number != field)
            continue;
        nnf_pb_iter it;
        nnf_pb_iter_init(&it, &f, field_kind(field));
        uint64_t u;
        while (nnf_pb_iter_next(&it, &u)) {
            if (i >= numel)
                return nnf_error(NNF_ERR_INTERNAL, "%s: more elements than counted",
                                 field_name(field));
            store_elem(t, dst, i++, u);
        }
    }
    if (i != numel)
        return nnf_error(NNF_ERR_INTERNAL, "%s: %zu elements decoded, %zu counted",
                         field_name(field), i, numel);
    *out = dst;
    return NNF_OK;
}

static nnf_status tensor_body(nnf_onnx_ctx *cx, nnf_arena *a, const nnf_pb_field *span,
                              tensor_scan *ts, nnf_const_tensor *out) {
    if (ts->rank_total > NNF_MAX_RANK)
        return nnf_error(NNF_ERR_UNSUPPORTED, "has %zu dims; nnfuse supports at most %d",
                         ts->rank_total, NNF_MAX_RANK);
    if (ts->has_segment)
        return nnf_error(NNF_ERR_UNSUPPORTED, "segmented tensors are not supported");
    if (ts->dtype == NNF_DTYPE_STRING)
        return nnf_error(NNF_ERR_UNSUPPORTED, "string tensors are not supported");
    if (ts->dtype == NNF_DTYPE_UNDEFINED)
        return NNF_CORRUPT("data_type is missing or UNDEFINED");
    if (!nnf_onnx_dtype_known(ts->dtype))
        return nnf_error(NNF_ERR_UNSUPPORTED, "data_type %" PRId64 " is not supported", ts->dtype);
    nnf_dtype t = (nnf_dtype)ts->dtype;
    size_t esize = nnf_dtype_size(t);

    int64_t numel = 1;
    memset(&out->shape, 0, sizeof out->shape);
    out->shape.rank = (int)ts->rank_total;
    for (size_t k = 0; k < ts->rank_total; k++) {
        out->shape.dims[k] = ts->dims[k];
        if (__builtin_mul_overflow(numel, ts->dims[k], &numel))
            return NNF_CORRUPT("dims overflow: element count does not fit 64 bits");
    }
    size_t nbytes;
    if ((uint64_t)numel > SIZE_MAX || !nnf_mul_size((size_t)numel, esize, &nbytes))
        return NNF_CORRUPT("dims overflow: %" PRId64 " elements of %zu bytes", numel, esize);
    out->dtype = t;
    out->nbytes = nbytes;

    int want = typed_field(t);
    bool ext = ts->data_location == 1;
    if (ts->data_location != 0 && ts->data_location != 1)
        return NNF_CORRUPT("data_location %" PRId64 " is neither DEFAULT nor EXTERNAL",
                           ts->data_location);
    if (ts->has_ext && !ext)
        return NNF_CORRUPT("has external_data entries but data_location is not EXTERNAL");
    int sources = (ts->has_raw ? 1 : 0) + (ext ? 1 : 0);
    for (int fld = T_FLOAT_DATA; fld <= T_UINT64_DATA; fld++) {
        if (fld == T_NAME || fld == T_RAW_DATA || !ts->n_typed[fld])
            continue;
        if (fld != want)
            return NNF_CORRUPT("has %s, which cannot hold %s elements", field_name(fld),
                               nnf_dtype_name(t));
        sources++;
    }
    if (sources > 1)
        return NNF_CORRUPT("holds its data in more than one of raw_data, %s, external data",
                           field_name(want));
    if (ts->has_raw) {
        if (ts->raw_len != nbytes)
            return NNF_CORRUPT("raw_data has %zu bytes, dims need %zu", ts->raw_len, nbytes);
        return borrow_or_copy(cx, a, ts->raw, nbytes, esize, &out->data, &out->misaligned);
    }
    if (ext)
        return load_external(cx, a, ts, nbytes, esize, &out->data, &out->misaligned);
    if (ts->n_typed[want]) {
        if (ts->n_typed[want] != (size_t)numel)
            return NNF_CORRUPT("%s has %zu values, dims need %" PRId64, field_name(want),
                               ts->n_typed[want], numel);
        return decode_typed(cx, a, span, want, t, (size_t)numel, nbytes, &out->data);
    }
    if (numel != 0)
        return NNF_CORRUPT("has no data for its %" PRId64 " elements", numel);
    out->data = NULL;
    return NNF_OK;
}

nnf_status nnf_onnx_tensor(nnf_onnx_ctx *cx, nnf_arena *a, const nnf_pb_field *span,
                           const char *what, const char **name_out, nnf_const_tensor *out) {
    tensor_scan ts;
    memset(&ts, 0, sizeof ts);
    memset(out, 0, sizeof *out);
    nnf_status st = nnf_pb_expect(span, NNF_PB_LEN, what);
    if (st == NNF_OK)
        st = scan_tensor(cx, a, span, &ts);
    if (st == NNF_OK)
        st = tensor_body(cx, a, span, &ts, out);
    if (st != NNF_OK) {
        if (ts.name)
            return nnf_error_prefix(st, "%s '" NNF_ONNX_NAME_FMT "'", what, ts.name);
        return nnf_error_prefix(st, "%s at offset %zu", what, span->offset);
    }
    if (name_out)
        *name_out = ts.name;
    return NNF_OK;
}

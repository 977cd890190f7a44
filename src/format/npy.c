#include "format/npy.h"

#include "base/alloc.h"
#include "base/status.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *descr;
    nnf_dtype dtype;
} npy_types[] = {
    {"<f4", NNF_DTYPE_FLOAT32}, {"<f8", NNF_DTYPE_FLOAT64}, {"<f2", NNF_DTYPE_FLOAT16},
    {"<i8", NNF_DTYPE_INT64},   {"<i4", NNF_DTYPE_INT32},   {"<i2", NNF_DTYPE_INT16},
    {"|i1", NNF_DTYPE_INT8},    {"|u1", NNF_DTYPE_UINT8},   {"<u2", NNF_DTYPE_UINT16},
    {"<u4", NNF_DTYPE_UINT32},  {"<u8", NNF_DTYPE_UINT64},  {"|b1", NNF_DTYPE_BOOL},
};

static const char *descr_of(nnf_dtype t) {
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (npy_types[i].dtype == t)
            return npy_types[i].descr;
    return NULL;
}

NNF_API void nnf_npy_safe_name(const char *name, char *out, size_t size) {
    size_t i = 0;
    for (; name[i] && i + 1 < size; i++) {
        char c = name[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                 c == '_' || c == '-';
        out[i] = ok ? c : '_';
    }
    out[i] = 0;
}

NNF_API nnf_status nnf_npy_write(const char *path, nnf_dtype dtype, int rank, const int64_t *shape,
                                 const void *data) {
    const char *descr = descr_of(dtype);
    if (!descr)
        return nnf_error(NNF_ERR_UNSUPPORTED, "%s: cannot write dtype %s as .npy", path, nnf_dtype_name(dtype));
    char header[512];
    int off = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    size_t numel = 1;
    for (int i = 0; i < rank; i++) {
        off += snprintf(header + off, sizeof header - (size_t)off, "%lld,%s", (long long)shape[i],
                        i + 1 < rank ? " " : "");
        numel *= (size_t)shape[i];
    }
    off += snprintf(header + off, sizeof header - (size_t)off, "), }");
    /* pad with spaces so magic(6)+version(2)+len(2)+header ends on 64 bytes, then '\n' */
    int total = 10 + off + 1;
    int pad = (64 - total % 64) % 64;
    memset(header + off, ' ', (size_t)pad);
    off += pad;
    header[off++] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f)
        return nnf_error(NNF_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(off & 0xff),
                             (unsigned char)(off >> 8)};
    size_t nbytes = numel * nnf_dtype_size(dtype);
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t)off, f) == (size_t)off &&
             (nbytes == 0 || fwrite(data, 1, nbytes, f) == nbytes);
    if (fclose(f) != 0)
        ok = 0;
    return ok ? NNF_OK : nnf_error(NNF_ERR_IO, "%s: write failed", path);
}

/* Find 'key': in a Python dict literal and return a pointer after the colon. */
static const char *dict_value(const char *h, const char *key) {
    const char *p = strstr(h, key);
    if (!p)
        return NULL;
    p = strchr(p + strlen(key), ':');
    if (!p)
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

NNF_API nnf_status nnf_npy_read(const char *path, nnf_npy *out) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return nnf_error(NNF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    unsigned char pre[12];
    nnf_status st = NNF_OK;
    char *header = NULL;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: not a .npy file", path);
        goto done;
    }
    size_t hlen;
    if (pre[6] == 1) {
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else {
        if (fread(pre + 10, 1, 2, f) != 2) {
            st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: truncated .npy header", path);
            goto done;
        }
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    }
    if (hlen > 1 << 20) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: .npy header too long", path);
        goto done;
    }
    header = nnf_malloc(hlen + 1);
    if (!header || fread(header, 1, hlen, f) != hlen) {
        st = nnf_error(header ? NNF_ERR_INVALID_ARGUMENT : NNF_ERR_OUT_OF_MEMORY, "%s: bad .npy header", path);
        goto done;
    }
    header[hlen] = 0;
    const char *d = dict_value(header, "'descr'");
    const char *fo = dict_value(header, "'fortran_order'");
    const char *sh = dict_value(header, "'shape'");
    if (!d || !fo || !sh || *d != '\'' || *sh != '(') {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: malformed .npy header", path);
        goto done;
    }
    if (!strncmp(fo, "True", 4)) {
        st = nnf_error(NNF_ERR_UNSUPPORTED, "%s: Fortran-order arrays are not supported", path);
        goto done;
    }
    out->dtype = NNF_DTYPE_UNDEFINED;
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++) {
        const char *t = npy_types[i].descr;
        /* accept '=' / '|' / '<' byte-order marks equivalently for our little-endian host */
        if (!strncmp(d + 2, t + 1, 2) && d[4] == '\'' && (d[1] == t[0] || d[1] == '=' || d[1] == '|' || d[1] == '<'))
            out->dtype = npy_types[i].dtype;
    }
    if (out->dtype == NNF_DTYPE_UNDEFINED) {
        st = nnf_error(NNF_ERR_UNSUPPORTED, "%s: unsupported .npy dtype %.8s", path, d);
        goto done;
    }
    const char *p = sh + 1;
    size_t numel = 1;
    while (*p && *p != ')') {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')')
            break;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || out->rank >= NNF_NPY_MAX_RANK || !nnf_mul_size(numel, (size_t)v, &numel)) {
            st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: bad .npy shape", path);
            goto done;
        }
        out->shape[out->rank++] = v;
        p = end;
    }
    if (!nnf_mul_size(numel, nnf_dtype_size(out->dtype), &out->nbytes)) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: .npy too large", path);
        goto done;
    }
    out->data = nnf_malloc_aligned(out->nbytes);
    if (!out->data) {
        st = nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        goto done;
    }
    if (out->nbytes && fread(out->data, 1, out->nbytes, f) != out->nbytes) {
        st = nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: .npy data truncated", path);
        goto done;
    }
done:
    nnf_free(header);
    fclose(f);
    if (st != NNF_OK)
        nnf_npy_free(out);
    return st;
}

NNF_API void nnf_npy_free(nnf_npy *npy) {
    if (!npy)
        return;
    nnf_free_aligned(npy->data);
    npy->data = NULL;
}

#include "format/nnf.h"

#include "base/alloc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const unsigned char MAGIC[8] = {0x89, 'N', 'N', 'F', '\r', '\n', 0x1a, '\n'};
#define HEADER_BYTES 128
#define ENTRY_BYTES 24
#define VERSION 1
#define META_MAX ((size_t)1 << 20)

static uint64_t rd64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++, v >>= 8)
        p[i] = (unsigned char)v;
}

static void wr32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++, v >>= 8)
        p[i] = (unsigned char)v;
}

bool nnf_compiled_is(const void *data, size_t size) {
    return data && size >= sizeof MAGIC && !memcmp(data, MAGIC, sizeof MAGIC);
}

/* [off, off + bytes) lies in a file of `size` bytes */
static bool in_file(uint64_t off, uint64_t bytes, size_t size) {
    return off <= size && bytes <= size - off;
}

#define BAD(...) nnf_error(NNF_ERR_INVALID_MODEL, __VA_ARGS__)

nnf_status nnf_compiled_parse(const void *data, size_t size, const char *source,
                              nnf_compiled *out) {
    memset(out, 0, sizeof *out);
    const unsigned char *b = data;
    if (!nnf_compiled_is(data, size) || size < HEADER_BYTES)
        return BAD("%s: not a compiled nnfuse file (bad magic or shorter than its header)", source);
    if (rd32(b + 8) != VERSION)
        return BAD("%s: compiled file version %u; this build reads version %d (compile it again)",
                   source, (unsigned)rd32(b + 8), VERSION);
    uint64_t meta_off = rd64(b + 16), meta_bytes = rd64(b + 24), onnx_off = rd64(b + 32),
             onnx_bytes = rd64(b + 40), table_off = rd64(b + 48), n = rd64(b + 56),
             names_off = rd64(b + 64), names_bytes = rd64(b + 72);
    if (!in_file(meta_off, meta_bytes, size) || meta_bytes > META_MAX ||
        memchr(b + meta_off, 0, meta_bytes))
        return BAD("%s: the compiled file's meta data (%llu bytes at %llu) is out of place", source,
                   (unsigned long long)meta_bytes, (unsigned long long)meta_off);
    if (!in_file(onnx_off, onnx_bytes, size))
        return BAD("%s: the compiled file's model (%llu bytes at %llu) runs past its end (%zu)",
                   source, (unsigned long long)onnx_bytes, (unsigned long long)onnx_off, size);
    if (!in_file(names_off, names_bytes, size) || (names_bytes && b[names_off + names_bytes - 1]))
        return BAD("%s: the compiled file's names (%llu bytes at %llu) are out of place", source,
                   (unsigned long long)names_bytes, (unsigned long long)names_off);
    if (n > size / ENTRY_BYTES || !in_file(table_off, n * ENTRY_BYTES, size))
        return BAD("%s: the compiled file's table of %llu packed blocks runs past its end", source,
                   (unsigned long long)n);
    nnf_pack_entry *e = nnf_calloc(n ? (size_t)n : 1, sizeof *e);
    if (!e)
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory for %llu packed blocks", source,
                         (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        const unsigned char *t = b + table_off + i * ENTRY_BYTES;
        uint64_t off = rd64(t + 8), bytes = rd64(t + 16);
        if (off % 64 || off < NNF_BLOCK_HEADER || !bytes || !in_file(off, bytes, size) ||
            ((uintptr_t)(b + off)) % 64 || !nnf_block_is_borrowed(b + off)) {
            nnf_free(e);
            return BAD("%s: packed block %llu (%llu bytes at %llu) is out of place", source,
                       (unsigned long long)i, (unsigned long long)bytes, (unsigned long long)off);
        }
        e[i] = (nnf_pack_entry){
            .node = rd32(t), .seq = rd32(t + 4), .data = b + off, .bytes = (size_t)bytes};
    }
    out->meta = (const char *)b + meta_off;
    out->meta_bytes = (size_t)meta_bytes;
    out->onnx = b + onnx_off;
    out->onnx_bytes = (size_t)onnx_bytes;
    out->names = (const char *)b + names_off;
    out->names_bytes = (size_t)names_bytes;
    out->graph_hash = rd64(b + 80);
    out->blocks = e;
    out->n_blocks = (size_t)n;
    return NNF_OK;
}

void nnf_compiled_free(nnf_compiled *c) {
    nnf_free(c->blocks);
    memset(c, 0, sizeof *c);
}

static uint64_t up(uint64_t v, uint64_t a) {
    return (v + a - 1) / a * a;
}

/* writes bytes, then zeros up to `to`; false on an I/O error */
static bool put(FILE *f, uint64_t *at, const void *p, size_t bytes, uint64_t to) {
    static const unsigned char zeros[4096];
    if (bytes && fwrite(p, 1, bytes, f) != bytes)
        return false;
    *at += bytes;
    while (*at < to) {
        size_t z = to - *at < sizeof zeros ? (size_t)(to - *at) : sizeof zeros;
        if (fwrite(zeros, 1, z, f) != z)
            return false;
        *at += z;
    }
    return true;
}

nnf_status nnf_compiled_write(const char *path, const char *meta, const char *names,
                              size_t names_bytes, uint64_t graph_hash, const void *onnx,
                              size_t onnx_bytes, const nnf_pack_entry *blocks, size_t n_blocks,
                              size_t *block_bytes) {
    *block_bytes = 0;
    size_t meta_bytes = strlen(meta), table_bytes;
    if (meta_bytes > META_MAX || !nnf_mul_size(n_blocks, ENTRY_BYTES, &table_bytes))
        return nnf_error(NNF_ERR_INVALID_ARGUMENT, "%s: too much to compile", path);
    /* the layout: header, meta, names, table, ONNX at 4 KiB, blocks at 64 after a header */
    uint64_t meta_off = HEADER_BYTES, names_off = up(meta_off + meta_bytes, 64),
             table_off = up(names_off + names_bytes, 64),
             onnx_off = up(table_off + table_bytes, 4096), at = up(onnx_off + onnx_bytes, 64);
    unsigned char *table = nnf_calloc(table_bytes ? table_bytes : 1, 1);
    size_t tmp_len = strlen(path) + 5;
    char *tmp = nnf_malloc(tmp_len);
    /* first[i]: the first entry holding entry i's block (nodes share blocks) */
    size_t *first = nnf_calloc(n_blocks ? n_blocks : 1, sizeof *first);
    if (!table || !tmp || !first) {
        nnf_free(table);
        nnf_free(tmp);
        nnf_free(first);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory writing the compiled file",
                         path);
    }
    for (size_t i = 0; i < n_blocks; i++) {
        first[i] = 0;
        while (blocks[first[i]].data != blocks[i].data || blocks[first[i]].bytes != blocks[i].bytes)
            first[i]++;
        uint64_t off =
            first[i] < i ? rd64(table + first[i] * ENTRY_BYTES + 8) : at + NNF_BLOCK_HEADER;
        wr32(table + i * ENTRY_BYTES, blocks[i].node);
        wr32(table + i * ENTRY_BYTES + 4, blocks[i].seq);
        wr64(table + i * ENTRY_BYTES + 8, off);
        wr64(table + i * ENTRY_BYTES + 16, blocks[i].bytes);
        if (first[i] == i) {
            at = up(off + blocks[i].bytes, 64);
            *block_bytes += blocks[i].bytes;
        }
    }
    unsigned char head[HEADER_BYTES] = {0}, borrowed[NNF_BLOCK_HEADER];
    memcpy(head, MAGIC, sizeof MAGIC);
    wr32(head + 8, VERSION);
    wr64(head + 16, meta_off);
    wr64(head + 24, meta_bytes);
    wr64(head + 32, onnx_off);
    wr64(head + 40, onnx_bytes);
    wr64(head + 48, table_off);
    wr64(head + 56, n_blocks);
    wr64(head + 64, names_off);
    wr64(head + 72, names_bytes);
    wr64(head + 80, graph_hash);
    nnf_block_header_borrowed(borrowed);
    snprintf(tmp, tmp_len, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    bool ok = f != NULL;
    uint64_t pos = 0;
    ok = ok && put(f, &pos, head, sizeof head, meta_off) &&
         put(f, &pos, meta, meta_bytes, names_off) && put(f, &pos, names, names_bytes, table_off) &&
         put(f, &pos, table, table_bytes, onnx_off) &&
         put(f, &pos, onnx, onnx_bytes, up(onnx_off + onnx_bytes, 64));
    for (size_t i = 0; ok && i < n_blocks; i++)
        ok = first[i] < i ||
             (put(f, &pos, borrowed, sizeof borrowed, pos + sizeof borrowed) &&
              put(f, &pos, blocks[i].data, blocks[i].bytes, up(pos + blocks[i].bytes, 64)));
    int err = errno;
    nnf_free(first);
    if (f && fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    nnf_status st = NNF_OK;
    if (!ok || rename(tmp, path) != 0) {
        err = ok ? errno : err;
        remove(tmp);
        st = nnf_error(NNF_ERR_IO, "%s: cannot write the compiled file: %s", path, strerror(err));
    }
    nnf_free(table);
    nnf_free(tmp);
    return st;
}

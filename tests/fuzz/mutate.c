/* mutate MODEL.onnx|MODEL.nnf N SEED [ONLY]
 *
 * A structure-aware mutation tester for the whole public load/run path. It
 * makes N mutated copies of MODEL in memory (byte flips, truncation, protobuf
 * varints and length prefixes overwritten with large values, duplicated
 * spans), and for each one calls nnf_model_load_buffer; when that succeeds it
 * creates a session and runs it once on zero-filled inputs of the declared
 * shapes, symbolic dims taken as 1 (as `nnfuse run` does; so a model with a
 * symbolic batch runs its shape plan), skipped when the rank is unknown or
 * an input has more than 64M elements. It prints "N loaded, N rejected,
 * N ran".
 *
 * Exit status: 0 unless an internal inconsistency was seen (a failure with
 * no message, a status outside the enum or NNF_ERR_INTERNAL, outputs that do
 * not match the model's description); a crash is the other failure mode.
 * Iteration i uses its own generator seeded from (SEED, i), so ONLY = i
 * replays a single case; NNF_MUTATE_SAVE=DIR writes each case to DIR before
 * loading it, so the file that crashed is on disk; NNF_MUTATE_VERBOSE=1
 * prints why each rejected case was rejected; NNF_MUTATE_STRICT=1 fails
 * (exit 4) when the unmutated model does not load, so a test cannot pass
 * by rejecting everything. */
#include "nnfuse.h"

#include <inttypes.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUN_ELEMS (64ll << 20)
#define MAX_RANK 8 /* the library's (src/ir/graph.h); larger ranks never load */

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
} bytes;

static void die(const char *what) {
    fprintf(stderr, "mutate: %s\n", what);
    exit(2);
}

static void reserve(bytes *b, size_t n) {
    if (n <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < n)
        cap *= 2;
    b->p = realloc(b->p, cap);
    if (!b->p)
        die("out of memory");
    b->cap = cap;
}

/* Replace b[pos, pos+old_len) with src[0, new_len). */
static void splice(bytes *b, size_t pos, size_t old_len, const uint8_t *src, size_t new_len) {
    reserve(b, b->n - old_len + new_len);
    memmove(b->p + pos + new_len, b->p + pos + old_len, b->n - pos - old_len);
    memcpy(b->p + pos, src, new_len);
    b->n = b->n - old_len + new_len;
}

/* splitmix64: small, good enough, reproducible everywhere. */
static uint64_t next_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static size_t below(uint64_t *s, size_t n) {
    return n ? (size_t)(next_rand(s) % n) : 0;
}

/* ---- where the varints are ------------------------------------------------------------------ */

typedef struct site {
    size_t pos, len; /* a varint (tag, value or length prefix) in the original */
    bool is_length;
} site;

typedef struct sites {
    site *v;
    size_t n, cap;
} sites;

static void add_site(sites *s, size_t pos, size_t len, bool is_length) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        if (!s->v)
            die("out of memory");
    }
    s->v[s->n++] = (site){pos, len, is_length};
}

static bool read_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *out) {
    uint64_t v = 0;
    for (int k = 0; k < 10 && *i < n; k++) {
        uint8_t b = p[(*i)++];
        v |= (uint64_t)(b & 0x7f) << (7 * k);
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* Record the varints of the message at p[0, n) (offset off in the file) and,
 * recursively, of length-delimited payloads that parse as messages. Returns
 * false (recording nothing) when the span is not a message. */
static bool scan(const uint8_t *p, size_t n, size_t off, int depth, sites *s) {
    size_t mark = s->n, i = 0;
    while (i < n) {
        size_t tag_at = i;
        uint64_t tag, v;
        if (!read_varint(p, n, &i, &tag) || (tag >> 3) == 0)
            goto not_message;
        add_site(s, off + tag_at, i - tag_at, false);
        switch (tag & 7) {
        case 0: {
            size_t at = i;
            if (!read_varint(p, n, &i, &v))
                goto not_message;
            add_site(s, off + at, i - at, false);
            break;
        }
        case 1:
            if (n - i < 8)
                goto not_message;
            i += 8;
            break;
        case 5:
            if (n - i < 4)
                goto not_message;
            i += 4;
            break;
        case 2: {
            size_t at = i;
            if (!read_varint(p, n, &i, &v) || v > n - i)
                goto not_message;
            add_site(s, off + at, i - at, true);
            if (depth < 24 && v > 0)
                scan(p + i, (size_t)v, off + i, depth + 1, s);
            i += (size_t)v;
            break;
        }
        default: goto not_message;
        }
    }
    return true;
not_message:
    s->n = mark;
    return false;
}

/* ---- mutations ------------------------------------------------------------------------------ */

static size_t put_varint(uint8_t *out, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

static const char *mutate_varint(bytes *b, const site *st, uint64_t *rng) {
    uint8_t enc[16];
    size_t len;
    static const uint64_t big[] = {
        0,          1,          0x7f,       0xffffffffull, 0x7fffffffull,
        1ull << 32, 1ull << 62, 1ull << 63, UINT64_MAX,    UINT64_MAX - 1};
    switch (below(rng, 4)) {
    case 0: /* the largest value of the same width: the rest stays in place */
        for (len = 0; len + 1 < st->len; len++)
            enc[len] = 0xff;
        enc[len++] = 0x7f;
        splice(b, st->pos, st->len, enc, len);
        return "varint-max-same-width";
    case 1:
        len = put_varint(enc, big[below(rng, sizeof big / sizeof big[0])]);
        splice(b, st->pos, st->len, enc, len);
        return "varint-big";
    case 2: { /* a length off by a little */
        size_t i = 0;
        uint64_t v = 0;
        read_varint(b->p + st->pos, st->len, &i, &v);
        v += below(rng, 2) ? 1 : (uint64_t)-1;
        len = put_varint(enc, v);
        splice(b, st->pos, st->len, enc, len);
        return "varint-off-by-one";
    }
    default: /* an overlong encoding */
        for (len = 0; len < 11; len++)
            enc[len] = 0x80;
        enc[len++] = 0x01;
        splice(b, st->pos, st->len, enc, len);
        return "varint-overlong";
    }
}

static void mutate(bytes *b, const sites *s, uint64_t *rng, char *desc, size_t desc_size) {
    desc[0] = 0;
    /* Structure-aware edits first, while the recorded offsets still hold. */
    if (s->n && below(rng, 3) != 0) {
        const site *st = &s->v[below(rng, s->n)];
        if (st->pos + st->len <= b->n) {
            const char *what = mutate_varint(b, st, rng);
            snprintf(desc + strlen(desc), desc_size - strlen(desc), "%s@%zu ", what, st->pos);
        }
    }
    /* a compiled .nnf file: half the edits in its first 4 KiB (header, meta
     * data, names and table of packed blocks), which random positions in
     * its megabytes of weights would hardly ever reach */
    static const uint8_t nnf_magic[8] = {0x89, 'N', 'N', 'F', '\r', '\n', 0x1a, '\n'};
    bool compiled = b->n >= 8 && !memcmp(b->p, nnf_magic, 8);
    int edits = 1 + (int)below(rng, 3);
    for (int e = 0; e < edits && b->n; e++) {
        size_t pos = below(rng, compiled && below(rng, 2) ? (b->n < 4096 ? b->n : 4096) : b->n);
        switch (below(rng, 4)) {
        case 0:
            b->p[pos] ^= (uint8_t)(1u << below(rng, 8));
            snprintf(desc + strlen(desc), desc_size - strlen(desc), "flip@%zu ", pos);
            break;
        case 1:
            b->p[pos] = (uint8_t)next_rand(rng);
            snprintf(desc + strlen(desc), desc_size - strlen(desc), "byte@%zu ", pos);
            break;
        case 2:
            if (below(rng, 4) == 0) { /* truncation: rarer, it ends most models at once */
                b->n = pos;
                snprintf(desc + strlen(desc), desc_size - strlen(desc), "truncate@%zu ", pos);
            }
            break;
        default: {
            size_t len = 1 + below(rng, 64), to = below(rng, b->n + 1);
            if (len > b->n - pos)
                len = b->n - pos;
            uint8_t tmp[64];
            memcpy(tmp, b->p + pos, len);
            splice(b, to, 0, tmp, len);
            snprintf(desc + strlen(desc), desc_size - strlen(desc), "dup@%zu+%zu->%zu ", pos, len,
                     to);
            break;
        }
        }
    }
}

/* ---- the public API under test -------------------------------------------------------------- */

typedef struct counts {
    long loaded, rejected, ran, run_failed, skipped, inconsistent;
} counts;

static bool status_valid(nnf_status st) {
    return st > NNF_OK && st <= NNF_ERR_INTERNAL;
}

static void inconsistent(counts *c, long iter, const char *desc, const char *fmt,
                         const char *detail) {
    c->inconsistent++;
    fprintf(stderr, "mutate: iteration %ld [%s]: ", iter, desc);
    fprintf(stderr, fmt, detail);
    fputc('\n', stderr);
}

static void check_failure(counts *c, long iter, const char *desc, nnf_status st, const char *msg,
                          const char *what) {
    if (!status_valid(st))
        inconsistent(c, iter, desc, "%s returned a status outside the enum", what);
    else if (st == NNF_ERR_INTERNAL)
        inconsistent(c, iter, desc, "internal error: %s", msg);
    else if (!msg || !msg[0])
        inconsistent(c, iter, desc, "%s failed with no message", what);
}

static void run_model(nnf_model *model, counts *c, long iter, const char *desc) {
    size_t n_in = nnf_model_input_count(model), n_out = nnf_model_output_count(model);
    nnf_tensor *ins = calloc(n_in ? n_in : 1, sizeof *ins);
    void **bufs = calloc(n_in ? n_in : 1, sizeof *bufs);
    int64_t(*dims)[MAX_RANK] = calloc(n_in ? n_in : 1, sizeof *dims);
    nnf_session *sess = NULL;
    if (!ins || !bufs || !dims)
        die("out of memory");
    bool runnable = true;
    for (size_t i = 0; i < n_in; i++) {
        nnf_value_info info;
        nnf_status st = nnf_model_input_info(model, i, &info);
        if (st != NNF_OK) {
            inconsistent(c, iter, desc, "input_info failed below input_count: %s",
                         nnf_last_error());
            goto done;
        }
        long long numel = 1;
        size_t esize = nnf_dtype_size(info.dtype);
        if (info.rank < 0 || info.rank > MAX_RANK || esize == 0)
            runnable = false;
        for (int d = 0; runnable && d < info.rank; d++) {
            dims[i][d] = info.dims[d] < 0 ? 1 : info.dims[d];
            if (__builtin_mul_overflow(numel, (long long)dims[i][d], &numel) ||
                numel > MAX_RUN_ELEMS)
                runnable = false;
        }
        if (!runnable)
            break;
        bufs[i] = calloc((size_t)(numel ? numel : 1), esize);
        if (!bufs[i])
            die("out of memory");
        ins[i] = (nnf_tensor){.name = info.name,
                              .dtype = info.dtype,
                              .rank = info.rank,
                              .shape = dims[i],
                              .data = bufs[i]};
    }
    nnf_value_info extra;
    if (nnf_model_input_info(model, n_in, &extra) == NNF_OK)
        inconsistent(c, iter, desc, "%s", "input_info accepted an index past input_count");
    if (!runnable) {
        c->skipped++;
        goto done;
    }
    nnf_session_options so = nnf_session_options_default();
    so.threads = 1;
    nnf_status st = nnf_session_create(model, &so, &sess);
    if (st != NNF_OK) {
        check_failure(c, iter, desc, st, nnf_last_error(), "nnf_session_create");
        c->run_failed++;
        goto done;
    }
    const nnf_tensor *outs = NULL;
    size_t n_outs = 0;
    st = nnf_session_run(sess, ins, n_in, &outs, &n_outs);
    if (st != NNF_OK) {
        check_failure(c, iter, desc, st, nnf_session_last_error(sess), "nnf_session_run");
        c->run_failed++;
        goto done;
    }
    c->ran++;
    if (n_outs != n_out)
        inconsistent(c, iter, desc, "%s",
                     "run returned a different number of outputs than the model has");
    for (size_t k = 0; k < n_outs && outs; k++) {
        long long numel = 1;
        bool overflow = false;
        for (int d = 0; d < outs[k].rank; d++)
            overflow |= outs[k].shape[d] < 0 ||
                        __builtin_mul_overflow(numel, (long long)outs[k].shape[d], &numel);
        if (outs[k].rank < 0 || overflow ||
            (numel > 0 && !outs[k].data && nnf_dtype_size(outs[k].dtype)))
            inconsistent(c, iter, desc, "output '%s' has a bad shape or no data",
                         outs[k].name ? outs[k].name : "?");
    }
done:
    nnf_session_destroy(sess);
    for (size_t i = 0; i < n_in; i++)
        free(bufs[i]);
    free(bufs);
    free(ins);
    free(dims);
}

static void try_one(const bytes *b, const char *base_dir, counts *c, long iter, const char *desc) {
    nnf_model *model = NULL;
    /* 64-byte aligned, as a compiled .nnf file's packed weights are read in place */
    uint8_t *copy = aligned_alloc(64, (b->n + 64) / 64 * 64);
    if (!copy)
        die("out of memory");
    memcpy(copy, b->p, b->n);
    nnf_status st = nnf_model_load_buffer(copy, b->n, base_dir, NULL, &model);
    if (st != NNF_OK) {
        c->rejected++;
        if (getenv("NNF_MUTATE_VERBOSE"))
            printf("iteration %ld [%s]: %s: %s\n", iter, desc, nnf_status_name(st),
                   nnf_last_error());
        check_failure(c, iter, desc, st, nnf_last_error(), "nnf_model_load_buffer");
        if (model)
            inconsistent(c, iter, desc, "%s", "a failed load left a model behind");
        free(copy);
        return;
    }
    c->loaded++;
    run_model(model, c, iter, desc);
    nnf_model_destroy(model);
    free(copy);
}

static bytes read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    bytes b = {0};
    uint8_t chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        reserve(&b, b.n + n);
        memcpy(b.p + b.n, chunk, n);
        b.n += n;
    }
    fclose(f);
    return b;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: mutate MODEL.onnx|MODEL.nnf N SEED [ONLY]\n");
        return 1;
    }
    bytes orig = read_file(argv[1]);
    long n = strtol(argv[2], NULL, 10);
    uint64_t seed = strtoull(argv[3], NULL, 10);
    long only = argc == 5 ? strtol(argv[4], NULL, 10) : -1;
    char *dir_copy = strdup(argv[1]);
    if (!dir_copy)
        die("out of memory");
    const char *base_dir = dirname(dir_copy);
    const char *save = getenv("NNF_MUTATE_SAVE");

    sites s = {0};
    if (!scan(orig.p, orig.n, 0, 0, &s))
        fprintf(stderr, "mutate: %s does not parse as protobuf; byte-level mutations only\n",
                argv[1]);

    counts c = {0};
    {
        /* The original first: it tells whether the mutations start from a
         * model the engine accepts. */
        counts base = {0};
        try_one(&orig, base_dir, &base, -1, "original");
        printf("original: %s%s%s\n", base.loaded ? "loaded" : "rejected", base.loaded ? "" : ": ",
               base.loaded ? "" : nnf_last_error());
        c.inconsistent += base.inconsistent;
        if (!base.loaded && getenv("NNF_MUTATE_STRICT")) {
            fprintf(stderr, "mutate: NNF_MUTATE_STRICT: the unmutated model must load\n");
            return 4;
        }
    }
    bytes b = {0};
    char desc[512];
    for (long i = 0; i < n; i++) {
        if (only >= 0 && i != only)
            continue;
        uint64_t rng = seed ^ (0x51ed270b27f4a3c5ull * (uint64_t)(i + 1));
        b.n = 0;
        reserve(&b, orig.n);
        memcpy(b.p, orig.p, orig.n);
        b.n = orig.n;
        mutate(&b, &s, &rng, desc, sizeof desc);
        if (save) {
            char path[4096];
            snprintf(path, sizeof path, "%s/mut_%ld.onnx", save, i);
            FILE *f = fopen(path, "wb");
            if (f) {
                fwrite(b.p, 1, b.n, f);
                fclose(f);
            }
        }
        if (only >= 0)
            printf("iteration %ld: %s\n", i, desc);
        try_one(&b, base_dir, &c, i, desc);
    }
    printf("%ld loaded, %ld rejected, %ld ran\n", c.loaded, c.rejected, c.ran);
    printf("(%ld runs skipped for unknown or huge input shapes, %ld failed to run, %ld "
           "inconsistencies)\n",
           c.skipped, c.run_failed, c.inconsistent);
    free(b.p);
    free(orig.p);
    free(s.v);
    free(dir_copy);
    return c.inconsistent ? 3 : 0;
}

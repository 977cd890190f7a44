/* The index-map gather engine shared by the data-movement reference kernels. */
#include "kernels/ref/tensor_ref.h"

#include "kernels/stream.h"

nnf_status nnf_gather_map_alloc(const nnf_node *node, int rank, const int64_t *odims,
                                 nnf_gather_map *m) {
    memset(m, 0, sizeof *m);
    m->rank = rank;
    size_t total = 1; /* never 0, so the allocation is never size 0 */
    for (int k = 0; k < rank; k++) {
        m->odims[k] = odims[k];
        if (!nnf_add_size(total, (size_t)odims[k], &total))
            return nnf_node_error(node, NNF_ERR_INVALID_ARGUMENT, "tensor too large");
    }
    size_t bytes;
    if (!nnf_mul_size(total, sizeof(int64_t), &bytes))
        return nnf_node_error(node, NNF_ERR_INVALID_ARGUMENT, "tensor too large");
    m->block = nnf_malloc(bytes);
    if (!m->block)
        return nnf_node_error(node, NNF_ERR_OUT_OF_MEMORY, "out of memory for index maps");
    int64_t *p = m->block;
    for (int k = 0; k < rank; k++) {
        m->map[k] = p;
        p += odims[k];
    }
    return NNF_OK;
}

void nnf_gather_map_free(nnf_gather_map *m) {
    nnf_free(m->block);
    m->block = NULL;
}

/* A piece of an output row: len elements at `at` that are the fill value, or
 * read from source element offsets src, src + step, ... (step 1: one copy;
 * 0: one element repeated, a broadcast; else a strided gather). */
typedef struct row_seg {
    int64_t at, len, src, step;
    bool fill;
} row_seg;

/* Enough for a Pad's row (fill, run, fill), a Tile's repeats of a short row
 * and a Slice's; a row of more pieces goes element by element. */
#define ROW_SEGS 64

/* The inner axis' pieces, from its map and stride: false if more than
 * ROW_SEGS. */
static bool row_segments(const int64_t *imap, int64_t inner, int64_t istr, row_seg *seg, int *n) {
    *n = 0;
    for (int64_t j = 0; j < inner;) {
        if (*n == ROW_SEGS)
            return false;
        row_seg *g = &seg[(*n)++];
        int64_t e = j + 1;
        g->at = j;
        g->fill = imap[j] < 0;
        g->src = g->fill ? 0 : imap[j] * istr;
        g->step = 0;
        if (g->fill) {
            while (e < inner && imap[e] < 0)
                e++;
        } else if (e < inner && imap[e] >= 0) {
            g->step = (imap[e] - imap[j]) * istr;
            while (e < inner && imap[e] >= 0 && (imap[e] - imap[e - 1]) * istr == g->step)
                e++;
        }
        g->len = e - j;
        j = e;
    }
    return true;
}

void nnf_fill_elems(void *dst, const void *elem, size_t n, size_t es) {
    uint8_t *o = dst;
    const uint8_t *s = elem;
    size_t same = 1;
    while (same < es && s[same] == s[0])
        same++;
    if (same == es) {
        memset(o, s[0], n * es); /* zeros, and any element of one repeated byte */
    } else if (n * es >= 16 && 16 % es == 0) {
        /* a 16-byte pattern of the element, written in whole stores (a
         * constant-size copy the compiler makes one store) */
        uint8_t pat[16];
        for (size_t b = 0; b < 16; b += es)
            memcpy(pat + b, s, es);
        size_t bytes = n * es, b = 0;
        for (; b + 16 <= bytes; b += 16)
            memcpy(o + b, pat, 16);
        for (; b < bytes; b += es)
            memcpy(o + b, pat, es);
    } else if (n) {
        /* the element, then doubling copies of what is written */
        memcpy(o, s, es);
        for (size_t done = 1; done < n;) {
            size_t c = done < n - done ? done : n - done;
            memcpy(o + done * es, o, c * es);
            done += c;
        }
    }
}

/* len elements from src at a step of `step` elements (0: one repeated). */
static inline void copy_strided(uint8_t *o, const uint8_t *s, int64_t len, int64_t step,
                                size_t es) {
    if (len == 1) {
        nnf_copy_elem(o, s, es); /* a Pad's one-wide border, a reflection's edge */
    } else if (step == 1) {
        memcpy(o, s, (size_t)len * es);
    } else if (step == 0) {
        nnf_fill_elems(o, s, (size_t)len, es);
    } else if (es == 4) {
        /* the element size decided once, not per element (a reflection's
         * runs go backwards) */
        for (int64_t i = 0; i < len; i++)
            memcpy(o + (size_t)i * 4, s + i * step * 4, 4);
    } else {
        for (int64_t i = 0; i < len; i++)
            nnf_copy_elem(o + (size_t)i * es, s + i * step * (int64_t)es, es);
    }
}

/* One run of a map: the row's pieces, and per outer axis the bytes of one
 * slice along it and the period of its map (the first index past 0 that
 * reads what index 0 reads; 0 if none). */
typedef struct gm_run {
    const nnf_gather_map *m;
    const uint8_t *src;
    size_t es;
    const void *fill;
    size_t slice[NNF_MAX_RANK];
    int64_t period[NNF_MAX_RANK];
    row_seg seg[ROW_SEGS];
    int nseg;
    bool segmented;
    bool stream; /* rows built in L1 and copied out by streaming stores */
} gm_run;

/* Rows of whole cache lines, 256 bytes up to this many, go out by streaming
 * stores when the output is that large (kernels/stream.h); a part line
 * written that way costs more than the read it saves. */
#define GM_STREAM_ROW 8192

static void gm_row_into(const gm_run *g, int64_t base, uint8_t *o) {
    const nnf_gather_map *m = g->m;
    int r = m->rank;
    size_t es = g->es;
    if (g->segmented) {
        for (int i = 0; i < g->nseg; i++) {
            const row_seg *sg = &g->seg[i];
            uint8_t *to = o + (size_t)sg->at * es;
            if (sg->fill)
                copy_strided(to, g->fill, sg->len, 0, es);
            else
                copy_strided(to, g->src + (base + sg->src) * (int64_t)es, sg->len, sg->step, es);
        }
        return;
    }
    const int64_t *imap = m->map[r - 1];
    for (int64_t j = 0; j < m->odims[r - 1]; j++) {
        int64_t v = imap[j];
        nnf_copy_elem(o + (size_t)j * es,
                      v < 0 ? g->fill : g->src + (size_t)(base + v * m->istride[r - 1]) * es, es);
    }
}

static void gm_row(const gm_run *g, int64_t base, uint8_t *o) {
    if (!g->stream) {
        gm_row_into(g, base, o);
        return;
    }
    _Alignas(64) uint8_t buf[GM_STREAM_ROW];
    gm_row_into(g, base, buf);
    nnf_stream_copy(o, buf, g->slice[g->m->rank - 2]);
}

/* The output block of axes k.. at o, its source at element base. Slices
 * that read what the slice before them read (a broadcast axis, a Pad's
 * edge) or what the slice one period back read (a Tile's repeat) are copies
 * of those slices' output, made in as few copies as do not overlap; when
 * the rows stream, whose lines are then not in the cache, they are built
 * again. */
static void gm_block(const gm_run *g, int k, int64_t base, uint8_t *o) {
    const nnf_gather_map *m = g->m;
    if (k == m->rank - 1) {
        gm_row(g, base, o);
        return;
    }
    const int64_t *map = m->map[k];
    size_t bytes = g->slice[k];
    int64_t p = g->period[k], n = m->odims[k];
    for (int64_t i = 0; i < n;) {
        uint8_t *to = o + (size_t)i * bytes;
        int64_t v = map[i], run = 1;
        if (v < 0) {
            copy_strided(to, g->fill, (int64_t)(bytes / g->es), 0, g->es);
        } else if (!g->stream && i > 0 && map[i - 1] == v) {
            /* the slice before, repeated: doubling copies of it */
            while (i + run < n && map[i + run] == v)
                run++;
            size_t have = bytes, left = (size_t)run * bytes;
            for (uint8_t *at = to; left;) {
                size_t c = have < left ? have : left;
                memcpy(at, to - bytes, c);
                at += c;
                left -= c;
                have += c;
            }
        } else if (!g->stream && p && i >= p && map[i - p] == v) {
            /* a period back: copies of at most a period each */
            while (i + run < n && map[i + run] >= 0 && map[i + run - p] == map[i + run])
                run++;
            size_t left = (size_t)run * bytes, per = (size_t)p * bytes;
            for (uint8_t *at = to; left;) {
                size_t c = per < left ? per : left;
                memcpy(at, at - per, c);
                at += c;
                left -= c;
            }
        } else {
            gm_block(g, k + 1, base + v * m->istride[k], to);
        }
        i += run;
    }
}

void nnf_gather_map_run(const nnf_gather_map *m, void *dst, const void *src, size_t es,
                        const void *fill) {
    int r = m->rank;
    if (r == 0) {
        memcpy(dst, src, es);
        return;
    }
    for (int k = 0; k < r; k++)
        if (m->odims[k] == 0)
            return;
    gm_run g = {.m = m, .src = src, .es = es, .fill = fill};
    g.segmented = row_segments(m->map[r - 1], m->odims[r - 1], m->istride[r - 1], g.seg, &g.nseg);
    size_t bytes = es;
    for (int k = r - 1; k >= 0; k--) {
        g.slice[k] = bytes; /* the output's size, which its buffer holds */
        bytes *= (size_t)m->odims[k];
        for (int64_t i = 1; i < m->odims[k] && !g.period[k]; i++)
            if (m->map[k][i] == m->map[k][0] && m->map[k][0] >= 0)
                g.period[k] = i;
    }
    size_t row = g.slice[r - 1] * (size_t)m->odims[r - 1];
    g.stream =
        r >= 2 && row % 64 == 0 && row >= 256 && row <= GM_STREAM_ROW && nnf_stream_output(bytes);
    gm_block(&g, 0, 0, dst);
    if (g.stream)
        nnf_stream_fence();
}

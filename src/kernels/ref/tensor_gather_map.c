/* The index-map gather engine shared by the data-movement reference kernels. */
#include "kernels/ref/tensor_ref.h"

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

/* len elements from src at a step of `step` elements (0: one repeated). */
static void copy_strided(uint8_t *o, const uint8_t *s, int64_t len, int64_t step, size_t es) {
    if (step == 1) {
        memcpy(o, s, (size_t)len * es);
    } else if (step == 0 && len * (int64_t)es >= 16 && 16 % es == 0) {
        /* a 16-byte pattern of the element, written in whole stores (a
         * constant-size copy the compiler makes one store) */
        uint8_t pat[16];
        for (size_t b = 0; b < 16; b += es)
            memcpy(pat + b, s, es);
        size_t bytes = (size_t)len * es, b = 0;
        for (; b + 16 <= bytes; b += 16)
            memcpy(o + b, pat, 16);
        for (; b < bytes; b += es)
            memcpy(o + b, pat, es);
    } else if (step == 0 && len > 1) {
        /* the element, then doubling copies of what is written */
        memcpy(o, s, es);
        for (int64_t done = 1; done < len;) {
            int64_t n = done < len - done ? done : len - done;
            memcpy(o + (size_t)done * es, o, (size_t)n * es);
            done += n;
        }
    } else if (es == 4) {
        uint32_t *d = (uint32_t *)(void *)o;
        for (int64_t i = 0; i < len; i++)
            memcpy(d + i, s + i * step * 4, 4);
    } else {
        for (int64_t i = 0; i < len; i++)
            nnf_copy_elem(o + (size_t)i * es, s + i * step * (int64_t)es, es);
    }
}

void nnf_gather_map_run(const nnf_gather_map *m, void *dst, const void *src, size_t es,
                        const void *fill) {
    int r = m->rank;
    uint8_t *o = dst;
    const uint8_t *s = src;
    if (r == 0) {
        memcpy(o, s, es);
        return;
    }
    for (int k = 0; k < r; k++)
        if (m->odims[k] == 0)
            return;
    int64_t inner = m->odims[r - 1], istr = m->istride[r - 1];
    const int64_t *imap = m->map[r - 1];
    row_seg seg[ROW_SEGS];
    int nseg = 0;
    bool segmented = row_segments(imap, inner, istr, seg, &nseg);
    int64_t idx[NNF_MAX_RANK] = {0};
    for (;;) {
        int64_t base = 0;
        bool border = false;
        for (int k = 0; k < r - 1; k++) {
            int64_t v = m->map[k][idx[k]];
            border |= v < 0;
            base += v * m->istride[k];
        }
        if (border) {
            for (int64_t j = 0; j < inner; j++)
                nnf_copy_elem(o + (size_t)j * es, fill, es);
        } else if (segmented) {
            for (int g = 0; g < nseg; g++) {
                uint8_t *to = o + (size_t)seg[g].at * es;
                if (seg[g].fill)
                    copy_strided(to, fill, seg[g].len, 0, es);
                else
                    copy_strided(to, s + (base + seg[g].src) * (int64_t)es, seg[g].len, seg[g].step,
                                 es);
            }
        } else {
            for (int64_t j = 0; j < inner; j++) {
                int64_t v = imap[j];
                nnf_copy_elem(o + (size_t)j * es, v < 0 ? fill : s + (size_t)(base + v * istr) * es,
                              es);
            }
        }
        o += (size_t)inner * es;
        int k = r - 2;
        while (k >= 0 && ++idx[k] == m->odims[k])
            idx[k--] = 0;
        if (k < 0)
            break;
    }
}

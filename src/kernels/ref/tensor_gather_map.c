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
    /* the longest run of the inner axis that reads consecutive elements (a
     * Pad's interior, a Slice's row) is one copy per row */
    int64_t run0 = 0, run = 0;
    for (int64_t j = 0; istr == 1 && j < inner;) {
        int64_t e = j + 1;
        while (imap[j] >= 0 && e < inner && imap[e] == imap[j] + (e - j))
            e++;
        if (imap[j] >= 0 && e - j > run) {
            run0 = j;
            run = e - j;
        }
        j = e;
    }
    bool contiguous = run == inner;
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
            for (int64_t j = 0; j < inner; j++, o += es)
                nnf_copy_elem(o, fill, es);
        } else if (contiguous) {
            memcpy(o, s + (size_t)(base + imap[0]) * es, (size_t)inner * es);
            o += (size_t)inner * es;
        } else {
            for (int64_t j = 0; j < inner; j++, o += es) {
                if (j == run0 && run > 1) {
                    memcpy(o, s + (size_t)(base + imap[j]) * es, (size_t)run * es);
                    o += (size_t)(run - 1) * es;
                    j += run - 1;
                    continue;
                }
                int64_t v = imap[j];
                if (v < 0)
                    nnf_copy_elem(o, fill, es);
                else
                    nnf_copy_elem(o, s + (size_t)(base + v * istr) * es, es);
            }
        }
        int k = r - 2;
        while (k >= 0 && ++idx[k] == m->odims[k])
            idx[k--] = 0;
        if (k < 0)
            break;
    }
}

#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

nnf_status nnf_file_map(const char *path, nnf_mapping **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return nnf_error(NNF_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return nnf_error(NNF_ERR_IO, "%s: not a regular file", path);
    }
    nnf_mapping *m = nnf_calloc(1, sizeof *m);
    char *p = nnf_strdup(path);
    if (!m || !p) {
        close(fd);
        nnf_free(m);
        nnf_free(p);
        return nnf_error(NNF_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    m->path = p;
    m->size = (size_t)st.st_size;
    if (m->size) {
        m->addr = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m->addr == MAP_FAILED) {
            int e = errno;
            close(fd);
            nnf_free(p);
            nnf_free(m);
            return nnf_error(NNF_ERR_IO, "%s: cannot map: %s", path, strerror(e));
        }
    }
    m->fd = fd;
    *out = m;
    return NNF_OK;
}

void nnf_mappings_close_files(nnf_mapping *m) {
    for (; m; m = m->next)
        if (m->fd >= 0) {
            close(m->fd);
            m->fd = -1;
        }
}

void nnf_mappings_free(nnf_mapping *m) {
    while (m) {
        nnf_mapping *n = m->next;
        if (m->addr)
            munmap(m->addr, m->size);
        if (m->fd >= 0)
            close(m->fd);
        nnf_free((void *)m->path);
        nnf_free(m);
        m = n;
    }
}

/* Read-only file mappings. */
#ifndef NNF_BASE_FILE_H
#define NNF_BASE_FILE_H

#include "ir/graph.h"

/* Map the whole file read-only. An empty file maps to addr NULL, size 0.
 * The file stays open (nnf_mapping.fd) until nnf_mappings_close_files or
 * nnf_mappings_free. NNF_ERR_IO with a message naming the path on failure. */
nnf_status nnf_file_map(const char *path, nnf_mapping **out);
/* Close the files of a whole list; their data stays mapped (a load reads
 * weights it copies from the files while it plans, then closes them, so a
 * model holds no descriptors). */
void nnf_mappings_close_files(nnf_mapping *list);
/* Unmap and free a whole list (NULL is fine). */
void nnf_mappings_free(nnf_mapping *list);

#endif

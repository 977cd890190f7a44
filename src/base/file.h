/* Read-only file mappings. */
#ifndef NNF_BASE_FILE_H
#define NNF_BASE_FILE_H

#include "ir/graph.h"

/* Map the whole file read-only. An empty file maps to addr NULL, size 0.
 * NNF_ERR_IO with a message naming the path on failure. */
nnf_status nnf_file_map(const char *path, nnf_mapping **out);
/* Unmap and free a whole list (NULL is fine). */
void nnf_mappings_free(nnf_mapping *list);

#endif

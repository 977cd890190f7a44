/* ONNX ModelProto → IR graph.
 *
 * The importer decodes the protobuf straight from the caller's buffer (usually
 * the memory-mapped .onnx file) and copies no weights it can avoid copying:
 * an initialiser's raw_data becomes a pointer into the buffer when it is
 * aligned to its element size, and external-data tensors point into a
 * read-only mapping of their file that the graph keeps (graph->mappings).
 *
 * It builds values, nodes, attributes and the declared types/shapes only. It
 * does not sort, verify, bind operators or infer shapes; the caller runs
 * nnf_graph_toposort / nnf_graph_verify / binding afterwards.
 *
 * Every error message starts with `source` and says what was wrong where; a
 * corrupt file yields NNF_ERR_INVALID_MODEL (via NNF_CORRUPT), a valid file
 * using something nnfuse lacks (sparse initialisers, string tensors, more
 * than NNF_MAX_RANK dims, ...) NNF_ERR_UNSUPPORTED. */
#ifndef NNF_ONNX_IMPORT_H
#define NNF_ONNX_IMPORT_H

#include "ir/graph.h"

/* data: borrowed for the lifetime of *graph_out (initialisers may point into
 *       it); size bytes long.
 * source: the file name used in messages; NULL means "<memory>".
 * base_dir: the folder external-data locations are relative to; NULL = the
 *       current directory. Locations that are absolute or contain a ".."
 *       component are rejected.
 * graph_out: set to a new graph owned by the caller (nnf_graph_destroy) on
 *       success, to NULL on failure. */
nnf_status nnf_onnx_import(const void *data, size_t size, const char *source, const char *base_dir,
                           nnf_graph **graph_out);

/* As nnf_onnx_import, for bytes in a private read-only file mapping the
 * caller owns (the whole file, or a compiled file's model): after copying a
 * tensor out of it the importer hands the pages back, so the file and the
 * copies are not both resident. packed_away (packed_away_bytes of
 * NUL-terminated names, or NULL): the initialisers a compiled file holds
 * packed, marked nnf_value.packed_away. */
nnf_status nnf_onnx_import_mapping(const void *data, size_t size, const char *source,
                                   const char *base_dir, const char *packed_away,
                                   size_t packed_away_bytes, nnf_graph **graph_out);

#endif

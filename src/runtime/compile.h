/* Compiled models (.nnf, format/nnf.h): what a file records about the
 * build, the CPU and the options it was compiled for, and `compile` itself.
 * A load replays a file's packed weights only where all of that matches the
 * process loading it; otherwise it plans from the file's ONNX model as a load
 * of the .onnx would (and says why). */
#ifndef NNF_RUNTIME_COMPILE_H
#define NNF_RUNTIME_COMPILE_H

#include "runtime/model.h"

/* The meta text for options o in this process (nnf_free it); NULL when out
 * of memory. An input shape it cannot record (a name with a line break, or
 * one the load refuses) is a line "shape ? INDEX". */
char *nnf_compile_meta(const nnf_model_options *o);
/* The input shapes a meta text records, for a load that fixes none: *shapes
 * and *n, kept in *own (nnf_free). */
nnf_status nnf_compile_meta_shapes(const char *meta, size_t bytes, const char *source,
                                   nnf_input_shape **shapes, size_t *n, void **own);
/* The first line where two meta texts differ, for messages ("cpu", "build",
 * ...): its key, at most `cap` bytes. */
void nnf_compile_meta_diff(const char *a, size_t na, const char *b, size_t nb, char *key,
                           size_t cap);
/* Loads path (an .onnx, or an .nnf's model) recording every packed block,
 * and writes the compiled file to out_path; *model_out (may be NULL) gets
 * the loaded model and *packed_bytes (may be NULL) the blocks' bytes (a
 * block nodes share counted once, as the file holds it), for reports. */
nnf_status nnf_compile(const char *path, const nnf_model_options *opts, const char *out_path,
                       nnf_model **model_out, size_t *packed_bytes);

#endif

/* libFuzzer harness for the ONNX importer and the graph checks that follow it.
 *
 * Build: cmake -S . -B build-fuzz -DNNF_FUZZ=ON -DCMAKE_C_COMPILER=clang
 *        cmake --build build-fuzz --target fuzz_onnx
 * Run:   build-fuzz/fuzz_onnx -max_len=65536 CORPUS_DIR   (seed it with small .onnx files)
 *
 * External-data locations resolve under a folder that does not exist, so a
 * fuzzed model cannot make the harness map arbitrary files of the host. */
#include "ir/graph.h"
#include "onnx/import.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    nnf_graph *g = NULL;
    if (nnf_onnx_import(data, size, "fuzz.onnx", "/nonexistent-nnf-fuzz", &g) != NNF_OK)
        return 0;
    if (nnf_graph_toposort(g) == NNF_OK)
        (void)nnf_graph_verify(g);
    nnf_graph_destroy(g);
    return 0;
}

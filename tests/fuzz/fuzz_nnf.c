/* libFuzzer harness for the compiled-model file's readers: the .nnf header,
 * meta data, names and block table (format/nnf.c) and the input shapes its
 * meta data records (runtime/compile.c). The whole load of mutated .nnf files
 * goes through scripts/hostile_check.sh; this one reaches every check of the
 * container itself.
 *
 * Build: cmake -S . -B build-fuzz -DNNF_FUZZ=ON -DCMAKE_C_COMPILER=clang
 *        cmake --build build-fuzz --target fuzz_nnf
 * Run:   build-fuzz/fuzz_nnf -max_len=65536 CORPUS_DIR   (seed it with small .nnf files:
 *        build/nnfuse compile tests/fuzz/seeds/cnn.onnx -o CORPUS_DIR/cnn.nnf) */
#include "base/alloc.h"
#include "format/nnf.h"
#include "runtime/compile.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a compiled file is read in place from a 64-byte aligned mapping */
    uint8_t *copy = aligned_alloc(64, (size + 64) / 64 * 64);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    nnf_compiled c;
    if (nnf_compiled_parse(copy, size, "fuzz.nnf", &c) == NNF_OK) {
        size_t sum = 0;
        for (size_t i = 0; i < c.n_blocks; i++) /* every block lies in the file */
            sum += ((const uint8_t *)c.blocks[i].data)[c.blocks[i].bytes - 1];
        for (size_t i = 0; i < c.names_bytes; i++)
            sum += (uint8_t)c.names[i];
        nnf_input_shape *shapes;
        size_t n;
        void *own;
        if (nnf_compile_meta_shapes(c.meta, c.meta_bytes, "fuzz.nnf", &shapes, &n, &own) ==
            NNF_OK) {
            for (size_t i = 0; i < n; i++)
                for (int d = 0; d < shapes[i].rank; d++)
                    sum += (size_t)shapes[i].dims[d] + strlen(shapes[i].name);
            nnf_free(own);
        }
        nnf_compiled_free(&c);
        if (sum == 1) /* keep the reads */
            copy[0] ^= 1;
    }
    free(copy);
    return 0;
}

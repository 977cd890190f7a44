# nnfuse — top-level entry points. CMake does the building underneath.
#   make          build library, command and tests into build/
#   make demo     build, generate the default model, run it, bench it against ONNX Runtime and OpenVINO
#   make test     build and run every test (C unit tests + Python suite)
BUILD ?= build
VENV ?= .venv
PY := $(VENV)/bin/python
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all build test test-avx512 demo deps venv clean asan zoo conformance format hostile python soak

all: build

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) > /dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Debian packages the tests need (ONNX node cases, Graphviz). Skipped when present.
deps:
	@bash scripts/install_deps.sh

venv: $(VENV)/.ok
$(VENV)/.ok: requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -r requirements.txt
	touch $@

test: deps venv
	@$(MAKE) --no-print-directory build CMAKE_FLAGS="-DNNF_WERROR=ON"
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	PY=$(PY) scripts/hostile_check.sh 250
	$(PY) -m pytest -q tests/py
	if grep -qw avx512f /proc/cpuinfo; then NNF_ISA=avx2 $(PY) -m pytest -q tests/py; fi
	NNF_ISA=scalar $(PY) -m pytest -q tests/py
	NNF_STREAM_BYTES=64 $(PY) -m pytest -q tests/py/test_ops_tensor.py tests/py/test_ops_nn.py tests/py/test_ops_elementwise.py
	@$(MAKE) --no-print-directory test-avx512

# The Python suite runs on every tier the CPU has: the default (the widest),
# then where the CPU has AVX-512 the AVX2 tier, and the portable scalar tier
# everywhere (the C tests force every tier themselves). The operator tests run
# once more with every output of 64 bytes and up written by streaming stores
# (kernels/stream.h; by default only outputs the size of the last-level cache). The AVX-512 tier's tests where the CPU has only AVX2: the
# *_avx512.c files built on SIMDe's AVX2 versions of the intrinsics, the tier
# reported as present, then the C tests (every tier up to AVX-512) and the
# Python suite (models against ONNX Runtime) on that build.
test-avx512: deps venv
	@$(MAKE) --no-print-directory build BUILD=build-avx512 CMAKE_FLAGS="-DNNF_WERROR=ON -DNNF_EMULATE_AVX512=ON"
	cd build-avx512 && ctest --output-on-failure -j $(JOBS)
	NNF_LIB=$(CURDIR)/build-avx512/libnnfuse.so NNF_BIN=$(CURDIR)/build-avx512/nnfuse $(PY) -m pytest -q tests/py

# Random shapes through the optimised kernels (GEMM, both conv families, the
# blocked depthwise/pool/reorder/resize kernels, the fused pointwise ->
# depthwise conv, element-wise/softmax/reduce/
# transpose/concat/slice/resize, layer/batch norm and NCHW pools) against
# their oracles, every tier, 1/2/3 threads bit for bit: SOAK cases per seed,
# for each of SEEDS.
# Minutes, not part of `make test`; run it after changing a kernel.
SOAK ?= 1000
SEEDS ?= 1 2 3
soak: build
	@for t in test_gemm test_conv_nchwc test_conv_fast test_nchwc test_pw_dw test_eltwise_fast test_norm_pool_fast; do for s in $(SEEDS); do \
		NNF_TEST_SOAK=$(SOAK) NNF_TEST_SEED=$$s $(BUILD)/$$t > $(BUILD)/soak_$${t}_$$s.log 2>&1; \
		rc=$$?; printf '%-20s seed %s: %s\n' $$t $$s "$$(grep '^soak:' $(BUILD)/soak_$${t}_$$s.log)"; \
		if [ $$rc -ne 0 ]; then tail -20 $(BUILD)/soak_$${t}_$$s.log; exit 1; fi; done; done

asan: venv
	@$(MAKE) --no-print-directory build BUILD=build-asan CMAKE_FLAGS="-DNNF_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug"

# The Python package, installed into the project venv with the library inside it.
python: venv build
	cp $(BUILD)/libnnfuse.so python/nnfuse/libnnfuse.so
	$(VENV)/bin/pip install -q ./python
	rm -f python/nnfuse/libnnfuse.so

# 250 mutated copies of each small zoo model through an ASan+UBSan build.
hostile: venv
	PY=$(PY) scripts/hostile_check.sh 250

zoo: venv
	$(PY) zoo/make_zoo.py --out zoo/models

demo: venv build
	$(PY) zoo/make_zoo.py --out zoo/models --only resnet50
	$(BUILD)/nnfuse info zoo/models/resnet50.onnx
	$(BUILD)/nnfuse run zoo/models/resnet50.onnx -o out/demo
	$(BUILD)/nnfuse compile zoo/models/resnet50.onnx -o out/demo/resnet50.nnf --verify
	$(PY) bench/compare.py --models resnet50 --threads 1 --iterations 10 --peers onnxruntime,openvino

conformance: venv build
	$(PY) tests/conformance/run.py --report out/conformance.json

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) build-asan build-avx512

"""nnfuse: Python bindings (ctypes) over the C library libnnfuse.so.

    import nnfuse, numpy as np
    sess = nnfuse.Session("model.onnx", threads=1)
    outputs = sess.run({"input": np.zeros((1, 3, 224, 224), np.float32)})

The library is found through $NNF_LIB, then the repository's build/ folder.
"""
import ctypes
import os
import pathlib

import numpy as np

__all__ = ["Model", "Session", "NnfError", "run_model", "compile"]

_DTYPES = {
    1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
    9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64,
}
_CODES = {np.dtype(v): k for k, v in _DTYPES.items()}


class NnfError(RuntimeError):
    """A failed nnfuse call: .status is the nnf_status code."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class _Tensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("data", ctypes.c_void_p)]


class _ValueInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("dims", ctypes.POINTER(ctypes.c_int64)), ("dim_names", ctypes.POINTER(ctypes.c_char_p))]


class _InputShape(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("rank", ctypes.c_int), ("dims", ctypes.POINTER(ctypes.c_int64))]


class _ModelOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("opt_level", ctypes.c_int),
                ("keep_unpacked_weights", ctypes.c_int), ("threads", ctypes.c_int),
                ("input_shapes", ctypes.POINTER(_InputShape)), ("n_input_shapes", ctypes.c_size_t),
                ("shape_plans", ctypes.c_int)]


class _SessionOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("threads", ctypes.c_int), ("profile", ctypes.c_int),
                ("dump_dir", ctypes.c_char_p), ("dump_filter", ctypes.c_char_p),
                ("reference_kernels", ctypes.c_int)]


def _find_library():
    env = os.environ.get("NNF_LIB")
    if env:
        return env
    here = pathlib.Path(__file__).resolve()
    for base in (here.parent, here.parents[2] / "build"):
        cand = base / "libnnfuse.so"
        if cand.exists():
            return str(cand)
    raise OSError("libnnfuse.so not found: build it with `make` or set NNF_LIB")


_lib = ctypes.CDLL(_find_library())
_lib.nnf_last_error.restype = ctypes.c_char_p
_lib.nnf_session_last_error.restype = ctypes.c_char_p
_lib.nnf_session_last_error.argtypes = [ctypes.c_void_p]
_lib.nnf_model_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(_ModelOptions), ctypes.POINTER(ctypes.c_void_p)]
_lib.nnf_model_load_buffer.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p,
                                       ctypes.POINTER(_ModelOptions), ctypes.POINTER(ctypes.c_void_p)]
_lib.nnf_model_destroy.argtypes = [ctypes.c_void_p]
_lib.nnf_model_compile.argtypes = [ctypes.c_char_p, ctypes.POINTER(_ModelOptions), ctypes.c_char_p]
_lib.nnf_model_options_default.restype = _ModelOptions
_lib.nnf_model_input_count.argtypes = [ctypes.c_void_p]
_lib.nnf_model_input_count.restype = ctypes.c_size_t
_lib.nnf_model_output_count.argtypes = [ctypes.c_void_p]
_lib.nnf_model_output_count.restype = ctypes.c_size_t
_lib.nnf_model_input_info.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(_ValueInfo)]
_lib.nnf_model_output_info.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(_ValueInfo)]
_lib.nnf_session_create.argtypes = [ctypes.c_void_p, ctypes.POINTER(_SessionOptions),
                                    ctypes.POINTER(ctypes.c_void_p)]
_lib.nnf_session_destroy.argtypes = [ctypes.c_void_p]
_lib.nnf_session_run.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Tensor), ctypes.c_size_t,
                                 ctypes.POINTER(ctypes.POINTER(_Tensor)), ctypes.POINTER(ctypes.c_size_t)]


def _check(status, message_fn):
    if status != 0:
        raise NnfError(status, message_fn().decode(errors="replace"))


def _info(fn, handle, i):
    vi = _ValueInfo()
    _check(fn(handle, i, ctypes.byref(vi)), _lib.nnf_last_error)
    shape = None
    if vi.rank >= 0:
        shape = []
        for d in range(vi.rank):
            if vi.dims[d] >= 0:
                shape.append(int(vi.dims[d]))
            else:
                name = vi.dim_names[d] if vi.dim_names else None
                shape.append(name.decode() if name else None)
    return {"name": vi.name.decode(), "dtype": _DTYPES.get(vi.dtype), "shape": shape}


def _model_options(opt_level=3, keep_unpacked_weights=False, threads=0, input_shapes=None,
                   shape_plans=None):
    """nnf_model_options, and the ctypes objects it points into (keep them alive with it)."""
    opts = _lib.nnf_model_options_default()
    opts.opt_level = opt_level
    opts.keep_unpacked_weights = 1 if keep_unpacked_weights else 0
    opts.threads = threads
    if shape_plans is not None:
        opts.shape_plans = shape_plans
    shapes = list((input_shapes or {}).items())
    keep = None
    if shapes:
        dims = [(ctypes.c_int64 * max(len(s), 1))(*[int(d) for d in s]) for _, s in shapes]
        entries = (_InputShape * len(shapes))(
            *[_InputShape(str(n).encode(), len(s), d) for (n, s), d in zip(shapes, dims)])
        opts.input_shapes = entries
        opts.n_input_shapes = len(shapes)
        keep = (dims, entries)
    return opts, keep


def compile(source, output, opt_level=3, input_shapes=None, threads=0):
    """Compile the ONNX model at path `source` into `output`, a .nnf file holding the model and
    its weights packed for this CPU (`nnfuse compile`): Model(output) then maps them instead of
    packing them. The file is for this build of nnfuse, this CPU and these options; elsewhere it
    loads as its ONNX model would, with a warning. input_shapes: {input name: shape} fixed in the
    file (a load of it that gives none uses these)."""
    opts, _keep = _model_options(opt_level, False, threads, input_shapes)
    _check(_lib.nnf_model_compile(os.fsencode(str(source)), ctypes.byref(opts), os.fsencode(str(output))),
           _lib.nnf_last_error)


class Model:
    """A loaded model (immutable; may be shared by sessions).

    input_shapes: {input name: shape} fixed at load for inputs with symbolic dims (as
    onnxruntime's free-dimension overrides): the graph passes and kernel plans then see concrete
    shapes, and runs with other shapes are refused.
    shape_plans: how many sets of input shapes a model with symbolic dims plans on their first
    run (None: the library's default, 4; 0: none, nodes waiting for shapes run on reference
    kernels)."""

    def __init__(self, source, opt_level=3, keep_unpacked_weights=False, threads=0, input_shapes=None,
                 shape_plans=None):
        opts, self._keep = _model_options(opt_level, keep_unpacked_weights, threads, input_shapes,
                                          shape_plans)
        self._handle = ctypes.c_void_p()
        self._buffer = None
        if isinstance(source, (bytes, bytearray)):
            # the library borrows the buffer for the model's lifetime; 64-byte aligned (a
            # compiled .nnf file's packed weights are read in place)
            self._buffer = ctypes.create_string_buffer(len(source) + 64)
            at = self._at = ctypes.addressof(self._buffer) + (-ctypes.addressof(self._buffer)) % 64
            ctypes.memmove(at, bytes(source), len(source))
            status = _lib.nnf_model_load_buffer(at, len(source), None, ctypes.byref(opts),
                                                ctypes.byref(self._handle))
        else:
            status = _lib.nnf_model_load(os.fsencode(str(source)), ctypes.byref(opts), ctypes.byref(self._handle))
        _check(status, _lib.nnf_last_error)
        self.inputs = [_info(_lib.nnf_model_input_info, self._handle, i)
                       for i in range(_lib.nnf_model_input_count(self._handle))]
        self.outputs = [_info(_lib.nnf_model_output_info, self._handle, i)
                        for i in range(_lib.nnf_model_output_count(self._handle))]

    def __del__(self):
        if getattr(self, "_handle", None):
            _lib.nnf_model_destroy(self._handle)
            self._handle = None


class Session:
    """One caller's execution state. `model` is a Model, a path, or ONNX bytes."""

    def __init__(self, model, threads=0, opt_level=3, reference_kernels=False, dump_dir=None, input_shapes=None,
                 shape_plans=None):
        self.model = model if isinstance(model, Model) else Model(model, opt_level=opt_level,
                                                                  keep_unpacked_weights=reference_kernels,
                                                                  threads=threads, input_shapes=input_shapes,
                                                                  shape_plans=shape_plans)
        self._dump = dump_dir.encode() if dump_dir else None
        opts = _SessionOptions(ctypes.sizeof(_SessionOptions), threads, 0, self._dump, None,
                               1 if reference_kernels else 0)
        self._handle = ctypes.c_void_p()
        _check(_lib.nnf_session_create(self.model._handle, ctypes.byref(opts), ctypes.byref(self._handle)),
               _lib.nnf_last_error)

    def run(self, feeds):
        """feeds: {input name: array}. Returns {output name: numpy array (a copy)}."""
        arrays, shapes = [], []
        tensors = (_Tensor * max(1, len(feeds)))()
        for i, (name, value) in enumerate(feeds.items()):
            a = np.asarray(value, order="C")  # ascontiguousarray would turn rank 0 into (1,)
            if a.dtype not in _CODES:
                raise TypeError(f"input '{name}': dtype {a.dtype} is not supported")
            shape = (ctypes.c_int64 * max(1, a.ndim))(*a.shape)
            arrays.append(a)
            shapes.append(shape)
            tensors[i] = _Tensor(name.encode(), _CODES[a.dtype], a.ndim, shape, a.ctypes.data)
        outs = ctypes.POINTER(_Tensor)()
        count = ctypes.c_size_t()
        status = _lib.nnf_session_run(self._handle, tensors, len(feeds), ctypes.byref(outs), ctypes.byref(count))
        _check(status, lambda: _lib.nnf_session_last_error(self._handle))
        result = {}
        for k in range(count.value):
            t = outs[k]
            shape = tuple(t.shape[d] for d in range(t.rank))
            dtype = np.dtype(_DTYPES[t.dtype])
            n = int(np.prod(shape, dtype=np.int64)) if shape else 1
            if n == 0:
                arr = np.zeros(shape, dtype)
            else:
                buf = (ctypes.c_char * (n * dtype.itemsize)).from_address(t.data)
                arr = np.frombuffer(buf, dtype=dtype, count=n).reshape(shape).copy()
            result[t.name.decode()] = arr
        return result

    def __del__(self):
        if getattr(self, "_handle", None):
            _lib.nnf_session_destroy(self._handle)
            self._handle = None


def run_model(model, feeds, **session_options):
    """Load `model` (path or ONNX bytes), run once on `feeds`, return the outputs."""
    return Session(model, **session_options).run(feeds)

#!/usr/bin/env python3
"""Write the nnfuse model zoo: ONNX files with the real architectures and the op
mix PyTorch's exporter emits, random but realistically scaled weights.

    zoo/make_zoo.py [--out DIR] [--only NAME[,NAME]] [--small] [--dynamic-batch]
                    [--bert-layernorm-op] [--bert-no-token-type] [--stats]

Models: resnet50, mobilenetv2, yolov5s, bert-base, albert-base (ALBERT: factorised
embeddings, one set of layer weights every layer reads), unet (segmentation: an
encoder, and a decoder that up-samples by ConvTranspose), efficientnet-b0 (MBConv
blocks with squeeze-and-excitation, SiLU, 5x5 depthwise convs), mobilenetv3-large
(HardSwish, squeeze-and-excitation with HardSigmoid), convnext-tiny (7x7 depthwise
convs, LayerNorm and MLPs between permutes, layer scale), resnext50 (ResNeXt-50 32x4d:
grouped 3x3 convs, 4 to 32 channels a group), vit-b16 (ViT-B/16: a patch conv and
nn.MultiheadAttention as torch exports it), gpt2 (GPT-2 small with its tied LM head: Conv1D
projections, a causal mask by Where, gelu_new), deeplabv3 (DeepLabV3-ResNet50: a dilated
backbone, ASPP at rates 12, 24, 36, bilinear Resize), whisper-base-encoder (Whisper-base's
audio encoder: Conv1d stem, attention over 1500 positions) and their test-sized variants
resnet_tiny, mobilenetv2_tiny, yolov5s_tiny, bert_tiny, albert_tiny, unet_tiny,
efficientnet_tiny, mobilenetv3_tiny, convnext_tiny, resnext_tiny, vit_tiny, gpt2_tiny,
deeplabv3_tiny, whisper_tiny (--small
selects only those). Everything is built with onnx.helper and numpy at opset
17 from fixed seeds: two runs on one machine write identical files (the BN
statistics go through onnxruntime, so another CPU may change their last bits).

Random weights need care: a comparison against an output that hardly depends
on the input proves nothing. So BatchNormalization statistics are calibrated
with onnxruntime to the activations the model really sees (then perturbed, so
that no BN is an identity), and every model is checked to give clearly
different outputs for two different inputs before it is written.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
INT64_MAX = 9223372036854775807


# --------------------------------------------------------------------------
# Graph builder
# --------------------------------------------------------------------------
@dataclass
class Builder:
    name: str
    seed: int
    batch: object = 1  # int, or "batch" for a symbolic dimension
    nodes: list = field(default_factory=list)
    inits: dict = field(default_factory=dict)
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    bns: list = field(default_factory=list)  # (node, x, mean_name, var_name)
    _counts: dict = field(default_factory=dict)

    def __post_init__(self):
        self.rng = np.random.default_rng(self.seed)

    def uniq(self, base: str) -> str:
        n = self._counts.get(base, 0)
        self._counts[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def init(self, name: str, arr: np.ndarray) -> str:
        name = self.uniq(name)
        self.inits[name] = np.asarray(arr, order="C")  # keeps 0-d scalars 0-d
        return name

    def const(self, value, dtype=np.float32, name="const") -> str:
        return self.init(name, np.asarray(value, dtype=dtype))

    def node(self, op: str, inputs, scope: str = "", n_out: int = 1, **attrs):
        nname = self.uniq(f"{scope}/{op}" if scope else f"/{op}")
        outs = [f"{nname}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=nname, **attrs))
        return outs[0] if n_out == 1 else outs

    def add_input(self, name, elem, dims):
        self.inputs.append(helper.make_tensor_value_info(name, elem, dims))
        return name

    def add_output(self, value, name, elem, dims):
        # Rename the producing node's output so the graph output has a clean name.
        for n in self.nodes:
            for i, o in enumerate(n.output):
                if o == value:
                    n.output[i] = name
            for i, x in enumerate(n.input):
                if x == value:
                    n.input[i] = name
        self.outputs.append(helper.make_tensor_value_info(name, elem, dims))
        return name

    # ---- weights -------------------------------------------------------
    def he_normal(self, shape, fan_in):
        return (self.rng.standard_normal(shape) * math.sqrt(2.0 / fan_in)).astype(np.float32)

    def torch_uniform(self, shape, fan_in):
        # nn.Linear / nn.Conv2d default bias and kaiming_uniform(a=sqrt(5)) bound
        b = 1.0 / math.sqrt(fan_in)
        return self.rng.uniform(-b, b, shape).astype(np.float32)

    def normal(self, shape, std):
        return (self.rng.standard_normal(shape) * std).astype(np.float32)

    # ---- layers --------------------------------------------------------
    def conv(self, x, cin, cout, k, s=1, p=None, g=1, bias=False, scope="", d=1):
        p = k // 2 * d if p is None else p
        fan_in = cin // g * k * k
        w = self.init(f"{scope}.weight", self.he_normal((cout, cin // g, k, k), fan_in))
        ins = [x, w]
        if bias:
            ins.append(self.init(f"{scope}.bias", self.torch_uniform((cout,), fan_in)))
        return self.node("Conv", ins, scope, dilations=[d, d], group=g,
                         kernel_shape=[k, k], pads=[p, p, p, p], strides=[s, s])

    def conv_transpose(self, x, cin, cout, k, s, scope=""):
        """nn.ConvTranspose2d(cin, cout, k, stride=s) with its bias; He-scaled so that each output,
        a sum of cin products where k == s, keeps the input's variance."""
        w = self.init(f"{scope}.weight", self.he_normal((cin, cout, k, k), cin))
        bias = self.init(f"{scope}.bias", self.torch_uniform((cout,), cout * k * k))
        return self.node("ConvTranspose", [x, w, bias], scope, dilations=[1, 1], group=1,
                         kernel_shape=[k, k], pads=[0, 0, 0, 0], strides=[s, s])

    def bn(self, x, c, scope="", gamma=(0.5, 1.5)):
        gm = self.init(f"{scope}.weight", self.rng.uniform(*gamma, c).astype(np.float32))
        bt = self.init(f"{scope}.bias", self.normal((c,), 0.1))
        mean = self.init(f"{scope}.running_mean", np.zeros(c, np.float32))
        var = self.init(f"{scope}.running_var", np.ones(c, np.float32))
        y = self.node("BatchNormalization", [x, gm, bt, mean, var], scope,
                      epsilon=1e-5, momentum=0.9)
        self.bns.append((x, mean, var))
        return y

    def layer_norm(self, x, width, scope, eps):
        """nn.LayerNorm over the last axis as opset 17 exports it: γ from [0.8, 1.2], β ~ N(0, 0.05)."""
        g = self.init(f"{scope}.weight", self.rng.uniform(0.8, 1.2, width).astype(np.float32))
        bb = self.init(f"{scope}.bias", self.normal((width,), 0.05))
        return self.node("LayerNormalization", [x, g, bb], scope, axis=-1, epsilon=eps)

    def linear_gemm(self, x, cin, cout, scope="", init="torch"):
        if init == "torch":
            w = self.torch_uniform((cout, cin), cin)
        else:
            w = self.normal((cout, cin), math.sqrt(2.0 / (cin + cout)))
        wn = self.init(f"{scope}.weight", w)
        bn = self.init(f"{scope}.bias", self.torch_uniform((cout,), cin))
        return self.node("Gemm", [x, wn, bn], scope, alpha=1.0, beta=1.0, transB=1)

    def shape_dim(self, x, idx, scope):
        """Shape -> Gather(idx) -> Unsqueeze: what the tracer emits for x.size(idx)."""
        sh = self.node("Shape", [x], scope)
        d = self.node("Gather", [sh, self.const(idx, np.int64, "gather_idx")], scope, axis=0)
        return self.node("Unsqueeze", [d, self.const([0], np.int64, "axes")], scope)

    def model(self) -> onnx.ModelProto:
        inits = [numpy_helper.from_array(v, k) for k, v in self.inits.items()]
        g = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, inits)
        m = helper.make_model(g, producer_name="nnfuse-zoo", producer_version="1",
                              opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = 8
        return m


# --------------------------------------------------------------------------
# ResNet-50 (torchvision v1.5: stride on the 3x3 conv)
# --------------------------------------------------------------------------
def build_resnet(b: Builder, size, widths, blocks, classes, groups=1, mid_mult=1):
    """ResNet's bottleneck blocks; ResNeXt's with groups > 1: the 3x3 conv grouped, the
    blocks' middle width mid_mult x theirs (torchvision's resnext50_32x4d: 32 groups, 2x)."""
    x = b.add_input("input", TensorProto.FLOAT, [b.batch, 3, size, size])
    y, cin = resnet_body(b, x, widths, blocks, groups, mid_mult)
    y = b.node("GlobalAveragePool", [y], "/avgpool")
    y = b.node("Flatten", [y], "", axis=1)
    y = b.linear_gemm(y, cin, classes, "/fc")
    b.add_output(y, "output", TensorProto.FLOAT, [b.batch, classes])


def resnet_body(b: Builder, x, widths, blocks, groups=1, mid_mult=1, dilate=(False,) * 4,
                scope=""):
    """The stem and the four layers; a layer with dilate set keeps its input's size and dilates
    its 3x3 convs instead (torchvision's replace_stride_with_dilation: the layer's first block at
    the dilation before it, the rest at twice that). Returns the features and their width."""
    y = b.conv(x, 3, widths[0], 7, 2, 3, scope=f"{scope}/conv1")
    y = b.bn(y, widths[0], f"{scope}/bn1")
    y = b.node("Relu", [y], f"{scope}/relu")
    y = b.node("MaxPool", [y], f"{scope}/maxpool", ceil_mode=0, kernel_shape=[3, 3],
               pads=[1, 1, 1, 1], strides=[2, 2])
    cin, dil = widths[0], 1
    for li, (w, n) in enumerate(zip(widths, blocks)):
        first_dil = dil
        if dilate[li]:
            dil *= 2
        for bi in range(n):
            s = 2 if (bi == 0 and li > 0 and not dilate[li]) else 1
            d = first_dil if bi == 0 else dil
            sc = f"{scope}/layer{li + 1}/{bi}"
            cout, mid = w * 4, w * mid_mult
            t = b.conv(y, cin, mid, 1, scope=f"{sc}/conv1")
            t = b.node("Relu", [b.bn(t, mid, f"{sc}/bn1")], sc)
            t = b.conv(t, mid, mid, 3, s, g=groups, scope=f"{sc}/conv2", d=d)
            t = b.node("Relu", [b.bn(t, mid, f"{sc}/bn2")], sc)
            t = b.conv(t, mid, cout, 1, scope=f"{sc}/conv3")
            t = b.bn(t, cout, f"{sc}/bn3", gamma=(0.2, 0.8))
            if bi == 0:
                idn = b.conv(y, cin, cout, 1, s, scope=f"{sc}/downsample/0")
                idn = b.bn(idn, cout, f"{sc}/downsample/1")
            else:
                idn = y
            y = b.node("Relu", [b.node("Add", [t, idn], sc)], sc)
            cin = cout
    return y, cin


# --------------------------------------------------------------------------
# DeepLabV3 (torchvision's deeplabv3_resnet50: a dilated ResNet-50, output stride 8, and ASPP)
# --------------------------------------------------------------------------
def build_deeplabv3(b: Builder, size, widths, blocks, rates, aspp, classes):
    x = b.add_input("input", TensorProto.FLOAT, [b.batch, 3, size, size])
    y, cin = resnet_body(b, x, widths, blocks, dilate=(False, False, True, True),
                         scope="/backbone")
    def cbr(t, ci, k, d, sc):
        t = b.conv(t, ci, aspp, k, scope=f"{sc}/0", d=d)
        return b.node("Relu", [b.bn(t, aspp, f"{sc}/1")], sc)

    def resize(t, n, hw, sc):
        # F.interpolate(size=..., mode="bilinear", align_corners=False) at opset 17
        if isinstance(b.batch, int):
            sizes = b.const([b.batch, n, hw, hw], np.int64, "sizes")
        else:
            sh = b.node("Shape", [t], sc, start=0, end=2)
            sizes = b.node("Concat", [sh, b.const([hw, hw], np.int64, "hw")], sc, axis=0)
        return b.node("Resize", [t, "", "", sizes], sc, cubic_coeff_a=-0.75, mode="linear",
                      coordinate_transformation_mode="pytorch_half_pixel", nearest_mode="floor")

    sc = "/classifier/0/convs"
    branches = [cbr(y, cin, 1, 1, f"{sc}/0")]
    for i, r in enumerate(rates):
        branches.append(cbr(y, cin, 3, r, f"{sc}/{i + 1}"))
    pool = b.node("GlobalAveragePool", [y], f"{sc}/4/0")
    pool = cbr(pool, cin, 1, 1, f"{sc}/4/1")
    branches.append(resize(pool, aspp, size // 8, f"{sc}/4"))
    y = b.node("Concat", branches, "/classifier/0", axis=1)
    y = cbr(y, aspp * len(branches), 1, 1, "/classifier/0/project")
    y = cbr(y, aspp, 3, 1, "/classifier/1")
    y = b.conv(y, aspp, classes, 1, bias=True, scope="/classifier/4")
    y = resize(y, classes, size, "")
    b.add_output(y, "out", TensorProto.FLOAT, [b.batch, classes, size, size])


# --------------------------------------------------------------------------
# MobileNetV2 (torchvision)
# --------------------------------------------------------------------------
def build_mobilenetv2(b: Builder, size, settings, first, last, classes):
    lo, hi = b.const(0.0, name="clip_min"), b.const(6.0, name="clip_max")

    def cbr(x, cin, cout, k, s, g, scope, act=True):
        y = b.bn(b.conv(x, cin, cout, k, s, g=g, scope=f"{scope}/0"), cout, f"{scope}/1")
        return b.node("Clip", [y, lo, hi], scope) if act else y

    x = b.add_input("input", TensorProto.FLOAT, [b.batch, 3, size, size])
    y = cbr(x, 3, first, 3, 2, 1, "/features/0")
    cin, idx = first, 1
    for t, c, n, s in settings:
        for i in range(n):
            stride = s if i == 0 else 1
            hid = cin * t
            sc = f"/features/{idx}/conv"
            h = y
            if t != 1:
                h = cbr(h, cin, hid, 1, 1, 1, f"{sc}/0")
            h = cbr(h, hid, hid, 3, stride, hid, f"{sc}/{1 if t != 1 else 0}")
            h = b.conv(h, hid, c, 1, scope=f"{sc}/pw")
            h = b.bn(h, c, f"{sc}/pw_bn", gamma=(0.3, 1.0))
            y = b.node("Add", [y, h], f"/features/{idx}") if (stride == 1 and cin == c) else h
            cin = c
            idx += 1
    y = cbr(y, cin, last, 1, 1, 1, f"/features/{idx}")
    y = b.node("GlobalAveragePool", [y], "/pool")
    # torchvision's `torch.flatten(x, 1)` exports as Flatten; a view() exports
    # as Reshape. Use Reshape here so both appear across the zoo (ResNet has Flatten).
    y = b.node("Reshape", [y, b.const([-1, last] if b.batch == 1 else [0, last], np.int64,
                                      "flat_shape")], "/flatten")
    y = b.linear_gemm(y, last, classes, "/classifier/1")
    b.add_output(y, "output", TensorProto.FLOAT, [b.batch, classes])


# --------------------------------------------------------------------------
# EfficientNet-B0 (torchvision): MBConv blocks with squeeze-and-excitation
# --------------------------------------------------------------------------
def build_efficientnet(b: Builder, size, stem, settings, head, classes):
    """settings: (expand ratio, kernel, stride, out channels, layers) per stage."""

    def silu(x, scope):
        return b.node("Mul", [x, b.node("Sigmoid", [x], scope)], scope)

    def cbs(x, cin, cout, k, s, g, scope, act=True):
        y = b.bn(b.conv(x, cin, cout, k, s, g=g, scope=f"{scope}/0"), cout, f"{scope}/1")
        return silu(y, scope) if act else y

    x = b.add_input("input", TensorProto.FLOAT, [b.batch, 3, size, size])
    y = cbs(x, 3, stem, 3, 2, 1, "/features/0/0")
    cin = stem
    for si, (t, k, s, c, n) in enumerate(settings):
        for i in range(n):
            stride = s if i == 0 else 1
            hid, sc, j = cin * t, f"/features/{si + 1}/{i}/block", 0
            h = y
            if t != 1:
                h = cbs(h, cin, hid, 1, 1, 1, f"{sc}/{j}")
                j += 1
            h = cbs(h, hid, hid, k, stride, hid, f"{sc}/{j}")
            # squeeze-and-excitation: a quarter of the block's input channels
            sq = max(1, cin // 4)
            g = b.node("GlobalAveragePool", [h], f"{sc}/{j + 1}/avgpool")
            g = silu(b.conv(g, hid, sq, 1, bias=True, scope=f"{sc}/{j + 1}/fc1"), f"{sc}/{j + 1}")
            g = b.conv(g, sq, hid, 1, bias=True, scope=f"{sc}/{j + 1}/fc2")
            h = b.node("Mul", [b.node("Sigmoid", [g], f"{sc}/{j + 1}/scale"), h], f"{sc}/{j + 1}")
            h = cbs(h, hid, c, 1, 1, 1, f"{sc}/{j + 2}", act=False)
            y = b.node("Add", [h, y], f"/features/{si + 1}/{i}") if (stride == 1 and cin == c) else h
            cin = c
    y = cbs(y, cin, head, 1, 1, 1, f"/features/{len(settings) + 1}")
    y = b.node("GlobalAveragePool", [y], "/avgpool")
    y = b.node("Flatten", [y], "/Flatten", axis=1)
    y = b.linear_gemm(y, head, classes, "/classifier/1")
    b.add_output(y, "output", TensorProto.FLOAT, [b.batch, classes])


# --------------------------------------------------------------------------
# MobileNetV3-Large (torchvision): HardSwish, and squeeze-and-excitation with HardSigmoid
# --------------------------------------------------------------------------
def _divisible8(v):
    """torchvision's _make_divisible(v, 8)."""
    n = max(8, int(v + 4) // 8 * 8)
    return n + 8 if n < 0.9 * v else n


def build_mobilenetv3(b: Builder, size, stem, settings, last, hidden, classes):
    """settings: (kernel, expanded channels, out channels, SE, "RE" or "HS", stride) per block."""

    def act(x, a, scope):
        return b.node("Relu", [x], scope) if a == "RE" else b.node("HardSwish", [x], scope)

    def cba(x, cin, cout, k, s, g, scope, a):
        y = b.bn(b.conv(x, cin, cout, k, s, g=g, scope=f"{scope}/0"), cout, f"{scope}/1")
        return act(y, a, scope) if a else y

    x = b.add_input("input", TensorProto.FLOAT, [b.batch, 3, size, size])
    y = cba(x, 3, stem, 3, 2, 1, "/features/0", "HS")
    cin = stem
    for i, (k, e, c, se, a, s) in enumerate(settings):
        sc, j, h = f"/features/{i + 1}/block", 0, y
        if e != cin:
            h = cba(h, cin, e, 1, 1, 1, f"{sc}/{j}", a)
            j += 1
        h = cba(h, e, e, k, s, e, f"{sc}/{j}", a)
        j += 1
        if se:
            sq = _divisible8(e // 4)
            g = b.node("GlobalAveragePool", [h], f"{sc}/{j}/avgpool")
            g = b.node("Relu", [b.conv(g, e, sq, 1, bias=True, scope=f"{sc}/{j}/fc1")], f"{sc}/{j}")
            g = b.conv(g, sq, e, 1, bias=True, scope=f"{sc}/{j}/fc2")
            g = b.node("HardSigmoid", [g], f"{sc}/{j}", alpha=1.0 / 6, beta=0.5)
            h = b.node("Mul", [g, h], f"{sc}/{j}")
            j += 1
        h = cba(h, e, c, 1, 1, 1, f"{sc}/{j}", None)
        y = b.node("Add", [h, y], f"/features/{i + 1}") if (s == 1 and cin == c) else h
        cin = c
    y = cba(y, cin, last, 1, 1, 1, f"/features/{len(settings) + 1}", "HS")
    y = b.node("GlobalAveragePool", [y], "/avgpool")
    y = b.node("Flatten", [y], "/Flatten", axis=1)
    y = b.node("HardSwish", [b.linear_gemm(y, last, hidden, "/classifier/0")], "/classifier/1")
    y = b.linear_gemm(y, hidden, classes, "/classifier/3")
    b.add_output(y, "output", TensorProto.FLOAT, [b.batch, classes])


# --------------------------------------------------------------------------
# ConvNeXt (torchvision): 7x7 depthwise, channels-last LayerNorm and MLP between two permutes,
# exact GELU, layer scale
# --------------------------------------------------------------------------
def build_convnext(b: Builder, size, dims, depths, classes):
    def layer_norm(x, c, scope):
        return b.layer_norm(x, c, scope, 1e-6)

    def norm2d(x, c, scope):
        """LayerNorm2d: the channels of each pixel normalised, between two permutes."""
        y = layer_norm(b.node("Transpose", [x], scope, perm=[0, 2, 3, 1]), c, scope)
        return b.node("Transpose", [y], scope, perm=[0, 3, 1, 2])

    def linear(x, cin, cout, scope):
        # nn.Linear on a 4-D input exports as MatMul with the transposed weight + Add
        w = b.init(f"{scope}.weight_T", b.torch_uniform((cin, cout), cin) * math.sqrt(3.0))
        return b.node("Add", [b.node("MatMul", [x, w], scope),
                              b.init(f"{scope}.bias", b.torch_uniform((cout,), cin))], scope)

    def gelu(x, scope):
        g = b.node("Erf", [b.node("Div", [x, b.const(1.4142135381698608, name="sqrt2")], scope)],
                   scope)
        g = b.node("Add", [g, b.const(1.0, name="one")], scope)
        return b.node("Mul", [b.node("Mul", [x, g], scope), b.const(0.5, name="half")], scope)

    x = b.add_input("input", TensorProto.FLOAT, [b.batch, 3, size, size])
    y = b.conv(x, 3, dims[0], 4, 4, p=0, bias=True, scope="/features/0/0")
    y = norm2d(y, dims[0], "/features/0/1")
    for si, (c, n) in enumerate(zip(dims, depths)):
        if si > 0:
            sc = f"/features/{2 * si}"
            y = norm2d(y, dims[si - 1], f"{sc}/0")
            y = b.conv(y, dims[si - 1], c, 2, 2, p=0, bias=True, scope=f"{sc}/1")
        for i in range(n):
            sc = f"/features/{2 * si + 1}/{i}/block"
            h = b.conv(y, c, c, 7, 1, p=3, g=c, bias=True, scope=f"{sc}/0")
            h = b.node("Transpose", [h], f"{sc}/1", perm=[0, 2, 3, 1])
            h = layer_norm(h, c, f"{sc}/2")
            h = gelu(linear(h, c, 4 * c, f"{sc}/3"), f"{sc}/4")
            h = linear(h, 4 * c, c, f"{sc}/5")
            h = b.node("Transpose", [h], f"{sc}/6", perm=[0, 3, 1, 2])
            # layer scale: trained values, not the 1e-6 of a fresh model
            ls = b.init(f"{sc}.layer_scale", b.rng.uniform(0.1, 0.5, (c, 1, 1)).astype(np.float32))
            y = b.node("Add", [b.node("Mul", [ls, h], sc), y], f"/features/{2 * si + 1}/{i}")
    y = b.node("GlobalAveragePool", [y], "/avgpool")
    y = norm2d(y, dims[-1], "/classifier/0")
    y = b.node("Flatten", [y], "/classifier/1", axis=1)
    y = b.linear_gemm(y, dims[-1], classes, "/classifier/2")
    b.add_output(y, "output", TensorProto.FLOAT, [b.batch, classes])


# --------------------------------------------------------------------------
# ViT-B/16 (torchvision vit_b_16: a 16x16/16 patch conv, a class token, pre-norm encoder
# blocks whose attention is nn.MultiheadAttention as torch exports it)
# --------------------------------------------------------------------------
def build_vit(b: Builder, size, patch, hidden, layers, heads, mlp, classes):
    dh = hidden // heads
    seq = (size // patch) ** 2 + 1

    def layer_norm(x, scope):
        return b.layer_norm(x, hidden, scope, 1e-6)

    def linear(x, cin, cout, scope):
        # nn.Linear on a 3-D input exports as MatMul with the transposed weight + Add
        w = b.init(f"{scope}.weight_T", b.normal((cin, cout), math.sqrt(2.0 / (cin + cout))))
        return b.node("Add", [b.node("MatMul", [x, w], scope),
                              b.init(f"{scope}.bias", b.normal((cout,), 0.02))], scope)

    def shape(dims):
        return b.const(dims, np.int64, "shape")

    def attention(x, scope):
        """F.multi_head_attention_forward (batch_first, need_weights=False): the packed
        in-projection split as proj.unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2)
        .squeeze(-2)[i], heads by view + transpose, scaled_dot_product_attention with the
        scale split over q and k, the out-projection on [S * B, E] as a Gemm."""
        q = b.node("Transpose", [x], scope, perm=[1, 0, 2])  # [S, B, E]
        proj = linear(q, hidden, 3 * hidden, f"{scope}/in_proj")
        proj = b.node("Reshape", [proj, shape([seq, -1, 3, hidden])], scope)
        proj = b.node("Unsqueeze", [proj, b.const([0], np.int64, "axes")], scope)
        proj = b.node("Transpose", [proj], scope, perm=[3, 1, 2, 0, 4])
        proj = b.node("Squeeze", [proj, b.const([-2], np.int64, "axes")], scope)
        qkv = []
        for i in range(3):
            t = b.node("Gather", [proj, b.const(i, np.int64, "gather_idx")], scope, axis=0)
            t = b.node("Reshape", [t, shape([seq, -1, dh])], scope)
            t = b.node("Transpose", [t], scope, perm=[1, 0, 2])  # [B * H, S, dh]
            qkv.append(b.node("Reshape", [t, shape([-1, heads, seq, dh])], scope))
        q, k, v = qkv
        s = b.const(1.0 / math.sqrt(math.sqrt(dh)), name="sdpa_scale")
        q = b.node("Mul", [q, s], scope)
        k = b.node("Mul", [b.node("Transpose", [k], scope, perm=[0, 1, 3, 2]), s], scope)
        p = b.node("Softmax", [b.node("MatMul", [q, k], scope)], scope, axis=-1)
        o = b.node("MatMul", [p, v], scope)  # [B, H, S, dh]
        o = b.node("Transpose", [o], scope, perm=[2, 0, 1, 3])
        o = b.node("Reshape", [o, shape([-1, hidden])], scope)
        o = b.linear_gemm(o, hidden, hidden, f"{scope}/out_proj", "xavier")
        o = b.node("Reshape", [o, shape([seq, -1, hidden])], scope)
        return b.node("Transpose", [o], scope, perm=[1, 0, 2])

    x = b.add_input("input", TensorProto.FLOAT, [b.batch, 3, size, size])
    y = b.conv(x, 3, hidden, patch, patch, p=0, bias=True, scope="/conv_proj")
    y = b.node("Reshape", [y, shape([0, hidden, -1])], "")
    y = b.node("Transpose", [y], "", perm=[0, 2, 1])
    cls = b.init("class_token", b.normal((1, 1, hidden), 0.02))
    n = b.shape_dim(y, 0, "")
    cls = b.node("Expand", [cls, b.node("Concat", [n, b.const([1, 1], np.int64, "shape")], "",
                                         axis=0)], "")
    y = b.node("Concat", [cls, y], "", axis=1)
    pos = b.init("encoder.pos_embedding", b.normal((1, seq, hidden), 0.02))
    y = b.node("Add", [y, pos], "/encoder")
    for li in range(layers):
        sc = f"/encoder/layers/encoder_layer_{li}"
        a = attention(layer_norm(y, f"{sc}/ln_1"), f"{sc}/self_attention")
        y = b.node("Add", [a, y], sc)
        h = linear(layer_norm(y, f"{sc}/ln_2"), hidden, mlp, f"{sc}/mlp/0")
        g = b.node("Erf", [b.node("Div", [h, b.const(1.4142135381698608, name="sqrt2")], sc)], sc)
        g = b.node("Add", [g, b.const(1.0, name="one")], sc)
        h = b.node("Mul", [b.node("Mul", [h, g], sc), b.const(0.5, name="half")], sc)
        y = b.node("Add", [y, linear(h, mlp, hidden, f"{sc}/mlp/3")], sc)
    y = layer_norm(y, "/encoder/ln")
    y = b.node("Gather", [y, b.const(0, np.int64, "first_token")], "", axis=1)
    y = b.linear_gemm(y, hidden, classes, "/heads/head")
    b.add_output(y, "output", TensorProto.FLOAT, [b.batch, classes])


# --------------------------------------------------------------------------
# GPT-2 (HF transformers' GPT2LMHeadModel as its ONNX export writes it)
# --------------------------------------------------------------------------
def build_gpt2(b: Builder, seq, hidden, layers, heads, vocab, max_pos):
    """HF's GPT2LMHeadModel: Conv1D projections (Reshape to 2-D, Gemm with the bias, Reshape
    back), a causal mask sliced from a [1, 1, max_pos, max_pos] buffer and applied by Where,
    gelu_new (the tanh GELU with Pow(x, 3)), pre-norm LayerNormalization, and the LM head tied to
    the token embedding (MatMul with its Transpose)."""
    dh = hidden // heads
    ids = b.add_input("input_ids", TensorProto.INT64, [b.batch, seq])
    wte = b.init("transformer.wte.weight", b.normal((vocab, hidden), 0.02))
    wpe = b.init("transformer.wpe.weight", b.normal((max_pos, hidden), 0.01))
    pos = b.const(np.arange(seq, dtype=np.int64)[None], np.int64, "pos")
    h = b.node("Add", [b.node("Gather", [wte, ids], "", axis=0),
                       b.node("Gather", [wpe, pos], "", axis=0)], "")
    bias = b.const(np.tril(np.ones((1, 1, max_pos, max_pos), bool)), np.bool_, "attn_bias")
    i64 = lambda v, name="shape": b.const(v, np.int64, name)  # noqa: E731

    def ln(x, sc):
        return b.layer_norm(x, hidden, sc, 1e-5)

    def conv1d(x, cin, cout, sc):
        w = b.init(f"{sc}.weight", b.normal((cin, cout), math.sqrt(2.0 / (cin + cout))))
        bi = b.init(f"{sc}.bias", b.normal((cout,), 0.02))
        y = b.node("Gemm", [b.node("Reshape", [x, i64([-1, cin])], sc), w, bi], sc, alpha=1.0,
                   beta=1.0)
        return b.node("Reshape", [y, i64([-1, seq, cout])], sc)

    def split_heads(t, perm, sc):
        return b.node("Transpose", [b.node("Reshape", [t, i64([-1, seq, heads, dh])], sc)], sc,
                      perm=perm)

    def scalar(v, name):
        return b.const(v, name=name)

    for li in range(layers):
        sc = f"/transformer/h.{li}"
        a = conv1d(ln(h, f"{sc}/ln_1"), hidden, 3 * hidden, f"{sc}/attn/c_attn")
        q, k, v = b.node("Split", [a, i64([hidden] * 3, "split")], sc, n_out=3, axis=2)
        q, k, v = (split_heads(q, [0, 2, 1, 3], sc), split_heads(k, [0, 2, 3, 1], sc),
                   split_heads(v, [0, 2, 1, 3], sc))
        w = b.node("Div", [b.node("MatMul", [q, k], sc), scalar(math.sqrt(dh), "sqrt_dh")], sc)
        m = b.node("Slice", [bias, i64([0, 0], "s"), i64([seq, seq], "e"), i64([2, 3], "ax")], sc)
        w = b.node("Where", [m, w, scalar(-3.4e38, "mask_value")], sc)
        o = b.node("MatMul", [b.node("Softmax", [w], sc, axis=-1), v], sc)
        o = b.node("Reshape", [b.node("Transpose", [o], sc, perm=[0, 2, 1, 3]),
                               i64([-1, seq, hidden])], sc)
        h = b.node("Add", [conv1d(o, hidden, hidden, f"{sc}/attn/c_proj"), h], sc)
        f = conv1d(ln(h, f"{sc}/ln_2"), hidden, 4 * hidden, f"{sc}/mlp/c_fc")
        # gelu_new: 0.5 * f * (1 + tanh(sqrt(2 / pi) * (f + 0.044715 * f^3)))
        c = b.node("Mul", [b.node("Pow", [f, scalar(3.0, "three")], sc), scalar(0.044715, "c")], sc)
        t = b.node("Tanh", [b.node("Mul", [b.node("Add", [f, c], sc),
                                           scalar(math.sqrt(2 / math.pi), "s2pi")], sc)], sc)
        g = b.node("Mul", [b.node("Mul", [f, scalar(0.5, "half")], sc),
                           b.node("Add", [t, scalar(1.0, "one")], sc)], sc)
        h = b.node("Add", [conv1d(g, 4 * hidden, hidden, f"{sc}/mlp/c_proj"), h], sc)
    h = ln(h, "/transformer/ln_f")
    h = b.node("MatMul", [h, b.node("Transpose", [wte], "/lm_head", perm=[1, 0])], "/lm_head")
    b.add_output(h, "logits", TensorProto.FLOAT, [b.batch, seq, vocab])


# --------------------------------------------------------------------------
# Whisper's audio encoder (HF transformers' WhisperEncoder as its ONNX export writes it)
# --------------------------------------------------------------------------
def build_whisper_encoder(b: Builder, frames, mels, hidden, layers, heads, ffn):
    """Two Conv1d with GELU over the log-mel frames (the second of stride 2), sinusoidal
    positions, pre-norm layers whose attention scales Q by dh^-0.5 (a Mul after q_proj; k_proj
    without bias) over all frames / 2 positions, and a final LayerNorm. Whisper-base: 80 mels
    x 3000 frames (30 s), width 512, 6 layers of 8 heads: attention over 1500 positions, whose
    scores are 72 MB a layer."""
    seq, dh = frames // 2, hidden // heads
    i64 = lambda v: b.const(v, np.int64, "shape")  # noqa: E731

    def conv1d(x, cin, cout, s, sc):
        w = b.init(f"{sc}.weight", b.he_normal((cout, cin, 3), cin * 3))
        bias = b.init(f"{sc}.bias", b.torch_uniform((cout,), cin * 3))
        return b.node("Conv", [x, w, bias], sc, dilations=[1], group=1, kernel_shape=[3],
                      pads=[1, 1], strides=[s])

    def gelu(x, sc):
        g = b.node("Erf", [b.node("Div", [x, b.const(1.4142135381698608, name="sqrt2")], sc)], sc)
        g = b.node("Add", [g, b.const(1.0, name="one")], sc)
        return b.node("Mul", [b.node("Mul", [x, g], sc), b.const(0.5, name="half")], sc)

    def linear(x, cin, cout, sc, bias=True):
        w = b.init(f"{sc}.weight_T", b.normal((cin, cout), math.sqrt(2.0 / (cin + cout))))
        y = b.node("MatMul", [x, w], sc)
        return b.node("Add", [y, b.init(f"{sc}.bias", b.normal((cout,), 0.02))], sc) if bias else y

    def heads_of(t, perm, sc):
        return b.node("Transpose", [b.node("Reshape", [t, i64([1, seq, heads, dh])], sc)], sc,
                      perm=perm)

    x = b.add_input("input_features", TensorProto.FLOAT, [1, mels, frames])
    x = gelu(conv1d(x, mels, hidden, 1, "/conv1"), "/conv1")
    x = gelu(conv1d(x, hidden, hidden, 2, "/conv2"), "/conv2")
    x = b.node("Transpose", [x], "", perm=[0, 2, 1])
    pos = np.arange(seq)[:, None] * np.exp(-math.log(10000) / (hidden // 2 - 1) *
                                           np.arange(hidden // 2))[None]
    pe = b.init("embed_positions.weight", np.concatenate([np.sin(pos), np.cos(pos)], 1)
                .astype(np.float32))
    h = b.node("Add", [x, pe], "")
    for li in range(layers):
        sc = f"/layers.{li}"
        a = b.layer_norm(h, hidden, f"{sc}/self_attn_layer_norm", 1e-5)
        q = b.node("Mul", [linear(a, hidden, hidden, f"{sc}/self_attn/q_proj"),
                           b.const(dh ** -0.5, name="scaling")], sc)
        q = heads_of(q, [0, 2, 1, 3], sc)
        k = heads_of(linear(a, hidden, hidden, f"{sc}/self_attn/k_proj", bias=False), [0, 2, 3, 1], sc)
        v = heads_of(linear(a, hidden, hidden, f"{sc}/self_attn/v_proj"), [0, 2, 1, 3], sc)
        p = b.node("Softmax", [b.node("MatMul", [q, k], sc)], sc, axis=-1)
        o = b.node("Transpose", [b.node("MatMul", [p, v], sc)], sc, perm=[0, 2, 1, 3])
        o = b.node("Reshape", [o, i64([1, seq, hidden])], sc)
        h = b.node("Add", [h, linear(o, hidden, hidden, f"{sc}/self_attn/out_proj")], sc)
        f = b.layer_norm(h, hidden, f"{sc}/final_layer_norm", 1e-5)
        f = linear(gelu(linear(f, hidden, ffn, f"{sc}/fc1"), sc), ffn, hidden, f"{sc}/fc2")
        h = b.node("Add", [h, f], sc)
    h = b.layer_norm(h, hidden, "/layer_norm", 1e-5)
    b.add_output(h, "last_hidden_state", TensorProto.FLOAT, [1, seq, hidden])


# --------------------------------------------------------------------------
# U-Net (milesial/Pytorch-UNet, bilinear=False: up-sampling by ConvTranspose 2x2 s2)
# --------------------------------------------------------------------------
def build_unet(b: Builder, size, widths, classes):
    def double(x, cin, cout, scope):
        y = b.node("Relu", [b.bn(b.conv(x, cin, cout, 3, scope=f"{scope}/0"), cout, f"{scope}/1")],
                   scope)
        return b.node("Relu", [b.bn(b.conv(y, cout, cout, 3, scope=f"{scope}/3"), cout,
                                    f"{scope}/4")], scope)

    x = b.add_input("input", TensorProto.FLOAT, [b.batch, 3, size, size])
    y = double(x, 3, widths[0], "/inc/double_conv")
    cin, skips = widths[0], []
    for i, w in enumerate(widths[1:]):
        skips.append((y, cin))
        y = b.node("MaxPool", [y], f"/down{i + 1}/maxpool_conv/0", kernel_shape=[2, 2],
                   strides=[2, 2])
        y = double(y, cin, w, f"/down{i + 1}/maxpool_conv/1/double_conv")
        cin = w
    for i, (skip, cs) in enumerate(reversed(skips)):
        sc = f"/up{i + 1}"
        up = b.conv_transpose(y, cin, cin // 2, 2, 2, scope=f"{sc}/up")
        y = b.node("Concat", [skip, up], sc, axis=1)
        y = double(y, cs + cin // 2, cs, f"{sc}/conv/double_conv")
        cin = cs
    y = b.conv(y, cin, classes, 1, p=0, bias=True, scope="/outc/conv")
    b.add_output(y, "output", TensorProto.FLOAT, [b.batch, classes, size, size])


# --------------------------------------------------------------------------
# YOLOv5s v6.0 (6x6 stem conv, C3, SPPF, Detect with grid/anchor arithmetic)
# --------------------------------------------------------------------------
ANCHORS = [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]]


def build_yolov5(b: Builder, size, width, depth3, classes=80):
    def ch(c):
        return max(8, int(c * width))

    def cbs(x, cin, cout, k, s, scope, p=None):
        y = b.bn(b.conv(x, cin, cout, k, s, p, scope=f"{scope}/conv"), cout, f"{scope}/bn")
        return b.node("Mul", [y, b.node("Sigmoid", [y], f"{scope}/act")], f"{scope}/act")

    def bottleneck(x, c, shortcut, scope):
        y = cbs(cbs(x, c, c, 1, 1, f"{scope}/cv1"), c, c, 3, 1, f"{scope}/cv2")
        return b.node("Add", [x, y], scope) if shortcut else y

    def c3(x, cin, cout, n, shortcut, scope):
        c_ = cout // 2
        a = cbs(x, cin, c_, 1, 1, f"{scope}/cv1")
        for i in range(n):
            a = bottleneck(a, c_, shortcut, f"{scope}/m/{i}")
        bb = cbs(x, cin, c_, 1, 1, f"{scope}/cv2")
        return cbs(b.node("Concat", [a, bb], scope, axis=1), 2 * c_, cout, 1, 1, f"{scope}/cv3")

    def sppf(x, cin, cout, scope):
        c_ = cin // 2
        x = cbs(x, cin, c_, 1, 1, f"{scope}/cv1")
        ys = [x]
        for _ in range(3):
            ys.append(b.node("MaxPool", [ys[-1]], f"{scope}/m", ceil_mode=0,
                             dilations=[1, 1], kernel_shape=[5, 5], pads=[2, 2, 2, 2],
                             strides=[1, 1]))
        return cbs(b.node("Concat", ys, scope, axis=1), c_ * 4, cout, 1, 1, f"{scope}/cv2")

    scales = b.const([1.0, 1.0, 2.0, 2.0], name="resize_scales")

    def upsample(x, scope):
        return b.node("Resize", [x, "", scales], scope, coordinate_transformation_mode="asymmetric",
                      cubic_coeff_a=-0.75, mode="nearest", nearest_mode="floor")

    x = b.add_input("images", TensorProto.FLOAT, [b.batch, 3, size, size])
    c = [ch(v) for v in (64, 128, 256, 512, 1024)]  # yolov5s.yaml before width_multiple
    n1, n2, n3 = depth3
    y0 = cbs(x, 3, c[0], 6, 2, "/model.0", p=2)
    y1 = cbs(y0, c[0], c[1], 3, 2, "/model.1")
    y2 = c3(y1, c[1], c[1], n1, True, "/model.2")
    y3 = cbs(y2, c[1], c[2], 3, 2, "/model.3")
    y4 = c3(y3, c[2], c[2], n2, True, "/model.4")
    y5 = cbs(y4, c[2], c[3], 3, 2, "/model.5")
    y6 = c3(y5, c[3], c[3], n3, True, "/model.6")
    y7 = cbs(y6, c[3], c[4], 3, 2, "/model.7")
    y8 = c3(y7, c[4], c[4], n1, True, "/model.8")
    y9 = sppf(y8, c[4], c[4], "/model.9")
    y10 = cbs(y9, c[4], c[3], 1, 1, "/model.10")
    y12 = b.node("Concat", [upsample(y10, "/model.11"), y6], "/model.12", axis=1)
    y13 = c3(y12, 2 * c[3], c[3], n1, False, "/model.13")
    y14 = cbs(y13, c[3], c[2], 1, 1, "/model.14")
    y16 = b.node("Concat", [upsample(y14, "/model.15"), y4], "/model.16", axis=1)
    y17 = c3(y16, 2 * c[2], c[2], n1, False, "/model.17")
    y18 = cbs(y17, c[2], c[2], 3, 2, "/model.18")
    y19 = b.node("Concat", [y18, y14], "/model.19", axis=1)
    y20 = c3(y19, 2 * c[2], c[3], n1, False, "/model.20")
    y21 = cbs(y20, c[3], c[3], 3, 2, "/model.21")
    y22 = b.node("Concat", [y21, y10], "/model.22", axis=1)
    y23 = c3(y22, 2 * c[3], c[4], n1, False, "/model.23")

    no, na = classes + 5, 3
    outs = []
    for i, (feat, cf, stride) in enumerate(((y17, c[2], 8), (y20, c[3], 16), (y23, c[4], 32))):
        sc = f"/model.24/m.{i}"
        ny = nx = size // stride
        # Detect's conv has a bias; its objectness/class bias is initialised
        # like YOLOv5's _initialize_biases so that sigmoid outputs are not all 0.5.
        p = b.conv(feat, cf, na * no, 1, bias=True, scope=sc)
        if b.batch == 1:
            shp = b.const([1, na, no, ny, nx], np.int64, "detect_shape")
        else:
            shp = b.node("Concat", [b.shape_dim(p, 0, sc), b.const([na, no, ny, nx], np.int64,
                                                                   "detect_dims")], sc, axis=0)
        p = b.node("Reshape", [p, shp], sc)
        p = b.node("Transpose", [p], sc, perm=[0, 1, 3, 4, 2])
        s = b.node("Sigmoid", [p], "/model.24")

        def sl(lo_, hi_):
            return b.node("Slice", [s, b.const([lo_], np.int64, "starts"),
                                    b.const([hi_], np.int64, "ends"),
                                    b.const([4], np.int64, "axes"),
                                    b.const([1], np.int64, "steps")], "/model.24")

        yv, xv = np.meshgrid(np.arange(ny, dtype=np.float32), np.arange(nx, dtype=np.float32),
                             indexing="ij")
        grid = np.broadcast_to(np.stack((xv, yv), 2)[None, None], (1, na, ny, nx, 2)) - 0.5
        anchors = np.asarray(ANCHORS[i], np.float32).reshape(1, na, 1, 1, 2)
        agrid = np.broadcast_to(anchors, (1, na, ny, nx, 2))
        xy = b.node("Mul", [sl(0, 2), b.const(2.0, name="two")], "/model.24")
        # v6.0 computes (xy*2 - 0.5 + grid); the exporter folds the -0.5 into
        # the grid constant only in later releases, so keep the Sub explicit.
        xy = b.node("Sub", [xy, b.const(0.5, name="half")], "/model.24")
        xy = b.node("Add", [xy, b.const(grid + 0.5, name=f"grid{i}")], "/model.24")
        xy = b.node("Mul", [xy, b.const(float(stride), name="stride")], "/model.24")
        wh = b.node("Mul", [sl(2, 4), b.const(2.0, name="two")], "/model.24")
        wh = b.node("Pow", [wh, b.const(2.0, name="pow2")], "/model.24")
        wh = b.node("Mul", [wh, b.const(agrid, name=f"anchor_grid{i}")], "/model.24")
        rest = sl(4, INT64_MAX)
        y = b.node("Concat", [xy, wh, rest], "/model.24", axis=-1)
        if b.batch == 1:
            shp = b.const([1, -1, no], np.int64, "out_shape")
        else:
            shp = b.node("Concat", [b.shape_dim(y, 0, "/model.24"),
                                    b.const([-1, no], np.int64, "out_dims")], "/model.24", axis=0)
        outs.append(b.node("Reshape", [y, shp], "/model.24"))
        # _initialize_biases: obj bias log(8/(640/s)^2), cls bias log(0.6/(nc-0.99))
        bv = b.inits[f"{sc}.bias"].reshape(na, no)
        bv[:, 4] += math.log(8 / (640 / stride) ** 2)
        bv[:, 5:] += math.log(0.6 / (classes - 0.99))
    total = sum(na * (size // s) ** 2 for s in (8, 16, 32))
    y = b.node("Concat", outs, "/model.24", axis=1)
    b.add_output(y, "output", TensorProto.FLOAT, [b.batch, total, no])


# --------------------------------------------------------------------------
# BERT-base (HuggingFace BertModel as torch.onnx.export writes it)
# --------------------------------------------------------------------------
def build_bert(b: Builder, seq, hidden, layers, heads, ffn, vocab, max_pos,
               layernorm_op=False, token_type_input=True, embed=None, shared=False):
    """BERT; with embed (E) and shared, ALBERT: embeddings of width E projected to the hidden
    width, and one set of layer weights that every layer reads (the exporter's unrolled layers
    all name the same initialisers)."""
    dh = hidden // heads
    std = 0.02
    bs = b.batch
    embed = embed or hidden
    made = {}

    def param(name, make):
        if name not in made:  # a shared layer's weights are made once
            made[name] = b.init(name, make())
        return made[name]

    ids = b.add_input("input_ids", TensorProto.INT64, [bs, seq])
    mask = b.add_input("attention_mask", TensorProto.INT64, [bs, seq])
    if token_type_input:
        tt = b.add_input("token_type_ids", TensorProto.INT64, [bs, seq])
    else:
        # HF falls back to a zero buffer expanded to input_ids' shape.
        tt = b.node("ConstantOfShape", [b.node("Shape", [ids], "/embeddings")], "/embeddings",
                    value=numpy_helper.from_array(np.zeros(1, np.int64)))

    def layer_norm(x, scope, wscope=None, width=hidden):
        wscope = wscope or scope
        g = param(f"{wscope}.weight", lambda: b.rng.uniform(0.8, 1.2, width).astype(np.float32))
        bb = param(f"{wscope}.bias", lambda: b.normal((width,), 0.05))
        if layernorm_op:
            return b.node("LayerNormalization", [x, g, bb], scope, axis=-1, epsilon=1e-12)
        m = b.node("ReduceMean", [x], scope, axes=[-1], keepdims=1)
        d = b.node("Sub", [x, m], scope)
        v = b.node("ReduceMean", [b.node("Pow", [d, b.const(2.0, name="pow2")], scope)], scope,
                   axes=[-1], keepdims=1)
        v = b.node("Sqrt", [b.node("Add", [v, b.const(1e-12, name="eps")], scope)], scope)
        y = b.node("Div", [d, v], scope)
        return b.node("Add", [b.node("Mul", [y, g], scope), bb], scope)

    def dense(x, cin, cout, scope, wscope=None):
        # nn.Linear on a 3-D input exports as MatMul with the transposed weight + Add
        wscope = wscope or scope
        w = param(f"{wscope}.weight_T", lambda: b.normal((cin, cout), math.sqrt(2.0 / (cin + cout))))
        bias = param(f"{wscope}.bias", lambda: b.normal((cout,), std))
        return b.node("Add", [b.node("MatMul", [x, w], scope), bias], scope)

    def split_heads(x, scope, perm):
        shp = b.node("Concat", [b.shape_dim(x, 0, scope), b.shape_dim(x, 1, scope),
                                b.const([heads], np.int64, "heads"),
                                b.const([dh], np.int64, "head_dim")], scope, axis=0)
        return b.node("Transpose", [b.node("Reshape", [x, shp], scope)], scope, perm=perm)

    sc = "/embeddings"
    we = b.init("embeddings.word_embeddings.weight", b.normal((vocab, embed), std))
    pe = b.init("embeddings.position_embeddings.weight", b.normal((max_pos, embed), std))
    te = b.init("embeddings.token_type_embeddings.weight", b.normal((2, embed), std))
    pos_buf = b.init("embeddings.position_ids", np.arange(max_pos, dtype=np.int64)[None])
    seq_len = b.shape_dim(ids, 1, sc)
    pos = b.node("Slice", [pos_buf, b.const([0], np.int64, "starts"), seq_len,
                           b.const([1], np.int64, "axes"), b.const([1], np.int64, "steps")], sc)
    e = b.node("Gather", [we, ids], sc, axis=0)
    e = b.node("Add", [e, b.node("Gather", [te, tt], sc, axis=0)], sc)
    e = b.node("Add", [e, b.node("Gather", [pe, pos], sc, axis=0)], sc)
    h = layer_norm(e, f"{sc}/LayerNorm", width=embed)
    if embed != hidden:
        h = dense(h, embed, hidden, "/encoder/embedding_hidden_mapping_in")

    # extended_attention_mask = (1.0 - mask[:, None, None, :].float()) * -10000.0
    sc = "/extended_mask"
    m = b.node("Unsqueeze", [mask, b.const([1], np.int64, "axes")], sc)
    m = b.node("Unsqueeze", [m, b.const([2], np.int64, "axes")], sc)
    m = b.node("Cast", [m], sc, to=TensorProto.FLOAT)
    m = b.node("Sub", [b.const(1.0, name="one"), m], sc)
    ext_mask = b.node("Mul", [m, b.const(-10000.0, name="neg_big")], sc)

    for li in range(layers):
        sc = f"/encoder/layer.{li}"
        ws = "/encoder/albert_layer_groups.0/albert_layers.0" if shared else sc

        def dense_l(x, cin, cout, part):
            return dense(x, cin, cout, f"{sc}/{part}", f"{ws}/{part}")

        q = split_heads(dense_l(h, hidden, hidden, "attention/self/query"), sc, [0, 2, 1, 3])
        k = split_heads(dense_l(h, hidden, hidden, "attention/self/key"), sc, [0, 2, 1, 3])
        v = split_heads(dense_l(h, hidden, hidden, "attention/self/value"), sc, [0, 2, 1, 3])
        kt = b.node("Transpose", [k], sc, perm=[0, 1, 3, 2])
        s = b.node("MatMul", [q, kt], sc)
        s = b.node("Div", [s, b.const(math.sqrt(dh), name="sqrt_dh")], sc)
        s = b.node("Add", [s, ext_mask], sc)
        p = b.node("Softmax", [s], sc, axis=-1)
        ctx = b.node("MatMul", [p, v], sc)
        ctx = b.node("Transpose", [ctx], sc, perm=[0, 2, 1, 3])
        shp = b.node("Concat", [b.shape_dim(ctx, 0, sc), b.shape_dim(ctx, 1, sc),
                                b.const([hidden], np.int64, "hidden")], sc, axis=0)
        ctx = b.node("Reshape", [ctx, shp], sc)
        a = dense_l(ctx, hidden, hidden, "attention/output/dense")
        h = layer_norm(b.node("Add", [a, h], sc), f"{sc}/attention/output/LayerNorm",
                       f"{ws}/attention/output/LayerNorm")
        f = dense_l(h, hidden, ffn, "intermediate/dense")
        # exact GELU: x * 0.5 * (1 + erf(x / sqrt(2)))
        g = b.node("Erf", [b.node("Div", [f, b.const(1.4142135381698608, name="sqrt2")], sc)], sc)
        g = b.node("Add", [g, b.const(1.0, name="one")], sc)
        g = b.node("Mul", [b.node("Mul", [f, g], sc), b.const(0.5, name="half")], sc)
        o = dense_l(g, ffn, hidden, "output/dense")
        h = layer_norm(b.node("Add", [o, h], sc), f"{sc}/output/LayerNorm", f"{ws}/output/LayerNorm")

    last = b.add_output(h, "last_hidden_state", TensorProto.FLOAT, [bs, seq, hidden])
    first = b.node("Gather", [last, b.const(0, np.int64, "first_token")], "/pooler", axis=1)
    pooled = b.node("Tanh", [b.linear_gemm(first, hidden, hidden, "/pooler/dense", "xavier")],
                    "/pooler")
    b.add_output(pooled, "pooler_output", TensorProto.FLOAT, [bs, hidden])


# --------------------------------------------------------------------------
# The suite
# --------------------------------------------------------------------------
MOBILENET_SETTINGS = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
                      [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]
MOBILENET_TINY = [[1, 8, 1, 1], [6, 8, 2, 2], [6, 16, 2, 2], [6, 24, 1, 1]]
EFFICIENTNET_B0 = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
                   (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]
EFFICIENTNET_TINY = [(1, 3, 1, 8, 1), (6, 5, 2, 12, 2), (6, 3, 2, 20, 1)]
MOBILENETV3_LARGE = [(3, 16, 16, 0, "RE", 1), (3, 64, 24, 0, "RE", 2), (3, 72, 24, 0, "RE", 1),
                     (5, 72, 40, 1, "RE", 2), (5, 120, 40, 1, "RE", 1), (5, 120, 40, 1, "RE", 1),
                     (3, 240, 80, 0, "HS", 2), (3, 200, 80, 0, "HS", 1), (3, 184, 80, 0, "HS", 1),
                     (3, 184, 80, 0, "HS", 1), (3, 480, 112, 1, "HS", 1), (3, 672, 112, 1, "HS", 1),
                     (5, 672, 160, 1, "HS", 2), (5, 960, 160, 1, "HS", 1), (5, 960, 160, 1, "HS", 1)]
MOBILENETV3_TINY = [(3, 8, 8, 1, "RE", 2), (5, 24, 12, 1, "HS", 2), (3, 36, 12, 0, "HS", 1)]


@dataclass
class Spec:
    name: str
    seed: int
    build: object  # callable(Builder, args)
    kind: str  # "image", "bert" or "audio"
    small: bool


def _bert(seq, hidden, layers, heads, ffn, vocab, max_pos, embed=None, shared=False):
    def f(b, a):
        build_bert(b, seq, hidden, layers, heads, ffn, vocab, max_pos,
                   layernorm_op=a.bert_layernorm_op, token_type_input=not a.bert_no_token_type,
                   embed=embed, shared=shared)
    return f


SPECS = [
    Spec("resnet50", 50, lambda b, a: build_resnet(b, 224, [64, 128, 256, 512], [3, 4, 6, 3],
                                                   1000), "image", False),
    Spec("mobilenetv2", 2, lambda b, a: build_mobilenetv2(b, 224, MOBILENET_SETTINGS, 32, 1280,
                                                          1000), "image", False),
    Spec("yolov5s", 5, lambda b, a: build_yolov5(b, 640, 0.5, (1, 2, 3)), "image", False),
    Spec("bert-base", 12, _bert(128, 768, 12, 12, 3072, 30522, 512), "bert", False),
    Spec("albert-base", 13, _bert(128, 768, 12, 12, 3072, 30000, 512, embed=128, shared=True),
         "bert", False),
    Spec("unet", 16, lambda b, a: build_unet(b, 256, [32, 64, 128, 256, 512], 2), "image", False),
    Spec("efficientnet-b0", 17, lambda b, a: build_efficientnet(b, 224, 32, EFFICIENTNET_B0, 1280,
                                                                1000), "image", False),
    Spec("mobilenetv3-large", 18, lambda b, a: build_mobilenetv3(b, 224, 16, MOBILENETV3_LARGE, 960,
                                                                 1280, 1000), "image", False),
    Spec("convnext-tiny", 19, lambda b, a: build_convnext(b, 224, [96, 192, 384, 768], [3, 3, 9, 3],
                                                          1000), "image", False),
    Spec("resnext50", 20, lambda b, a: build_resnet(b, 224, [64, 128, 256, 512], [3, 4, 6, 3],
                                                    1000, groups=32, mid_mult=2), "image", False),
    Spec("vit-b16", 21, lambda b, a: build_vit(b, 224, 16, 768, 12, 12, 3072, 1000), "image",
         False),
    Spec("gpt2", 22, lambda b, a: build_gpt2(b, 128, 768, 12, 12, 50257, 1024), "bert", False),
    Spec("deeplabv3", 23, lambda b, a: build_deeplabv3(b, 224, [64, 128, 256, 512], [3, 4, 6, 3],
                                                        (12, 24, 36), 256, 21), "image", False),
    Spec("whisper-base-encoder", 24, lambda b, a: build_whisper_encoder(b, 3000, 80, 512, 6, 8, 2048),
         "audio", False),
    Spec("resnet_tiny", 150, lambda b, a: build_resnet(b, 64, [8, 16, 32, 64], [2, 2, 1, 1], 10),
         "image", True),
    Spec("mobilenetv2_tiny", 102, lambda b, a: build_mobilenetv2(b, 64, MOBILENET_TINY, 8, 64,
                                                                 10), "image", True),
    Spec("yolov5s_tiny", 105, lambda b, a: build_yolov5(b, 128, 0.0625, (1, 1, 1)), "image", True),
    Spec("bert_tiny", 112, _bert(16, 64, 2, 4, 256, 512, 64), "bert", True),
    Spec("albert_tiny", 113, _bert(16, 64, 3, 4, 256, 512, 64, embed=32, shared=True), "bert",
         True),
    Spec("unet_tiny", 116, lambda b, a: build_unet(b, 32, [8, 16, 32], 2), "image", True),
    Spec("efficientnet_tiny", 117, lambda b, a: build_efficientnet(b, 64, 8, EFFICIENTNET_TINY, 32,
                                                                   10), "image", True),
    Spec("convnext_tiny", 119, lambda b, a: build_convnext(b, 64, [8, 16, 24, 32], [1, 1, 2, 1],
                                                           10), "image", True),
    Spec("resnext_tiny", 120, lambda b, a: build_resnet(b, 64, [8, 16, 32, 64], [2, 2, 1, 1], 10,
                                                        groups=4, mid_mult=2), "image", True),
    Spec("vit_tiny", 121, lambda b, a: build_vit(b, 32, 8, 32, 2, 4, 64, 10), "image", True),
    Spec("gpt2_tiny", 122, lambda b, a: build_gpt2(b, 16, 32, 2, 4, 512, 64), "bert", True),
    Spec("deeplabv3_tiny", 123, lambda b, a: build_deeplabv3(b, 64, [8, 16, 32, 64], [1, 1, 2, 2],
                                                             (2, 4, 12), 16, 3), "image", True),
    Spec("whisper_tiny", 124, lambda b, a: build_whisper_encoder(b, 64, 8, 32, 2, 4, 64), "audio",
         True),
    Spec("mobilenetv3_tiny", 118, lambda b, a: build_mobilenetv3(b, 64, 8, MOBILENETV3_TINY, 48, 64,
                                                                 10), "image", True),
]


def random_feeds(model: onnx.ModelProto, seed: int, batch: int = 1) -> dict:
    """Inputs like `nnfuse run` would get them: floats U[-1,1), token ids, a padded mask."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else batch
                for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            feeds[vi.name] = rng.uniform(-1, 1, dims).astype(np.float32)
        elif vi.name == "input_ids":
            vocab = next(i for i in model.graph.initializer  # BERT's, GPT-2's
                         if i.name in ("embeddings.word_embeddings.weight",
                                       "transformer.wte.weight")).dims[0]
            feeds[vi.name] = rng.integers(0, vocab, dims, dtype=np.int64)
        elif vi.name == "attention_mask":
            m = np.ones(dims, np.int64)
            m[..., dims[-1] - dims[-1] // 4:] = 0  # right padding, as a tokenizer writes it
            feeds[vi.name] = m
        elif vi.name == "token_type_ids":
            t = np.zeros(dims, np.int64)
            t[..., dims[-1] // 2:] = 1  # sentence pair
            feeds[vi.name] = t
        else:
            raise ValueError(f"no generator for input {vi.name}")
    return feeds


def ort_session(model: onnx.ModelProto, threads: int = 0):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def calibrate_bn(b: Builder, model: onnx.ModelProto, batch: int):
    """Set BN running stats to the per-channel statistics of the activations the
    model really produces (as after training), then perturb them a little so no
    BN is an exact normaliser. The statistics come from one onnxruntime run of a
    probe graph in which every BN normalises with its own batch statistics
    (training-mode BN spelled out in primitives): updating eval-mode BNs from
    each other's outputs instead diverges, because every layer's statistics
    shift as the ones upstream are fixed."""
    if not b.bns:
        return model
    rng = np.random.default_rng(b.seed + 1000)
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    axes = helper.make_tensor("axes", TensorProto.INT64, [3], [0, 2, 3])
    nodes = []
    for n in probe.graph.node:
        if n.op_type != "BatchNormalization":
            nodes.append(n)
            continue
        x, g, bt = n.input[0], n.input[1], n.input[2]
        t = n.name + "/probe"

        def mk(op, ins, suffix, **kw):
            nodes.append(helper.make_node(op, ins, [t + suffix], **kw))
            return t + suffix
        mu = mk("ReduceMean", [x], "/mu", axes=[0, 2, 3], keepdims=1)
        d = mk("Sub", [x, mu], "/d")
        var = mk("ReduceMean", [mk("Mul", [d, d], "/d2")], "/var", axes=[0, 2, 3], keepdims=1)
        sd = mk("Sqrt", [mk("Add", [var, "probe_eps"], "/veps")], "/sd")
        cshape = mk("Constant", [], "/cshape",
                    value=helper.make_tensor("v", TensorProto.INT64, [4], [1, -1, 1, 1]))
        gr = mk("Reshape", [g, cshape], "/g")
        br = mk("Reshape", [bt, cshape], "/b")
        y = mk("Mul", [mk("Div", [d, sd], "/n"), gr], "/y")
        nodes.append(helper.make_node("Add", [y, br], [n.output[0]]))
    del axes
    probe.graph.ClearField("node")
    probe.graph.node.extend(nodes)
    probe.graph.initializer.append(numpy_helper.from_array(np.float32(1e-5), "probe_eps"))
    have = {o.name for o in probe.graph.output}
    for x, _, _ in b.bns:
        if x not in have:
            probe.graph.output.append(helper.make_empty_tensor_value_info(x))
    names = [x for x, _, _ in b.bns]
    vals = ort_session(probe, threads=1).run(names, random_feeds(model, b.seed + 7, batch))
    for (x, mean, var), a in zip(b.bns, vals):
        a = a.astype(np.float64)
        mu = a.mean(axis=(0, 2, 3))
        va = a.var(axis=(0, 2, 3))
        c = mu.shape[0]
        b.inits[mean] = (mu + rng.uniform(-0.1, 0.1, c) * np.sqrt(va)).astype(np.float32)
        b.inits[var] = (va * rng.uniform(0.8, 1.25, c) + 1e-4).astype(np.float32)
    return b.model()


def check_varies(name: str, model: onnx.ModelProto, seed: int):
    """Two different inputs must give clearly different, finite outputs: the
    difference must be 100x the comparison tolerance of tests/py/test_zoo.py."""
    sess = ort_session(model)
    outs_a = sess.run(None, random_feeds(model, seed + 11))
    outs_b = sess.run(None, random_feeds(model, seed + 23))
    report = []
    for o, ya, yb in zip(model.graph.output, outs_a, outs_b):
        if not (np.all(np.isfinite(ya)) and np.all(np.isfinite(yb))):
            raise SystemExit(f"{name}: output {o.name} is not finite")
        scale = max(1.0, float(np.abs(ya).max()), float(np.abs(yb).max()))
        diff = float(np.abs(ya - yb).max())
        if diff < 1e-2 * scale:
            raise SystemExit(f"{name}: output {o.name} hardly depends on the input "
                             f"(max diff {diff:.3g}, scale {scale:.3g})")
        report.append((o.name, list(ya.shape), float(np.abs(ya).max()), diff))
    return report


# --------------------------------------------------------------------------
# Statistics for docs/ZOO.md
# --------------------------------------------------------------------------
def model_stats(model: onnx.ModelProto):
    """Parameters and multiply-add FLOPs (2 per MAC) of Conv, ConvTranspose, Gemm, MatMul."""
    params = sum(int(np.prod(i.dims)) for i in model.graph.initializer
                 if i.data_type == TensorProto.FLOAT)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    shapes = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + \
            list(inferred.graph.output):
        shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else 1
                           for d in vi.type.tensor_type.shape.dim]
    for i in model.graph.initializer:
        shapes[i.name] = list(i.dims)
    flops = 0
    for n in model.graph.node:
        if n.op_type == "Conv":
            out, w = shapes[n.output[0]], shapes[n.input[1]]
            flops += 2 * int(np.prod(out)) * int(np.prod(w[1:]))
        elif n.op_type == "ConvTranspose":  # every input value times every tap of its row of W
            x, w = shapes[n.input[0]], shapes[n.input[1]]
            flops += 2 * int(np.prod(x)) * int(np.prod(w[1:]))
        elif n.op_type == "Gemm":
            a, out = shapes[n.input[0]], shapes[n.output[0]]
            flops += 2 * int(np.prod(out)) * a[1]
        elif n.op_type == "MatMul":
            a, out = shapes[n.input[0]], shapes[n.output[0]]
            flops += 2 * int(np.prod(out)) * a[-1]
    return params, flops / 1e9, len(model.graph.node)


def build(spec: Spec, args) -> onnx.ModelProto:
    b = Builder(spec.name, spec.seed, "batch" if args.dynamic_batch else 1)
    spec.build(b, args)
    model = b.model()
    # Batch 2 when the batch is symbolic so that the statistics are per channel
    # over more than one image; the same data either way otherwise.
    model = calibrate_bn(b, model, batch=2 if args.dynamic_batch else 1)
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "models"))
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--small", action="store_true", help="only the *_tiny test models")
    ap.add_argument("--dynamic-batch", action="store_true",
                    help='make the batch dimension symbolic ("batch")')
    ap.add_argument("--bert-layernorm-op", action="store_true",
                    help="BERT LayerNorm as one LayerNormalization node (default: the "
                         "ReduceMean/Sub/Pow/Sqrt/Div chain of opset<17 exports)")
    ap.add_argument("--bert-no-token-type", action="store_true",
                    help="BERT without a token_type_ids input (zeros, as HF defaults)")
    ap.add_argument("--stats", action="store_true", help="print params and GFLOPs per model")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)

    names = {s.name for s in SPECS}
    only = [n for n in args.only.split(",") if n]
    for n in only:
        if n not in names:
            ap.error(f"unknown model {n!r}; known: {', '.join(sorted(names))}")
    specs = [s for s in SPECS if (not only or s.name in only) and (not args.small or s.small)]
    os.makedirs(args.out, exist_ok=True)
    for spec in specs:
        model = build(spec, args)
        report = check_varies(spec.name, model, spec.seed)
        path = os.path.join(args.out, spec.name + ".onnx")
        tmp = path + ".tmp"
        onnx.save(model, tmp)
        os.replace(tmp, path)  # readers of a cached zoo never see half a file
        if not args.quiet:
            outs = ", ".join(f"{n}{s} max|y|={m:.3g} diff={d:.3g}" for n, s, m, d in report)
            print(f"{path}: {len(model.graph.node)} nodes; {outs}")
        if args.stats:
            p, gf, nn = model_stats(model)
            print(f"  {spec.name}: params {p / 1e6:.3f} M, GFLOPs {gf:.3f}, nodes {nn}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Writes, with the `onnx` package and numpy only, the dynamic-int8 ONNX model that ONNX Runtime's
`quantize_dynamic(model, per_channel=True, weight_type=QuantType.QInt8)` writes (onnxruntime's Python
package is not installable here; its Node package runs the result), and reads back ORT's optimised
graph to check that the int8 MatMuls run fused (`DynamicQuantizeMatMul`). Used by
tools/compare/compare_engines.py.

Mirrored from onnxruntime/python/tools/quantization (quantize.py, onnx_quantizer.py,
base_quantizer.py, onnx_model.py, quant_utils.py, operators/matmul.py, operators/conv.py), with
quantize_dynamic's defaults: reduce_range False, WeightSymmetric from the int8 type (True),
MatMulConstBOnly True, op types = the IntegerOps registry (Conv, MatMul, Attention, LSTM, Gather,
Transpose, EmbedLayerNormalization):
- shape inference first (value_info kept), metadata onnx.infer = onnxruntime.quant; producer
  onnx.quantize 0.1.0; the opset stays (17 here: only opsets <= 10 and 4-bit / float8 weight types
  are raised); no com.microsoft import (every op written is ai.onnx); unused initializers dropped.
- Gemm with alpha = beta = 1 and transA = 0 becomes MatMul `<gemm>_MatMul` (output `<y>_MatMul`)
  + Add `<gemm>_Add` (output y), its initializer B transposed in place when transB = 1.
- MatMul whose B is an initializer: the activation through DynamicQuantizeLinear `<x>_QuantizeLinear`
  (uint8; outputs `<x>_quantized`, `<x>_scale`, `<x>_zero_point`; shared by the MatMuls reading x);
  B int8 symmetric per output column (axis -1): absmax over the column (with 0), scale =
  float32(float64(2 absmax) / 254) (1 when below float32's tiny), zero point 0, q = clip(round-half-
  even(float32 w / scale), -128, 127); initializers `<B>_quantized`, `<B>_scale` [N],
  `<B>_zero_point` [N] (int8). Nodes: MatMulInteger `<name>_quant` -> `<y>_output_quantized`, Cast
  to float `<y>_output_quantized_cast`, Mul of the two scales `<name>_quant_scales_mul` (output
  `...:0`), Mul `<name>_quant_output_scale_mul` writing y. MatMuls with two activations are left.
- Conv: ConvInteger the same way, but the weight per tensor (quantize_dynamic asks no per-channel
  for Conv); its bias through Reshape (unnamed, shape [1, -1, 1, ...]) and Add `<y>_bias_add`.
Not mirrored (NotImplementedError if met; none is in a torchvision ViT export): Attention, LSTM,
EmbedLayerNormalization, Gather of a float initializer, Transpose of an already quantized tensor,
non-initializer Conv weights, subgraphs. Node order differs (quantize_dynamic re-sorts its nodes
topologically; ours are in topological order already and ORT orders them on load anyway).
"""
import collections

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FUSED_OP = "DynamicQuantizeMatMul"
NOT_MIRRORED = ("Attention", "LSTM", "EmbedLayerNormalization")


def symmetric_int8(w, axis=None):
    """quant_utils.quantize_data for symmetric int8 (reduce_range False): (q int8, scale f32, zp int8)."""
    w = np.asarray(w, dtype=np.float32)
    flat = w.reshape(-1, 1) if axis is None else np.moveaxis(w, axis, -1).reshape(-1, w.shape[axis])  # (K, N)
    rmin = np.minimum(flat.min(axis=0), np.float32(0))
    rmax = np.maximum(flat.max(axis=0), np.float32(0))
    absmax = np.maximum(np.abs(rmin), np.abs(rmax))  # float32, as compute_scale_zp
    scale = (absmax - (-absmax)).astype(np.float64) / (127.0 - -127.0)
    tiny = scale < np.finfo(np.float32).tiny
    scale = np.where(tiny, 1.0, scale).astype(np.float32)
    q = np.clip(np.round(flat / scale), -128, 127).astype(np.int8)  # float32 division, half to even
    if axis is None:
        return q.reshape(w.shape), scale.reshape(()), np.zeros((), np.int8)
    moved = list(w.shape)
    moved.append(moved.pop(axis))
    return np.moveaxis(q.reshape(moved), -1, axis), scale, np.zeros(scale.shape, np.int8)


def gemm_to_matmul(graph):
    """onnx_model.replace_gemm_with_matmul (run by ONNXQuantizer in dynamic mode)."""
    inits = {t.name: t for t in graph.initializer}
    nodes = []
    for node in graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type != "Gemm" or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0 \
                or attrs.get("transA", 0) != 0:
            nodes.append(node)
            continue
        b = node.input[1]
        if attrs.get("transB", 0) == 1:
            if b not in inits:
                raise NotImplementedError(f"[ort_int8] Gemm {node.name}: transB on a non-initializer B")
            t = numpy_helper.from_array(numpy_helper.to_array(inits[b]).T)
            t.name = b
            graph.initializer.remove(inits[b])
            graph.initializer.append(t)
            inits[b] = t
        bias = len(node.input) > 2
        y = node.output[0] + ("_MatMul" if bias else "")
        nodes.append(helper.make_node("MatMul", [node.input[0], b], [y], node.name + "_MatMul" if node.name else ""))
        if bias:
            nodes.append(helper.make_node("Add", [y, node.input[2]], list(node.output),
                                          node.name + "_Add" if node.name else ""))
    graph.ClearField("node")
    graph.node.extend(nodes)


class _Quantizer:
    """ONNXQuantizer(mode IntegerOps, static False) over one graph without subgraphs."""

    def __init__(self, model):
        self.graph = model.graph
        self.inits = {t.name: t for t in self.graph.initializer}
        self.types = {v.name: v.type.tensor_type.elem_type
                      for v in [*self.graph.value_info, *self.graph.output, *self.graph.input]}
        self.quantized = {}  # original name -> (quantized name, scale name, zero-point name)
        self.nodes = []
        self.counts = collections.Counter()

    def is_float(self, name):
        if name in self.inits:
            return self.inits[name].data_type in (TensorProto.FLOAT, TensorProto.FLOAT16)
        return self.types.get(name) in (TensorProto.FLOAT, TensorProto.FLOAT16)

    def activation(self, x):
        if x not in self.quantized:
            if x in self.inits:
                raise NotImplementedError(f"[ort_int8] {x}: an initializer as the activation input")
            out = [x + "_quantized", x + "_scale", x + "_zero_point"]
            self.nodes.append(helper.make_node("DynamicQuantizeLinear", [x], out, x + "_QuantizeLinear"))
            self.quantized[x] = tuple(out)
        return self.quantized[x]

    def weight(self, name, per_channel):
        if name not in self.quantized:
            if name not in self.inits:
                raise NotImplementedError(f"[ort_int8] {name}: a weight that is not an initializer")
            init = self.inits[name]
            q, scale, zp = symmetric_int8(numpy_helper.to_array(init), -1 if per_channel else None)
            shape = list(scale.shape)
            self.graph.initializer.extend([
                helper.make_tensor(name + "_scale", init.data_type, shape, scale.reshape(-1).tolist()),
                helper.make_tensor(name + "_zero_point", TensorProto.INT8, shape, zp.reshape(-1).tolist()),
                numpy_helper.from_array(q, name + "_quantized")])
            self.quantized[name] = (name + "_quantized", name + "_scale", name + "_zero_point")
        return self.quantized[name]

    def integer_op(self, node, op, per_channel, out, **attrs):
        """<op>Integer + Cast + Mul(scales) + Mul, as operators/matmul.py and operators/conv.py write them."""
        xq, xs, xz = self.activation(node.input[0])
        wq, ws, wz = self.weight(node.input[1], per_channel)
        name = node.name + "_quant" if node.name else ""
        y = node.output[0] + "_output_quantized"
        self.nodes.append(helper.make_node(op, [xq, wq, xz, wz], [y], name, **attrs))
        self.nodes.append(helper.make_node("Cast", [y], [y + "_cast_output"], y + "_cast",
                                           to=self.types.get(node.output[0], TensorProto.FLOAT)))
        mul = name + "_scales_mul" if name else f"{xs}_{ws}_mul"
        self.nodes.append(helper.make_node("Mul", [xs, ws], [mul + ":0"], mul))
        self.nodes.append(helper.make_node("Mul", [y + "_cast_output", mul + ":0"], [out],
                                           name + "_output_scale_mul" if name else ""))
        self.counts[op] += 1

    def conv(self, node):
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        bias = len(node.input) == 3
        y = node.output[0]
        self.integer_op(node, "ConvInteger", False, y + "quant_scaled_output" if bias else y, **attrs)
        if bias:
            rank = len(self.inits[node.input[1]].dims)
            shape = np.ones(rank, dtype=np.int64)
            shape[1] = -1
            self.graph.initializer.append(helper.make_tensor(y + "_bias_reshape_shape", TensorProto.INT64,
                                                             [rank], shape))
            self.nodes.append(helper.make_node("Reshape", [node.input[2], y + "_bias_reshape_shape"],
                                               [y + "_bias_reshape_output"]))
            self.nodes.append(helper.make_node("Add", [y + "quant_scaled_output", y + "_bias_reshape_output"], [y],
                                               y + "_bias_add"))

    def run(self):
        for node in self.graph.node:
            op = node.op_type
            if op in NOT_MIRRORED or (op == "Gather" and self.is_float(node.input[0]) and node.input[0] in self.inits) \
                    or (op == "Transpose" and node.input[0] in self.quantized):
                raise NotImplementedError(f"[ort_int8] {op} {node.name}: quantize_dynamic would quantize it; "
                                          "not mirrored here")
            if op == "MatMul" and (self.is_float(node.input[0]) or self.is_float(node.input[1])) \
                    and node.input[1] in self.inits:
                self.integer_op(node, "MatMulInteger", True, node.output[0])
            elif op == "Conv" and self.is_float(node.input[0]):
                self.conv(node)
            else:
                self.nodes.append(node)
        self.graph.ClearField("node")
        self.graph.node.extend(self.nodes)
        used = {i for n in self.graph.node for i in n.input} | {o.name for o in self.graph.output}
        for init in [t for t in self.graph.initializer if t.name not in used]:
            self.graph.initializer.remove(init)
        for value in [v for v in self.graph.input if v.name in self.inits and v.name not in used]:
            self.graph.input.remove(value)


def quantize_dynamic_int8(src, dst):
    """Writes dst from the fp32 ONNX file src; returns the counts of the integer ops written."""
    model = onnx.shape_inference.infer_shapes(onnx.load(src))
    props = {"onnx.infer": "onnxruntime.quant", **{p.key: p.value for p in model.metadata_props}}
    helper.set_model_props(model, props)
    gemm_to_matmul(model.graph)
    model = onnx.shape_inference.infer_shapes(model)
    quantizer = _Quantizer(model)
    quantizer.run()
    model.producer_name, model.producer_version = "onnx.quantize", "0.1.0"
    onnx.save(model, dst)
    return quantizer.counts


def op_counts(path):
    """Op types of an ONNX file (ORT's optimised graph: what ran fused)."""
    return collections.Counter(node.op_type for node in onnx.load(path).graph.node)

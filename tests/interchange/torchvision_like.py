"""Builds torchvision-style ResNet ONNX graphs and state_dict safetensors
files from numpy weights, without PyTorch: node and initializer names as
torch.onnx.export writes them (so import cannot rely on stoke's names), batch
norm kept or folded into the convolutions as the exporter does in eval mode."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from safetensors_np import save_safetensors  # noqa: F401 (re-exported)

BLOCKS = {"resnet18": (2, 2, 2, 2), "resnet34": (3, 4, 6, 3), "resnet50": (3, 4, 6, 3)}


def make_state_dict(arch, width, channels, classes, rng):
    """torchvision's state_dict for resnetXX(num_classes=classes) at a width multiplier."""
    sd = {}
    base = max(1, round(64 * width))

    def conv(name, o, i, k):
        sd[name + ".weight"] = (rng.standard_normal((o, i, k, k)) * np.sqrt(2.0 / (i * k * k))).astype(np.float32)

    def bn(name, c):
        sd[name + ".weight"] = rng.uniform(0.5, 1.5, c).astype(np.float32)
        sd[name + ".bias"] = rng.uniform(-0.2, 0.2, c).astype(np.float32)
        sd[name + ".running_mean"] = rng.uniform(-0.2, 0.2, c).astype(np.float32)
        sd[name + ".running_var"] = rng.uniform(0.5, 1.5, c).astype(np.float32)
        sd[name + ".num_batches_tracked"] = np.array(7, dtype=np.int64)

    conv("conv1", base, channels, 7)
    bn("bn1", base)
    inp = base
    bottleneck = arch == "resnet50"
    for s, nblocks in enumerate(BLOCKS[arch]):
        planes = base << s
        out = planes * 4 if bottleneck else planes
        for b in range(nblocks):
            p = f"layer{s + 1}.{b}"
            stride = 2 if b == 0 and s > 0 else 1
            if bottleneck:
                conv(p + ".conv1", planes, inp, 1); bn(p + ".bn1", planes)
                conv(p + ".conv2", planes, planes, 3); bn(p + ".bn2", planes)
                conv(p + ".conv3", out, planes, 1); bn(p + ".bn3", out)
            else:
                conv(p + ".conv1", planes, inp, 3); bn(p + ".bn1", planes)
                conv(p + ".conv2", planes, planes, 3); bn(p + ".bn2", planes)
            if stride != 1 or inp != out:
                conv(p + ".downsample.0", out, inp, 1); bn(p + ".downsample.1", out)
            inp = out
    sd["fc.weight"] = (rng.standard_normal((classes, inp)) / np.sqrt(inp)).astype(np.float32)
    sd["fc.bias"] = rng.uniform(-0.1, 0.1, classes).astype(np.float32)
    return sd


class Graph:
    def __init__(self, sd, fold, counter_start=190):
        self.sd, self.fold, self.nodes, self.inits, self.n = sd, fold, [], [], counter_start

    def init(self, array, kind):
        self.n += 1  # exporter-style anonymous names: onnx::Conv_191
        name = f"onnx::{kind}_{self.n}"
        self.inits.append(numpy_helper.from_array(np.asarray(array, dtype=np.float32), name))
        return name

    def node(self, op, inputs, scope, **attrs):
        out = f"{scope}/{op}_output_0"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"{scope}/{op}", **attrs))
        return out

    def conv_bn(self, x, conv, bn, stride, pad, scope):
        w = self.sd[conv + ".weight"]
        k = w.shape[2]
        attrs = dict(kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, dilations=[1, 1], group=1)
        if self.fold:
            g, b = self.sd[bn + ".weight"], self.sd[bn + ".bias"]
            m, v = self.sd[bn + ".running_mean"], self.sd[bn + ".running_var"]
            s = g / np.sqrt(v.astype(np.float64) + 1e-5)
            wf = (w * s[:, None, None, None]).astype(np.float32)
            bf = (b - m * s).astype(np.float32)
            return self.node("Conv", [x, self.init(wf, "Conv"), self.init(bf, "Conv")], scope + "/conv", **attrs)
        y = self.node("Conv", [x, self.init(w, "Conv")], scope + "/conv", **attrs)
        ins = [y] + [self.init(self.sd[bn + s], "BatchNormalization")
                     for s in (".weight", ".bias", ".running_mean", ".running_var")]
        return self.node("BatchNormalization", ins, scope + "/bn", epsilon=1e-5, momentum=0.9)


def make_onnx(sd, arch, channels, size, fold):
    g = Graph(sd, fold)
    x = g.conv_bn("input.1", "conv1", "bn1", 2, 3, "/conv1")
    x = g.node("Relu", [x], "/relu")
    x = g.node("MaxPool", [x], "/maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=0)
    bottleneck = arch == "resnet50"
    for s, nblocks in enumerate(BLOCKS[arch]):
        for b in range(nblocks):
            p, scope = f"layer{s + 1}.{b}", f"/layer{s + 1}/layer{s + 1}.{b}"
            stride = 2 if b == 0 and s > 0 else 1
            if bottleneck:
                y = g.node("Relu", [g.conv_bn(x, p + ".conv1", p + ".bn1", 1, 0, scope + "/c1")], scope + "/r1")
                y = g.node("Relu", [g.conv_bn(y, p + ".conv2", p + ".bn2", stride, 1, scope + "/c2")], scope + "/r2")
                y = g.conv_bn(y, p + ".conv3", p + ".bn3", 1, 0, scope + "/c3")
            else:
                y = g.node("Relu", [g.conv_bn(x, p + ".conv1", p + ".bn1", stride, 1, scope + "/c1")], scope + "/r1")
                y = g.conv_bn(y, p + ".conv2", p + ".bn2", 1, 1, scope + "/c2")
            short = x
            if p + ".downsample.0.weight" in sd:
                short = g.conv_bn(x, p + ".downsample.0", p + ".downsample.1", stride, 0, scope + "/downsample")
            x = g.node("Relu", [g.node("Add", [y, short], scope)], scope + "/out")
    x = g.node("GlobalAveragePool", [x], "/avgpool")
    x = g.node("Flatten", [x], "/flatten", axis=1)
    g.nodes.append(helper.make_node("Gemm", [x, g.init(sd["fc.weight"], "Gemm"), g.init(sd["fc.bias"], "Gemm")],
                                    ["191"], name="/fc/Gemm", alpha=1.0, beta=1.0, transB=1))
    classes = sd["fc.weight"].shape[0]
    graph = helper.make_graph(
        g.nodes, "main_graph",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["batch", channels, size, size])],
        [helper.make_tensor_value_info("191", TensorProto.FLOAT, ["batch", classes])], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="pytorch")
    model.ir_version = 7
    return model

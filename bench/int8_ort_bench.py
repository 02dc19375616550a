"""ONNX Runtime's side of bench/int8_ort_bench.sh.
  int8_ort_bench.py quantize FP32.onnx CALIB.bin OUT.onnx
      quant_pre_process, then onnxruntime.quantization.quantize_static: QDQ format, per-channel int8
      weights, uint8 activations (U8S8, ORT's recommendation on x86-64), MinMax
      calibration on the preprocessed images in CALIB.bin (stoke's own
      preprocessing: float32 N x C x H x W, the shape read from the model)
  int8_ort_bench.py time MODEL.onnx INPUT.bin THREADS BATCH ITERATIONS WARMUP LABEL
      one JSON line: the median ms of a batch-1 run and of a batch-BATCH run
      (the first image repeated), as stoke_bench_predict times Predictor::logits
  int8_ort_bench.py logits MODEL.onnx INPUT.bin OUT.bin
      the model's logits on every image of INPUT.bin"""
import json
import statistics
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort


def images(model_path, path):
    dims = onnx.load(model_path).graph.input[0].type.tensor_type.shape.dim
    c, h, w = (d.dim_value for d in dims[1:])
    return np.fromfile(path, dtype=np.float32).reshape(-1, c, h, w)


def session(path, threads):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def quantize(fp32, calib, out):
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self, x):
            self.it = iter([{"input": x[i:i + 1]} for i in range(len(x))])

        def get_next(self):
            return next(self.it, None)

    from onnxruntime.quantization.shape_inference import quant_pre_process

    # ORT's recommended pre-processing (its graph optimizer, shape inference;
    # the symbolic part needs sympy and the shapes here are static anyway).
    pre = out + ".pre.onnx"
    quant_pre_process(fp32, pre, skip_symbolic_shape=True)
    quantize_static(pre, out, Reader(images(fp32, calib)), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)


def median_ms(f, warmup, iterations):
    for _ in range(warmup):
        f()
    times = []
    for _ in range(iterations):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def timed(model, inputs, threads, batch, iterations, warmup, label):
    s = session(model, threads)
    x = images(model, inputs)[:1]
    xb = np.repeat(x, batch, axis=0)
    one = median_ms(lambda: s.run(["logits"], {"input": x}), warmup, iterations)
    # The batch run's counts as stoke_bench_predict's.
    many = median_ms(lambda: s.run(["logits"], {"input": xb}), max(1, warmup // 2),
                     max(3, iterations // batch))
    print(json.dumps({"impl": label, "threads": threads, "batch": batch, "forward_ms": one,
                      "forward_batch_ms": many}))


def main(argv):
    if argv[1] == "quantize":
        quantize(argv[2], argv[3], argv[4])
    elif argv[1] == "time":
        timed(argv[2], argv[3], int(argv[4]), int(argv[5]), int(argv[6]), int(argv[7]), argv[8])
    elif argv[1] == "logits":
        session(argv[2], 1).run(["logits"], {"input": images(argv[2], argv[3])})[0].tofile(argv[4])
    else:
        sys.exit(__doc__)


main(sys.argv)

"""Run by test_export_without_reference.py with the Python of the venv without the reference package
(build/pyvenv): exported files in their own runtimes, on inputs the test wrote.

  export_runtimes.py --probe         prints a JSON object: each converter or runtime module -> whether
                                     this Python has it
  export_runtimes.py --coreml PATH   prints a JSON object: a Core ML package's inputs (name, image
                                     size), outputs (name, shape, data type) and metadata, read from
                                     its specification (Core ML runs on Apple systems only)
  export_runtimes.py JOBS.json       runs each job {"runtime", "model", "inputs": [x.npy ...],
                                     "outputs": [prefix ...]}: the model loaded once in its runtime
                                     (onnxruntime, openvino, torch.jit, litert, executorch), each input
                                     (B, 3, H, W) FP32 run, its outputs written as prefix.output0.npy
                                     (detection rows or the dense layout) and prefix.output1.npy
                                     (prototypes)

The runtimes are called directly, not through any predictor: decoding is the test's. Exits non-zero,
naming the job, when a runtime fails, and when the reference package got imported on the way."""
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

MODULES = ["onnx", "onnxruntime", "openvino", "nncf", "coremltools", "torchvision", "safetensors", "litert_torch",
           "ai_edge_litert", "executorch", "tensorrt", "ultralytics"]


def probe():
    print(json.dumps({m: importlib.util.find_spec(m) is not None for m in MODULES}))


def coreml_spec(path):
    import coremltools as ct

    spec = ct.utils.load_spec(path)
    image = [{"name": i.name, "width": i.type.imageType.width, "height": i.type.imageType.height,
              "rgb": i.type.imageType.colorSpace == ct.proto.FeatureTypes_pb2.ImageFeatureType.RGB}
             for i in spec.description.input]
    outputs = [{"name": o.name, "shape": list(o.type.multiArrayType.shape), "type": o.type.multiArrayType.dataType}
               for o in spec.description.output]
    print(json.dumps({"inputs": image, "outputs": outputs, "metadata": dict(spec.description.metadata.userDefined)}))


def onnxruntime_runner(model):
    import onnxruntime as ort

    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return lambda x: session.run(["output0", "output1"], {"images": x})


def openvino_runner(model):
    import openvino as ov

    xml = next(Path(model).glob("*.xml"))
    # FP32 inference: the CPU plugin otherwise runs an FP32 IR in BF16 on processors with native BF16
    # (docs/deploy.md), and lucid predicts in FP32.
    compiled = ov.Core().compile_model(str(xml), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})

    def run(x):
        out = compiled(x)
        return [out[compiled.output(k)] for k in range(2)]

    return run


def torchjit_runner(model):
    import torch
    import torchvision  # noqa: F401  (its operators: an nms=True file holds torchvision::nms)

    module = torch.jit.load(model)

    def run(x):
        with torch.no_grad():
            return [y.numpy() for y in module(torch.from_numpy(x))]

    return run


def litert_runner(model):
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=model)
    interpreter.allocate_tensors()
    inp = interpreter.get_input_details()[0]
    outs = interpreter.get_output_details()

    def run(x):
        interpreter.set_tensor(inp["index"], x)
        interpreter.invoke()
        ys = [interpreter.get_tensor(o["index"]) for o in outs]
        return sorted(ys, key=lambda y: y.ndim)  # (B, ., .) rows or dense, then (B, nm, H/4, W/4)

    return run


def executorch_runner(model):
    import torch
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(str(next(Path(model).glob("*.pte")))).load_method("forward")
    return lambda x: [y.numpy() for y in method.execute([torch.from_numpy(x)])]


RUNNERS = {"onnxruntime": onnxruntime_runner, "openvino": openvino_runner, "torch.jit": torchjit_runner,
           "litert": litert_runner, "executorch": executorch_runner}


def run_jobs(path):
    for job in json.loads(Path(path).read_text()):
        what = f"{job['runtime']} {job['model']}"
        try:
            run = RUNNERS[job["runtime"]](job["model"])
            for x, prefix in zip(job["inputs"], job["outputs"]):
                ys = run(np.load(x))
                if len(ys) != 2:
                    sys.exit(f"{what}: {len(ys)} outputs, not (output0, output1)")
                for k, y in enumerate(ys):
                    np.save(f"{prefix}.output{k}.npy", np.asarray(y, dtype=np.float32))
        except Exception as e:  # the runtime's own message, naming the job
            sys.exit(f"{what}: {type(e).__name__}: {str(e).strip()[:2000]}")
        print(f"{what}: {len(job['inputs'])} input(s) run")
    if "ultralytics" in sys.modules:
        sys.exit("the reference package was imported while running the exports")


if __name__ == "__main__":
    if sys.argv[1:] == ["--probe"]:
        probe()
    elif sys.argv[1] == "--coreml":
        coreml_spec(sys.argv[2])
    else:
        run_jobs(sys.argv[1])

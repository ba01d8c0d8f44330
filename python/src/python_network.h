// Model files run by a Python runtime behind engine::Network (deploy/load_network.h): the package
// registers a loader per suffix (".onnx": lucid_yolo/runtimes.py, an onnxruntime session), which
// `lucid predict` through the package, YOLO("best.onnx").predict(...), then runs like any network:
// the same letterbox, detections and masks as for the weights.
#pragma once
#include <pybind11/pybind11.h>

#include <string>

namespace lucid::python {

// Registers open(path, device) -> dict for files ending in `suffix`. The dict: run (a callable
// taking a float32 (B, 3, H, W) numpy array, returning (output0, output1) arrays), names (list),
// imgsz (int), fixed_imgsz (bool), end2end (bool: output0 holds detection rows), device ("cpu" or
// "cuda:N", where the outputs are consumed).
void register_python_loader(const std::string& suffix, pybind11::object open);

}  // namespace lucid::python

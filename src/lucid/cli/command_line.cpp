// The `lucid` command line: dispatches to subcommands; user errors become one line and exit code 1.
// The `lucid` executable (main.cpp) and the Python package's `lucid` console script both run it.
#include <iostream>
#include <new>

#include "lucid/cli/commands.h"
#include "lucid/cli/error_line.h"
#include "lucid/util/error.h"

namespace {

const char* kUsage =
    "lucid-yolo " LUCID_VERSION
    " - YOLO instance segmentation in C++\n"
    "usage: lucid <command> [args]\n"
    "commands:\n"
    "  train             train a model (default: yolo26n-seg on the embedded synthetic dataset)\n"
    "  val               validate a checkpoint: box/mask metrics, plots, COCO results file\n"
    "  predict           segment images with a checkpoint: drawn images, txt labels, JSON\n"
    "  export            write a model as safetensors, an Ultralytics .pt, ONNX or a compiled package\n"
    "  model info|save   inspect a model YAML or weights file, save its weights\n"
    "  coco-eval         COCO box/mask mAP of a results JSON (as pycocotools)\n"
    "  data check|synth|convert|prepare  inspect, synthesise, convert datasets; cache images\n"
    "  bench pairs|merge fresh-process native/replay fit pairs: times, memory, state hashes\n"
    "  checks            versions, devices and the build's optional parts (FFmpeg, Gloo, NCCL, cairo, CUDA kernels)\n"
    "  settings [reset|key=value]  show or change the settings file (runs_dir, datasets_dir, weights_dir, "
    "tensorboard)\n"
    "  cfg | copy-cfg    print the default configuration (YAML) | write it to default_copy.yaml\n"
    "  version           print the version\n"
    "`lucid segment <command> ...` is the same as `lucid <command> ...` (the reference's `yolo segment train`).\n";

}  // namespace

namespace lucid::cli {

int run_command_line(std::vector<std::string> args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kUsage;
    return args.empty() ? 2 : 0;
  }
  // `lucid segment train ...` (the reference's task word) is `lucid train ...`.
  if (args[0] == "segment" && args.size() > 1) args.erase(args.begin());
  const std::string cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (cmd == "train") return train_command(rest);
    if (cmd == "val") return val_command(rest);
    if (cmd == "predict") return predict_command(rest);
    if (cmd == "export") return export_command(rest);
    if (cmd == "model") return model_command(rest);
    if (cmd == "coco-eval") return coco_eval_command(rest);
    if (cmd == "data") return data_command(rest);
    if (cmd == "bench") return bench_command(rest);
    if (cmd == "checks") return checks_command(rest);
    if (cmd == "settings") return settings_command(rest);
    if (cmd == "cfg") return cfg_command(rest);
    if (cmd == "copy-cfg") return copy_cfg_command(rest);
    if (cmd == "benchmark")
      throw UserError(
          "lucid benchmark is a mode of the Python package (it validates ONNX files in onnxruntime): run the "
          "package's lucid (pip install lucid-yolo) or python -m lucid_yolo benchmark ...");
    if (cmd == "version") {
      std::cout << "lucid-yolo " << LUCID_VERSION << "\n";
      return 0;
    }
    std::cerr << "lucid: unknown command '" << cmd << "'\n" << kUsage;
    return 2;
  } catch (const UserError& e) {
    std::cerr << "lucid " << cmd << ": error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {  // library errors (file system, LibTorch, allocation): one line, no abort
    std::cerr << "lucid " << cmd << ": error: " << error_line(e) << "\n";
    return 1;
  } catch (...) {
    std::cerr << "lucid " << cmd << ": error: an unexpected error without a message\n";
    return 1;
  }
}

}  // namespace lucid::cli

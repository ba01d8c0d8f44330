// `lucid export`: a trained model handed on. format=safetensors writes plain weights (the EMA of a
// training checkpoint; FP16 unless half=False) with the model dict, nc, class names and imgsz as
// metadata, which every lucid command loads back. format=pt writes an Ultralytics checkpoint through
// the project's Python (scripts/ultralytics_weights.py), which the reference's YOLO(...).val(),
// .predict() and .export() load, with the class names kept. The deployment formats (onnx, aoti,
// torchscript, openvino, litert, executorch, coreml, engine; export_formats.h lists them and their
// options) go through scripts/deploy_export.py: converted from the ONNX file lucid writes (openvino,
// engine), or traced from lucid's own PyTorch network (python/lucid_yolo/nn: aoti, torchscript, coreml,
// litert, executorch); openvino int8=True quantizes lucid's ONNX with NNCF on the validation images of
// data= as lucid letterboxes them (CalibrationImages). Their outputs and runtimes are described in
// docs/deploy.md.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>

#include "lucid/cli/commands.h"
#include "lucid/cli/export_formats.h"
#include "lucid/config/fields.h"
#include "lucid/config/options.h"
#include "lucid/config/weights_fields.h"
#include "lucid/data/augment.h"
#include "lucid/data/dataset.h"
#include "lucid/data/image_io.h"
#include "lucid/data/resize.h"
#include "lucid/deploy/compiled_model.h"
#include "lucid/deploy/onnx/onnx_export.h"
#include "lucid/model/safetensors.h"
#include "lucid/util/child_process.h"
#include "lucid/util/error.h"
#include "lucid/util/removed_on_signal.h"
#include "lucid/weights/model_source.h"

namespace lucid::cli {

namespace fs = std::filesystem;

namespace {

// The settings of `lucid export`, each option declared once (config/fields.h): a member's initializer
// is its option's default. Values are checked here whatever the format; which options a format
// takes is export_formats.h's check.
struct ExportSettings {
  std::string model, data, workspace, out;
  std::string format = "safetensors";
  std::string device = "cpu";
  bool half = false;  // default: the format's (True for safetensors and pt)
  bool int8 = false, dynamic = false, simplify = true, nms = false;
  double fraction = 1.0, conf = 0.25, iou = 0.7;
  int64_t imgsz = 0;  // 0: the model file's, else 640
  int64_t batch = 1;
  int64_t opset = 0;  // 0: the exporter's choice
};

const config::FieldList<ExportSettings>& export_fields() {
  using S = ExportSettings;
  static const auto* list = [] {
    auto* f = new config::FieldList<S>("export");
    f->text("model", "weights: a lucid train checkpoint (its EMA weights), lucid weights (.safetensors) or a .pt")
        .to(&S::model);
    f->text("format",
            "safetensors, pt, onnx, aoti (a compiled package, .pt2), torchscript, openvino, litert (LiteRT, .tflite; "
            "also format=tflite), executorch, coreml or engine (TensorRT); docs/deploy.md")
        .check([](const std::string& v) { return (find_export_format(v), true); }, "a supported format", {"paddle"})
        .to(&S::format);
    f->flag("half", "",
            "FP16 (default: True for safetensors and pt, else False; aoti and torchscript need a CUDA device)")
        .resolve([](const S& s) { return find_export_format(s.format).half_default; })
        .to(&S::half);
    f->flag("int8", "openvino: INT8 by NNCF calibration on the validation images of data=").to(&S::int8);
    f->text("data", "openvino int8=True: the dataset YAML whose validation images calibrate").to(&S::data);
    f->number("fraction", "openvino int8=True: the share of those images used").min(0, true).max(1).to(&S::fraction);
    config::declare_weights_imgsz(*f,
                                  "image size recorded with the weights, or the input size of the deployed file "
                                  "(default: the model file's, else 640); [h, w] with h == w",
                                  &S::imgsz, config::ImgszLists::SquareOnly, "export");
    f->integer("batch", "deployed formats: the batch size of the fixed input (the largest with dynamic=True)")
        .range(1, 1024)
        .to(&S::batch);
    f->flag("dynamic", "onnx, torchscript, openvino, engine: dynamic batch, height and width").to(&S::dynamic);
    f->flag("simplify", "onnx: simplify the graph with onnxslim (as the reference)").to(&S::simplify);
    f->flag("nms",
            "onnx, torchscript, openvino, coreml: NMS inside the file (the reference's nms=True) over the one-to-many "
            "head")
        .to(&S::nms);
    f->number("conf", "nms=True: the confidence threshold inside the file").fraction().to(&S::conf);
    f->number("iou", "nms=True: the IoU threshold inside the file").fraction().to(&S::iou);
    f->integer("opset", "", "onnx: the ONNX opset (default: the exporter's choice for this torch)")
        .range(7, 30)
        .resolve([](const S&) { return 0LL; })
        .to(&S::opset);
    f->text("workspace", "engine: TensorRT's workspace in GiB (default: TensorRT's)").to(&S::workspace);
    f->text("device",
            "onnx, aoti, torchscript, engine: cpu or a CUDA device (0, cuda:0); an aoti package runs only on its kind")
        .to(&S::device);
    f->text("out", "output file or folder (default: next to model, <stem> with the format's suffix, docs/deploy.md)")
        .to(&S::out);
    return f;
  }();
  return *list;
}

// The Python the build was configured with (CMake's LUCID_PYTHON), unless LUCID_PYTHON says otherwise.
std::string project_python() {
  const char* env = std::getenv("LUCID_PYTHON");
  return env && *env ? std::string(env) : std::string(LUCID_PYTHON);
}

// Seconds an exporter may run: LUCID_EXPORT_TIMEOUT, else two hours (a TensorRT engine or an
// OpenVINO INT8 calibration of a large model takes tens of minutes; a hung Python, forever).
constexpr const char* kTimeoutVariable = "LUCID_EXPORT_TIMEOUT";
double export_timeout() {
  const char* env = std::getenv(kTimeoutVariable);
  if (!env || !*env) return 7200;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (*end != '\0' || !(v > 0) || v > 1e7)
    throw UserError(std::string(kTimeoutVariable) + "=" + env + ": expected seconds, a number above 0");
  return v;
}

// A script of scripts/: the source tree's, unless LUCID_SCRIPTS_DIR says otherwise (the Python
// package ships them).
std::string script_path(const std::string& name) {
  const char* scripts_env = std::getenv("LUCID_SCRIPTS_DIR");
  return std::string(scripts_env && *scripts_env ? scripts_env : LUCID_SCRIPTS_DIR) + "/" + name;
}

// Runs a script of the project's Python for `format=`: the weights go over as an FP32 safetensors
// file next to the output, removed afterwards.
void run_python_export(const engine::InferenceModel& m, const std::string& format, int64_t imgsz,
                       const std::string& out, const std::string& script_name, std::vector<std::string> args) {
  const auto python = project_python();
  if (access(python.c_str(), X_OK) != 0)
    throw UserError("format=" + format + " needs the project's Python with " +
                    (format == "pt" ? "the ultralytics package" : "the export packages of docs/deploy.md") + ": " +
                    python + " is not an executable (set LUCID_PYTHON to one)");
  const std::string script = script_path(script_name);
  if (!fs::is_regular_file(script)) throw UserError("format=" + format + ": " + script + " is missing");
  const double timeout = export_timeout();
  const std::string weights = out + ".export-tmp.safetensors";
  // Removed however the export ends: an error, the exporter's failure, or a signal ending lucid.
  const util::RemovedOnSignal removed_on_signal(weights);
  struct RemovedAtEnd {
    const std::string& path;
    ~RemovedAtEnd() {
      std::error_code ignored;
      fs::remove(path, ignored);
    }
  } removed_at_end{weights};
  engine::write_weights_file(weights, *m.model, m.source.names, imgsz, /*half=*/false);
  std::vector<std::string> argv{python, script};
  argv.insert(argv.end(), args.begin(), args.end());
  for (auto& a : argv)
    if (a == "{weights}") a = weights;
  const auto child = util::run_child(argv, timeout);  // its process group ends with lucid
  const std::string command = python + " " + script + " " + args.front();
  if (child.timed_out) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", timeout);
    throw UserError("format=" + format + ": " + command + " did not finish within " + seconds + " s and was stopped (" +
                    kTimeoutVariable + " sets the seconds allowed)");
  }
  if (child.status != 0)
    throw UserError("format=" + format + ": " + command + " failed (exit " + std::to_string(child.status) +
                    "; its message is above)");
}

// "cpu", "cuda:N" as torch spells them, from the device option ("0" -> cuda:0).
std::string export_device(const std::string& spec) {
  if (spec.empty() || spec == "cpu") return "cpu";
  if (spec == "cuda") return "cuda:0";
  if (spec.rfind("cuda:", 0) == 0 && spec.size() > 5 && spec.find_first_not_of("0123456789", 5) == std::string::npos)
    return spec;
  if (spec.find_first_not_of("0123456789") == std::string::npos) return "cuda:" + spec;
  throw UserError("option device=" + spec + ": expected cpu, 0, cuda or cuda:N");
}

// format=onnx written by lucid (deploy/onnx/): no Python.
bool native_onnx(const ExportSettings& s) {
  if (s.format != "onnx") return false;
  if (engine::onnx::available()) return true;
  std::fprintf(stderr,
               "format=onnx: this lucid was built without the ONNX library (libonnx-dev); the Python exporter "
               "(scripts/deploy_export.py) writes the file\n");
  return false;
}

engine::onnx::ExportOptions onnx_options(const config::Options& options, const ExportSettings& s, int64_t imgsz) {
  engine::onnx::ExportOptions o;
  o.imgsz = imgsz;
  o.batch = s.batch;
  o.dynamic = s.dynamic;
  o.half = s.half;
  if (s.opset > 0) o.opset = static_cast<int>(s.opset);
  if (options.given("nms")) o.nms = s.nms;
  o.conf = s.conf;
  o.iou = s.iou;
  return o;
}

void write_native_onnx(const engine::InferenceModel& m, const config::Options& options, const ExportSettings& s,
                       int64_t imgsz, const fs::path& out) {
  const auto what = engine::onnx::write_file(out.string(), *m.model, m.source.names, onnx_options(options, s, imgsz));
  std::printf("%s: %s\n", out.string().c_str(), what.c_str());
}

// The formats their Python converter makes from lucid's ONNX (format=openvino, its INT8 too;
// format=engine): the ONNX file, FP32 with the head the other formats carry (an end-to-end model's
// one-to-one head unless nms=True), written next to out for the exporter, removed however it ends.
class ConverterOnnx {
 public:
  ConverterOnnx(const engine::InferenceModel& m, const config::Options& options, const ExportSettings& s, int64_t imgsz,
                const fs::path& out)
      : path_(out.string() + ".export-tmp.onnx"), removed_on_signal_(path_) {
    auto o = onnx_options(options, s, imgsz);
    o.half = false;  // the converter stores FP16 itself
    o.nms = s.nms;
    engine::onnx::write_file(path_, *m.model, m.source.names, o);
  }
  ~ConverterOnnx() {
    std::error_code ignored;
    fs::remove(path_, ignored);
  }
  static bool wanted(const ExportSettings& s) {
    return (s.format == "openvino" || s.format == "engine") && engine::onnx::available();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  util::RemovedOnSignal removed_on_signal_;
};

// At most this many images calibrate INT8 (NNCF's own default subset size), evenly spaced over the
// share of the validation split that fraction= selects: the reference's exporter calibrates on every
// image of that share, which for a large split holds 3 imgsz^2 bytes an image and minutes of
// calibration per few hundred.
constexpr int64_t kMaxCalibrationImages = 300;

// format=openvino int8=True: the images NNCF calibrates on, made as the reference's calibration
// loader makes them (8.4.190 Exporter.get_int8_calibration_dataloader): the validation split of data=
// (val:, or validation:; no other split), of it the first max(1, round(n * fraction)) sorted images
// (the reference hands fraction= to its calibration set as to a training split), each resized so its
// long side is imgsz (load_image) and letterboxed to imgsz x imgsz (centred, pad 114, no upscaling).
// They go to the converter as one uint8 (N, 3, imgsz, imgsz) RGB tensor `images` in a safetensors
// file next to out, removed however the export ends.
class CalibrationImages {
 public:
  CalibrationImages(const ExportSettings& s, int64_t imgsz, const fs::path& out)
      : path_(out.string() + ".export-tmp-calibration.safetensors"), removed_on_signal_(path_) {
    write(s.data, s.fraction, static_cast<int>(imgsz));
  }
  ~CalibrationImages() {
    std::error_code ignored;
    fs::remove(path_, ignored);
  }
  static bool wanted(const ExportSettings& s) { return s.format == "openvino" && s.int8; }
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& dataset, double fraction, int imgsz) const {
    const std::string option = "option data=" + dataset;
    std::error_code ec;
    if (!fs::exists(dataset, ec))
      throw UserError(option + ": not found (int8=True calibrates on the validation images of a dataset YAML)");
    data::IndexOptions io;
    io.require_images = false;
    // fraction= for the validation split; of the others (not used) only their first images are read.
    char parts[64];
    std::snprintf(parts, sizeof parts, "[2, %.17g, 0]", fraction);
    io.fraction = data::DatasetFraction::parse(parts);
    const auto index = data::build_index(dataset, io);
    const auto* val = index.find("val");
    if (!val) throw UserError(option + ": no validation split (val:) to calibrate INT8 on");
    for (const auto& p : val->problems) std::fprintf(stderr, "warning: %s\n", p.str().c_str());
    const auto listed = static_cast<int64_t>(val->images.size());
    if (listed == 0) throw UserError(option + ": its validation split " + val->source + " has no usable image");
    const int64_t n = std::min(listed, kMaxCalibrationImages);
    auto images = torch::empty({n, 3, imgsz, imgsz}, torch::kUInt8);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      data::Image im;
      try {
        im = data::decode_image(val->images[static_cast<size_t>(i * listed / n)].path);
      } catch (const UserError& e) {
        std::fprintf(stderr, "warning: %s (left out of the INT8 calibration)\n", e.what());
        continue;
      }
      const auto [w, h] = data::long_side_size(im.width, im.height, imgsz);
      if (w != im.width || h != im.height) im = data::resize_linear(im, w, h);
      data::Sample sample;
      sample.image = torch::from_blob(im.pixels.data(), {im.height, im.width, im.channels}, torch::kUInt8);
      images[kept++].copy_(data::letterbox(std::move(sample), imgsz, imgsz).image.permute({2, 0, 1}));
    }
    if (kept == 0) throw UserError(option + ": none of its validation images decodes");
    model::write_safetensors(path_, {{"images", images.narrow(0, 0, kept)}});
    std::printf("INT8 calibration: %lld of the %lld validation images of %s, letterboxed to %dx%d\n",
                static_cast<long long>(kept), static_cast<long long>(listed), dataset.c_str(), imgsz, imgsz);
    std::fflush(stdout);  // before the converter's output
  }

  std::string path_;
  util::RemovedOnSignal removed_on_signal_;
};

}  // namespace

int export_command(const std::vector<std::string>& args) {
  auto options = export_fields().options();
  if (!options.parse_or_help(args)) return 0;
  const auto settings = export_fields().read(options);
  const auto& model = settings.model;
  if (model.empty()) throw UserError("option model= is required (a weights file: .safetensors or .pt)");
  const auto& format = find_export_format(settings.format);
  check_format_options(format, options);
  const bool half = settings.half;
  const auto device = export_device(settings.device);
  if (format.name == "aoti" && half && device == "cpu")
    throw UserError(
        "option half=True: format=aoti compiles FP16 only for a CUDA device (device=0); on the CPU use half=False");
  if (format.name == "torchscript" && half && device == "cpu")
    throw UserError(
        "option half=True: format=torchscript traces in FP16 only on a CUDA device (device=0), as the reference");
  auto m = engine::load_inference_model("model", model, torch::kCPU);
  int64_t imgsz = settings.imgsz > 0 ? settings.imgsz : m.source.imgsz;
  if (format.python && imgsz <= 0) imgsz = 640;
  fs::path out = settings.out;
  if (out.empty()) {
    const fs::path in(model);
    out = in.parent_path() / (in.stem().string() + format.suffix);
  }
  if (format.name == "aoti" && !engine::is_compiled_package(out.string()))
    throw UserError("out=" + out.string() +
                    ": a compiled package's name ends in .pt2 (lucid predict tells it by that)");
  std::error_code ec;
  if (fs::exists(out, ec) && fs::equivalent(out, model, ec))
    throw UserError("out=" + out.string() + ": would overwrite model=" + model + "; give another out=");
  if (format.name == "safetensors") {
    engine::write_weights_file(out.string(), *m.model, m.source.names, imgsz, half);
  } else if (format.name == "pt") {
    std::vector<std::string> args{"to-pt", "{weights}", out.string()};
    if (!half) args.push_back("--fp32");
    run_python_export(m, format.name, imgsz, out.string(), "ultralytics_weights.py", args);
  } else if (native_onnx(settings)) {
    write_native_onnx(m, options, settings, imgsz, out);
  } else {
    std::vector<std::string> args{format.name, "{weights}", out.string()};
    auto rest = exporter_arguments(format, options, imgsz, device, half);
    args.insert(args.end(), rest.begin(), rest.end());
    std::optional<CalibrationImages> calibration;
    if (CalibrationImages::wanted(settings)) {
      calibration.emplace(settings, imgsz, out);
      args.insert(args.end(), {"--calibration", calibration->path()});
    }
    std::optional<ConverterOnnx> onnx;
    if (ConverterOnnx::wanted(settings)) {
      onnx.emplace(m, options, settings, imgsz, out);
      args.insert(args.end(), {"--onnx", onnx->path()});
    }
    run_python_export(m, format.name, imgsz, out.string(), "deploy_export.py", args);
  }
  const char* precision = settings.int8 ? "INT8" : half ? "FP16" : "FP32";
  std::printf("exported %s (%s) -> %s (%s, %s)\n", model.c_str(), engine::kind_name(m.source.kind).c_str(),
              out.string().c_str(), format.name.c_str(), precision);
  return 0;
}

void require_pt_writer(const std::string& option) {
  const auto python = project_python();
  const std::string what = "option " + option + ": weights/best.pt and last.pt are written by the ultralytics package";
  const std::string fix = " (pip install 'lucid-yolo[pt]' there, or set LUCID_PYTHON to a Python that has it)";
  if (access(python.c_str(), X_OK) != 0)
    throw UserError(what + ", in " + python + ", which is not an executable" + fix);
  const auto script = script_path("ultralytics_weights.py");
  if (!fs::is_regular_file(script)) throw UserError("option " + option + ": " + script + " is missing");
  // Looked up, not imported: quick and quiet.
  const auto child = util::run_child({python, "-c",
                                      "import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) for m in "
                                      "('ultralytics', 'safetensors', 'torch')) else 3)"},
                                     120);
  if (child.timed_out || child.status != 0)
    throw UserError(what + ", which " + python + " lacks (it needs ultralytics, safetensors and torch)" + fix);
}

void write_run_pt(const std::string& run_dir) {
  for (const char* name : {"best", "last"}) {
    const auto weights = fs::path(run_dir) / "weights" / (std::string(name) + ".safetensors");
    if (!fs::exists(weights)) continue;
    auto out = weights;
    out.replace_extension(".pt");
    export_command({"model=" + weights.string(), "format=pt", "out=" + out.string()});
  }
}

config::Options export_options() { return export_fields().options(); }

}  // namespace lucid::cli

// lucid_yolo._lucid: the commands (train, val, predict, export, ...) called with the CLI's own
// `key=value` tokens, so that options are declared and checked in one place; the GIL is released
// while they run and taken back only for callbacks, predicted images and signal checks.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <new>
#include <optional>

#include "convert.h"
#include "fit_observer.h"
#include "lucid/cli/commands.h"
#include "lucid/cli/export_formats.h"
#include "lucid/cli/outcome.h"
#include "lucid/config/user_settings.h"
#include "lucid/deploy/compiled_model.h"
#include "lucid/deploy/load_network.h"
#include "lucid/deploy/torchscript_model.h"
#include "lucid/lucid.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/util/progress.h"
#include "lucid/weights/model_source.h"
#include "plot_result.h"
#include "python_errors.h"
#include "python_network.h"

namespace py = pybind11;
using Tokens = std::vector<std::string>;

namespace lucid::python {

namespace {

py::handle lucid_error;  // lucid_yolo.LucidError (a RuntimeError); the module keeps it alive

// The one-line message `lucid` would print for a failure, raised as LucidError.
[[noreturn]] void raise_native(const std::exception_ptr& failure) {
  std::string message;
  try {
    std::rethrow_exception(failure);
  } catch (const engine::FitInterrupted& e) {
    message = e.what();
  } catch (const UserError& e) {
    message = e.what();
  } catch (const c10::Error& e) {
    message = e.what_without_backtrace();
  } catch (const std::bad_alloc&) {
    message = "out of memory (an allocation failed; smaller imgsz, batch or workers need less)";
  } catch (const std::exception& e) {
    message = without_library_tag(e.what());
  } catch (...) {
    message = "an unexpected error without a message";
  }
  PyErr_SetString(lucid_error.ptr(), message.c_str());
  throw py::error_already_set();
}

// Runs f without the GIL; a Python exception kept by a callback wins over the native error it caused.
template <typename F>
auto without_gil(ErrorStash& errors, F&& f) {
  std::optional<decltype(f())> out;
  std::exception_ptr failure;
  {
    py::gil_scoped_release release;
    try {
      out.emplace(f());
    } catch (...) {
      failure = std::current_exception();
    }
  }
  errors.raise_if_any();
  if (failure) raise_native(failure);
  return std::move(*out);
}

// on_event(dict) for each trainer and validator event; wanted() -> the event names with callbacks.
py::dict train(const Tokens& args, py::object on_event, py::object wanted) {
  ErrorStash errors;
  PythonFitObserver observer(std::move(on_event), std::move(wanted), errors);
  ObserverScope scope(&observer);
  return outcome_dict(without_gil(errors, [&] { return cli::train_run(args); }));
}

py::dict val(const Tokens& args, py::object on_event, py::object wanted) {
  ErrorStash errors;
  PythonFitObserver observer(std::move(on_event), std::move(wanted), errors);
  ObserverScope scope(&observer);
  return outcome_dict(without_gil(errors, [&] { return cli::val_run(args); }));
}

const char* predict_event_name(cli::PredictEvent e) {
  switch (e) {
    case cli::PredictEvent::Start:
      return "on_predict_start";
    case cli::PredictEvent::BatchStart:
      return "on_predict_batch_start";
    case cli::PredictEvent::BatchEnd:
      return "on_predict_batch_end";
    case cli::PredictEvent::End:
      return "on_predict_end";
  }
  return "";
}

// In-memory images from (name, pixels) pairs: pixels an (H, W, 3) uint8 RGB array, copied here
// while the GIL is held, or None for the file `name`.
std::vector<engine::MemoryImage> memory_images(const py::list& given) {
  std::vector<engine::MemoryImage> images;
  for (const auto& entry : given) {
    const auto pair = entry.cast<py::tuple>();
    engine::MemoryImage m{pair[0].cast<std::string>(), std::nullopt};
    if (!pair[1].is_none()) {
      const auto a = pair[1].cast<py::array_t<uint8_t, py::array::c_style | py::array::forcecast>>();
      constexpr auto most = static_cast<py::ssize_t>(1) << 30;
      if (a.ndim() != 3 || a.shape(2) != 3 || a.shape(0) < 1 || a.shape(1) < 1 || a.shape(0) > most ||
          a.shape(1) > most)
        throw py::value_error(m.name + ": expected an (H, W, 3) RGB array");
      data::Image image(static_cast<int>(a.shape(0)), static_cast<int>(a.shape(1)), 3);
      std::copy(a.data(), a.data() + a.size(), image.pixels.begin());
      m.pixels = std::move(image);
    }
    images.push_back(std::move(m));
  }
  return images;
}

// Calls f with the GIL unless a Python error is kept; a signal or an error f raises is kept and
// stops the native command (NativeStop).
template <typename F>
void into_python(ErrorStash& errors, F&& f) {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) errors.keep_current();
  if (!errors.holds()) {
    try {
      f();
    } catch (py::error_already_set& e) {
      e.restore();
      errors.keep_current();
    }
  }
  if (errors.holds()) throw NativeStop();
}

// Each predicted image goes to `sink` as a dict (prediction_dict) as soon as it is predicted, and
// each predictor event's name to on_event (unless None).
// memory: None (the images are source='s) or a list for memory_images.
py::dict predict(const Tokens& args, py::object sink, const py::object& memory, py::object on_event) {
  ErrorStash errors;
  std::optional<std::vector<engine::MemoryImage>> images;
  if (!memory.is_none()) images = memory_images(memory.cast<py::list>());
  cli::PredictSink to_python;
  to_python.image = [&](const cli::PredictedImage& item) { into_python(errors, [&] { sink(prediction_dict(item)); }); };
  if (!on_event.is_none())
    to_python.event = [&](cli::PredictEvent e) { into_python(errors, [&] { on_event(predict_event_name(e)); }); };
  return outcome_dict(
      without_gil(errors, [&] { return cli::predict_run(args, to_python, images ? &*images : nullptr); }));
}

// The other commands, as `lucid <command> args`; returns the exit code (0, or 2 for bad usage).
int command(const std::string& name, const Tokens& args) {
  using Command = int (*)(const Tokens&);
  static const std::map<std::string, Command> commands = {{"export", cli::export_command},
                                                          {"model", cli::model_command},
                                                          {"data", cli::data_command},
                                                          {"coco-eval", cli::coco_eval_command}};
  const auto it = commands.find(name);
  if (it == commands.end()) throw py::value_error("unknown command '" + name + "'");
  ErrorStash errors;
  return without_gil(errors, [&] { return it->second(args); });
}

// `lucid model info` args: (layers, parameters, gradients, GFLOPs, summary line, layer table).
py::tuple model_info(const Tokens& args) {
  ErrorStash errors;
  const auto info = without_gil(errors, [&] { return cli::model_info_run(args); });
  if (!info) throw py::value_error("model info: --help is not an option here");
  return py::make_tuple(info->layers, info->parameters, info->gradients, info->gflops, info->summary,
                        info->layer_table);
}

// `lucid export`'s format= values, aliases included, each with the suffix of its default output
// (cli/export_formats.h), so that YOLO.export returns the path the command writes.
py::dict export_formats() {
  py::dict suffixes;
  for (const auto& f : cli::export_formats()) {
    suffixes[py::str(f.name)] = f.suffix;
    if (!f.alias.empty()) suffixes[py::str(f.alias)] = f.suffix;
  }
  return suffixes;
}

// `lucid ARGS...` as the command runs it (the console script `lucid`): its exit code.
int main_command(const Tokens& args) {
  ErrorStash errors;
  return without_gil(errors, [&] { return cli::run_command_line(args); });
}

// A model file's class names (its own, else "0", "1", ... for the model's nc, as the reference
// names a model built from a YAML) and the image size it was trained at (0: unknown). An exported
// TorchScript file, compiled package or ONNX file is loaded as lucid predict loads it (on the GPU
// when usable).
py::tuple model_names(const std::string& path) {
  ErrorStash errors;
  const bool onnx = path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
  if (engine::is_torchscript(path) || engine::is_compiled_package(path) || onnx) {
    auto loaded =
        without_gil(errors, [&] { return engine::load_network("model", path, util::parse_device(""), /*amp=*/false); });
    return py::make_tuple(loaded.names, loaded.imgsz);
  }
  auto source = without_gil(errors, [&] { return engine::read_model_source("model", path, /*weights=*/false); });
  auto names = source.names;
  if (names.empty() && source.spec)
    for (int i = 0; i < source.spec->nc; ++i) names.push_back(std::to_string(i));
  return py::make_tuple(names, source.imgsz);
}

// The settings file's values (`lucid settings`), as the native commands read them: the package
// downloads released weights and datasets into its weights_dir and datasets_dir.
py::dict user_settings() {
  ErrorStash errors;
  const auto s = without_gil(errors, [] { return config::load_user_settings(); });
  py::dict d;
  d["runs_dir"] = s.runs_dir;
  d["datasets_dir"] = s.datasets_dir;
  d["weights_dir"] = s.weights_dir;
  d["tensorboard"] = s.tensorboard;
  // The logging integrations' switches (lucid_yolo/integrations).
  for (const auto& [key, on] : {std::pair{"clearml", s.clearml},
                                {"comet", s.comet},
                                {"dvc", s.dvc},
                                {"mlflow", s.mlflow},
                                {"neptune", s.neptune},
                                {"wandb", s.wandb}})
    d[key] = on;
  return d;
}

}  // namespace

}  // namespace lucid::python

PYBIND11_MODULE(_lucid, m) {
  using namespace lucid::python;
  m.doc() = "lucid-yolo native commands (see lucid_yolo.YOLO)";
  lucid_error = PyErr_NewException("lucid_yolo.LucidError", PyExc_RuntimeError, nullptr);
  m.attr("LucidError") = py::reinterpret_borrow<py::object>(lucid_error);
  m.def("train", &train, py::arg("args"), py::arg("on_event"), py::arg("wanted") = py::none());
  m.def("val", &val, py::arg("args"), py::arg("on_event") = py::none(), py::arg("wanted") = py::none());
  m.def("predict", &predict, py::arg("args"), py::arg("sink"), py::arg("memory") = py::none(),
        py::arg("on_event") = py::none());
  m.def("command", &command, py::arg("name"), py::arg("args"));
  m.def("main", &main_command, py::arg("args"), "the lucid command line; returns its exit code");
  m.def("plot", &plot_result, "the image (RGB bytes) with a prediction drawn on it, as lucid predict draws it");
  m.def("write_image", &write_image, py::arg("path"), py::arg("rgb"), py::arg("height"), py::arg("width"));
  m.def("model_names", &model_names, py::arg("path"));
  m.def("model_info", &model_info, py::arg("args"), "lucid model info's numbers and text");
  m.def("mask_contours", &mask_contours, py::arg("mask"), py::arg("height"), py::arg("width"),
        "the outer contours of a mask (bytes, nonzero = inside) as findContours(RETR_EXTERNAL, CHAIN_APPROX_SIMPLE)");
  m.def("export_formats", &export_formats, "lucid export's format names (aliases too) and their output suffixes");
  m.def("version", &lucid::version);
  m.def("set_progress_terminal", &lucid::util::set_progress_terminal, py::arg("terminal"),
        "progress bars drawn as on a terminal: 1, 0, or -1 when stdout is one");
  m.def("settings", &user_settings, "the settings file's values (defaults where it has none)");
  m.def("register_network_loader", &register_python_loader, py::arg("suffix"), py::arg("open"),
        "runs model files ending in suffix through open(path, device) -> dict (python_network.h)");
}

// `lucid export`: a trained model handed on. format=safetensors writes plain weights (the EMA of a
// training checkpoint; FP16 unless half=False) with the model dict, nc, class names and imgsz as
// metadata, which every lucid command loads back. format=pt writes an Ultralytics checkpoint through
// the project's Python (scripts/ultralytics_weights.py), which the reference's YOLO(...).val(),
// .predict() and .export() load, with the class names kept.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "lucid/cli/commands.h"
#include "lucid/config/options.h"
#include "lucid/engine/model_source.h"
#include "lucid/util/error.h"

extern char** environ;

namespace lucid::cli {

namespace fs = std::filesystem;

namespace {

config::Options export_options() {
  return config::Options(
      "export",
      {{"model", "", "weights: a lucid train checkpoint (its EMA weights), lucid weights (.safetensors) or a .pt"},
       {"format", "safetensors", "safetensors or pt"},
       {"half", "True", "FP16 weights (False: FP32)"},
       {"imgsz", "", "image size recorded with the weights (default: the model file's)"},
       {"out", "", "output file (default: next to model, <stem>-weights.safetensors or <stem>.pt)"}});
}

// The Python the build was configured with (CMake's LUCID_PYTHON), unless LUCID_PYTHON says otherwise.
std::string project_python() {
  const char* env = std::getenv("LUCID_PYTHON");
  return env && *env ? std::string(env) : std::string(LUCID_PYTHON);
}

// Runs argv[0] with its arguments (no shell) and returns its exit status.
int run_program(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0)
    throw UserError("cannot start " + argv[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw UserError("lost track of " + argv[0]);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

void export_pt(const engine::InferenceModel& m, int64_t imgsz, bool half, const std::string& out) {
  const auto python = project_python();
  if (access(python.c_str(), X_OK) != 0)
    throw UserError("format=pt needs the project's Python with the ultralytics package: " + python +
                    " is not an executable (set LUCID_PYTHON to one)");
  const std::string script = std::string(LUCID_SCRIPTS_DIR) + "/ultralytics_weights.py";
  if (!fs::is_regular_file(script)) throw UserError("format=pt: " + script + " is missing");
  // FP32 in between; the script converts to FP16 itself unless --fp32.
  const std::string weights = out + ".export-tmp.safetensors";
  engine::write_weights_file(weights, *m.model, m.source.names, imgsz, /*half=*/false);
  std::vector<std::string> argv{python, script, "to-pt", weights, out};
  if (!half) argv.push_back("--fp32");
  int status = 0;
  try {
    status = run_program(argv);
  } catch (...) {
    fs::remove(weights);
    throw;
  }
  fs::remove(weights);
  if (status != 0)
    throw UserError("format=pt: " + python + " " + script + " to-pt failed (exit " + std::to_string(status) +
                    "; its message is above)");
}

}  // namespace

int export_command(const std::vector<std::string>& args) {
  auto options = export_options();
  if (!options.parse_or_help(args)) return 0;
  const auto model = options.str("model");
  if (model.empty()) throw UserError("option model= is required (a weights file: .safetensors or .pt)");
  const auto format = options.str("format");
  if (format != "safetensors" && format != "pt")
    throw UserError("option format=" + format + ": supported formats are safetensors and pt");
  const bool half = options.flag("half");
  auto m = engine::load_inference_model("model", model, torch::kCPU);
  int64_t imgsz = m.source.imgsz;
  if (!options.str("imgsz").empty()) {
    imgsz = options.integer("imgsz");
    if (imgsz < 32 || imgsz % 32 != 0) throw UserError("option imgsz=" + options.str("imgsz") + ": expected a multiple of 32");
  }
  fs::path out = options.str("out");
  if (out.empty()) {
    const fs::path in(model);
    out = in.parent_path() / (in.stem().string() + (format == "pt" ? ".pt" : "-weights.safetensors"));
  }
  std::error_code ec;
  if (fs::exists(out, ec) && fs::equivalent(out, model, ec))
    throw UserError("out=" + out.string() + ": would overwrite model=" + model + "; give another out=");
  if (format == "safetensors")
    engine::write_weights_file(out.string(), *m.model, m.source.names, imgsz, half);
  else
    export_pt(m, imgsz, half, out.string());
  std::printf("exported %s (%s) -> %s (%s, %s)\n", model.c_str(), engine::kind_name(m.source.kind).c_str(),
              out.string().c_str(), format.c_str(), half ? "FP16" : "FP32");
  return 0;
}

}  // namespace lucid::cli

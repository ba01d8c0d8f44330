// Options that the commands reading a weights file (val, predict, export) share, declared once:
// the weights file of val and predict, the input size, whose default is the one the weights file records (resolved
// after it is read, so 0 here), and the run folder of val and predict (project, name, exist_ok).
#pragma once
#include <cstdint>
#include <string>

#include "lucid/config/fields.h"
#include "lucid/config/options.h"
#include "lucid/config/user_settings.h"

namespace lucid::config {

// model: the weights to read; `more_kinds` completes the list of the files a command reads after
// training checkpoints and lucid weights (" or an Ultralytics .pt").
template <class S>
void declare_weights_model(FieldList<S>& f, const std::string& more_kinds, std::string S::*model) {
  f.text("model", "",
         "weights: a lucid train checkpoint (weights/best.safetensors), lucid weights (.safetensors)" + more_kinds)
      .to(model);
}

// imgsz of the commands that take one size (val, export): see one_imgsz (config/options.h).
template <class S>
void declare_weights_imgsz(FieldList<S>& f, const std::string& help, int64_t S::*imgsz, ImgszLists lists,
                           const std::string& command) {
  f.template value<long long>(
       "imgsz", "", help,
       [lists, command](const std::string& key, const std::string& text) {
         return one_imgsz(key, text, lists, command);
       },
       [](const long long& v) { return std::to_string(v); },
       {"0", "1.5", "x", "[1,2,3]", std::to_string(kMaxImgsz + 1)})
      .resolve([](const S&) { return 0LL; })
      .adjust([](const S&, long long v) { return v == 0 ? v : stride_multiple(v); })
      .to(imgsz);
}

// imgsz of predict: one size or [h, w] (predict_imgsz, config/options.h).
template <class S>
void declare_predict_imgsz(FieldList<S>& f, const std::string& help, ImageSize S::*imgsz) {
  f.template value<ImageSize>("imgsz", "", help, predict_imgsz, [](const ImageSize& v) { return v.text(); },
                              {"0", "1.5", "x", "[1,2,3]", "[640,0]", std::to_string(kMaxImgsz + 1)})
      .resolve([](const S&) { return ImageSize{}; })
      .to(imgsz);
}

// project (default: runs_dir/segment of the user settings), name (its default: the member's
// initializer, e.g. "val") and exist_ok.
template <class S>
void declare_run_folder(FieldList<S>& f, const std::string& name_help, std::string S::*project, std::string S::*name,
                        bool S::*exist_ok) {
  f.text("project", "", "folder of runs (default: runs_dir/segment, see lucid settings)")
      .resolve([](const S&) { return default_project(); })
      .to(project);
  f.text("name", name_help).to(name);
  f.flag("exist_ok", "reuse project/name if it exists").to(exist_ok);
}

}  // namespace lucid::config

// What a model file takes from a training run's record (a checkpoint's train_args: each option's
// resolved value as text, train/train_options.h): the input size, the dataset, overlap_mask and the
// model option, resolved as `lucid train` resolves them (records of older runs hold "" for the
// defaults resolved at run time). Model loading reads only these, not the training's whole table of
// options; train_options.cpp declares data= and imgsz= with the same rules (absolute_dataset,
// default_train_imgsz, kDefaultTrainModel), and a unit test holds the two readings equal.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace lucid::engine {

struct RunRecordModel {
  int64_t imgsz = 0;  // rounded up to a multiple of 32 (config::stride_multiple)
  std::string data;   // absolute; the synthetic dataset's YAML where the record has none
  bool overlap_mask = true;
  std::string model;  // the run's model= option
};

// Every value of the record (but resume) must be text: otherwise an error naming `file` and the key.
RunRecordModel read_run_record(const nlohmann::ordered_json& record, const std::string& file);

// A dataset path as the record keeps it: absolute, so `lucid val` and resume work from any folder.
std::string absolute_dataset(const std::string& path);
// imgsz= when not given: 160 for the synthetic dataset, else 640.
int64_t default_train_imgsz(bool synthetic);
// model= when not given.
inline constexpr const char* kDefaultTrainModel = "yolo26n-seg.yaml";

}  // namespace lucid::engine

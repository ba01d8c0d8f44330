// What a weights file (or a YAML) from a stranger can make lucid allocate: overlapping zip entries
// are refused before any storage is read, an architecture is bounded in channels, kernel sizes and
// parameters before any layer is made, YAML aliases are refused past a node count, an imgsz from
// the file is range-checked, and weights that make every output NaN are said to.
#include <gtest/gtest.h>

#include <fstream>

#include "data_test_util.h"
#include "lucid/config/model_yaml.h"
#include "lucid/config/yaml_bounds.h"
#include "lucid/data/dataset.h"
#include "lucid/model/model.h"
#include "lucid/model/torch_zip.h"
#include "lucid/model/ultralytics_pt.h"
#include "lucid/predict/predictor.h"
#include "lucid/util/error.h"
#include "lucid/weights/model_source.h"
#include "pt_archive.h"
#include "user_error.h"

using namespace lucid;
using lucid::testing::error_of;
using lucid::testing::TempDir;

namespace {

void put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// `levels` anchors each listing the previous one ten times: 10^levels nodes once expanded.
std::string alias_bomb(int levels) {
  std::string y = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int k = 1; k <= levels; ++k) {
    const auto prev = "*a" + std::to_string(k - 1);
    y += "a" + std::to_string(k) + ": &a" + std::to_string(k) + " [";
    for (int j = 0; j < 10; ++j) y += (j ? ", " : "") + prev;
    y += "]\n";
  }
  return y;
}

// A model dict with one backbone row, then a row the builder refuses anyway: an unbounded first row
// is made (and allocated) before that error, a bounded one is refused at its own line.
std::string one_conv_model(const std::string& conv_args) {
  return R"({"nc": 2, "backbone": [[-1, 1, "Conv", )" + conv_args + R"(]], "head": [[-1, 1, "Unknown", []]]})";
}

}  // namespace

TEST(WeightsBounds, OverlappingZipEntriesAreRefusedBeforeAnyRead) {
  TempDir dir;
  std::vector<uint64_t> sizes;
  const int n = 64;
  const auto plain = [&](const std::string& pickle) {
    return std::vector<std::pair<std::string, std::string>>{
        {"archive/data.pkl", pickle}, {"archive/byteorder", "little"}, {"archive/version", "3\n"}};
  };
  lucid::testing::zip_nested(plain(""), "archive/data/", n, 1 << 16, sizes);  // the storage sizes
  const auto bytes = lucid::testing::zip_nested(plain(lucid::testing::buffers_checkpoint_pickle(sizes)),
                                                "archive/data/", n, 1 << 16, sizes);
  uint64_t total = 0;
  for (auto s : sizes) total += s;
  ASSERT_GT(total, 30 * bytes.size());  // what reading every storage once would cost
  const auto path = dir.str("nested.pt");
  put(path, bytes);
  const auto what = error_of([&] { model::read_ultralytics_pt(path); });
  EXPECT_EQ(what.rfind(path + ": not a readable PyTorch archive (entry 'archive/data/", 0), 0u) << what;
  EXPECT_NE(what.find("overlaps another"), std::string::npos) << what;
  // Entries side by side (the tiny checkpoint) still read.
  put(path, lucid::testing::tiny_checkpoint(lucid::testing::tiny_checkpoint_pickle()));
  EXPECT_EQ(model::read_ultralytics_pt(path).state.size(), 3u);
}

TEST(WeightsBounds, ArchitecturesAreBoundedBeforeAnyLayerIsMade) {
  const auto build = [](const std::string& text) {
    return error_of([&] { model::SegmentationModel m(config::model_spec_from_text(text, "w.pt (model yaml)")); });
  };
  auto what = build(one_conv_model("[16384, 3, 2]"));
  EXPECT_NE(what.find("w.pt (model yaml)"), std::string::npos) << what;
  EXPECT_NE(what.find("16384 output channels"), std::string::npos) << what;
  what = build(one_conv_model("[64, 100000, 1]"));
  EXPECT_NE(what.find("kernel size 100000"), std::string::npos) << what;
  what = build(one_conv_model("[4096, 31, 1]"));  // 12 M parameters, but its bound is 9.7e10
  EXPECT_NE(what.find("more than 1000000000 parameters"), std::string::npos) << what;
  what = build(R"({"nc": 2, "width_multiple": 1e300, "backbone": [[-1, 1, "Conv", [64, 3, 2]]], "head": []})");
  EXPECT_NE(what.find("depth and width multiples"), std::string::npos) << what;
  what = build(R"({"nc": 2, "reg_max": 100000000, "backbone": [[-1, 1, "Conv", [64, 3, 2]]], "head": []})");
  EXPECT_NE(what.find("reg_max must be from 1 to 256"), std::string::npos) << what;
  // The project's largest model stays within every bound.
  EXPECT_NO_THROW(model::SegmentationModel(config::load_model_spec("yolo26x-seg.yaml", 80)));
}

TEST(WeightsBounds, YamlAliasBombsAreRefused) {
  TempDir dir;
  // In a weights file's model dict: refused before the tree is walked.
  auto what = error_of([&] { config::model_spec_from_text(alias_bomb(7), "w.safetensors (metadata yaml)"); });
  EXPECT_NE(what.find("w.safetensors (metadata yaml):"), std::string::npos) << what;
  EXPECT_NE(what.find("expands to more than 1000000 nodes"), std::string::npos) << what;
  // In a dataset YAML.
  put(dir.str("data.yaml"), "path: .\ntrain: images\nval: images\nnames: {0: a}\n" + alias_bomb(7));
  what = error_of([&] { data::build_index(dir.str("data.yaml")); });
  EXPECT_NE(what.find(dir.str("data.yaml") + ":"), std::string::npos) << what;
  EXPECT_NE(what.find("expands to more than"), std::string::npos) << what;
  // A few aliases (as real files use them) are fine.
  EXPECT_NO_THROW(config::load_bounded_yaml(alias_bomb(4), "small.yaml"));
}

TEST(WeightsBounds, ImgszFromTheFileIsRangeChecked) {
  TempDir dir;
  torch::manual_seed(0);
  model::SegmentationModel m(config::load_model_spec("yolo26n-seg.yaml", 2));
  engine::write_weights_file(dir.str("w.safetensors"), *m, {"a", "b"}, 100000, false);
  const auto what = error_of([&] { engine::read_model_source("model", dir.str("w.safetensors")); });
  EXPECT_NE(what.find(dir.str("w.safetensors") + ": its imgsz 100000 (metadata) is not from 1 to 8192"),
            std::string::npos)
      << what;
  engine::write_weights_file(dir.str("ok.safetensors"), *m, {"a", "b"}, 640, false);
  EXPECT_EQ(engine::read_model_source("model", dir.str("ok.safetensors")).imgsz, 640);
}

TEST(WeightsBounds, WeightsThatMakeEveryOutputNanAreSaidTo) {
  torch::manual_seed(0);
  model::SegmentationModel m(config::load_model_spec("yolo26n-seg.yaml", 2));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : m->parameters()) p.fill_(3e38f);  // finite, but every sum overflows
  }
  engine::PredictOptions o;
  o.imgsz = 64;
  EXPECT_THROW(engine::predict_image(*m, torch::kCPU, lucid::testing::pattern(64, 64), o), engine::NonFiniteOutputs);
}

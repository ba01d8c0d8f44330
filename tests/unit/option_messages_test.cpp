// What options, weights and YAML a user gives can make lucid say: one line naming the option, the
// file or the variable at fault, never a library's text (docs/reliability.md, "Options, weights and
// messages"); and detections per image bounded by the network's candidates.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>

#include "data_test_util.h"
#include "lucid/config/model_yaml.h"
#include "lucid/config/yaml_bounds.h"
#include "lucid/data/dataset.h"
#include "lucid/dist/process_group.h"
#include "lucid/evaluate/validator.h"
#include "lucid/model/model.h"
#include "lucid/predict/predictor.h"
#include "lucid/train/freeze.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/util/memory.h"
#include "lucid/weights/model_source.h"
#include "user_error.h"

using namespace lucid;
using lucid::testing::error_of;
using lucid::testing::TempDir;

namespace {

bool one_line(const std::string& s) { return s.find('\n') == std::string::npos; }

model::SegmentationModel small_model() {
  torch::manual_seed(0);
  return model::SegmentationModel(config::load_model_spec("yolo26n-seg.yaml", 2));
}

// LUCID_AVAILABLE_MEMORY set for one scope.
struct AvailableMemory {
  explicit AvailableMemory(const char* v) { ::setenv("LUCID_AVAILABLE_MEMORY", v, 1); }
  ~AvailableMemory() { ::unsetenv("LUCID_AVAILABLE_MEMORY"); }
};

void put(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace

// conf=0 max_det=1000000000 on an 80x64 image at imgsz 320: at most one detection per candidate,
// and their masks made a chunk at a time, so the memory check asks for the windows and one chunk of
// planes: at most 1680 x 5120 + 3 x 81920 x 8 = 10.6 MB here. Before, every detection's float plane
// of the 320x256 input at once (333 kB each: 11.0 MB for 33 detections; 8.8 GB for a 160x128 image
// at imgsz 640), refused at 10.9 MB.
TEST(OptionMessages, DetectionsAreBoundedByTheCandidatesAndTheirMasksByTheChunk) {
  auto m = small_model();
  engine::PredictOptions o;
  o.imgsz = 320;
  o.conf = 0.0;
  o.max_det = 1000000000;
  o.mask_chunk_pixels = int64_t(1) << 18;  // 3 planes of the 320x256 input
  const data::Image image = lucid::testing::pattern(64, 80);
  engine::Prediction p;
  {
    const AvailableMemory memory("10900000");
    EXPECT_NO_THROW(p = engine::predict_image(*m, torch::kCPU, image, o));
  }
  const int64_t candidates = (320 / 8) * (256 / 8) + (320 / 16) * (256 / 16) + (320 / 32) * (256 / 32);
  EXPECT_GE(p.boxes.size(0), 33);  // so the old check asked for more than 10.9 MB
  EXPECT_LE(p.boxes.size(0), candidates);
  // The same detections as max_det at the candidate count: the clamp changes nothing.
  o.max_det = candidates;
  const auto q = engine::predict_image(*m, torch::kCPU, image, o);
  EXPECT_TRUE(torch::equal(p.boxes, q.boxes));
  EXPECT_TRUE(torch::equal(p.conf, q.conf));
}

// NMS keeps at most its candidates: max_det=1048576 (val's bound) gives what max_det = candidates
// gives, in both the single-label (predict) and multi-label (val) forms.
TEST(OptionMessages, NmsMaxDetBeyondTheCandidatesChangesNothing) {
  torch::manual_seed(3);
  auto pred = torch::rand({1, 4 + 3 + 2, 500});
  pred.narrow(1, 0, 2).mul_(200);
  pred.narrow(1, 2, 2).mul_(30);
  for (bool multi : {false, true}) {
    engine::NmsOptions a;
    a.conf = 0.0;
    a.nc = 3;
    a.xywh = true;
    a.multi_label = multi;
    a.max_det = 1048576;
    auto b = a;
    b.max_det = multi ? 1500 : 500;
    const auto x = engine::non_max_suppression(pred, a), y = engine::non_max_suppression(pred, b);
    EXPECT_TRUE(torch::equal(x[0], y[0])) << multi;
  }
}

// val refuses weights whose outputs are all NaN, by predict's rule (it reported zeros with exit 0).
TEST(OptionMessages, ValRefusesWeightsWhoseEveryOutputIsNan) {
  auto m = small_model();
  {
    torch::NoGradGuard no_grad;
    for (auto& p : m->parameters()) p.fill_(3e38f);
  }
  int served = 0;
  auto source = [&](engine::ValBatch& b) {
    if (served++) return false;
    b.images = torch::randint(0, 256, {1, 3, 64, 64}, torch::kUInt8);
    b.targets.batch_idx = torch::zeros({0});
    b.info = {{64, 64, {1.0, 1.0, 0, 0}, "a.jpg"}};
    return true;
  };
  engine::ValidatorOptions o;
  o.refuse_non_finite = true;
  EXPECT_THROW(engine::Validator(o).run(*m, torch::kCPU, source), engine::NonFiniteOutputs);
  served = 0;
  o.refuse_non_finite = false;  // training's validation: scored as zeros
  EXPECT_NO_THROW(engine::Validator(o).run(*m, torch::kCPU, source));
}

// LUCID_AVAILABLE_MEMORY=0 is zero bytes (it turned the check off); a malformed value names it.
TEST(OptionMessages, AvailableMemoryZeroIsZeroBytes) {
  {
    const AvailableMemory memory("0");
    EXPECT_EQ(util::available_memory_bytes(), 0u);
    auto m = small_model();
    engine::PredictOptions o;
    o.imgsz = 64;
    o.conf = 0.0;
    const auto what = error_of([&] { engine::predict_image(*m, torch::kCPU, lucid::testing::pattern(64, 64), o); });
    EXPECT_NE(what.find("0 bytes are available"), std::string::npos) << what;
  }
  for (const char* bad : {"", "12x", "-1", "99999999999999999999"}) {
    const AvailableMemory memory(bad);
    const auto what = error_of([] { util::available_memory_bytes(); });
    EXPECT_EQ(what.rfind(std::string("LUCID_AVAILABLE_MEMORY=") + bad + ":", 0), 0u) << what;
  }
}

// device=mps parsed as a PyTorch device and failed later with "not linked with support for mps".
TEST(OptionMessages, DeviceTypesOtherThanCpuAndCudaNameTheOption) {
  for (const char* spec : {"mps", "xpu", "meta", "mps:0"}) {
    const auto what = error_of([&] { util::device_name(spec); });
    EXPECT_EQ(what.rfind(std::string("option device=") + spec + ": expected cpu, cuda", 0), 0u) << what;
  }
  EXPECT_EQ(util::device_name("cpu"), "cpu");
  EXPECT_EQ(util::device_name("1"), "cuda:1");
}

// freeze=1000 froze every layer and the first backward failed with "element 0 of tensors does not
// require grad".
TEST(OptionMessages, FreezingEveryLayerIsRefused) {
  auto m = small_model();
  const auto what = error_of([&] { engine::freeze_layers(*m, engine::parse_freeze("1000"), "1000"); });
  EXPECT_EQ(what.rfind("option freeze=1000: freezes every one of the model's ", 0), 0u) << what;
  EXPECT_NE(what.find(" layers, so nothing would train"), std::string::npos) << what;
  auto n = small_model();
  EXPECT_NO_THROW(engine::freeze_layers(*n, engine::parse_freeze("10"), "10"));
}

// 100,000 nested lists or mappings gave yaml-cpp's "bad file".
TEST(OptionMessages, DeepYamlIsRefusedNamingTheFile) {
  const int depth = 100000;
  const std::string lists = std::string(depth, '[') + std::string(depth, ']');
  std::string maps;
  for (int i = 0; i < depth; ++i) maps += "{a: ";
  maps += "1" + std::string(depth, '}');
  for (const auto& text : {lists, maps}) {
    const auto what = error_of([&] { config::load_bounded_yaml(text, "deep.yaml"); });
    EXPECT_EQ(what.rfind("deep.yaml:1: the YAML nests lists or mappings more than 256 levels deep", 0), 0u) << what;
  }
  EXPECT_NO_THROW(config::load_bounded_yaml(std::string(200, '[') + std::string(200, ']'), "ok.yaml"));
}

// A list of a million class names was called an alias bomb; more names than a model's classes
// (below the node bound) were taken.
TEST(OptionMessages, LongNameListsAreCalledWhatTheyAre) {
  TempDir dir;
  auto names = [](int n) {
    std::string y = "path: .\ntrain: images\nval: images\nnames:\n";
    for (int i = 0; i < n; ++i) y += "  - c\n";
    return y;
  };
  put(dir.str("million.yaml"), names(1000000));
  auto what = error_of([&] { data::build_index(dir.str("million.yaml")); });
  EXPECT_NE(what.find(dir.str("million.yaml") + ":"), std::string::npos) << what;
  EXPECT_NE(what.find("holds more than 1000000 entries"), std::string::npos) << what;
  EXPECT_EQ(what.find("alias"), std::string::npos) << what;
  put(dir.str("many.yaml"), names(100001));
  what = error_of([&] { data::build_index(dir.str("many.yaml")); });
  EXPECT_EQ(what.rfind(dir.str("many.yaml") + ":", 0), 0u) << what;
  EXPECT_NE(what.find(": names: 100001 classes, more than the 100000 a model can have"), std::string::npos) << what;
}

// An imgsz of 100 stored in weights reached the network as it is ("Sizes of tensors must match").
TEST(OptionMessages, ImgszFromWeightsIsRoundedToTheStride) {
  TempDir dir;
  auto m = small_model();
  for (const auto& [stored, used] : std::vector<std::pair<int64_t, int64_t>>{{100, 128}, {33, 64}, {1, 32}}) {
    const auto path = dir.str("w" + std::to_string(stored) + ".safetensors");
    engine::write_weights_file(path, *m, {"a", "b"}, stored, false);
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(engine::read_model_source("model", path).imgsz, used);
    const auto err = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find(path + ": its metadata imgsz=" + std::to_string(stored)), std::string::npos) << err;
  }
}

// A rank that cannot reach its rendezvous printed c10's exception with its 16 "frame #N" lines.
TEST(OptionMessages, AnUnreachableRendezvousIsOneLineNamingTheAddress) {
  if (!dist::gloo_built()) GTEST_SKIP() << "no Gloo in this build";
  dist::Member member;
  member.rank = 1;
  member.world = 2;
  member.master_port = 9;  // discard: nobody listens
  ::testing::internal::CaptureStderr();
  const auto what = error_of([&] { dist::join(member, torch::kCPU, std::chrono::milliseconds(1500)); });
  const auto logged = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(logged.find("frame #"), std::string::npos) << logged;
  EXPECT_EQ(what.rfind("rank 1 of 2: cannot reach the rendezvous at MASTER_ADDR=127.0.0.1 MASTER_PORT=9", 0), 0u)
      << what;
  EXPECT_TRUE(one_line(what)) << what;
  EXPECT_EQ(what.find("frame #"), std::string::npos) << what;
  EXPECT_EQ(dist::world(), nullptr);
}

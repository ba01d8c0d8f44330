// Model files of every kind (weights/model_source.h): told apart by content, wrong kinds refused with
// one clear error, exported weights and training checkpoints loading back; the model dict round
// trip; weight transfer across class counts; frozen layers' BatchNorm; resume's option refusal.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data_test_util.h"
#include "lucid/deploy/compiled_model.h"
#include "lucid/deploy/load_network.h"
#include "lucid/model/safetensors.h"
#include "lucid/model/transfer.h"
#include "lucid/train/freeze.h"
#include "lucid/train/train_options.h"
#include "lucid/util/error.h"
#include "lucid/weights/checkpoint.h"
#include "lucid/weights/model_source.h"
#include "lucid/weights/run_record.h"

using namespace lucid;
using lucid::testing::TempDir;

namespace {

void put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

model::SegmentationModel small_model(int nc, uint64_t seed = 0) {
  torch::manual_seed(seed);
  return model::SegmentationModel(config::load_model_spec("yolo26n-seg.yaml", nc));
}

// The error a model file gets: one UserError naming option and file, never a library's message.
std::string refusal(const std::string& path) {
  try {
    engine::read_model_source("model", path);
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << path << " was accepted";
  return "";
}

void expect_clear(const std::string& what, const std::string& path) {
  EXPECT_NE(what.find(path), std::string::npos) << what;
  for (const char* leak : {"json.exception", "invalid YAML", "unexpected value", "escape", "bad header", "map::at"})
    EXPECT_EQ(what.find(leak), std::string::npos) << what;
}

engine::LoopState run_state(int nc) {
  engine::LoopState s;
  s.args = {{"model", "yolo26n-seg.yaml"}, {"imgsz", "96"}, {"data", "d/data.yaml"}};
  for (int i = 0; i < nc; ++i) s.names.push_back("shape" + std::to_string(i));
  return s;
}

}  // namespace

TEST(ModelSpecText, RebuildsTheSameModelFromItsYaml) {
  for (const char* name : {"yolo26n-seg.yaml", "yolov8s-seg.yaml"}) {
    const auto spec = config::load_model_spec(name, 3);
    const auto again = config::model_spec_from_text(spec.yaml, "stored");
    EXPECT_EQ(again.nc, 3);
    EXPECT_EQ(again.scale, spec.scale);
    EXPECT_EQ(again.name, spec.name);
    EXPECT_EQ(again.depth, spec.depth);
    EXPECT_EQ(again.width, spec.width);
    EXPECT_EQ(again.max_channels, spec.max_channels);
    EXPECT_EQ(again.end2end, spec.end2end);
    EXPECT_EQ(again.reg_max, spec.reg_max);
    EXPECT_EQ(again.yaml, spec.yaml);
    model::SegmentationModel a(spec), b(again);
    auto sa = model::state_dict(*a), sb = model::state_dict(*b);
    ASSERT_EQ(sa.size(), sb.size()) << name;
    for (size_t i = 0; i < sa.size(); ++i) {
      EXPECT_EQ(sa[i].first, sb[i].first);
      EXPECT_EQ(sa[i].second.sizes(), sb[i].second.sizes()) << sa[i].first;
    }
  }
  // The nc override rewrites the stored dict too; a dict without layers is an error naming its source.
  EXPECT_EQ(config::model_spec_from_text(config::load_model_spec("yolo26n-seg.yaml").yaml, "s", 7).nc, 7);
  EXPECT_THROW(config::model_spec_from_text(R"({"nc": 2})", "w.pt (model yaml)"), UserError);
  EXPECT_THROW(config::model_spec_from_text("[1, 2", "w.pt (model yaml)"), UserError);
}

TEST(ModelFile, KindsAreToldApartByContent) {
  TempDir dir;
  auto m = small_model(3);
  engine::write_weights_file(dir.str("w.safetensors"), *m, {"a", "b", "c"}, 128, /*half=*/true);
  engine::save_checkpoint(dir.str("last.safetensors"), *m, &*m, nullptr, run_state(3));
  put(dir.str("w.bin"), bytes_of(dir.str("w.safetensors")));  // the content decides, not the name
  using K = engine::ModelFileKind;
  EXPECT_EQ(engine::detect_model_file("model", "yolo26n-seg.yaml"), K::Yaml);
  EXPECT_EQ(engine::detect_model_file("model", dir.str("w.safetensors")), K::Weights);
  EXPECT_EQ(engine::detect_model_file("model", dir.str("w.bin")), K::Weights);
  EXPECT_EQ(engine::detect_model_file("model", dir.str("last.safetensors")), K::TrainingCheckpoint);
}

TEST(ModelFile, WrongKindsOfFileAreClearErrors) {
  TempDir dir;
  put(dir.str("w.jpg"), std::string("\xFF\xD8\xFF\xE0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00", 20));
  auto what = refusal(dir.str("w.jpg"));
  expect_clear(what, dir.str("w.jpg"));
  EXPECT_NE(what.find("not a model YAML, .pt, or .safetensors file"), std::string::npos) << what;
  put(dir.str("notes.txt"), "nc: 3\nthese are notes\n");
  expect_clear(refusal(dir.str("notes.txt")), dir.str("notes.txt"));
  put(dir.str("short"), "x");
  expect_clear(refusal(dir.str("short")), dir.str("short"));
  expect_clear(refusal(dir.str("missing.safetensors")), dir.str("missing.safetensors"));
  // Truncated weights, with and without their extension.
  auto m = small_model(2);
  engine::write_weights_file(dir.str("full.safetensors"), *m, {}, 0, true);
  const auto full = bytes_of(dir.str("full.safetensors"));
  put(dir.str("cut.safetensors"), full.substr(0, full.size() / 2));
  expect_clear(refusal(dir.str("cut.safetensors")), dir.str("cut.safetensors"));
  put(dir.str("cut"), full.substr(0, 100));
  expect_clear(refusal(dir.str("cut")), dir.str("cut"));
  // A zip archive that is not a PyTorch checkpoint, a .pt that is text.
  put(dir.str("a.pt"), "not a checkpoint\n");
  expect_clear(refusal(dir.str("a.pt")), dir.str("a.pt"));
  // A compiled package is for prediction only; a .pt2 that is not one is named as such.
  put(dir.str("p.pt2"), std::string("PK\x03\x04 not a package"));
  auto pt2 = refusal(dir.str("p.pt2"));
  expect_clear(pt2, dir.str("p.pt2"));
  EXPECT_NE(pt2.find("compiled package"), std::string::npos) << pt2;
  for (const auto& f : {dir.str("p.pt2"), dir.str("missing.pt2")}) {
    try {
      engine::load_network("model", f, torch::kCPU, false);
      ADD_FAILURE() << f << " was loaded as a compiled package";
    } catch (const UserError& e) {
      expect_clear(e.what(), f);
    }
  }
  // A YAML model file that is not a model.
  put(dir.str("m.yaml"), "- just\n- a list\n");
  EXPECT_THROW(engine::read_model_source("model", dir.str("m.yaml")), UserError);
  // A YAML holds no weights to validate or predict with.
  try {
    engine::load_inference_model("model", "yolo26n-seg.yaml", torch::kCPU);
    ADD_FAILURE() << "a YAML was accepted as trained weights";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("no trained weights"), std::string::npos) << e.what();
  }
}

TEST(ModelFile, ExportedWeightsLoadBack) {
  TempDir dir;
  auto m = small_model(3, 5);
  const std::vector<std::string> names{"ellipse", "rectangle", "star"};
  for (bool half : {true, false}) {
    const auto path = dir.str(half ? "h.safetensors" : "f.safetensors");
    engine::write_weights_file(path, *m, names, 160, half);
    auto s = engine::read_model_source("model", path);
    EXPECT_EQ(s.kind, engine::ModelFileKind::Weights);
    EXPECT_EQ(s.names, names);
    EXPECT_EQ(s.imgsz, 160);
    ASSERT_TRUE(s.spec);
    EXPECT_EQ(s.spec->nc, 3);
    EXPECT_EQ(s.weights.at("model.0.conv.weight").scalar_type(), half ? torch::kHalf : torch::kFloat);
    auto loaded = engine::load_inference_model("model", path, torch::kCPU);
    auto a = model::state_dict(*m), b = model::state_dict(*loaded.model);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      auto want =
          half && a[i].second.is_floating_point() ? a[i].second.to(torch::kHalf).to(a[i].second.dtype()) : a[i].second;
      EXPECT_TRUE(torch::equal(want, b[i].second)) << a[i].first;
    }
  }
  // Weights without the model dict need a YAML beside them.
  model::write_safetensors(dir.str("bare.safetensors"), model::state_dict(*m));
  auto bare = engine::read_model_source("pretrained", dir.str("bare.safetensors"));
  EXPECT_FALSE(bare.spec);
  EXPECT_THROW(bare.require_spec(), UserError);
}

// Model loading reads a run record's imgsz, data, overlap_mask and model itself (weights/run_record.h),
// without the training's options: the values must be those `lucid train` resolves from the record.
TEST(RunRecord, ModelValuesAreThoseTheTrainingResolves) {
  using Record = nlohmann::ordered_json;
  const std::vector<Record> records = {
      Record::object(),
      {{"data", ""}, {"imgsz", ""}, {"model", "yolo26n-seg.yaml"}},
      {{"model", "yolov8s-seg.yaml"}, {"imgsz", "96"}, {"data", "d/data.yaml"}, {"overlap_mask", "False"}},
      {{"imgsz", "650"}, {"data", "d/data.yaml"}, {"overlap_mask", "true"}},
      {{"no_longer_declared", "x"}, {"imgsz", "64"}, {"resume", "True"}},
  };
  for (const auto& record : records) {
    const auto run = engine::read_run_record(record, "ckpt");
    const auto settings = engine::settings_from_record(record, "ckpt");
    EXPECT_EQ(run.imgsz, settings.imgsz()) << record.dump();
    EXPECT_EQ(run.data, settings.data) << record.dump();
    EXPECT_EQ(run.overlap_mask, settings.loader.overlap_mask) << record.dump();
    EXPECT_EQ(run.model, settings.model) << record.dump();
  }
  // Refused by both, naming the file: a value that is not text, an imgsz out of range, a flag that is none.
  for (const Record& bad : {Record{{"seed", 0}}, Record{{"imgsz", "0"}}, Record{{"overlap_mask", "maybe"}}}) {
    EXPECT_THROW(engine::read_run_record(bad, "ckpt"), UserError) << bad.dump();
    EXPECT_THROW(engine::settings_from_record(bad, "ckpt"), UserError) << bad.dump();
  }
}

TEST(ModelFile, TrainingCheckpointsGiveTheirEmaAndRunSettings) {
  TempDir dir;
  auto m = small_model(3, 1), ema = small_model(3, 2);
  engine::save_checkpoint(dir.str("last.safetensors"), *m, &*ema, nullptr, run_state(3));
  engine::save_checkpoint(dir.str("best.safetensors"), *m, &*ema, nullptr, run_state(3),
                          engine::CheckpointContent::EmaOnly);
  for (const char* f : {"last.safetensors", "best.safetensors"}) {
    auto s = engine::read_model_source("model", dir.str(f));
    EXPECT_EQ(s.kind, engine::ModelFileKind::TrainingCheckpoint);
    EXPECT_EQ(s.names.size(), 3u);
    EXPECT_EQ(s.imgsz, 96);
    // A relative data path (records of older runs) is read against the working directory.
    EXPECT_EQ(s.data, std::filesystem::absolute("d/data.yaml").string());
    for (auto& [k, v] : model::state_dict(*ema)) EXPECT_TRUE(torch::equal(s.weights.at(k), v)) << f << " " << k;
  }
  // best keeps the EMA only: smaller, and no resume from it.
  EXPECT_LT(std::filesystem::file_size(dir.str("best.safetensors")) * 3,
            std::filesystem::file_size(dir.str("last.safetensors")) * 2);
  try {
    engine::load_checkpoint(dir.str("best.safetensors"), *m, &*ema, nullptr);
    ADD_FAILURE() << "resumed from an EMA-only checkpoint";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("weights/last.safetensors"), std::string::npos) << e.what();
  }
}

TEST(Transfer, MatchingNamesAndShapesOnlyAsTheReference) {
  auto pretrained = small_model(3, 1), target = small_model(5, 2);
  std::map<std::string, torch::Tensor> weights;
  for (auto& [k, v] : model::state_dict(*pretrained)) weights.emplace(k, v.clone());
  auto before = model::state_dict(*target);
  std::map<std::string, torch::Tensor> initial;
  for (auto& [k, v] : before) initial.emplace(k, v.clone());
  const auto r = model::transfer_weights(*target, weights);
  EXPECT_EQ(r.total, static_cast<int64_t>(before.size()));
  EXPECT_EQ(r.transferred + static_cast<int64_t>(r.kept.size()), r.total);
  // Kept: exactly the tensors whose shape follows nc, i.e. the class branches' last convolutions
  // (one-to-many and one-to-one, three levels, weight and bias) and the semantic output.
  std::vector<std::string> nc_shaped;
  for (auto& [k, v] : before)
    if (weights.at(k).sizes() != v.sizes()) nc_shaped.push_back(k);
  EXPECT_EQ(r.kept, nc_shaped);
  EXPECT_GE(r.kept.size(), 12u);
  for (const auto& k : r.kept)
    EXPECT_TRUE(k.find("cv3.") != std::string::npos || k.find(".proto.") != std::string::npos) << k;
  for (auto& [k, v] : model::state_dict(*target)) {
    const bool kept = std::find(r.kept.begin(), r.kept.end(), k) != r.kept.end();
    EXPECT_TRUE(torch::equal(v, kept ? initial.at(k) : weights.at(k))) << k;
  }
  // The same class count: everything.
  auto same = small_model(3, 3);
  EXPECT_EQ(model::transfer_weights(*same, weights).transferred, r.total);
}

TEST(Freeze, FrozenLayersBatchNormStaysInEvalMode) {
  EXPECT_EQ(engine::parse_freeze("3"), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(engine::parse_freeze("0,4"), (std::vector<int>{0, 4}));
  EXPECT_TRUE(engine::parse_freeze("").empty());
  EXPECT_THROW(engine::parse_freeze("two"), UserError);
  EXPECT_THROW(engine::parse_freeze("1,x"), UserError);
  auto m = small_model(2);
  const auto frozen = engine::parse_freeze("3");
  engine::freeze_layers(*m, frozen);
  engine::train_mode(*m, frozen);
  int frozen_bn = 0, training_bn = 0;
  for (const auto& sub : m->named_modules("", false)) {
    if (!sub.value()->as<torch::nn::BatchNorm2d>()) continue;
    const bool in_frozen = sub.key().rfind("model.0.", 0) == 0 || sub.key().rfind("model.1.", 0) == 0 ||
                           sub.key().rfind("model.2.", 0) == 0;
    EXPECT_EQ(sub.value()->is_training(), !in_frozen) << sub.key();
    (in_frozen ? frozen_bn : training_bn)++;
  }
  EXPECT_GT(frozen_bn, 0);
  EXPECT_GT(training_bn, 0);
  for (const auto& p : m->named_parameters())
    EXPECT_EQ(p.value().requires_grad(), p.key().rfind("model.0.", 0) != 0 && p.key().rfind("model.1.", 0) != 0 &&
                                             p.key().rfind("model.2.", 0) != 0 && p.value().requires_grad())
        << p.key();
  // A training forward pass leaves the frozen statistics as they were and moves the others.
  auto stats = [&](const std::string& name) {
    for (auto& [k, v] : model::state_dict(*m))
      if (k == name) return v.clone();
    return torch::Tensor();
  };
  const auto frozen_before = stats("model.0.bn.running_mean"), trained_before = stats("model.4.cv1.bn.running_mean");
  ASSERT_TRUE(frozen_before.defined() && trained_before.defined());
  m->forward(torch::rand({2, 3, 64, 64}));
  EXPECT_TRUE(torch::equal(stats("model.0.bn.running_mean"), frozen_before));
  EXPECT_FALSE(torch::equal(stats("model.4.cv1.bn.running_mean"), trained_before));
}

TEST(ResumeOptions, OptionsThatResumeWouldIgnoreAreRefused) {
  auto parsed = [](std::vector<std::string> tokens) {
    auto o = engine::train_options();
    o.parse(tokens);
    return o;
  };
  const std::string ckpt = "runs/a/weights/last.safetensors";
  const nlohmann::ordered_json run_args = {{"epochs", "2"}, {"data", ""}, {"imgsz", "64"}};
  auto refuse = [&](std::vector<std::string> tokens) {
    engine::refuse_options_ignored_by_resume(parsed(tokens), run_args, "runs/a", ckpt);
  };
  try {
    refuse({"resume=" + ckpt, "imgsz=96"});
    ADD_FAILURE() << "imgsz= beside resume= was accepted";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("option imgsz=96"), std::string::npos) << what;
    EXPECT_NE(what.find("imgsz=64"), std::string::npos) << what;
    EXPECT_NE(what.find("model=" + ckpt), std::string::npos) << what;
  }
  EXPECT_THROW(refuse({"resume=" + ckpt, "data=d.yaml"}), UserError);
  EXPECT_THROW(refuse({"resume=" + ckpt, "lr0=0.02"}), UserError);  // a default the run kept
  EXPECT_THROW(refuse({"resume=" + ckpt, "project=elsewhere"}), UserError);
  EXPECT_THROW(refuse({"resume=" + ckpt, "name=b"}), UserError);
  // The run's own values and folder are not ignored; how stages execute stays the resuming
  // command's choice; project= finds the run for resume=True.
  EXPECT_NO_THROW(refuse({"resume=" + ckpt, "epochs=2", "imgsz=64", "lr0=0.01", "project=runs", "name=a"}));
  // Compared as resolved: imgsz=50 is rounded up to the run's 64, a default written out is the default.
  ::testing::internal::CaptureStderr();
  EXPECT_NO_THROW(refuse({"resume=" + ckpt, "imgsz=50", "lr0=1e-2", "cos_lr=false", "batch=8"}));
  ::testing::internal::GetCapturedStderr();
  // epochs and device may change on resume (the run is extended or shortened, or moves).
  EXPECT_NO_THROW(refuse({"resume=" + ckpt, "epochs=3", "device=cpu"}));
  EXPECT_NO_THROW(refuse({"resume=" + ckpt, "capture_network=True", "stage_times=True", "gpu_augment=True"}));
  EXPECT_NO_THROW(refuse({"resume=True", "project=runs"}));
}

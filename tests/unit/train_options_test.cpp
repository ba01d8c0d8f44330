// The train options beyond the basics: time, fraction, single_cls, rect, multi_scale, cls_pw,
// mask_ratio, dropout, AutoBatch, cfg files and the validation options of train.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "data_test_util.h"
#include "lucid/config/cfg_file.h"
#include "lucid/config/nms_option.h"
#include "lucid/data/dataset.h"
#include "lucid/data/fraction.h"
#include "lucid/data/image_io.h"
#include "lucid/data/loader.h"
#include "lucid/loss/class_weights.h"
#include "lucid/optim/schedule.h"
#include "lucid/train/autobatch.h"
#include "lucid/train/multi_scale.h"
#include "lucid/train/time_budget.h"
#include "lucid/train/train_options.h"
#include "lucid/util/error.h"

using lucid::UserError;
using lucid::testing::expect_user_error;
namespace engine = lucid::engine;
namespace data = lucid::data;

namespace {

engine::TrainSettings settings(const std::vector<std::string>& tokens) {
  auto o = engine::train_options();
  o.parse(tokens);
  return engine::TrainSettings::from(o);
}

}  // namespace

TEST(TrainOptions, DefaultsAreTheReferences) {
  const auto s = settings({});
  EXPECT_EQ(s.time, 0);
  EXPECT_EQ(s.fraction, "1.0");
  EXPECT_FALSE(s.index.single_cls);
  EXPECT_FALSE(s.loader.rect);
  EXPECT_EQ(s.multi_scale, 0);
  EXPECT_EQ(s.loader.mask_ratio, 4);
  EXPECT_EQ(s.cls_pw, 0);
  EXPECT_EQ(s.dropout, 0);
  EXPECT_EQ(s.split, "val");
  EXPECT_EQ(s.validator.conf, 0.001);  // the reference's conf=None in training validation
  EXPECT_EQ(s.validator.iou, 0.7);
  EXPECT_EQ(s.validator.max_det, 300);
  EXPECT_FALSE(s.save_json);
  EXPECT_EQ(s.batch_option.autobatch_fraction, 0);
  EXPECT_FALSE(s.validator.nms.has_value());  // nms=None: validation through the one-to-many head and NMS
  EXPECT_EQ(engine::train_record(s, engine::RecordScope::Checkpoint)["nms"], "None");
}

// Each default is declared once: the table's default of every option is the value its binding holds
// in a default-constructed TrainSettings (the component's own, or the settings member's initializer),
// but for those resolved at run time (an empty default).
TEST(TrainOptions, EveryDeclaredDefaultIsTheComponentsOwn) {
  const engine::TrainSettings defaults{};
  int resolved = 0;
  for (const auto& f : engine::train_fields().fields()) {
    if (f.spec.default_value.empty()) {
      ++resolved;
      continue;
    }
    EXPECT_EQ(f.spec.default_value, f.write(defaults)) << f.spec.key;
  }
  EXPECT_GT(resolved, 0);
  EXPECT_EQ(engine::train_fields().options().str("workers"), "8");  // training's own, not the loader's 4
  EXPECT_EQ(engine::train_fields().options().str("hsv_h"), "0.015");
}

TEST(TrainOptions, BadValuesNameTheirOption) {
  expect_user_error([] { settings({"time=-1"}); }, {"time"});
  expect_user_error([] { settings({"time=abc"}); }, {"time=abc"});
  expect_user_error([] { settings({"fraction=0"}); }, {"fraction=0"});
  expect_user_error([] { settings({"fraction=1.5"}); }, {"fraction=1.5"});
  expect_user_error([] { settings({"fraction=x"}); }, {"fraction=x"});
  expect_user_error([] { settings({"fraction=[0,0.5]"}); }, {"fraction=[0,0.5]", "train"});
  expect_user_error([] { settings({"fraction=[0.5]"}); }, {"fraction=[0.5]"});
  expect_user_error([] { settings({"fraction=[0.5,2.5]"}); }, {"fraction=[0.5,2.5]"});
  expect_user_error([] { settings({"batch=0"}); }, {"batch=0"});
  expect_user_error([] { settings({"batch=-2"}); }, {"batch=-2"});
  expect_user_error([] { settings({"batch=1.5"}); }, {"batch=1.5"});
  expect_user_error([] { settings({"batch=nan"}); }, {"batch=nan"});
  expect_user_error([] { settings({"multi_scale=1.5"}); }, {"multi_scale"});
  expect_user_error([] { settings({"cls_pw=-0.1"}); }, {"cls_pw"});
  expect_user_error([] { settings({"dropout=2"}); }, {"dropout"});
  expect_user_error([] { settings({"mask_ratio=0"}); }, {"mask_ratio=0"});
  expect_user_error([] { settings({"mask_ratio=3"}); }, {"mask_ratio"});
  expect_user_error([] { settings({"split=train"}); }, {"split"});
  expect_user_error([] { settings({"conf=2"}); }, {"conf"});
  expect_user_error([] { settings({"iou=-1"}); }, {"iou"});
  expect_user_error([] { settings({"max_det=0"}); }, {"max_det=0"});
  expect_user_error([] { settings({"single_cls=maybe"}); }, {"single_cls=maybe"});
  expect_user_error([] { settings({"rect=2"}); }, {"rect=2"});
  expect_user_error([] { settings({"save_json=x"}); }, {"save_json=x"});
  expect_user_error([] { settings({"nms=maybe"}); }, {"nms=maybe", "None, True or False"});
}

TEST(NmsOption, TheReferencesValuesAndTheDeprecatedEnd2end) {
  namespace config = lucid::config;
  EXPECT_EQ(settings({"nms=False"}).validator.nms, std::optional<bool>(false));
  EXPECT_EQ(settings({"nms=true"}).validator.nms, std::optional<bool>(true));
  EXPECT_EQ(settings({"nms=None"}).validator.nms, std::nullopt);
  EXPECT_EQ(engine::train_record(settings({"nms=False"}), engine::RecordScope::ArgsYaml)["nms"], "False");
  // end2end=True is nms=False whatever nms says; end2end=False keeps only nms=True.
  using Args = std::vector<std::string>;
  EXPECT_EQ(config::map_deprecated_end2end({"epochs=3", "end2end=True"}), (Args{"epochs=3", "nms=False"}));
  EXPECT_EQ(config::map_deprecated_end2end({"nms=True", "end2end=True"}), (Args{"nms=True", "nms=False"}));
  EXPECT_EQ(config::map_deprecated_end2end({"end2end=False"}), (Args{"nms=None"}));
  EXPECT_EQ(config::map_deprecated_end2end({"end2end=False", "nms=True"}), (Args{"nms=True", "nms=True"}));
  EXPECT_EQ(config::map_deprecated_end2end({"end2end=False", "nms=False"}), (Args{"nms=False", "nms=None"}));
  EXPECT_EQ(config::map_deprecated_end2end({"end2end=None", "imgsz=64"}), (Args{"imgsz=64"}));
  EXPECT_EQ(config::map_deprecated_end2end({"imgsz=64"}), (Args{"imgsz=64"}));
  expect_user_error([] { config::map_deprecated_end2end({"end2end=maybe"}); }, {"end2end=maybe"});
}

TEST(TrainOptions, BatchCountsAndAutoBatchFractions) {
  EXPECT_EQ(settings({"batch=12"}).batch(), 12);
  EXPECT_EQ(settings({"batch=12"}).batch_option.autobatch_fraction, 0);
  EXPECT_EQ(settings({"batch=-1"}).batch_option.autobatch_fraction, 0.6);  // the reference's default fraction
  EXPECT_EQ(settings({"batch=0.7"}).batch_option.autobatch_fraction, 0.7);
  EXPECT_EQ(settings({"batch=0.7"}).batch(), 0);  // resolved by the command before the fit
  // The batch AutoBatch chooses goes into every binding of batch=, and the record holds it.
  auto chosen = settings({"batch=-1"});
  chosen.set_batch(24);
  EXPECT_EQ(chosen.batch(), 24);
  EXPECT_EQ(chosen.schedule.batch, 24);
  EXPECT_EQ(chosen.batch_option.autobatch_fraction, 0);
  EXPECT_EQ(engine::train_record(chosen, engine::RecordScope::Checkpoint)["batch"], "24");
  EXPECT_EQ(engine::train_record(settings({"batch=0.7"}), engine::RecordScope::ArgsYaml)["batch"], "0.7");
  EXPECT_EQ(settings({"time=1.5"}).time, 1.5);
  EXPECT_EQ(settings({"mask_ratio=2", "dropout=0.2"}).loader.mask_ratio, 2);
}

TEST(DatasetFraction, RatiosCountsAndSplitLists) {
  using data::DatasetFraction;
  const auto half = DatasetFraction::parse("0.5");
  EXPECT_EQ(half.keep("train", 10), 5);
  EXPECT_EQ(half.keep("train", 5), 2);                             // round(2.5) = 2, half to even as Python's round
  EXPECT_EQ(half.keep("train", 7), 4);                             // round(3.5) = 4
  EXPECT_EQ(half.keep("val", 10), 10);                             // a scalar applies to train only
  EXPECT_EQ(DatasetFraction::parse("0.01").keep("train", 10), 1);  // at least one image
  EXPECT_EQ(DatasetFraction::parse("4").keep("train", 10), 4);     // an integer > 1 is a count
  EXPECT_EQ(DatasetFraction::parse("40").keep("train", 10), 10);
  EXPECT_EQ(DatasetFraction::parse("1").keep("train", 10), 10);  // 1 is all, not one image
  EXPECT_TRUE(DatasetFraction::parse("1.0").all());
  const auto list = DatasetFraction::parse("[0.5, 3, 0]");
  EXPECT_EQ(list.keep("train", 10), 5);
  EXPECT_EQ(list.keep("val", 10), 3);
  EXPECT_EQ(list.keep("test", 10), 1);  // max(1, round(0)) as the reference's get_img_files
  EXPECT_EQ(list.keep("other", 10), 10);
  EXPECT_EQ(DatasetFraction::parse("[1, 0.25]").keep("val", 8), 2);
  EXPECT_FALSE(list.all());
}

// A count past int64 (once cast to a negative count, then a libstdc++ vector error) keeps every
// image, as the reference's files[:count].
TEST(DatasetFraction, CountsPastInt64KeepEveryImage) {
  using data::DatasetFraction;
  EXPECT_EQ(DatasetFraction::parse("99999999999999999999").keep("train", 10), 10);
  EXPECT_EQ(DatasetFraction::parse("[99999999999999999999, 1]").keep("train", 10), 10);
  EXPECT_EQ(DatasetFraction::parse("[1, 99999999999999999999]").keep("val", 7), 7);
}

namespace {

// A YOLO dataset of `n` 32x48 images with one box label each, class i % 3 (or `cls` for image 0).
std::string tiny_dataset(const std::filesystem::path& root, int n, int cls0 = 0) {
  for (int i = 0; i < n; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "%02d", i);
    lucid::testing::write((root / "images" / "train" / (std::string(name) + ".jpg")).string(),
                          lucid::testing::jpeg_bytes(32, 48));
    lucid::testing::write((root / "labels" / "train" / (std::string(name) + ".txt")).string(),
                          c10::str(i == 0 ? cls0 : i % 3, " 0.5 0.5 0.2 0.2\n"));
  }
  const auto yaml = (root / "data.yaml").string();
  lucid::testing::write(yaml,
                        "path: " + root.string() + "\ntrain: images/train\nval: images/train\nnames: [a, b, c]\n");
  return yaml;
}

}  // namespace

TEST(DatasetFraction, TheIndexKeepsTheFirstSortedImagesAndCallsNoLabelAnOrphan) {
  lucid::testing::TempDir dir;
  const auto yaml = tiny_dataset(dir.path(), 10);
  data::IndexOptions io;
  io.fraction = data::DatasetFraction::parse("0.3");
  std::vector<std::string> problems;
  io.on_problem = [&](const data::Problem& p) { problems.push_back(p.str()); };
  const auto index = data::build_index(yaml, io);
  const auto& images = index.find("train")->images;
  ASSERT_EQ(images.size(), 3u);
  EXPECT_NE(images[0].path.find("00.jpg"), std::string::npos);
  EXPECT_NE(images[2].path.find("02.jpg"), std::string::npos);
  EXPECT_EQ(index.find("train")->counts.orphan_labels, 0);
  for (const auto& p : problems) EXPECT_EQ(p.find("orphan"), std::string::npos) << p;
}

TEST(SingleCls, EveryClassBecomesItemAndClassIdsBeyondNcAreAccepted) {
  lucid::testing::TempDir dir;
  const auto yaml = tiny_dataset(dir.path(), 4, /*cls0=*/7);
  EXPECT_EQ(data::build_index(yaml).find("train")->images.size(), 3u);  // class 7 >= nc: image skipped
  data::IndexOptions io;
  io.single_cls = true;
  const auto index = data::build_index(yaml, io);
  EXPECT_EQ(index.names, std::vector<std::string>{"item"});
  ASSERT_EQ(index.find("train")->images.size(), 4u);
  for (const auto& rec : index.find("train")->images)
    for (const auto& inst : rec.instances) EXPECT_EQ(inst.cls, 0);
}

TEST(CfgFile, TheFileFillsOptionsAndTheCommandLineWins) {
  lucid::testing::TempDir dir;
  const auto cfg = (dir.path() / "opts.yaml").string();
  lucid::testing::write(cfg, "# options\nepochs: 7\nimgsz: 96\ntime:\nfreeze: [0, 1]\ncfg: other.yaml\nrect: true\n");
  auto o = engine::train_options();
  lucid::config::parse_with_cfg_file(o, {"cfg=" + cfg, "epochs=3"});
  EXPECT_EQ(o.str("epochs"), "3");  // the command line wins, wherever it stands
  EXPECT_EQ(o.str("imgsz"), "96");
  EXPECT_EQ(o.str("time"), "");
  EXPECT_EQ(o.str("freeze"), "0,1");
  EXPECT_TRUE(o.flag("rect"));
  EXPECT_TRUE(o.given("imgsz"));
  const auto s = engine::TrainSettings::from(o);
  EXPECT_EQ(s.imgsz(), 96);
  EXPECT_EQ(s.frozen, (std::vector<int>{0, 1}));
}

// An Ultralytics run's args.yaml: the reference's keys lucid train does not use are ignored (named
// on one line), YAML's true/false are lucid's True/False, null keeps the default; a key of neither
// is still an error.
TEST(CfgFile, AnUltralyticsArgsYamlIsAccepted) {
  lucid::testing::TempDir dir;
  const auto cfg = (dir.path() / "args.yaml").string();
  lucid::testing::write(cfg,
                        "task: segment\nmode: train\nmodel: yolo26n-seg.yaml\nepochs: 3\nresume: false\n"
                        "cache: false\nfreeze: null\nsave_dir: runs/segment/train\nshow: false\nrect: true\n"
                        "tracker: botsort.yaml\ncfg: null\nsource: null\n");
  auto o = engine::train_options();
  testing::internal::CaptureStdout();
  lucid::config::parse_with_cfg_file(o, {"cfg=" + cfg},
                                     [](const lucid::config::Options& x) { engine::TrainSettings::from(x); });
  const auto out = testing::internal::GetCapturedStdout();
  EXPECT_NE(
      out.find(
          "the reference's keys this command does not use, ignored: task, mode, save_dir, show, tracker, source\n"),
      std::string::npos)
      << out;
  EXPECT_EQ(o.str("epochs"), "3");
  EXPECT_EQ(o.str("resume"), "False");
  EXPECT_EQ(o.str("cache"), "False");
  EXPECT_EQ(o.str("rect"), "True");
  const auto s = engine::TrainSettings::from(o);
  EXPECT_TRUE(s.frozen.empty());
  lucid::testing::write(cfg, "task: segment\nimgz: 64\n");
  auto again = engine::train_options();
  expect_user_error([&] { lucid::config::parse_with_cfg_file(again, {"cfg=" + cfg}); }, {"args.yaml:2", "'imgz'"});
}

TEST(CfgFile, ErrorsNameTheFileLineAndKey) {
  lucid::testing::TempDir dir;
  auto parse = [&](const std::string& text) {
    const auto cfg = (dir.path() / "bad.yaml").string();
    lucid::testing::write(cfg, text);
    auto o = engine::train_options();
    lucid::config::parse_with_cfg_file(o, {"cfg=" + cfg},
                                       [](const lucid::config::Options& x) { engine::TrainSettings::from(x); });
  };
  expect_user_error([&] { parse("epochs: 3\nimgz: 64\n"); }, {"bad.yaml:2", "'imgz'", "imgsz"});
  expect_user_error([&] { parse("epochs: 3\nlr0: 0.1\nepochs: abc\n"); }, {"bad.yaml:3", "duplicate key 'epochs'"});
  expect_user_error([&] { parse("lr0: 0.1\nepochs: abc\n"); }, {"bad.yaml:2", "epochs=abc"});
  expect_user_error([&] { parse("lr0: 0.1\nmulti_scale: 3\n"); }, {"bad.yaml:2", "multi_scale"});
  expect_user_error([&] { parse("- epochs\n- 3\n"); }, {"bad.yaml", "mapping"});
  expect_user_error([&] { parse("hsv_h: {a: 1}\n"); }, {"bad.yaml:1", "hsv_h"});
  expect_user_error([&] { parse("epochs: [3\n"); }, {"bad.yaml"});
  auto o = engine::train_options();
  expect_user_error([&] { lucid::config::parse_with_cfg_file(o, {"cfg=/nonexistent/x.yaml"}); },
                    {"cfg=/nonexistent/x.yaml"});
}

TEST(TimeBudget, EpochsAreReestimatedFromTheMeanEpochTime) {
  const engine::TimeBudget budget(100.0 / 3600);  // 100 s
  EXPECT_FALSE(engine::TimeBudget(0).active());
  EXPECT_EQ(budget.reestimate(0, 0, 30), 4);   // ceil(100 / 30)
  EXPECT_EQ(budget.reestimate(2, 0, 75), 4);   // mean 25: exactly 4
  EXPECT_EQ(budget.reestimate(1, 0, 70), 3);   // mean 35
  EXPECT_EQ(budget.reestimate(5, 4, 20), 10);  // a resumed fit measures from its own start epoch
  EXPECT_FALSE(budget.time_up(100));           // strictly more than the budget
  EXPECT_TRUE(budget.time_up(100.5));
  // The epoch just finished at or past the new estimate stops the fit; one before it does not.
  // A resumed fit at epoch 5 (its 2nd) with 80 s gone: 3 epochs estimated, already past them.
  const auto past = budget.end_epoch(5, 4, 100, 80, false);
  EXPECT_EQ(past.epochs, 3);
  EXPECT_TRUE(past.stop);
  const auto e2 = budget.end_epoch(2, 0, 100, 75, false);
  EXPECT_EQ(e2.epochs, 4);
  EXPECT_FALSE(e2.stop);
  EXPECT_TRUE(budget.end_epoch(2, 0, 100, 101, false).stop);  // time up at the epoch's end
  EXPECT_TRUE(budget.end_epoch(0, 0, 1, 1, true).stop);       // a stop already decided stays
  EXPECT_EQ(budget.end_epoch(0, 0, 100, 0, false).epochs, engine::TimeBudget::kMaxEpochs);  // a clock that did not move
  const auto off = engine::TimeBudget(0).end_epoch(4, 0, 9, 1e9, false);
  EXPECT_EQ(off.epochs, 9);
  EXPECT_FALSE(off.stop);
}

TEST(TimeBudget, TheScheduleIsSetUpAgainForTheNewEpochs) {
  lucid::optim::ScheduleOptions so;
  so.epochs = 100;
  so.lrf = 0.01;
  so.warmup_epochs = 3;
  lucid::optim::Schedule sched(so, 10);
  EXPECT_EQ(sched.warmup_iterations(), 30);
  EXPECT_DOUBLE_EQ(sched.lf(1), (1 - 1 / 100.0) * 0.99 + 0.01);
  sched.set_epochs(3, 10);
  EXPECT_EQ(sched.warmup_iterations(), 20);  // min(warmup_epochs, epochs - 1) epochs
  EXPECT_DOUBLE_EQ(sched.lf(1), (1 - 1 / 3.0) * 0.99 + 0.01);
  EXPECT_DOUBLE_EQ(sched.lf(4), 0.01);  // past the estimate: the final factor
}

TEST(AutoBatch, ChoosesOnTheFittedLine) {
  using engine::BatchProbe;
  EXPECT_EQ(engine::probe_batch_sizes(12, 0), (std::vector<int64_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(engine::probe_batch_sizes(80, 0), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(engine::probe_batch_sizes(80, 10), (std::vector<int64_t>{1, 2, 4, 8}));
  // gib = 0.5 + 0.25 b: at 61% of 20 GiB, b = int((12.2 - 0.5) / 0.25) = int(46.8) = 46.
  std::vector<BatchProbe> probes;
  for (int64_t b : {1, 2, 4, 8, 16, 32, 64}) probes.push_back({b, 0.5 + 0.25 * static_cast<double>(b)});
  EXPECT_EQ(engine::choose_batch(probes, 24, 20, 0.61, 0), 46);
  EXPECT_EQ(engine::choose_batch(probes, 24, 20, 0.61, 30), 30);  // not above the dataset
  probes[5].gib.reset();                                          // batch 32 failed: the ceiling is 16
  EXPECT_EQ(engine::choose_batch(probes, 24, 20, 0.61, 0), 16);
  std::vector<BatchProbe> none{{1, std::nullopt}, {2, 30.0}};
  expect_user_error([&] { engine::choose_batch(none, 24, 20, 0.6, 0); }, {"AutoBatch", "batch=[1,2]"});
  EXPECT_NEAR(engine::loss_memory_gib(16, 8400, 40, 80), 16.0 * 8400 * 6 * 200 * 4 / (1 << 30), 1e-12);
}

TEST(AutoBatch, OnTheCpuTheReferencesDefaultBatch) {
  engine::AutoBatchRequest r;
  r.spec = lucid::config::load_model_spec("yolo26n-seg.yaml", 2);
  r.imgsz = 64;
  EXPECT_EQ(engine::auto_batch(r), 16);
}

TEST(MultiScale, SizesAreStrideMultiplesInTheRangeAndDeterministic) {
  std::set<int64_t> seen;
  for (int64_t b = 0; b < 200; ++b) {
    const auto s = engine::multi_scale_size(640, 0.5, 32, 3, 1, b);
    EXPECT_EQ(s % 32, 0);
    EXPECT_GE(s, 320);
    EXPECT_LE(s, 960);
    EXPECT_EQ(s, engine::multi_scale_size(640, 0.5, 32, 3, 1, b));
    seen.insert(s);
  }
  EXPECT_GT(seen.size(), 10u);
  EXPECT_EQ(engine::multi_scale_size(64, 0.9, 32, 0, 0, 0) % 32, 0);
  EXPECT_GE(engine::multi_scale_size(64, 0.9, 32, 0, 0, 0), 32);  // never below the stride
  auto x = torch::rand({2, 3, 64, 96});
  EXPECT_EQ(engine::multi_scale_resize(x, 192, 32).sizes(), (std::vector<int64_t>{2, 3, 128, 192}));
  EXPECT_EQ(engine::multi_scale_resize(x, 70, 32).sizes(), (std::vector<int64_t>{2, 3, 64, 96}));  // ceil to 32
  EXPECT_TRUE(engine::multi_scale_resize(x, 96, 32).is_same(x));
}

TEST(ClassWeights, InverseFrequencyPowersNormalisedToMeanOne) {
  EXPECT_TRUE(lucid::loss::class_weights({5, 1}, 0).empty());
  EXPECT_TRUE(lucid::loss::class_weights({0, 0}, 1).empty());
  auto w = lucid::loss::class_weights({1, 3}, 1.0);  // 1, 1/3 -> mean 2/3
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NEAR(w[0], 1.5, 1e-6);
  EXPECT_NEAR(w[1], 0.5, 1e-6);
  w = lucid::loss::class_weights({4, 0, 1}, 0.5);  // 0.5, (mean 0.75), 1 -> mean 0.75
  EXPECT_NEAR(w[0], 0.5 / 0.75, 1e-6);
  EXPECT_NEAR(w[1], 1.0, 1e-6);
  EXPECT_NEAR(w[2], 1.0 / 0.75, 1e-6);
}

namespace {

data::Sample rect_sample(int64_t i) {
  const int h = i % 2 ? 40 : 64, w = i % 2 ? 64 : 40;  // landscape and portrait
  data::Sample s;
  s.image = torch::full({h, w, 3}, static_cast<int>(i * 20), torch::kUInt8);
  s.orig_height = h;
  s.orig_width = w;
  s.instances.push_back(0, {5, 5, 20, 5, 20, 20, 5, 20}, {5, 5, 20, 20});
  return s;
}

}  // namespace

TEST(RectTraining, BatchesInAspectOrderAtTheirOwnShapeEveryEpoch) {
  data::LoaderOptions o;
  o.dataset_size = 6;
  o.imgsz = 128;
  o.batch = 3;
  o.workers = 2;
  o.pin_memory = 0;
  o.augment = true;
  o.shuffle = false;
  o.rect = true;
  o.rect_pad = 0.0;
  o.mosaic = false;
  o.aug.mosaic = 0;
  for (int64_t i = 0; i < 6; ++i) o.image_sizes.push_back(i % 2 ? std::pair{40, 64} : std::pair{64, 40});
  data::Loader loader(rect_sample, o);
  for (int epoch = 0; epoch < 2; ++epoch) {
    loader.start_epoch(epoch);
    auto a = loader.next(), b = loader.next();
    ASSERT_TRUE(a && b);
    EXPECT_FALSE(loader.next());
    EXPECT_EQ(a->indices, (std::vector<int64_t>{1, 3, 5}));  // landscape first (h / w ascending)
    EXPECT_EQ(b->indices, (std::vector<int64_t>{0, 2, 4}));
    // h / w = 0.625: ceil(0.625 * 128 / 32) * 32 = 96 high, 128 wide (pad 0); portrait the other way.
    EXPECT_EQ(a->images.sizes(), (std::vector<int64_t>{3, 3, 96, 128}));
    EXPECT_EQ(b->images.sizes(), (std::vector<int64_t>{3, 3, 128, 96}));
    EXPECT_EQ(a->targets.masks.size(1), a->images.size(2) / 4);
  }
}

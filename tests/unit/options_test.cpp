#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include "data_test_util.h"
#include "lucid/config/options.h"
#include "lucid/config/reference_keys.h"

#include "lucid/data/synth.h"
#include "lucid/train/run_folder.h"
#include "lucid/train/train_options.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"

using lucid::UserError;
using lucid::config::Options;

TEST(Options, DefaultsParsingAndErrorsNameTheKey) {
  Options o("test", {{"imgsz", "640", "size"}, {"name", "", "a name"}, {"amp", "True", "mixed precision"}});
  EXPECT_EQ(o.integer("imgsz"), 640);
  o.parse({"imgsz=320", "name=x=y"});
  EXPECT_EQ(o.integer("imgsz"), 320);
  EXPECT_EQ(o.str("name"), "x=y");
  EXPECT_TRUE(o.flag("amp"));
  EXPECT_TRUE(o.given("imgsz"));
  EXPECT_FALSE(o.given("amp"));
  try {
    o.parse({"imgsize=3"});
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("imgsize"), std::string::npos);
  }
  o.parse({"imgsz=abc"});
  try {
    o.integer("imgsz");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("imgsz=abc"), std::string::npos);
  }
  EXPECT_THROW(o.parse({"novalue"}), UserError);
  EXPECT_NE(o.help().find("imgsz [640]"), std::string::npos);
}

// The reference's bare flags (the entrypoint of its cfg/__init__.py): a key whose reference default is
// a boolean, or half/int8/end2end/nms, alone means True; lucid's own True/False keys likewise; any
// other key given without a value is refused, naming it.
TEST(Options, BareBooleanFlagsAreTrueAsInTheReference) {
  auto o = lucid::engine::train_options();
  o.parse({"resume", "val", "nms", "capture_step", "cache"});
  for (const char* key : {"resume", "val", "nms", "capture_step", "cache"}) {
    EXPECT_EQ(o.str(key), "True") << key;
    EXPECT_TRUE(o.given(key)) << key;
  }
  lucid::testing::expect_user_error([&] { o.parse({"epochs"}); }, {"'epochs' is a valid option", "missing '='"});
  lucid::testing::expect_user_error([&] { o.parse({"model"}); }, {"'model'", "model=yolo26n-seg.yaml"});
  lucid::testing::expect_user_error([&] { o.parse({"novalue"}); }, {"'novalue'", "key=value"});
}

// NaN and infinity pass every range check written as a comparison: number() refuses them for
// every command, naming the option.
TEST(Options, UnknownKeysSuggestTheNearestValidOne) {
  Options o("train", {{"imgsz", "640", "size"},
                      {"name", "", "a name"},
                      {"epochs", "100", "epochs"},
                      {"close_mosaic", "10", "last epochs without mosaic"}});
  auto message = [&](const std::string& token) {
    try {
      o.parse({token});
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(message("imgz=320"), "'imgz' is not a valid option; did you mean imgsz=640? (see lucid train --help)");
  EXPECT_EQ(message("epcohs=3"), "'epcohs' is not a valid option; did you mean epochs=100? (see lucid train --help)");
  EXPECT_EQ(message("nmae=x"), "'nmae' is not a valid option; did you mean name? (see lucid train --help)");
  EXPECT_EQ(message("closemosaic=0"),
            "'closemosaic' is not a valid option; did you mean close_mosaic=10? (see lucid train --help)");
  // Nothing near: no guess.
  EXPECT_EQ(message("weights_decay_factor=1"), "'weights_decay_factor' is not a valid option (see lucid train --help)");
  EXPECT_EQ(message("lr=1"), "'lr' is not a valid option (see lucid train --help)");
}

TEST(Options, ImageSizesRoundUpToTheStrideAsTheReferenceDoes) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(lucid::config::stride_multiple(640), 640);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(lucid::config::stride_multiple(650), 672);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "warning: imgsz=650 must be a multiple of max stride 32, updating to 672\n");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(lucid::config::stride_multiple(10), 32);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("updating to 32"), std::string::npos);
}

TEST(Options, NonFiniteNumbersAreRefusedWithTheOptionNamed) {
  Options o("test", {{"degrees", "0", ""}, {"lr0", "0.01", ""}});
  for (const std::string v : {"inf", "-inf", "nan", "NaN", "infinity", "1e999"}) {
    o.parse({"degrees=" + v});
    lucid::testing::expect_user_error([&] { o.number("degrees"); }, {"degrees=" + v, "finite number"});
  }
  o.parse({"lr0=2.5e-3"});
  EXPECT_DOUBLE_EQ(o.number("lr0"), 2.5e-3);
}

TEST(Options, IntegerRangesAndOverflowNameTheOption) {
  Options o("test", {{"imgsz", "640", ""}});
  o.parse({"imgsz=100000"});
  lucid::testing::expect_user_error([&] { o.integer("imgsz", 32, 8192); }, {"imgsz=100000", "32 to 8192"});
  o.parse({"imgsz=99999999999999999999999"});
  lucid::testing::expect_user_error([&] { o.integer("imgsz"); }, {"imgsz=9999", "expected an integer"});
  o.parse({"imgsz=320"});
  EXPECT_EQ(o.integer("imgsz", 32, 8192), 320);
}

TEST(TrainSettings, BadValuesNameTheOption) {
  auto settings = [](std::vector<std::string> tokens) {
    auto o = lucid::engine::train_options();
    o.parse(tokens);
    return lucid::engine::TrainSettings::from(o);
  };
  lucid::testing::expect_user_error([&] { settings({"degrees=inf"}); }, {"degrees=inf"});
  lucid::testing::expect_user_error([&] { settings({"lr0=nan"}); }, {"lr0=nan"});
  lucid::testing::expect_user_error([&] { settings({"hsv_h=-inf"}); }, {"hsv_h=-inf"});
  lucid::testing::expect_user_error([&] { settings({"imgsz=100000"}); }, {"imgsz=100000"});
  lucid::testing::expect_user_error([&] { settings({"batch=10000000000"}); }, {"batch=10000000000"});
  lucid::testing::expect_user_error([&] { settings({"freeze=1,x"}); }, {"freeze=1,x", "'x'"});
  lucid::testing::expect_user_error([&] { settings({"freeze=99999999999"}); }, {"freeze=99999999999"});
  lucid::testing::expect_user_error([&] { settings({"freeze=1,"}); }, {"freeze=1,"});
  lucid::testing::expect_user_error([&] { settings({"patience=-1"}); }, {"patience=-1"});
  EXPECT_EQ(settings({"patience=0", "freeze=0,1,22"}).patience, 0);  // 0: never stop early
  EXPECT_EQ(settings({"workers=100000"}).loader.workers, 100000);    // capped by the loader
}

namespace {

std::vector<std::string> keys_of(const nlohmann::ordered_json& record) {
  std::vector<std::string> keys;
  for (auto it = record.begin(); it != record.end(); ++it) keys.push_back(it.key());
  return keys;
}

}  // namespace

// The command-line table, --help, args.yaml and the checkpoint's record all come from the one list
// of declarations; each key is declared once.
TEST(TrainFields, EveryOptionIsDeclaredOnceAndEveryTableComesFromThatList) {
  using lucid::config::Role;
  namespace engine = lucid::engine;
  std::vector<std::string> declared, in_checkpoint;
  for (const auto& f : engine::train_fields().fields()) {
    declared.push_back(f.spec.key);
    if (f.role == Role::Computation || f.role == Role::Adjustable) in_checkpoint.push_back(f.spec.key);
    EXPECT_EQ(engine::execution_option(f.spec.key), f.role == Role::Execution) << f.spec.key;
  }
  EXPECT_EQ(std::set<std::string>(declared.begin(), declared.end()).size(), declared.size());
  for (const char* key : {"data", "epochs", "imgsz", "batch", "device", "hsv_h", "capture_step", "resume"})
    EXPECT_NE(std::find(declared.begin(), declared.end(), key), declared.end()) << key;

  auto options = engine::train_options();
  std::vector<std::string> cli;
  for (const auto& s : options.specs()) cli.push_back(s.key);
  EXPECT_EQ(cli, declared);
  const auto help = options.help();
  for (const auto& key : declared) EXPECT_NE(help.find("\n  " + key + " ["), std::string::npos) << key;

  const auto settings = engine::TrainSettings::from(options);
  const auto args = engine::train_record(settings, engine::RecordScope::ArgsYaml);
  const auto checkpoint = engine::train_record(settings, engine::RecordScope::Checkpoint);
  EXPECT_EQ(keys_of(args), declared);
  EXPECT_EQ(keys_of(checkpoint), in_checkpoint);
  for (const char* left_out :
       {"capture_network", "stage_times", "kernel_times", "gpu_augment", "project", "name", "resume"})
    EXPECT_FALSE(checkpoint.contains(left_out)) << left_out;

  // args.yaml and lucid_args.yaml: one line per declared key, in order, none empty (defaults are
  // written resolved), the reference's keys in args.yaml and lucid's own beside it.
  lucid::testing::TempDir dir;
  lucid::engine::write_args_yaml(dir.path(), args);
  std::vector<std::string> reference_declared, own_declared;
  for (const auto& k : declared)
    (lucid::config::reference_keys().count(k) ? reference_declared : own_declared).push_back(k);
  for (const auto& [file, want] :
       {std::pair{"args.yaml", reference_declared}, std::pair{"lucid_args.yaml", own_declared}}) {
    std::ifstream in(dir.path() / file);
    std::vector<std::string> lines_keys;
    for (std::string line; std::getline(in, line);) {
      lines_keys.push_back(line.substr(0, line.find(": ")));
      EXPECT_GT(line.size(), lines_keys.back().size() + 2) << "empty value: " << line;
      EXPECT_EQ(line.find("None"), std::string::npos) << "None is written as null: " << line;
    }
    EXPECT_EQ(lines_keys, want) << file;
  }
  EXPECT_FALSE(own_declared.empty());
  EXPECT_EQ(args["epochs"], "30");  // the synthetic dataset's defaults
  EXPECT_EQ(args["imgsz"], "160");
  EXPECT_EQ(args["batch"], "8");
  EXPECT_EQ(args["data"], lucid::data::default_synth_yaml());
  EXPECT_TRUE(std::filesystem::path(args["data"].get<std::string>()).is_absolute());
  EXPECT_EQ(args["device"], lucid::util::device_name(""));

  // A record reads back to itself: what a resume or `lucid val` rebuilds is what the run used.
  const auto again = engine::settings_from_record(checkpoint, "ckpt");
  EXPECT_EQ(engine::train_record(again, engine::RecordScope::Checkpoint), checkpoint);
  // Values are recorded as resolved: a relative dataset as its absolute path, a rounded imgsz, a device name.
  options.parse({"data=some/data.yaml", "imgsz=650", "device=cpu", "lr0=2.5e-3", "cos_lr=yes", "optimizer=sgd"});
  ::testing::internal::CaptureStderr();
  const auto given = engine::train_record(engine::TrainSettings::from(options), engine::RecordScope::ArgsYaml);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(given["data"], (std::filesystem::current_path() / "some/data.yaml").string());
  EXPECT_EQ(given["imgsz"], "672");
  EXPECT_EQ(given["epochs"], "100");
  EXPECT_EQ(given["lr0"], "0.0025");
  EXPECT_EQ(given["cos_lr"], "True");
  EXPECT_EQ(given["optimizer"], "SGD");
}

// Every declared check, tried with the bad values its declaration generates (a non-number, a
// fraction for an integer, NaN, each side of a range, a word that is not a choice): each error
// names the option and the value.
TEST(TrainFields, EachBadValueNamesItsOption) {
  using lucid::config::ValueKind;
  int tried = 0;
  for (const auto& f : lucid::engine::train_fields().fields()) {
    const auto& key = f.spec.key;
    if (f.kind != ValueKind::Text) {
      EXPECT_FALSE(f.bad_values.empty()) << key << " declares no bad value";
    }
    for (const auto& bad : f.bad_values) {
      auto o = lucid::engine::train_options();
      o.parse({key + "=" + bad});
      lucid::testing::expect_user_error([&] { lucid::engine::TrainSettings::from(o); }, {key + "=" + bad});
      ++tried;
    }
  }
  EXPECT_GT(tried, 100);
}

TEST(Options, NumbersAreRecordedAsPythonWritesThem) {
  using lucid::config::format_number;
  EXPECT_EQ(format_number(0.0005), "0.0005");
  EXPECT_EQ(format_number(3), "3.0");
  EXPECT_EQ(format_number(0.015), "0.015");
  EXPECT_EQ(format_number(2.5e-3), "0.0025");
  EXPECT_EQ(format_number(1e-5), "1e-05");
  EXPECT_EQ(format_number(-0.5), "-0.5");
  EXPECT_EQ(format_number(1e16), "1e+16");
  EXPECT_EQ(format_number(123456.0), "123456.0");
  EXPECT_EQ(format_number(0.1 + 0.2), "0.30000000000000004");
}

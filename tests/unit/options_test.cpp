#include <gtest/gtest.h>

#include "data_test_util.h"
#include "lucid/config/options.h"
#include "lucid/engine/train_options.h"
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

// NaN and infinity pass every range check written as a comparison: number() refuses them for
// every command, naming the option.
TEST(Options, UnknownKeysSuggestTheNearestValidOne) {
  Options o("train", {{"imgsz", "640", "size"}, {"name", "", "a name"}, {"epochs", "100", "epochs"},
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
  testing::internal::CaptureStderr();
  EXPECT_EQ(lucid::config::stride_multiple(640), 640);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  testing::internal::CaptureStderr();
  EXPECT_EQ(lucid::config::stride_multiple(650), 672);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "warning: imgsz=650 must be a multiple of max stride 32, updating to 672\n");
  testing::internal::CaptureStderr();
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
  EXPECT_EQ(settings({"workers=100000"}).workers, 100000);             // capped by the loader
}

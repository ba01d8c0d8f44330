#include <gtest/gtest.h>

#include "lucid/config/options.h"
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

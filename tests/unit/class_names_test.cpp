// Class names taken from files (util/class_names.h): a NUL byte refused by every reader with the file
// and entry, names that would leave crops/ kept inside it, control characters escaped when printed.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "data_test_util.h"
#include "lucid/data/dataset.h"
#include "lucid/data/labels.h"
#include "lucid/evaluate/validator.h"
#include "lucid/model/safetensors.h"
#include "lucid/predict/detection_crop.h"
#include "lucid/util/class_names.h"
#include "lucid/util/printable.h"
#include "lucid/weights/model_source.h"

using namespace lucid;
using lucid::testing::expect_user_error;
using lucid::testing::jpeg_bytes;
using lucid::testing::TempDir;
using lucid::testing::write;
namespace fs = std::filesystem;

namespace {

const std::string kNul("a\0b", 3);
// Names a hostile file might carry, each of which once became a path or reached the terminal raw.
const std::vector<std::string> kHostile = {"../../../x",
                                           "/abs/y",
                                           "..",
                                           ".",
                                           "",
                                           "a\\b",
                                           "esc\x1b]0;title\x07",
                                           "line\nbreak",
                                           std::string(300, 'n') + "/..",
                                           "100% \xc2\x9b"};

// A weights file holding one tensor and metadata names (a JSON list).
std::string weights_with_names(const TempDir& dir, const std::string& file, const nlohmann::json& names) {
  const auto path = dir.str(file);
  model::write_safetensors(path, {{"x", torch::zeros({1})}}, {{"names", names.dump()}});
  return path;
}

// Every path under dir (nftw: see TempDir on the torch wheel's recursive_directory_iterator).
std::vector<fs::path> all_paths(const fs::path& dir) {
  static std::vector<fs::path>* seen = nullptr;
  std::vector<fs::path> out;
  seen = &out;
  ::nftw(
      dir.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) {
        seen->emplace_back(p);
        return 0;
      },
      16, FTW_PHYS);
  return out;
}

// Whether path lies inside dir once "." and ".." are resolved.
bool inside(const fs::path& path, const fs::path& dir) {
  const auto rel = path.lexically_normal().lexically_relative(dir.lexically_normal());
  return !rel.empty() && *rel.begin() != "..";
}

}  // namespace

TEST(ClassNames, PrintableEscapesControlCharactersOnly) {
  EXPECT_EQ(util::printable("teddy bear"), "teddy bear");
  EXPECT_EQ(util::printable("caf\xc3\xa9 \xe4\xb8\xad"), "caf\xc3\xa9 \xe4\xb8\xad");  // UTF-8 letters kept
  EXPECT_EQ(util::printable("a\nb\tc"), "a\\x0ab\\x09c");
  EXPECT_EQ(util::printable("\x1b[31mred\x7f"), "\\x1b[31mred\\x7f");
  EXPECT_EQ(util::printable(kNul), "a\\x00b");
  EXPECT_EQ(util::printable("\xc2\x9b"
                            "2J"),
            "\\xc2\\x9b2J");  // C1 CSI as UTF-8
  EXPECT_EQ(util::printable("\x9b"
                            "2J"),
            "\\x9b2J");                                         // C1 CSI as a lone byte
  EXPECT_EQ(util::printable("\xc3\xa9\x9b"), "\xc3\xa9\\x9b");  // a lone continuation after a letter
  for (const auto& s : {std::string("teddy bear"), std::string("\xe4\xb8\xad"), std::string("\xff")})
    EXPECT_FALSE(util::has_control_character(s)) << s;
  for (const auto& s : {std::string("a\nb"), kNul, std::string("\xc2\x85"), std::string("\x1b")})
    EXPECT_TRUE(util::has_control_character(s)) << util::printable(s);
}

TEST(ClassNames, FolderNamesAreOneEntryOfTheirFolder) {
  EXPECT_EQ(util::class_folder_name("traffic light", 9), "traffic light");
  EXPECT_EQ(util::class_folder_name("teddy bear", 77), "teddy bear");
  EXPECT_EQ(util::class_folder_name("../../../x", 0), "..%2F..%2F..%2Fx");
  EXPECT_EQ(util::class_folder_name("/abs", 0), "%2Fabs");
  EXPECT_EQ(util::class_folder_name("a\\b%", 0), "a%5Cb%25");
  EXPECT_EQ(util::class_folder_name("..", 3), "class3");
  EXPECT_EQ(util::class_folder_name("", 4), "class4");
  EXPECT_EQ(util::class_folder_name(kNul, 0), "a%00b");
  EXPECT_EQ(util::class_folder_name("\x1b[31m", 0), "%1B[31m");
  EXPECT_EQ(util::class_folder_name(std::string(300, 'n'), 5), std::string(200, 'n') + "~5");
  // Two names never share a folder ("a/b" and "a%2Fb" included).
  EXPECT_NE(util::class_folder_name("a/b", 0), util::class_folder_name("a%2Fb", 1));
  for (const auto& name : kHostile) {
    const auto folder = util::class_folder_name(name, 1);
    EXPECT_LE(folder.size(), 255u);
    EXPECT_EQ(fs::path(folder).filename().string(), folder) << folder;
    EXPECT_NE(folder, ".");
    EXPECT_NE(folder, "..");
  }
}

// The reader of weights metadata: a NUL refused with the file and the entry; other names kept.
TEST(ClassNames, WeightsMetadataNamesAreChecked) {
  TempDir dir;
  const auto nul = weights_with_names(dir, "nul.safetensors", {"ok", kNul});
  expect_user_error([&] { engine::read_model_source("model", nul); },
                    {nul, "metadata 'names' entry 1", "a\\x00b", "NUL"});
  const auto hostile = weights_with_names(dir, "hostile.safetensors", kHostile);
  EXPECT_EQ(engine::read_model_source("model", hostile).names, kHostile);
}

TEST(ClassNames, DatasetYamlAndClassesTxtNamesAreChecked) {
  TempDir d;
  write(d.str("images/train/a.jpg"), jpeg_bytes());
  const std::string head = "train: images/train\nval: images/train\n";
  write(d.str("list.yaml"), head + "names:\n  - ok\n  - \"a\\0b\"\n");
  expect_user_error([&] { data::build_index(d.str("list.yaml")); }, {"list.yaml:5", "entry 1", "a\\x00b", "NUL"});
  write(d.str("map.yaml"), head + "names:\n  0: ok\n  1: \"\\0\"\n");
  expect_user_error([&] { data::build_index(d.str("map.yaml")); }, {"map.yaml:5", "class 1", "NUL"});
  write(d.str("esc.yaml"), head + "names: [\"../../x\", \"\\e]0;t\\a\", \"traffic light\"]\n");
  EXPECT_EQ(data::build_index(d.str("esc.yaml")).names,
            (std::vector<std::string>{"../../x", "\x1b]0;t\x07", "traffic light"}));
  TempDir f;
  write(f.str("images/train/a.jpg"), jpeg_bytes());
  write(f.str("classes.txt"), "cat\n" + kNul + "\n");
  expect_user_error([&] { data::build_index(f.str()); }, {"classes.txt:2", "NUL"});
}

TEST(ClassNames, CocoCategoryNamesAreChecked) {
  const std::string head = R"({"images": [], "annotations": [], "categories": [{"id": 1, "name": "person"}, )";
  expect_user_error([&] { data::parse_coco_json(head + R"({"id": 7, "name": "a\u0000b"}]})", "c.json"); },
                    {"c.json", "category id 7", "a\\x00b", "NUL"});
  const auto ok = data::parse_coco_json(head + R"({"id": 7, "name": "../../x\u001b"}]})", "c.json");
  ASSERT_EQ(ok.categories.size(), 2u);
  EXPECT_EQ(ok.categories[1].name, "../../x\x1b");
}

// Where a name becomes a path: each hostile name's crops stay in crops/, and a name holding a NUL
// (which the readers refuse) no longer makes the free-name search loop on a truncated path.
TEST(ClassNames, CropFilesStayInsideTheCropsFolder) {
  TempDir dir;
  const fs::path crops = dir.path() / "run" / "crops";
  engine::CropFiles files(crops);
  auto names = kHostile;
  names.push_back(kNul);
  const auto start = std::chrono::steady_clock::now();
  for (size_t c = 0; c < names.size(); ++c) {
    for (int k = 0; k < 3; ++k) {
      const auto path = files.next(names[c], static_cast<int64_t>(c), "img");
      EXPECT_TRUE(inside(path, crops)) << path;
      EXPECT_EQ(path.parent_path().parent_path(), crops) << path;
      EXPECT_FALSE(fs::exists(path)) << path;
      write(path.string(), "jpeg");
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // Nothing outside run/crops.
  for (const auto& p : all_paths(dir.path()))
    EXPECT_TRUE(inside(p, crops) || p == crops || p == crops.parent_path() || p == dir.path()) << p;
  EXPECT_TRUE(fs::exists(crops / "a%00b" / "img-3.jpg"));
}

// The free-name search takes the reference's img.jpg, img-2.jpg ... past files already there, and
// ends with an error, not a loop, when every number is taken.
TEST(ClassNames, CropNameSearchIsBounded) {
  TempDir dir;
  const fs::path crops = dir.path() / "crops";
  write((crops / "cat" / "img.jpg").string(), "x");
  write((crops / "cat" / "img-2.jpg").string(), "x");
  engine::CropFiles files(crops, 4);
  EXPECT_EQ(files.next("cat", 0, "img"), crops / "cat" / "img-3.jpg");
  EXPECT_EQ(files.next("cat", 0, "img"), crops / "cat" / "img-4.jpg");
  expect_user_error([&] { files.next("cat", 0, "img"); }, {"4 crops named img-N.jpg"});
  EXPECT_EQ(files.next("cat", 0, "other"), crops / "cat" / "other.jpg");
}

// Where names are printed: val's per-class rows (printed by val and by training's validation).
TEST(ClassNames, ValTableRowsEscapeControlCharacters) {
  engine::ValidatorOptions o;
  o.verbose = true;
  o.names = {"teddy bear", "\x1b]0;title\x07\nx"};
  metrics::SegmentationMetrics m;
  m.images = m.instances = 2;
  m.maps = {0, 0};
  for (int64_t c = 0; c < 2; ++c) m.per_class.push_back({c, 1, 1, {}, {}});
  const auto text = engine::Validator(o).format_results(m);
  EXPECT_NE(text.find("teddy bear"), std::string::npos) << text;
  EXPECT_NE(text.find("\\x1b]0;title\\x07\\x0ax"), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;  // "all" and one line per class
}

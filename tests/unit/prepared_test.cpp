#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>

#include "data_test_util.h"
#include "lucid/data/prepared.h"
#include "lucid/data/resize.h"
#include "lucid/data/synth.h"
#include "lucid/feed/training_data.h"
#include "lucid/util/error.h"

using namespace lucid;
using namespace lucid::data;
using lucid::testing::TempDir;

namespace {

Split synth_split(const TempDir& d, int n = 6) {
  SynthOptions o;
  o.out = d.str("ds");
  o.n_train = n;
  o.n_val = 1;
  o.imgsz = 96;
  write_synth_dataset(o);
  return build_index(d.str("ds/data.yaml")).splits[0];
}

void expect_prepared_as_reference(const PreparedImages& p, const Split& s, int imgsz) {
  ASSERT_EQ(p.size(), s.images.size());
  for (size_t i = 0; i < p.size(); ++i) {
    ASSERT_TRUE(p.ok(i));
    const Image im = decode_image(s.images[i].path);
    const auto [w, h] = long_side_size(im.width, im.height, imgsz);
    const Image want = resize_linear(im, w, h);
    const ImageView v = p.view(i);
    ASSERT_EQ(v.width, w);
    ASSERT_EQ(v.height, h);
    EXPECT_EQ(v.original_width, im.width);
    EXPECT_EQ(std::max(v.width, v.height), imgsz);
    EXPECT_EQ(std::memcmp(v.data, want.pixels.data(), want.pixels.size()), 0) << s.images[i].path;
  }
}

}  // namespace

TEST(Prepared, DiskCacheIsBuiltOnceThenMapped) {
  TempDir d;
  const Split s = synth_split(d);
  PreparedOptions o;
  o.imgsz = 64;  // downscale
  o.cache_dir = d.str("cache");
  auto first = PreparedImages::build(s, o);
  EXPECT_FALSE(first.from_cache());
  EXPECT_FALSE(first.cache_path().empty());
  EXPECT_TRUE(first.problems().empty());
  expect_prepared_as_reference(first, s, 64);
  auto second = PreparedImages::build(s, o);
  EXPECT_TRUE(second.from_cache());
  EXPECT_EQ(second.cache_path(), first.cache_path());
  expect_prepared_as_reference(second, s, 64);
  // Another size is another file; upscaling works the same way.
  o.imgsz = 160;
  auto up = PreparedImages::build(s, o);
  EXPECT_FALSE(up.from_cache());
  EXPECT_NE(up.cache_path(), first.cache_path());
  expect_prepared_as_reference(up, s, 160);
  // RAM store: same pixels, no file.
  o.store = PreparedStore::Ram;
  auto ram = PreparedImages::build(s, o);
  EXPECT_TRUE(ram.cache_path().empty());
  expect_prepared_as_reference(ram, s, 160);
}

TEST(Prepared, ChangedImageOrDamagedCacheIsRebuilt) {
  TempDir d;
  Split s = synth_split(d, 3);
  PreparedOptions o;
  o.imgsz = 48;
  o.cache_dir = d.str("cache");
  const std::string path = PreparedImages::build(s, o).cache_path();
  // A damaged file (cut short) is ignored and rebuilt under the same name.
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  auto rebuilt = PreparedImages::build(s, o);
  EXPECT_FALSE(rebuilt.from_cache());
  EXPECT_EQ(rebuilt.cache_path(), path);
  expect_prepared_as_reference(rebuilt, s, 48);
  EXPECT_TRUE(PreparedImages::build(s, o).from_cache());
  // A rewritten image (new size and time) gives a new key.
  const Image other = lucid::testing::pattern(s.images[0].height, s.images[0].width);
  write_file(s.images[0].path, encode_png(other));
  s = build_index(d.str("ds/data.yaml")).splits[0];
  auto changed = PreparedImages::build(s, o);
  EXPECT_FALSE(changed.from_cache());
  EXPECT_NE(changed.cache_path(), path);
  expect_prepared_as_reference(changed, s, 48);
}

TEST(Prepared, UndecodableImagesAreReportedNotFatal) {
  TempDir d;
  Split s = synth_split(d, 3);
  // Break the pixel data of one image after indexing (the index read only its header).
  std::string bytes = read_file(s.images[1].path);
  write_file(s.images[1].path, bytes.substr(0, bytes.size() * 2 / 3));
  std::vector<Problem> seen;
  PreparedOptions o;
  o.imgsz = 64;
  o.cache_dir = d.str("cache");
  o.on_problem = [&](const Problem& p) { seen.push_back(p); };
  auto p = PreparedImages::build(s, o);
  EXPECT_TRUE(p.ok(0));
  EXPECT_FALSE(p.ok(1));
  EXPECT_TRUE(p.ok(2));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].path, s.images[1].path);
  EXPECT_NE(seen[0].message.find("not prepared"), std::string::npos);
  // The cached failure is reported again from the cache.
  seen.clear();
  auto again = PreparedImages::build(s, o);
  EXPECT_TRUE(again.from_cache());
  EXPECT_FALSE(again.ok(1));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_NE(seen[0].message.find("delete"), std::string::npos);
}

TEST(Prepared, UnwritableCacheFallsBackToMemory) {
  TempDir d;
  const Split s = synth_split(d, 2);
  lucid::testing::write(d.str("file"), "x");
  PreparedOptions o;
  o.imgsz = 32;
  o.cache_dir = d.str("file/cache");  // below a regular file: cannot be created
  auto p = PreparedImages::build(s, o);
  EXPECT_TRUE(p.cache_path().empty());
  ASSERT_EQ(p.problems().size(), 1u);
  EXPECT_NE(p.problems()[0].message.find("kept in memory"), std::string::npos);
  expect_prepared_as_reference(p, s, 32);
}

// A cache file cut short or rewritten under a run that has it mapped: the next use is a UserError
// naming the file (before, reading the mapping past the file's end was SIGBUS), both for a file the
// run built and for one it found and mapped.
TEST(Prepared, CacheTruncatedWhileMappedIsAnErrorNotASignal) {
  TempDir d;
  const Split s = synth_split(d, 3);
  PreparedOptions o;
  o.imgsz = 48;
  o.cache_dir = d.str("cache");
  auto built = PreparedImages::build(s, o);
  auto mapped = PreparedImages::build(s, o);
  ASSERT_TRUE(mapped.from_cache());
  const std::string path = built.cache_path();
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  for (const PreparedImages* p : {&built, &mapped})
    lucid::testing::expect_user_error([&] { (void)p->view(p->size() - 1).data[0]; }, {path, "truncated to 4096"});
  // Rewritten in place with the same size but another key: also refused.
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  auto again = PreparedImages::build(s, o);
  ASSERT_FALSE(again.from_cache());
  const auto view_ok = again.view(0);
  EXPECT_GT(view_ok.width, 0);
  {
    std::FILE* f = std::fopen(path.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 24, SEEK_SET);  // the header's key (after magic, version, imgsz, count)
    const uint64_t other = 12345;
    std::fwrite(&other, sizeof other, 1, f);
    std::fclose(f);
  }
  lucid::testing::expect_user_error([&] { (void)again.view(0); }, {path, "rewritten"});
}

// cache=False: nothing is held (it was the RAM store), and every sample has the RAM store's bytes.
TEST(Prepared, CacheFalseHoldsNothingAndSamplesTheSameBytes) {
  TempDir d;
  const Split s = synth_split(d, 4);
  ASSERT_EQ(engine::prepared_store("False"), PreparedStore::None);
  ASSERT_EQ(engine::prepared_store("True"), PreparedStore::Ram);
  ASSERT_EQ(engine::prepared_store("disk"), PreparedStore::Disk);
  const auto none = engine::prepare_split(s, 64, engine::prepared_store("False"), 1);
  const auto ram = engine::prepare_split(s, 64, engine::prepared_store("ram"), 1);
  EXPECT_EQ(none.images->bytes(), 0u);
  EXPECT_FALSE(none.images->holds_pixels());
  EXPECT_GT(ram.images->bytes(), 0u);
  const auto from_none = engine::make_sample_source(none), from_ram = engine::make_sample_source(ram);
  ASSERT_EQ(none.size(), ram.size());
  for (int64_t k = 0; k < none.size(); ++k) {
    const auto a = from_none(k), b = from_ram(k);
    EXPECT_TRUE(torch::equal(a.image, b.image)) << k;
    EXPECT_EQ(a.orig_width, b.orig_width);
    EXPECT_EQ(a.instances.size(), b.instances.size());
  }
}

// cache=ram beyond the available memory: refused before anything is decoded, naming the bytes
// needed and available and the three ways out. LUCID_AVAILABLE_MEMORY stands in for the machine.
TEST(Prepared, RamCacheBeyondAvailableMemoryIsRefusedWithTheFigures) {
  TempDir d;
  const Split s = synth_split(d, 4);
  const uint64_t need = prepared_bytes(s, 64);
  EXPECT_GT(need, 4u * 64 * 48 * 3);
  ::setenv("LUCID_AVAILABLE_MEMORY", std::to_string(need).c_str(), 1);  // below need x 1.5
  std::string message;
  try {
    engine::require_memory_for_ram_cache({&s}, 64);
  } catch (const UserError& e) {
    message = e.what();
  }
  const std::vector<std::string> parts{"option cache=ram",
                                       "need " + std::to_string(need) + " bytes",
                                       std::to_string(need) + " bytes (",
                                       "are available",
                                       "cache=disk",
                                       "cache=False",
                                       "fraction="};
  for (const auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  ::setenv("LUCID_AVAILABLE_MEMORY", std::to_string(need * 2).c_str(), 1);
  EXPECT_NO_THROW(engine::require_memory_for_ram_cache({&s}, 64));
  ::unsetenv("LUCID_AVAILABLE_MEMORY");
}

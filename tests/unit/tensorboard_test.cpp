#include "lucid/report/tensorboard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <regex>

#include "data_test_util.h"

using lucid::report::crc32c;
using lucid::report::EventFile;
using lucid::report::masked_crc32c;
using lucid::report::tf_record;

namespace {

uint64_t read_u64(const std::string& s, size_t at) {
  uint64_t v = 0;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}

uint32_t read_u32(const std::string& s, size_t at) {
  uint32_t v = 0;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}

// The records of an event file's bytes, each frame checked.
std::vector<std::string> records(const std::string& bytes) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < bytes.size()) {
    EXPECT_LE(at + 12, bytes.size());
    const uint64_t n = read_u64(bytes, at);
    EXPECT_EQ(read_u32(bytes, at + 8), masked_crc32c(bytes.substr(at, 8)));
    const auto data = bytes.substr(at + 12, n);
    EXPECT_EQ(read_u32(bytes, at + 12 + n), masked_crc32c(data));
    out.push_back(data);
    at += 12 + n + 4;
  }
  return out;
}

}  // namespace

// The CRC-32C check value (RFC 3720 / iSCSI) and TFRecord's mask.
TEST(TensorBoard, Crc32c) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  const uint32_t c = crc32c("abc");
  EXPECT_EQ(masked_crc32c("abc"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(TensorBoard, RecordFraming) {
  const auto r = tf_record("hello");
  ASSERT_EQ(r.size(), 8u + 4 + 5 + 4);
  EXPECT_EQ(read_u64(r, 0), 5u);
  EXPECT_EQ(r.substr(12, 5), "hello");
  EXPECT_EQ(records(r), std::vector<std::string>{"hello"});
}

// The file TensorBoard's loaders look for, starting with the file_version event, then one event per
// value: wall_time (field 1), step (field 2) and the summary (field 5) holding the tag and the float.
TEST(TensorBoard, EventFileLayout) {
  lucid::testing::TempDir dir;
  std::string path;
  {
    EventFile events(dir.path());
    path = events.path().string();
    events.session_start(3);
    events.scalar(3, "train/box_loss", 1.5f);
    events.flush();
  }
  EXPECT_TRUE(std::regex_match(std::filesystem::path(path).filename().string(),
                               std::regex(R"(events\.out\.tfevents\.\d{10}\..+\.\d+\.\d+)")));
  const auto recs = records(lucid::data::read_file(path));
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0][0], '\x09');  // wall_time, fixed64
  EXPECT_EQ(recs[0].substr(9), std::string("\x1a\x0d") + "brain.Event:2");
  EXPECT_EQ(recs[1].substr(9), std::string("\x10\x03\x3a\x02\x08\x01", 6));  // step 3, session_log {status: START}
  float v = 1.5f;
  std::string value = std::string("\x0a\x0e") + "train/box_loss" + "\x15" + std::string(reinterpret_cast<char*>(&v), 4);
  std::string summary = std::string("\x0a") + static_cast<char>(value.size()) + value;
  EXPECT_EQ(recs[2].substr(9), std::string("\x10\x03\x2a") + static_cast<char>(summary.size()) + summary);
}

TEST(TensorBoard, UnwritableFolderNamesTheFile) {
  try {
    EventFile events("/nonexistent-folder-for-lucid-test");
    FAIL() << "no error";
  } catch (const lucid::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-folder-for-lucid-test/events.out.tfevents."), std::string::npos)
        << e.what();
  }
}

// Video files (data/video.h): written by VideoWriter (.avi Motion JPEG, .mp4 MPEG-4) and read back
// by VideoReader with their frame count, size and rate, every frame within codec tolerance of what
// was written and closer to it than to its neighbours (the order holds); skip(); damaged,
// truncated and missing files give errors naming them; an unfinished writer leaves no file.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>

#include "data_test_util.h"
#include "lucid/data/video.h"
#include "user_error.h"
#include "video_frames.h"

namespace {

using lucid::UserError;
using lucid::data::Image;
using lucid::data::VideoReader;
using lucid::data::VideoWriter;
using lucid::testing::error_of;
using lucid::testing::TempDir;
using lucid::testing::video_frame;
namespace fs = std::filesystem;

constexpr int kW = 96, kH = 64, kFrames = 9;

double mean_abs_diff(const Image& a, const Image& b) {
  double s = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) s += std::abs(int(a.pixels[i]) - int(b.pixels[i]));
  return s / static_cast<double>(a.pixels.size());
}

void write_video(const std::string& path, int frames, int width = kW, int height = kH) {
  VideoWriter w(path, width, height, 12);
  for (int k = 0; k < frames; ++k) w.write(video_frame(k, height, width));
  w.close();
  EXPECT_EQ(w.frames_written(), frames);
}

class Video : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!lucid::data::video::available()) {
      GTEST_SKIP() << lucid::data::video::unavailable_message();
    }
  }
};

TEST_P(Video, RoundTripKeepsCountSizeRateAndPixels) {
  TempDir d;
  const auto path = d.str(std::string("v.") + GetParam());
  write_video(path, kFrames);
  VideoReader r(path);
  EXPECT_EQ(r.width(), kW);
  EXPECT_EQ(r.height(), kH);
  EXPECT_NEAR(r.fps(), 12.0, 1e-9);
  EXPECT_EQ(r.frame_count(), kFrames);
  Image frame;
  int n = 0;
  while (r.read(frame)) {
    ASSERT_EQ(frame.width, kW);
    ASSERT_EQ(frame.height, kH);
    const double own = mean_abs_diff(frame, video_frame(n, kH, kW));
    EXPECT_LT(own, 4.0) << "frame " << n;
    if (n > 0) {
      EXPECT_LT(own, mean_abs_diff(frame, video_frame(n - 1, kH, kW))) << "frame " << n;
    }
    ++n;
  }
  EXPECT_EQ(n, kFrames);
  EXPECT_FALSE(r.read(frame));  // stays at the end
}

TEST_P(Video, SkipDecodesWithoutReturningAFrame) {
  TempDir d;
  const auto path = d.str(std::string("v.") + GetParam());
  write_video(path, kFrames);
  VideoReader r(path);
  ASSERT_TRUE(r.skip());
  ASSERT_TRUE(r.skip());
  Image frame;
  ASSERT_TRUE(r.read(frame));
  const double own = mean_abs_diff(frame, video_frame(2, kH, kW));
  EXPECT_LT(own, mean_abs_diff(frame, video_frame(1, kH, kW)));
  int rest = 0;
  while (r.skip()) ++rest;
  EXPECT_EQ(rest, kFrames - 3);
}

// Sizes whose rows are not a multiple of swscale's SIMD blocks (it wrote past a 200x120 frame's
// buffer before the conversion went through a padded one).
TEST_P(Video, OddAndUnalignedSizesRoundTrip) {
  TempDir d;
  for (auto [w, h] : {std::pair{200, 120}, std::pair{97, 63}, std::pair{333, 211}}) {
    const auto path = d.str("v" + std::to_string(w) + "." + GetParam());
    write_video(path, 3, w, h);
    VideoReader r(path);
    Image frame;
    int n = 0;
    while (r.read(frame)) {
      ASSERT_EQ(frame.width, w);
      ASSERT_EQ(frame.height, h);
      EXPECT_LT(mean_abs_diff(frame, video_frame(n, h, w)), 4.0) << w << "x" << h << " frame " << n;
      ++n;
    }
    EXPECT_EQ(n, 3);
  }
}

INSTANTIATE_TEST_SUITE_P(Containers, Video, ::testing::Values("avi", "mp4"));

class VideoFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!lucid::data::video::available()) {
      GTEST_SKIP() << lucid::data::video::unavailable_message();
    }
  }
};

TEST_F(VideoFiles, BadFilesAreErrorsNamingThem) {
  TempDir d;
  EXPECT_NE(error_of([&] { VideoReader r(d.str("missing.mp4")); }).find("missing.mp4: no such file"),
            std::string::npos);
  lucid::testing::write(d.str("text.mp4"), "not a video at all\n");
  EXPECT_NE(error_of([&] { VideoReader r(d.str("text.mp4")); }).find("text.mp4: cannot be opened as a video"),
            std::string::npos);
  lucid::testing::write(d.str("empty.avi"), "");
  EXPECT_NE(error_of([&] { VideoReader r(d.str("empty.avi")); }).find("empty.avi"), std::string::npos);
}

TEST_F(VideoFiles, TruncatedOrDamagedVideosEndOrFailNamingTheFrame) {
  TempDir d;
  write_video(d.str("v.avi"), kFrames);
  const auto bytes = lucid::data::read_file(d.str("v.avi"));
  // Cut at several points: each either fails to open, ends early or fails at a frame, with the file
  // named; never more frames than were written.
  for (size_t cut : {bytes.size() / 4, bytes.size() / 2, bytes.size() * 3 / 4, bytes.size() - 7}) {
    const auto path = d.str("cut" + std::to_string(cut) + ".avi");
    lucid::testing::write(path, bytes.substr(0, cut));
    int n = 0;
    const auto e = error_of([&] {
      VideoReader r(path);
      Image f;
      while (r.read(f)) ++n;
    });
    EXPECT_LE(n, kFrames);
    if (e != "(no error)") {
      EXPECT_NE(e.find(path), std::string::npos) << e;
    }
  }
  auto damaged = bytes;
  for (size_t i = bytes.size() / 3; i < bytes.size() / 3 + 2000 && i < bytes.size(); i += 7) damaged[i] = '\x55';
  lucid::testing::write(d.str("damaged.avi"), damaged);
  int n = 0;
  const auto e = error_of([&] {
    VideoReader r(d.str("damaged.avi"));
    Image f;
    while (r.read(f)) ++n;
  });
  EXPECT_LE(n, kFrames);
  if (e != "(no error)") {
    EXPECT_NE(e.find("damaged.avi"), std::string::npos) << e;
  }
}

TEST_F(VideoFiles, WriterRefusesOtherContainersAndWrongSizes) {
  TempDir d;
  EXPECT_NE(error_of([&] { VideoWriter w(d.str("v.mkv"), kW, kH, 10); }).find("written as .avi"), std::string::npos);
  VideoWriter w(d.str("v.avi"), kW, kH, 10);
  EXPECT_NE(error_of([&] { w.write(video_frame(0, kH + 2, kW)); }).find("frame 1 is 96x66"), std::string::npos);
}

TEST_F(VideoFiles, UnfinishedWriterLeavesNoFile) {
  TempDir d;
  {
    VideoWriter w(d.str("v.avi"), kW, kH, 10);
    w.write(video_frame(0, kH, kW));
  }
  EXPECT_FALSE(fs::exists(d.str("v.avi")));
  EXPECT_TRUE(fs::is_empty(d.path()));
}

// Ctrl-C or SIGTERM while a video is written: the process still ends by the signal, and its
// temporary file goes with it (a destructor never runs then).
TEST_F(VideoFiles, WriterStoppedBySignalLeavesNoFile) {
  for (int sig : {SIGINT, SIGTERM}) {
    TempDir d;
    EXPECT_EXIT(
        {
          VideoWriter w(d.str("v.avi"), kW, kH, 10);
          w.write(video_frame(0, kH, kW));
          ::raise(sig);
          ::_exit(0);
        },
        ::testing::KilledBySignal(sig), "");
    EXPECT_TRUE(fs::is_empty(d.path())) << "signal " << sig << " left " << fs::directory_iterator(d.path())->path();
  }
}

TEST(VideoExtensions, AreTheReferencesVidFormats) {
  for (const char* f :
       {"a.asf", "a.AVI", "a.gif", "a.m4v", "a.mkv", "a.mov", "a.mp4", "a.mpeg", "a.mpg", "a.ts", "a.wmv", "a.webm"})
    EXPECT_TRUE(lucid::data::video::has_video_extension(f)) << f;
  for (const char* f : {"a.jpg", "a.mp3", "mp4", "a.mp4.txt"})
    EXPECT_FALSE(lucid::data::video::has_video_extension(f)) << f;
}

}  // namespace

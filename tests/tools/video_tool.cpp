// Test helper for the video system tests, with lucid's FFmpeg reader and writer:
//   video_tool write OUT.(avi|mp4) WIDTH HEIGHT FRAMES [FPS]   synthetic frames (tests/common/video_frames.h)
//   video_tool read IN OUT_DIR                                 every frame as OUT_DIR/frame_NNNN.png
// `read` prints "frames N size WxH fps F count C" (C: the frame count the file declares).
#include <cstdio>
#include <filesystem>
#include <string>

#include "lucid/data/video.h"
#include "lucid/util/error.h"
#include "video_frames.h"

int main(int argc, char** argv) {
  using namespace lucid;
  try {
    const std::string cmd = argc > 1 ? argv[1] : "";
    if (cmd == "write" && (argc == 6 || argc == 7)) {
      const int w = std::stoi(argv[3]), h = std::stoi(argv[4]), n = std::stoi(argv[5]);
      data::VideoWriter writer(argv[2], w, h, argc == 7 ? std::stoi(argv[6]) : 10);
      for (int k = 0; k < n; ++k) writer.write(testing::video_frame(k, h, w));
      writer.close();
      return 0;
    }
    if (cmd == "read" && argc == 4) {
      data::VideoReader reader(argv[2]);
      std::filesystem::create_directories(argv[3]);
      data::Image frame;
      int n = 0;
      while (reader.read(frame)) {
        char name[32];
        std::snprintf(name, sizeof name, "frame_%04d.png", ++n);
        data::write_file((std::filesystem::path(argv[3]) / name).string(), data::encode_png(frame));
      }
      std::printf("frames %d size %dx%d fps %g count %lld\n", n, reader.width(), reader.height(), reader.fps(),
                  static_cast<long long>(reader.frame_count()));
      return 0;
    }
    std::fprintf(stderr, "usage: video_tool write OUT W H FRAMES [FPS] | video_tool read IN OUT_DIR\n");
    return 2;
  } catch (const UserError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

// Video files, frame by frame: decoding to 8-bit RGB and encoding RGB frames, with FFmpeg's
// libraries (libavformat, libavcodec, libswscale). Only one frame is held at a time, so a video of
// any length costs the memory of a frame. Video support is a build option (LUCID_VIDEO, on when
// FFmpeg's libraries are found); without it available() is false and opening a video is a
// UserError saying so.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "lucid/data/image_io.h"

namespace lucid::data {

namespace video {
// True when the project was built with FFmpeg's libraries.
bool available();
// "this build has no video support (FFmpeg's libraries were not found when it was configured)".
std::string unavailable_message();
// The reference's VID_FORMATS, by file extension (case-insensitive): asf avi gif m4v mkv mov mp4
// mpeg mpg ts wmv webm.
bool has_video_extension(const std::string& path);
}  // namespace video

// Frames are at most this many pixels a side: a header asking for more is refused before anything
// is allocated for it.
constexpr int kMaxVideoSide = 16384;

class VideoReader {
 public:
  // Opens the file and its best video stream's decoder. UserError naming the file when it is
  // missing, not a video, has no video stream or no decoder, or frames of no or too large a size.
  explicit VideoReader(const std::string& path);
  ~VideoReader();
  VideoReader(const VideoReader&) = delete;
  VideoReader& operator=(const VideoReader&) = delete;

  int width() const;
  int height() const;
  double fps() const;  // the stream's average frame rate; 0 when the file does not say
  // The container's frame count, else duration x frame rate (as OpenCV estimates it); 0 unknown.
  int64_t frame_count() const;
  // Decodes the next frame into `frame` (RGB, the stream's size); false at the end of the video.
  // A frame that cannot be decoded is a UserError naming the file and the frame number.
  bool read(Image& frame);
  // Decodes the next frame without converting it; false at the end.
  bool skip();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class VideoWriter {
 public:
  // A video of width x height RGB frames at `fps` frames per second, written to a temporary sibling
  // and renamed to `path` by close(). The container and codec follow the extension: .avi is Motion
  // JPEG (the reference's MJPG on Linux), .mp4 MPEG-4 part 2 (its mp4v). UserError naming the file
  // for another extension or when the file cannot be written.
  VideoWriter(const std::string& path, int width, int height, int fps);
  // Without close(), the temporary file is removed: a half-written video never takes `path`.
  ~VideoWriter();
  VideoWriter(const VideoWriter&) = delete;
  VideoWriter& operator=(const VideoWriter&) = delete;

  void write(const Image& frame);  // RGB (or RGBA) of the writer's size
  void close();
  int64_t frames_written() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lucid::data

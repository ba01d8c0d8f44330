// TensorBoard event files, written natively: the TFRecord framing (length, masked CRC32C of the
// length, data, masked CRC32C of the data) around tensorflow.Event messages, of which only the few
// fields TensorBoard reads for scalars and images are encoded (by hand; the wire format is stable):
//   Event        { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5;
//                  SessionLog session_log = 7; }
//   Summary      { repeated Value value = 1; }
//   Value        { string tag = 1; float simple_value = 2; Image image = 4; }
//   Image        { int32 height = 1; int32 width = 2; int32 colorspace = 3; bytes encoded_image_string = 4; }
//   SessionLog   { SessionStatus status = 1; }  (START = 1)
// A file starts with the file_version event "brain.Event:2", as TensorFlow's writer does.
#pragma once
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

namespace lucid::report {

// CRC-32C (Castagnoli), and the masked form TFRecord stores: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t crc32c(std::string_view bytes);
uint32_t masked_crc32c(std::string_view bytes);

// One TFRecord: the framing around `data`.
std::string tf_record(std::string_view data);

// The name TensorBoard's writers give an event file: events.out.tfevents.<unix seconds, 10 digits>.<host>.<pid>.<n>,
// n counting the files this process opened.
std::string event_file_name();

class EventFile {
 public:
  // Creates dir/event_file_name() and writes the file_version event; a UserError naming the file
  // when it cannot be created.
  explicit EventFile(const std::filesystem::path& dir);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // A session start at `step`: TensorBoard drops what earlier files of the folder logged at this
  // step and later (a resumed run's epochs after its checkpoint).
  void session_start(int64_t step);
  // One scalar (stored as float32).
  void scalar(int64_t step, const std::string& tag, float value);
  // One image: PNG bytes of a width x height RGB picture.
  void image(int64_t step, const std::string& tag, const std::string& png, int width, int height);
  // Hands what was written to the operating system, so TensorBoard sees it while the run goes on.
  void flush();

 private:
  void write_event(int64_t step, const std::string& what);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

}  // namespace lucid::report

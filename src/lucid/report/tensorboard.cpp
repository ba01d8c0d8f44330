#include "lucid/report/tensorboard.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "lucid/util/error.h"

namespace lucid::report {

namespace {

const std::array<uint32_t, 256>& crc32c_table() {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected Castagnoli polynomial
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Protocol buffer wire format: keys are (field << 3) | wire type.
enum Wire : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void put_key(std::string& out, uint32_t field, Wire wire) { put_varint(out, (field << 3) | wire); }

template <class T>
void put_little_endian(std::string& out, T v) {
  static_assert(std::endian::native == std::endian::little, "event files are written on little-endian hosts");
  char bytes[sizeof v];
  std::memcpy(bytes, &v, sizeof v);
  out.append(bytes, sizeof v);
}

void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_key(out, field, kBytes);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_int(std::string& out, uint32_t field, int64_t v) {
  put_key(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(v));
}

// A Summary holding one Value: its tag and the value's own field (2: simple_value, 4: image).
std::string summary_of(const std::string& tag, const std::string& value_field) {
  std::string value;
  put_bytes(value, 1, tag);
  value += value_field;
  std::string summary;
  put_bytes(summary, 1, value);
  return summary;
}

std::atomic<int> files_opened{0};

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  const auto& t = crc32c_table();
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) c = t[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tf_record(std::string_view data) {
  std::string length;
  put_little_endian(length, static_cast<uint64_t>(data.size()));
  std::string out = length;
  put_little_endian(out, masked_crc32c(length));
  out.append(data);
  put_little_endian(out, masked_crc32c(data));
  return out;
}

std::string event_file_name() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  char host[256] = "localhost";
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  host[sizeof host - 1] = '\0';
  char name[512];
  std::snprintf(name, sizeof name, "events.out.tfevents.%010lld.%s.%d.%d",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(now).count()), host,
                static_cast<int>(getpid()), files_opened++);
  return name;
}

EventFile::EventFile(const std::filesystem::path& dir) : path_(dir / event_file_name()) {
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_) throw UserError(path_.string() + ": cannot create the TensorBoard event file: " + std::strerror(errno));
  std::string version;
  put_bytes(version, 3, "brain.Event:2");
  write_event(0, version);
  flush();
}

EventFile::~EventFile() {
  if (file_) std::fclose(file_);
}

void EventFile::write_event(int64_t step, const std::string& what) {
  std::string event;
  put_key(event, 1, kFixed64);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  put_little_endian(event, std::chrono::duration<double>(now).count());
  if (step != 0) put_int(event, 2, step);
  event += what;
  const auto record = tf_record(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size())
    throw UserError(path_.string() + ": write error: " + std::strerror(errno));
}

void EventFile::session_start(int64_t step) {
  std::string session_log;
  put_int(session_log, 1, 1);  // status: START
  std::string what;
  put_bytes(what, 7, session_log);
  write_event(step, what);
}

void EventFile::scalar(int64_t step, const std::string& tag, float value) {
  std::string field;
  put_key(field, 2, kFixed32);
  put_little_endian(field, value);
  std::string what;
  put_bytes(what, 5, summary_of(tag, field));
  write_event(step, what);
}

void EventFile::image(int64_t step, const std::string& tag, const std::string& png, int width, int height) {
  std::string image;
  put_int(image, 1, height);
  put_int(image, 2, width);
  put_int(image, 3, 3);  // colorspace: RGB
  put_bytes(image, 4, png);
  std::string field;
  put_bytes(field, 4, image);
  std::string what;
  put_bytes(what, 5, summary_of(tag, field));
  write_event(step, what);
}

void EventFile::flush() {
  if (std::fflush(file_) != 0) throw UserError(path_.string() + ": write error: " + std::strerror(errno));
}

}  // namespace lucid::report

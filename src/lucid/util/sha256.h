// SHA-256 (FIPS 180-4) of byte streams, for the digests that runs and benchmarks compare: the same
// bytes give the same hex string on every machine.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace lucid::util {

class Sha256 {
 public:
  Sha256();
  // Appends bytes; any split of a message into update calls gives the same digest.
  Sha256& update(const void* data, size_t size);
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  // The digest; the object is spent afterwards (a further update or digest is a logic error).
  std::array<uint8_t, 32> digest();
  std::string hex_digest();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t used_ = 0;      // bytes in buf_
  uint64_t length_ = 0;  // message bytes so far
  bool done_ = false;
};

std::string sha256_hex(const void* data, size_t size);
inline std::string sha256_hex(std::string_view s) { return sha256_hex(s.data(), s.size()); }

}  // namespace lucid::util

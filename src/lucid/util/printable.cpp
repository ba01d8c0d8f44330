#include "lucid/util/printable.h"

#include <cstdio>

namespace lucid::util {

namespace {

bool continuation(unsigned char c) { return c >= 0x80 && c <= 0xbf; }

// The length of the valid UTF-8 sequence at text[i] (1 for ASCII), or 0 where text[i] starts none.
size_t sequence_length(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) return 1;
  const size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if (!continuation(static_cast<unsigned char>(text[i + k]))) return 0;
  return n;
}

// How many bytes at text[i] form one control character: C0 or DEL (1), C1 as UTF-8 (2), a lone
// byte 0x80..0x9F, which a terminal in an 8-bit mode takes as C1 (1); 0 where text[i] starts none.
size_t control_length(std::string_view text, size_t i, size_t sequence) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x20 || c == 0x7f) return 1;
  if (sequence == 2 && c == 0xc2 && static_cast<unsigned char>(text[i + 1]) <= 0x9f) return 2;
  if (sequence == 0 && c >= 0x80 && c <= 0x9f) return 1;
  return 0;
}

}  // namespace

bool has_control_character(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = sequence_length(text, i);
    if (control_length(text, i, n)) return true;
    i += n ? n : 1;
  }
  return false;
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = sequence_length(text, i), control = control_length(text, i, n);
    const size_t step = n ? n : 1;
    if (control == 0) {
      out.append(text.substr(i, step));
    } else {
      for (size_t k = 0; k < control; ++k) {
        char b[8];
        std::snprintf(b, sizeof b, "\\x%02x", static_cast<unsigned char>(text[i + k]));
        out += b;
      }
    }
    i += control ? control : step;
  }
  return out;
}

}  // namespace lucid::util

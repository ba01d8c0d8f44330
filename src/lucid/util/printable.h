// Text from files and options shown on a terminal: control characters (C0 with newline and tab, DEL,
// and C1, the UTF-8 U+0080..U+009F or a lone byte 0x80..0x9F) would move the cursor, recolour the
// terminal, set its title or break a one-line message; printable() writes each such byte as \xNN.
// Other text, UTF-8 letters and spaces included, is kept as it is.
#pragma once
#include <string>
#include <string_view>

namespace lucid::util {

// Whether printable(text) differs from text.
bool has_control_character(std::string_view text);

// text with each byte of a control character as \xNN (lowercase hex): "a\nb" -> "a\x0ab".
std::string printable(std::string_view text);

}  // namespace lucid::util

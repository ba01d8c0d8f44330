// Reference-style `key=value` options. Each command declares its keys with defaults and help;
// unknown keys and malformed values are errors naming the key.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace lucid::config {

// Upper bounds of the options whose value sets an allocation's size: beyond them a run would only
// exhaust memory (imgsz=100000 asks for 30 GB per image), so they are refused with the option named.
inline constexpr long long kMaxImgsz = 8192;
inline constexpr long long kMaxBatch = 65536;
inline constexpr long long kMaxClasses = 100000;

// The reference's check_imgsz: an image size `imgsz` of option `key` that is not a multiple of the
// network's largest stride is rounded up to one, with a warning on stderr saying so.
long long stride_multiple(long long imgsz, const std::string& key = "imgsz", long long stride = 32);

// The sizes of an imgsz option as the reference's check_imgsz reads its text: one size ("640") or a
// list of two, height then width ("480,640", "[480, 640]", "(480, 640)"; "[640]" is one size). Each
// from 1 to kMaxImgsz; anything else is a UserError naming `key=text`.
std::vector<long long> read_imgsz(const std::string& key, const std::string& text);

// An input size, height by width: imgsz=640 is 640 x 640, imgsz=[480, 640] is 480 high and 640 wide.
// 0 x 0 where none is given (the weights file's, else 640).
struct ImageSize {
  long long h = 0, w = 0;
  bool square() const { return h == w; }
  long long max_side() const { return h > w ? h : w; }
  // "640" for a square, "[480, 640]" otherwise (the reference's spelling of a list).
  std::string text() const;
  bool operator==(const ImageSize&) const = default;
};

// The one size of an imgsz option of a command that takes one (train, val, export), from its text;
// [h, w] with h == w is that size. Otherwise as `lists` says: SquareOnly (export: lucid writes square
// inputs) refuses it; LargerSide (train, val) uses the larger side with a warning, as the reference's
// check_imgsz(max_dim=1) does.
enum class ImgszLists { SquareOnly, LargerSide };
long long one_imgsz(const std::string& key, const std::string& text, ImgszLists lists, const std::string& command);

// imgsz of predict: one size (a square) or [h, w] (a rectangle, height first), as the reference's
// predictor takes it; each side rounded up to a multiple of 32. 0 x 0: the weights file's, else 640.
ImageSize predict_imgsz(const std::string& key, const std::string& text);

struct OptionSpec {
  std::string key;
  std::string default_value;
  std::string help;
  bool boolean = false;  // True/False-valued: the bare key means True, also where the default is resolved at run time
};

class Options {
 public:
  Options(std::string command, std::vector<OptionSpec> specs);

  // Parses `key=value` tokens; throws UserError for unknown keys or tokens without '='.
  void parse(const std::vector<std::string>& tokens);
  // A command's arguments: `--help`/`-h` first prints the help and returns false; otherwise parses
  // them (as parse) and returns true.
  bool parse_or_help(const std::vector<std::string>& args);

  const std::string& str(const std::string& key) const;
  long long integer(const std::string& key) const;
  // An integer within [lo, hi]; outside it a UserError naming the option and the range.
  long long integer(const std::string& key, long long lo, long long hi) const;
  // A finite number (NaN and infinity are errors naming the option).
  double number(const std::string& key) const;
  bool flag(const std::string& key) const;
  bool given(const std::string& key) const { return given_.count(key) > 0; }

  std::string help() const;
  const std::vector<OptionSpec>& specs() const { return specs_; }
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::string command_;
  // "'imgz' is not a valid option; did you mean imgsz=640? ...": the nearest key when it is a likely typo.
  std::string unknown_option_message(const std::string& key) const;

  std::vector<OptionSpec> specs_;
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> given_;
};

}  // namespace lucid::config

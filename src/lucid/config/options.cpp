#include "lucid/config/options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <sstream>
#include <system_error>

#include "lucid/config/fields.h"
#include "lucid/config/reference_keys.h"
#include "lucid/util/error.h"

namespace lucid::config {

Options::Options(std::string command, std::vector<OptionSpec> specs)
    : command_(std::move(command)), specs_(std::move(specs)) {
  for (const auto& s : specs_) values_[s.key] = s.default_value;
}

bool Options::parse_or_help(const std::vector<std::string>& args) {
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << help();
    return false;
  }
  parse(args);
  return true;
}

long long stride_multiple(long long imgsz, const std::string& key, long long stride) {
  const long long rounded = (imgsz + stride - 1) / stride * stride;
  if (rounded != imgsz)
    std::fprintf(stderr, "warning: %s=%lld must be a multiple of max stride %lld, updating to %lld\n", key.c_str(),
                 imgsz, stride, rounded);
  return rounded;
}

std::vector<long long> read_imgsz(const std::string& key, const std::string& text) {
  // The brackets of a Python list or tuple around the sizes, as the reference's literal_eval reads them.
  std::string inner = text;
  const auto strip = [](std::string& t) {
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.erase(0, 1);
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  };
  strip(inner);
  if (inner.size() >= 2 &&
      ((inner.front() == '[' && inner.back() == ']') || (inner.front() == '(' && inner.back() == ')')))
    inner = inner.substr(1, inner.size() - 2);
  std::vector<long long> sizes;
  std::string part;
  std::istringstream parts(inner);
  const std::string expected = "option " + key + "=" + text +
                               ": expected an image size (imgsz=640) or [h, w] (imgsz=480,640), each from 1 to " +
                               std::to_string(kMaxImgsz);
  while (std::getline(parts, part, ',')) {
    strip(part);
    if (part.empty() && parts.eof() && sizes.size() == 1) break;  // "(640,)": a one-item tuple
    long long v = 0;
    const auto r = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || r.ec != std::errc() || r.ptr != part.data() + part.size() || v < 1 || v > kMaxImgsz)
      throw UserError(expected);
    sizes.push_back(v);
  }
  if (sizes.empty() || sizes.size() > 2) throw UserError(expected);
  return sizes;
}

long long one_imgsz(const std::string& key, const std::string& text, ImgszLists lists, const std::string& command) {
  const auto sizes = read_imgsz(key, text);
  if (sizes.size() == 1 || sizes[0] == sizes[1]) return sizes[0];
  const std::string given = ImageSize{sizes[0], sizes[1]}.text();
  if (lists == ImgszLists::SquareOnly)
    throw UserError("option " + key + "=" + text + ": lucid " + command + " takes square inputs; give one size (" +
                    key + "=640) or [h, w] with h == w");
  // The reference's check_imgsz(max_dim=1) for train and val: the larger side, with a warning.
  const long long larger = std::max(sizes[0], sizes[1]);
  std::fprintf(stderr,
               "warning: %s=%s: lucid %s takes one size, a square, and uses %s=%lld, the larger side; [h, w] is for "
               "predict (and export with h == w)\n",
               key.c_str(), given.c_str(), command.c_str(), key.c_str(), larger);
  return larger;
}

ImageSize predict_imgsz(const std::string& key, const std::string& text) {
  const auto sizes = read_imgsz(key, text);
  const ImageSize given{sizes[0], sizes.back()};
  const auto up = [](long long v) { return (v + 31) / 32 * 32; };
  const ImageSize rounded{up(given.h), up(given.w)};
  if (rounded != given)
    std::fprintf(stderr, "warning: %s=%s must be a multiple of max stride 32, updating to %s\n", key.c_str(),
                 given.text().c_str(), rounded.text().c_str());
  return rounded;
}

std::string ImageSize::text() const {
  return square() ? std::to_string(h) : "[" + std::to_string(h) + ", " + std::to_string(w) + "]";
}

namespace {

// Edit distance (insertions, deletions, substitutions, adjacent swaps) between two keys.
size_t key_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string Options::unknown_option_message(const std::string& key) const {
  // The nearest declared key, when it is near enough to be a typo of it (the reference suggests so too).
  const OptionSpec* best = nullptr;
  size_t best_distance = 0;
  for (const auto& spec : specs_) {
    const size_t d = key_distance(key, spec.key);
    if (!best || d < best_distance) best = &spec, best_distance = d;
  }
  std::string message = "'" + key + "' is not a valid option";
  if (best && best_distance <= std::max<size_t>(1, std::min(key.size(), best->key.size()) / 3))
    message += "; did you mean " + best->key + (best->default_value.empty() ? "" : "=" + best->default_value) + "?";
  return message + " (see lucid " + command_ + " --help)";
}

namespace {

const OptionSpec* declared(const std::vector<OptionSpec>& specs, const std::string& key) {
  for (const auto& s : specs)
    if (s.key == key) return &s;
  return nullptr;
}

}  // namespace

void Options::parse(const std::vector<std::string>& tokens) {
  for (const auto& tok : tokens) {
    auto eq = tok.find('=');
    if (eq == std::string::npos && values_.count(tok)) {
      // The reference's bare flags: `resume`, `val`, `half` alone mean True (the entrypoint of its
      // cfg/__init__.py); lucid's own keys with a True/False default likewise. Other keys need a value.
      const OptionSpec* spec = declared(specs_, tok);
      const std::string def = spec ? spec->default_value : "";
      const bool boolean = spec && (spec->boolean || def == "True" || def == "False");
      const bool bare = reference_keys().count(tok) ? reference_bare_flag(tok) : boolean;
      if (!bare)
        throw UserError("'" + tok + "' is a valid option but is missing '=' to set its value, e.g. " + tok + "=" +
                        (def.empty() ? "VALUE" : def) + " (see lucid " + command_ + " --help)");
      values_[tok] = "True";
      given_[tok] = true;
      continue;
    }
    if (eq == std::string::npos || eq == 0)
      throw UserError("'" + tok + "': options are key=value (see lucid " + command_ + " --help)");
    auto key = tok.substr(0, eq);
    if (!values_.count(key)) throw UserError(unknown_option_message(key));
    values_[key] = tok.substr(eq + 1);
    given_[key] = true;
  }
}

const std::string& Options::str(const std::string& key) const { return values_.at(key); }

long long read_integer(const std::string& key, const std::string& v, long long lo, long long hi) {
  long long x = 0;
  bool ok = false;
  try {
    size_t used = 0;
    x = std::stoll(v, &used);
    ok = used == v.size();
  } catch (const std::exception&) {
  }
  if (!ok) throw UserError("option " + key + "=" + v + ": expected an integer");
  if (x < lo || x > hi)
    throw UserError("option " + key + "=" + v + ": expected an integer from " + std::to_string(lo) + " to " +
                    std::to_string(hi));
  return x;
}

double read_number(const std::string& key, const std::string& v) {
  try {
    size_t used = 0;
    double x = std::stod(v, &used);
    if (used == v.size() && std::isfinite(x)) return x;
  } catch (const std::exception&) {
  }
  // NaN and infinity are refused here, for every command: no option means them, and they would
  // pass every range check written as a comparison.
  throw UserError("option " + key + "=" + v + ": expected a finite number");
}

bool read_flag(const std::string& key, const std::string& value) {
  auto v = value;
  std::transform(v.begin(), v.end(), v.begin(), ::tolower);
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  throw UserError("option " + key + "=" + value + ": expected True or False");
}

std::string format_number(double v) {
  if (!std::isfinite(v)) return v != v ? "nan" : v > 0 ? "inf" : "-inf";
  // The shortest digits that read back as v, placed as Python's repr places them: fixed notation
  // for exponents from -4 to 15 (with ".0" on whole numbers), else scientific.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);
  const auto e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  if (exp < -4 || exp >= 16) return sci;
  std::string mantissa = sci.substr(0, e), sign;
  if (mantissa[0] == '-') sign = "-", mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  const int point = exp + 1;  // digits before the decimal point
  const int n = static_cast<int>(digits.size());
  if (point <= 0) return sign + "0." + std::string(static_cast<size_t>(-point), '0') + digits;
  if (point >= n) return sign + digits + std::string(static_cast<size_t>(point - n), '0') + ".0";
  return sign + digits.substr(0, static_cast<size_t>(point)) + "." + digits.substr(static_cast<size_t>(point));
}

long long Options::integer(const std::string& key) const {
  return read_integer(key, values_.at(key), std::numeric_limits<long long>::min(),
                      std::numeric_limits<long long>::max());
}

long long Options::integer(const std::string& key, long long lo, long long hi) const {
  return read_integer(key, values_.at(key), lo, hi);
}

double Options::number(const std::string& key) const { return read_number(key, values_.at(key)); }

bool Options::flag(const std::string& key) const { return read_flag(key, values_.at(key)); }

std::string Options::help() const {
  std::ostringstream o;
  o << "usage: lucid " << command_ << " [key=value ...]\n\noptions (default in brackets):\n";
  for (const auto& s : specs_) {
    std::string left = "  " + s.key + " [" + s.default_value + "]";
    o << left << std::string(left.size() < 34 ? 34 - left.size() : 1, ' ') << s.help << "\n";
  }
  return o.str();
}

}  // namespace lucid::config

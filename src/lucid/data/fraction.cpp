#include "lucid/data/fraction.h"

#include <cmath>
#include <limits>
#include <vector>

#include "lucid/util/error.h"

namespace lucid::data {

namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// A Python literal as the reference reads it: an int (digits only) or a float.
bool parse_number(const std::string& text, bool& is_int, double& value) {
  const auto t = trim(text);
  if (t.empty()) return false;
  is_int = t.find_first_not_of("+-0123456789") == std::string::npos;
  try {
    size_t used = 0;
    value = std::stod(t, &used);
    return used == t.size() && std::isfinite(value);
  } catch (const std::exception&) {
    return false;
  }
}

// An integer count of any size: past int64 (fraction=99999999999999999999) it keeps every image,
// as the reference's files[:count] does; a cast of such a double would be undefined.
int64_t as_count(double x) { return x >= 9.2e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(x); }

}  // namespace

DatasetFraction DatasetFraction::parse(const std::string& value) {
  auto bad = [&](const std::string& why) { return UserError("option fraction=" + value + ": " + why); };
  DatasetFraction f;
  std::string v = trim(value);
  const bool list = !v.empty() && (v.front() == '[' || v.front() == '(');
  if (list) {
    if (v.back() != ']' && v.back() != ')') throw bad("a list is written [train,val] or [train,val,test]");
    v = v.substr(1, v.size() - 2);
    std::vector<std::string> items;
    for (size_t start = 0;;) {
      const auto comma = v.find(',', start);
      items.push_back(v.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (items.size() != 2 && items.size() != 3) throw bad("use [train, val] or [train, val, test] counts/ratios");
    for (size_t k = 0; k < items.size(); ++k) {
      bool is_int = false;
      double x = 0;
      if (!parse_number(items[k], is_int, x)) throw bad("'" + trim(items[k]) + "' is not a number");
      if (is_int ? x < 0 : (x < 0 || x > 1)) throw bad("each entry is a count >= 0 or a ratio in [0, 1]");
      if (k < 2 && x == 0)
        throw bad(std::string(k == 0 ? "train" : "val") + " fraction must select at least one image");
      auto& p = f.parts_[k];
      // 0 and 1 are ratios (the reference turns them into 0.0 and 1.0), other integers counts.
      p.is_count = is_int && x != 0 && x != 1;
      p.count = p.is_count ? as_count(x) : 0;
      p.ratio = p.is_count ? 1.0 : x;
    }
    return f;
  }
  bool is_int = false;
  double x = 0;
  if (!parse_number(v, is_int, x)) throw bad("expected a ratio in (0, 1], an image count > 1 or a [train,val] list");
  if (!((x > 0 && x <= 1) || (is_int && x > 1))) throw bad("use an integer count > 1 or a ratio in (0, 1]");
  auto& p = f.parts_[0];
  p.is_count = is_int && x > 1;
  p.count = p.is_count ? as_count(x) : 0;
  p.ratio = p.is_count ? 1.0 : x;
  return f;
}

int64_t DatasetFraction::keep(const std::string& split, int64_t listed) const {
  const int k = split == "train" ? 0 : split == "val" ? 1 : split == "test" ? 2 : -1;
  if (k < 0) return listed;
  const auto& p = parts_[static_cast<size_t>(k)];
  const int64_t count =
      p.is_count ? p.count
                 : std::max<int64_t>(1, static_cast<int64_t>(std::nearbyint(static_cast<double>(listed) * p.ratio)));
  return std::min(count, listed);
}

bool DatasetFraction::all() const {
  for (const auto& p : parts_)
    if (p.is_count || p.ratio != 1.0) return false;
  return true;
}

}  // namespace lucid::data

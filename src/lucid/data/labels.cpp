#include "lucid/data/labels.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <set>

#include "lucid/metrics/coco_json.h"
#include "lucid/util/class_names.h"
#include "lucid/util/error.h"

namespace lucid::data {

std::string Problem::str() const { return path + (line > 0 ? ":" + std::to_string(line) : "") + ": " + message; }

const Split* DatasetIndex::find(const std::string& name) const {
  for (const auto& s : splits)
    if (s.name == name) return &s;
  return nullptr;
}

std::array<float, 4> polygon_box(const std::vector<Polygon>& polygons) {
  float x1 = std::numeric_limits<float>::infinity(), y1 = x1, x2 = -x1, y2 = -x1;
  for (const auto& p : polygons)
    for (size_t i = 0; i + 1 < p.size(); i += 2) {
      x1 = std::min(x1, p[i]), x2 = std::max(x2, p[i]);
      y1 = std::min(y1, p[i + 1]), y2 = std::max(y2, p[i + 1]);
    }
  if (x1 > x2) return {0, 0, 0, 0};
  return {(x1 + x2) / 2.0f, (y1 + y2) / 2.0f, x2 - x1, y2 - y1};
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// A decimal number as Python's float() reads it (optional sign, inf/nan spelled out); false for
// anything else. The reference converts through float64, then float32.
bool parse_number(std::string_view tok, double& out) {
  if (!tok.empty() && tok[0] == '+') tok.remove_prefix(1);
  if (tok.empty() || tok[0] == '+') return false;
  const char* end = tok.data() + tok.size();
  auto [p, ec] = std::from_chars(tok.data(), end, out);
  return ec == std::errc() && p == end;
}

std::string show(std::string_view tok) {
  std::string s(tok.substr(0, 40));
  for (auto& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  return "'" + s + (tok.size() > 40 ? "...'" : "'");
}

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

struct Row {
  int line;
  std::vector<std::string_view> tokens;
};

}  // namespace

namespace {
// Indices of the first occurrence of each distinct key, in sorted key order (numpy's unique with
// return_index: a stable sort, then the first of each run of equal keys).
template <class Key>
std::vector<size_t> first_of_each_sorted(const std::vector<Key>& keys) {
  std::vector<size_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  std::vector<size_t> keep;
  for (size_t k = 0; k < order.size(); ++k)
    if (k == 0 || keys[order[k]] != keys[order[k - 1]]) keep.push_back(order[k]);
  return keep;
}

// The bytes numpy compares for a (class, polygon) row: float32 class, then the float32 points.
std::string class_and_points_bytes(const Instance& inst) {
  std::string key;
  auto add = [&](float v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };  // little-endian, as numpy's
  add(static_cast<float>(inst.cls));
  for (const auto& part : inst.polygons)
    for (float v : part) add(v);
  return key;
}
}  // namespace

std::vector<size_t> unique_instances(const std::vector<Instance>& instances) {
  std::vector<std::array<float, 5>> rows;
  bool polygons = false;
  for (const auto& inst : instances) {
    rows.push_back({float(inst.cls), inst.box[0], inst.box[1], inst.box[2], inst.box[3]});
    polygons = polygons || !inst.polygons.empty();
  }
  auto keep = first_of_each_sorted(rows);
  if (keep.size() < rows.size() && polygons) {
    // Distinct polygons may share a class and box: only rows equal in their points too are duplicates.
    std::vector<std::string> keys;
    for (const auto& inst : instances) keys.push_back(class_and_points_bytes(inst));
    keep = first_of_each_sorted(keys);
  }
  if (keep.size() == rows.size()) std::iota(keep.begin(), keep.end(), 0);  // nothing removed: the file's order
  return keep;
}

LabelParse parse_yolo_labels(std::string_view text, int nc, const std::string& path) {
  LabelParse out;
  auto fail = [&](int line, std::string message) {
    out.ok = false;
    out.instances.clear();
    out.problems.push_back({path, line, std::move(message) + "; image skipped"});
    return out;
  };
  // Split into lines (\n, \r\n or \r) and tokens, keeping 1-based line numbers.
  std::vector<Row> rows;
  size_t extra_rows = 0;  // non-blank rows beyond the instance cap, counted but not split
  int line = 1;
  size_t i = 0;
  while (i <= text.size()) {
    size_t j = i;
    while (j < text.size() && text[j] != '\n' && text[j] != '\r') ++j;
    std::string_view l = text.substr(i, j - i);
    Row row{line, {}};
    size_t k = 0;
    if (rows.size() == kMaxInstancesPerImage) {  // over the cap: only count the remaining rows
      while (k < l.size() && is_space(l[k])) ++k;
      extra_rows += k < l.size();
      k = l.size();
    }
    while (k < l.size()) {
      while (k < l.size() && is_space(l[k])) ++k;
      size_t s = k;
      while (k < l.size() && !is_space(l[k])) ++k;
      if (k > s) row.tokens.push_back(l.substr(s, k - s));
    }
    if (!row.tokens.empty()) rows.push_back(std::move(row));
    if (j >= text.size()) break;
    i = j + 1 + (text[j] == '\r' && j + 1 < text.size() && text[j + 1] == '\n');
    ++line;
  }
  if (rows.empty()) return out;  // empty or blank file: a background image
  if (extra_rows > 0)
    return fail(0, std::to_string(rows.size() + extra_rows) + " label rows (instances), more than the " +
                       std::to_string(kMaxInstancesPerImage) + " one image may hold");

  const bool polygons = std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.tokens.size() > 6; });
  // A five-value row beside polygons is a box row, not a two-point polygon: the file is refused, as
  // the reference (8.4.190) refuses labels that mix segment and detection rows.
  if (polygons)
    for (const auto& r : rows)
      if (r.tokens.size() == 5)
        return fail(r.line, "a box row (class cx cy w h) among polygon rows: labels mix detection and segment rows");
  std::vector<Instance> instances;
  for (const auto& r : rows) {
    std::vector<float> v(r.tokens.size());
    for (size_t t = 0; t < r.tokens.size(); ++t) {
      double d;
      if (!parse_number(r.tokens[t], d)) return fail(r.line, "non-numeric value " + show(r.tokens[t]));
      if (!std::isfinite(d) || std::fabs(d) > 3.0e38) return fail(r.line, "non-finite value " + show(r.tokens[t]));
      v[t] = static_cast<float>(d);
    }
    Instance inst;
    const float cls = v[0];
    if (polygons) {
      const size_t n = v.size() - 1;
      if (n % 2) return fail(r.line, "odd number of coordinates (" + std::to_string(n) + ") in a polygon");
      if (n == 0) return fail(r.line, "polygon without points");
      if (n < 6)
        out.problems.push_back(
            {path, r.line,
             "polygon with " + std::to_string(n / 2) +
                 " point(s), fewer than 3: kept (its mask is degenerate), as the reference keeps it"});
      inst.polygons.emplace_back(v.begin() + 1, v.end());
      inst.box = polygon_box(inst.polygons);
    } else {
      if (v.size() != 5)
        return fail(r.line, "expected 5 values (class cx cy w h) or a polygon (class x1 y1 x2 y2 x3 y3 ...), got " +
                                std::to_string(v.size()));
      inst.box = {v[1], v[2], v[3], v[4]};
    }
    for (float b : inst.box) {
      if (b > 1.01f)
        return fail(r.line, std::string(polygons ? "polygon extent" : "box") + " out of bounds: value " + fmt(b) +
                                " > 1.01 (coordinates are normalised to [0, 1])");
      if (b < -0.01f)
        return fail(r.line, std::string(polygons ? "polygon extent" : "box") + " out of bounds: value " + fmt(b) +
                                " < -0.01 (coordinates are normalised to [0, 1])");
    }
    if (cls < 0) return fail(r.line, "negative class id " + fmt(cls));
    if (cls != std::floor(cls)) return fail(r.line, "class id " + fmt(cls) + " is not an integer");
    if (cls >= float(nc))
      return fail(r.line, "class id " + fmt(cls) + " >= nc " + std::to_string(nc) + " (classes are 0-" +
                              std::to_string(nc - 1) + ")");
    inst.cls = static_cast<int>(cls);
    instances.push_back(std::move(inst));
  }
  auto keep = unique_instances(instances);
  if (keep.size() < instances.size()) {
    out.duplicates_removed = int(instances.size() - keep.size());
    std::vector<bool> kept(instances.size());
    for (auto k : keep) kept[k] = true;
    int first_dup = 0;
    for (size_t k = 0; k < instances.size() && !first_dup; ++k)
      if (!kept[k]) first_dup = rows[k].line;
    out.problems.push_back(
        {path, first_dup, std::to_string(out.duplicates_removed) + " duplicate label row(s) removed"});
    for (auto k : keep) out.instances.push_back(std::move(instances[k]));
  } else {
    out.instances = std::move(instances);
  }
  return out;
}

std::string format_yolo_line(int cls, const Polygon* polygon, const std::array<float, 4>& box, int digits) {
  std::string s = std::to_string(cls);
  auto add = [&](double v) {
    char b[48];
    std::snprintf(b, sizeof b, "%.*f", digits, v);
    std::string t(b);
    if (t.find('.') != std::string::npos) {
      while (t.back() == '0') t.pop_back();
      if (t.back() == '.') t.pop_back();
    }
    if (t == "-0") t = "0";
    s += ' ';
    s += t;
  };
  if (polygon)
    for (float v : *polygon) add(v);
  else
    for (float v : box) add(v);
  return s;
}

// ---- COCO --------------------------------------------------------------------------------------

namespace {

using nlohmann::json;

bool get_int(const json& j, int64_t& out) {
  if (j.is_number_integer()) {
    out = j.get<int64_t>();
    return true;
  }
  if (j.is_number_float()) {
    double d = j.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      out = static_cast<int64_t>(d);
      return true;
    }
  }
  return false;
}

bool get_number(const json& j, double& out) {
  if (!j.is_number()) return false;
  out = j.get<double>();
  return std::isfinite(out);
}

std::string short_dump(const json& j) {
  std::string s = j.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

}  // namespace

int64_t rle_area(const Rle& rle) {
  int64_t a = 0;
  for (size_t i = 1; i < rle.counts.size(); i += 2) a += rle.counts[i];
  return a;
}

std::array<double, 4> rle_bbox(const Rle& rle) {
  if (rle.height <= 0) return {0, 0, 0, 0};
  const int64_t h = rle.height;
  int64_t pos = 0, x1 = INT64_MAX, y1 = INT64_MAX, x2 = -1, y2 = -1;
  for (size_t i = 0; i < rle.counts.size(); ++i) {
    const int64_t c = rle.counts[i];
    if (i % 2 && c > 0) {  // a run of set pixels, column-major
      const int64_t first = pos, last = pos + c - 1;
      x1 = std::min(x1, first / h), x2 = std::max(x2, last / h);
      if (first / h == last / h) {
        y1 = std::min(y1, first % h), y2 = std::max(y2, last % h);
      } else {  // runs into the next column: it reaches both the bottom and the top row
        y1 = 0, y2 = h - 1;
      }
    }
    pos += c;
  }
  if (x2 < 0) return {0, 0, 0, 0};
  return {double(x1), double(y1), double(x2 - x1 + 1), double(y2 - y1 + 1)};
}

std::vector<double> rle_outline(const Rle& rle) {
  const int h = rle.height, w = rle.width;
  if (h <= 0 || w <= 0) return {};
  // Row-major mask with a one-pixel frame of zeros, so neighbours need no bounds test.
  const int W = w + 2;
  std::vector<uint8_t> mask(size_t(h + 2) * W, 0);
  int64_t pos = 0;
  for (size_t i = 0; i < rle.counts.size(); ++i) {
    const int64_t c = rle.counts[i];
    if (i % 2)
      for (int64_t k = pos; k < pos + c && k < int64_t(h) * w; ++k) mask[size_t(k % h + 1) * W + size_t(k / h + 1)] = 1;
    pos += c;
  }
  // Clockwise neighbour offsets on screen (y down), starting west.
  const int dx[8] = {-1, -1, 0, 1, 1, 1, 0, -1}, dy[8] = {0, -1, -1, -1, 0, 1, 1, 1};
  std::vector<uint8_t> seen(mask.size(), 0);
  std::vector<std::vector<double>> parts;
  std::vector<size_t> stack;
  for (int y = 1; y <= h; ++y)
    for (int x = 1; x <= w; ++x) {
      const size_t start = size_t(y) * W + x;
      if (!mask[start] || seen[start]) continue;
      // Mark the region (8-connected) so it is traced once.
      stack.assign(1, start);
      seen[start] = 1;
      while (!stack.empty()) {
        const size_t q = stack.back();
        stack.pop_back();
        for (int d = 0; d < 8; ++d) {
          const size_t n = size_t(ptrdiff_t(q) + dy[d] * W + dx[d]);
          if (mask[n] && !seen[n]) seen[n] = 1, stack.push_back(n);
        }
      }
      // Moore-neighbour tracing from the region's first pixel in raster order, whose west, north-west,
      // north and north-east neighbours are background; stops on re-entering the start the same way.
      std::vector<std::array<int, 2>> pts{{x, y}};
      int cx = x, cy = y, from = 0;  // search starts at the west neighbour
      int first_dir = -1;
      for (;;) {
        int d = 0, k = 0;
        for (; k < 8; ++k) {
          d = (from + k) % 8;
          if (mask[size_t(cy + dy[d]) * W + size_t(cx + dx[d])]) break;
        }
        if (k == 8) break;  // a single pixel
        if (cx == x && cy == y) {
          if (first_dir < 0)
            first_dir = d;
          else if (d == first_dir)
            break;
        }
        cx += dx[d], cy += dy[d];
        from = (d + 6) % 8;  // the neighbour after the one we came from, clockwise
        if (!(cx == x && cy == y)) pts.push_back({cx, cy});
      }
      // Straight runs to their ends.
      std::vector<double> part;
      const size_t n = pts.size();
      for (size_t i = 0; i < n; ++i) {
        const auto& a = pts[(i + n - 1) % n];
        const auto& b = pts[i];
        const auto& c = pts[(i + 1) % n];
        if (n > 2 && b[0] - a[0] == c[0] - b[0] && b[1] - a[1] == c[1] - b[1]) continue;
        part.insert(part.end(), {double(b[0] - 1), double(b[1] - 1)});
      }
      parts.push_back(std::move(part));
    }
  return merge_polygon_parts(parts);
}

double polygon_area(const std::vector<double>& xy) {
  const size_t n = xy.size() / 2;
  double a = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t j = (i + 1) % n;
    a += xy[2 * i] * xy[2 * j + 1] - xy[2 * j] * xy[2 * i + 1];
  }
  return std::fabs(a) / 2;
}

std::vector<double> merge_polygon_parts(const std::vector<std::vector<double>>& parts) {
  using Pts = std::vector<std::array<double, 2>>;
  const size_t n = parts.size();
  if (n == 0) return {};
  std::vector<Pts> seg(n);
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k + 1 < parts[i].size(); k += 2) seg[i].push_back({parts[i][k], parts[i][k + 1]});
  if (n == 1) {
    std::vector<double> out;
    for (auto& p : seg[0]) out.insert(out.end(), {p[0], p[1]});
    return out;
  }
  seg.erase(std::remove_if(seg.begin(), seg.end(), [](const Pts& s) { return s.empty(); }), seg.end());
  if (seg.size() < n)
    return merge_polygon_parts([&] {
      std::vector<std::vector<double>> kept;
      for (const auto& p : parts)
        if (p.size() >= 2) kept.push_back(p);
      return kept;
    }());
  // Closest vertex pair between consecutive parts (first minimum in row-major order).
  std::vector<std::vector<size_t>> links(n);
  for (size_t i = 1; i < n; ++i) {
    double best = std::numeric_limits<double>::infinity();
    size_t b1 = 0, b2 = 0;
    for (size_t a = 0; a < seg[i - 1].size(); ++a)
      for (size_t b = 0; b < seg[i].size(); ++b) {
        const double dx = seg[i - 1][a][0] - seg[i][b][0], dy = seg[i - 1][a][1] - seg[i][b][1];
        const double d = dx * dx + dy * dy;
        if (d < best) best = d, b1 = a, b2 = b;
      }
    links[i - 1].push_back(b1);
    links[i].push_back(b2);
  }
  std::vector<Pts> pieces;
  // Forward: each part rotated to start at its entry link and closed; middle parts contribute the
  // stretch from the entry to the exit link.
  for (size_t i = 0; i < n; ++i) {
    std::vector<size_t> idx = links[i];
    if (idx.size() == 2 && idx[0] > idx[1]) {
      std::swap(idx[0], idx[1]);
      std::reverse(seg[i].begin(), seg[i].end());
    }
    std::rotate(seg[i].begin(), seg[i].begin() + long(idx[0] % seg[i].size()), seg[i].end());
    seg[i].push_back(seg[i].front());
    if (i == 0 || i == n - 1) {
      pieces.push_back(seg[i]);
    } else {
      const size_t stop = std::min(seg[i].size(), idx[1] - idx[0] + 1);
      pieces.emplace_back(seg[i].begin(), seg[i].begin() + long(stop));
    }
  }
  // Backward: the middle parts' remaining stretch, walking back to the first part.
  for (size_t i = n; i-- > 0;) {
    if (i == 0 || i == n - 1) continue;
    const size_t skip = links[i][0] > links[i][1] ? links[i][0] - links[i][1] : links[i][1] - links[i][0];
    if (skip < seg[i].size()) pieces.emplace_back(seg[i].begin() + long(skip), seg[i].end());
  }
  std::vector<double> out;
  for (auto& p : pieces)
    for (auto& q : p) out.insert(out.end(), {q[0], q[1]});
  return out;
}

namespace {

using Warn = std::function<void(std::string)>;

// The deepest nesting of arrays and objects in JSON text (brackets inside strings do not count).
// A linear scan: nlohmann's parser callback, which could count the depth while parsing, scans the
// enclosing array after every object it closes, which made a file of a million annotations take
// hours (quadratic in the length of the annotations array).
size_t json_nesting_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

json parse_bounded_json(std::string_view text, const std::string& path) {
  // Bounded nesting: a COCO file is at most 4 levels deep; refuse pathological depth early.
  if (json_nesting_depth(text) > 32) throw error_at(path, 0, "JSON nested deeper than 32 levels");
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::out_of_range&) {  // nlohmann's "number overflow parsing '1e999'"
    throw error_at(path, 0, "not valid JSON: a number too large for a double (such as 1e999)");
  } catch (const json::exception& e) {
    throw error_at(path, 0, "not valid JSON: " + without_library_tag(e.what()));
  }
}

// The categories (sorted by id); returns their ids.
std::set<int64_t> read_categories(const json& categories, CocoFile& out, const Warn& warn) {
  std::set<int64_t> cat_ids;
  size_t k = 0;
  for (const auto& c : categories) {
    ++k;
    CocoCategory cat;
    if (!c.is_object() || !c.contains("id") || !get_int(c["id"], cat.id)) {
      warn("category #" + std::to_string(k) + " has no integer id: ignored");
      continue;
    }
    if (!cat_ids.insert(cat.id).second) {
      warn("category id " + std::to_string(cat.id) + " appears twice: the second is ignored");
      continue;
    }
    cat.name =
        c.contains("name") && c["name"].is_string() ? c["name"].get<std::string>() : "class_" + std::to_string(cat.id);
    if (c.contains("supercategory") && c["supercategory"].is_string())
      cat.supercategory = c["supercategory"].get<std::string>();
    out.categories.push_back(std::move(cat));
  }
  std::sort(out.categories.begin(), out.categories.end(),
            [](const CocoCategory& a, const CocoCategory& b) { return a.id < b.id; });
  return cat_ids;
}

// The images; returns where each id's record is in out.images.
std::map<int64_t, size_t> read_images(const json& images, CocoFile& out, const Warn& warn) {
  std::map<int64_t, size_t> image_at;
  size_t k = 0;
  for (const auto& im : images) {
    ++k;
    CocoImage rec;
    const std::string what = "image #" + std::to_string(k);
    if (!im.is_object() || !im.contains("id") || !get_int(im["id"], rec.id)) {
      warn(what + " has no integer id: ignored");
      continue;
    }
    const std::string which = "image id " + std::to_string(rec.id);
    if (!im.contains("file_name") || !im["file_name"].is_string() || im["file_name"].get<std::string>().empty()) {
      warn(which + " has no file_name: ignored");
      continue;
    }
    rec.file_name = im["file_name"].get<std::string>();
    int64_t w = 0, h = 0;
    if (!im.contains("width") || !im.contains("height") || !get_int(im["width"], w) || !get_int(im["height"], h) ||
        w <= 0 || h <= 0 || w > 1000000 || h > 1000000) {
      warn(which + " (" + rec.file_name + ") has no valid width/height: ignored");
      continue;
    }
    rec.width = int(w), rec.height = int(h);
    if (image_at.count(rec.id)) {
      warn(which + " appears twice: the second (" + rec.file_name + ") is ignored");
      continue;
    }
    image_at[rec.id] = out.images.size();
    out.images.push_back(std::move(rec));
  }
  return image_at;
}

// Polygon segmentation: false (warned) when the annotation is to be ignored; parts that cannot be
// polygons are dropped with a warning each.
bool read_polygons(const json& s, const std::string& which, CocoAnnotation& ann, const Warn& warn) {
  std::vector<std::string> dropped;
  for (size_t p = 0; p < s.size(); ++p) {
    const auto& part = s[p];
    if (!part.is_array()) {
      warn(which + ": polygon part " + std::to_string(p + 1) + " is not a list of numbers: ignored");
      return false;
    }
    std::vector<double> xy;
    xy.reserve(part.size());
    for (const auto& v : part) {
      double d;
      if (!get_number(v, d)) {
        warn(which + ": polygon part " + std::to_string(p + 1) + " has a non-numeric or non-finite value: ignored");
        return false;
      }
      xy.push_back(d);
    }
    if (xy.size() % 2) {
      dropped.push_back("polygon part " + std::to_string(p + 1) + " has an odd number of coordinates (" +
                        std::to_string(xy.size()) + ")");
      continue;
    }
    if (xy.size() < 6) {
      dropped.push_back("polygon part " + std::to_string(p + 1) + " has " + std::to_string(xy.size() / 2) +
                        " point(s), fewer than 3");
      continue;
    }
    ann.polygons.push_back(std::move(xy));
  }
  if (!s.empty() && ann.polygons.empty()) {  // nothing usable: one message for the annotation
    std::string why;
    for (const auto& d : dropped) why += (why.empty() ? "" : "; ") + d;
    warn(which + ": " + why + ": ignored");
    return false;
  }
  for (const auto& d : dropped) warn(which + ": " + d + ": part dropped");
  return true;
}

// RLE segmentation (compressed or not) of its image's size: false (warned) when it is not one.
bool read_rle(const json& s, const std::string& which, const CocoImage& img, CocoAnnotation& ann, const Warn& warn) {
  Rle rle;
  const json* size = s.contains("size") ? &s["size"] : nullptr;
  int64_t h = 0, w = 0;
  if (!size || !size->is_array() || size->size() != 2 || !get_int((*size)[0], h) || !get_int((*size)[1], w) ||
      h != img.height || w != img.width) {
    warn(which + ": RLE size is not [height, width] of its image (" + std::to_string(img.height) + ", " +
         std::to_string(img.width) + "): ignored");
    return false;
  }
  rle.height = int(h), rle.width = int(w);
  const json* counts = s.contains("counts") ? &s["counts"] : nullptr;
  try {
    if (counts && counts->is_string()) {
      rle.counts = rle_counts_from_string(counts->get<std::string>());
    } else if (counts && counts->is_array()) {
      for (const auto& c : *counts) {
        int64_t v;
        if (!get_int(c, v) || v < 0 || v > int64_t(std::numeric_limits<uint32_t>::max()))
          throw UserError("RLE counts are not non-negative integers");
        rle.counts.push_back(uint32_t(v));
      }
    } else {
      throw UserError("RLE has no counts");
    }
    uint64_t total = 0;
    for (auto c : rle.counts) total += c;
    if (total != uint64_t(h) * uint64_t(w))
      throw UserError("RLE counts sum to " + std::to_string(total) + ", not height*width " +
                      std::to_string(uint64_t(h) * uint64_t(w)));
  } catch (const UserError& e) {
    warn(which + ": " + e.what() + ": ignored");
    return false;
  }
  ann.rle = std::move(rle);
  return true;
}

// Annotation #k: nullopt (warned) when it is ignored.
std::optional<CocoAnnotation> read_annotation(const json& a, size_t k, const CocoFile& out,
                                              const std::map<int64_t, size_t>& image_at,
                                              const std::set<int64_t>& cat_ids, const Warn& warn) {
  CocoAnnotation ann;
  std::string which = "annotation #" + std::to_string(k);
  if (!a.is_object()) {
    warn(which + " is not an object: ignored");
    return std::nullopt;
  }
  if (a.contains("id") && get_int(a["id"], ann.id)) which = "annotation id " + std::to_string(ann.id);
  if (!a.contains("image_id") || !get_int(a["image_id"], ann.image_id) || !image_at.count(ann.image_id)) {
    warn(which + ": unknown image_id " + (a.contains("image_id") ? short_dump(a["image_id"]) : "(none)") + ": ignored");
    return std::nullopt;
  }
  if (!a.contains("category_id") || !get_int(a["category_id"], ann.category_id) || !cat_ids.count(ann.category_id)) {
    warn(which + ": unknown category_id " + (a.contains("category_id") ? short_dump(a["category_id"]) : "(none)") +
         ": ignored");
    return std::nullopt;
  }
  const CocoImage& img = out.images[image_at.at(ann.image_id)];
  if (a.contains("iscrowd")) {
    const auto& c = a["iscrowd"];
    int64_t v = 0;
    if (c.is_boolean())
      ann.iscrowd = c.get<bool>();
    else if (get_int(c, v))
      ann.iscrowd = v != 0;
    else {
      warn(which + ": iscrowd is not 0/1: ignored");
      return std::nullopt;
    }
  }
  if (a.contains("bbox") && !a["bbox"].is_null()) {
    const auto& b = a["bbox"];
    std::array<double, 4> box{};
    bool good = b.is_array() && b.size() == 4;
    for (size_t t = 0; good && t < 4; ++t) good = get_number(b[t], box[t]);
    if (!good) {
      warn(which + ": bbox is not 4 finite numbers: ignored");
      return std::nullopt;
    }
    ann.bbox = box;
  }
  if (a.contains("segmentation") && !a["segmentation"].is_null()) {
    const auto& s = a["segmentation"];
    if (s.is_array()) {
      if (!read_polygons(s, which, ann, warn)) return std::nullopt;
    } else if (s.is_object()) {
      if (!read_rle(s, which, img, ann, warn)) return std::nullopt;
    } else {
      warn(which + ": segmentation is neither polygons nor RLE: ignored");
      return std::nullopt;
    }
  }
  if (ann.polygons.empty() && !ann.rle && !ann.bbox) {
    warn(which + ": no segmentation and no bbox: ignored");
    return std::nullopt;
  }
  return ann;
}

}  // namespace

CocoFile parse_coco_json(std::string_view text, const std::string& path) {
  const json root = parse_bounded_json(text, path);
  if (!root.is_object()) throw error_at(path, 0, "COCO JSON must be an object with images, annotations, categories");
  for (const char* key : {"images", "annotations", "categories"})
    if (!root.contains(key) || !root[key].is_array())
      throw error_at(path, 0, std::string("COCO JSON has no '") + key + "' array");
  if (root["categories"].size() > metrics::kMaxCocoCategories)
    throw error_at(path, 0,
                   std::to_string(root["categories"].size()) + " categories, more than the " +
                       std::to_string(metrics::kMaxCocoCategories) + " classes a dataset may have");
  CocoFile out;
  const Warn warn = [&](std::string m) { out.problems.push_back({path, 0, std::move(m)}); };
  const auto cat_ids = read_categories(root["categories"], out, warn);
  for (const auto& c : out.categories)
    util::check_class_name(c.name, path + ": category id " + std::to_string(c.id) + " name");
  const auto image_at = read_images(root["images"], out, warn);
  size_t k = 0;
  for (const auto& a : root["annotations"])
    if (auto ann = read_annotation(a, ++k, out, image_at, cat_ids, warn)) out.annotations.push_back(std::move(*ann));
  return out;
}

}  // namespace lucid::data

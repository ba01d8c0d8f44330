#include "lucid/data/synth.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "lucid/data/labels.h"
#include "lucid/util/error.h"

namespace lucid::data {

namespace {

constexpr double kPi = 3.14159265358979323846;

// splitmix64: small, fast and the same on every platform (std distributions are not).
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  double uniform(double a, double b) { return a + (b - a) * uniform(); }
  int integer(int lo, int hi) { return lo + int(next() % uint64_t(hi - lo + 1)); }  // inclusive
};

uint64_t mix(uint64_t x) {
  Rng r{x};
  return r.next();
}

uint64_t hash_str(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

struct Rgb {
  double r, g, b;
};

Rgb hsv(double h_deg, double s, double v) {
  h_deg = std::fmod(std::fmod(h_deg, 360.0) + 360.0, 360.0);
  const double c = v * s, x = c * (1 - std::fabs(std::fmod(h_deg / 60.0, 2.0) - 1)), m = v - c;
  double r = 0, g = 0, b = 0;
  switch (int(h_deg / 60.0)) {
    case 0:
      r = c, g = x;
      break;
    case 1:
      r = x, g = c;
      break;
    case 2:
      g = c, b = x;
      break;
    case 3:
      g = x, b = c;
      break;
    case 4:
      r = x, b = c;
      break;
    default:
      r = c, b = x;
      break;
  }
  return {(r + m) * 255, (g + m) * 255, (b + m) * 255};
}

uint8_t clamp8(double v) { return uint8_t(std::lround(std::clamp(v, 0.0, 255.0))); }

// Smooth value noise on a coarse random grid (one value per grid point and channel).
struct Noise {
  int gw, gh;
  std::vector<double> v;  // gh x gw x 3
  Noise(Rng& rng, int gw_, int gh_, double amp) : gw(gw_), gh(gh_), v(size_t(gw_) * gh_ * 3) {
    for (auto& x : v) x = rng.uniform(-amp, amp);
  }
  double at(double u, double w, int c) const {  // u, w in [0, 1]
    const double x = u * (gw - 1), y = w * (gh - 1);
    const int x0 = std::min(int(x), gw - 2), y0 = std::min(int(y), gh - 2);
    double fx = x - x0, fy = y - y0;
    fx = fx * fx * (3 - 2 * fx), fy = fy * fy * (3 - 2 * fy);
    auto g = [&](int xx, int yy) { return v[(size_t(yy) * gw + xx) * 3 + c]; };
    return (g(x0, y0) * (1 - fx) + g(x0 + 1, y0) * fx) * (1 - fy) +
           (g(x0, y0 + 1) * (1 - fx) + g(x0 + 1, y0 + 1) * fx) * fy;
  }
};

struct Shape {
  int cls;
  std::vector<double> xy;  // pixel coordinates
  double x1, y1, x2, y2;
};

Shape make_shape(Rng& rng, int cls, double cx, double cy, double r) {
  Shape s{cls, {}, 0, 0, 0, 0};
  const double th = rng.uniform(0, kPi);
  auto add = [&](double x, double y) {
    s.xy.push_back(cx + x * std::cos(th) - y * std::sin(th));
    s.xy.push_back(cy + x * std::sin(th) + y * std::cos(th));
  };
  if (cls == 0) {  // ellipse
    const double rx = r * rng.uniform(0.6, 1.0), ry = r * rng.uniform(0.6, 1.0);
    const int n = 40;
    for (int i = 0; i < n; ++i) add(rx * std::cos(2 * kPi * i / n), ry * std::sin(2 * kPi * i / n));
  } else if (cls == 1) {  // rectangle
    const double a = r * rng.uniform(0.55, 1.0), b = r * rng.uniform(0.55, 1.0);
    add(-a, -b), add(a, -b), add(a, b), add(-a, b);
  } else {  // five-pointed star
    const double ro = r * rng.uniform(0.85, 1.0), ri = ro * 0.42;
    for (int i = 0; i < 10; ++i) {
      const double rr = i % 2 ? ri : ro, t = kPi * i / 5 - kPi / 2;
      add(rr * std::cos(t), rr * std::sin(t));
    }
  }
  s.x1 = s.x2 = s.xy[0], s.y1 = s.y2 = s.xy[1];
  for (size_t i = 0; i < s.xy.size(); i += 2) {
    s.x1 = std::min(s.x1, s.xy[i]), s.x2 = std::max(s.x2, s.xy[i]);
    s.y1 = std::min(s.y1, s.xy[i + 1]), s.y2 = std::max(s.y2, s.xy[i + 1]);
  }
  return s;
}

// Paints a polygon with anti-aliased edges: each pixel takes the fraction of its 4x4 sub-samples
// that fall inside (even-odd rule), so the label polygon is exactly the painted shape.
void paint(Image& im, const Shape& s, Rgb color, double shade_dx, double shade_dy) {
  constexpr int kSub = 4;
  const int px1 = std::max(0, int(std::floor(s.x1))), px2 = std::min(im.width - 1, int(std::ceil(s.x2)));
  const int py1 = std::max(0, int(std::floor(s.y1))), py2 = std::min(im.height - 1, int(std::ceil(s.y2)));
  const double cx = (s.x1 + s.x2) / 2, cy = (s.y1 + s.y2) / 2, r = std::max(1.0, (s.x2 - s.x1 + s.y2 - s.y1) / 4);
  const size_t n = s.xy.size() / 2;
  std::vector<double> cross;
  std::vector<int> cover(size_t(px2 - px1 + 1));
  for (int py = py1; py <= py2; ++py) {
    std::fill(cover.begin(), cover.end(), 0);
    for (int sy = 0; sy < kSub; ++sy) {
      const double y = py + (sy + 0.5) / kSub;
      cross.clear();
      for (size_t i = 0; i < n; ++i) {
        const size_t j = (i + 1) % n;
        const double ya = s.xy[2 * i + 1], yb = s.xy[2 * j + 1];
        if ((ya <= y) != (yb <= y)) {
          const double xa = s.xy[2 * i], xb = s.xy[2 * j];
          cross.push_back(xa + (y - ya) / (yb - ya) * (xb - xa));
        }
      }
      std::sort(cross.begin(), cross.end());
      for (int px = px1; px <= px2; ++px)
        for (int sx = 0; sx < kSub; ++sx) {
          const double x = px + (sx + 0.5) / kSub;
          const auto below = std::lower_bound(cross.begin(), cross.end(), x) - cross.begin();
          cover[size_t(px - px1)] += int(below % 2);
        }
    }
    for (int px = px1; px <= px2; ++px) {
      const double a = cover[size_t(px - px1)] / double(kSub * kSub);
      if (a <= 0) continue;
      const double shade = 1 + 0.18 * ((px - cx) * shade_dx + (py - cy) * shade_dy) / r;
      uint8_t* p = im.at(py, px);
      const double c[3] = {color.r * shade, color.g * shade, color.b * shade};
      for (int k = 0; k < 3; ++k) p[k] = clamp8(p[k] * (1 - a) + std::clamp(c[k], 0.0, 255.0) * a);
    }
  }
}

}  // namespace

const std::vector<std::string>& synth_class_names() {
  static const std::vector<std::string> names = {"ellipse", "rectangle", "star"};
  return names;
}

SynthSample synth_sample(uint64_t seed, const std::string& split, int index, int imgsz) {
  if (imgsz < 32) throw UserError("synth: imgsz must be at least 32");
  Rng rng{mix(seed) ^ mix(hash_str(split)) ^ mix(uint64_t(index) * 2 + 1)};
  // Size: longest side imgsz, the other between 5/8 and 1 of it.
  const int other = rng.integer(imgsz * 5 / 8, imgsz);
  const bool landscape = rng.uniform() < 0.5;
  const int W = landscape ? imgsz : other, H = landscape ? other : imgsz;
  SynthSample out;
  out.image = Image(H, W, 3);

  // Background: a desaturated base colour, a gradient, two octaves of smooth noise, fine grain and
  // faint stripes.
  const Rgb base = hsv(rng.uniform(0, 360), rng.uniform(0.0, 0.25), rng.uniform(0.3, 0.7));
  const double gx = rng.uniform(-40, 40), gy = rng.uniform(-40, 40);
  Noise coarse(rng, rng.integer(3, 5), rng.integer(3, 5), 35), fine(rng, rng.integer(10, 16), rng.integer(10, 16), 14);
  const double stripe_a = rng.uniform(0, kPi), stripe_f = rng.uniform(0.15, 0.6), stripe_amp = rng.uniform(0, 10);
  Rng grain{rng.next()};
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      const double u = (x + 0.5) / W, v = (y + 0.5) / H;
      const double stripe = stripe_amp * std::sin((x * std::cos(stripe_a) + y * std::sin(stripe_a)) * stripe_f);
      const double common = gx * (u - 0.5) + gy * (v - 0.5) + stripe + grain.uniform(-6, 6);
      uint8_t* p = out.image.at(y, x);
      const double b[3] = {base.r, base.g, base.b};
      for (int c = 0; c < 3; ++c) p[c] = clamp8(b[c] + common + coarse.at(u, v, c) + fine.at(u, v, c));
    }

  // Shapes: non-overlapping boxes (so every label is exactly what is visible), fully inside.
  const int count = rng.uniform() < 0.06 ? 0 : rng.integer(1, 5);
  std::vector<Shape> shapes;
  const double mindim = std::min(W, H);
  for (int k = 0; k < count; ++k) {
    const int cls = rng.integer(0, 2);
    for (int attempt = 0; attempt < 40; ++attempt) {
      const double r = mindim * rng.uniform(0.09, 0.24);
      Shape s = make_shape(rng, cls, rng.uniform(r, W - r), rng.uniform(r, H - r), r);
      if (s.x1 < 1 || s.y1 < 1 || s.x2 > W - 1 || s.y2 > H - 1) continue;
      bool clear = true;
      for (const auto& o : shapes)
        clear = clear && (s.x2 + 3 < o.x1 || o.x2 + 3 < s.x1 || s.y2 + 3 < o.y1 || o.y2 + 3 < s.y1);
      if (!clear) continue;
      shapes.push_back(std::move(s));
      break;
    }
  }
  static const double kHue[3] = {10, 125, 230};  // class tints help small models learn quickly
  for (const auto& s : shapes) {
    const Rgb color = hsv(kHue[s.cls] + rng.uniform(-25, 25), rng.uniform(0.55, 0.9), rng.uniform(0.62, 0.95));
    const double a = rng.uniform(0, 2 * kPi);
    paint(out.image, s, color, std::cos(a), std::sin(a));
    Instance inst;
    inst.cls = s.cls;
    Polygon p(s.xy.size());
    for (size_t i = 0; i < s.xy.size(); i += 2) p[i] = float(s.xy[i] / W), p[i + 1] = float(s.xy[i + 1] / H);
    inst.polygons.push_back(std::move(p));
    inst.box = polygon_box(inst.polygons);
    out.instances.push_back(std::move(inst));
  }
  return out;
}

SynthReport write_synth_dataset(const SynthOptions& o) {
  namespace fs = std::filesystem;
  if (o.out.empty()) throw UserError("synth: out=DIR is required");
  if (o.n_train < 1 || o.n_val < 1) throw UserError("synth: n_train and n_val must be at least 1");
  if (o.imgsz < 32 || o.imgsz > 4096) throw UserError("synth: imgsz must be in [32, 4096]");
  if (o.quality < 1 || o.quality > 100) throw UserError("synth: quality must be in [1, 100]");
  const fs::path root = o.out;
  const auto& names = synth_class_names();
  SynthReport report;
  for (const std::string split : {"train", "val"}) {
    const int n = split == "train" ? o.n_train : o.n_val;
    nlohmann::json coco = {{"info", {{"description", "lucid synthetic shapes"}, {"seed", o.seed}}},
                           {"images", nlohmann::json::array()},
                           {"annotations", nlohmann::json::array()},
                           {"categories", nlohmann::json::array()}};
    for (size_t c = 0; c < names.size(); ++c)
      coco["categories"].push_back({{"id", c + 1}, {"name", names[c]}, {"supercategory", "shape"}});
    int64_t ann_id = 0;
    for (int i = 0; i < n; ++i) {
      SynthSample s = synth_sample(o.seed, split, i, o.imgsz);
      char stem[32];
      std::snprintf(stem, sizeof stem, "%06d", i);
      const std::string file = std::string(stem) + ".jpg";
      write_file((root / "images" / split / file).string(), encode_jpeg(s.image, o.quality));
      std::string labels;
      const double W = s.image.width, H = s.image.height;
      coco["images"].push_back(
          {{"id", i + 1}, {"file_name", file}, {"width", s.image.width}, {"height", s.image.height}});
      for (const auto& inst : s.instances) {
        labels += format_yolo_line(inst.cls, &inst.polygons[0], inst.box) + "\n";
        std::vector<double> xy;
        for (size_t k = 0; k < inst.polygons[0].size(); k += 2)
          xy.push_back(std::round(inst.polygons[0][k] * W * 1000) / 1000),
              xy.push_back(std::round(inst.polygons[0][k + 1] * H * 1000) / 1000);
        double x1 = xy[0], y1 = xy[1], x2 = xy[0], y2 = xy[1];
        for (size_t k = 0; k < xy.size(); k += 2)
          x1 = std::min(x1, xy[k]), x2 = std::max(x2, xy[k]), y1 = std::min(y1, xy[k + 1]),
          y2 = std::max(y2, xy[k + 1]);
        coco["annotations"].push_back(
            {{"id", ++ann_id},
             {"image_id", i + 1},
             {"category_id", inst.cls + 1},
             {"segmentation", nlohmann::json::array({xy})},
             {"area", std::round(polygon_area(xy) * 1000) / 1000},
             {"bbox", {x1, y1, std::round((x2 - x1) * 1000) / 1000, std::round((y2 - y1) * 1000) / 1000}},
             {"iscrowd", 0}});
      }
      write_file((root / "labels" / split / (std::string(stem) + ".txt")).string(), labels);
      ++report.images;
      report.instances += int64_t(s.instances.size());
      report.backgrounds += s.instances.empty();
    }
    write_file((root / "annotations" / ("instances_" + split + ".json")).string(), coco.dump() + "\n");
  }
  std::string names_yaml = "names:\n";
  for (size_t c = 0; c < names.size(); ++c) names_yaml += "  " + std::to_string(c) + ": " + names[c] + "\n";
  const std::string header = "# Synthetic shapes written by `lucid data synth` (seed " + std::to_string(o.seed) +
                             ", imgsz " + std::to_string(o.imgsz) + "); paths are relative to this file\n";
  write_file((root / "data.yaml").string(), header + "train: images/train\nval: images/val\n" + names_yaml);
  write_file((root / "coco.yaml").string(),
             header + "# COCO form: annotations JSON per split, images beside them\n" +
                 "train: {json: annotations/instances_train.json, images: images/train}\n"
                 "val: {json: annotations/instances_val.json, images: images/val}\n");
  return report;
}

std::string default_synth_yaml() {
  namespace fs = std::filesystem;
  const char* env = std::getenv("LUCID_CACHE_DIR");
  const char* home = std::getenv("HOME");
  const fs::path base = env && *env ? fs::path(env) : fs::path(home && *home ? home : ".") / ".cache" / "lucid";
  return fs::absolute(base / "synth-v1" / "data.yaml").lexically_normal().string();
}

std::string ensure_default_synth() {
  namespace fs = std::filesystem;
  const fs::path yaml = default_synth_yaml();
  if (!fs::exists(yaml)) {
    SynthOptions so;
    so.out = yaml.parent_path().string();
    const auto report = write_synth_dataset(so);
    std::printf("synthetic dataset: %lld images, %lld instances -> %s\n", static_cast<long long>(report.images),
                static_cast<long long>(report.instances), so.out.c_str());
  }
  return yaml.string();
}

}  // namespace lucid::data

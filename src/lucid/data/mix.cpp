#include "lucid/data/mix.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <numeric>
#include <stdexcept>

#include "lucid/data/masks.h"
#include "lucid/data/warp.h"

namespace lucid::data {

namespace {

void check_image(const Sample& s, const char* what) {
  if (!s.image.defined() || s.image.dim() != 3 || s.image.scalar_type() != torch::kUInt8 || !s.image.is_cpu())
    throw std::invalid_argument(std::string(what) + ": sample image must be a uint8 (H, W, C) CPU tensor");
  if (s.instances.polygons.size() != s.instances.size() || s.instances.boxes.size() != s.instances.size())
    throw std::invalid_argument(std::string(what) + ": instance arrays disagree in length");
}

void check_same_size(const Sample& s, const torch::Tensor& other, const char* what) {
  if (!other.defined() || other.sizes() != s.image.sizes() || other.scalar_type() != torch::kUInt8)
    throw std::invalid_argument(std::string(what) + ": the partner image differs in size");
}

// One float32 overlap extent, clipped at 0 (numpy: (min(b) - max(a)).clip(0) in float32).
float extent(float a1, float a2, float b1, float b2) { return std::max(std::min(a2, b2) - std::max(a1, b1), 0.f); }

}  // namespace

float box_ioa(const Box& a, const Box& b) {
  const float inter = extent(a[0], a[2], b[0], b[2]) * extent(a[1], a[3], b[1], b[3]);
  const float area = (b[2] - b[0]) * (b[3] - b[1]);
  return inter / (area + 1e-7f);
}

// ---- Copy-paste ------------------------------------------------------------------------------------

bool has_polygons(const SampleInstances& in) {
  for (const auto& p : in.polygons)
    if (!p.empty()) return true;
  return false;
}

std::vector<int64_t> copy_paste_selection(const SampleInstances& target, const SampleInstances& candidates, double p) {
  std::vector<int64_t> eligible;
  std::vector<float> worst(candidates.size(), 0.f);
  for (size_t i = 0; i < candidates.size(); ++i) {
    bool ok = true;
    float m = -std::numeric_limits<float>::infinity();
    for (const auto& t : target.boxes) {
      const float v = box_ioa(candidates.boxes[i], t);
      ok &= v < 0.30f;
      m = std::max(m, v);
    }
    worst[i] = m;
    if (ok) eligible.push_back(int64_t(i));
  }
  std::stable_sort(eligible.begin(), eligible.end(), [&](int64_t a, int64_t b) { return worst[a] < worst[b]; });
  const auto take = size_t(std::nearbyint(p * double(eligible.size())));  // half to even
  eligible.resize(std::min(take, eligible.size()));
  return eligible;
}

void paste_instances(Sample& s, const torch::Tensor& source, const SampleInstances& candidates,
                     const std::vector<int64_t>& selected) {
  check_image(s, "copy_paste");
  check_same_size(s, source, "copy_paste");
  if (selected.empty()) return;
  const int h = s.height(), w = s.width(), cn = int(s.image.size(2));
  std::vector<uint8_t> mask(size_t(h) * w, 0);
  for (int64_t j : selected) {
    const auto& poly = candidates.polygons.at(size_t(j));
    if (poly.size() >= 2) fill_polygon(mask.data(), h, w, truncate_vertices(poly), 1);
  }
  auto image = s.image.contiguous().clone();
  const auto src = source.contiguous();
  uint8_t* dst = image.data_ptr<uint8_t>();
  const uint8_t* from = src.data_ptr<uint8_t>();
  for (size_t k = 0; k < mask.size(); ++k)
    if (mask[k]) std::memcpy(dst + k * cn, from + k * cn, size_t(cn));
  s.image = image;
  for (int64_t j : selected)
    s.instances.push_back(candidates.cls[size_t(j)], candidates.polygons[size_t(j)], candidates.boxes[size_t(j)]);
}

void copy_paste_flip(Sample& s, double p) {
  check_image(s, "copy_paste");
  if (!has_polygons(s.instances) || p <= 0) return;
  SampleInstances mirrored = s.instances;
  const float W = float(s.width());
  for (auto& b : mirrored.boxes) b = {W - b[2], b[1], W - b[0], b[3]};
  for (auto& poly : mirrored.polygons)
    for (size_t k = 0; k < poly.size(); k += 2) poly[k] = W - poly[k];
  const auto selected = copy_paste_selection(s.instances, mirrored, p);
  if (selected.empty()) return;
  paste_instances(s, flip_image(s.image, /*horizontal=*/true), mirrored, selected);
}

void copy_paste_partner(Sample& s, const Sample& partner, double p) {
  check_image(s, "copy_paste");
  check_image(partner, "copy_paste partner");
  if (!has_polygons(s.instances) || p <= 0) return;
  paste_instances(s, partner.image, partner.instances, copy_paste_selection(s.instances, partner.instances, p));
}

PartnerDraw draw_partner(SampleRng& rng, double p, int64_t dataset_size) {
  PartnerDraw d;
  const double u = rng.uniform();
  d.apply = p > 0 && u <= p;  // the reference skips when U(0, 1) > p
  d.partner = dataset_size > 0 ? rng.below(dataset_size) : 0;
  return d;
}

// ---- MixUp -----------------------------------------------------------------------------------------

MixUpDraw draw_mixup(SampleRng& rng, double p, int64_t dataset_size) {
  MixUpDraw d;
  d.partner = draw_partner(rng, p, dataset_size);
  d.r = draw_beta(rng, 32.0, 32.0);
  return d;
}

void mixup(Sample& s, const Sample& partner, double r) {
  check_image(s, "mixup");
  check_image(partner, "mixup partner");
  check_same_size(s, partner.image, "mixup");
  // Three separate double operations (products, then their sum), truncated: numpy's arithmetic.
  auto a = s.image.to(torch::kDouble).mul_(r);
  auto b = partner.image.to(torch::kDouble).mul_(1.0 - r);
  s.image = a.add_(b).to(torch::kUInt8).contiguous();
  SampleInstances more = partner.instances;
  s.instances.append(std::move(more));
}

// ---- CutMix ----------------------------------------------------------------------------------------

Rect cutmix_rect(int width, int height, double lam, int cx, int cy) {
  const double cut = std::sqrt(1.0 - lam);
  const int cut_w = int(width * cut), cut_h = int(height * cut);
  return {std::clamp(cx - cut_w / 2, 0, width), std::clamp(cy - cut_h / 2, 0, height),
          std::clamp(cx + cut_w / 2, 0, width), std::clamp(cy + cut_h / 2, 0, height)};
}

CutMixDraw draw_cutmix(SampleRng& rng, double p, int64_t dataset_size, int width, int height) {
  CutMixDraw d;
  d.partner = draw_partner(rng, p, dataset_size);
  for (auto& a : d.areas) {
    const double lam = draw_beta(rng, 1.0, 1.0);
    const int cx = int(rng.below(std::max(width, 1))), cy = int(rng.below(std::max(height, 1)));
    a = cutmix_rect(width, height, lam, cx, cy);
  }
  d.choice_bits = rng.next_u64();
  return d;
}

int64_t choose_area(uint64_t bits, int64_t n) {
  return int64_t(uint64_t(((unsigned __int128)bits * uint64_t(n)) >> 64));
}

bool cutmix(Sample& s, const Sample& partner, const std::array<Rect, 3>& areas,
            const std::function<int64_t(int64_t)>& choose) {
  check_image(s, "cutmix");
  check_image(partner, "cutmix partner");
  check_same_size(s, partner.image, "cutmix");
  std::vector<int> usable;
  for (int k = 0; k < 3; ++k) {
    const Box a = {float(areas[k][0]), float(areas[k][1]), float(areas[k][2]), float(areas[k][3])};
    bool clear = true;
    for (const auto& b : s.instances.boxes) clear &= box_ioa(a, b) <= 0.f;
    if (clear) usable.push_back(k);
  }
  if (usable.empty()) return false;
  const auto pick = choose(int64_t(usable.size()));
  if (pick < 0 || pick >= int64_t(usable.size())) throw std::invalid_argument("cutmix: area choice out of range");
  const Rect r = areas[size_t(usable[size_t(pick)])];
  const Box area = {float(r[0]), float(r[1]), float(r[2]), float(r[3])};
  const float thr = has_polygons(s.instances) ? 0.01f : 0.1f;
  std::vector<size_t> reach;
  for (size_t j = 0; j < partner.instances.size(); ++j)
    if (box_ioa(area, partner.instances.boxes[j]) >= thr) reach.push_back(j);
  if (reach.empty()) return false;
  // Pixels of the rectangle.
  auto image = s.image.contiguous().clone();
  const auto src = partner.image.contiguous();
  const int w = s.width(), cn = int(image.size(2));
  for (int y = r[1]; y < r[3]; ++y)
    if (r[2] > r[0])
      std::memcpy(image.data_ptr<uint8_t>() + (size_t(y) * w + r[0]) * cn,
                  src.data_ptr<uint8_t>() + (size_t(y) * w + r[0]) * cn, size_t(r[2] - r[0]) * cn);
  s.image = image;
  // The instances: shifted to the rectangle's origin, clipped to its size, shifted back (float32
  // steps, as add_padding / clip / add_padding).
  const float x1 = float(r[0]), y1 = float(r[1]), cw = float(r[2] - r[0]), ch = float(r[3] - r[1]);
  auto clip_x = [&](float v) { return std::clamp(v - x1, 0.f, cw) + x1; };
  auto clip_y = [&](float v) { return std::clamp(v - y1, 0.f, ch) + y1; };
  for (size_t j : reach) {
    Box b = partner.instances.boxes[j];
    b = {clip_x(b[0]), clip_y(b[1]), clip_x(b[2]), clip_y(b[3])};
    auto poly = partner.instances.polygons[j];
    for (size_t k = 0; k + 1 < poly.size(); k += 2) poly[k] = clip_x(poly[k]), poly[k + 1] = clip_y(poly[k + 1]);
    s.instances.push_back(partner.instances.cls[j], std::move(poly), b);
  }
  return true;
}

// ---- Random variates -------------------------------------------------------------------------------

namespace {

double normal(SampleRng& rng) {
  const double u1 = 1.0 - rng.uniform();  // (0, 1]
  const double u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// Marsaglia and Tsang (2000) for shape a >= 1.
double gamma(SampleRng& rng, double a) {
  const double d = a - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    const double x = normal(rng);
    double v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    const double u = 1.0 - rng.uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

}  // namespace

double draw_beta(SampleRng& rng, double a, double b) {
  if (!(a >= 1 && b >= 1)) throw std::invalid_argument("draw_beta: shapes below 1 are not supported");
  const double x = gamma(rng, a), y = gamma(rng, b);
  return x / (x + y);
}

}  // namespace lucid::data

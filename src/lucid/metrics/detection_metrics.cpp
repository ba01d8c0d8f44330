#include "lucid/metrics/detection_metrics.h"

#include <algorithm>
#include <numeric>

namespace lucid::metrics {

namespace {

constexpr double kEps = 1e-16;

// numpy.linspace(0, 1, n): i * step, the last point exactly 1.
std::vector<double> unit_linspace(int n) {
  std::vector<double> x(n);
  const double step = 1.0 / (n - 1);
  for (int i = 0; i < n; ++i) x[i] = i * step;
  x[n - 1] = 1.0;
  return x;
}

const std::vector<double>& curve_axis() {
  static const std::vector<double> x = unit_linspace(kCurvePoints);
  return x;
}

const std::vector<double>& recall_axis() {
  static const std::vector<double> x = unit_linspace(101);
  return x;
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

std::vector<uint8_t> bool_rows(const Tensor& t, int64_t rows) {
  std::vector<uint8_t> out(rows * kIouThresholds, 0);
  if (rows == 0) return out;
  auto c = t.to(torch::kCPU).to(torch::kUInt8).contiguous();
  TORCH_CHECK(c.numel() == rows * kIouThresholds, "tp must be (n, 10)");
  std::copy(c.data_ptr<uint8_t>(), c.data_ptr<uint8_t>() + c.numel(), out.begin());
  return out;
}

std::vector<int64_t> int_values(const Tensor& t) {
  if (!t.defined() || t.numel() == 0) return {};
  auto c = t.reshape({-1}).to(torch::kCPU).to(torch::kInt64).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

}  // namespace

// numpy's box filter smooth(y, f): odd width round(n * f * 2) // 2 + 1, edges padded with the end
// values, valid convolution.
std::vector<double> smooth(const std::vector<double>& y, double f) {
  const auto n = static_cast<int64_t>(y.size());
  const int64_t nf = static_cast<int64_t>(std::nearbyint(static_cast<double>(n) * f * 2)) / 2 + 1;
  const int64_t half = nf / 2;
  std::vector<double> yp;
  yp.reserve(n + 2 * half);
  for (int64_t i = 0; i < half; ++i) yp.push_back(y.front());
  yp.insert(yp.end(), y.begin(), y.end());
  for (int64_t i = 0; i < half; ++i) yp.push_back(y.back());
  const double w = 1.0 / static_cast<double>(nf);
  std::vector<double> out(yp.size() - nf + 1);
  for (size_t i = 0; i < out.size(); ++i) {
    double s = 0;
    for (int64_t k = 0; k < nf; ++k) s += yp[i + k] * w;
    out[i] = s;
  }
  return out;
}

const std::array<float, kIouThresholds>& iou_thresholds() {
  static const std::array<float, kIouThresholds> t = [] {
    std::array<float, kIouThresholds> a{};
    auto v = torch::linspace(0.5, 0.95, kIouThresholds, torch::kFloat32);
    for (int i = 0; i < kIouThresholds; ++i) a[i] = v[i].item<float>();
    return a;
  }();
  return t;
}

Tensor box_iou(const Tensor& a, const Tensor& b, double eps) {
  auto a1 = a.to(torch::kFloat32).unsqueeze(1);  // (N, 1, 4)
  auto b1 = b.to(torch::kFloat32).unsqueeze(0);  // (1, M, 4)
  auto a_lt = a1.narrow(2, 0, 2), a_rb = a1.narrow(2, 2, 2);
  auto b_lt = b1.narrow(2, 0, 2), b_rb = b1.narrow(2, 2, 2);
  auto inter = (torch::min(a_rb, b_rb) - torch::max(a_lt, b_lt)).clamp_min(0).prod(2);
  return inter / ((a_rb - a_lt).prod(2) + (b_rb - b_lt).prod(2) - inter + eps);
}

Tensor mask_iou(const Tensor& a, const Tensor& b, double eps) {
  auto af = a.to(torch::kFloat32);
  const int64_t n = b.size(0), pixels = std::max<int64_t>(b.size(1), 1);
  // b's rows in FP32 a chunk at a time: validation may hold thousands of binary masks per image.
  const int64_t step = std::max<int64_t>(1, (int64_t(1) << 24) / pixels);
  if (n <= step) {
    auto bf = b.to(torch::kFloat32);
    auto inter = torch::matmul(af, bf.t()).clamp_min(0);
    auto uni = (af.sum(1).unsqueeze(1) + bf.sum(1).unsqueeze(0)) - inter;
    return inter / (uni + eps);
  }
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < n; i += step) parts.push_back(mask_iou(a, b.narrow(0, i, std::min(step, n - i)), eps));
  return torch::cat(parts, 1);
}

Tensor match_predictions(const Tensor& pred_cls, const Tensor& true_cls, const Tensor& iou) {
  const int64_t d = pred_cls.numel(), l = true_cls.numel();
  auto correct = torch::zeros({d, kIouThresholds}, torch::kBool);
  if (d == 0 || l == 0) return correct;
  auto pc = pred_cls.reshape({-1}).to(torch::kCPU, torch::kFloat32);
  auto tc = true_cls.reshape({-1}).to(torch::kCPU, torch::kFloat32);
  auto same = tc.unsqueeze(1) == pc.unsqueeze(0);
  auto m = (iou.to(torch::kCPU, torch::kFloat32) * same).contiguous();
  const float* v = m.data_ptr<float>();
  // Greedy, as the reference 8.4.190: detections in their order (descending confidence) with some
  // IoU at or above the lowest threshold, each taking, per threshold, its best ground truth not
  // yet claimed at that threshold (the first among equal IoUs); correct when that IoU reaches the
  // threshold, which then claims the ground truth.
  auto acc = correct.accessor<bool, 2>();
  const auto& thr = iou_thresholds();
  const float lowest = *std::min_element(thr.begin(), thr.end());
  std::vector<uint8_t> claimed(static_cast<size_t>(l * kIouThresholds), 0);
  for (int64_t j = 0; j < d; ++j) {
    bool any = false;
    for (int64_t i = 0; i < l && !any; ++i) any = v[i * d + j] >= lowest;
    if (!any) continue;
    for (int t = 0; t < kIouThresholds; ++t) {
      int64_t k = 0;
      float best = -1.0f;
      for (int64_t i = 0; i < l; ++i) {
        const float x = claimed[static_cast<size_t>(i * kIouThresholds + t)] ? 0.0f : v[i * d + j];
        if (x > best) best = x, k = i;
      }
      if (best >= thr[t]) {
        acc[j][t] = true;
        claimed[static_cast<size_t>(k * kIouThresholds + t)] = 1;
      }
    }
  }
  return correct;
}

double np_interp(double x, const double* xp, const double* fp, size_t n, double left, double right) {
  if (x > xp[n - 1]) return right;
  if (x < xp[0]) return left;
  // Last index j with xp[j] <= x.
  const size_t j = static_cast<size_t>(std::upper_bound(xp, xp + n, x) - xp) - 1;
  if (j == n - 1 || xp[j] == x) return fp[j];
  const double slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]);
  return slope * (x - xp[j]) + fp[j];
}

std::pair<std::vector<double>, std::vector<double>> precision_envelope(const std::vector<double>& recall,
                                                                       const std::vector<double>& precision) {
  std::vector<double> mrec, mpre;
  mrec.reserve(recall.size() + 3);
  mpre.reserve(recall.size() + 3);
  mrec.push_back(0.0);
  mrec.insert(mrec.end(), recall.begin(), recall.end());
  mrec.push_back(recall.empty() ? 1.0 : recall.back());
  mrec.push_back(1.0);
  mpre.push_back(1.0);
  mpre.insert(mpre.end(), precision.begin(), precision.end());
  mpre.push_back(0.0);
  mpre.push_back(0.0);
  for (size_t i = mpre.size() - 1; i-- > 0;) mpre[i] = std::max(mpre[i], mpre[i + 1]);
  return {std::move(mrec), std::move(mpre)};
}

double compute_ap(const std::vector<double>& recall, const std::vector<double>& precision) {
  const auto [mrec, mpre] = precision_envelope(recall, precision);
  const auto& x = recall_axis();
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = np_interp(x[i], mrec.data(), mpre.data(), mrec.size(), mpre.front(), mpre.back());
  double ap = 0;
  for (size_t i = 0; i + 1 < x.size(); ++i) ap += (x[i + 1] - x[i]) * (y[i + 1] + y[i]) / 2.0;
  return ap;
}

double ClassMetrics::ap50_95(size_t i) const {
  double s = 0;
  for (double v : ap[i]) s += v;
  return s / kIouThresholds;
}

double ClassMetrics::mp() const { return mean(p); }
double ClassMetrics::mr() const { return mean(r); }

double ClassMetrics::map50() const {
  std::vector<double> v;
  for (const auto& a : ap) v.push_back(a[0]);
  return mean(v);
}

double ClassMetrics::map75() const {
  std::vector<double> v;
  for (const auto& a : ap) v.push_back(a[5]);
  return mean(v);
}

double ClassMetrics::map() const {
  std::vector<double> v;
  for (const auto& a : ap) v.insert(v.end(), a.begin(), a.end());
  return mean(v);
}

ClassMetrics ap_per_class(const std::vector<uint8_t>& tp, const std::vector<float>& conf,
                          const std::vector<int64_t>& pred_cls, const std::vector<int64_t>& target_cls) {
  const size_t n = conf.size();
  TORCH_CHECK(tp.size() == n * kIouThresholds && pred_cls.size() == n, "ap_per_class: inconsistent sizes");
  // Predictions by descending confidence.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return conf[a] > conf[b]; });

  ClassMetrics out;
  std::vector<int64_t> counts;
  {
    auto sorted = target_cls;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size();) {
      size_t j = i;
      while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
      out.classes.push_back(sorted[i]);
      counts.push_back(static_cast<int64_t>(j - i));
      i = j;
    }
  }
  const size_t nc = out.classes.size();
  const auto& x = curve_axis();
  out.ap.assign(nc, {});
  out.p_curve.assign(nc * kCurvePoints, 0.0);
  out.r_curve.assign(nc * kCurvePoints, 0.0);
  out.f1_curve.assign(nc * kCurvePoints, 0.0);
  out.pr_curve.assign(nc * kCurvePoints, 0.0);

  for (size_t ci = 0; ci < nc; ++ci) {
    std::vector<size_t> idx;
    for (size_t k : order)
      if (pred_cls[k] == out.classes[ci]) idx.push_back(k);
    const double n_l = static_cast<double>(counts[ci]);
    if (idx.empty()) continue;
    const size_t np_ = idx.size();
    std::vector<double> neg_conf(np_);
    for (size_t k = 0; k < np_; ++k) neg_conf[k] = -static_cast<double>(conf[idx[k]]);
    std::array<std::vector<double>, kIouThresholds> recall, precision;
    for (int t = 0; t < kIouThresholds; ++t) {
      recall[t].resize(np_);
      precision[t].resize(np_);
      int64_t tpc = 0, fpc = 0;
      for (size_t k = 0; k < np_; ++k) {
        if (tp[idx[k] * kIouThresholds + t])
          ++tpc;
        else
          ++fpc;
        recall[t][k] = static_cast<double>(tpc) / (n_l + kEps);
        precision[t][k] = static_cast<double>(tpc) / static_cast<double>(tpc + fpc);
      }
    }
    for (int i = 0; i < kCurvePoints; ++i) {
      out.r_curve[ci * kCurvePoints + i] =
          np_interp(-x[i], neg_conf.data(), recall[0].data(), np_, 0.0, recall[0].back());
      out.p_curve[ci * kCurvePoints + i] =
          np_interp(-x[i], neg_conf.data(), precision[0].data(), np_, 1.0, precision[0].back());
    }
    for (int t = 0; t < kIouThresholds; ++t) out.ap[ci][t] = compute_ap(recall[t], precision[t]);
    const auto env = precision_envelope(recall[0], precision[0]);
    for (int i = 0; i < kCurvePoints; ++i)
      out.pr_curve[ci * kCurvePoints + i] =
          np_interp(x[i], env.first.data(), env.second.data(), env.first.size(), env.second.front(), env.second.back());
  }

  std::vector<double> f1_mean(kCurvePoints, 0.0);
  for (size_t ci = 0; ci < nc; ++ci) {
    for (int i = 0; i < kCurvePoints; ++i) {
      const double p = out.p_curve[ci * kCurvePoints + i], r = out.r_curve[ci * kCurvePoints + i];
      const double f1 = 2 * p * r / (p + r + kEps);
      out.f1_curve[ci * kCurvePoints + i] = f1;
      f1_mean[i] += f1;
    }
  }
  // Mean over classes (NaN without classes in the reference, whose argmax is then 0).
  if (nc > 0)
    for (double& v : f1_mean) v /= static_cast<double>(nc);
  auto smoothed = smooth(f1_mean, 0.1);
  out.best_index = nc > 0 ? std::max_element(smoothed.begin(), smoothed.end()) - smoothed.begin() : 0;
  for (size_t ci = 0; ci < nc; ++ci) {
    out.p.push_back(out.p_curve[ci * kCurvePoints + out.best_index]);
    out.r.push_back(out.r_curve[ci * kCurvePoints + out.best_index]);
    out.f1.push_back(out.f1_curve[ci * kCurvePoints + out.best_index]);
  }
  return out;
}

void SegmentationStats::add_image(const Tensor& tp, const Tensor& tp_m, const Tensor& conf, const Tensor& pred_cls,
                                  const Tensor& target_cls) {
  const int64_t n = conf.numel();
  std::vector<float> c(n);
  if (n) {
    auto cc = conf.reshape({-1}).to(torch::kCPU, torch::kFloat32).contiguous();
    std::copy(cc.data_ptr<float>(), cc.data_ptr<float>() + n, c.begin());
  }
  add_image(bool_rows(tp, n), bool_rows(tp_m, n), c, int_values(pred_cls), int_values(target_cls));
}

void SegmentationStats::add_image(const std::vector<uint8_t>& tp, const std::vector<uint8_t>& tp_m,
                                  const std::vector<float>& conf, const std::vector<int64_t>& pred_cls,
                                  const std::vector<int64_t>& target_cls) {
  const size_t n = conf.size();
  TORCH_CHECK(tp.size() == n * kIouThresholds && tp_m.size() == n * kIouThresholds && pred_cls.size() == n,
              "SegmentationStats: inconsistent prediction sizes");
  ++images_;
  tp_.insert(tp_.end(), tp.begin(), tp.end());
  tp_m_.insert(tp_m_.end(), tp_m.begin(), tp_m.end());
  conf_.insert(conf_.end(), conf.begin(), conf.end());
  pred_cls_.insert(pred_cls_.end(), pred_cls.begin(), pred_cls.end());
  target_cls_.insert(target_cls_.end(), target_cls.begin(), target_cls.end());
  auto uniq = target_cls;
  std::sort(uniq.begin(), uniq.end());
  uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
  target_img_.insert(target_img_.end(), uniq.begin(), uniq.end());
}

void SegmentationStats::clear() {
  images_ = 0;
  tp_.clear();
  tp_m_.clear();
  conf_.clear();
  pred_cls_.clear();
  target_cls_.clear();
  target_img_.clear();
}

SegmentationMetrics SegmentationStats::compute() const {
  SegmentationMetrics m;
  m.images = images_;
  m.instances = static_cast<int64_t>(target_cls_.size());
  m.box_detail = ap_per_class(tp_, conf_, pred_cls_, target_cls_);
  m.mask_detail = ap_per_class(tp_m_, conf_, pred_cls_, target_cls_);
  const auto& b = m.box_detail;
  const auto& k = m.mask_detail;
  m.box = {b.mp(), b.mr(), b.map50(), b.map()};
  m.mask = {k.mp(), k.mr(), k.map50(), k.map()};
  auto finite = [](double v) { return std::isfinite(v) ? v : 0.0; };
  m.fitness = finite(m.box.map50_95) + finite(m.mask.map50_95);

  int64_t bins = nc_;
  for (auto c : target_cls_) bins = std::max(bins, c + 1);
  m.instances_per_class.assign(bins, 0);
  m.images_per_class.assign(bins, 0);
  for (auto c : target_cls_)
    if (c >= 0) ++m.instances_per_class[c];
  for (auto c : target_img_)
    if (c >= 0) ++m.images_per_class[c];

  for (size_t i = 0; i < b.size(); ++i) {
    ClassResult r;
    r.cls = b.classes[i];
    r.images = r.cls >= 0 ? m.images_per_class[r.cls] : 0;
    r.instances = r.cls >= 0 ? m.instances_per_class[r.cls] : 0;
    r.box = {b.p[i], b.r[i], b.ap50(i), b.ap50_95(i)};
    r.mask = {k.p[i], k.r[i], k.ap50(i), k.ap50_95(i)};
    m.per_class.push_back(r);
  }
  m.maps.assign(nc_, m.box.map50_95 + m.mask.map50_95);
  for (const auto& r : m.per_class)
    if (r.cls >= 0 && r.cls < nc_) m.maps[r.cls] = r.box.map50_95 + r.mask.map50_95;
  return m;
}

}  // namespace lucid::metrics

#include "lucid/plot/charts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "lucid/plot/canvas.h"
#include "lucid/util/error.h"

namespace lucid::plot {

namespace {

const Color kBlue = rgb(31, 119, 180);    // matplotlib's first colour (the reference's mean curves)
const Color kOrange = rgb(255, 127, 14);  // its second (the smoothed results line)
const Color kGrey = rgb(128, 128, 128);

// matplotlib's default colour cycle (tab10), which the reference's per-class curves use.
Color cycle_color(size_t k) {
  static const int hex[10] = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728, 0x9467bd,
                              0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf};
  const int v = hex[k % 10];
  return rgb((v >> 16) & 255, (v >> 8) & 255, v & 255);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// About five round tick values covering [lo, hi].
std::vector<double> ticks(double lo, double hi) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  return t;
}

std::string tick_label(double v, double step) {
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", std::min(decimals, 6), v);
  return buf;
}

// A plot area with data ranges, frame, ticks and labels.
struct Axes {
  Canvas& c;
  double x, y, w, h;  // pixel rectangle of the data area
  double x0, x1, y0, y1;
  double font = 13;

  double px(double v) const { return x + (v - x0) / (x1 - x0) * w; }
  double py(double v) const { return y + h - (v - y0) / (y1 - y0) * h; }

  void frame(const std::string& title, const std::string& xlabel, const std::string& ylabel) {
    c.fill_rectangle(x, y, x + w, y + h, {1, 1, 1});
    const auto xt = ticks(x0, x1), yt = ticks(y0, y1);
    const double xs = xt.size() > 1 ? xt[1] - xt[0] : 1, ys = yt.size() > 1 ? yt[1] - yt[0] : 1;
    for (double v : xt) {
      c.polyline({{px(v), y + h}, {px(v), y + h + 4}}, {0, 0, 0}, 1);
      c.text(px(v), y + h + 6, tick_label(v, xs), font * 0.85, {0, 0, 0}, Align::Center, VAlign::Top);
    }
    for (double v : yt) {
      c.polyline({{x - 4, py(v)}, {x, py(v)}}, {0, 0, 0}, 1);
      c.text(x - 6, py(v), tick_label(v, ys), font * 0.85, {0, 0, 0}, Align::Right, VAlign::Middle);
    }
    c.rectangle(x, y, x + w, y + h, {0, 0, 0}, 1);
    if (!title.empty()) c.text(x + w / 2, y - 8, title, font * 1.05, {0, 0, 0}, Align::Center, VAlign::Bottom);
    if (!xlabel.empty()) c.text(x + w / 2, y + h + 8 + font * 1.2, xlabel, font, {0, 0, 0}, Align::Center, VAlign::Top);
    if (!ylabel.empty())
      c.text(x - 14 - font * 2.6, y + h / 2, ylabel, font, {0, 0, 0}, Align::Center, VAlign::Bottom, false, -M_PI / 2);
  }

  void line(const std::vector<double>& xs, const std::vector<double>& ys, Color col, double width, double dash = 0,
            double alpha = 1) {
    std::vector<std::pair<double, double>> pts;
    for (size_t i = 0; i < xs.size() && i < ys.size(); ++i)
      pts.emplace_back(px(xs[i]), std::isfinite(ys[i]) ? py(ys[i]) : NAN);
    c.polyline(pts, col, width, dash, alpha);
  }
};

struct LegendEntry {
  std::string label;
  Color color;
  double width;
};

void legend(Canvas& c, double x, double y, const std::vector<LegendEntry>& entries, double font) {
  double yy = y;
  for (const auto& e : entries) {
    c.polyline({{x, yy}, {x + 24, yy}}, e.color, e.width);
    c.text(x + 30, yy, e.label, font, {0, 0, 0}, Align::Left, VAlign::Middle);
    yy += font * 1.5;
  }
}

std::string class_name(const std::vector<std::string>& names, int64_t c) {
  return c >= 0 && c < static_cast<int64_t>(names.size()) ? names[c] : std::to_string(c);
}

std::vector<double> curve_x() {
  std::vector<double> x(metrics::kCurvePoints);
  for (int i = 0; i < metrics::kCurvePoints; ++i) x[i] = static_cast<double>(i) / (metrics::kCurvePoints - 1);
  return x;
}

std::vector<double> row_of(const std::vector<double>& m, size_t row) {
  return {m.begin() + static_cast<std::ptrdiff_t>(row * metrics::kCurvePoints),
          m.begin() + static_cast<std::ptrdiff_t>((row + 1) * metrics::kCurvePoints)};
}

std::vector<double> class_mean(const std::vector<double>& m, size_t nc) {
  std::vector<double> y(metrics::kCurvePoints, 0.0);
  for (size_t c = 0; c < nc; ++c)
    for (int i = 0; i < metrics::kCurvePoints; ++i) y[i] += m[c * metrics::kCurvePoints + i] / static_cast<double>(nc);
  return y;
}

// The curve figures: data area on the left, legend on the right (as the reference's
// bbox_to_anchor=(1.04, 1) legend).
void curve_figure(const std::string& path, const std::string& title, const std::string& xlabel,
                  const std::string& ylabel, const std::vector<std::vector<double>>& per_class,
                  const std::vector<std::string>& labels, const std::vector<double>& mean,
                  const std::string& mean_label) {
  Canvas c(1350, 900);
  Axes ax{c, 100, 60, 880, 760, 0, 1, 0, 1, 16};
  ax.frame(title, xlabel, ylabel);
  const auto x = curve_x();
  std::vector<LegendEntry> entries;
  const bool each = per_class.size() < 21;  // the reference labels classes only below 21
  for (size_t k = 0; k < per_class.size(); ++k) {
    ax.line(x, per_class[k], each ? cycle_color(k) : kGrey, 1);
    if (each) entries.push_back({labels[k], cycle_color(k), 1});
  }
  if (!mean.empty()) {
    ax.line(x, mean, kBlue, 3);
    entries.push_back({mean_label, kBlue, 3});
  }
  legend(c, 1000, 72, entries, 16);
  c.save(path);
}

}  // namespace

void plot_pr_curve(const std::string& path, const metrics::ClassMetrics& m, const std::vector<std::string>& names) {
  std::vector<std::vector<double>> per_class;
  std::vector<std::string> labels;
  for (size_t k = 0; k < m.size(); ++k) {
    per_class.push_back(row_of(m.pr_curve, k));
    labels.push_back(class_name(names, m.classes[k]) + " " + fmt("%.3f", m.ap50(k)));
  }
  std::vector<double> mean = m.size() ? class_mean(m.pr_curve, m.size()) : std::vector<double>{};
  curve_figure(path, "Precision-Recall Curve", "Recall", "Precision", per_class, labels, mean,
               "all classes " + fmt("%.3f", m.map50()) + " mAP@0.5");
}

void plot_confidence_curve(const std::string& path, const metrics::ClassMetrics& m,
                           const std::vector<std::string>& names, const std::string& which) {
  const auto& src = which == "F1" ? m.f1_curve : which == "Precision" ? m.p_curve : m.r_curve;
  std::vector<std::vector<double>> per_class;
  std::vector<std::string> labels;
  for (size_t k = 0; k < m.size(); ++k) {
    per_class.push_back(row_of(src, k));
    labels.push_back(class_name(names, m.classes[k]));
  }
  std::vector<double> mean;
  std::string mean_label;
  if (m.size()) {
    mean = metrics::smooth(class_mean(src, m.size()), 0.1);
    const auto best = std::max_element(mean.begin(), mean.end()) - mean.begin();
    mean_label = "all classes " + fmt("%.2f", mean[best]) + " at " +
                 fmt("%.3f", static_cast<double>(best) / (metrics::kCurvePoints - 1));
  }
  curve_figure(path, which + "-Confidence Curve", "Confidence", which, per_class, labels, mean, mean_label);
}

void plot_confusion_matrix(const std::string& path, const metrics::ConfusionMatrix& cm,
                           const std::vector<std::string>& names, bool normalize) {
  const int64_t k = cm.nc() + 1;
  std::vector<double> a = normalize ? cm.normalized() : cm.counts();
  double vmax = 0;
  for (double v : a) vmax = std::max(vmax, v);
  const double cell = std::clamp(720.0 / static_cast<double>(k), 4.0, 120.0);
  const double grid = cell * static_cast<double>(k);
  const double left = 200, top = 80;
  Canvas c(static_cast<int>(left + grid + 180), static_cast<int>(top + grid + 190));
  const double font = std::clamp(15 - 0.1 * static_cast<double>(k), 6.0, 14.0);
  // "Blues" from white to dark blue; values under 0.005 are left blank as in the reference.
  auto blues = [](double t) {
    t = std::clamp(t, 0.0, 1.0);
    return Color{0.97 - t * (0.97 - 0.03), 0.98 - t * (0.98 - 0.19), 1.0 - t * (1.0 - 0.42)};
  };
  for (int64_t r = 0; r < k; ++r)
    for (int64_t col = 0; col < k; ++col) {
      const double v = a[r * k + col];
      const double x = left + col * cell, y = top + r * cell;
      const bool blank = v < 0.005;
      c.fill_rectangle(x, y, x + cell, y + cell, blank ? Color{1, 1, 1} : blues(vmax > 0 ? v / vmax : 0));
      if (!blank && k < 30)
        c.text(x + cell / 2, y + cell / 2, normalize ? fmt("%.2f", v) : fmt("%.0f", v), std::min(10.0, cell * 0.3),
               v > 0.45 * (normalize ? 1.0 : vmax) ? Color{1, 1, 1} : Color{0, 0, 0}, Align::Center, VAlign::Middle);
    }
  c.rectangle(left, top, left + grid, top + grid, {0, 0, 0}, 1);
  if (k < 99)
    for (int64_t i = 0; i < k; ++i) {
      const std::string label = i == k - 1 ? "background" : class_name(names, i);
      c.text(left + (i + 0.5) * cell, top + grid + 6, label, font, {0, 0, 0}, Align::Right, VAlign::Middle, false,
             -M_PI / 2);
      c.text(left - 6, top + (i + 0.5) * cell, label, font, {0, 0, 0}, Align::Right, VAlign::Middle);
    }
  c.text(left + grid / 2, top - 20, normalize ? "Confusion Matrix Normalized" : "Confusion Matrix", 16, {0, 0, 0},
         Align::Center, VAlign::Bottom);
  c.text(left + grid / 2, top + grid + 170, "True", 14, {0, 0, 0}, Align::Center, VAlign::Bottom);
  c.text(30, top + grid / 2, "Predicted", 14, {0, 0, 0}, Align::Center, VAlign::Top, false, -M_PI / 2);
  // Colour bar.
  const double bx = left + grid + 40;
  for (int i = 0; i < 200; ++i) {
    const double t0 = 1.0 - i / 200.0;
    c.fill_rectangle(bx, top + grid * i / 200.0, bx + 24, top + grid * (i + 1) / 200.0 + 0.5, blues(t0));
  }
  c.rectangle(bx, top, bx + 24, top + grid, {0, 0, 0}, 1);
  for (double v : ticks(0, vmax > 0 ? vmax : 1))
    c.text(bx + 30, top + grid * (1 - v / (vmax > 0 ? vmax : 1)), tick_label(v, vmax > 2 ? 1 : 0.1), 12, {0, 0, 0},
           Align::Left, VAlign::Middle);
  c.save(path);
}

Table read_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError(path + ": cannot read");
  Table t;
  std::string line;
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string cell;
    while (std::getline(ss, cell, ',')) {
      const auto b = cell.find_first_not_of(" \t\r"), e = cell.find_last_not_of(" \t\r");
      out.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
    }
    return out;
  };
  if (!std::getline(in, line)) throw UserError(path + ": empty file");
  t.columns = split(line);
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<double> row;
    for (const auto& cell : split(line)) {
      char* end = nullptr;
      const double v = std::strtod(cell.c_str(), &end);
      row.push_back(end && *end == 0 && !cell.empty() ? v : NAN);
    }
    row.resize(t.columns.size(), NAN);
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::vector<double> gaussian_filter1d(const std::vector<double>& y, double sigma) {
  const int64_t n = static_cast<int64_t>(y.size());
  if (n == 0) return {};
  const int64_t radius = static_cast<int64_t>(4.0 * sigma + 0.5);
  std::vector<double> w(2 * radius + 1);
  double sum = 0;
  for (int64_t k = -radius; k <= radius; ++k) sum += w[k + radius] = std::exp(-0.5 * k * k / (sigma * sigma));
  for (double& v : w) v /= sum;
  // 'reflect' (d c b a | a b c d | d c b a): index -1 -> 0, n -> n - 1.
  auto at = [&](int64_t i) {
    const int64_t period = 2 * n;
    i = ((i % period) + period) % period;
    return y[i < n ? i : period - 1 - i];
  };
  std::vector<double> out(n);
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t k = -radius; k <= radius; ++k) s += w[k + radius] * at(i + k);
    out[i] = s;
  }
  return out;
}

void plot_results(const std::string& csv_path, const std::string& png_path) {
  const auto t = read_csv(csv_path);
  std::vector<size_t> loss, metric;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    if (t.columns[i].find("loss") != std::string::npos)
      loss.push_back(i);
    else if (t.columns[i].find("metric") != std::string::npos)
      metric.push_back(i);
  }
  std::vector<size_t> cols(loss.begin(), loss.begin() + static_cast<std::ptrdiff_t>(loss.size() / 2));
  cols.insert(cols.end(), metric.begin(), metric.begin() + static_cast<std::ptrdiff_t>(metric.size() / 2));
  cols.insert(cols.end(), loss.begin() + static_cast<std::ptrdiff_t>(loss.size() / 2), loss.end());
  cols.insert(cols.end(), metric.begin() + static_cast<std::ptrdiff_t>(metric.size() / 2), metric.end());
  if (cols.empty()) throw UserError(csv_path + ": no loss or metric columns to plot");
  const size_t per_row = (cols.size() + 1) / 2;
  const double pw = 300, ph = 300;
  Canvas c(static_cast<int>(per_row * pw), static_cast<int>(2 * ph));
  std::vector<double> x;
  for (const auto& r : t.rows) x.push_back(r.empty() ? NAN : r[0]);
  for (size_t k = 0; k < cols.size(); ++k) {
    std::vector<double> y;
    for (const auto& r : t.rows) y.push_back(r[cols[k]]);
    double lo = INFINITY, hi = -INFINITY, xlo = INFINITY, xhi = -INFINITY;
    for (size_t i = 0; i < y.size(); ++i) {
      if (std::isfinite(y[i])) lo = std::min(lo, y[i]), hi = std::max(hi, y[i]);
      if (std::isfinite(x[i])) xlo = std::min(xlo, x[i]), xhi = std::max(xhi, x[i]);
    }
    if (!std::isfinite(lo)) lo = 0, hi = 1;
    if (!std::isfinite(xlo)) xlo = 0, xhi = 1;
    const double pad = hi > lo ? (hi - lo) * 0.05 : std::max(std::abs(hi) * 0.05, 0.05);
    if (xhi <= xlo) xhi = xlo + 1;
    const double ox = static_cast<double>(k % per_row) * pw, oy = static_cast<double>(k / per_row) * ph;
    Axes ax{c, ox + 62, oy + 36, pw - 78, ph - 70, xlo, xhi, lo - pad, hi + pad, 11};
    ax.frame(t.columns[cols[k]], "", "");
    ax.line(x, y, kBlue, 2);
    for (size_t i = 0; i < y.size(); ++i)
      if (std::isfinite(x[i]) && std::isfinite(y[i])) c.circle(ax.px(x[i]), ax.py(y[i]), 3, kBlue);
    std::vector<double> finite;
    for (double v : y) finite.push_back(std::isfinite(v) ? v : 0.0);
    ax.line(x, gaussian_filter1d(finite, 3), kOrange, 2, 3);
    if (k == 1) legend(c, ox + 70, oy + 50, {{"results", kBlue, 2}, {"smooth", kOrange, 2}}, 10);
  }
  c.save(png_path);
}

}  // namespace lucid::plot

#include "lucid/report/run_report.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lucid/plot/charts.h"
#include "lucid/util/files.h"

namespace lucid::report {

namespace fs = std::filesystem;

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(double v, const char* f = "%.4g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string metrics_row(const std::string& name, int64_t images, int64_t instances, const metrics::SetResults& b,
                        const metrics::SetResults& m) {
  std::string s = "<tr><td>" + escape(name) + "</td><td>" + std::to_string(images) + "</td><td>" +
                  std::to_string(instances) + "</td>";
  for (double v : {b.precision, b.recall, b.map50, b.map50_95, m.precision, m.recall, m.map50, m.map50_95})
    s += "<td>" + num(v, "%.3f") + "</td>";
  return s + "</tr>\n";
}

const char* kStyle = R"(body{font-family:"DejaVu Sans",Arial,sans-serif;margin:24px;color:#222;max-width:1240px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ddd;padding:3px 7px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
.args td{text-align:left}.scroll{overflow-x:auto}
.figs{display:flex;flex-wrap:wrap;gap:12px}.figs figure{margin:0;width:600px}
.figs img{width:600px;border:1px solid #ddd}figcaption{font-size:12px;color:#555}
.wide img{width:1200px}.wide{width:1200px!important})";

}  // namespace

const std::vector<std::string>& report_images() {
  static const std::vector<std::string> images{"results.png",
                                               "BoxPR_curve.png",
                                               "MaskPR_curve.png",
                                               "BoxF1_curve.png",
                                               "MaskF1_curve.png",
                                               "BoxP_curve.png",
                                               "MaskP_curve.png",
                                               "BoxR_curve.png",
                                               "MaskR_curve.png",
                                               "confusion_matrix.png",
                                               "confusion_matrix_normalized.png",
                                               "train_batch0.jpg",
                                               "train_batch1.jpg",
                                               "train_batch2.jpg",
                                               "val_batch0_labels.jpg",
                                               "val_batch0_pred.jpg",
                                               "val_batch1_labels.jpg",
                                               "val_batch1_pred.jpg",
                                               "val_batch2_labels.jpg",
                                               "val_batch2_pred.jpg"};
  return images;
}

std::string write_report(const std::string& run_dir, const ReportContent& c) {
  const fs::path dir(run_dir);
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" << escape(c.title) << "</title><style>" << kStyle
    << "</style></head><body>\n<h1>" << escape(c.title) << "</h1>\n";

  if (!c.summary.empty()) {
    h << "<table class=\"args\">\n";
    for (const auto& [k, v] : c.summary) h << "<tr><th>" << escape(k) << "</th><td>" << escape(v) << "</td></tr>\n";
    h << "</table>\n";
  }

  if (c.final) {
    const auto& m = c.final->metrics;
    h << "<h2>Final metrics</h2>\n<p>fitness " << num(m.fitness) << " = mAP50-95(B) " << num(m.box.map50_95)
      << " + mAP50-95(M) " << num(m.mask.map50_95) << "</p>\n<table>\n<tr><th>Class</th><th>Images</th>"
      << "<th>Instances</th><th>Box P</th><th>Box R</th><th>Box mAP50</th><th>Box mAP50-95</th><th>Mask P</th>"
      << "<th>Mask R</th><th>Mask mAP50</th><th>Mask mAP50-95</th></tr>\n"
      << metrics_row("all", m.images, m.instances, m.box, m.mask);
    for (const auto& r : m.per_class) {
      const std::string name =
          r.cls >= 0 && r.cls < static_cast<int64_t>(c.names.size()) ? c.names[r.cls] : std::to_string(r.cls);
      h << metrics_row(name, r.images, r.instances, r.box, r.mask);
    }
    h << "</table>\n";
  }

  std::vector<std::string> present;
  for (const auto& name : report_images())
    if (fs::exists(dir / name)) present.push_back(name);
  if (!present.empty()) {
    h << "<h2>Plots</h2>\n<div class=\"figs\">\n";
    for (const auto& name : present) {
      const bool wide = name == "results.png";
      h << "<figure" << (wide ? " class=\"wide\"" : "") << "><a href=\"" << escape(name) << "\"><img src=\""
        << escape(name) << "\" alt=\"" << escape(name) << "\"></a><figcaption>" << escape(name)
        << "</figcaption></figure>\n";
    }
    h << "</div>\n";
  }

  const auto csv = dir / "results.csv";
  if (fs::exists(csv)) {
    const auto t = plot::read_csv(csv.string());
    h << "<h2>Results per epoch (<a href=\"results.csv\">results.csv</a>)</h2>\n<div class=\"scroll\"><table>\n<tr>";
    for (const auto& col : t.columns) h << "<th>" << escape(col) << "</th>";
    h << "</tr>\n";
    for (const auto& row : t.rows) {
      h << "<tr>";
      for (double v : row) h << "<td>" << num(v, "%.5g") << "</td>";
      h << "</tr>\n";
    }
    h << "</table></div>\n";
  }

  const auto args = dir / "args.yaml";
  if (fs::exists(args)) {
    h << "<h2>Options (<a href=\"args.yaml\">args.yaml</a>)</h2>\n<table class=\"args\">\n";
    std::ifstream in(args);
    std::string line;
    while (std::getline(in, line)) {
      const auto colon = line.find(": ");
      if (colon == std::string::npos) continue;
      h << "<tr><th>" << escape(line.substr(0, colon)) << "</th><td>" << escape(line.substr(colon + 2))
        << "</td></tr>\n";
    }
    h << "</table>\n";
  }
  h << "</body></html>\n";
  const auto path = (dir / "report.html").string();
  util::write_atomically(path, [&](std::ostream& out) { out << h.str(); });
  return path;
}

}  // namespace lucid::report

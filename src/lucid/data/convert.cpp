#include "lucid/data/convert.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "lucid/data/image_io.h"
#include "lucid/data/labels.h"
#include "lucid/util/error.h"

namespace lucid::data {

namespace fs = std::filesystem;

namespace {

// Where each image of a split goes, relative to images/<split>/: its COCO file_name when that is a
// plain relative path, else its path below the folder common to all the split's images.
std::vector<std::string> relative_names(const Split& split) {
  fs::path common;
  bool first = true;
  for (const auto& im : split.images) {
    const fs::path dir = fs::path(im.path).parent_path();
    if (first) {
      common = dir, first = false;
      continue;
    }
    fs::path c;
    for (auto a = common.begin(), b = dir.begin(); a != common.end() && b != dir.end() && *a == *b; ++a, ++b) c /= *a;
    common = c;
  }
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const auto& im : split.images) {
    std::string rel;
    const fs::path fn = im.file_name;
    bool plain = !im.file_name.empty() && fn.is_relative();
    for (const auto& part : fn) plain = plain && part != "..";
    rel = plain ? fn.lexically_normal().string() : fs::path(im.path).lexically_relative(common).string();
    if (rel.empty() || rel.rfind("..", 0) == 0) rel = fs::path(im.path).filename().string();
    std::string unique = rel;
    for (int k = 1; !seen.insert(unique).second; ++k) unique = std::to_string(k) + "_" + rel;
    names.push_back(unique);
  }
  return names;
}

void place_image(const std::string& src, const fs::path& dst) {
  fs::create_directories(dst.parent_path());
  std::error_code ec;
  if (fs::exists(dst, ec)) {
    if (fs::equivalent(src, dst, ec)) return;
    fs::remove(dst);
  }
  fs::create_hard_link(src, dst, ec);
  if (ec) fs::copy_file(src, dst, fs::copy_options::overwrite_existing);
}

// Split names as dataset YAML keys: train/val/test, or by what the name contains (train2017 ->
// train); a missing val reuses train, as small reference datasets do.
std::map<std::string, std::vector<std::string>> yaml_keys(const DatasetIndex& index) {
  std::map<std::string, std::vector<std::string>> keys;
  for (const auto& s : index.splits) {
    std::string key = "train";
    if (s.name == "val" || s.name == "test" || s.name == "train")
      key = s.name;
    else if (s.name.find("val") != std::string::npos)
      key = "val";
    else if (s.name.find("test") != std::string::npos)
      key = "test";
    keys[key].push_back(s.name);
  }
  if (!keys.count("train") && keys.count("val")) keys["train"] = keys["val"];
  if (!keys.count("val") && keys.count("train")) keys["val"] = keys["train"];
  return keys;
}

std::string yaml_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string names_yaml(const DatasetIndex& index) {
  std::string y = "names:\n";
  for (size_t i = 0; i < index.names.size(); ++i)
    y += "  " + std::to_string(i) + ": " + yaml_quote(index.names[i]) + "\n";
  return y;
}

double round3(double v) { return std::round(v * 1000) / 1000; }

}  // namespace

ConvertReport write_ultralytics(const DatasetIndex& index, const std::string& out_dir) {
  const fs::path root = out_dir;
  ConvertReport r;
  for (const auto& split : index.splits) {
    const auto names = relative_names(split);
    for (size_t i = 0; i < split.images.size(); ++i) {
      const auto& im = split.images[i];
      const fs::path img = root / "images" / split.name / names[i];
      place_image(im.path, img);
      std::string text;
      // A label file with any polygon is read as polygons throughout, so boxes there are written as
      // their 4 corners (a box line would read as a 2-point polygon).
      const bool polygon_file = std::any_of(im.instances.begin(), im.instances.end(),
                                            [](const Instance& i) { return !i.crowd && !i.polygons.empty(); });
      for (const auto& inst : im.instances) {
        if (inst.crowd) {
          ++r.crowd_dropped;
          continue;
        }
        if (inst.polygons.size() == 1) {
          text += format_yolo_line(inst.cls, &inst.polygons[0], inst.box) + "\n";
        } else if (inst.polygons.size() > 1) {
          std::vector<std::vector<double>> parts;
          for (const auto& p : inst.polygons) {
            std::vector<double> px(p.size());
            for (size_t k = 0; k < p.size(); k += 2)
              px[k] = double(p[k]) * im.width, px[k + 1] = double(p[k + 1]) * im.height;
            parts.push_back(std::move(px));
          }
          const auto merged = merge_polygon_parts(parts);
          Polygon p(merged.size());
          for (size_t k = 0; k < merged.size(); k += 2)
            p[k] = float(merged[k] / im.width), p[k + 1] = float(merged[k + 1] / im.height);
          text += format_yolo_line(inst.cls, &p, inst.box) + "\n";
          ++r.parts_merged;
        } else {
          if (inst.rle) ++r.rle_as_box;
          if (polygon_file) {
            const float x1 = inst.box[0] - inst.box[2] / 2, y1 = inst.box[1] - inst.box[3] / 2;
            const float x2 = inst.box[0] + inst.box[2] / 2, y2 = inst.box[1] + inst.box[3] / 2;
            const Polygon corners = {x1, y1, x2, y1, x2, y2, x1, y2};
            text += format_yolo_line(inst.cls, &corners, inst.box) + "\n";
            ++r.boxes_as_polygons;
          } else {
            text += format_yolo_line(inst.cls, nullptr, inst.box) + "\n";
          }
        }
        ++r.instances;
      }
      if (!text.empty()) write_file(label_path_for(img.string()), text);
      ++r.images;
    }
  }
  std::string y = "# Written by `lucid data convert` from " + index.source + "\n";
  for (const auto& [key, splits] : yaml_keys(index)) {
    if (splits.size() == 1) {
      y += key + ": images/" + splits[0] + "\n";
    } else {
      y += key + ":\n";
      for (const auto& s : splits) y += "  - images/" + s + "\n";
    }
  }
  write_file((root / "data.yaml").string(), y + names_yaml(index));
  if (r.crowd_dropped)
    r.notes.push_back(std::to_string(r.crowd_dropped) +
                      " crowd annotation(s) left out (label files have no crowd flag)");
  if (r.rle_as_box) r.notes.push_back(std::to_string(r.rle_as_box) + " RLE mask(s) written as boxes (no polygon)");
  if (r.boxes_as_polygons)
    r.notes.push_back(std::to_string(r.boxes_as_polygons) +
                      " box(es) written as 4-corner polygons (their label files also hold polygons)");
  if (r.parts_merged)
    r.notes.push_back(std::to_string(r.parts_merged) + " multi-part polygon(s) joined into one outline");
  return r;
}

ConvertReport write_coco(const DatasetIndex& index, const std::string& out_dir) {
  using nlohmann::json;
  const fs::path root = out_dir;
  ConvertReport r;
  json categories = json::array();
  for (size_t c = 0; c < index.names.size(); ++c) {
    const int64_t id = c < index.category_ids.size() ? index.category_ids[c] : int64_t(c) + 1;
    categories.push_back({{"id", id}, {"name", index.names[c]}, {"supercategory", ""}});
  }
  for (const auto& split : index.splits) {
    const auto names = relative_names(split);
    json images = json::array(), annotations = json::array();
    std::set<int64_t> used_ids;
    for (const auto& im : split.images)
      if (im.coco_id >= 0) used_ids.insert(im.coco_id);
    const bool keep_ids = used_ids.size() == split.images.size();
    int64_t ann_id = 0;
    for (size_t i = 0; i < split.images.size(); ++i) {
      const auto& im = split.images[i];
      place_image(im.path, root / "images" / split.name / names[i]);
      const int64_t image_id = keep_ids ? im.coco_id : int64_t(i) + 1;
      images.push_back({{"id", image_id}, {"file_name", names[i]}, {"width", im.width}, {"height", im.height}});
      const double W = im.width, H = im.height;
      for (const auto& inst : im.instances) {
        json seg = json::array();
        double area = 0, x1 = 1e300, y1 = 1e300, x2 = -1e300, y2 = -1e300;
        // COCO polygons need 3 points; a degenerate outline (as a 2-point label line) becomes a box.
        const bool degenerate =
            std::any_of(inst.polygons.begin(), inst.polygons.end(), [](const Polygon& p) { return p.size() < 6; });
        if (degenerate) ++r.degenerate_as_box;
        for (const auto& p : degenerate ? std::vector<Polygon>{} : inst.polygons) {
          std::vector<double> xy(p.size());
          for (size_t k = 0; k < p.size(); k += 2) {
            xy[k] = round3(p[k] * W), xy[k + 1] = round3(p[k + 1] * H);
            x1 = std::min(x1, xy[k]), x2 = std::max(x2, xy[k]);
            y1 = std::min(y1, xy[k + 1]), y2 = std::max(y2, xy[k + 1]);
          }
          area += polygon_area(xy);
          seg.push_back(xy);
        }
        std::array<double, 4> bbox;
        if (!seg.empty()) {
          bbox = {x1, y1, round3(x2 - x1), round3(y2 - y1)};
        } else if (inst.rle) {
          seg = {{"size", {inst.rle->height, inst.rle->width}}, {"counts", rle_counts_to_string(inst.rle->counts)}};
          area = double(rle_area(*inst.rle));
          bbox = rle_bbox(*inst.rle);
        } else {
          bbox = {round3((inst.box[0] - inst.box[2] / 2) * W), round3((inst.box[1] - inst.box[3] / 2) * H),
                  round3(inst.box[2] * W), round3(inst.box[3] * H)};
          area = round3(bbox[2] * bbox[3]);
        }
        const int64_t cat =
            size_t(inst.cls) < index.category_ids.size() ? index.category_ids[size_t(inst.cls)] : int64_t(inst.cls) + 1;
        annotations.push_back({{"id", ++ann_id},
                               {"image_id", image_id},
                               {"category_id", cat},
                               {"segmentation", seg},
                               {"area", round3(area)},
                               {"bbox", bbox},
                               {"iscrowd", inst.crowd ? 1 : 0}});
        ++r.instances;
      }
      ++r.images;
    }
    json doc = {{"info", {{"description", "written by lucid data convert from " + index.source}}},
                {"images", images},
                {"annotations", annotations},
                {"categories", categories}};
    write_file((root / "annotations" / ("instances_" + split.name + ".json")).string(), doc.dump() + "\n");
  }
  if (r.degenerate_as_box)
    r.notes.push_back(std::to_string(r.degenerate_as_box) + " polygon(s) with fewer than 3 points written as boxes");
  std::string y = "# Written by `lucid data convert` from " + index.source + " (COCO form)\n";
  for (const auto& [key, splits] : yaml_keys(index)) {
    if (splits.size() > 1)
      r.notes.push_back("splits " + splits[0] + ", ... share the key '" + key + "': only " + splits[0] +
                        " is named there");
    y += key + ": {json: annotations/instances_" + splits[0] + ".json, images: images/" + splits[0] + "}\n";
  }
  write_file((root / "data.yaml").string(), y);
  return r;
}

}  // namespace lucid::data

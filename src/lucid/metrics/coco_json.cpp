#include "lucid/metrics/coco_json.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "lucid/metrics/parallel.h"
#include "lucid/util/error.h"
#include "lucid/util/input_files.h"

namespace lucid::metrics {

namespace {

using json = nlohmann::json;

std::string shown(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

bool to_int64(const json& v, int64_t& out) {
  if (v.is_number_integer()) {
    out = v.get<int64_t>();
    return true;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::floor(d) == d && std::abs(d) < 9e18) {
      out = static_cast<int64_t>(d);
      return true;
    }
  }
  return false;
}

const json& field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) throw UserError(std::string("missing \"") + key + "\"");
  return *it;
}

int64_t int_field(const json& obj, const char* key) {
  const json& v = field(obj, key);
  int64_t out = 0;
  if (!to_int64(v, out)) throw UserError(std::string("\"") + key + "\" is not an integer (got " + shown(v) + ")");
  return out;
}

double number_field(const json& obj, const char* key) {
  const json& v = field(obj, key);
  if (!v.is_number()) throw UserError(std::string("\"") + key + "\" is not a number (got " + shown(v) + ")");
  return v.get<double>();
}

BoxXywh box_value(const json& v, const char* what) {
  if (!v.is_array() || v.size() != 4)
    throw UserError(std::string("\"") + what + "\" is not [x, y, w, h] (got " + shown(v) + ")");
  BoxXywh b{};
  for (size_t i = 0; i < 4; ++i) {
    if (!v[i].is_number()) throw UserError(std::string("\"") + what + "\" has a non-number (got " + shown(v) + ")");
    b[i] = v[i].get<double>();
  }
  return b;
}

std::vector<double> numbers(const json& v) {
  if (!v.is_array()) throw UserError("polygon is not a list of numbers (got " + shown(v) + ")");
  std::vector<double> out;
  out.reserve(v.size());
  for (const auto& x : v) {
    if (!x.is_number()) throw UserError("polygon is not a list of numbers (got " + shown(v) + ")");
    out.push_back(x.get<double>());
  }
  return out;
}

uint32_t dimension(const json& v, const char* what) {
  int64_t x = 0;
  if (!to_int64(v, x) || x < 0 || x > (int64_t{1} << 31)) {
    throw UserError(std::string(what) + " is not a valid size (got " + shown(v) + ")");
  }
  return static_cast<uint32_t>(x);
}

// A segmentation as COCO writes it: polygons (rasterised at the image size), an uncompressed RLE
// {"size": [h, w], "counts": [...]} or a compressed one {"size": [h, w], "counts": "..."}.
Rle parse_segmentation(const json& s, bool have_size, uint32_t h, uint32_t w) {
  if (s.is_array()) {
    if (!have_size) throw UserError("polygon \"segmentation\" needs the image's \"height\" and \"width\"");
    if (s.empty()) return Rle{h, w, {h * w}};
    if (!s[0].is_array() || s[0].size() < 4) {
      throw UserError("\"segmentation\" is not a list of polygons (got " + shown(s) + ")");
    }
    std::vector<Rle> parts;
    parts.reserve(s.size());
    const bool boxes = s[0].size() == 4;  // pycocotools reads a list starting with 4 numbers as boxes
    for (const auto& poly : s) {
      auto xy = numbers(poly);
      if (boxes) {
        if (xy.size() != 4) throw UserError("\"segmentation\" mixes boxes and polygons (got " + shown(s) + ")");
        parts.push_back(rle_from_box({xy[0], xy[1], xy[2], xy[3]}, h, w));
      } else {
        parts.push_back(rle_from_polygon(xy, h, w));
      }
    }
    return rle_merge(parts, false);
  }
  if (s.is_object()) {
    const json& size = field(s, "size");
    if (!size.is_array() || size.size() != 2)
      throw UserError("RLE \"size\" is not [height, width] (got " + shown(size) + ")");
    const uint32_t rh = dimension(size[0], "RLE height"), rw = dimension(size[1], "RLE width");
    const json& counts = field(s, "counts");
    if (counts.is_string()) return rle_from_string(counts.get_ref<const std::string&>(), rh, rw);
    if (counts.is_array()) {
      Rle r{rh, rw, {}};
      r.counts.reserve(counts.size());
      for (const auto& c : counts) {
        int64_t x = 0;
        if (!to_int64(c, x) || x < 0 || x > UINT32_MAX)
          throw UserError("RLE count is not a non-negative integer (got " + shown(c) + ")");
        r.counts.push_back(static_cast<uint32_t>(x));
      }
      rle_validate(r);
      return r;
    }
    throw UserError("RLE \"counts\" is neither a string nor a list (got " + shown(counts) + ")");
  }
  throw UserError("\"segmentation\" is neither polygons nor an RLE object (got " + shown(s) + ")");
}

struct ImageIndex {
  bool string_ids = false;
  std::unordered_map<int64_t, int32_t> by_int;
  std::unordered_map<std::string, int32_t> by_str;
  std::vector<uint32_t> height, width;
  std::vector<uint8_t> has_size;

  // Index of an image id, or -1 when the ground truth has no such image.
  int32_t find(const json& id) const {
    if (id.is_string()) {
      if (!string_ids) return -1;
      auto it = by_str.find(id.get_ref<const std::string&>());
      return it == by_str.end() ? -1 : it->second;
    }
    int64_t x = 0;
    if (string_ids || !to_int64(id, x)) return -1;
    auto it = by_int.find(x);
    return it == by_int.end() ? -1 : it->second;
  }
};

ImageIndex index_images(const json& images, const std::string& name, bool need_size) {
  struct Img {
    int64_t id_int = 0;
    std::string id_str;
    uint32_t h = 0, w = 0;
    bool has_size = false;
    size_t entry = 0;
  };
  std::vector<Img> imgs(images.size());
  size_t n_str = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const json& im = images[i];
    try {
      if (!im.is_object()) throw UserError("not an object");
      const json& id = field(im, "id");
      Img& x = imgs[i];
      x.entry = i;
      if (id.is_string()) {
        x.id_str = id.get<std::string>();
        ++n_str;
      } else if (!to_int64(id, x.id_int)) {
        throw UserError("\"id\" is neither an integer nor a string (got " + shown(id) + ")");
      }
      auto ih = im.find("height"), iw = im.find("width");
      if (ih != im.end() && iw != im.end()) {
        x.h = dimension(*ih, "\"height\"");
        x.w = dimension(*iw, "\"width\"");
        x.has_size = true;
      } else if (need_size) {
        throw UserError("missing \"height\" or \"width\"");
      }
    } catch (const UserError& e) {
      throw UserError(name + ": images[" + std::to_string(i) + "]: " + e.what());
    }
  }
  if (n_str != 0 && n_str != imgs.size()) throw UserError(name + ": image ids mix integers and strings");
  ImageIndex idx;
  idx.string_ids = n_str != 0;
  std::stable_sort(imgs.begin(), imgs.end(), [&](const Img& a, const Img& b) {
    return idx.string_ids ? a.id_str < b.id_str : a.id_int < b.id_int;
  });
  for (size_t i = 0; i < imgs.size(); ++i) {
    const auto& x = imgs[i];
    const bool dup = idx.string_ids ? !idx.by_str.emplace(x.id_str, static_cast<int32_t>(i)).second
                                    : !idx.by_int.emplace(x.id_int, static_cast<int32_t>(i)).second;
    if (dup) {
      throw UserError(name + ": images[" + std::to_string(x.entry) + "]: duplicate image id " +
                      (idx.string_ids ? x.id_str : std::to_string(x.id_int)));
    }
    idx.height.push_back(x.h);
    idx.width.push_back(x.w);
    idx.has_size.push_back(x.has_size ? 1 : 0);
  }
  return idx;
}

const json& array_member(const json& obj, const char* key, const std::string& name) {
  auto it = obj.find(key);
  if (it == obj.end()) throw UserError(name + ": missing \"" + key + "\"");
  if (!it->is_array()) throw UserError(name + ": \"" + key + "\" is not a list");
  return *it;
}

}  // namespace

nlohmann::json read_json_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw UserError(path + ": is a folder, not a JSON file");
  // A regular file within the COCO bound: a device or a fifo would be read without end.
  const std::string text = util::read_input_file(path, path, util::kMaxCocoJsonBytes);
  try {
    return json::parse(text);
  } catch (const json::out_of_range&) {  // nlohmann's "number overflow parsing '1e999'"
    throw UserError(path + ": invalid JSON: a number too large for a double (such as 1e999)");
  } catch (const json::exception& e) {
    throw UserError(path + ": invalid JSON: " + without_library_tag(e.what()));
  }
}

CocoData coco_eval_data_from_json(const json& gt, const std::string& gt_name, const json& results,
                                  const std::string& results_name, IouType iou_type, int threads) {
  const bool segm = iou_type == IouType::Segm;
  if (!gt.is_object()) throw UserError(gt_name + ": not a COCO instances file (expected a JSON object)");
  const json& images = array_member(gt, "images", gt_name);
  const json& anns = array_member(gt, "annotations", gt_name);
  const json& cats = array_member(gt, "categories", gt_name);

  if (cats.size() > kMaxCocoCategories)
    throw UserError(gt_name + ": " + std::to_string(cats.size()) + " categories, more than the " +
                    std::to_string(kMaxCocoCategories) + " that may be evaluated");
  const ImageIndex img_index = index_images(images, gt_name, false);
  CocoData data;
  data.num_images = img_index.height.size();

  for (size_t i = 0; i < cats.size(); ++i) {
    try {
      if (!cats[i].is_object()) throw UserError("not an object");
      data.category_ids.push_back(int_field(cats[i], "id"));
    } catch (const UserError& e) {
      throw UserError(gt_name + ": categories[" + std::to_string(i) + "]: " + e.what());
    }
  }
  std::sort(data.category_ids.begin(), data.category_ids.end());
  data.category_ids.erase(std::unique(data.category_ids.begin(), data.category_ids.end()), data.category_ids.end());
  std::unordered_map<int64_t, int32_t> cat_index;
  for (size_t k = 0; k < data.category_ids.size(); ++k) cat_index[data.category_ids[k]] = static_cast<int32_t>(k);
  auto category_of = [&](const json& obj) {
    auto it = cat_index.find(int_field(obj, "category_id"));
    return it == cat_index.end() ? -1 : it->second;
  };
  auto image_of = [&](const json& obj, const char* what) {
    const json& id = field(obj, "image_id");
    const int32_t img = img_index.find(id);
    if (img < 0) throw UserError("image_id " + shown(id) + " is not an image of the ground truth" + what);
    return img;
  };
  auto segmentation_for = [&](const json& s, int32_t img) {
    const auto i = static_cast<size_t>(img);
    return parse_segmentation(s, img_index.has_size[i] != 0, img_index.height[i], img_index.width[i]);
  };

  // Ground truth.
  data.ground_truth.resize(anns.size());
  parallel_for(anns.size(), threads, 64, [&](size_t i) {
    const json& a = anns[i];
    CocoInstance& x = data.ground_truth[i];
    try {
      if (!a.is_object()) throw UserError("not an object");
      x.id = int_field(a, "id");
      x.image = image_of(a, "");
      x.category = category_of(a);
      x.area = number_field(a, "area");
      auto crowd = a.find("iscrowd");
      if (crowd != a.end()) {
        if (crowd->is_boolean()) {
          x.iscrowd = crowd->get<bool>();
        } else if (crowd->is_number()) {
          x.iscrowd = crowd->get<double>() != 0;
        } else {
          throw UserError("\"iscrowd\" is not 0/1 (got " + shown(*crowd) + ")");
        }
      }
      if (x.category < 0) return;  // not evaluated
      if (segm) {
        x.segm = segmentation_for(field(a, "segmentation"), x.image);
      } else {
        x.bbox = box_value(field(a, "bbox"), "bbox");
      }
    } catch (const UserError& e) {
      std::string where = "annotations[" + std::to_string(i) + "]";
      if (a.is_object() && a.contains("id")) where += " (id " + shown(a["id"]) + ")";
      throw UserError(gt_name + ": " + where + ": " + e.what());
    }
  });
  {
    std::unordered_set<int64_t> ids;
    ids.reserve(data.ground_truth.size());
    for (size_t i = 0; i < data.ground_truth.size(); ++i) {
      if (!ids.insert(data.ground_truth[i].id).second) {
        throw UserError(gt_name + ": annotations[" + std::to_string(i) + "]: duplicate annotation id " +
                        std::to_string(data.ground_truth[i].id));
      }
    }
  }

  // Detections.
  if (!results.is_array()) throw UserError(results_name + ": results must be a JSON list of objects");
  if (results.empty()) return data;
  enum class Branch { Box, Segm };
  Branch branch;
  {
    const json& first = results[0];
    if (!first.is_object()) throw UserError(results_name + ": entry 0: not an object");
    auto bb = first.find("bbox");
    if (bb != first.end() && !(bb->is_array() && bb->empty())) {
      branch = Branch::Box;
    } else if (first.contains("segmentation")) {
      branch = Branch::Segm;
    } else {
      throw UserError(results_name + ": entry 0: needs \"bbox\" or \"segmentation\"");
    }
  }
  data.detections.resize(results.size());
  parallel_for(results.size(), threads, 64, [&](size_t i) {
    const json& r = results[i];
    CocoInstance& x = data.detections[i];
    try {
      if (!r.is_object()) throw UserError("not an object");
      x.id = static_cast<int64_t>(i) + 1;
      x.image = image_of(r, " (pycocotools: results do not correspond to the ground truth)");
      x.category = category_of(r);
      x.score = number_field(r, "score");
      if (!std::isfinite(x.score)) throw UserError("\"score\" is not finite");
      if (branch == Branch::Box) {
        x.bbox = box_value(field(r, "bbox"), "bbox");
        x.area = x.bbox[2] * x.bbox[3];
        if (x.category < 0 || !segm) return;
        auto s = r.find("segmentation");
        if (s != r.end()) {
          x.segm = segmentation_for(*s, x.image);
        } else {
          const auto& b = x.bbox;
          const double x1 = b[0], x2 = b[0] + b[2], y1 = b[1], y2 = b[1] + b[3];
          const auto im = static_cast<size_t>(x.image);
          if (!img_index.has_size[im]) throw UserError("the image has no \"height\"/\"width\" to rasterise the box");
          x.segm = rle_from_polygon({x1, y1, x1, y2, x2, y2, x2, y1}, img_index.height[im], img_index.width[im]);
        }
      } else {
        Rle m = segmentation_for(field(r, "segmentation"), x.image);
        x.area = static_cast<double>(rle_area(m));
        auto bb = r.find("bbox");
        const bool has_box = bb != r.end() && !(bb->is_array() && bb->empty());
        x.bbox = has_box ? box_value(*bb, "bbox") : rle_bbox(m);
        if (segm) x.segm = std::move(m);
      }
    } catch (const UserError& e) {
      throw UserError(results_name + ": entry " + std::to_string(i) + ": " + e.what());
    }
  });
  return data;
}

CocoData load_coco_eval_data(const std::string& gt_path, const std::string& results_path, IouType iou_type,
                             int threads) {
  // The two files are parsed at the same time (JSON parsing is a good part of the run time).
  json gt, results;
  std::exception_ptr results_error;
  std::thread reader;
  const bool concurrent = resolve_threads(threads) > 1;
  auto read_results = [&] {
    try {
      results = read_json_file(results_path);
    } catch (...) {
      results_error = std::current_exception();
    }
  };
  if (concurrent) reader = std::thread(read_results);
  std::exception_ptr gt_error;
  try {
    gt = read_json_file(gt_path);
  } catch (...) {
    gt_error = std::current_exception();
  }
  if (concurrent) {
    reader.join();
  } else if (!gt_error) {
    read_results();
  }
  if (gt_error) std::rethrow_exception(gt_error);
  if (results_error) std::rethrow_exception(results_error);
  return coco_eval_data_from_json(gt, gt_path, results, results_path, iou_type, threads);
}

}  // namespace lucid::metrics

// Building the dataset index: resolving the dataset description (YAML, folder or COCO JSON) into
// splits, listing their images, and verifying each image and its labels (in parallel, merged in a
// fixed order so the result and the reported problems never depend on timing).
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <regex>
#include <set>

#include "lucid/config/options.h"
#include "lucid/config/user_settings.h"
#include "lucid/config/yaml_bounds.h"
#include "lucid/data/dataset.h"
#include "lucid/data/image_io.h"
#include "lucid/data/labels.h"
#include "lucid/metrics/coco_json.h"
#include "lucid/util/class_names.h"
#include "lucid/util/error.h"
#include "lucid/util/input_files.h"
#include "lucid/util/parallel.h"

namespace lucid::data {

namespace fs = std::filesystem;

using util::kMaxDatasetYamlBytes;
static_assert(metrics::kMaxCocoCategories == config::kMaxClasses, "a COCO file holds at most the classes lucid trains");

namespace {

const std::set<std::string> kImageExtensions = {"avif", "bmp", "dng", "heic", "heif", "jp2", "jpeg",
                                                "jpg",  "mpo", "png", "tif",  "tiff", "webp"};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n\v\f");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r\n\v\f");
  return s.substr(a, b - a + 1);
}

std::string norm(const fs::path& p) { return fs::absolute(p).lexically_normal().string(); }

bool path_exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

bool path_is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

bool path_is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// An image given where a dataset description belongs (by extension or by its signature).
bool is_image_file(const std::string& path) {
  if (has_image_extension(path)) return true;
  return sniff_format(util::read_input_head(path, path, 16)) != ImageFormat::Unknown;
}

// ---- where the splits come from ---------------------------------------------------------------

struct SplitSource {
  std::string name;
  std::vector<std::string> paths;  // Ultralytics: folders and list files (absolute)
  bool coco = false;
  std::string json;                      // COCO: the annotation file
  std::vector<std::string> image_roots;  // COCO: candidate folders for file_name, first match wins
};

struct Spec {
  std::string source;
  std::vector<std::string> names;  // empty: take them from the COCO categories
  std::vector<SplitSource> splits;
};

std::vector<std::string> read_class_file(const std::string& path) {
  std::vector<std::string> names;
  std::string text = util::read_input_file(path, path, kMaxDatasetYamlBytes), line;
  int line_number = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n') {
      util::check_class_name(line, path + ":" + std::to_string(++line_number));
      line = trim(line);
      if (!line.empty()) names.push_back(line);
      line.clear();
    } else {
      line += text[i];
    }
  }
  return names;
}

std::vector<std::string> coco_image_roots(const fs::path& root, const fs::path& json) {
  std::string stem = json.stem().string();
  if (stem.rfind("instances_", 0) == 0) stem = stem.substr(10);
  return {norm(root / "images" / stem), norm(root / stem), norm(root / "images"), norm(root), norm(json.parent_path())};
}

// yaml-cpp keeps one of two equal keys of a mapping without a word; a dataset YAML with `names`
// (or a class index) given twice is refused instead, with both lines.
void reject_duplicate_keys(const YAML::Node& node, const std::string& path) {
  if (node.IsSequence()) {
    for (const auto& item : node) reject_duplicate_keys(item, path);
  } else if (node.IsMap()) {
    std::map<std::string, int> seen;
    for (const auto& kv : node) {
      const int line = kv.first.Mark().line + 1;
      if (kv.first.IsScalar()) {
        auto [it, fresh] = seen.emplace(kv.first.Scalar(), line);
        if (!fresh)
          throw error_at(path, line,
                         "duplicate key '" + kv.first.Scalar().substr(0, 100) + "' (first at line " +
                             std::to_string(it->second) + ")");
      }
      reject_duplicate_keys(kv.second, path);
    }
  }
}

// One entry of a dataset YAML's names. A class name is a plain value: a nested list or mapping (or
// nothing) would become an empty name, which no label could be told apart by; a NUL is refused
// (util/class_names.h).
std::string class_name(const YAML::Node& v, const std::string& which, const std::string& yaml_path) {
  const int line = v.Mark().line >= 0 ? v.Mark().line + 1 : 0;
  if (!v.IsScalar() || v.Scalar().empty())
    throw error_at(yaml_path, line,
                   "names: " + which + " is " +
                       (v.IsSequence() ? "a list"
                        : v.IsMap()    ? "a mapping"
                                       : "empty") +
                       ", expected a class name");
  util::check_class_name(v.Scalar(), yaml_path + (line > 0 ? ":" + std::to_string(line) : "") + ": names: " + which);
  return v.Scalar();
}

Spec spec_from_yaml(const std::string& yaml_path) {
  YAML::Node root;
  try {
    root = config::load_bounded_yaml(util::read_input_file(yaml_path, yaml_path, kMaxDatasetYamlBytes), yaml_path);
  } catch (const YAML::Exception& e) {
    throw error_at(yaml_path, e.mark.line >= 0 ? e.mark.line + 1 : 0, e.msg);
  }
  if (!root.IsMap()) throw error_at(yaml_path, 0, "a dataset YAML is a mapping (path, train, val, names)");
  reject_duplicate_keys(root, yaml_path);
  auto line_of = [](const YAML::Node& n) { return n.Mark().line >= 0 ? n.Mark().line + 1 : 0; };
  Spec spec;
  spec.source = norm(yaml_path);
  try {
    // names / nc
    if (root["names"] && !root["names"].IsNull()) {
      const auto n = root["names"];
      auto name_of = [&](const YAML::Node& v, const std::string& which) { return class_name(v, which, yaml_path); };
      if ((n.IsSequence() || n.IsMap()) && n.size() > static_cast<size_t>(config::kMaxClasses))
        throw error_at(yaml_path, line_of(n),
                       "names: " + std::to_string(n.size()) + " classes, more than the " +
                           std::to_string(config::kMaxClasses) + " a model can have");
      if (n.IsSequence()) {
        for (size_t i = 0; i < n.size(); ++i) spec.names.push_back(name_of(n[i], "entry " + std::to_string(i)));
      } else if (n.IsMap()) {
        std::map<long long, std::string> m;
        for (const auto& kv : n) {
          long long k;
          try {
            k = kv.first.as<long long>();
          } catch (const YAML::Exception&) {
            throw error_at(yaml_path, line_of(kv.first),
                           "names: key '" + kv.first.as<std::string>() + "' is not a class index");
          }
          if (m.count(k))
            throw error_at(yaml_path, line_of(kv.first), "names: class index " + std::to_string(k) + " given twice");
          m[k] = name_of(kv.second, "class " + std::to_string(k));
        }
        long long expect = 0;
        for (const auto& [k, v] : m) {
          if (k != expect)
            throw error_at(yaml_path, line_of(n),
                           "names: class indices must be 0.." + std::to_string(m.size() - 1) + " without gaps (found " +
                               std::to_string(k) + ")");
          spec.names.push_back(v);
          ++expect;
        }
      } else {
        throw error_at(yaml_path, line_of(n), "names must be a list or a mapping index: name");
      }
    }
    if (root["nc"] && !root["nc"].IsNull()) {
      double nc_d;
      try {
        nc_d = root["nc"].as<double>();
      } catch (const YAML::Exception&) {
        throw error_at(yaml_path, line_of(root["nc"]), "nc must be an integer");
      }
      if (!(nc_d >= 1 && nc_d <= double(config::kMaxClasses)) || nc_d != double(static_cast<long long>(nc_d)))
        throw error_at(yaml_path, line_of(root["nc"]),
                       "nc must be an integer from 1 to " + std::to_string(config::kMaxClasses));
      const auto nc = static_cast<size_t>(nc_d);
      if (spec.names.empty()) {
        for (size_t i = 0; i < nc; ++i) spec.names.push_back("class_" + std::to_string(i));
      } else if (spec.names.size() != nc) {
        throw error_at(
            yaml_path, line_of(root["nc"]),
            "nc " + std::to_string(nc) + " does not match the " + std::to_string(spec.names.size()) + " names");
      }
    }
    // root folder
    const fs::path yaml_dir = fs::absolute(yaml_path).parent_path();
    fs::path base = yaml_dir;
    if (root["path"] && root["path"].IsScalar() && !root["path"].as<std::string>().empty()) {
      fs::path p = root["path"].as<std::string>();
      if (p.is_absolute())
        base = p;
      else if (path_exists(yaml_dir / p))
        base = yaml_dir / p;
      else if (path_exists(fs::current_path() / p))
        base = fs::current_path() / p;
      else if (path_exists(config::datasets_dir() / p))
        base = config::datasets_dir() / p;  // the reference's DATASETS_DIR
      else
        base = yaml_dir / p;
    }
    auto resolve = [&](const YAML::Node& node, const std::string& split, bool must_exist) {
      std::string v = trim(node.as<std::string>());
      fs::path p = fs::path(v).is_absolute() ? fs::path(v) : base / v;
      if (!path_exists(p) && v.rfind("../", 0) == 0) p = base / v.substr(3);  // the reference's fallback
      if (must_exist && !path_exists(p))
        throw error_at(yaml_path, line_of(node), "split '" + split + "': path not found: " + norm(p));
      return norm(p);
    };
    bool any = false, coco = false;
    for (const char* key : {"train", "val", "test"}) {
      YAML::Node node = root[key];
      if ((!node || node.IsNull()) && std::string(key) == "val") node = root["validation"];
      if (!node || node.IsNull()) continue;
      any = true;
      SplitSource s;
      s.name = key;
      if (node.IsMap()) {
        YAML::Node j = node["json"] ? node["json"] : node["annotations"];
        if (!j || !j.IsScalar())
          throw error_at(yaml_path, line_of(node),
                         std::string("split '") + key + "': a mapping needs json: (COCO annotations) and images:");
        s.coco = true;
        s.json = resolve(j, key, true);
        if (node["images"] && node["images"].IsScalar())
          s.image_roots = {resolve(node["images"], key, true)};
        else
          s.image_roots = coco_image_roots(base, s.json);
      } else if (node.IsScalar()) {
        std::string p = resolve(node, key, true);
        if (lower(fs::path(p).extension().string()) == ".json") {
          s.coco = true;
          s.json = p;
          s.image_roots = coco_image_roots(base, p);
        } else {
          s.paths.push_back(p);
        }
      } else if (node.IsSequence()) {
        for (const auto& item : node) {
          if (!item.IsScalar())
            throw error_at(yaml_path, line_of(item), std::string("split '") + key + "': expected paths");
          s.paths.push_back(resolve(item, key, true));
        }
        if (s.paths.empty()) continue;
      }
      coco = coco || s.coco;
      spec.splits.push_back(std::move(s));
    }
    if (!any) throw error_at(yaml_path, 0, "no 'train' or 'val' key: a dataset YAML names its splits");
    if (spec.names.empty() && !coco) throw error_at(yaml_path, 0, "no 'names' (or 'nc'): the class names are required");
  } catch (const YAML::Exception& e) {
    throw error_at(yaml_path, e.mark.line >= 0 ? e.mark.line + 1 : 0, e.msg);
  }
  return spec;
}

Spec spec_from_folder(const std::string& dir) {
  std::vector<fs::path> yamls;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto ext = lower(e.path().extension().string());
    if (e.is_regular_file() && (ext == ".yaml" || ext == ".yml")) yamls.push_back(e.path());
  }
  std::sort(yamls.begin(), yamls.end());
  if (yamls.size() == 1) return spec_from_yaml(yamls[0].string());
  if (yamls.size() > 1) {
    const std::string own = fs::absolute(dir).lexically_normal().filename().string();
    for (const auto& want : {std::string("data"), own})
      for (const auto& y : yamls)
        if (y.stem() == want) return spec_from_yaml(y.string());
    std::string list;
    for (const auto& y : yamls) list += " " + y.filename().string();
    throw error_at(dir, 0, "several dataset YAMLs (" + list.substr(1) + "): name one with data=");
  }
  // No YAML: an images/ tree (one split per subfolder) with labels/ beside it and classes.txt.
  const fs::path images = fs::path(dir) / "images";
  if (!path_is_dir(images)) throw error_at(dir, 0, "no dataset YAML and no images/ folder");
  Spec spec;
  spec.source = norm(dir);
  // Anything named classes.txt is read (a fifo or a folder there is refused, not passed over).
  if (std::error_code ec; fs::symlink_status(fs::path(dir) / "classes.txt", ec).type() != fs::file_type::not_found)
    spec.names = read_class_file((fs::path(dir) / "classes.txt").string());
  if (spec.names.empty()) throw error_at(dir, 0, "no dataset YAML and no classes.txt (one class name per line)");
  std::vector<fs::path> subdirs;
  bool loose_images = false;
  for (const auto& e : fs::directory_iterator(images)) {
    if (e.path().filename().string().rfind('.', 0) == 0) continue;
    if (e.is_directory())
      subdirs.push_back(e.path());
    else if (has_image_extension(e.path().string()))
      loose_images = true;
  }
  std::sort(subdirs.begin(), subdirs.end());
  if (loose_images || subdirs.empty()) {
    spec.splits.push_back({"all", {norm(images)}, false, "", {}});
  } else {
    for (const auto& d : subdirs) spec.splits.push_back({d.filename().string(), {norm(d)}, false, "", {}});
  }
  return spec;
}

Spec spec_from_json(const std::string& json, const std::string& images) {
  Spec spec;
  spec.source = norm(json);
  SplitSource s;
  s.name = fs::path(json).stem().string();
  if (s.name.rfind("instances_", 0) == 0) s.name = s.name.substr(10);
  s.coco = true;
  s.json = norm(json);
  if (!images.empty()) {
    if (!path_is_dir(images)) throw error_at(images, 0, "images folder not found");
    s.image_roots = {norm(images)};
  } else {
    s.image_roots = coco_image_roots(fs::path(json).parent_path().parent_path(), json);
  }
  spec.splits.push_back(std::move(s));
  return spec;
}

// ---- listing images ---------------------------------------------------------------------------

struct Listing {
  std::vector<std::string> images;
  int64_t skipped = 0;                   // entries that could not be listed (symlink loops, unreadable folders)
  std::vector<std::string> label_roots;  // folders to scan recursively for orphan label files
  std::vector<std::string> label_dirs;   // folders to scan (not recursively) for orphan label files
  std::vector<Problem> problems;
};

// Every image below `dir`, following folder links once, as the reference's recursive glob follows
// them: an entry that cannot be examined (a link to itself, a link loop back to a folder being
// listed, a folder that cannot be read) or a folder on a pseudo file system (/proc, /sys: a link
// into /proc/<pid>/root leads to the whole machine) is reported and skipped, and the listing goes
// on. More than max_entries entries (a link to / somewhere below) end the listing with an error.
void list_folder(const fs::path& dir, const std::string& split, int64_t max_entries, Listing& l) {
  if (const auto pseudo = util::pseudo_filesystem_name(dir.string()); !pseudo.empty())
    throw UserError("split '" + split + "': " + dir.string() + " is on the " + pseudo +
                    " pseudo file system (kernel state, not files): not a dataset folder");
  int64_t entries = 0;
  std::error_code ec;
  fs::recursive_directory_iterator it(
      dir, fs::directory_options::follow_directory_symlink | fs::directory_options::skip_permission_denied, ec);
  std::set<std::string> folders;  // canonical folders entered
  std::error_code root_ec;
  folders.insert(fs::canonical(dir, root_ec).string());
  auto skip = [&](const fs::path& p, const std::string& why) {
    l.problems.push_back({norm(p), 0, why + "; skipped"});
    ++l.skipped;
  };
  while (!ec && it != fs::recursive_directory_iterator()) {
    const fs::path path = it->path();
    const auto name = path.filename().string();
    if (++entries > max_entries)
      throw UserError("split '" + split + "': more than " + std::to_string(max_entries) + " entries below " +
                      dir.string() + " (at " + path.string() +
                      "); is a folder link leading out of the dataset? A list file of image paths names larger sets");
    std::error_code e;
    const bool is_dir = it->is_directory(e);
    // Only folders seen for the first time are entered: the iterator would otherwise examine the
    // entry again itself, and a link loop there ends the whole listing.
    if (!is_dir || e) it.disable_recursion_pending();
    if (e) {
      skip(path, "cannot be examined (" + e.message() + ")");
    } else if (!name.empty() && name[0] == '.') {  // hidden, as glob skips them
      if (is_dir) it.disable_recursion_pending();
    } else if (is_dir) {
      const auto real = fs::canonical(path, e);
      const std::string pseudo = e ? std::string() : util::pseudo_filesystem_name(real.string());
      if (e || !pseudo.empty() || !folders.insert(real.string()).second) {
        it.disable_recursion_pending();
        skip(path, e                 ? "cannot be examined (" + e.message() + ")"
                   : !pseudo.empty() ? "a folder on the " + pseudo + " pseudo file system, not files"
                                     : "a link to a folder already listed (a loop, or a second way into it)");
      }
    } else if (it->is_regular_file(e) && !e && has_image_extension(name)) {
      l.images.push_back(norm(path));
    }
    it.increment(ec);
    if (ec) skip(path, "the listing stopped after this entry (" + ec.message() + ")");
  }
}

Listing list_split(const SplitSource& s, int64_t max_entries) {
  Listing l;
  for (const auto& p : s.paths) {
    if (path_is_dir(p)) {
      list_folder(p, s.name, max_entries, l);
      const std::string root = label_path_for(p + "/x.jpg");  // the folder's label counterpart
      const std::string label_root = fs::path(root).parent_path().string();
      if (label_root != p) l.label_roots.push_back(label_root);
    } else {
      // A list file of image paths (a fifo or /dev/zero there would block or grow without end).
      const std::string text =
          util::read_input_file(p, "split '" + s.name + "': list file " + p, util::kMaxListFileBytes);
      const fs::path parent = fs::path(p).parent_path();
      int line = 0;
      size_t i = 0;
      while (i <= text.size()) {
        size_t j = text.find('\n', i);
        if (j == std::string::npos) j = text.size();
        ++line;
        std::string entry = trim(text.substr(i, j - i));
        i = j + 1;
        if (entry.empty()) continue;
        if (!has_image_extension(entry)) {
          l.problems.push_back({p, line, "not an image file name (by extension): " + entry.substr(0, 200)});
          continue;
        }
        fs::path e = entry.rfind("./", 0) == 0 ? parent / entry.substr(2) : fs::path(entry);
        if (e.is_relative()) e = parent / e;
        l.images.push_back(norm(e));
      }
      std::set<std::string> dirs;
      for (const auto& im : l.images) {
        const auto d = fs::path(label_path_for(im)).parent_path().string();
        if (d != fs::path(im).parent_path().string()) dirs.insert(d);
      }
      l.label_dirs.insert(l.label_dirs.end(), dirs.begin(), dirs.end());
    }
  }
  std::sort(l.images.begin(), l.images.end());
  l.images.erase(std::unique(l.images.begin(), l.images.end()), l.images.end());
  return l;
}

// ---- verifying one image ----------------------------------------------------------------------

struct Verified {
  bool ok = false;
  ImageRecord rec;
  std::vector<Problem> problems;
  int duplicates = 0;
};

// Header checks (and a full decode when asked or when a JPEG lacks its end marker). Returns false
// with the problem recorded when the image is unusable.
bool check_image(const std::string& path, bool decode, ImageInfo& info, std::vector<Problem>& problems) {
  try {
    util::require_regular_file(path, path);  // a fifo named in a list file would block the read
    info = read_image_info(path);
    if (info.width() < 10 || info.height() < 10)
      throw error_at(
          path, 0,
          "image size " + std::to_string(info.width()) + "x" + std::to_string(info.height()) + " is below 10 pixels");
    if (decode || (info.format == ImageFormat::Jpeg && !jpeg_ends_with_eoi(path))) decode_image(path);
    return true;
  } catch (const std::exception& e) {
    const std::string what = e.what(), prefix = path + ": ";
    problems.push_back({path, 0, (what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what) + "; image skipped"});
    return false;
  }
}

Verified verify_yolo(const std::string& image, int nc, bool decode) {
  Verified v;
  v.rec.path = image;
  v.rec.label_path = label_path_for(image);
  ImageInfo info;
  if (!check_image(image, decode, info, v.problems)) return v;
  v.rec.width = info.width();
  v.rec.height = info.height();
  // No label file: a background image. A label that is there but not a readable regular file (a
  // fifo, a folder, a device, a link loop or a link to nothing) is a broken label, not a background:
  // the image is skipped with the reason, as the reference skips an image whose label is corrupt.
  const auto label = util::read_optional_input_file(v.rec.label_path, util::kMaxLabelFileBytes);
  if (!label.problem.empty()) {
    v.problems.push_back({v.rec.label_path, 0, "label file " + label.problem + "; image skipped"});
    return v;
  }
  if (label.present) {
    auto parsed = parse_yolo_labels(label.text, nc, v.rec.label_path);
    v.problems.insert(v.problems.end(), parsed.problems.begin(), parsed.problems.end());
    if (!parsed.ok) return v;
    v.rec.instances = std::move(parsed.instances);
    v.duplicates = parsed.duplicates_removed;
  }
  v.ok = true;
  return v;
}

using util::parallel_for;

void add_problem(Split& split, Problem p, const IndexOptions& o) {
  if (o.on_problem) o.on_problem(p);
  split.problems.push_back(std::move(p));
}

// The reference's warning for a split without a single instance: it would train on nothing (every
// image a background) or score nothing.
void warn_no_labels(Split& split, const std::string& where, const IndexOptions& o) {
  add_problem(split,
              {where, 0,
               "No labels found (all " + std::to_string(split.counts.images) + " images of split '" + split.name +
                   "' are backgrounds); training may not work correctly"},
              o);
}

void tally(Split& split) {
  auto& c = split.counts;
  c.images = int64_t(split.images.size());
  for (const auto& im : split.images) {
    int64_t n = 0;
    for (const auto& inst : im.instances) {
      if (inst.crowd) {
        ++c.crowd;
        continue;
      }
      ++n;
      if (inst.polygons.empty() && !inst.rle) ++c.box_only;
    }
    c.instances += n;
    if (n == 0) ++c.backgrounds;
  }
}

Split index_yolo_split(const SplitSource& s, int nc, const IndexOptions& o) {
  Split split;
  split.name = s.name;
  for (const auto& p : s.paths) split.source += (split.source.empty() ? "" : ", ") + p;
  Listing l = list_split(s, o.max_folder_entries);
  for (auto& p : l.problems) add_problem(split, std::move(p), o);
  split.counts.skipped += l.skipped;
  // fraction: the first images of the sorted list; the labels of the others are theirs, not orphans.
  std::set<std::string> used_labels;
  const auto keep = static_cast<size_t>(o.fraction.keep(s.name, static_cast<int64_t>(l.images.size())));
  for (size_t i = keep; i < l.images.size(); ++i) used_labels.insert(label_path_for(l.images[i]));
  l.images.resize(keep);
  std::vector<Verified> results(l.images.size());
  // single_cls: any class id is accepted (build_index makes them all 0).
  const int classes = o.single_cls ? std::numeric_limits<int>::max() : nc;
  parallel_for(l.images.size(), [&](size_t i) { results[i] = verify_yolo(l.images[i], classes, o.decode); });
  for (auto& r : results) {
    used_labels.insert(r.rec.label_path);
    for (auto& p : r.problems) add_problem(split, std::move(p), o);
    split.counts.duplicates_removed += r.duplicates;
    if (r.ok)
      split.images.push_back(std::move(r.rec));
    else
      ++split.counts.skipped;
  }
  // Orphan label files: .txt files where this split's labels live that no image points at.
  std::set<std::string> orphans;
  auto consider = [&](const fs::path& p) {
    if (lower(p.extension().string()) == ".txt" && !used_labels.count(norm(p))) orphans.insert(norm(p));
  };
  for (const auto& root : l.label_roots) {
    if (!path_is_dir(root)) continue;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (std::error_code e; it->is_regular_file(e)) consider(it->path());
  }
  for (const auto& d : l.label_dirs) {
    if (!path_is_dir(d)) continue;
    std::error_code ec;
    for (fs::directory_iterator it(d, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (std::error_code e; it->is_regular_file(e)) consider(it->path());
  }
  for (const auto& p : orphans) add_problem(split, {p, 0, "orphan label file (no image for it)"}, o);
  split.counts.orphan_labels = int64_t(orphans.size());
  tally(split);
  if (!split.images.empty() && split.counts.instances == 0)
    warn_no_labels(split, fs::path(split.images.front().label_path).parent_path().string(), o);
  return split;
}

// ---- COCO -------------------------------------------------------------------------------------

struct CocoClasses {
  std::vector<std::string> names;
  std::vector<int64_t> ids;
  std::map<int64_t, int> index;
};

// A COCO file_name that is absolute or climbs out of the folder it is joined to ("../x.jpg",
// "a/../../x.jpg"): a file from a stranger could otherwise make us read any image on the machine.
bool leaves_folder(const std::string& file_name) {
  const fs::path p = fs::path(file_name).lexically_normal();
  return p.is_absolute() || p.has_root_name() || (!p.empty() && *p.begin() == "..");
}

Split index_coco_split(const SplitSource& s, const CocoFile& coco, const CocoClasses& classes, const IndexOptions& o) {
  Split split;
  split.name = s.name;
  split.source = s.json;
  for (const auto& p : coco.problems) add_problem(split, p, o);
  // The image folder: the first candidate holding the first image.
  std::string root = s.image_roots.empty() ? "" : s.image_roots.front();
  if (s.image_roots.size() > 1 && !coco.images.empty()) {
    for (const auto& r : s.image_roots)
      if (path_is_file(fs::path(r) / coco.images.front().file_name)) {
        root = r;
        break;
      }
  }
  split.source += " (images " + root + ")";
  std::map<int64_t, std::vector<const CocoAnnotation*>> by_image;
  for (const auto& a : coco.annotations) by_image[a.image_id].push_back(&a);

  std::vector<Verified> results(coco.images.size());
  parallel_for(coco.images.size(), [&](size_t i) {
    const CocoImage& ci = coco.images[i];
    Verified& v = results[i];
    v.rec.path = norm(fs::path(root) / ci.file_name);
    v.rec.coco_id = ci.id;
    v.rec.file_name = ci.file_name;
    if (leaves_folder(ci.file_name)) {
      const std::string where = "image id " + std::to_string(ci.id) + ": file_name '" + ci.file_name.substr(0, 200) +
                                "' leads outside the image folder " + root;
      if (!o.allow_outside_images) {
        v.problems.push_back({s.json, 0, where + "; image skipped (allow_outside_images=True follows such paths)"});
        return;
      }
      v.problems.push_back({s.json, 0, where + "; followed (allow_outside_images=True)"});
    }
    ImageInfo info;
    if (!check_image(v.rec.path, o.decode, info, v.problems)) return;
    if (info.width() != ci.width || info.height() != ci.height) {
      v.problems.push_back({v.rec.path, 0,
                            "image is " + std::to_string(info.width()) + "x" + std::to_string(info.height()) +
                                " but the JSON (image id " + std::to_string(ci.id) + ") says " +
                                std::to_string(ci.width) + "x" + std::to_string(ci.height) + "; image skipped"});
      return;
    }
    v.rec.width = ci.width;
    v.rec.height = ci.height;
    const float W = float(ci.width), H = float(ci.height);
    std::vector<Instance> plain, crowd;
    std::vector<int64_t> ann_ids;
    auto it = by_image.find(ci.id);
    if (it != by_image.end() && it->second.size() > kMaxInstancesPerImage) {
      v.problems.push_back({s.json, 0,
                            "image id " + std::to_string(ci.id) + " (" + ci.file_name +
                                "): " + std::to_string(it->second.size()) + " annotations, more than the " +
                                std::to_string(kMaxInstancesPerImage) + " one image may hold; image skipped"});
      return;
    }
    if (it != by_image.end()) {
      for (const CocoAnnotation* a : it->second) {
        const std::string which = "annotation id " + std::to_string(a->id);
        Instance inst;
        inst.cls = classes.index.at(a->category_id);
        inst.crowd = a->iscrowd;
        for (const auto& part : a->polygons) {
          Polygon p(part.size());
          for (size_t k = 0; k < part.size(); k += 2) p[k] = float(part[k] / W), p[k + 1] = float(part[k + 1] / H);
          inst.polygons.push_back(std::move(p));
        }
        inst.rle = a->rle;
        if (!inst.polygons.empty()) {
          inst.box = polygon_box(inst.polygons);
        } else {
          const auto b = a->rle ? rle_bbox(*a->rle) : *a->bbox;
          inst.box = {float((b[0] + b[2] / 2) / W), float((b[1] + b[3] / 2) / H), float(b[2] / W), float(b[3] / H)};
        }
        if (!inst.crowd) {
          if (a->bbox && ((*a->bbox)[2] <= 0 || (*a->bbox)[3] <= 0)) {
            v.problems.push_back({s.json, 0, which + " (image " + ci.file_name + "): bbox has no area: ignored"});
            continue;
          }
          bool out_of_bounds = false;
          for (float b : inst.box) out_of_bounds = out_of_bounds || b > 1.01f || b < -0.01f;
          if (out_of_bounds) {
            v.problems.push_back({s.json, 0, which + " (image " + ci.file_name + "): outside the image: ignored"});
            continue;
          }
          plain.push_back(std::move(inst));
          ann_ids.push_back(a->id);
        } else {
          crowd.push_back(std::move(inst));
        }
      }
    }
    auto keep = unique_instances(plain);
    if (keep.size() < plain.size()) {
      v.duplicates = int(plain.size() - keep.size());
      v.problems.push_back({s.json, 0,
                            "image " + ci.file_name + ": " + std::to_string(v.duplicates) +
                                " duplicate annotation(s) (same class, box and outline) removed"});
      for (auto k : keep) v.rec.instances.push_back(std::move(plain[k]));
    } else {
      v.rec.instances = std::move(plain);
    }
    for (auto& c : crowd) v.rec.instances.push_back(std::move(c));
    v.ok = true;
  });
  std::vector<size_t> order(results.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return results[a].rec.path < results[b].rec.path; });
  order.resize(static_cast<size_t>(o.fraction.keep(s.name, static_cast<int64_t>(order.size()))));
  for (size_t i : order) {
    auto& r = results[i];
    for (auto& p : r.problems) add_problem(split, std::move(p), o);
    split.counts.duplicates_removed += r.duplicates;
    if (r.ok)
      split.images.push_back(std::move(r.rec));
    else
      ++split.counts.skipped;
  }
  tally(split);
  if (!split.images.empty() && split.counts.instances == 0) warn_no_labels(split, s.json, o);
  return split;
}

}  // namespace

std::string label_path_for(const std::string& image_path) {
  std::string p = image_path;
  const auto at = p.rfind("/images/");
  if (at != std::string::npos) p.replace(at, 8, "/labels/");
  const auto dot = p.rfind('.');
  const auto slash = p.rfind('/');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) p.resize(dot);
  return p + ".txt";
}

bool has_image_extension(const std::string& path) {
  const auto dot = path.rfind('.');
  if (dot == std::string::npos) return false;
  return kImageExtensions.count(lower(path.substr(dot + 1))) > 0;
}

DatasetIndex build_index(const std::string& data, const IndexOptions& options) {
  if (data.empty()) throw UserError("no dataset given (data=PATH: a dataset YAML, folder or COCO JSON)");
  if (!path_exists(data)) {
    // The datasets the Python package resolves by name (python/lucid_yolo/cfg/datasets): this
    // executable links no HTTP client, so it says where the YAML and its download are.
    static const std::regex by_name(R"((coco8|coco128|coco)-seg\.yaml)");
    if (std::regex_match(data, by_name))
      throw error_at(data, 0,
                     "dataset not found; `lucid` of the Python package (pip install lucid_yolo) resolves this name "
                     "and downloads the dataset into datasets_dir (lucid settings); this executable downloads nothing: "
                     "give the YAML's path (python/lucid_yolo/cfg/datasets/" +
                         data + " in the source tree) after unpacking the zip its download: names into datasets_dir");
    throw error_at(data, 0, "dataset not found");
  }
  // A device node or a fifo would be read without end (or block) by the sniffing and parsing below.
  if (!path_is_dir(data)) util::require_regular_file(data, "option data=" + data);
  Spec spec;
  const std::string ext = lower(fs::path(data).extension().string());
  if (path_is_dir(data))
    spec = spec_from_folder(data);
  else if (ext == ".json")
    spec = spec_from_json(data, options.coco_images);
  else if (is_image_file(data))
    throw error_at(data, 0, "is an image; data= takes a dataset YAML, a dataset folder or a COCO instances JSON");
  else
    spec = spec_from_yaml(data);
  if (!options.coco_images.empty() && ext != ".json")
    throw UserError("images= applies to a COCO JSON given as data=FILE.json");

  DatasetIndex index;
  index.source = spec.source;
  index.names = spec.names;
  // COCO splits: their category lists must agree; they define the classes.
  std::map<std::string, CocoFile> coco_files;
  CocoClasses classes;
  bool have_classes = false;
  for (const auto& s : spec.splits) {
    if (!s.coco) continue;
    index.format = DatasetFormat::Coco;
    CocoFile f = parse_coco_json(util::read_input_file(s.json, s.json, util::kMaxCocoJsonBytes), s.json);
    CocoClasses c;
    for (const auto& cat : f.categories) {
      c.index[cat.id] = int(c.names.size());
      c.names.push_back(cat.name);
      c.ids.push_back(cat.id);
    }
    if (c.names.empty()) throw error_at(s.json, 0, "COCO JSON has no categories");
    if (!have_classes) {
      classes = c;
      have_classes = true;
    } else if (c.ids != classes.ids || c.names != classes.names) {
      throw error_at(s.json, 0, "categories differ from those of the other splits");
    }
    coco_files[s.json] = std::move(f);
  }
  if (have_classes) {
    if (!index.names.empty() && index.names != classes.names)
      throw error_at(
          spec.source, 0,
          "names in the YAML differ from the COCO categories (" + std::to_string(classes.names.size()) + " classes)");
    index.names = classes.names;
    index.category_ids = classes.ids;
  }
  for (const auto& s : spec.splits) {
    Split split = s.coco ? index_coco_split(s, coco_files.at(s.json), classes, options)
                         : index_yolo_split(s, index.nc(), options);
    if (split.images.empty() && options.require_images) {
      std::string first = split.problems.empty() ? std::string("no image files found") : split.problems.front().str();
      throw UserError("split '" + split.name + "' (" + split.source + "): no usable image (" +
                      std::to_string(split.counts.skipped) + " skipped); first problem: " + first);
    }
    if (options.single_cls)
      for (auto& rec : split.images)
        for (auto& inst : rec.instances) inst.cls = 0;
    index.splits.push_back(std::move(split));
  }
  if (options.single_cls) {
    index.names = {"item"};
    index.category_ids.clear();
  }
  return index;
}

}  // namespace lucid::data

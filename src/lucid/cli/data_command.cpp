// `lucid data check|synth|convert|prepare`: inspect a dataset, write the synthetic one, convert
// formats, fill the prepared-image cache.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <limits>

#include "lucid/cli/commands.h"
#include "lucid/config/fields.h"
#include "lucid/config/options.h"
#include "lucid/data/convert.h"
#include "lucid/data/dataset.h"
#include "lucid/data/prepared.h"
#include "lucid/data/synth.h"
#include "lucid/util/error.h"

namespace lucid::cli {

namespace {

// The settings of `lucid data check|synth|convert|prepare`, each option declared once
// (config/fields.h): a member's initializer, or its component's, is its option's default.
struct DataSettings {
  std::string data, to, cache_dir, split, out;
  data::IndexOptions index;  // coco_images (images=), allow_outside_images, decode
  data::SynthOptions synth;  // n_train, n_val, imgsz, seed, quality
  int64_t imgsz = 640;       // prepare: the long side of the prepared images
  std::string cache = "disk";
  bool decode = true;  // check: decode every image fully
};

// The dataset a check, convert or prepare reads.
void dataset_fields(config::FieldList<DataSettings>& f) {
  using S = DataSettings;
  f.text("data", "dataset YAML, folder, or COCO instances JSON").to(&S::data);
  f.text("images", "image folder of a COCO JSON given as data=").to(&S::index, &data::IndexOptions::coco_images);
  f.flag("allow_outside_images", "follow COCO file_name paths that are absolute or lead out of the image folder (..)")
      .to(&S::index, &data::IndexOptions::allow_outside_images);
}

const config::FieldList<DataSettings>& data_fields(const std::string& action) {
  using S = DataSettings;
  using data::SynthOptions;
  static const auto* check = [] {
    auto* f = new config::FieldList<S>("data check");
    dataset_fields(*f);
    f->flag("decode", "decode every image fully (catches corrupt pixel data)").to(&S::decode);
    return f;
  }();
  static const auto* synth = [] {
    auto* f = new config::FieldList<S>("data synth");
    f->text("out", "folder to write (created)").to(&S::synth, &SynthOptions::out);
    f->integer("n_train", "training images").range(0, 1000000).to(&S::synth, &SynthOptions::n_train);
    f->integer("n_val", "validation images").range(0, 1000000).to(&S::synth, &SynthOptions::n_val);
    f->integer("imgsz", "longest image side in pixels")
        .range(32, config::kMaxImgsz)
        .to(&S::synth, &SynthOptions::imgsz);
    f->integer("seed", "random seed (same seed, same dataset)")
        .range(0, std::numeric_limits<long long>::max())
        .to(&S::synth, &SynthOptions::seed);
    f->integer("quality", "JPEG quality").range(1, 100).to(&S::synth, &SynthOptions::quality);
    return f;
  }();
  static const auto* prepare = [] {
    auto* f = new config::FieldList<S>("data prepare");
    dataset_fields(*f);
    f->integer("imgsz", "long side of the prepared images").range(1, config::kMaxImgsz).to(&S::imgsz);
    f->choice("cache", "disk (memory-mapped file, reused) or ram", {"disk", "ram"}).to(&S::cache);
    f->text("cache_dir", "cache folder (default $LUCID_CACHE_DIR or ~/.cache/lucid)").to(&S::cache_dir);
    f->text("split", "only this split (default: all)").to(&S::split);
    return f;
  }();
  static const auto* convert = [] {
    auto* f = new config::FieldList<S>("data convert");
    dataset_fields(*f);
    f->text("out", "folder to write (created)").to(&S::out);
    f->text("to", "coco or yolo (default: the other format)")
        .check([](const std::string& v) { return v.empty() || v == "coco" || v == "yolo"; }, "expected coco or yolo",
               {"voc"})
        .to(&S::to);
    return f;
  }();
  return action == "check" ? *check : action == "synth" ? *synth : action == "prepare" ? *prepare : *convert;
}

void warn_problem(const data::Problem& p) { std::cerr << "warning: " << p.str() << "\n"; }

std::string counts_line(const data::SplitCounts& c) {
  std::string s = std::to_string(c.images) + " images, " + std::to_string(c.instances) + " instances, " +
                  std::to_string(c.backgrounds) + " background images, " + std::to_string(c.skipped) +
                  " skipped files, " + std::to_string(c.orphan_labels) + " orphan label files";
  if (c.crowd) s += ", " + std::to_string(c.crowd) + " crowd instances";
  if (c.box_only) s += ", " + std::to_string(c.box_only) + " box-only instances";
  if (c.duplicates_removed) s += ", " + std::to_string(c.duplicates_removed) + " duplicate rows removed";
  return s;
}

const char* format_label(data::DatasetFormat f) { return f == data::DatasetFormat::Coco ? "COCO" : "Ultralytics"; }

int check(const DataSettings& o) {
  data::IndexOptions io = o.index;
  io.decode = o.decode;
  io.require_images = false;
  const auto index = data::build_index(o.data, io);
  std::cout << "dataset " << index.source << ": " << format_label(index.format) << ", " << index.nc() << " classes\n";
  data::SplitCounts total;
  std::string empty;
  for (const auto& s : index.splits) {
    std::cout << "[" << s.name << "] " << s.source << "\n";
    for (const auto& p : s.problems) std::cout << "  warning: " << p.str() << "\n";
    std::cout << "  " << s.name << ": " << counts_line(s.counts) << "\n";
    if (s.images.empty()) empty += (empty.empty() ? "" : ", ") + s.name;
  }
  if (!empty.empty()) throw UserError("no usable image in split(s) " + empty + " (see the warnings above)");
  return 0;
}

int synth(const DataSettings& o) {
  const auto& so = o.synth;
  const auto r = data::write_synth_dataset(so);
  std::cout << "wrote " << so.out << ": " << r.images << " images (" << so.n_train << " train, " << so.n_val
            << " val), " << r.instances << " instances, " << r.backgrounds
            << " background images; data.yaml (Ultralytics) and coco.yaml (COCO)\n";
  return 0;
}

int convert(const DataSettings& o) {
  if (o.out.empty()) throw UserError("data convert: out=DIR is required");
  data::IndexOptions io = o.index;
  io.on_problem = warn_problem;
  const auto index = data::build_index(o.data, io);
  std::string to = o.to;
  if (to.empty()) to = index.format == data::DatasetFormat::Coco ? "yolo" : "coco";
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::equivalent(fs::path(o.out), fs::path(index.source).parent_path(), ec) ||
      fs::equivalent(fs::path(o.out), fs::path(index.source), ec))
    throw UserError("data convert: out= must not be the source dataset's folder");
  const auto r = to == "coco" ? data::write_coco(index, o.out) : data::write_ultralytics(index, o.out);
  std::cout << "wrote " << o.out << " (" << (to == "coco" ? "COCO" : "Ultralytics") << "): " << r.images << " images, "
            << r.instances << " instances\n";
  for (const auto& n : r.notes) std::cout << "note: " << n << "\n";
  return 0;
}

int prepare(const DataSettings& o) {
  data::IndexOptions io = o.index;
  io.on_problem = warn_problem;
  const auto index = data::build_index(o.data, io);
  data::PreparedOptions po;
  po.imgsz = static_cast<int>(o.imgsz);
  po.cache_dir = o.cache_dir;
  po.store = o.cache == "ram" ? data::PreparedStore::Ram : data::PreparedStore::Disk;
  po.on_problem = io.on_problem;
  bool any = false;
  for (const auto& s : index.splits) {
    if (!o.split.empty() && s.name != o.split) continue;
    any = true;
    const auto t0 = std::chrono::steady_clock::now();
    const auto p = data::PreparedImages::build(s, po);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    size_t ok = 0;
    for (size_t i = 0; i < p.size(); ++i) ok += p.ok(i);
    char line[256];
    std::snprintf(line, sizeof line, "%s: %zu/%zu images at imgsz %d, %.1f MB, %s in %.2f s", s.name.c_str(), ok,
                  p.size(), po.imgsz, double(p.bytes()) / 1e6, p.from_cache() ? "mapped from cache" : "decoded", sec);
    std::cout << line << (p.cache_path().empty() ? std::string() : " (" + p.cache_path() + ")") << "\n";
  }
  if (!any) throw UserError("no split named '" + o.split + "'");
  return 0;
}

}  // namespace

int data_command(const std::vector<std::string>& args) {
  const std::string usage =
      "usage: lucid data check|synth|convert|prepare [key=value ...]\n"
      "  check    index a dataset, report counts per split and every problem (path:line)\n"
      "  synth    write the synthetic shapes dataset (Ultralytics and COCO forms), out=DIR\n"
      "  convert  write a dataset in the other format: data=SRC out=DIR [to=coco|yolo]\n"
      "  prepare  decode and resize every image once into the prepared-image cache, imgsz=N\n";
  int exit_code = 0;
  const auto word = action_word(args, "data", usage, {"check", "synth", "convert", "prepare"}, exit_code);
  if (!word) return exit_code;
  const auto& action = *word;
  const auto& fields = data_fields(action);
  auto options = fields.options();
  if (!options.parse_or_help(std::vector<std::string>(args.begin() + 1, args.end()))) return 0;
  const auto o = fields.read(options);
  if (action == "check") return check(o);
  if (action == "synth") return synth(o);
  if (action == "prepare") return prepare(o);
  return convert(o);
}

}  // namespace lucid::cli

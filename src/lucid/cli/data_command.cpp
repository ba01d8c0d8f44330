// `lucid data check|synth|convert|prepare`: inspect a dataset, write the synthetic one, convert
// formats, fill the prepared-image cache.
#include <chrono>
#include <filesystem>
#include <iostream>

#include "lucid/cli/commands.h"
#include "lucid/config/options.h"
#include "lucid/data/convert.h"
#include "lucid/data/dataset.h"
#include "lucid/data/prepared.h"
#include "lucid/data/synth.h"
#include "lucid/util/error.h"

namespace lucid::cli {

namespace {

config::Options data_options(const std::string& action) {
  if (action == "check")
    return config::Options("data check",
                           {
                               {"data", "", "dataset YAML, folder, or COCO instances JSON"},
                               {"images", "", "image folder of a COCO JSON given as data="},
                               {"allow_outside_images", "False",
                                "follow COCO file_name paths that are absolute or lead out of the image folder (..)"},
                               {"decode", "True", "decode every image fully (catches corrupt pixel data)"},
                           });
  if (action == "synth")
    return config::Options("data synth", {
                                             {"out", "", "folder to write (created)"},
                                             {"n_train", "64", "training images"},
                                             {"n_val", "16", "validation images"},
                                             {"imgsz", "256", "longest image side in pixels"},
                                             {"seed", "0", "random seed (same seed, same dataset)"},
                                             {"quality", "92", "JPEG quality"},
                                         });
  if (action == "prepare")
    return config::Options("data prepare",
                           {
                               {"data", "", "dataset YAML, folder, or COCO instances JSON"},
                               {"images", "", "image folder of a COCO JSON given as data="},
                               {"allow_outside_images", "False",
                                "follow COCO file_name paths that are absolute or lead out of the image folder (..)"},
                               {"imgsz", "640", "long side of the prepared images"},
                               {"cache", "disk", "disk (memory-mapped file, reused) or ram"},
                               {"cache_dir", "", "cache folder (default $LUCID_CACHE_DIR or ~/.cache/lucid)"},
                               {"split", "", "only this split (default: all)"},
                           });
  return config::Options("data convert",
                         {
                             {"data", "", "dataset YAML, folder, or COCO instances JSON"},
                             {"images", "", "image folder of a COCO JSON given as data="},
                             {"allow_outside_images", "False",
                              "follow COCO file_name paths that are absolute or lead out of the image folder (..)"},
                             {"out", "", "folder to write (created)"},
                             {"to", "", "coco or yolo (default: the other format)"},
                         });
}

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

int check(const config::Options& o) {
  data::IndexOptions io;
  io.decode = o.flag("decode");
  io.require_images = false;
  io.coco_images = o.str("images");
  io.allow_outside_images = o.flag("allow_outside_images");
  const auto index = data::build_index(o.str("data"), io);
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

int synth(const config::Options& o) {
  data::SynthOptions so;
  so.out = o.str("out");
  so.n_train = int(o.integer("n_train", 0, 1000000));
  so.n_val = int(o.integer("n_val", 0, 1000000));
  so.imgsz = int(o.integer("imgsz", 32, config::kMaxImgsz));
  so.seed = uint64_t(o.integer("seed"));
  so.quality = int(o.integer("quality", 1, 100));
  const auto r = data::write_synth_dataset(so);
  std::cout << "wrote " << so.out << ": " << r.images << " images (" << so.n_train << " train, " << so.n_val
            << " val), " << r.instances << " instances, " << r.backgrounds
            << " background images; data.yaml (Ultralytics) and coco.yaml (COCO)\n";
  return 0;
}

int convert(const config::Options& o) {
  if (o.str("out").empty()) throw UserError("data convert: out=DIR is required");
  data::IndexOptions io;
  io.coco_images = o.str("images");
  io.allow_outside_images = o.flag("allow_outside_images");
  io.on_problem = [](const data::Problem& p) { std::cerr << "warning: " << p.str() << "\n"; };
  const auto index = data::build_index(o.str("data"), io);
  std::string to = o.str("to");
  if (to.empty()) to = index.format == data::DatasetFormat::Coco ? "yolo" : "coco";
  if (to != "coco" && to != "yolo") throw UserError("option to=" + to + ": expected coco or yolo");
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::equivalent(fs::path(o.str("out")), fs::path(index.source).parent_path(), ec) ||
      fs::equivalent(fs::path(o.str("out")), fs::path(index.source), ec))
    throw UserError("data convert: out= must not be the source dataset's folder");
  const auto r = to == "coco" ? data::write_coco(index, o.str("out")) : data::write_ultralytics(index, o.str("out"));
  std::cout << "wrote " << o.str("out") << " (" << (to == "coco" ? "COCO" : "Ultralytics") << "): " << r.images
            << " images, " << r.instances << " instances\n";
  for (const auto& n : r.notes) std::cout << "note: " << n << "\n";
  return 0;
}

int prepare(const config::Options& o) {
  data::IndexOptions io;
  io.coco_images = o.str("images");
  io.allow_outside_images = o.flag("allow_outside_images");
  io.on_problem = [](const data::Problem& p) { std::cerr << "warning: " << p.str() << "\n"; };
  const auto index = data::build_index(o.str("data"), io);
  data::PreparedOptions po;
  po.imgsz = int(o.integer("imgsz", 1, config::kMaxImgsz));
  po.cache_dir = o.str("cache_dir");
  const std::string store = o.str("cache");
  if (store != "disk" && store != "ram") throw UserError("option cache=" + store + ": expected disk or ram");
  po.store = store == "ram" ? data::PreparedStore::Ram : data::PreparedStore::Disk;
  po.on_problem = io.on_problem;
  bool any = false;
  for (const auto& s : index.splits) {
    if (!o.str("split").empty() && s.name != o.str("split")) continue;
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
  if (!any) throw UserError("no split named '" + o.str("split") + "'");
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
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << usage;
    return args.empty() ? 2 : 0;
  }
  const auto& action = args[0];
  if (action != "check" && action != "synth" && action != "convert" && action != "prepare")
    throw UserError("unknown data action '" + action + "'\n" + usage);
  auto o = data_options(action);
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (!rest.empty() && (rest[0] == "--help" || rest[0] == "-h")) {
    std::cout << o.help();
    return 0;
  }
  o.parse(rest);
  if (action == "check") return check(o);
  if (action == "synth") return synth(o);
  if (action == "prepare") return prepare(o);
  return convert(o);
}

}  // namespace lucid::cli

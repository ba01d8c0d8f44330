#include "lucid/feed/training_data.h"

#include <chrono>
#include <cstdio>
#include <map>

#include "lucid/data/labels.h"
#include "lucid/util/error.h"
#include "lucid/util/memory.h"

namespace lucid::engine {

data::SampleSource make_sample_source(const PreparedSplit& ps) {
  // Instances given only as an RLE mask (COCO, not crowd) train on the mask's outline, traced once
  // here; keyed by (image, instance).
  auto outlines = std::make_shared<std::map<std::pair<size_t, size_t>, data::Polygon>>();
  for (const auto u : ps.usable) {
    const auto& rec = ps.split->images.at(static_cast<size_t>(u));
    for (size_t j = 0; j < rec.instances.size(); ++j) {
      const auto& inst = rec.instances[j];
      if (inst.crowd || !inst.polygons.empty() || !inst.rle) continue;
      const auto xy = data::rle_outline(*inst.rle);
      data::Polygon p(xy.size());
      for (size_t k = 0; k + 1 < xy.size(); k += 2) {
        p[k] = static_cast<float>(xy[k] / inst.rle->width);
        p[k + 1] = static_cast<float>(xy[k + 1] / inst.rle->height);
      }
      (*outlines)[{static_cast<size_t>(u), j}] = std::move(p);
    }
  }
  return [split = ps.split, prepared = ps.images, usable = ps.usable, outlines](int64_t k) {
    const auto index = static_cast<size_t>(usable.at(static_cast<size_t>(k)));
    const auto& rec = split->images.at(index);
    data::Sample s;
    s.index = k;
    s.orig_height = rec.height;
    s.orig_width = rec.width;
    if (prepared->holds_pixels()) {
      // A view of the prepared store (which the source keeps alive): augmentation never writes into
      // its input image, and no copy is made on the worker thread.
      auto view = prepared->view(index);
      s.image =
          torch::from_blob(const_cast<uint8_t*>(view.data), {view.height, view.width, view.channels}, torch::kUInt8);
    } else {  // cache=False: decoded now, the tensor owns the pixels
      auto im = std::make_shared<data::Image>(prepared->decode(index));
      s.image = torch::from_blob(
          im->pixels.data(), {im->height, im->width, im->channels}, [im](void*) {}, torch::kUInt8);
    }
    const float w = static_cast<float>(s.image.size(1)), h = static_cast<float>(s.image.size(0));
    for (size_t j = 0; j < rec.instances.size(); ++j) {
      const auto& inst = rec.instances[j];
      if (inst.crowd) continue;  // as the reference's converter: crowd regions are not trained on
      const auto& b = inst.box;  // normalised cx, cy, w, h
      data::Box box{(b[0] - b[2] / 2) * w, (b[1] - b[3] / 2) * h, (b[0] + b[2] / 2) * w, (b[1] + b[3] / 2) * h};
      std::vector<float> poly;
      const auto outline = outlines->find({index, j});
      if (inst.polygons.size() == 1 || outline != outlines->end()) {
        const auto& p = outline != outlines->end() ? outline->second : inst.polygons.front();
        poly.resize(p.size());
        for (size_t k = 0; k + 1 < p.size(); k += 2) {
          poly[k] = p[k] * w;
          poly[k + 1] = p[k + 1] * h;
        }
      } else if (inst.polygons.size() > 1) {
        // A multi-part COCO polygon becomes one outline, joined in the original image's pixels as
        // the reference's converter (merge_multi_segment) does before it trains.
        const double W = rec.width, H = rec.height;
        std::vector<std::vector<double>> parts;
        for (const auto& p : inst.polygons) {
          auto& part = parts.emplace_back(p.size());
          for (size_t k = 0; k + 1 < p.size(); k += 2) part[k] = p[k] * W, part[k + 1] = p[k + 1] * H;
        }
        const auto merged = data::merge_polygon_parts(parts);
        poly.resize(merged.size());
        for (size_t k = 0; k + 1 < merged.size(); k += 2) {
          poly[k] = static_cast<float>(merged[k] / W) * w;
          poly[k + 1] = static_cast<float>(merged[k + 1] / H) * h;
        }
      }
      s.instances.push_back(inst.cls, std::move(poly), box);
    }
    return s;
  };
}

std::shared_ptr<const data::DeviceImages> upload_prepared(const data::SampleSource& source, int64_t size,
                                                          const torch::Device& device) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    auto images = std::make_shared<const data::DeviceImages>(source, size, device);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("gpu_augment: %lld prepared images in %s memory, %.1f MiB, %.2f s\n", static_cast<long long>(size),
                device.str().c_str(), static_cast<double>(images->bytes()) / (1024.0 * 1024.0), secs);
    return images;
  } catch (const c10::OutOfMemoryError&) {
    std::fprintf(stderr, "warning: gpu_augment: the prepared images do not fit in %s memory; augmenting on the CPU\n",
                 device.str().c_str());
    return nullptr;
  }
}

std::vector<std::pair<int, int>> image_sizes(const PreparedSplit& ps) {
  std::vector<std::pair<int, int>> out;
  for (auto i : ps.usable)
    out.emplace_back(ps.split->images[static_cast<size_t>(i)].height, ps.split->images[static_cast<size_t>(i)].width);
  return out;
}

LoaderSource::LoaderSource(data::SampleSource source, data::LoaderOptions options)
    : loader_(std::move(source), std::move(options)) {}

void LoaderSource::start_epoch(int64_t epoch, bool mosaic) {
  loader_.set_mosaic(mosaic);
  loader_.start_epoch(epoch);
}

std::optional<TrainBatch> LoaderSource::next() {
  auto b = loader_.next();
  if (!b) return std::nullopt;
  TrainBatch t;
  t.images = b->images;
  t.targets = b->targets;
  t.hsv_gains = b->hsv_gains;
  return t;
}

data::PreparedStore prepared_store(const std::string& cache_option) {
  if (cache_option == "disk") return data::PreparedStore::Disk;
  if (cache_option == "False") return data::PreparedStore::None;
  return data::PreparedStore::Ram;
}

void require_memory_for_ram_cache(const std::vector<const data::Split*>& splits, int imgsz) {
  uint64_t need = 0;
  size_t images = 0;
  for (const auto* split : splits) need += data::prepared_bytes(*split, imgsz), images += split->images.size();
  const uint64_t with_margin = need + need / 2;
  const uint64_t available = util::available_memory_bytes();
  if (with_margin <= available) return;
  throw UserError("option cache=ram: the " + std::to_string(images) + " prepared images at imgsz=" +
                  std::to_string(imgsz) + " need " + std::to_string(need) + " bytes (" + util::gigabytes(need) + "; " +
                  std::to_string(with_margin) + " bytes with the reference's 50% margin) but " +
                  std::to_string(available) + " bytes (" + util::gigabytes(available) +
                  ") are available; use cache=disk (a memory-mapped file), cache=False (each image decoded when "
                  "used) or fraction= (part of the training images)");
}

PreparedSplit prepare_split(const data::Split& split, int imgsz, data::PreparedStore store, int threads) {
  const bool disk_cache = store == data::PreparedStore::Disk;
  data::PreparedOptions po;
  po.imgsz = imgsz;
  po.store = store;
  po.threads = threads;
  po.on_problem = [](const data::Problem& p) { std::fprintf(stderr, "warning: %s\n", p.str().c_str()); };
  const auto t0 = std::chrono::steady_clock::now();
  auto prepared = std::make_shared<data::PreparedImages>(data::PreparedImages::build(split, po));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (store == data::PreparedStore::None)
    std::printf("%s: %zu images at %d px, decoded when used (cache=False)\n", split.name.c_str(), prepared->size(),
                imgsz);
  else
    std::printf("%s: %zu prepared images at %d px, %.1f MiB %s, %.2f s%s\n", split.name.c_str(), prepared->size(),
                imgsz, static_cast<double>(prepared->bytes()) / (1024.0 * 1024.0),
                disk_cache ? "memory-mapped" : "in RAM", secs, prepared->from_cache() ? " (from cache)" : "");
  PreparedSplit out{std::make_shared<const data::Split>(split), prepared, {}};
  for (size_t i = 0; i < prepared->size(); ++i)
    if (prepared->ok(i)) out.usable.push_back(static_cast<int64_t>(i));
  if (out.usable.empty()) throw UserError(split.source + ": no usable images in split '" + split.name + "'");
  return out;
}

}  // namespace lucid::engine

// Runs our data pipeline pieces for the augmentation oracle test (tests/oracle/test_augment_oracle.py).
//   augment_oracle_tool val IN OUT     validation loader (rect batches, letterbox, mask targets) on
//                                      decoded images and normalised labels
//   augment_oracle_tool pieces IN OUT  individual operations on cases "<op>.<case>.<input>":
//                                      fill, mask, resize, warp, hsv, box, perspective, mosaic, and the
//                                      mix augmentations with their draws given: cpflip, cppartner,
//                                      mixup, cutmix (tests/oracle/test_mix_oracle.py)
// Inputs and outputs are safetensors.
#include <iostream>
#include <set>

#include "lucid/data/augment.h"
#include "lucid/data/hsv.h"
#include "lucid/data/loader.h"
#include "lucid/data/masks.h"
#include "lucid/data/mix.h"
#include "lucid/data/polygon.h"
#include "lucid/data/warp.h"
#include "lucid/model/safetensors.h"

using namespace lucid;
using namespace lucid::data;
using torch::Tensor;

namespace {

using Inputs = std::map<std::string, Tensor>;

const Tensor& get(const Inputs& in, const std::string& key) {
  auto it = in.find(key);
  if (it == in.end()) throw std::runtime_error("missing input " + key);
  return it->second;
}
bool has(const Inputs& in, const std::string& key) { return in.count(key) > 0; }
int64_t get_int(const Inputs& in, const std::string& key) { return get(in, key).item<int64_t>(); }
template <typename T>
std::vector<T> vec(const Tensor& t) {
  auto c = t.contiguous();
  return {c.data_ptr<T>(), c.data_ptr<T>() + c.numel()};
}

// Instances from flat tensors: cls (n), plen (n) points per polygon, poly (sum plen * 2), box (n, 4)
// xyxy; coordinates multiplied by (sx, sy) in single precision.
SampleInstances instances_from(const Inputs& in, const std::string& p, float sx = 1, float sy = 1) {
  SampleInstances out;
  if (!has(in, p + "cls")) return out;
  auto cls = vec<int32_t>(get(in, p + "cls").to(torch::kInt32));
  auto plen = vec<int32_t>(get(in, p + "plen").to(torch::kInt32));
  auto poly = vec<float>(get(in, p + "poly").to(torch::kFloat));
  auto box = vec<float>(get(in, p + "box").to(torch::kFloat));
  size_t off = 0;
  for (size_t i = 0; i < cls.size(); ++i) {
    std::vector<float> pts(poly.begin() + off, poly.begin() + off + size_t(plen[i]) * 2);
    off += size_t(plen[i]) * 2;
    for (size_t k = 0; k + 1 < pts.size(); k += 2) pts[k] *= sx, pts[k + 1] *= sy;
    out.push_back(cls[i], std::move(pts),
                  {box[4 * i] * sx, box[4 * i + 1] * sy, box[4 * i + 2] * sx, box[4 * i + 3] * sy});
  }
  return out;
}

void put_instances(model::NamedTensors& out, const std::string& p, const SampleInstances& in) {
  std::vector<int32_t> plen;
  std::vector<float> poly, box;
  for (size_t i = 0; i < in.size(); ++i) {
    plen.push_back(int32_t(in.polygons[i].size() / 2));
    poly.insert(poly.end(), in.polygons[i].begin(), in.polygons[i].end());
    box.insert(box.end(), in.boxes[i].begin(), in.boxes[i].end());
  }
  const int64_t n = int64_t(in.size());
  out.emplace_back(p + "cls", torch::tensor(in.cls.empty() ? std::vector<int32_t>{} : in.cls, torch::kInt32).view({n}));
  out.emplace_back(p + "plen", torch::tensor(plen, torch::kInt32).view({n}));
  out.emplace_back(p + "poly", torch::tensor(poly, torch::kFloat).view({int64_t(poly.size())}));
  out.emplace_back(p + "box", torch::tensor(box, torch::kFloat).view({n, 4}));
}

std::set<std::string> cases(const Inputs& in, const std::string& op) {
  std::set<std::string> out;
  for (const auto& [k, v] : in) {
    if (k.rfind(op + ".", 0) != 0) continue;
    auto rest = k.substr(op.size() + 1);
    out.insert(rest.substr(0, rest.find('.')));
  }
  return out;
}

Matrix3 matrix(const Tensor& t) {
  auto v = vec<double>(t.to(torch::kDouble));
  Matrix3 m;
  std::copy_n(v.begin(), 9, m.begin());
  return m;
}

// ---- val -----------------------------------------------------------------------------------------

void run_val(const Inputs& in, model::NamedTensors& out) {
  const int imgsz = int(get_int(in, "cfg.imgsz"));
  const int64_t n = get_int(in, "cfg.n");
  LoaderOptions o;
  o.dataset_size = n;
  o.imgsz = imgsz;
  o.batch = int(get_int(in, "cfg.batch"));
  o.workers = int(get_int(in, "cfg.workers"));
  o.augment = false;
  o.rect = get_int(in, "cfg.rect") != 0;
  o.overlap_mask = get_int(in, "cfg.overlap") != 0;
  o.pin_memory = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto& img = get(in, "img." + std::to_string(i));
    o.image_sizes.emplace_back(int(img.size(0)), int(img.size(1)));
  }
  SampleSource source = [&](int64_t i) {
    const std::string p = std::to_string(i);
    const auto& raw = get(in, "img." + p);
    Sample s;
    s.image = resize_long_side(raw, imgsz);
    s.orig_height = int(raw.size(0));
    s.orig_width = int(raw.size(1));
    // Labels are normalised: polygons and boxes to the prepared image's pixels.
    s.instances = instances_from(in, "lab." + p + ".", float(s.width()), float(s.height()));
    return s;
  };
  Loader loader(source, o);
  loader.start_epoch(0);
  while (auto b = loader.next()) {
    int64_t first = 0;
    auto bi = b->targets.batch_idx;
    for (int64_t j = 0; j < b->size(); ++j) {
      const std::string p = std::to_string(b->indices[j]);
      const int64_t count = bi.eq(j).sum().item<int64_t>();
      out.emplace_back("img." + p, b->images[j].clone());
      out.emplace_back("bboxes." + p, b->targets.bboxes.slice(0, first, first + count).clone());
      out.emplace_back("cls." + p, b->targets.cls.slice(0, first, first + count).clone());
      if (o.overlap_mask)
        out.emplace_back("masks." + p, b->targets.masks[j].to(torch::kInt32));
      else
        out.emplace_back("masks." + p, b->targets.masks.slice(0, first, first + count).clone());
      out.emplace_back("sem." + p, b->targets.sem_masks[j].clone());
      const auto& lb = b->letterbox[j];
      out.emplace_back("lb." + p, torch::tensor({lb.ratio, double(lb.left), double(lb.top)}, torch::kDouble));
      first += count;
    }
  }
}

// The mix augmentations on "<op>.<case>.": img and instances, partner pimg and instances "partner.",
// and the op's draws; out: img_out, instances "out." and their per-instance masks at 1/4 (masks).
void put_mix_result(model::NamedTensors& out, const std::string& p, const Sample& s) {
  out.emplace_back(p + "img_out", s.image);
  put_instances(out, p + "out.", s.instances);
  out.emplace_back(p + "masks", make_mask_targets(s.instances, s.height(), s.width(), 4, /*overlap=*/false).masks);
}

void run_mix_pieces(const Inputs& in, model::NamedTensors& out) {
  auto sample = [&](const std::string& p, const std::string& img) {
    Sample s;
    s.image = get(in, p + img).contiguous();
    s.instances = instances_from(in, p + (img == "img" ? "" : "partner."));
    return s;
  };
  for (const auto& c : cases(in, "cpflip")) {
    const std::string p = "cpflip." + c + ".";
    Sample s = sample(p, "img");
    copy_paste_flip(s, get(in, p + "p").item<double>());
    put_mix_result(out, p, s);
  }
  for (const auto& c : cases(in, "cppartner")) {
    const std::string p = "cppartner." + c + ".";
    Sample s = sample(p, "img");
    copy_paste_partner(s, sample(p, "pimg"), get(in, p + "p").item<double>());
    put_mix_result(out, p, s);
  }
  for (const auto& c : cases(in, "mixup")) {
    const std::string p = "mixup." + c + ".";
    Sample s = sample(p, "img");
    mixup(s, sample(p, "pimg"), get(in, p + "r").item<double>());
    put_mix_result(out, p, s);
  }
  for (const auto& c : cases(in, "cutmix")) {  // draws: lam (3), cx (3), cy (3), choice
    const std::string p = "cutmix." + c + ".";
    Sample s = sample(p, "img");
    auto lam = vec<double>(get(in, p + "lam").to(torch::kDouble));
    auto cx = vec<int64_t>(get(in, p + "cx").to(torch::kLong)), cy = vec<int64_t>(get(in, p + "cy").to(torch::kLong));
    std::array<Rect, 3> areas;
    for (int k = 0; k < 3; ++k) areas[k] = cutmix_rect(s.width(), s.height(), lam[k], int(cx[k]), int(cy[k]));
    const int64_t choice = get_int(in, p + "choice");
    const bool applied = cutmix(s, sample(p, "pimg"), areas, [&](int64_t n) { return choice % n; });
    put_mix_result(out, p, s);
    out.emplace_back(p + "applied", torch::tensor(int32_t(applied)));
  }
}

// ---- pieces --------------------------------------------------------------------------------------

void run_pieces(const Inputs& in, model::NamedTensors& out) {
  for (const auto& c : cases(in, "fill")) {  // integer polygon -> dense cv2.fillPoly
    const std::string p = "fill." + c + ".";
    auto shape = vec<int64_t>(get(in, p + "shape").to(torch::kLong));
    auto xy = vec<int32_t>(get(in, p + "xy").to(torch::kInt32));
    auto img = torch::zeros({shape[0], shape[1]}, torch::kUInt8);
    fill_polygon(img.data_ptr<uint8_t>(), int(shape[0]), int(shape[1]), xy, 1);
    out.emplace_back(p + "out", img);
  }
  for (const auto& c : cases(in, "mask")) {  // float polygon -> 1/ratio mask (polygon2mask)
    const std::string p = "mask." + c + ".";
    auto shape = vec<int64_t>(get(in, p + "shape").to(torch::kLong));
    auto poly = vec<float>(get(in, p + "poly").to(torch::kFloat));
    out.emplace_back(p + "out", polygon_mask(poly, int(shape[0]), int(shape[1]), int(shape[2])));
  }
  for (const auto& c : cases(in, "resize")) {
    const std::string p = "resize." + c + ".";
    auto shape = vec<int64_t>(get(in, p + "shape").to(torch::kLong));
    out.emplace_back(p + "out", resize_linear(get(in, p + "img"), int(shape[0]), int(shape[1])));
  }
  for (const auto& c : cases(in, "warp")) {
    const std::string p = "warp." + c + ".";
    auto shape = vec<int64_t>(get(in, p + "shape").to(torch::kLong));
    const auto M = matrix(get(in, p + "M"));
    const bool persp = get_int(in, p + "perspective") != 0;
    const auto& img = get(in, p + "img");
    out.emplace_back(p + "out", persp ? warp_perspective(img, M, int(shape[0]), int(shape[1]), 114)
                                      : warp_affine(img, M, int(shape[0]), int(shape[1]), 114));
  }
  for (const auto& c : cases(in, "warpp")) {
    const std::string p = "warpp." + c + ".";
    auto shape = vec<int64_t>(get(in, p + "shape").to(torch::kLong));
    out.emplace_back(p + "out",
                     warp_perspective(get(in, p + "img"), matrix(get(in, p + "M")), int(shape[0]), int(shape[1]), 114));
  }
  for (const auto& c : cases(in, "hsv")) {  // (H, W, 3) RGB image, gains (3)
    const std::string p = "hsv." + c + ".";
    auto img = get(in, p + "img").permute({2, 0, 1}).unsqueeze(0).contiguous();
    auto res = hsv_augment(img, get(in, p + "gains").to(torch::kDouble).view({1, 3}));
    out.emplace_back(p + "out", res[0].permute({1, 2, 0}).contiguous());
  }
  for (const auto& c : cases(in, "box")) {
    const std::string p = "box." + c + ".";
    auto poly = vec<float>(get(in, p + "poly").to(torch::kFloat));
    auto size = vec<double>(get(in, p + "size").to(torch::kDouble));
    auto b = polygon_box(poly, float(size[0]), float(size[1]));
    out.emplace_back(p + "out", torch::tensor(std::vector<float>(b.begin(), b.end()), torch::kFloat));
  }
  for (const auto& c : cases(in, "perspective")) {  // instances through a given M
    const std::string p = "perspective." + c + ".";
    Sample s;
    s.image = get(in, p + "img");
    s.instances = instances_from(in, p);
    auto shape = vec<int64_t>(get(in, p + "shape").to(torch::kLong));
    const double scale = get(in, p + "scale").item<double>();
    auto r =
        random_perspective(std::move(s), matrix(get(in, p + "M")), scale, int(shape[0]), int(shape[1]), false, 114);
    out.emplace_back(p + "img_out", r.image);
    put_instances(out, p + "out.", r.instances);
  }
  for (const auto& c : cases(in, "mosaic")) {  // four tiles and a centre
    const std::string p = "mosaic." + c + ".";
    std::array<Sample, 4> tiles;
    for (int t = 0; t < 4; ++t) {
      const std::string q = p + std::to_string(t) + ".";
      tiles[t].image = get(in, q + "img");
      tiles[t].instances = instances_from(in, q);
    }
    auto centre = vec<int64_t>(get(in, p + "centre").to(torch::kLong));
    const int imgsz = int(get_int(in, p + "imgsz"));
    auto m = mosaic4(std::move(tiles), int(centre[0]), int(centre[1]), imgsz, 114);
    out.emplace_back(p + "img_out", m.image);
    put_instances(out, p + "out.", m.instances);
  }
  run_mix_pieces(in, out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: augment_oracle_tool val|pieces IN OUT\n";
    return 2;
  }
  try {
    const std::string mode = argv[1];
    auto in = model::read_safetensors(argv[2]);
    model::NamedTensors out;
    if (mode == "val")
      run_val(in, out);
    else if (mode == "pieces")
      run_pieces(in, out);
    else
      throw std::runtime_error("unknown mode " + mode);
    model::write_safetensors(argv[3], out);
  } catch (const std::exception& e) {
    std::cerr << "augment_oracle_tool: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

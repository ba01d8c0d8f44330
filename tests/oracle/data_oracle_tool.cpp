// Exposes the data layer to the data oracle test (tests/oracle/test_data_index.py):
//   data_oracle_tool index DATA OUT.json   the dataset index (every split, image, instance, problem)
//   data_oracle_tool decode IMAGE OUT.png  our decoded RGB pixels, written losslessly
//   data_oracle_tool resize IMAGE WxH:OUT.png[,WxH:OUT.png...]  our bilinear resizes of IMAGE
//   data_oracle_tool prepare DATA IMGSZ:N:OUTDIR   the first N prepared images of the first split as
//                                                  OUTDIR/<i>.png (RAM store)
// Exit code 1 with the message on stderr for a UserError.
#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>

#include "lucid/data/dataset.h"
#include "lucid/data/image_io.h"
#include "lucid/data/prepared.h"
#include "lucid/data/resize.h"
#include "lucid/util/error.h"

using namespace lucid;

namespace {

nlohmann::json index_json(const data::DatasetIndex& index) {
  nlohmann::json out = {{"names", index.names}, {"splits", nlohmann::json::array()}};
  for (const auto& s : index.splits) {
    nlohmann::json images = nlohmann::json::array(), problems = nlohmann::json::array();
    for (const auto& im : s.images) {
      nlohmann::json inst = nlohmann::json::array();
      for (const auto& i : im.instances)
        inst.push_back({{"cls", i.cls}, {"box", i.box}, {"polygons", i.polygons}, {"crowd", i.crowd}});
      images.push_back({{"path", im.path}, {"width", im.width}, {"height", im.height}, {"instances", inst}});
    }
    for (const auto& p : s.problems) problems.push_back({{"path", p.path}, {"line", p.line}, {"message", p.message}});
    const auto& c = s.counts;
    out["splits"].push_back({{"name", s.name},
                             {"images", images},
                             {"problems", problems},
                             {"counts",
                              {{"images", c.images},
                               {"instances", c.instances},
                               {"backgrounds", c.backgrounds},
                               {"skipped", c.skipped},
                               {"orphan_labels", c.orphan_labels},
                               {"duplicates_removed", c.duplicates_removed}}}});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: data_oracle_tool index DATA OUT.json | decode IMAGE OUT.png | resize IMAGE WxH:OUT.png,...\n";
    return 2;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "index") {
      data::IndexOptions o;
      o.require_images = false;
      o.decode = true;
      std::ofstream(argv[3]) << index_json(data::build_index(argv[2], o)).dump(1) << "\n";
    } else if (cmd == "decode") {
      data::write_file(argv[3], data::encode_png(data::decode_image(argv[2])));
    } else if (cmd == "prepare") {
      const std::string spec = argv[3];
      const auto a = spec.find(':'), b = spec.find(':', a + 1);
      data::PreparedOptions po;
      po.imgsz = std::stoi(spec.substr(0, a));
      po.store = data::PreparedStore::Ram;
      const size_t n = std::stoul(spec.substr(a + 1, b - a - 1));
      const auto index = data::build_index(argv[2]);
      const auto p = data::PreparedImages::build(index.splits.at(0), po);
      for (size_t i = 0; i < std::min(n, p.size()); ++i) {
        const auto v = p.view(i);
        data::Image im(v.height, v.width, 3);
        std::copy(v.data, v.data + im.pixels.size(), im.pixels.begin());
        data::write_file(spec.substr(b + 1) + "/" + std::to_string(i) + ".png", data::encode_png(im));
      }
    } else if (cmd == "resize") {  // resize IN.png WxH:OUT.png,WxH:OUT.png,...
      const auto im = data::decode_image(argv[2]);
      std::string spec = argv[3];
      for (size_t at = 0; at < spec.size();) {
        size_t end = spec.find(',', at);
        if (end == std::string::npos) end = spec.size();
        const std::string item = spec.substr(at, end - at);
        const auto x = item.find('x'), colon = item.find(':');
        const int w = std::stoi(item.substr(0, x)), h = std::stoi(item.substr(x + 1, colon - x - 1));
        data::write_file(item.substr(colon + 1), data::encode_png(data::resize_linear(im, w, h)));
        at = end + 1;
      }
    } else {
      std::cerr << "unknown command " << cmd << "\n";
      return 2;
    }
  } catch (const UserError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}

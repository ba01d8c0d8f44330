#include "lucid/weights/run_record.h"

#include <filesystem>

#include "lucid/config/fields.h"
#include "lucid/config/options.h"
#include "lucid/data/loader.h"
#include "lucid/data/synth.h"
#include "lucid/util/error.h"

namespace lucid::engine {

namespace fs = std::filesystem;

std::string absolute_dataset(const std::string& path) {
  std::error_code ec;
  auto p = fs::weakly_canonical(fs::absolute(path), ec);
  return ec ? fs::absolute(path).lexically_normal().string() : p.string();
}

int64_t default_train_imgsz(bool synthetic) { return synthetic ? 160 : 640; }

RunRecordModel read_run_record(const nlohmann::ordered_json& record, const std::string& file) {
  for (auto it = record.begin(); it != record.end(); ++it)
    if (it.key() != "resume" && !it.value().is_string())
      throw UserError(file + ": checkpoint state 'train_args." + it.key() + "' is not a string");
  auto text = [&](const char* key) { return record.contains(key) ? record[key].get<std::string>() : std::string(); };
  RunRecordModel r;
  // As train_options.cpp resolves them: an empty text is the run-time default, then adjusted.
  const auto data = text("data");
  r.data = absolute_dataset(data.empty() ? data::default_synth_yaml() : data);
  const bool synthetic = r.data == data::default_synth_yaml();
  const auto imgsz = text("imgsz");
  r.imgsz = config::stride_multiple(imgsz.empty() ? default_train_imgsz(synthetic)
                                                  : config::read_integer("imgsz", imgsz, 1, config::kMaxImgsz));
  const auto overlap =
      record.contains("overlap_mask") ? text("overlap_mask") : config::format_flag(data::LoaderOptions{}.overlap_mask);
  r.overlap_mask = config::read_flag("overlap_mask", overlap);
  r.model = record.contains("model") ? text("model") : std::string(kDefaultTrainModel);
  return r;
}

}  // namespace lucid::engine

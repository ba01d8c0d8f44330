#include "lucid/report/run_events.h"

#include <cstdlib>

#include "lucid/data/image_io.h"
#include "lucid/report/run_report.h"

namespace lucid::report {

namespace fs = std::filesystem;

void log_results_row(EventFile& events, int64_t epoch, const std::vector<std::string>& columns,
                     const std::vector<std::string>& cells) {
  for (size_t i = 0; i < columns.size() && i < cells.size(); ++i) {
    if (columns[i] == "epoch" || columns[i] == "time") continue;  // the step, and not logged by the reference
    events.scalar(epoch, columns[i], static_cast<float>(std::strtod(cells[i].c_str(), nullptr)));
  }
  events.flush();
}

int log_run_plots(EventFile& events, const fs::path& run_dir, int64_t step) {
  int logged = 0;
  for (const auto& name : report_images()) {
    const auto path = run_dir / name;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) continue;
    const auto bytes = data::read_file(path.string());
    const auto image = data::decode_image_memory(bytes, path.string());
    const bool png = data::sniff_format(bytes) == data::ImageFormat::Png;
    events.image(step, path.stem().string(), png ? bytes : data::encode_png(image), image.width, image.height);
    ++logged;
  }
  events.flush();
  return logged;
}

}  // namespace lucid::report

// `lucid settings`, as the reference's `yolo settings`: shows the settings file (config/user_settings.h),
// `lucid settings key=value ...` updates it (keys and values checked, the nearest key suggested for a
// typo), `lucid settings reset` writes the defaults. The settings are printed after each.
#include <cstdio>
#include <filesystem>

#include "lucid/cli/commands.h"
#include "lucid/config/user_settings.h"

namespace lucid::cli {

int settings_command(const std::vector<std::string>& args) {
  if (args.size() == 1 && args[0] == "reset") {
    config::reset_user_settings();
    std::printf("Settings reset to the defaults\n");
  } else {
    auto options = config::settings_options(config::load_user_settings());
    if (!options.parse_or_help(args)) return 0;
    if (!args.empty()) {
      config::save_user_settings(config::settings_from(options));
      for (const auto& a : args) std::printf("Updated '%s'\n", a.c_str());
    }
  }
  const auto file = config::settings_file();
  std::error_code ec;
  std::printf("%s%s\n%s", file.string().c_str(),
              std::filesystem::exists(file, ec) ? "" : " (not written yet: the defaults)",
              config::settings_json(config::load_user_settings()).c_str());
  return 0;
}

}  // namespace lucid::cli

// nms= of lucid train, val and predict, the reference's option (8.4.190): None, the default, runs a
// model through its one-to-many head and NMS (also an end-to-end model, also when training
// validates, which decides best); True is the same outside export (where it embeds NMS); False runs
// an end-to-end model through its NMS-free one-to-one head. The deprecated end2end= is mapped onto
// it as the reference maps it.
#pragma once
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "lucid/config/fields.h"
#include "lucid/util/error.h"

namespace lucid::config {

inline constexpr const char* kNmsHelp =
    "None: the one-to-many head and NMS (also for end-to-end models such as yolo26); True: the same (it "
    "embeds NMS on export only); False: an end-to-end model's NMS-free one-to-one head";

namespace detail {

inline bool is_none(const std::string& text) {
  std::string v = text;
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return v == "none";
}

}  // namespace detail

// None (also empty text), True or False (any letter case; 1/0 and yes/no as flags); other text is a
// UserError naming key=text.
inline std::optional<bool> read_nms(const std::string& key, const std::string& text) {
  if (text.empty() || detail::is_none(text)) return std::nullopt;
  try {
    return read_flag(key, text);
  } catch (const UserError&) {
    throw UserError("option " + key + "=" + text + ": expected None, True or False");
  }
}

// None, True or False.
inline std::string format_nms(const std::optional<bool>& nms) { return nms ? format_flag(*nms) : "None"; }

// The command line with end2end= replaced, as the reference replaces it, with a warning naming both:
// end2end=True is nms=False; end2end=False is nms=True where nms=True is given, else nms=None;
// end2end=None is dropped.
inline std::vector<std::string> map_deprecated_end2end(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  std::optional<std::string> end2end, nms;  // the last value of each, as the options parser keeps it
  for (const auto& a : args) {
    if (a.rfind("end2end=", 0) == 0) {
      end2end = a.substr(8);
      continue;
    }
    if (a.rfind("nms=", 0) == 0) nms = a.substr(4);
    out.push_back(a);
  }
  if (!end2end || end2end->empty() || detail::is_none(*end2end)) return out;
  const bool e2e = read_flag("end2end", *end2end);
  const bool nms_true = nms && read_nms("nms", *nms) == std::optional<bool>(true);
  const std::string mapped = format_nms(e2e        ? std::optional<bool>(false)
                                        : nms_true ? std::optional<bool>(true)
                                                   : std::nullopt);
  std::fprintf(stderr, "warning: 'end2end=%s' is deprecated and will be removed in the future. Use 'nms=%s' instead.\n",
               format_flag(e2e).c_str(), mapped.c_str());
  out.push_back("nms=" + mapped);
  return out;
}

// nms=False on a model without a one-to-one head: a warning that it runs through its one-to-many
// head and NMS (as the reference does).
inline void warn_without_one_to_one(const std::optional<bool>& nms, bool has_one_to_one, const std::string& model) {
  if (nms == std::optional<bool>(false) && !has_one_to_one)
    std::fprintf(stderr, "warning: nms=False: %s has no one-to-one head; using its one-to-many outputs and NMS\n",
                 model.c_str());
}

}  // namespace lucid::config

#include "lucid/predict/predict_sources.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lucid/data/dataset.h"
#include "lucid/data/video.h"
#include "lucid/util/error.h"

namespace lucid::engine {

namespace fs = std::filesystem;

namespace {

// fnmatch as Python's fnmatchcase: `*` any run, `?` one character, `[abc]`, `[a-z]`, `[!abc]`
// (a `]` first in the set is literal; a `[` without its `]` is literal).
bool fnmatch(const std::string& name, size_t n, const std::string& pat, size_t p) {
  while (p < pat.size()) {
    const char c = pat[p];
    if (c == '*') {
      while (p < pat.size() && pat[p] == '*') ++p;
      if (p == pat.size()) return true;
      for (size_t k = n; k <= name.size(); ++k)
        if (fnmatch(name, k, pat, p)) return true;
      return false;
    }
    if (n == name.size()) return false;
    if (c == '?') {
      ++n, ++p;
      continue;
    }
    if (c == '[') {
      size_t q = p + 1;
      const bool negate = q < pat.size() && pat[q] == '!';
      if (negate) ++q;
      if (q < pat.size() && pat[q] == ']') ++q;
      while (q < pat.size() && pat[q] != ']') ++q;
      if (q < pat.size()) {  // a set [p+1, q)
        size_t s = p + 1 + (negate ? 1 : 0);
        bool hit = false;
        for (size_t i = s; i < q; ++i) {
          if (i + 2 < q && pat[i + 1] == '-') {
            if (pat[i] <= name[n] && name[n] <= pat[i + 2]) hit = true;
            i += 2;
          } else if (pat[i] == name[n]) {
            hit = true;
          }
        }
        if (hit == negate) return false;
        ++n;
        p = q + 1;
        continue;
      }
    }
    if (c != name[n]) return false;
    ++n, ++p;
  }
  return n == name.size();
}

bool has_magic(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }
bool hidden(const std::string& name) { return !name.empty() && name[0] == '.'; }

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// The names in a folder (unreadable folders give none, as Python's glob).
std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    names.push_back(it->path().filename().string());
  return names;
}

// The folder and its subfolders at any depth, not hidden ones (and without following links to
// folders, which could loop).
void subfolders(const fs::path& dir, std::vector<fs::path>& out) {
  out.push_back(dir);
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const auto name = it->path().filename().string();
    std::error_code e;
    if (!hidden(name) && it->is_directory(e) && !it->is_symlink(e)) subfolders(it->path(), out);
  }
}

// Python's glob(recursive=True) from folder `dir` on the pattern's components parts[i..].
void glob_from(const fs::path& dir, const std::vector<std::string>& parts, size_t i, std::vector<std::string>& out) {
  if (i == parts.size()) {
    out.push_back(dir.string());
    return;
  }
  const auto& part = parts[i];
  const bool last = i + 1 == parts.size();
  if (part == "**") {
    std::vector<fs::path> dirs;
    subfolders(dir, dirs);
    for (const auto& d : dirs) {
      if (last) {
        for (const auto& name : entries(d))
          if (!hidden(name)) out.push_back((d / name).string());
      } else {
        glob_from(d, parts, i + 1, out);
      }
    }
    return;
  }
  if (!has_magic(part)) {
    const auto p = dir / part;
    std::error_code ec;
    if (last ? fs::exists(fs::symlink_status(p, ec)) : is_dir(p)) glob_from(p, parts, i + 1, out);
    return;
  }
  auto names = entries(dir);
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    if (hidden(name) && !hidden(part)) continue;
    if (!fnmatch(name, 0, part, 0)) continue;
    const auto p = dir / name;
    if (last || is_dir(p)) glob_from(p, parts, i + 1, out);
  }
}

// Path(p).absolute() of the reference: the working folder prepended, `.` and empty components
// dropped, `..` kept.
std::string absolute(const std::string& p) {
  const std::string a = fs::path(p).is_absolute() ? p : (fs::current_path() / p).string();
  std::string out;
  std::stringstream ss(a);
  std::string part;
  while (std::getline(ss, part, '/'))
    if (!part.empty() && part != ".") out += "/" + part;
  return out.empty() ? "/" : out;
}

std::vector<std::string> glob(const std::string& pattern) {
  const auto a = absolute(pattern);
  std::vector<std::string> parts;
  std::stringstream ss(a);
  std::string part;
  while (std::getline(ss, part, '/'))
    if (!part.empty()) parts.push_back(part);
  std::vector<std::string> out;
  glob_from("/", parts, 0, out);
  std::sort(out.begin(), out.end());
  return out;
}

bool is_file(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool is_url_or_stream(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* scheme : {"http://", "https://", "rtsp://", "rtmp://", "tcp://"})
    if (l.rfind(scheme, 0) == 0) return true;
  return false;
}

struct Listing {
  std::vector<std::string> files;  // absolute paths, any kind
  int64_t skipped = 0;
};

// The files one entry names (a glob, a folder or a file); `where` names it in warnings and errors.
// `list_dir`: the list file's folder, where a relative file is looked up second.
bool expand(const std::string& entry, const std::string& where, const fs::path& list_dir, Listing& out) {
  const auto a = absolute(entry);
  if (entry.find('*') != std::string::npos) {
    for (auto& f : glob(entry))
      if (is_file(f)) out.files.push_back(std::move(f));
    return true;
  }
  if (is_dir(a)) {
    std::vector<std::string> found;
    std::error_code ec;
    fs::directory_iterator it(a, ec);
    for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
      const auto name = it->path().filename().string();
      if (hidden(name) || name.find('.') == std::string::npos) continue;  // the reference's `*.*`
      std::error_code e;
      if (it->is_regular_file(e)) {
        found.push_back(it->path().string());
      } else if (e) {
        std::fprintf(stderr, "warning: %s: cannot be examined (%s); skipped\n", it->path().c_str(),
                     e.message().c_str());
        ++out.skipped;
      }
    }
    if (ec) throw UserError(where + ": cannot list the folder (" + ec.message() + ")");
    std::sort(found.begin(), found.end());
    for (auto& f : found) out.files.push_back(std::move(f));
    return true;
  }
  if (is_file(a)) {
    out.files.push_back(a);
    return true;
  }
  if (!list_dir.empty() && !fs::path(entry).is_absolute() && is_file((list_dir / entry).string())) {
    out.files.push_back(absolute((list_dir / entry).string()));
    return true;
  }
  return false;
}

bool is_image(const std::string& f) { return data::has_image_extension(f); }
bool is_video(const std::string& f) { return data::video::has_video_extension(f); }

}  // namespace

PredictSources list_predict_sources(const std::string& source) {
  if (source.empty()) throw UserError("option source= is required (an image, video, folder, glob or list file)");
  const std::string where = "source=" + source;
  if (is_url_or_stream(source))
    throw UserError(where + ": URLs and streams are not supported (nothing is downloaded); give local files");
  std::error_code ec;
  const bool exists = fs::exists(source, ec);
  if (!exists && (source == "screen" || (std::all_of(source.begin(), source.end(), ::isdigit))))
    throw UserError(where + ": cameras and screen capture are not supported; give local files");

  Listing listing;
  const auto ext = fs::path(source).extension().string();
  const bool list_file = (ext == ".txt" || ext == ".csv") && source.find('*') == std::string::npos;
  if (list_file) {
    if (!is_file(source)) throw UserError(where + ": no such list file");
    std::ifstream in(source, std::ios::binary);
    std::stringstream content;
    content << in.rdbuf();
    if (!in && !in.eof()) throw UserError(where + ": cannot read the list file");
    // Entries with their line (or item) numbers, in sorted order as the reference takes them.
    std::vector<std::pair<std::string, int>> items;
    std::string item;
    int number = 0;
    const char sep = ext == ".txt" ? '\n' : ',';
    while (std::getline(content, item, sep)) {
      ++number;
      const auto b = item.find_first_not_of(" \t\r\n\v\f");
      if (b == std::string::npos) continue;  // blank
      const auto e = item.find_last_not_of(" \t\r\n\v\f");
      items.emplace_back(item.substr(b, e - b + 1), number);
    }
    std::stable_sort(items.begin(), items.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    const fs::path list_dir = fs::path(absolute(source)).parent_path();
    const std::string unit = ext == ".txt" ? " line " : " item ";
    for (const auto& [entry, line] : items) {
      const std::string at = source + unit + std::to_string(line);
      if (is_url_or_stream(entry))
        throw UserError(at + ": " + entry + ": URLs and streams are not supported (nothing is downloaded)");
      const size_t before = listing.files.size();
      if (!expand(entry, at, list_dir, listing))
        throw UserError(at + ": " + entry + ": no such file or folder (looked for from the working folder and from " +
                        list_dir.string() + ")");
      const bool single = entry.find('*') == std::string::npos && !is_dir(absolute(entry));
      if (single && !is_image(listing.files.back()) && !is_video(listing.files.back())) {
        std::fprintf(stderr, "warning: %s: %s is neither an image nor a video file; skipped\n", at.c_str(),
                     entry.c_str());
        listing.files.pop_back();
        ++listing.skipped;
      } else if (!single &&
                 std::none_of(listing.files.begin() + static_cast<std::ptrdiff_t>(before), listing.files.end(),
                              [](const std::string& f) { return is_image(f) || is_video(f); })) {
        std::fprintf(stderr, "warning: %s: %s holds no image or video file\n", at.c_str(), entry.c_str());
      }
    }
  } else {
    if (!expand(source, where, {}, listing)) throw UserError(where + ": no such file or folder");
    if (source.find('*') == std::string::npos && !is_dir(absolute(source)) && !is_image(source) && !is_video(source))
      throw UserError(where +
                      ": not an image or video file by its extension (images: avif bmp dng heic heif jp2 "
                      "jpeg jpg mpo png tif tiff webp; videos: asf avi gif m4v mkv mov mp4 mpeg mpg ts wmv webm)");
  }

  PredictSources out;
  out.skipped = listing.skipped;
  for (auto& f : listing.files) {
    if (is_image(f))
      out.images.push_back(f);
    else if (is_video(f))
      out.videos.push_back(f);
  }
  if (out.images.empty() && out.videos.empty()) {
    const char* what = list_file                               ? "no image or video files in the list"
                       : source.find('*') != std::string::npos ? "no image or video files match"
                                                               : "no image or video files in the folder";
    throw UserError(where + ": " + what);
  }
  return out;
}

}  // namespace lucid::engine

#include "lucid/data/prepared.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "lucid/data/image_io.h"
#include "lucid/data/resize.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"
#include "lucid/util/parallel.h"
#include "lucid/util/removed_on_signal.h"

namespace lucid::data {

namespace {

constexpr char kMagic[8] = {'L', 'U', 'C', 'I', 'D', 'P', 'I', '1'};
constexpr uint32_t kVersion = 1;  // bump when the layout or the pixels (decode, resize) change
constexpr uint64_t kAlign = 64;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t imgsz;
  uint64_t count;
  uint64_t key;
  uint64_t data_offset;
  uint64_t total_size;
  uint32_t complete;
  uint32_t reserved[3];
};
static_assert(sizeof(Header) == 64);

struct Entry {
  uint64_t offset;
  int32_t height, width, original_height, original_width;
  uint32_t ok;
  uint32_t reserved;
};
static_assert(sizeof(Entry) == 32);

uint64_t align(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

struct Fnv {
  uint64_t h = 1469598103934665603ULL;
  void bytes(const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 1099511628211ULL;
  }
  template <class T>
  void value(T v) {
    bytes(&v, sizeof v);
  }
  void str(const std::string& s) {
    value(uint64_t(s.size()));
    bytes(s.data(), s.size());
  }
};

// The key: what the pixels depend on (paths, file sizes and times, indexed sizes, imgsz, version).
uint64_t cache_key(const Split& split, int imgsz) {
  Fnv f;
  f.bytes(kMagic, sizeof kMagic);
  f.value(kVersion);
  f.value(int32_t(imgsz));
  f.value(uint64_t(split.images.size()));
  for (const auto& im : split.images) {
    f.str(im.path);
    struct stat st {};
    if (::stat(im.path.c_str(), &st) == 0) {
      f.value(int64_t(st.st_size));
      f.value(int64_t(st.st_mtim.tv_sec));
      f.value(int64_t(st.st_mtim.tv_nsec));
    }
    f.value(int32_t(im.width));
    f.value(int32_t(im.height));
  }
  return f.h;
}

std::vector<Entry> plan(const Split& split, int imgsz, uint64_t& data_offset, uint64_t& total) {
  std::vector<Entry> e(split.images.size());
  data_offset = align(sizeof(Header) + sizeof(Entry) * e.size());
  uint64_t at = data_offset;
  for (size_t i = 0; i < e.size(); ++i) {
    const auto& im = split.images[i];
    const auto [w, h] = long_side_size(im.width, im.height, imgsz);
    e[i] = {at, h, w, im.height, im.width, 0, 0};
    at = align(at + uint64_t(w) * uint64_t(h) * 3);
  }
  total = at;
  return e;
}

std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

// One image decoded and resized to its slot's size; it must still have its indexed size.
Image prepare_one(const std::string& path, const Entry& e) {
  Image im = decode_image(path);
  if (im.width != e.original_width || im.height != e.original_height)
    throw error_at(path, 0,
                   "is " + std::to_string(im.width) + "x" + std::to_string(im.height) + " now, indexed as " +
                       std::to_string(e.original_width) + "x" + std::to_string(e.original_height) +
                       " (changed since indexing?)");
  if (im.width != e.width || im.height != e.height) im = resize_linear(im, e.width, e.height);
  return im;
}

}  // namespace

struct PreparedImages::State {
  std::vector<Entry> entries;
  const uint8_t* base = nullptr;  // start of the layout (header at 0)
  std::vector<uint8_t> ram;
  void* map = nullptr;
  size_t map_size = 0;
  int imgsz = 0;
  std::vector<Problem> problems;
  bool from_cache = false;
  std::string path;
  uint64_t bytes = 0;
  int fd = -1;                     // the mapped file, kept open to check its size before each use
  uint64_t key = 0;                // the content key its header must keep
  std::vector<std::string> paths;  // the split's image files (the None store decodes them at each use)
  ~State() {
    if (map) ::munmap(map, map_size);
    if (fd >= 0) ::close(fd);
  }
  // A mapped page past the end of a file that shrank under us is SIGBUS on touch: the file's size
  // and header key are checked before every use instead (a syscall, against decoding an image).
  void check_mapping() const {
    if (fd < 0) return;
    struct stat st {};
    const bool sized = ::fstat(fd, &st) == 0 && uint64_t(st.st_size) == map_size;
    if (sized && static_cast<const Header*>(map)->key == key) return;
    throw error_at(
        path, 0,
        std::string("the prepared-image cache file was ") +
            (sized ? "rewritten"
                   : "truncated to " + std::to_string(st.st_size) + " of " + std::to_string(map_size) + " bytes") +
            " while in use; delete it and run again (it is rebuilt)");
  }
};

namespace {

// Reads exactly n bytes at offset (false on a short read: the file is shorter than it claims).
bool read_at(int fd, void* out, size_t n, uint64_t offset) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, off_t(offset));
    if (r <= 0) return false;
    p += r, n -= size_t(r), offset += uint64_t(r);
  }
  return true;
}

// Maps a finished cache file read-only if it is exactly what `expect` describes. Its size, header
// and entries are read with pread and checked before anything is mapped, so that a file cut short
// is never touched through a mapping; the file stays open (fd) for the checks before each use.
bool map_existing(const std::string& path, uint64_t key, int imgsz, const std::vector<Entry>& expect, uint64_t total,
                  void*& map, size_t& map_size, int& fd_out, std::vector<Entry>& entries) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  Header h{};
  std::vector<Entry> e(expect.size());
  bool good = ::fstat(fd, &st) == 0 && uint64_t(st.st_size) == total && read_at(fd, &h, sizeof h, 0) &&
              read_at(fd, e.data(), sizeof(Entry) * e.size(), sizeof(Header));
  good = good && std::memcmp(h.magic, kMagic, 8) == 0 && h.version == kVersion && h.imgsz == uint32_t(imgsz) &&
         h.count == expect.size() && h.key == key && h.total_size == total && h.complete == 1;
  for (size_t i = 0; good && i < expect.size(); ++i)
    good = e[i].offset == expect[i].offset && e[i].height == expect[i].height && e[i].width == expect[i].width;
  void* m = good ? ::mmap(nullptr, total, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (m == MAP_FAILED) {
    ::close(fd);
    return false;
  }
  entries = std::move(e);
  map = m;
  map_size = total;
  fd_out = fd;
  return true;
}

// The cache file being written: a temporary sibling `<name>.tmp.<pid>`, locked while written (a
// later prepare removes only temporaries no one holds), removed on every error and on a signal that
// ends the run. Its space is reserved before any image is decoded, and the pixels go in with pwrite:
// a full disk is an error returned here, where a store through a mapping of a sparse file is SIGBUS.
class CacheWriter {
 public:
  // False when the file cannot be created here (the images are then kept in memory); a disk that
  // cannot hold `total` bytes is a UserError naming the cache file and the bytes.
  bool open(const std::string& path, uint64_t total) {
    path_ = path;
    tmp_ = path + ".tmp." + std::to_string(::getpid());
    total_ = total;
    fd_ = ::open(tmp_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd_ < 0) return false;
    removed_on_signal_ = std::make_unique<util::RemovedOnSignal>(tmp_);
    ::flock(fd_, LOCK_EX | LOCK_NB);
    const int reserved = util::injected_no_space(path) ? ENOSPC : ::posix_fallocate(fd_, 0, off_t(total));
    // A filesystem without fallocate is written all the same: pwrite reports what it cannot hold.
    if (reserved != 0 && reserved != EOPNOTSUPP && reserved != EINVAL && reserved != ENOSYS) fail(reserved);
    if (::ftruncate(fd_, off_t(total)) != 0) fail(errno);
    return true;
  }
  ~CacheWriter() {
    if (fd_ >= 0) ::close(fd_);
    if (!tmp_.empty() && !renamed_) ::unlink(tmp_.c_str());
  }
  bool failed() const { return error_.load() != 0; }
  // Thread-safe; the first error is kept for check().
  void write(uint64_t offset, const void* data, size_t n) {
    const auto* p = static_cast<const char*>(data);
    while (n > 0 && !failed()) {
      const ssize_t w = ::pwrite(fd_, p, n, off_t(offset));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        int expected = 0;
        error_.compare_exchange_strong(expected, w < 0 ? errno : ENOSPC);
        return;
      }
      p += w, n -= size_t(w), offset += uint64_t(w);
    }
  }
  void check() {
    if (failed()) fail(error_.load());
  }
  // Flushes the file to the disk and renames it into place; returns its descriptor, which the
  // caller maps (and owns). False in `published` when the rename failed (the file is used unnamed).
  int finish(bool& published) {
    check();
    if (::fsync(fd_) != 0) fail(errno);
    published = ::rename(tmp_.c_str(), path_.c_str()) == 0;
    renamed_ = published;
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  [[noreturn]] void fail(int error) { throw UserError(util::write_failure(path_, error, total_)); }

  std::string path_, tmp_;
  uint64_t total_ = 0;
  int fd_ = -1;
  bool renamed_ = false;
  std::atomic<int> error_{0};
  std::unique_ptr<util::RemovedOnSignal> removed_on_signal_;
};

}  // namespace

std::string default_cache_dir() {
  if (const char* d = std::getenv("LUCID_CACHE_DIR"); d && *d) return std::string(d) + "/prepared";
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/lucid/prepared";
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/lucid/prepared";
  return "/tmp/lucid-cache/prepared";
}

PreparedImages::PreparedImages(std::unique_ptr<State> s) : s_(std::move(s)) {}
PreparedImages::PreparedImages(PreparedImages&&) noexcept = default;
PreparedImages& PreparedImages::operator=(PreparedImages&&) noexcept = default;
PreparedImages::~PreparedImages() = default;

size_t PreparedImages::size() const { return s_->entries.size(); }
bool PreparedImages::ok(size_t i) const { return s_->entries.at(i).ok != 0; }
int PreparedImages::imgsz() const { return s_->imgsz; }
const std::vector<Problem>& PreparedImages::problems() const { return s_->problems; }
bool PreparedImages::from_cache() const { return s_->from_cache; }
const std::string& PreparedImages::cache_path() const { return s_->path; }
uint64_t PreparedImages::bytes() const { return s_->bytes; }

bool PreparedImages::holds_pixels() const { return s_->base != nullptr; }

Image PreparedImages::decode(size_t i) const {
  const Entry& e = s_->entries.at(i);
  return prepare_one(s_->paths.at(i), e);
}

uint64_t prepared_bytes(const Split& split, int imgsz) {
  uint64_t data_offset = 0, total = 0;
  plan(split, imgsz, data_offset, total);
  return total;
}

ImageView PreparedImages::view(size_t i) const {
  if (!s_->base) throw UserError("prepared images: the None store (cache=False) holds no pixels; decode() them");
  const Entry& e = s_->entries.at(i);
  s_->check_mapping();
  return {e.height, e.width, 3, s_->base + e.offset, e.original_height, e.original_width};
}

PreparedImages PreparedImages::build(const Split& split, const PreparedOptions& o) {
  if (o.imgsz < 1) throw UserError("imgsz must be positive");
  auto s = std::make_unique<State>();
  s->imgsz = o.imgsz;
  uint64_t data_offset = 0, total = 0;
  const std::vector<Entry> layout = plan(split, o.imgsz, data_offset, total);
  s->bytes = total - data_offset;
  auto report = [&](Problem p) {
    if (o.on_problem) o.on_problem(p);
    s->problems.push_back(std::move(p));
  };

  for (const auto& rec : split.images) s->paths.push_back(rec.path);
  if (o.store == PreparedStore::None) {  // cache=False: nothing held, each use decodes
    s->entries = layout;
    for (auto& e : s->entries) e.ok = 1;
    s->bytes = 0;
    return PreparedImages(std::move(s));
  }
  const uint64_t key = cache_key(split, o.imgsz);
  std::string dir = o.cache_dir.empty() ? default_cache_dir() : o.cache_dir;
  std::string path;
  uint8_t* target = nullptr;  // the RAM store's layout being filled
  std::unique_ptr<CacheWriter> writer;
  if (o.store == PreparedStore::Disk) {
    path = dir + "/" + hex(key) + "-" + std::to_string(o.imgsz) + ".bin";
    util::remove_dead_temporaries(dir, ".bin", 0);  // what a killed prepare left
    if (map_existing(path, key, o.imgsz, layout, total, s->map, s->map_size, s->fd, s->entries)) {
      s->key = key;
      s->base = static_cast<const uint8_t*>(s->map);
      s->from_cache = true;
      s->path = path;
      for (size_t i = 0; i < s->entries.size(); ++i)
        if (!s->entries[i].ok)
          report({split.images[i].path, 0,
                  "could not be prepared when the cache was built; delete " + path + " to retry"});
      return PreparedImages(std::move(s));
    }
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    writer = std::make_unique<CacheWriter>();
    if (ec || !writer->open(path, total)) {
      writer.reset();
      report({dir, 0, "cannot write the prepared-image cache here; images are kept in memory for this run"});
    }
  }
  if (!writer) {
    s->ram.assign(total, 0);
    target = s->ram.data();
    path.clear();
  }

  // Decode and resize every image into its slot.
  std::vector<Entry> entries = layout;
  std::vector<std::string> failures(entries.size());
  util::parallel_for(
      entries.size(),
      [&](size_t i) {
        const auto& rec = split.images[i];
        Entry& e = entries[i];
        if (writer && writer->failed()) return;  // the disk is full: check() below says so
        try {
          const Image im = prepare_one(rec.path, e);
          if (writer)
            writer->write(e.offset, im.pixels.data(), im.pixels.size());
          else
            std::memcpy(target + e.offset, im.pixels.data(), im.pixels.size());
          e.ok = 1;
        } catch (const std::exception& ex) {
          const std::string what = ex.what(), prefix = rec.path + ": ";
          failures[i] = (what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what) + "; image not prepared";
        }
      },
      o.threads);
  if (writer) writer->check();
  for (size_t i = 0; i < entries.size(); ++i)
    if (!entries[i].ok) report({split.images[i].path, 0, failures[i]});

  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kVersion;
  h.imgsz = uint32_t(o.imgsz);
  h.count = entries.size();
  h.key = key;
  h.data_offset = data_offset;
  h.total_size = total;
  h.complete = 1;
  std::vector<uint8_t> head(data_offset, 0);  // the header and entries (written last: complete)
  std::memcpy(head.data(), &h, sizeof h);
  std::memcpy(head.data() + sizeof(Header), entries.data(), sizeof(Entry) * entries.size());
  s->entries = std::move(entries);
  if (!writer) {
    std::memcpy(target, head.data(), head.size());
    s->base = target;
    return PreparedImages(std::move(s));
  }
  writer->write(0, head.data(), head.size());
  bool published = false;
  s->fd = writer->finish(published);  // kept for the checks before each use
  s->key = key;
  void* m = ::mmap(nullptr, total, PROT_READ, MAP_SHARED, s->fd, 0);
  if (m == MAP_FAILED)
    throw UserError(path + ": cannot map the prepared-image cache file (" + std::strerror(errno) + ")");
  s->map = m;
  s->map_size = total;
  s->base = static_cast<const uint8_t*>(m);
  if (published)
    s->path = path;
  else
    report({path, 0, "cannot finish the prepared-image cache file; it will be rebuilt next time"});
  return PreparedImages(std::move(s));
}

}  // namespace lucid::data

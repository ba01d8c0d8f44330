#include "lucid/model/torch_zip.h"

#include <zlib.h>

#include <filesystem>

#include "lucid/util/error.h"

namespace lucid::model {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50;
constexpr size_t kEndSize = 22, kLocatorSize = 20, kEnd64Size = 56, kCentralSize = 46, kLocalSize = 30;

uint64_t le(const std::string& b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

// a + b <= limit, without overflow.
bool fits(uint64_t a, uint64_t b, uint64_t limit) { return a <= limit && b <= limit - a; }

}  // namespace

bool starts_like_zip(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char sig[4];
  if (!in.read(sig, 4)) return false;
  return std::string(sig, 4) == std::string("PK\x03\x04", 4);
}

std::string TorchZip::bytes_at(uint64_t offset, uint64_t n, const std::string& what) const {
  if (!fits(offset, n, file_size_))
    throw UserError(path_ + ": not a readable PyTorch archive (" + what + " lies past the end of the file)");
  std::string b(n, '\0');
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(offset));
  if (!in_.read(b.data(), static_cast<std::streamsize>(n)))
    throw UserError(path_ + ": cannot read " + what + " (did the file change?)");
  return b;
}

TorchZip::TorchZip(const std::string& path) : path_(path) {
  auto bad = [&](const std::string& why) {
    return UserError(path_ + ": not a readable PyTorch archive (" + why + ")");
  };
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw UserError(path + ": is a folder, not a weights file");
  in_.open(path, std::ios::binary);
  if (!in_) throw UserError(path + ": cannot open");
  file_size_ = std::filesystem::file_size(path, ec);
  if (ec) throw UserError(path + ": cannot read its size");
  if (file_size_ < kEndSize) throw bad("shorter than a zip end record");

  // The end record: the last signature whose comment ends exactly at the end of the file.
  const uint64_t tail_len = std::min<uint64_t>(file_size_, kEndSize + 0xffff);
  const std::string tail = bytes_at(file_size_ - tail_len, tail_len, "the end record");
  int64_t end_at = -1;
  for (int64_t i = static_cast<int64_t>(tail_len - kEndSize); i >= 0; --i)
    if (le(tail, i, 4) == kEndSig && i + kEndSize + le(tail, i + 20, 2) == tail_len) {
      end_at = i;
      break;
    }
  if (end_at < 0) throw bad("no zip end record");
  const uint64_t end_pos = file_size_ - tail_len + static_cast<uint64_t>(end_at);
  if (le(tail, end_at + 4, 2) != 0 || le(tail, end_at + 6, 2) != 0) throw bad("multi-disk archives are not supported");
  uint64_t count = le(tail, end_at + 10, 2), cd_size = le(tail, end_at + 12, 4), cd_offset = le(tail, end_at + 16, 4);
  uint64_t cd_limit = end_pos;  // the directory ends before the (zip64) end records
  if (end_pos >= kLocatorSize) {
    const std::string loc = bytes_at(end_pos - kLocatorSize, kLocatorSize, "the zip64 locator");
    if (le(loc, 0, 4) == kLocator64Sig) {
      const uint64_t end64_pos = le(loc, 8, 8);
      if (!fits(end64_pos, kEnd64Size, end_pos - kLocatorSize)) throw bad("the zip64 end record lies outside the file");
      const std::string e64 = bytes_at(end64_pos, kEnd64Size, "the zip64 end record");
      if (le(e64, 0, 4) != kEnd64Sig) throw bad("the zip64 locator points at no zip64 end record");
      if (le(e64, 16, 4) != 0 || le(e64, 20, 4) != 0) throw bad("multi-disk archives are not supported");
      count = le(e64, 32, 8);
      cd_size = le(e64, 40, 8);
      cd_offset = le(e64, 48, 8);
      cd_limit = end64_pos;
    }
  }
  if (!fits(cd_offset, cd_size, cd_limit)) throw bad("the central directory lies outside the file");
  if (count > cd_size / kCentralSize) throw bad("the central directory is shorter than its entry count");
  const std::string cd = bytes_at(cd_offset, cd_size, "the central directory");

  size_t at = 0;
  // Every entry's header and bytes, added up: entries that overlap (each one's CRC can still be
  // right) would make reads that add up to more than the file; no read of the archive may.
  uint64_t entry_bytes = 0;
  for (uint64_t k = 0; k < count; ++k) {
    if (at + kCentralSize > cd.size() || le(cd, at, 4) != kCentralSig) throw bad("corrupt central directory");
    const uint64_t flags = le(cd, at + 8, 2), method = le(cd, at + 10, 2);
    const uint32_t crc = static_cast<uint32_t>(le(cd, at + 16, 4));
    uint64_t csize = le(cd, at + 20, 4), usize = le(cd, at + 24, 4);
    const size_t nlen = le(cd, at + 28, 2), elen = le(cd, at + 30, 2), clen = le(cd, at + 32, 2);
    uint64_t disk = le(cd, at + 34, 2), local = le(cd, at + 42, 4);
    if (at + kCentralSize + nlen + elen + clen > cd.size()) throw bad("corrupt central directory");
    const std::string name = cd.substr(at + kCentralSize, nlen);
    // Zip64 extra field: the saturated fields, in the order the format fixes.
    for (size_t e = at + kCentralSize + nlen, eend = e + elen; e + 4 <= eend;) {
      const uint64_t id = le(cd, e, 2), len = le(cd, e + 2, 2);
      if (e + 4 + len > eend) throw bad("corrupt extra field of '" + name + "'");
      if (id == 1) {
        size_t f = e + 4, fend = f + len;
        auto take = [&](uint64_t& v, int n) {
          if (f + n > fend) throw bad("short zip64 field of '" + name + "'");
          v = le(cd, f, n);
          f += n;
        };
        if (usize == 0xffffffff) take(usize, 8);
        if (csize == 0xffffffff) take(csize, 8);
        if (local == 0xffffffff) take(local, 8);
        if (disk == 0xffff) take(disk, 4);
      }
      e += 4 + len;
    }
    at += kCentralSize + nlen + elen + clen;
    if (flags & 1) throw bad("entry '" + name + "' is encrypted");
    if (method != 0)
      throw bad("entry '" + name + "' is compressed (method " + std::to_string(method) +
                "); PyTorch writes stored entries");
    if (csize != usize) throw bad("entry '" + name + "' has differing stored and full sizes");
    if (disk != 0) throw bad("multi-disk archives are not supported");
    if (!fits(local, kLocalSize, cd_offset)) throw bad("entry '" + name + "' has its local header outside the data");
    const std::string lh = bytes_at(local, kLocalSize, "a local header");
    if (le(lh, 0, 4) != kLocalSig) throw bad("entry '" + name + "' points at no local header");
    const uint64_t lnlen = le(lh, 26, 2), lelen = le(lh, 28, 2);
    const uint64_t data = local + kLocalSize + lnlen + lelen;
    if (lnlen != nlen || !fits(local + kLocalSize, lnlen, cd_offset) ||
        bytes_at(local + kLocalSize, lnlen, "a local header") != name)
      throw bad("entry '" + name + "' has a local header for another name");
    if (!fits(data, usize, cd_offset))
      throw bad("entry '" + name + "' of " + std::to_string(usize) + " bytes runs past the archive's data");
    entry_bytes += kLocalSize + lnlen + lelen + usize;  // each term is below cd_offset (checked above)
    if (entry_bytes > cd_offset)
      throw bad("entry '" + name + "' overlaps another: the entries hold more bytes than the archive's data");
    if (!entries_.emplace(name, Entry{data, usize, crc, static_cast<size_t>(k)}).second)
      throw bad("entry '" + name + "' appears twice");
  }
  if (at != cd.size()) throw bad("the central directory holds more than its entry count");
}

std::vector<std::string> TorchZip::names() const {
  std::vector<std::string> out(entries_.size());
  for (const auto& [name, e] : entries_) out[e.order] = name;
  return out;
}

const TorchZip::Entry& TorchZip::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw UserError(path_ + ": the archive has no entry '" + name + "'");
  return it->second;
}

uint64_t TorchZip::size(const std::string& name) const { return entry(name).size; }

void TorchZip::read_into(const std::string& name, void* dst) const {
  const Entry& e = entry(name);
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(e.data_offset));
  if (e.size && !in_.read(static_cast<char*>(dst), static_cast<std::streamsize>(e.size)))
    throw UserError(path_ + ": cannot read entry '" + name + "' (did the file change?)");
  if (crc32_z(0, static_cast<const Bytef*>(dst), e.size) != e.crc)
    throw UserError(path_ + ": entry '" + name + "' is corrupt (CRC-32 mismatch)");
}

std::string TorchZip::read(const std::string& name) const {
  std::string out(entry(name).size, '\0');
  read_into(name, out.data());
  return out;
}

}  // namespace lucid::model

// Minimal PyTorch-style checkpoints built byte by byte, for the tests of the .pt reader without
// Python: a zip writer for stored entries (with the zip64 end records torch.save always writes) and
// a pickle writer for the opcodes torch.save uses, plus a small Ultralytics-shaped checkpoint.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace lucid::testing {

inline void put_le(std::string& s, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) s += char((v >> (8 * i)) & 0xff);
}

// A zip archive of stored entries: local headers, data, central directory, zip64 end record and
// locator, end record. With zip64_sizes the directory gives every size through a zip64 extra field,
// as it must for entries of 4 GiB and more.
inline std::string zip_stored(const std::vector<std::pair<std::string, std::string>>& entries,
                              bool zip64_sizes = false) {
  std::string out, cd;
  for (const auto& [name, data] : entries) {
    const uint64_t offset = out.size();
    const uint32_t crc = static_cast<uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(data.data()), data.size()));
    put_le(out, 0x04034b50, 4);
    put_le(out, 20, 2);  // version
    put_le(out, 0, 2);   // flags
    put_le(out, 0, 2);   // stored
    put_le(out, 0, 4);   // time, date
    put_le(out, crc, 4);
    put_le(out, data.size(), 4);
    put_le(out, data.size(), 4);
    put_le(out, name.size(), 2);
    put_le(out, 0, 2);
    out += name + data;
    put_le(cd, 0x02014b50, 4);
    put_le(cd, 45, 2);
    put_le(cd, 20, 2);
    put_le(cd, 0, 2);
    put_le(cd, 0, 2);
    put_le(cd, 0, 4);
    put_le(cd, crc, 4);
    put_le(cd, zip64_sizes ? 0xffffffff : data.size(), 4);
    put_le(cd, zip64_sizes ? 0xffffffff : data.size(), 4);
    put_le(cd, name.size(), 2);
    put_le(cd, zip64_sizes ? 20 : 0, 2);  // extra
    put_le(cd, 0, 2);                     // comment
    put_le(cd, 0, 2);                     // disk
    put_le(cd, 0, 2);
    put_le(cd, 0, 4);
    put_le(cd, offset, 4);
    cd += name;
    if (zip64_sizes) {
      put_le(cd, 1, 2);
      put_le(cd, 16, 2);
      put_le(cd, data.size(), 8);
      put_le(cd, data.size(), 8);
    }
  }
  const uint64_t cd_offset = out.size();
  out += cd;
  const uint64_t end64 = out.size();
  put_le(out, 0x06064b50, 4);
  put_le(out, 44, 8);
  put_le(out, 45, 2);
  put_le(out, 45, 2);
  put_le(out, 0, 4);
  put_le(out, 0, 4);
  put_le(out, entries.size(), 8);
  put_le(out, entries.size(), 8);
  put_le(out, cd.size(), 8);
  put_le(out, cd_offset, 8);
  put_le(out, 0x07064b50, 4);
  put_le(out, 0, 4);
  put_le(out, end64, 8);
  put_le(out, 1, 4);
  put_le(out, 0x06054b50, 4);
  put_le(out, 0, 4);
  put_le(out, entries.size(), 2);
  put_le(out, entries.size(), 2);
  put_le(out, cd.size(), 4);
  put_le(out, cd_offset, 4);
  put_le(out, 0, 2);
  return out;
}

// A zip whose entries overlap, every CRC valid: `plain` entries first, then storage entries
// `<prefix>0` ... `<prefix>n-1` nested so that entry k's bytes are entry k+1's local header and
// bytes, and the innermost holds `payload` bytes. n entries then hold about n times the payload in a
// file of about one payload (built without that copy: each CRC from the next with crc32_combine).
// sizes receives each storage entry's size.
inline std::string zip_nested(const std::vector<std::pair<std::string, std::string>>& plain, const std::string& prefix,
                              int n, size_t payload, std::vector<uint64_t>& sizes) {
  auto crc_of = [](const std::string& b) {
    return static_cast<uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(b.data()), b.size()));
  };
  auto local = [](const std::string& name, uint32_t crc, uint64_t size) {
    std::string h;
    put_le(h, 0x04034b50, 4);
    put_le(h, 20, 2);
    put_le(h, 0, 2);
    put_le(h, 0, 2);
    put_le(h, 0, 4);
    put_le(h, crc, 4);
    put_le(h, size, 4);
    put_le(h, size, 4);
    put_le(h, name.size(), 2);
    put_le(h, 0, 2);
    return h + name;
  };
  auto central = [](std::string& cd, const std::string& name, uint32_t crc, uint64_t size, uint64_t offset) {
    put_le(cd, 0x02014b50, 4);
    put_le(cd, 45, 2);
    put_le(cd, 20, 2);
    put_le(cd, 0, 4);  // flags, method
    put_le(cd, 0, 4);  // time, date
    put_le(cd, crc, 4);
    put_le(cd, size, 4);
    put_le(cd, size, 4);
    put_le(cd, name.size(), 2);
    put_le(cd, 0, 6);  // extra, comment, disk
    put_le(cd, 0, 6);  // attributes
    put_le(cd, offset, 4);
    cd += name;
  };
  // From the innermost out: entry k = header of k+1, then entry k+1.
  std::vector<std::string> headers(static_cast<size_t>(n));  // headers[k]: local header of entry k
  std::vector<uint32_t> crcs(static_cast<size_t>(n));
  sizes.assign(static_cast<size_t>(n), 0);
  const std::string inner(payload, '\x01');
  crcs[n - 1] = crc_of(inner);
  sizes[n - 1] = payload;
  for (int k = n - 1; k >= 0; --k) {
    headers[k] = local(prefix + std::to_string(k), crcs[k], sizes[k]);
    if (k == 0) break;
    crcs[k - 1] = static_cast<uint32_t>(crc32_combine(crc_of(headers[k]), crcs[k], static_cast<z_off_t>(sizes[k])));
    sizes[k - 1] = headers[k].size() + sizes[k];
  }
  std::string out, cd;
  for (const auto& [name, bytes] : plain) {
    central(cd, name, crc_of(bytes), bytes.size(), out.size());
    out += local(name, crc_of(bytes), bytes.size()) + bytes;
  }
  for (int k = 0; k < n; ++k) {
    central(cd, prefix + std::to_string(k), crcs[k], sizes[k], out.size());
    out += headers[k];
  }
  out += inner;
  const uint64_t cd_offset = out.size(), count = plain.size() + static_cast<size_t>(n);
  out += cd;
  put_le(out, 0x06054b50, 4);
  put_le(out, 0, 4);
  put_le(out, count, 2);
  put_le(out, count, 2);
  put_le(out, cd.size(), 4);
  put_le(out, cd_offset, 4);
  put_le(out, 0, 2);
  return out;
}

// Pickle protocol 2 opcodes, appended in order.
class PickleWriter {
 public:
  PickleWriter& proto() { return op("\x80\x02"); }
  PickleWriter& stop() { return op("."); }
  PickleWriter& mark() { return op("("); }
  PickleWriter& dict() { return op("}"); }
  PickleWriter& list() { return op("]"); }
  PickleWriter& tuple() { return op(")"); }
  PickleWriter& tuple_mark() { return op("t"); }
  PickleWriter& tuple_n(int n) { return raw(std::string(1, char(0x84 + n))); }
  PickleWriter& none() { return op("N"); }
  PickleWriter& boolean(bool b) { return raw(std::string(1, b ? '\x88' : '\x89')); }
  PickleWriter& str(const std::string& s) {
    raw("X");
    put_le(b_, s.size(), 4);
    return raw(s);
  }
  PickleWriter& integer(int64_t v) {
    if (v >= 0 && v < 256) return byte_op('K', int(v));
    if (v >= INT32_MIN && v <= INT32_MAX) {
      raw("J");
      put_le(b_, static_cast<uint32_t>(v), 4);
      return *this;
    }
    raw("\x8a\x08");
    put_le(b_, static_cast<uint64_t>(v), 8);
    return *this;
  }
  PickleWriter& real(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    raw("G");
    for (int i = 7; i >= 0; --i) b_ += char((bits >> (8 * i)) & 0xff);
    return *this;
  }
  PickleWriter& global(const std::string& module, const std::string& name) {
    return raw("c" + module + "\n" + name + "\n");
  }
  PickleWriter& reduce() { return op("R"); }
  PickleWriter& newobj() { return raw("\x81"); }
  PickleWriter& build() { return op("b"); }
  PickleWriter& setitem() { return op("s"); }
  PickleWriter& setitems() { return op("u"); }
  PickleWriter& append() { return op("a"); }
  PickleWriter& appends() { return op("e"); }
  PickleWriter& put(int i) { return byte_op('q', i); }
  PickleWriter& get(int i) { return byte_op('h', i); }
  PickleWriter& persid() { return op("Q"); }
  PickleWriter& raw(const std::string& s) {
    b_ += s;
    return *this;
  }
  const std::string& bytes() const { return b_; }

  // _rebuild_tensor_v2(('storage', torch.<type>Storage, key, 'cpu', numel), offset, size, stride,
  // False, OrderedDict()), as torch.save writes a tensor.
  PickleWriter& tensor(const std::string& storage_type, const std::string& key, int64_t numel,
                       const std::vector<int64_t>& size, const std::vector<int64_t>& stride, int64_t offset = 0) {
    global("torch._utils", "_rebuild_tensor_v2")
        .mark()
        .mark()
        .str("storage")
        .global("torch", storage_type)
        .str(key)
        .str("cpu");
    integer(numel).tuple_mark().persid().integer(offset);
    mark();
    for (auto s : size) integer(s);
    tuple_mark().mark();
    for (auto s : stride) integer(s);
    tuple_mark().boolean(false).global("collections", "OrderedDict").tuple().reduce().tuple_mark().reduce();
    return *this;
  }
  PickleWriter& parameter(const std::string& storage_type, const std::string& key, int64_t numel,
                          const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
    global("torch._utils", "_rebuild_parameter");
    tensor(storage_type, key, numel, size, stride).boolean(true).global("collections", "OrderedDict").tuple().reduce();
    return tuple_n(3).reduce();
  }
  // NEWOBJ of a module class, then BUILD with a state dict whose body `fill` writes (key/value
  // pairs, SETITEMS closes them).
  template <class F>
  PickleWriter& module(const std::string& module, const std::string& cls, F fill) {
    global(module, cls).tuple().newobj().dict().mark().str("training").boolean(false);
    fill(*this);
    return setitems().build();
  }

 private:
  PickleWriter& op(const char* s) { return raw(s); }
  PickleWriter& byte_op(char op, int arg) {
    b_.push_back(op);
    b_.push_back(char(arg));
    return *this;
  }
  std::string b_;
};

// The bytes of the tiny checkpoint's storages: '0' 6 halfs (conv weight 2x3x1x1), '1' 2 floats
// (running_mean), '2' one int64 (num_batches_tracked), '3' 2 floats (a non-persistent buffer).
inline std::vector<std::pair<std::string, std::string>> tiny_storages() {
  std::string halfs, floats, count, extra;
  for (int i = 0; i < 6; ++i) put_le(halfs, 0x3c00 + i, 2);  // 1.0 + i ulp
  float f[2] = {0.5f, -2.0f};
  floats.assign(reinterpret_cast<const char*>(f), 8);
  put_le(count, 7, 8);
  extra.assign(8, '\0');
  return {{"0", halfs}, {"1", floats}, {"2", count}, {"3", extra}};
}

// An Ultralytics-shaped checkpoint pickle: {'epoch': 3, 'model': None, 'ema': SegmentationModel
// {model: Sequential{0: Conv2d(weight; bias None), 1: BatchNorm2d(running_mean, num_batches_tracked,
// non-persistent 'scratch')}}, yaml, names}, 'train_args': {...}}. With ema_none the model sits
// under 'model' and 'ema' is None.
inline std::string tiny_checkpoint_pickle(bool ema_none = false) {
  PickleWriter p;
  auto conv = [](PickleWriter& w) {
    w.module("torch.nn.modules.conv", "Conv2d", [](PickleWriter& m) {
      m.str("_parameters").dict().mark().str("weight").parameter("HalfStorage", "0", 6, {2, 3, 1, 1}, {3, 1, 1, 1});
      m.str("bias").none().setitems();
      m.str("_buffers").dict();
      m.str("_modules").dict();
    });
  };
  auto bn = [](PickleWriter& w) {
    w.module("torch.nn.modules.batchnorm", "BatchNorm2d", [](PickleWriter& m) {
      m.str("_parameters").dict();
      m.str("_buffers").dict().mark().str("running_mean").tensor("FloatStorage", "1", 2, {2}, {1});
      m.str("num_batches_tracked").tensor("LongStorage", "2", 1, {}, {});
      m.str("scratch").tensor("FloatStorage", "3", 2, {2}, {1}).setitems();
      m.str("_non_persistent_buffers_set").global("__builtin__", "set").mark().list().str("scratch").append();
      m.tuple_mark().reduce();
      m.str("_modules").dict();
    });
  };
  auto model = [&](PickleWriter& w) {
    w.module("ultralytics.nn.tasks", "SegmentationModel", [&](PickleWriter& m) {
      m.str("_parameters").global("collections", "OrderedDict").tuple().reduce();
      m.str("_buffers").dict();
      m.str("_modules").dict().str("model");
      m.module("torch.nn.modules.container", "Sequential", [&](PickleWriter& s) {
        s.str("_parameters").dict().str("_buffers").dict().str("_modules").dict().mark().str("0");
        conv(s);
        s.str("1");
        bn(s);
        s.setitems();
      });
      m.setitem();
      m.str("yaml").dict().mark().str("nc").integer(2).str("scale").str("n").str("backbone").list().mark();
      m.list().mark().integer(-1).integer(1).str("Conv").list().mark().integer(64).integer(3).integer(2).appends();
      m.appends().appends().str("depth").real(0.5).setitems();
      m.str("names").dict().mark().integer(0).str("cat").integer(1).str("dog").setitems();
    });
  };
  p.proto().dict().put(0).mark().str("epoch").integer(3);
  if (ema_none) {
    p.str("model");
    model(p);
    p.str("ema").none();
  } else {
    p.str("model").none().str("ema");
    model(p);
  }
  p.str("train_args").dict().mark().str("epochs").integer(3).str("lr0").real(0.01).str("name").str("x");
  p.str("amp").boolean(true).str("pretrained").none().setitems();
  p.setitems().stop();
  return p.bytes();
}

// A checkpoint whose 'ema' SegmentationModel holds one uint8 buffer per storage of `sizes`
// (storage key k, the whole storage), e.g. over zip_nested's overlapping entries.
inline std::string buffers_checkpoint_pickle(const std::vector<uint64_t>& sizes) {
  PickleWriter p;
  p.proto().dict().put(0).mark().str("epoch").integer(3).str("model").none().str("ema");
  p.module("ultralytics.nn.tasks", "SegmentationModel", [&](PickleWriter& m) {
    m.str("_parameters").dict();
    m.str("_buffers").dict().mark();
    for (size_t k = 0; k < sizes.size(); ++k)
      m.str("b" + std::to_string(k))
          .tensor("ByteStorage", std::to_string(k), static_cast<int64_t>(sizes[k]), {static_cast<int64_t>(sizes[k])},
                  {1});
    m.setitems();
    m.str("_modules").dict();
  });
  p.setitems().stop();
  return p.bytes();
}

inline std::string tiny_checkpoint(const std::string& pickle_bytes, const std::string& byteorder = "little",
                                   bool zip64_sizes = false) {
  std::vector<std::pair<std::string, std::string>> entries{{"archive/data.pkl", pickle_bytes},
                                                           {"archive/byteorder", byteorder}};
  for (auto& [key, bytes] : tiny_storages()) entries.emplace_back("archive/data/" + key, bytes);
  entries.emplace_back("archive/version", "3\n");
  return zip_stored(entries, zip64_sizes);
}

}  // namespace lucid::testing

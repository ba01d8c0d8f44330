// The .pt reader on checkpoints built byte by byte (tests/common/pt_archive.h): a valid tiny
// Ultralytics-shaped checkpoint reads with the reference's state-dict names, and every hostile
// variant (truncated, corrupted zip, entries past the file, unexpected globals, unknown opcodes,
// short storages, huge declared sizes, deep nesting, cycles) is a UserError naming the file.
#include "lucid/model/ultralytics_pt.h"

#include <gtest/gtest.h>

#include <fstream>

#include "data_test_util.h"
#include "lucid/util/error.h"
#include "pt_archive.h"

using namespace lucid;
using lucid::testing::PickleWriter;
using lucid::testing::TempDir;
using lucid::testing::tiny_checkpoint;
using lucid::testing::tiny_checkpoint_pickle;

namespace {

void put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Refused with a UserError that starts with the path (and holds the fragment, when given).
void expect_refused(const std::string& path, const std::string& fragment = "") {
  try {
    model::read_ultralytics_pt(path);
    ADD_FAILURE() << "accepted a hostile file" << (fragment.empty() ? "" : " (expected: " + fragment + ")");
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
    if (!fragment.empty()) {
      EXPECT_NE(what.find(fragment), std::string::npos) << what;
    }
  }
}

// A pickle with the checkpoint's frame around a value: {'ema': None, 'model': <value>}.
std::string around_model(const std::string& value_ops) {
  PickleWriter p;
  p.proto().dict().mark().str("ema").none().str("model").raw(value_ops).setitems().stop();
  return p.bytes();
}

// An Ultralytics model object with no parameters, buffers or submodules.
std::string empty_model() {
  PickleWriter m;
  m.global("ultralytics.nn.tasks", "SegmentationModel").tuple().newobj().dict().mark();
  m.str("_parameters").dict().str("_buffers").dict().str("_modules").dict().setitems().build();
  return m.bytes();
}

uint64_t find(const std::string& hay, const std::string& needle, size_t from = 0) {
  const size_t at = hay.find(needle, from);
  EXPECT_NE(at, std::string::npos) << needle;
  return at;
}

}  // namespace

TEST(UltralyticsPt, TinyCheckpointReads) {
  TempDir dir;
  const std::string p = dir.str("tiny.pt");
  put(p, tiny_checkpoint(tiny_checkpoint_pickle()));
  EXPECT_TRUE(model::is_torch_zip(p));
  auto w = model::read_ultralytics_pt(p);
  EXPECT_EQ(w.entry, "ema");
  std::vector<std::string> names;
  for (const auto& [k, t] : w.state) names.push_back(k);
  // Parameters then persistent buffers, None and non-persistent entries skipped, as state_dict().
  EXPECT_EQ(names, (std::vector<std::string>{"model.0.weight", "model.1.num_batches_tracked", "model.1.running_mean"}));
  const auto& wt = w.state.at("model.0.weight");
  EXPECT_EQ(wt.scalar_type(), torch::kFloat16);
  EXPECT_EQ(wt.sizes(), (std::vector<int64_t>{2, 3, 1, 1}));
  EXPECT_EQ(wt.flatten()[5].item<float>(), 1.0f + 5 * 0.0009765625f);
  EXPECT_EQ(w.state.at("model.1.running_mean")[1].item<float>(), -2.0f);
  EXPECT_EQ(w.state.at("model.1.num_batches_tracked").dim(), 0);
  EXPECT_EQ(w.state.at("model.1.num_batches_tracked").item<int64_t>(), 7);
  EXPECT_EQ(w.names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(nlohmann::json::parse(w.yaml),
            nlohmann::json::parse(R"({"nc":2,"scale":"n","backbone":[[-1,1,"Conv",[64,3,2]]],"depth":0.5})"));
  EXPECT_EQ(w.train_args, nlohmann::json::parse(R"({"epochs":3,"lr0":0.01,"name":"x","amp":true,"pretrained":null})"));

  put(p, tiny_checkpoint(tiny_checkpoint_pickle(/*ema_none=*/true)));
  w = model::read_ultralytics_pt(p);
  EXPECT_EQ(w.entry, "model");
  EXPECT_EQ(w.state.size(), 3u);

  const std::string p64 = dir.str("tiny64.pt");
  put(p64, tiny_checkpoint(tiny_checkpoint_pickle(), "little", /*zip64_sizes=*/true));
  EXPECT_TRUE(model::read_ultralytics_pt(p64).state.at("model.0.weight").equal(w.state.at("model.0.weight")));
}

TEST(UltralyticsPt, NotAnArchive) {
  TempDir dir;
  expect_refused(dir.str("missing.pt"), "cannot open");
  expect_refused(dir.str(), "folder");
  const std::string p = dir.str("x.pt");
  put(p, "");
  expect_refused(p);
  EXPECT_FALSE(model::is_torch_zip(p));
  put(p, std::string("\x80\x02}q\x00.", 6));  // a bare pickle: torch.save before 1.6
  expect_refused(p, "not a PyTorch zip archive");
  put(p, lucid::testing::zip_stored({{"a/constants.pkl", "x"}, {"a/data.pkl", "x"}}));
  expect_refused(p, "TorchScript");
  put(p, lucid::testing::zip_stored({{"a/other", "x"}}));
  expect_refused(p, "without data.pkl");
  put(p, lucid::testing::zip_stored({{"a/data.pkl", "x"}, {"b/data.pkl", "x"}}));
  expect_refused(p, "more than one data.pkl");
  put(p, lucid::testing::zip_stored({{"a/data.pkl", "x"}, {"a/data.pkl", "x"}}));
  expect_refused(p, "appears twice");
  put(p, tiny_checkpoint(tiny_checkpoint_pickle(), "big"));
  expect_refused(p, "big-endian");
}

TEST(UltralyticsPt, TruncatedAtEveryLength) {
  TempDir dir;
  const std::string p = dir.str("t.pt");
  const std::string full = tiny_checkpoint(tiny_checkpoint_pickle());
  // Every third length, and every length of the last 200 bytes (the zip's end records).
  for (size_t n = 0; n < full.size(); n += n + 200 < full.size() ? 3 : 1) {
    put(p, full.substr(0, n));
    expect_refused(p);
  }
}

TEST(UltralyticsPt, CorruptedZipStructure) {
  TempDir dir;
  const std::string p = dir.str("z.pt");
  const std::string good = tiny_checkpoint(tiny_checkpoint_pickle());
  const uint64_t cd = find(good, "PK\x01\x02");
  const uint64_t end64 = find(good, "PK\x06\x06"), end = find(good, "PK\x05\x06");
  auto patched = [&](uint64_t at, uint64_t value, int n) {
    std::string s = good;
    for (int i = 0; i < n; ++i) s[at + i] = char((value >> (8 * i)) & 0xff);
    return s;
  };
  put(p, patched(cd, 0x12345678, 4));  // central directory signature
  expect_refused(p, "corrupt central directory");
  put(p, patched(end64 + 32, 1000000, 8));  // entry count beyond the directory
  expect_refused(p, "shorter than its entry count");
  put(p, patched(end64 + 48, 1ull << 62, 8));  // directory offset past the file
  expect_refused(p, "outside the file");
  put(p, patched(end64 + 40, ~0ull, 8));  // directory size wraps
  expect_refused(p, "outside the file");
  put(p, patched(end - 12, 1ull << 40, 8));  // zip64 locator pointing past the file
  expect_refused(p, "zip64 end record");
  put(p, patched(end, 0, 4));  // no end record
  expect_refused(p, "no zip end record");
  put(p, patched(cd + 10, 8, 2));  // deflated
  expect_refused(p, "compressed");
  put(p, patched(cd + 8, 1, 2));  // encrypted
  expect_refused(p, "encrypted");
  put(p, patched(cd + 42, 1ull << 31, 4));  // local header offset past the data
  expect_refused(p, "local header");
  put(p, patched(cd + 42, 5, 4));  // local header offset into another entry
  expect_refused(p, "local header");
  // The data.pkl entry's size runs past the file, as a 32-bit field and through a zip64 extra.
  put(p, patched(cd + 20, 0xfffffff0, 4));
  expect_refused(p, "differing");
  std::string s = patched(cd + 20, 0xfffffff0, 4);
  for (int i = 0; i < 4; ++i) s[cd + 24 + i] = char(0xf0 | (i ? 0xff : 0));
  put(p, s);
  expect_refused(p, "runs past");
  // The same through zip64 extra fields: a size past the file, and an extra field cut short.
  const std::string wide = tiny_checkpoint(tiny_checkpoint_pickle(), "little", true);
  const uint64_t extra = find(wide, std::string("\x01\x00\x10\x00", 4), find(wide, "PK\x01\x02"));
  s = wide;
  for (int k = 0; k < 2; ++k) s[extra + 4 + 8 * k + 5] = '\x01';  // both sizes + 2^40
  put(p, s);
  expect_refused(p, "runs past");
  s = wide;
  s[extra + 2] = 8;  // the field says 8 bytes: only one of the two sizes
  put(p, s);
  expect_refused(p, "short zip64 field");
  // A flipped byte in a storage: its CRC no longer matches.
  s = good;
  s[find(good, std::string("\x00\x3c\x01\x3c", 4))] ^= 1;
  put(p, s);
  expect_refused(p, "CRC-32");
}

TEST(UltralyticsPt, UnexpectedGlobalsAreRefused) {
  TempDir dir;
  const std::string p = dir.str("g.pt");
  for (auto [module, name] : std::vector<std::pair<std::string, std::string>>{{"os", "system"},
                                                                              {"posix", "system"},
                                                                              {"builtins", "eval"},
                                                                              {"__builtin__", "exec"},
                                                                              {"subprocess", "Popen"},
                                                                              {"torch", "load"},
                                                                              {"numpy", "load"},
                                                                              {"builtins", "__import__"}}) {
    PickleWriter call;
    call.global(module, name).str("touch /tmp/pwned").tuple_n(1).reduce();
    put(p, tiny_checkpoint(around_model(call.bytes())));
    expect_refused(p, "unsupported pickle global " + module + "." + name);
  }
  // Allowed names used outside their meaning.
  PickleWriter g;
  g.global("builtins", "getattr").global("os", "path");
  put(p, tiny_checkpoint(around_model(g.bytes())));
  expect_refused(p, "unsupported pickle global os.path");
  PickleWriter ga;
  ga.global("builtins", "getattr").str("x").str("__class__").tuple_n(2).reduce();
  put(p, tiny_checkpoint(around_model(ga.bytes())));
  expect_refused(p, "getattr other than of a module class");
  PickleWriter st;
  st.global("torch", "FloatStorage").tuple().reduce();
  put(p, tiny_checkpoint(around_model(st.bytes())));
  expect_refused(p, "cannot call torch.FloatStorage");
  PickleWriter bad;
  bad.global("os system", "x");
  put(p, tiny_checkpoint(around_model(bad.bytes())));
  expect_refused(p, "malformed pickle global");
  PickleWriter nonmodule;
  nonmodule.global("collections", "OrderedDict").tuple().newobj();
  put(p, tiny_checkpoint(around_model(nonmodule.bytes())));
  expect_refused(p, "NEWOBJ");
  // A module in 'model' that is not a module object.
  put(p, tiny_checkpoint(around_model(PickleWriter().str("not a model").bytes())));
  expect_refused(p, "not a model");
}

TEST(UltralyticsPt, UnknownAndMalformedOpcodes) {
  TempDir dir;
  const std::string p = dir.str("o.pt");
  for (const std::string& op : {std::string("i"), std::string("o"), std::string("S"), std::string("p"),
                                std::string("\x00", 1), std::string("\xff"), std::string("\x92"), std::string("P")}) {
    put(p, tiny_checkpoint(around_model(op)));
    expect_refused(p, "unsupported pickle opcode");
  }
  auto refuse = [&](const std::string& pickle, const std::string& fragment) {
    put(p, tiny_checkpoint(pickle));
    expect_refused(p, fragment);
  };
  refuse(std::string("\x80\x09}.", 4), "protocol");
  refuse("h\x05.", "memo entry 5");
  refuse("a.", "stack underflow");
  refuse("]]]]].", "left on the stack");
  refuse("K\x01K\x02u.", "no MARK");
  refuse("}(K\x01u.", "odd number");
  refuse(std::string("K\x00K\x01K\x02s.", 7), "SETITEM on a int");
  refuse("X\xff\xff\xff\xff", "ends early");  // a 4 GiB string in a tiny file
  refuse(std::string("\x8d\xff\xff\xff\xff\xff\xff\xff\x7f", 9), "ends early");
  refuse(std::string("\x8b\x00\x00\x00\x10", 5), "wider than 64 bits");
  refuse(std::string("X\x02\x00\x00\x00\xc3\x28.", 8), "not UTF-8");
  refuse("}]]s.", "unhashable");
  refuse("N", "ends early");  // no STOP
  refuse("K\x01.", "not a dict");
}

TEST(UltralyticsPt, TensorsMustFitTheirStorage) {
  TempDir dir;
  const std::string p = dir.str("s.pt");
  auto with_tensor = [&](const std::string& type, const std::string& key, int64_t numel, std::vector<int64_t> size,
                         std::vector<int64_t> stride, int64_t offset = 0) {
    PickleWriter m;
    m.module("ultralytics.nn.tasks", "SegmentationModel", [&](PickleWriter& w) {
      w.str("_parameters").dict().mark().str("w").tensor(type, key, numel, size, stride, offset).setitems();
      w.str("_buffers").dict().str("_modules").dict();
    });
    put(p, tiny_checkpoint(around_model(m.bytes())));
  };
  with_tensor("HalfStorage", "0", 6, {100, 100}, {100, 1});  // shape larger than the storage
  expect_refused(p, "needs 10000 elements");
  with_tensor("HalfStorage", "0", 6, {6}, {1}, 1);  // offset pushes it past the end
  expect_refused(p, "needs 7 elements");
  with_tensor("HalfStorage", "0", 6, {1000000, 1000000}, {0, 0});  // a broadcast view of 10^12 elements
  expect_refused(p, "more elements than its storage");
  with_tensor("HalfStorage", "0", 6, {int64_t{1} << 40, int64_t{1} << 40}, {1, 1});
  expect_refused(p, "larger than any file");
  with_tensor("HalfStorage", "0", int64_t{1} << 50, {6}, {1});  // declared storage larger than its entry
  expect_refused(p, "declares");
  with_tensor("FloatStorage", "0", 3, {3}, {1});  // 12 bytes of 4-byte floats over 12 bytes of data: reads
  EXPECT_EQ(model::read_ultralytics_pt(p).state.at("w").numel(), 3);
  with_tensor("DoubleStorage", "0", 1, {1}, {1});  // 12 bytes are not a whole number of doubles
  expect_refused(p, "declares");
  with_tensor("HalfStorage", "9", 6, {6}, {1});
  expect_refused(p, "lacks");
  with_tensor("HalfStorage", "0", 6, {2, 3}, {3});
  expect_refused(p, "size and stride differ");
  with_tensor("HalfStorage", "0", 6, {-1}, {1});
  expect_refused(p, "non-negative");
  PickleWriter badpid;
  badpid.mark().str("storage").global("torch", "QuantizedStorage").tuple_mark();
  put(p, tiny_checkpoint(around_model(badpid.bytes())));
  expect_refused(p, "unsupported pickle global torch.QuantizedStorage");
  PickleWriter shortpid;
  shortpid.mark().str("storage").tuple_mark().persid();
  put(p, tiny_checkpoint(around_model(shortpid.bytes())));
  expect_refused(p, "persistent id");
}

TEST(UltralyticsPt, DeepNestingAndCyclesAreBounded) {
  TempDir dir;
  const std::string p = dir.str("d.pt");
  // 200000 nested lists in train_args: refused, not a stack overflow, and freed without recursion.
  PickleWriter deep;
  deep.proto().dict().mark().str("train_args").dict().mark().str("x");
  for (int i = 0; i < 200000; ++i) deep.list();
  for (int i = 0; i < 199999; ++i) deep.append();
  deep.setitems().str("model").raw(empty_model());
  deep.setitems().stop();
  put(p, tiny_checkpoint(deep.bytes()));
  expect_refused(p, "nests too deep");
  // A list that holds itself.
  PickleWriter cycle;
  cycle.proto().dict().mark().str("train_args").dict().mark().str("x").list().put(1).get(1).append().setitems();
  cycle.str("model").raw(empty_model()).setitems().stop();
  put(p, tiny_checkpoint(cycle.bytes()));
  expect_refused(p, "nests too deep");
  // A module that is its own child.
  PickleWriter self;
  self.proto().dict().mark().str("model").global("ultralytics.nn.tasks", "SegmentationModel").tuple().newobj().put(1);
  self.dict().mark().str("_parameters").dict().str("_buffers").dict().str("_modules").dict().str("m").get(1).setitem();
  self.setitems().build().setitems().stop();
  put(p, tiny_checkpoint(self.bytes()));
  expect_refused(p, "modules nest too deep");
  // Modules 100 deep: beyond any real model.
  PickleWriter chain;
  chain.proto().dict().mark().str("model");
  for (int i = 0; i < 100; ++i)
    chain.global("torch.nn.modules.container", "Sequential")
        .tuple()
        .newobj()
        .dict()
        .mark()
        .str("_parameters")
        .dict()
        .str("_buffers")
        .dict()
        .str("_modules")
        .dict()
        .str("0");
  chain.none();
  for (int i = 0; i < 100; ++i) chain.setitem().setitems().build();
  chain.setitems().stop();
  put(p, tiny_checkpoint(chain.bytes()));
  expect_refused(p, "modules nest too deep");
}

TEST(UltralyticsPt, MalformedModuleContents) {
  TempDir dir;
  const std::string p = dir.str("m.pt");
  auto with_state = [&](const std::string& body) {
    PickleWriter m;
    m.global("ultralytics.nn.tasks", "SegmentationModel").tuple().newobj().dict().mark().raw(body).setitems().build();
    put(p, tiny_checkpoint(around_model(m.bytes())));
  };
  with_state(PickleWriter().str("_parameters").dict().str("_buffers").dict().bytes());
  expect_refused(p, "no _modules dict");
  with_state(PickleWriter()
                 .str("_parameters")
                 .dict()
                 .mark()
                 .str("w")
                 .integer(3)
                 .setitems()
                 .str("_buffers")
                 .dict()
                 .str("_modules")
                 .dict()
                 .bytes());
  expect_refused(p, "'w' is a int");
  with_state(PickleWriter()
                 .str("_parameters")
                 .dict()
                 .str("_buffers")
                 .dict()
                 .str("_modules")
                 .dict()
                 .mark()
                 .str("a")
                 .str("b")
                 .setitems()
                 .bytes());
  expect_refused(p, "not a torch module");
  with_state(PickleWriter()
                 .str("_parameters")
                 .dict()
                 .str("_buffers")
                 .dict()
                 .str("_modules")
                 .dict()
                 .str("names")
                 .dict()
                 .mark()
                 .integer(0)
                 .str("a")
                 .integer(5)
                 .str("b")
                 .setitems()
                 .bytes());
  expect_refused(p, "not indexed");
  with_state(PickleWriter()
                 .str("_parameters")
                 .dict()
                 .str("_buffers")
                 .dict()
                 .str("_modules")
                 .dict()
                 .str("yaml")
                 .str("yolo26n-seg.yaml")
                 .bytes());
  expect_refused(p, "not a dict");
  with_state(PickleWriter()
                 .str("_parameters")
                 .dict()
                 .str("_buffers")
                 .dict()
                 .str("_modules")
                 .dict()
                 .str("yaml")
                 .dict()
                 .mark()
                 .str("f")
                 .global("torch.nn.modules.conv", "Conv2d")
                 .setitems()
                 .bytes());
  expect_refused(p, "no plain-data form");
}

TEST(UltralyticsPt, PlainValuesInTrainArgs) {
  TempDir dir;
  const std::string p = dir.str("v.pt");
  PickleWriter a;
  a.proto().dict().mark().str("model").raw(empty_model()).str("train_args").dict().mark();
  // numpy.float64(0.125) as protocol 2 writes it: scalar(dtype('f8'), _codecs.encode(latin1 text)).
  a.str("f8").global("numpy._core.multiarray", "scalar").global("numpy", "dtype").str("f8").boolean(false);
  a.boolean(true).tuple_n(3).reduce().mark().integer(3).str("<").none().none().none().integer(-1).integer(-1);
  a.integer(0).tuple_mark().build().global("_codecs", "encode").str(std::string("\0\0\0\0\0\0\xc3\x80?", 9));
  a.str("latin1").tuple_n(2).reduce().tuple_n(2).reduce();
  a.str("path").global("pathlib", "PosixPath").mark().str("/").str("data").str("x.yaml").tuple_mark().reduce();
  a.str("big").integer(int64_t{1} << 40).str("neg").integer(-(int64_t{1} << 40)).str("half").real(0.5);
  a.str("size").global("torch", "Size").mark().integer(2).integer(3).tuple_mark().tuple_n(1).reduce();
  a.str("array").global("numpy._core.multiarray", "_reconstruct").global("numpy", "ndarray").tuple();
  a.tuple_n(2).reduce().setitems().setitems().stop();
  put(p, tiny_checkpoint(a.bytes()));
  try {
    model::read_ultralytics_pt(p);
    ADD_FAILURE() << "an opaque numpy array became plain data";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("train_args 'array' holds a numpy"), std::string::npos) << e.what();
  }
  // Without the array every value has its plain form.
  std::string bytes = a.bytes();
  const size_t cut = bytes.find(std::string("X\x05\x00\x00\x00", 5) + "array");
  ASSERT_NE(cut, std::string::npos);
  bytes = bytes.substr(0, cut) + "uu.";
  put(p, tiny_checkpoint(bytes));
  EXPECT_EQ(model::read_ultralytics_pt(p).train_args,
            nlohmann::json::parse(R"({"f8":0.125,"path":"/data/x.yaml","big":1099511627776,"neg":-1099511627776,)"
                                  R"("half":0.5,"size":[2,3]})"));
}

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lucid/model/depthwise.h"
#include "lucid/model/model.h"
#include "lucid/model/safetensors.h"
#include "lucid/optim/ema.h"
#include "lucid/util/error.h"

using namespace lucid;

namespace {

struct Expected {
  const char* name;
  int64_t layers, parameters, gradients;
};

// The reference package's (ultralytics 8.4.190) summaries at nc=80.
const Expected kExpected[] = {
    {"yolo26n-seg", 309, 3126280, 3126280},   {"yolo26s-seg", 309, 11505800, 11505800},
    {"yolo26m-seg", 329, 27112072, 27112072}, {"yolo26l-seg", 441, 31515528, 31515528},
    {"yolo26x-seg", 441, 70693800, 70693800}, {"yolo11n-seg", 203, 2876848, 2876832},
    {"yolo11s-seg", 203, 10113248, 10113232}, {"yolo11m-seg", 253, 22420896, 22420880},
    {"yolo11l-seg", 379, 27678368, 27678352}, {"yolo11x-seg", 379, 62142656, 62142640},
    {"yolov8n-seg", 151, 3409968, 3409952},   {"yolov8s-seg", 151, 11821056, 11821040},
    {"yolov8m-seg", 191, 27285968, 27285952}, {"yolov8l-seg", 231, 45997728, 45997712},
    {"yolov8x-seg", 231, 71827888, 71827872},
};

int64_t count(const torch::nn::Module& m, bool trainable_only) {
  int64_t n = 0;
  for (const auto& p : m.parameters())
    if (!trainable_only || p.requires_grad()) n += p.numel();
  return n;
}

}  // namespace

class ModelScales : public ::testing::TestWithParam<Expected> {};

TEST_P(ModelScales, ParameterGradientAndLayerCountsMatchReference) {
  const auto& e = GetParam();
  model::SegmentationModel m(config::load_model_spec(std::string(e.name) + ".yaml"));
  EXPECT_EQ(count(*m, false), e.parameters);
  EXPECT_EQ(count(*m, true), e.gradients);
  EXPECT_EQ(m->layer_count(), e.layers);
}

INSTANTIATE_TEST_SUITE_P(AllScales, ModelScales, ::testing::ValuesIn(kExpected), [](const auto& info) {
  std::string n = info.param.name;
  for (auto& c : n)
    if (c == '-') c = '_';
  return n;
});

TEST(ModelSummary, NanoSummaryLinesMatchReferenceFormat) {
  // GFLOPs as the reference package computes them (thop rules, 640 px, training-mode forward).
  const std::vector<std::pair<std::string, std::string>> cases{
      {"yolo26n-seg", "YOLO26n-seg summary: 309 layers, 3,126,280 parameters, 3,126,280 gradients, 10.6 GFLOPs"},
      {"yolo11n-seg", "YOLO11n-seg summary: 203 layers, 2,876,848 parameters, 2,876,832 gradients, 10.0 GFLOPs"},
      {"yolov8n-seg", "YOLOv8n-seg summary: 151 layers, 3,409,968 parameters, 3,409,952 gradients, 12.1 GFLOPs"},
  };
  for (const auto& [name, line] : cases) {
    model::SegmentationModel m(config::load_model_spec(name + ".yaml"));
    EXPECT_EQ(model::format_summary(*m, m->summary(640)), line);
  }
}

TEST(ModelShapes, Yolo26nTrainingOutputs) {
  model::SegmentationModel m(config::load_model_spec("yolo26n-seg.yaml", 3));
  EXPECT_EQ(m->strides(), (std::vector<double>{8, 16, 32}));
  auto out = m->forward(torch::rand({2, 3, 128, 160}));
  const int64_t A = 16 * 20 + 8 * 10 + 4 * 5;
  EXPECT_EQ(out.one2many.boxes.sizes(), (std::vector<int64_t>{2, 4, A}));  // reg_max 1
  EXPECT_EQ(out.one2many.scores.sizes(), (std::vector<int64_t>{2, 3, A}));
  EXPECT_EQ(out.one2many.mask_coefficient.sizes(), (std::vector<int64_t>{2, 32, A}));
  EXPECT_EQ(out.one2many.proto.sizes(), (std::vector<int64_t>{2, 32, 32, 40}));
  EXPECT_EQ(out.one2many.semantic.sizes(), (std::vector<int64_t>{2, 3, 16, 20}));
  ASSERT_TRUE(out.one2one.has_value());
  EXPECT_FALSE(out.one2one->proto.requires_grad());
  EXPECT_TRUE(out.one2many.proto.requires_grad());
}

TEST(ModelShapes, SharedAndHeadsComposeToForward) {
  torch::manual_seed(3);
  model::SegmentationModel m(config::load_model_spec("yolo11n-seg.yaml", 2));
  m->eval();
  torch::NoGradGuard no_grad;
  auto x = torch::rand({1, 3, 96, 128});
  auto a = m->forward(x);
  auto b = m->heads(m->shared(x));
  EXPECT_TRUE(torch::equal(a.one2many.scores, b.one2many.scores));
  EXPECT_FALSE(a.one2one.has_value());
  auto y = m->decode(a);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{1, 4 + 2 + 32, 12 * 16 + 6 * 8 + 3 * 4}));
}

TEST(ModelShapes, EndToEndDecodeKeepsTopK) {
  model::SegmentationModel m(config::load_model_spec("yolo26n-seg.yaml", 5));
  m->eval();
  torch::NoGradGuard no_grad;
  auto y = m->decode(m->forward(torch::rand({2, 3, 64, 64})), 10);
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 10, 6 + 32}));
  auto scores = y.select(2, 4);
  EXPECT_TRUE(torch::all(scores.slice(1, 0, 9) >= scores.slice(1, 1, 10)).item<bool>());
}

TEST(ModelInit, BiasInitFollowsReference) {
  model::SegmentationModel m(config::load_model_spec("yolo26n-seg.yaml"));
  auto sd = model::state_dict(*m);
  std::map<std::string, torch::Tensor> byname(sd.begin(), sd.end());
  EXPECT_NEAR(byname.at("model.23.cv3.0.2.bias")[0].item<double>(), -11.5366, 1e-4);
  EXPECT_NEAR(byname.at("model.23.one2one_cv3.2.2.bias")[0].item<double>(), -8.7641, 1e-4);
  EXPECT_EQ(byname.at("model.23.cv2.1.2.bias")[0].item<double>(), 2.0);
  // The one-to-one branch starts as a copy of the one-to-many branch.
  EXPECT_TRUE(
      torch::equal(byname.at("model.23.cv4.0.0.conv.weight"), byname.at("model.23.one2one_cv4.0.0.conv.weight")));
  EXPECT_DOUBLE_EQ(m->named_modules()["model.0.bn"]->as<torch::nn::BatchNorm2d>()->options.eps(), 1e-3);
}

// The EMA copies the source's layout (channels_last kernels, as CUDA training stores them), so the
// blend's two lists share strides and take the multi-tensor kernels; the values are the blend's.
TEST(ModelEma, TakesTheSourcesLayoutAndBlendsElementwise) {
  model::SegmentationModel m(config::load_model_spec("yolo26n-seg.yaml", 2));
  model::use_channels_last(*m);
  optim::ModelEMA ema(m);
  auto src = optim::float_state(*m);
  auto dst = optim::float_state(*ema.model());
  ASSERT_EQ(src.size(), dst.size());
  int64_t channels_last = 0;
  std::vector<torch::Tensor> before;
  for (size_t i = 0; i < src.size(); ++i) {
    EXPECT_EQ(src[i].strides(), dst[i].strides()) << i;
    EXPECT_TRUE(torch::equal(src[i], dst[i])) << i;
    channels_last += src[i].dim() == 4 && !src[i].is_contiguous();
    before.push_back(dst[i].contiguous().clone());
  }
  EXPECT_GT(channels_last, 0);
  {
    torch::NoGradGuard no_grad;
    for (auto& t : src) t.add_(torch::randn_like(t));
  }
  ema.update(m);
  const double d = 0.9999 * (1 - std::exp(-1.0 / 2000));
  const auto keep = torch::tensor(static_cast<float>(d)), take = torch::tensor(static_cast<float>(1 - d));
  for (size_t i = 0; i < src.size(); ++i)
    EXPECT_TRUE(torch::equal(dst[i], before[i] * keep + src[i].contiguous() * take)) << i;
}

TEST(ModelYaml, ScaleFromNameAndErrors) {
  EXPECT_EQ(config::guess_scale("yolo26n-seg"), "n");
  EXPECT_EQ(config::guess_scale("yolov8x-seg"), "x");
  EXPECT_EQ(config::load_model_spec("yolo11m-seg.yaml").width, 1.0);
  EXPECT_THROW(config::load_model_spec("nope-seg.yaml"), UserError);

  auto dir = std::filesystem::temp_directory_path() / "lucid_yaml_test";
  std::filesystem::create_directories(dir);
  auto bad = (dir / "bad.yaml").string();
  std::ofstream(bad) << "nc: 3\nbackbone:\n  - [-1, 1, Conv, [16, 3, 2]]\n  - [-1, 1, Frobnicate, [3]]\nhead: []\n";
  try {
    model::SegmentationModel m(config::load_model_spec(bad));
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.yaml:4"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Frobnicate"), std::string::npos) << e.what();
  }
  // A layer without its arguments, an empty 'from', zero repeats, an absurd nc: the file and line,
  // not a library's message (vector::_M_range_insert, bad_alloc).
  const std::vector<std::pair<std::string, std::string>> cases{
      {"nc: 3\nbackbone:\n  - [-1, 1, Conv, []]\nhead: []\n",
       "bad.yaml:3: Conv: the first argument is the output channel"},
      {"nc: 3\nbackbone:\n  - [[], 1, Conv, [16]]\nhead: []\n", "bad.yaml:3: 'from'"},
      {"nc: 3\nbackbone:\n  - [-1, 0, Conv, [16]]\nhead: []\n", "bad.yaml:3: repeats"},
      {"nc: 1000000000\nbackbone:\n  - [-1, 1, Conv, [16]]\nhead: []\n", "bad.yaml: nc must be from 1 to"}};
  for (const auto& [text, want] : cases) {
    std::ofstream(bad) << text;
    try {
      model::SegmentationModel m(config::load_model_spec(bad));
      ADD_FAILURE() << "expected an error for " << text;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

TEST(Safetensors, RoundTripAndStrictLoad) {
  torch::manual_seed(1);
  model::SegmentationModel a(config::load_model_spec("yolov8n-seg.yaml", 4));
  auto path = (std::filesystem::temp_directory_path() / "lucid_st_test.safetensors").string();
  model::write_safetensors(path, model::state_dict(*a));
  torch::manual_seed(2);
  model::SegmentationModel b(config::load_model_spec("yolov8n-seg.yaml", 4));
  model::load_state(*b, model::read_safetensors(path), path);
  auto sa = model::state_dict(*a), sb = model::state_dict(*b);
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) EXPECT_TRUE(torch::equal(sa[i].second, sb[i].second)) << sa[i].first;

  model::SegmentationModel c(config::load_model_spec("yolov8n-seg.yaml", 5));  // other nc: shapes differ
  EXPECT_THROW(model::load_state(*c, model::read_safetensors(path), path), UserError);
  std::ofstream(path, std::ios::binary) << "garbage";
  EXPECT_THROW(model::read_safetensors(path), UserError);
}

// lucid's depthwise kernels are CUDA only: on the CPU a Conv block runs LibTorch's convolution
// whether the kernels are switched on or not, so CPU results never depend on the switch.
TEST(DepthwiseRouting, CpuConvolutionsNeverTakeTheKernels) {
  const auto was = model::depthwise_kernels_on();
  auto block = model::DWConv(16, 16, 3);
  const auto x = torch::randn({2, 16, 8, 8});
  model::set_depthwise_kernels(true);
  EXPECT_FALSE(model::takes_depthwise_kernel(*block->conv, x));
  const auto on = block(x);
  model::set_depthwise_kernels(false);
  EXPECT_TRUE(torch::equal(on, block(x)));
  model::set_depthwise_kernels(was);
}

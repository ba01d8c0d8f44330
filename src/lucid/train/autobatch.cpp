#include "lucid/train/autobatch.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>

#include "lucid/model/model.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"

namespace lucid::engine {

namespace {
constexpr double kGib = 1024.0 * 1024.0 * 1024.0;
constexpr int64_t kDefaultBatch = 16;  // the reference's DEFAULT_CFG.batch
constexpr int64_t kMaxAutoBatch = 1024;
}  // namespace

std::vector<int64_t> probe_batch_sizes(double total_gib, int64_t dataset_size) {
  std::vector<int64_t> sizes =
      total_gib < 16 ? std::vector<int64_t>{1, 2, 4, 8, 16} : std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64};
  if (dataset_size > 0) std::erase_if(sizes, [&](int64_t b) { return b > dataset_size; });
  return sizes;
}

int64_t choose_batch(const std::vector<BatchProbe>& probes, double total_gib, double available_gib, double fraction,
                     int64_t dataset_size) {
  std::vector<double> xs, ys;
  for (size_t i = 0; i < probes.size(); ++i) {
    const auto& y = probes[i].gib;
    if (!y || !(*y > 0 && *y < total_gib)) continue;
    if (i > 0 && probes[i - 1].gib && !(*y > *probes[i - 1].gib)) continue;
    xs.push_back(static_cast<double>(probes[i].batch));
    ys.push_back(*y);
  }
  if (xs.empty()) {
    std::string sizes;
    for (const auto& p : probes) sizes += (sizes.empty() ? "" : ",") + std::to_string(p.batch);
    throw UserError("AutoBatch: no usable batch size found while profiling batch=[" + sizes +
                    "]; free GPU memory, reduce imgsz, or set batch explicitly");
  }
  // numpy.polyfit(deg=1): least squares on the columns [x, 1] scaled to unit norm; with one point
  // the minimum-norm solution of that scaled system.
  double p0 = 0, p1 = 0;
  const double n = static_cast<double>(xs.size());
  if (xs.size() == 1) {
    p0 = ys[0] / (2 * std::abs(xs[0])) * (xs[0] < 0 ? -1 : 1);
    p1 = ys[0] / 2;
  } else {
    double sx = 0, sy = 0;
    for (size_t i = 0; i < xs.size(); ++i) sx += xs[i], sy += ys[i];
    const double mx = sx / n, my = sy / n;
    double sxx = 0, sxy = 0;
    for (size_t i = 0; i < xs.size(); ++i) sxx += (xs[i] - mx) * (xs[i] - mx), sxy += (xs[i] - mx) * (ys[i] - my);
    p0 = sxy / sxx;
    p1 = my - p0 * mx;
  }
  const double raw = (available_gib * fraction - p1) / p0;
  // int() of the reference truncates; a value beyond every batch size is clamped below anyway.
  int64_t b = std::isfinite(raw) ? static_cast<int64_t>(std::clamp(raw, -1e9, 1e9)) : kMaxAutoBatch;
  for (size_t i = 0; i < probes.size(); ++i)
    if (!probes[i].gib && static_cast<double>(probes[i].batch) > xs[0]) {
      if (b >= probes[i].batch) b = probes[i - 1].batch;  // the first failure above a success is the ceiling
      break;
    }
  b = std::min<int64_t>(std::max<int64_t>(b, static_cast<int64_t>(xs[0])), kMaxAutoBatch);
  if (dataset_size > 0) b = std::min(b, dataset_size);
  return b;
}

double loss_memory_gib(int64_t batch, int64_t anchors, int64_t max_num_obj, int64_t nc) {
  return static_cast<double>(batch) * static_cast<double>(anchors) * 6.0 * static_cast<double>(max_num_obj + 2 * nc) *
         4.0 / kGib;
}

int64_t auto_batch(const AutoBatchRequest& r) {
  std::printf("AutoBatch: Computing optimal batch size for imgsz=%lld at %g%% GPU memory utilization.\n",
              static_cast<long long>(r.imgsz), r.fraction * 100);
  if (!r.device.is_cuda()) {
    std::fprintf(stderr, "warning: AutoBatch: intended for GPU devices, using default batch-size %lld\n",
                 static_cast<long long>(kDefaultBatch));
    return kDefaultBatch;
  }
  const int index = r.device.has_index() ? r.device.index() : 0;
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index));
  c10::cuda::CUDACachingAllocator::emptyCache();
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)
    throw UserError("AutoBatch: cannot read the memory of " + r.device.str());
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, index);
  const double t = static_cast<double>(total_bytes) / kGib;
  const double reserved = util::cuda_memory(index).reserved_mib / 1024.0;
  const double f = reserved + static_cast<double>(free_bytes) / kGib;
  std::printf("AutoBatch: CUDA:%d (%s) %.2fG total, %.2fG reserved, %.2fG available\n", index, prop.name, t, reserved,
              f);

  model::SegmentationModel model(r.spec);
  model->to(r.device);
  model->train();
  model::use_channels_last(*model);
  int64_t anchors = 0;
  for (double s : model->strides()) anchors += static_cast<int64_t>((r.imgsz / s) * (r.imgsz / s));
  const auto sizes = probe_batch_sizes(t, r.dataset_size);
  std::vector<BatchProbe> probes;
  std::printf("%14s%14s\n", "batch", "GPU_mem (GiB)");
  for (const int64_t b : sizes) {
    BatchProbe p{b, std::nullopt};
    try {
      c10::cuda::CUDACachingAllocator::emptyCache();
      {
        auto x = torch::empty({b, 3, r.imgsz, r.imgsz}, torch::TensorOptions().device(r.device))
                     .contiguous(at::MemoryFormat::ChannelsLast)
                     .requires_grad_(true);
        util::Autocast autocast(r.amp);
        auto out = model->forward(x);
        // The reference backpropagates the sum of every output tensor.
        torch::Tensor total = torch::zeros({}, x.options().dtype(torch::kFloat));
        auto add = [&](const model::BranchOutputs& br) {
          for (const auto* t_out : {&br.boxes, &br.scores, &br.mask_coefficient, &br.proto, &br.semantic})
            if (t_out->defined()) total = total + t_out->sum().to(torch::kFloat);
        };
        add(out.one2many);
        if (out.one2one) add(*out.one2one);
        total.backward();
        c10::cuda::device_synchronize();
      }
      p.gib = util::cuda_memory(index).reserved_mib / 1024.0;
      if (r.max_num_obj > 0) *p.gib += loss_memory_gib(b, anchors, r.max_num_obj, r.spec.nc);
      std::printf("%14lld%14.3f\n", static_cast<long long>(b), *p.gib);
    } catch (const c10::OutOfMemoryError&) {
      std::printf("%14lld%14s\n", static_cast<long long>(b), "out of memory");
    }
    model->zero_grad();
    probes.push_back(p);
  }
  model = nullptr;
  c10::cuda::CUDACachingAllocator::emptyCache();
  const int64_t b = choose_batch(probes, t, f, r.fraction, r.dataset_size);
  std::printf("AutoBatch: Using batch-size %lld for CUDA:%d\n", static_cast<long long>(b), index);
  return b;
}

}  // namespace lucid::engine

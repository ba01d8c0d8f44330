#include "lucid/train/batch_upload.h"

#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <array>

namespace lucid::engine {

struct BatchUpload::Buffers {
  struct Buffer {
    torch::Tensor memory;
    at::cuda::CUDAEvent copied, read;  // on the copy stream after the copy; on the compute stream after its reader
  };
  explicit Buffers(const torch::Device& device) : stream(c10::cuda::getStreamFromPool(false, device.index())) {}
  c10::cuda::CUDAStream stream;
  std::array<Buffer, 2> turn;
  size_t last = 1;
};

BatchUpload::BatchUpload(const torch::Device& device)
    : device_(torch::kCUDA, device.has_index() ? device.index() : c10::cuda::current_device()),
      buffers_(std::make_unique<Buffers>(device_)) {}

BatchUpload::~BatchUpload() = default;

torch::Tensor BatchUpload::operator()(const torch::Tensor& host) {
  auto& b = *buffers_;
  b.last ^= 1;
  auto& buffer = b.turn[b.last];
  const auto compute = c10::cuda::getCurrentCUDAStream(device_.index());
  if (!buffer.memory.defined() || buffer.memory.sizes() != host.sizes() || buffer.memory.dtype() != host.dtype()) {
    buffer.memory = torch::empty(host.sizes(), torch::TensorOptions().dtype(host.dtype()).device(device_));
    // The allocator hands out blocks in the compute stream's order: work queued there before may
    // still use this one.
    buffer.read.record(compute);
  }
  const auto source = host.is_pinned() ? host : host.pin_memory();
  {
    // The copy is current on the copy stream, so the pinned host block is held until it has run.
    c10::cuda::CUDAStreamGuard on_copy_stream(b.stream);
    buffer.read.block(b.stream);
    buffer.memory.copy_(source, /*non_blocking=*/true);
    buffer.copied.record(b.stream);
  }
  buffer.copied.block(compute);
  return buffer.memory;
}

void BatchUpload::read() {
  auto& b = *buffers_;
  b.turn[b.last].read.record(c10::cuda::getCurrentCUDAStream(device_.index()));
}

}  // namespace lucid::engine

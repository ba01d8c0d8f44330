// Pixel resampling of uint8 HWC images with the arithmetic of the OpenCV the reference pipeline runs
// (opencv-python 5.0), so that our pixels equal its pixels (or differ by a grey level in rare ties):
//   resize_linear   cv2.resize(INTER_LINEAR) on tensors (the arithmetic of resize.h)
//   warp_affine     cv2.warpAffine(INTER_LINEAR, BORDER_CONSTANT): inverse map and bilinear weights in
//                   single precision with fused multiply-adds (OpenCV >= 4.11 warp kernels, AVX2 lane
//                   layout), neighbours outside the source = border, rounded half to even
//   warp_perspective  the same for a 3x3 homography (cv2.warpPerspective)
// Images are torch uint8 tensors (H, W, C), contiguous, on the CPU.
#pragma once
#include <torch/torch.h>

#include <array>
#include <cstdint>

namespace lucid::data {

using Matrix3 = std::array<double, 9>;  // row-major 3x3

torch::Tensor resize_linear(const torch::Tensor& image, int out_height, int out_width);

// Prepared-image resize of the reference dataset: long side to `imgsz` keeping the aspect ratio
// (r = imgsz / max(h, w), new side = min(ceil(side * r), imgsz)), bilinear; unchanged when r == 1.
torch::Tensor resize_long_side(const torch::Tensor& image, int imgsz);

// Output pixel (x, y) samples the source at M^-1 (x, y) (M maps source to output pixels, as the
// `M` argument of cv2.warpAffine without WARP_INVERSE_MAP). Only the first two rows of M are used.
torch::Tensor warp_affine(const torch::Tensor& image, const Matrix3& M, int out_height, int out_width,
                          uint8_t border = 114);
torch::Tensor warp_perspective(const torch::Tensor& image, const Matrix3& M, int out_height, int out_width,
                               uint8_t border = 114);

// The source pixels warp_affine reads, as [x0, x1) x [y0, y1) = {x0, y0, x1, y1} within the
// ih x iw source (empty: all zeros): without rotation or shear the exact rectangle, else the whole
// source. Pixels outside it may hold anything without changing the output.
std::array<int, 4> warp_affine_source_window(const Matrix3& M, int ih, int iw, int out_height, int out_width);

namespace detail {
// OpenCV's (>= 4.11) AVX2 warp kernels process 16 output pixels per vector step; the last
// `width % 16` pixels of a row take a scalar path that computes the affine source position in
// another order.
constexpr int kWarpLanes = 16;

// The inverse map warp_affine (perspective false: rows 0-1, row 2 = 0 0 1) or warp_perspective
// samples the source with, computed in double and held in single precision as OpenCV does.
std::array<float, 9> inverse_map(const Matrix3& M, bool perspective);

// warp_affine computed pixel by pixel, without the fast path for maps without rotation or shear:
// the definition that path must reproduce byte for byte.
torch::Tensor warp_affine_pointwise(const torch::Tensor& image, const Matrix3& M, int out_height, int out_width,
                                    uint8_t border = 114);
// Tests: turns the AVX2 loops of warp_affine off (false) or back on where the CPU has them; returns
// the previous setting. Not thread-safe.
bool set_warp_simd(bool on);
}  // namespace detail

// Horizontal / vertical mirror of an (H, W, C) image.
torch::Tensor flip_image(const torch::Tensor& image, bool horizontal);

}  // namespace lucid::data

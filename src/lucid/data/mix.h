// The augmentations that mix a training sample with instances or pixels from elsewhere, with the
// reference trainer's semantics (ultralytics.data.augment CopyPaste, MixUp, CutMix):
//   copy_paste  pastes instances (their polygon's pixels and their labels) that overlap the sample's
//               own instances by an IoA below 0.30: in `flip` mode mirrored copies of its own, in
//               `mixup` mode a partner sample's; the fraction `copy_paste` of the eligible ones, fewest
//               overlaps first
//   mixup       blends the image with a partner's, weight r ~ Beta(32, 32), and keeps both instance sets
//   cutmix      copies a rectangle of a partner's image that overlaps none of the sample's boxes, with
//               the partner's instances that reach into it (clipped to it)
// The functions here take their random draws as arguments (the pipeline draws them from the sample's
// streams, augment.cpp); draw_* make them from a stream in the reference's order.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "lucid/data/sample.h"

namespace lucid::data {

enum class CopyPasteMode { Flip, MixUp };

// bbox_ioa: intersection over the area of `b` (+ 1e-7), in single precision as the reference.
float box_ioa(const Box& a, const Box& b);

// ---- Copy-paste ------------------------------------------------------------------------------------
// The reference acts only on images with polygons (instance segments).
bool has_polygons(const SampleInstances& in);

// The candidates to paste: those whose box overlaps every box of `target` by an IoA below 0.30 (IoA
// over the target box), ordered by their largest IoA ascending (ties in candidate order; the
// reference's np.argsort leaves their order to its sort implementation), the first round(p * count)
// (half to even, Python's round).
std::vector<int64_t> copy_paste_selection(const SampleInstances& target, const SampleInstances& candidates, double p);

// Pastes the selected candidates into `s`: each one's polygon filled (vertices truncated, as
// cv2.drawContours FILLED) into one mask, `source` (same size as s.image) copied under the mask, the
// selected instances appended in selection order.
void paste_instances(Sample& s, const torch::Tensor& source, const SampleInstances& candidates,
                     const std::vector<int64_t>& selected);

// `flip` mode: the candidates are the sample's instances mirrored (x -> W - x), the source its image
// mirrored. Without polygons nothing changes.
void copy_paste_flip(Sample& s, double p);

// `mixup` mode: the candidates are `partner`'s instances, the source its image (same size).
void copy_paste_partner(Sample& s, const Sample& partner, double p);

struct PartnerDraw {
  bool apply = false;
  int64_t partner = 0;  // dataset index of the partner image
};
// copy_paste mixup mode: applies when U(0, 1) <= p (the reference's BaseMixTransform), then the partner
// index uniform over the dataset.
PartnerDraw draw_partner(SampleRng& rng, double p, int64_t dataset_size);

// ---- MixUp -----------------------------------------------------------------------------------------
struct MixUpDraw {
  PartnerDraw partner;
  double r = 0.5;  // weight of the sample's own image
};
MixUpDraw draw_mixup(SampleRng& rng, double p, int64_t dataset_size);

// image = uint8(image * r + partner * (1 - r)) in double precision (truncated, numpy's astype), the
// partner's instances appended.
void mixup(Sample& s, const Sample& partner, double r);

// ---- CutMix ----------------------------------------------------------------------------------------
using Rect = std::array<int, 4>;  // x1, y1, x2, y2

// The reference's _rand_bbox: cut = sqrt(1 - lam) of each side (truncated), centre (cx, cy), clipped.
Rect cutmix_rect(int width, int height, double lam, int cx, int cy);

struct CutMixDraw {
  PartnerDraw partner;
  std::array<Rect, 3> areas{};  // the candidate rectangles
  uint64_t choice_bits = 0;     // picks one of the usable areas (choose_area)
};
// Draws apply and partner as draw_partner, then per area lam ~ Beta(1, 1), cx in [0, width), cy in
// [0, height), then the choice.
CutMixDraw draw_cutmix(SampleRng& rng, double p, int64_t dataset_size, int width, int height);
// Uniform position in [0, n) from the choice bits (n > 0).
int64_t choose_area(uint64_t bits, int64_t n);

// CutMix with the areas drawn: the usable areas are those overlapping no box of `s`; without one, or
// when no partner box overlaps the chosen area by an IoA (over the partner box) of at least 0.01
// (0.1 when `s` has no polygons), nothing changes. Else the area's pixels come from the partner and
// the partner's instances that reach it are appended, boxes and polygons clipped to the area.
// `choose(n)` picks the area among the n usable ones. Returns whether the sample changed.
bool cutmix(Sample& s, const Sample& partner, const std::array<Rect, 3>& areas,
            const std::function<int64_t(int64_t)>& choose);

// ---- Random variates -------------------------------------------------------------------------------
// Beta(a, b) as X / (X + Y) with X ~ Gamma(a), Y ~ Gamma(b) (Marsaglia-Tsang, a, b >= 1, normals by
// Box-Muller): the reference's distribution, from the sample's own stream.
double draw_beta(SampleRng& rng, double a, double b);

}  // namespace lucid::data

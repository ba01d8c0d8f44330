// The assigner on CUDA: the fused kernels (loss/assigner_cuda.h) give the bytes of the dense tensor
// form on the same inputs, for the one-to-many (top-10) and one-to-one (top-7 then top-1) settings,
// with and without the mask-aware overlap, with padding slots, small GTs that get widened, identical
// GTs (every shared anchor a conflict, resolved on a tie) and an image without GTs; without a host
// synchronisation, and the same bytes on a second run.
#include <gtest/gtest.h>

#include "sync_counter.h"

#include "lucid/loss/assigner.h"

using namespace lucid;
using torch::Tensor;

namespace {

struct Case {
  Tensor scores, boxes, points, labels, gt_boxes, valid;
  loss::MaskQuality mq;
};

// B images of S x S pixels, anchors of strides 8, 16 and 32, M GT slots, nc classes.
Case make_case(int64_t B, int64_t S, int64_t M, int64_t nc, uint64_t seed) {
  torch::manual_seed(seed);
  const auto f = torch::TensorOptions().dtype(torch::kFloat).device(torch::kCUDA);
  std::vector<Tensor> pts;
  for (int64_t s : {8, 16, 32}) {
    auto c = torch::arange(S / s, f) * s + s / 2.0;
    auto grid = torch::meshgrid({c, c}, "ij");
    pts.push_back(torch::stack({grid[1].flatten(), grid[0].flatten()}, -1));
  }
  Case k;
  k.points = torch::cat(pts, 0).contiguous();
  const int64_t A = k.points.size(0);
  k.scores = torch::rand({B, A, nc}, f).contiguous();
  // Predicted boxes around their anchors, 4 to 120 pixels on a side.
  auto half = torch::rand({B, A, 2}, f) * 58 + 2;
  auto centre = k.points.unsqueeze(0) + (torch::rand({B, A, 2}, f) - 0.5) * 16;
  k.boxes = torch::cat({centre - half, centre + half}, -1).contiguous();
  // GT boxes: large, and small (under the 16-pixel stride, widened).
  auto xy = torch::rand({B, M, 2}, f) * (S - 40);
  auto wh = torch::where(torch::rand({B, M, 1}, f) < 0.3, torch::rand({B, M, 2}, f) * 12 + 2,
                         torch::rand({B, M, 2}, f) * (S / 2.0) + 16);
  k.gt_boxes = torch::cat({xy, (xy + wh).clamp_max(S)}, -1);
  k.gt_boxes[0][1] = k.gt_boxes[0][0].clone();  // identical GTs: every anchor they share is a conflict
  k.gt_boxes = k.gt_boxes.contiguous();
  k.labels = torch::randint(0, nc, {B, M, 1}, f);
  k.valid = (torch::rand({B, M, 1}, f) < 0.7).to(torch::kFloat);
  k.valid[0][0][0] = 1, k.valid[0][1][0] = 1;
  if (B > 2) k.valid[2].zero_();  // an image without GTs
  k.gt_boxes = k.gt_boxes * k.valid;
  // Mask quality at prototype resolution S / 4.
  const int64_t h = S / 4, nm = 32;
  k.mq.coefs = torch::randn({B, A, nm}, f);
  k.mq.proto = torch::randn({B, nm, h, h}, f);
  k.mq.gt_masks = torch::rand({B, M, h, h}, f) > 0.5;
  k.mq.scale = 0.25f;
  return k;
}

void expect_same(const loss::Assignment& got, const loss::Assignment& want, const std::string& what) {
  EXPECT_TRUE(torch::equal(got.fg_mask, want.fg_mask))
      << what << ": fg_mask, " << got.fg_mask.sum().item<int64_t>() << " vs " << want.fg_mask.sum().item<int64_t>();
  EXPECT_TRUE(torch::equal(got.target_gt_idx, want.target_gt_idx)) << what << ": target_gt_idx";
  EXPECT_TRUE(torch::equal(got.target_labels, want.target_labels)) << what << ": target_labels";
  EXPECT_TRUE(torch::equal(got.target_bboxes, want.target_bboxes)) << what << ": target_bboxes";
  EXPECT_TRUE(torch::equal(got.target_scores, want.target_scores))
      << what << ": target_scores, max diff " << (got.target_scores - want.target_scores).abs().max().item<float>();
}

// The one-to-many (top-10) or one-to-one (top-7 then top-1) assigner over 5 classes.
loss::TaskAlignedAssigner assigner_for(bool o2o) {
  loss::AssignerOptions o;
  o.num_classes = 5;
  if (o2o) o.topk = 7, o.topk2 = 1;
  return loss::TaskAlignedAssigner(o);
}

}  // namespace

TEST(AssignerGpu, FusedKernelsGiveTheDenseFormsBytes) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device";
  }
  for (bool o2o : {false, true}) {
    const auto assigner = assigner_for(o2o);
    for (bool with_masks : {false, true}) {
      for (uint64_t seed : {1, 2}) {
        auto k = make_case(3, 320, 12, 5, seed);
        const std::string what =
            std::string(o2o ? "o2o" : "o2m") + (with_masks ? " masks" : "") + " seed " + std::to_string(seed);
        const loss::MaskQuality* mq = with_masks ? &k.mq : nullptr;
        ASSERT_TRUE(assigner.fused_available(k.scores, k.boxes));
        auto want = assigner.dense(k.scores, k.boxes, k.points, k.labels, k.gt_boxes, k.valid, mq);
        ASSERT_GT(want.fg_mask.sum().item<int64_t>(), 0) << what;
        auto got = assigner.fused(k.scores, k.boxes, k.points, k.labels, k.gt_boxes, k.valid, mq);
        expect_same(got, want, what);
        torch::cuda::synchronize();
        loss::Assignment again;
        EXPECT_EQ(test_support::count_syncs(
                      [&] { again = assigner(k.scores, k.boxes, k.points, k.labels, k.gt_boxes, k.valid, mq); }),
                  0)
            << what;
        expect_same(again, got, what + " (second run)");
      }
    }
  }
}

TEST(AssignerGpu, LogitsGiveTheBytesOfTheirSigmoid) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device";
  }
  // The loss hands the assigner its class logits: the fused form takes the sigmoid of the scores it
  // reads, as ATen's sigmoid computes it, so every target is the one of probabilities given.
  for (bool o2o : {false, true}) {
    const auto assigner = assigner_for(o2o);
    for (bool with_masks : {false, true}) {
      auto k = make_case(3, 320, 12, 5, 9);
      const auto logits = (torch::randn(k.scores.sizes(), k.scores.options()) * 6).contiguous();
      const loss::MaskQuality* mq = with_masks ? &k.mq : nullptr;
      const std::string what = std::string(o2o ? "o2o" : "o2m") + (with_masks ? " masks" : "");
      auto want = assigner.fused(logits.sigmoid(), k.boxes, k.points, k.labels, k.gt_boxes, k.valid, mq);
      ASSERT_GT(want.fg_mask.sum().item<int64_t>(), 0) << what;
      auto got = assigner(logits, k.boxes, k.points, k.labels, k.gt_boxes, k.valid, mq, loss::ScoreForm::kLogits);
      expect_same(got, want, what + " (fused)");
      auto dense =
          assigner.dense(logits, k.boxes, k.points, k.labels, k.gt_boxes, k.valid, mq, loss::ScoreForm::kLogits);
      expect_same(dense, want, what + " (dense)");
    }
  }
}

#include "lucid/metrics/coco_eval.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "lucid/metrics/parallel.h"
#include "lucid/util/error.h"
#include "lucid/util/memory.h"

namespace lucid::metrics {

const char* iou_type_name(IouType t) { return t == IouType::Segm ? "segm" : "bbox"; }

namespace {

// numpy.linspace(start, stop, num): i * ((stop - start) / (num - 1)) + start, last value exactly
// stop. The thresholds must be bit-identical to pycocotools' for matching and recall lookups.
std::vector<double> linspace(double start, double stop, int num) {
  std::vector<double> y(static_cast<size_t>(num));
  const double step = (stop - start) / (num - 1);
  for (int i = 0; i < num; ++i) y[static_cast<size_t>(i)] = static_cast<double>(i) * step + start;
  y.back() = stop;
  return y;
}

// An (image, category) pair with at least one ground truth or detection; instance indices in file
// order.
struct Group {
  int32_t category = 0;
  int32_t image = 0;
  std::vector<uint32_t> gts;
  std::vector<uint32_t> dts;
};

// Per-group evaluation at every area range: the detections kept (best score first, at most
// max(maxDets)), and per area range how many ground truths count and, per detection, one bit per
// IoU threshold for "true positive" (low 16 bits) and "false positive" (high 16 bits); ignored
// detections have neither.
struct GroupEval {
  std::vector<double> scores;
  std::vector<uint32_t> flags;  // [a * D + d]
  std::vector<uint32_t> npig;   // [a]
};

std::vector<Group> make_groups(const CocoData& data) {
  const int64_t nimg = static_cast<int64_t>(data.num_images);
  auto key = [&](const CocoInstance& x) { return static_cast<int64_t>(x.category) * nimg + x.image; };
  auto sorted_indices = [&](const std::vector<CocoInstance>& v) {
    std::vector<uint32_t> idx;
    idx.reserve(v.size());
    for (uint32_t i = 0; i < v.size(); ++i) {
      if (v[i].category >= 0) idx.push_back(i);
    }
    std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return key(v[a]) < key(v[b]); });
    return idx;
  };
  const auto gi = sorted_indices(data.ground_truth);
  const auto di = sorted_indices(data.detections);
  std::vector<Group> groups;
  size_t a = 0, b = 0;
  while (a < gi.size() || b < di.size()) {
    const int64_t ka = a < gi.size() ? key(data.ground_truth[gi[a]]) : INT64_MAX;
    const int64_t kb = b < di.size() ? key(data.detections[di[b]]) : INT64_MAX;
    const int64_t k = std::min(ka, kb);
    Group g;
    g.category = static_cast<int32_t>(k / nimg);
    g.image = static_cast<int32_t>(k % nimg);
    while (a < gi.size() && key(data.ground_truth[gi[a]]) == k) g.gts.push_back(gi[a++]);
    while (b < di.size() && key(data.detections[di[b]]) == k) g.dts.push_back(di[b++]);
    groups.push_back(std::move(g));
  }
  return groups;
}

GroupEval evaluate_group(const CocoData& data, const Group& group, const CocoEvalParams& p) {
  const auto& GT = data.ground_truth;
  const auto& DT = data.detections;
  // Detections by descending score, ties in file order (pycocotools' stable mergesort).
  std::vector<uint32_t> dts = group.dts;
  std::stable_sort(dts.begin(), dts.end(), [&](uint32_t a, uint32_t b) { return DT[a].score > DT[b].score; });
  const size_t max_det = static_cast<size_t>(p.max_dets.back());
  if (dts.size() > max_det) dts.resize(max_det);
  const std::vector<uint32_t>& gts = group.gts;
  const size_t D = dts.size(), G = gts.size(), T = p.iou_thrs.size(), A = p.area_rngs.size();

  std::vector<uint8_t> crowd(G);
  for (size_t g = 0; g < G; ++g) crowd[g] = GT[gts[g]].iscrowd ? 1 : 0;
  std::vector<double> ious;
  if (D > 0 && G > 0) {
    if (p.iou_type == IouType::Segm) {
      std::vector<const Rle*> dm(D), gm(G);
      for (size_t d = 0; d < D; ++d) dm[d] = &DT[dts[d]].segm;
      for (size_t g = 0; g < G; ++g) gm[g] = &GT[gts[g]].segm;
      ious = rle_iou_matrix(dm, gm, crowd);
    } else {
      std::vector<BoxXywh> db(D), gb(G);
      for (size_t d = 0; d < D; ++d) db[d] = DT[dts[d]].bbox;
      for (size_t g = 0; g < G; ++g) gb[g] = GT[gts[g]].bbox;
      ious = box_iou_matrix(db, gb, crowd);
    }
  }

  GroupEval out;
  out.scores.resize(D);
  for (size_t d = 0; d < D; ++d) out.scores[d] = DT[dts[d]].score;
  out.flags.assign(A * D, 0);
  out.npig.assign(A, 0);

  std::vector<uint32_t> order(G);      // ground truths, those counted first (stable)
  std::vector<uint8_t> ig(G);          // ignore flag by position in `order`
  std::vector<uint8_t> gt_matched(G);  // by position in `order`
  std::vector<int64_t> dt_match(D);    // id of the matched ground truth, 0 = none
  std::vector<uint8_t> dt_ig(D);
  for (size_t a = 0; a < A; ++a) {
    const double lo = p.area_rngs[a][0], hi = p.area_rngs[a][1];
    size_t n = 0;
    for (size_t g = 0; g < G; ++g) {
      const auto& x = GT[gts[g]];
      if (!(x.iscrowd || x.area < lo || x.area > hi)) order[n++] = static_cast<uint32_t>(g);
    }
    out.npig[a] = static_cast<uint32_t>(n);
    for (size_t g = 0; g < G; ++g) {
      const auto& x = GT[gts[g]];
      if (x.iscrowd || x.area < lo || x.area > hi) order[n++] = static_cast<uint32_t>(g);
    }
    for (size_t i = 0; i < G; ++i) ig[i] = i >= out.npig[a] ? 1 : 0;

    uint32_t* flags = out.flags.data() + a * D;
    for (size_t t = 0; t < T; ++t) {
      std::fill(gt_matched.begin(), gt_matched.end(), 0);
      std::fill(dt_match.begin(), dt_match.end(), 0);
      std::fill(dt_ig.begin(), dt_ig.end(), 0);
      if (!ious.empty()) {
        const double thr = std::min(p.iou_thrs[t], 1 - 1e-10);
        for (size_t d = 0; d < D; ++d) {
          double best = thr;
          ptrdiff_t m = -1;
          const double* row = ious.data() + d * G;
          for (size_t i = 0; i < G; ++i) {
            const uint32_t g = order[i];
            if (gt_matched[i] && !crowd[g]) continue;                   // taken, and not a crowd region
            if (m > -1 && !ig[static_cast<size_t>(m)] && ig[i]) break;  // have a real match; rest are ignored
            if (row[g] < best) continue;
            best = row[g];
            m = static_cast<ptrdiff_t>(i);
          }
          if (m == -1) continue;
          dt_ig[d] = ig[static_cast<size_t>(m)];
          dt_match[d] = GT[gts[order[static_cast<size_t>(m)]]].id;
          gt_matched[static_cast<size_t>(m)] = 1;
        }
      }
      for (size_t d = 0; d < D; ++d) {
        const double da = DT[dts[d]].area;
        bool ignored = dt_ig[d] != 0;
        if (dt_match[d] == 0 && (da < lo || da > hi)) ignored = true;  // unmatched and outside the range
        if (ignored) continue;
        flags[d] |= dt_match[d] != 0 ? (1u << t) : (1u << (16 + t));
      }
    }
  }
  return out;
}

// Precision at each recall threshold and the final recall for one (category, area, maxDet),
// for every IoU threshold; the detections are in global score order.
void accumulate_one(const std::vector<uint32_t>& flags, uint32_t npig, const CocoEvalParams& p, CocoEvalResult& res,
                    size_t k, size_t a, size_t m) {
  const size_t nd = flags.size(), T = p.iou_thrs.size(), R = p.rec_thrs.size();
  std::vector<double> rc(nd), pr(nd);
  for (size_t t = 0; t < T; ++t) {
    double tp = 0, fp = 0;
    for (size_t i = 0; i < nd; ++i) {
      if (flags[i] & (1u << t)) tp += 1;
      if (flags[i] & (1u << (16 + t))) fp += 1;
      rc[i] = tp / npig;
      pr[i] = tp / (fp + tp + DBL_EPSILON);
    }
    res.recall_slot(t, k, a, m) = nd ? rc[nd - 1] : 0;
    for (size_t i = nd - 1; nd > 0 && i > 0; --i) {
      if (pr[i] > pr[i - 1]) pr[i - 1] = pr[i];
    }
    // First detection whose recall reaches each threshold (searchsorted, side='left'); thresholds
    // beyond the final recall get precision 0.
    size_t i = 0;
    for (size_t r = 0; r < R; ++r) {
      while (i < nd && rc[i] < p.rec_thrs[r]) ++i;
      res.precision_slot(t, r, k, a, m) = i < nd ? pr[i] : 0;
    }
  }
}

struct StatSpec {
  bool ap;
  double iou;  // < 0: all thresholds
  const char* area;
  int max_det_index;  // index into params.max_dets; -1: 100
};

constexpr StatSpec kStats[12] = {
    {true, -1, "all", -1},   {true, 0.5, "all", 2},   {true, 0.75, "all", 2},   {true, -1, "small", 2},
    {true, -1, "medium", 2}, {true, -1, "large", 2},  {false, -1, "all", 0},    {false, -1, "all", 1},
    {false, -1, "all", 2},   {false, -1, "small", 2}, {false, -1, "medium", 2}, {false, -1, "large", 2},
};

int stat_max_det(const StatSpec& s, const CocoEvalParams& p) {
  if (s.max_det_index < 0) return 100;
  const size_t i = static_cast<size_t>(s.max_det_index);
  return i < p.max_dets.size() ? p.max_dets[i] : -1;
}

double summarize_one(const CocoEvalResult& res, const CocoEvalParams& p, const StatSpec& s) {
  std::vector<size_t> ts, as, ms;
  for (size_t t = 0; t < p.iou_thrs.size(); ++t) {
    if (s.iou < 0 || p.iou_thrs[t] == s.iou) ts.push_back(t);
  }
  for (size_t a = 0; a < p.area_labels.size(); ++a) {
    if (p.area_labels[a] == s.area) as.push_back(a);
  }
  const int md = stat_max_det(s, p);
  for (size_t m = 0; m < p.max_dets.size(); ++m) {
    if (p.max_dets[m] == md) ms.push_back(m);
  }
  double sum = 0;
  size_t n = 0;
  auto add = [&](double v) {
    if (v > -1) {
      sum += v;
      ++n;
    }
  };
  for (size_t t : ts) {
    for (size_t a : as) {
      for (size_t m : ms) {
        for (size_t k = 0; k < res.K; ++k) {
          if (s.ap) {
            for (size_t ri = 0; ri < res.R; ++ri) add(res.precision_slot(t, ri, k, a, m));
          } else {
            add(res.recall_slot(t, k, a, m));
          }
        }
      }
    }
  }
  return n == 0 ? -1 : sum / static_cast<double>(n);
}

// The categories with ground truth (their indices, ascending), refused with an error when their
// result tables would not fit in the memory the machine has.
std::vector<int32_t> evaluated_categories(const CocoData& data, size_t per_category_values) {
  std::vector<char> has_truth(data.category_ids.size(), 0);
  for (const auto& g : data.ground_truth)
    if (g.category >= 0) has_truth[static_cast<size_t>(g.category)] = 1;
  std::vector<int32_t> used;
  for (size_t k = 0; k < has_truth.size(); ++k)
    if (has_truth[k]) used.push_back(static_cast<int32_t>(k));
  const uint64_t bytes = uint64_t(used.size()) * per_category_values * sizeof(double);
  const uint64_t available = util::available_memory_bytes();
  if (available > 0 && bytes > available / 2)
    throw UserError("coco eval: " + std::to_string(used.size()) + " categories with ground truth need " +
                    util::gigabytes(bytes) + " for their results, more than half the " + util::gigabytes(available) +
                    " available");
  return used;
}

}  // namespace

double CocoEvalResult::precision_at(size_t t, size_t r, size_t category, size_t a, size_t m) const {
  const auto it = std::lower_bound(categories.begin(), categories.end(), static_cast<int32_t>(category));
  if (it == categories.end() || *it != static_cast<int32_t>(category)) return -1;
  return precision_slot(t, r, static_cast<size_t>(it - categories.begin()), a, m);
}

double CocoEvalResult::recall_at(size_t t, size_t category, size_t a, size_t m) const {
  const auto it = std::lower_bound(categories.begin(), categories.end(), static_cast<int32_t>(category));
  if (it == categories.end() || *it != static_cast<int32_t>(category)) return -1;
  return recall_slot(t, static_cast<size_t>(it - categories.begin()), a, m);
}

CocoEvalParams::CocoEvalParams() : iou_thrs(linspace(0.5, 0.95, 10)), rec_thrs(linspace(0.0, 1.0, 101)) {}

CocoEvalResult coco_evaluate(const CocoData& data, const CocoEvalParams& p) {
  if (p.iou_thrs.empty() || p.iou_thrs.size() > 16) throw UserError("coco eval: 1 to 16 IoU thresholds supported");
  if (p.max_dets.empty() || !std::is_sorted(p.max_dets.begin(), p.max_dets.end())) {
    throw UserError("coco eval: maxDets must be ascending and non-empty");
  }
  for (const auto& d : data.detections) {
    if (!std::isfinite(d.score))
      throw UserError("coco eval: detection " + std::to_string(d.id) + " has a non-finite score");
  }
  const size_t T = p.iou_thrs.size(), R = p.rec_thrs.size(), A = p.area_rngs.size(), M = p.max_dets.size();
  CocoEvalResult res;
  res.categories = evaluated_categories(data, T * (R + 1) * A * M);
  const size_t K = res.categories.size(), C = data.category_ids.size();
  res.T = T;
  res.R = R;
  res.K = K;
  res.A = A;
  res.M = M;
  res.precision.assign(T * R * K * A * M, -1.0);
  res.recall.assign(T * K * A * M, -1.0);

  // evaluate: every (image, category) group independently.
  const std::vector<Group> groups = make_groups(data);
  std::vector<GroupEval> evals(groups.size());
  parallel_for(groups.size(), p.threads, 16, [&](size_t i) { evals[i] = evaluate_group(data, groups[i], p); });

  // accumulate: per category, detections of all images in one score order.
  std::vector<size_t> cat_begin(C + 1, groups.size());
  for (size_t i = groups.size(); i-- > 0;) cat_begin[static_cast<size_t>(groups[i].category)] = i;
  for (size_t c = C; c-- > 0;) cat_begin[c] = std::min(cat_begin[c], cat_begin[c + 1]);
  parallel_for(K, p.threads, 1, [&](size_t k) {
    const auto c = static_cast<size_t>(res.categories[k]);
    const size_t gb = cat_begin[c], ge = cat_begin[c + 1];
    if (gb == ge) return;
    // Concatenate in image order (groups are sorted by image), then a stable sort by score:
    // pycocotools' mergesort over the same concatenation.
    struct Det {
      double score;
      uint32_t group;
      uint32_t rank;
    };
    std::vector<Det> dets;
    for (size_t g = gb; g < ge; ++g) {
      for (size_t d = 0; d < evals[g].scores.size(); ++d) {
        dets.push_back({evals[g].scores[d], static_cast<uint32_t>(g), static_cast<uint32_t>(d)});
      }
    }
    std::stable_sort(dets.begin(), dets.end(), [](const Det& x, const Det& y) { return x.score > y.score; });
    std::vector<uint32_t> flags;
    flags.reserve(dets.size());
    for (size_t a = 0; a < A; ++a) {
      uint32_t npig = 0;
      for (size_t g = gb; g < ge; ++g) npig += evals[g].npig[a];
      if (npig == 0) continue;
      for (size_t m = 0; m < M; ++m) {
        const uint32_t max_det = static_cast<uint32_t>(p.max_dets[m]);
        flags.clear();
        for (const auto& d : dets) {
          if (d.rank < max_det) flags.push_back(evals[d.group].flags[a * evals[d.group].scores.size() + d.rank]);
        }
        accumulate_one(flags, npig, p, res, k, a, m);
      }
    }
  });

  for (size_t i = 0; i < 12; ++i) res.stats[i] = summarize_one(res, p, kStats[i]);
  return res;
}

std::string coco_summary_text(const CocoEvalResult& result, const CocoEvalParams& p) {
  std::string out;
  char iou[32], line[256];
  for (size_t i = 0; i < 12; ++i) {
    const StatSpec& s = kStats[i];
    if (s.iou < 0) {
      std::snprintf(iou, sizeof(iou), "%0.2f:%0.2f", p.iou_thrs.front(), p.iou_thrs.back());
    } else {
      std::snprintf(iou, sizeof(iou), "%0.2f", s.iou);
    }
    std::snprintf(line, sizeof(line), " %-18s %s @[ IoU=%-9s | area=%6s | maxDets=%3d ] = %0.3f\n",
                  s.ap ? "Average Precision" : "Average Recall", s.ap ? "(AP)" : "(AR)", iou, s.area,
                  stat_max_det(s, p), result.stats[i]);
    out += line;
  }
  return out;
}

}  // namespace lucid::metrics

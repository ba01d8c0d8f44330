// cls_pw: the reference's class weights (8.4.190 DetectionTrainer.set_class_weights): per class
// (1 / count) ^ cls_pw of the training instances, classes without instances given the mean weight
// of the others, normalised to mean 1; they scale the class loss's BCE per class. Computed in
// single precision as the reference's numpy float32 arrays.
#pragma once
#include <cstdint>
#include <vector>

namespace lucid::loss {

// Empty (no weighting) when cls_pw is 0 or no class has an instance.
std::vector<double> class_weights(const std::vector<int64_t>& counts, double cls_pw);

}  // namespace lucid::loss

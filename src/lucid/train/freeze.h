// Frozen layers (`freeze=N` or `freeze=0,3,5`), as the reference trainer freezes them: the layers'
// parameters take no gradient, and their BatchNorm layers stay in eval mode while the rest trains,
// so their running statistics keep the pretrained values.
#pragma once
#include <string>
#include <vector>

#include "lucid/model/model.h"

namespace lucid::engine {

// The layer indices of a freeze option ("" or None: none); errors name the option.
std::vector<int> parse_freeze(const std::string& spec);

// requires_grad off for every parameter of the layers (names "model.<i>."). Freezing every
// parameter is a UserError naming freeze=`spec` and the model's layer count.
void freeze_layers(model::SegmentationModelImpl& model, const std::vector<int>& layers,
                   const std::string& spec = "None");

// model.train(), then eval mode for the BatchNorm modules of the frozen layers.
void train_mode(model::SegmentationModelImpl& model, const std::vector<int>& layers);

}  // namespace lucid::engine

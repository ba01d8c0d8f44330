// The NMS options that val, predict and training's validation share, declared once: iou, max_det
// and nms, bound into the component that runs NMS (engine::ValidatorOptions, engine::PredictOptions:
// any struct with iou, max_det and nms members) and defaulting to that component's values.
#pragma once
#include <optional>
#include <string>

#include "lucid/config/fields.h"
#include "lucid/config/nms_option.h"

namespace lucid::config {

// O: the component; `to_component`: the path of members from S to it; `help_prefix` leads each
// help text ("validation: " for train); max_det is from 1 to `max_det_bound`.
template <class O, class S, class... P>
void declare_nms_fields(FieldList<S>& f, const std::string& help_prefix, long long max_det_bound, P... to_component) {
  f.number("iou", help_prefix + "NMS IoU threshold").fraction().to(to_component..., &O::iou);
  f.integer("max_det", help_prefix + "detections per image").range(1, max_det_bound).to(to_component..., &O::max_det);
  f.template value<std::optional<bool>>("nms", "None", help_prefix + kNmsHelp, read_nms, format_nms, {"maybe"})
      .to(to_component..., &O::nms);
}

}  // namespace lucid::config

#include "lucid/config/reference_keys.h"

namespace lucid::config {

const std::set<std::string>& reference_keys() {
  static const std::set<std::string> keys{
      "task", "mode", "model", "data", "epochs", "time", "patience", "batch", "imgsz", "save", "save_period", "cache",
      "device", "workers", "project", "name", "exist_ok", "pretrained", "cls_remap", "optimizer", "verbose", "seed",
      "deterministic", "single_cls", "rect", "cos_lr", "close_mosaic", "resume", "amp", "fraction", "profile",
      "freeze", "multi_scale", "compile", "channels_last", "overlap_mask", "mask_ratio", "dropout", "val", "split",
      "save_json", "conf", "iou", "max_det", "quantize", "dnn", "plots", "nms", "source", "vid_stride",
      "stream_buffer", "visualize", "augment", "agnostic_nms", "classes", "retina_masks", "embed", "show",
      "save_frames", "save_txt", "save_conf", "save_crop", "show_labels", "show_conf", "show_boxes", "line_width",
      "format", "optimize", "dynamic", "simplify", "opset", "workspace", "lr0", "lrf", "momentum", "weight_decay",
      "warmup_epochs", "warmup_momentum", "warmup_bias_lr", "distill_model", "dis", "box", "cls", "cls_pw", "dfl",
      "pose", "kobj", "rle", "angle", "dlog", "dgrad", "dlam", "nbs", "hsv_h", "hsv_s", "hsv_v", "degrees",
      "translate", "scale", "shear", "perspective", "flipud", "fliplr", "bgr", "mosaic", "mixup", "cutmix",
      "copy_paste", "copy_paste_mode", "auto_augment", "erasing", "cfg", "tracker", "save_dir"};
  return keys;
}

bool reference_bare_flag(const std::string& key) {
  static const std::set<std::string> flags{
      "save", "cache", "exist_ok", "pretrained", "cls_remap", "verbose", "deterministic", "single_cls", "rect",
      "cos_lr", "resume", "amp", "profile", "compile", "overlap_mask", "val", "save_json", "dnn", "plots",
      "stream_buffer", "visualize", "augment", "agnostic_nms", "retina_masks", "show", "save_frames", "save_txt",
      "save_conf", "save_crop", "show_labels", "show_conf", "show_boxes", "optimize", "dynamic", "simplify",
      "half", "int8", "end2end", "nms"};
  return flags.count(key) > 0;
}

}  // namespace lucid::config

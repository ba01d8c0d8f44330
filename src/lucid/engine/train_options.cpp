#include "lucid/engine/train_options.h"

#include <cmath>
#include <limits>

#include "lucid/data/fraction.h"
#include "lucid/engine/freeze.h"
#include "lucid/util/error.h"

namespace lucid::engine {

bool execution_option(const std::string& key) {
  return key.rfind("capture_", 0) == 0 || key == "stage_times" || key == "gpu_augment" || key == "dist_timeout";
}

config::Options train_options() {
  return config::Options(
      "train",
      {
          {"data", "", "dataset YAML or COCO JSON (empty: the embedded synthetic dataset)"},
          {"model", "yolo26n-seg.yaml",
           "model YAML (scale letter picks the scale), or a weights file to start from: an Ultralytics .pt, "
           "lucid weights (.safetensors) or a lucid training checkpoint (its EMA weights, a new run)"},
          {"pretrained", "True",
           "a weights file (.pt, .safetensors) to transfer into model=YAML; False: the file given as model= "
           "gives only the architecture"},
          {"cfg", "", "a YAML file of options (key: value); options on the command line win over it"},
          {"epochs", "", "epochs to train (default 100; 30 for the synthetic dataset)"},
          {"time", "",
           "hours to train, overriding epochs: after each epoch epochs = ceil(time * 3600 / mean epoch time) and "
           "the schedule is stretched to it; training also stops once the time is up"},
          {"imgsz", "", "training image size, rounded up to a multiple of 32 (default 640; 160 for the synthetic dataset)"},
          {"batch", "",
           "images per batch (default 16; 8 for the synthetic dataset); -1: AutoBatch at 60% of the GPU memory, "
           "a fraction in (0, 1): AutoBatch at that fraction (on the CPU: 16, with a warning)"},
          {"fraction", "1.0",
           "part of the training images to use, the first of the sorted list: a ratio in (0, 1], a count > 1, or "
           "[train,val] / [train,val,test] ratios or counts"},
          {"single_cls", "False", "train every class as one class, 'item'"},
          {"rect", "False",
           "rectangular training batches: images sorted by aspect ratio, each batch at its own shape; mosaic off "
           "and no shuffling"},
          {"multi_scale", "0.0",
           "per-batch random input size in [imgsz * (1 - m), imgsz * (1 + m)], a multiple of 32 (0: off)"},
          {"mask_ratio", "4", "mask target downsample ratio"},
          {"cls_pw", "0.0",
           "class-weight power: inverse class frequencies of the training labels raised to it weight the class "
           "loss (0: off, 1: full inverse frequency)"},
          {"dropout", "0.0", "classification-head dropout (classify models only; accepted, no effect on segmentation)"},
          {"device", "", "cpu, cuda, cuda:N, N, or GPUs 0,1,... for one training process each (default: cuda:0 if usable, else cpu)"},
          {"world", "1", "training processes on this host for device=cpu (data parallel over Gloo; batch is the global batch)"},
          {"sync_bn", "False", "data parallel: BatchNorm statistics over the global batch"},
          {"dist_timeout", "1800", "data parallel: seconds any collective waits for the other ranks before the run stops"},
          {"workers", "8", "data loader worker threads (at most one per CPU and per image of a batch)"},
          {"cache", "ram", "prepared-image cache: ram, disk or False"},
          {"allow_outside_images", "False", "follow COCO file_name paths that are absolute or lead out of the image folder (..)"},
          {"gpu_augment", "False",
           "render the augmented training images (mosaic, perspective, flips) on the training device from the "
           "prepared images held in its memory (same bytes as the workers' CPU path)"},
          {"optimizer", "auto", "auto, SGD, AdamW or MuSGD"},
          {"seed", "0", "random seed"},
          {"deterministic", "True", "deterministic algorithms"},
          {"lr0", "0.01", "initial learning rate (ignored by optimizer=auto)"},
          {"lrf", "0.01", "final learning rate as a fraction of lr0"},
          {"momentum", "0.937", "SGD momentum / Adam beta1 (ignored by optimizer=auto)"},
          {"weight_decay", "0.0005", "weight decay at the nominal batch size"},
          {"warmup_epochs", "3.0", "warmup epochs (fractions allowed)"},
          {"warmup_momentum", "0.8", "initial warmup momentum"},
          {"warmup_bias_lr", "0.1", "initial warmup learning rate of biases"},
          {"cos_lr", "False", "cosine learning-rate schedule"},
          {"nbs", "64", "nominal batch size (gradient accumulation)"},
          {"box", "7.5", "box (and mask, semantic) loss gain"},
          {"cls", "0.5", "class loss gain"},
          {"dfl", "1.5", "DFL / L1 loss gain"},
          {"overlap_mask", "True", "one overlap mask per image (False: one mask per instance)"},
          {"close_mosaic", "10", "turn mosaic off for the last N epochs"},
          {"mosaic", "1.0", "mosaic probability"},
          {"mixup", "0.0", "MixUp probability: blend with a second augmented image, weight Beta(32, 32)"},
          {"cutmix", "0.0", "CutMix probability: a rectangle free of boxes taken from a second augmented image"},
          {"copy_paste", "0.0", "fraction of the eligible instances pasted (mode mixup: also the probability)"},
          {"copy_paste_mode", "flip", "copy_paste source: flip (the image's own instances mirrored) or mixup (another image's)"},
          {"hsv_h", "0.015", "HSV hue gain"},
          {"hsv_s", "0.7", "HSV saturation gain"},
          {"hsv_v", "0.4", "HSV value gain"},
          {"degrees", "0.0", "rotation (+/- degrees)"},
          {"translate", "0.1", "translation (+/- fraction)"},
          {"scale", "0.5", "scale gain (+/-)"},
          {"shear", "0.0", "shear (+/- degrees)"},
          {"perspective", "0.0", "perspective (+/- fraction)"},
          {"flipud", "0.0", "vertical flip probability"},
          {"fliplr", "0.5", "horizontal flip probability"},
          {"freeze", "", "freeze the first N layers, or a comma-separated list of layer indices"},
          {"amp", "True", "BF16 autocast on CUDA"},
          {"capture_network", "False", "replay the shared features (backbone + neck) as recorded CUDA graphs"},
          {"capture_segment_heads", "False", "replay each head prediction as its own recorded CUDA graph"},
          {"capture_optimizer", "False", "replay the optimizer's update preparation and orthogonalisation"},
          {"capture_step", "False",
           "replay the whole training step (forward, loss, backward; clipping, optimizer and EMA) as recorded CUDA graphs"},
          {"stage_times", "False", "time every stage (host and device) over the fit; printed and in fit_report.json"},
          {"val", "True", "validate after every epoch"},
          {"split", "val", "split validated during and after training: val or test"},
          {"conf", "", "validation confidence threshold (default 0.001)"},
          {"iou", "0.7", "validation NMS IoU threshold"},
          {"max_det", "300", "validation detections per image"},
          {"save_json", "False", "the final validation writes predictions.json (COCO results) into the run folder"},
          {"plots", "True", "write plots"},
          {"patience", "100", "epochs without fitness improvement before stopping (0: never stop early)"},
          {"save_period", "-1", "also keep a checkpoint every N epochs"},
          {"project", "runs/segment", "parent directory of run directories"},
          {"name", "train", "run folder name, one folder inside project (numbered if it exists)"},
          {"exist_ok", "False", "reuse an existing run folder (one training at a time writes into a folder)"},
          {"resume", "", "resume from a last checkpoint (path, or True for the newest run)"},
      });
}

void refuse_options_ignored_by_resume(const config::Options& o, const nlohmann::ordered_json& run_args,
                                      const std::filesystem::path& run_dir, const std::string& checkpoint) {
  namespace fs = std::filesystem;
  const bool newest = o.str("resume") == "True";
  auto refuse = [&](const std::string& key, const std::string& why) {
    throw UserError("option " + key + "=" + o.str(key) + ": " + why + "; to train from that checkpoint's weights with " +
                    "other options, start a new run with model=" + checkpoint);
  };
  if ((o.given("project") && !newest) || o.given("name")) {
    std::error_code ec;
    const auto asked = fs::weakly_canonical(fs::path(o.str("project")) / o.str("name"), ec);
    if (ec || asked != fs::weakly_canonical(run_dir, ec))
      refuse(o.given("name") ? "name" : "project", "resume= continues the run in " + run_dir.string());
  }
  for (const auto& spec : o.specs()) {
    const auto& key = spec.key;
    if (!o.given(key) || key == "resume" || key == "project" || key == "name" || key == "exist_ok" ||
        execution_option(key))
      continue;
    const auto it = run_args.find(key);
    const std::string run_value = it != run_args.end() && it->is_string() ? it->get<std::string>() : spec.default_value;
    if (o.str(key) != run_value)
      refuse(key, "resume= continues the run with its own " + key + "=" + run_value + " and would ignore it");
  }
}

TrainSettings TrainSettings::from(const config::Options& o) {
  TrainSettings s;
  s.data = o.str("data");
  s.model = o.str("model");
  s.pretrained = o.str("pretrained");
  s.device = o.str("device");
  s.optimizer = o.str("optimizer");
  s.project = o.str("project");
  s.name = o.str("name");
  s.resume = o.str("resume");
  s.cache = o.str("cache");
  s.freeze = o.str("freeze");
  s.frozen = parse_freeze(s.freeze);
  const bool synthetic = s.data.empty();
  constexpr long long kInt = std::numeric_limits<int>::max();
  s.epochs = o.str("epochs").empty() ? (synthetic ? 30 : 100) : o.integer("epochs", 1, 1000000);
  s.imgsz = o.str("imgsz").empty() ? (synthetic ? 160 : 640)
                                    : config::stride_multiple(o.integer("imgsz", 1, config::kMaxImgsz));
  if (o.str("batch").empty()) {
    s.batch = synthetic ? 8 : 16;
  } else {
    // An integer count, -1 (AutoBatch at the reference's 60%) or a fraction of GPU memory in (0, 1).
    const double b = o.number("batch");
    if (b == -1) {
      s.autobatch_fraction = 0.6;
    } else if (b > 0 && b < 1) {
      s.autobatch_fraction = b;
    } else if (b != std::floor(b) || b < 1 || b > static_cast<double>(config::kMaxBatch)) {
      throw UserError("option batch=" + o.str("batch") + ": expected a count from 1 to " +
                      std::to_string(config::kMaxBatch) + ", -1 (AutoBatch) or a GPU memory fraction in (0, 1)");
    }
    s.batch = s.autobatch_fraction > 0 ? 0 : static_cast<int64_t>(b);
  }
  s.world = o.integer("world", 1, 4096);
  s.sync_bn = o.flag("sync_bn");
  s.dist_timeout = o.integer("dist_timeout", 1, 7 * 24 * 3600);
  s.workers = o.integer("workers", 0, kInt);  // more than the CPUs or the batch are capped by the loader
  s.seed = o.integer("seed");
  s.nbs = o.integer("nbs", 1, config::kMaxBatch);
  s.close_mosaic = o.integer("close_mosaic", 0, kInt);
  s.patience = o.integer("patience", 0, kInt);
  s.save_period = o.integer("save_period", -1, kInt);
  s.lr0 = o.number("lr0");
  s.lrf = o.number("lrf");
  s.momentum = o.number("momentum");
  s.weight_decay = o.number("weight_decay");
  s.warmup_epochs = o.number("warmup_epochs");
  s.warmup_momentum = o.number("warmup_momentum");
  s.warmup_bias_lr = o.number("warmup_bias_lr");
  s.box = o.number("box");
  s.cls = o.number("cls");
  s.dfl = o.number("dfl");
  s.hsv_h = o.number("hsv_h");
  s.hsv_s = o.number("hsv_s");
  s.hsv_v = o.number("hsv_v");
  s.degrees = o.number("degrees");
  s.translate = o.number("translate");
  s.scale = o.number("scale");
  s.shear = o.number("shear");
  s.perspective = o.number("perspective");
  s.flipud = o.number("flipud");
  s.fliplr = o.number("fliplr");
  s.mosaic = o.number("mosaic");
  s.mixup = o.number("mixup");
  s.cutmix = o.number("cutmix");
  s.copy_paste = o.number("copy_paste");
  s.copy_paste_mode = o.str("copy_paste_mode");
  s.cos_lr = o.flag("cos_lr");
  s.overlap_mask = o.flag("overlap_mask");
  s.val = o.flag("val");
  s.amp = o.flag("amp");
  s.deterministic = o.flag("deterministic");
  s.exist_ok = o.flag("exist_ok");
  s.plots = o.flag("plots");
  s.gpu_augment = o.flag("gpu_augment");
  s.capture_network = o.flag("capture_network");
  s.capture_segment_heads = o.flag("capture_segment_heads");
  s.capture_optimizer = o.flag("capture_optimizer");
  s.capture_step = o.flag("capture_step");
  s.stage_times = o.flag("stage_times");
  s.cfg = o.str("cfg");
  s.time = o.str("time").empty() ? 0.0 : o.number("time");
  s.fraction = o.str("fraction");
  data::DatasetFraction::parse(s.fraction);  // validates; the index applies it
  s.single_cls = o.flag("single_cls");
  s.rect = o.flag("rect");
  s.multi_scale = o.number("multi_scale");
  s.mask_ratio = o.integer("mask_ratio", 1, kInt);
  s.cls_pw = o.number("cls_pw");
  s.dropout = o.number("dropout");
  s.split = o.str("split");
  s.conf = o.str("conf").empty() ? 0.001 : o.number("conf");
  s.iou = o.number("iou");
  s.max_det = o.integer("max_det", 1, kInt);
  s.save_json = o.flag("save_json");
  auto require = [](bool ok, const std::string& key, const std::string& why) {
    if (!ok) throw UserError("option " + key + ": " + why);
  };
  require(s.epochs >= 1, "epochs", "must be at least 1");
  require(s.imgsz >= 32 && s.imgsz % 32 == 0, "imgsz", "must be a positive multiple of 32");
  require(s.batch >= 1 || s.autobatch_fraction > 0, "batch", "must be at least 1");
  require(s.workers >= 0, "workers", "must not be negative");
  require(s.nbs >= 1, "nbs", "must be at least 1");
  require(s.lr0 > 0, "lr0", "must be positive");
  require(s.lrf > 0 && s.lrf <= 1, "lrf", "must be in (0, 1]");
  require(s.momentum >= 0 && s.momentum < 1, "momentum", "must be in [0, 1)");
  require(s.weight_decay >= 0, "weight_decay", "must not be negative");
  require(s.warmup_epochs >= 0, "warmup_epochs", "must not be negative");
  require(s.close_mosaic >= 0, "close_mosaic", "must not be negative");
  for (auto [k, v] : {std::pair{"mosaic", s.mosaic}, {"flipud", s.flipud}, {"fliplr", s.fliplr}, {"mixup", s.mixup},
                      {"cutmix", s.cutmix}, {"copy_paste", s.copy_paste}})
    require(v >= 0 && v <= 1, k, "must be a probability in [0, 1]");
  require(s.copy_paste_mode == "flip" || s.copy_paste_mode == "mixup", "copy_paste_mode", "expected flip or mixup");
  if (s.gpu_augment)
    for (auto [k, v] : {std::pair{"mixup", s.mixup}, {"cutmix", s.cutmix}, {"copy_paste", s.copy_paste}})
      require(v == 0, k,
              "gpu_augment=True renders mosaic, perspective and flips only; use gpu_augment=False with " +
                  std::string(k) + "=" + o.str(k) + ", or " + k + "=0.0 with gpu_augment=True");
  require(s.time >= 0, "time", "hours must not be negative");
  for (auto [k, v] : {std::pair{"multi_scale", s.multi_scale}, {"cls_pw", s.cls_pw}, {"dropout", s.dropout},
                      {"conf", s.conf}, {"iou", s.iou}})
    require(v >= 0 && v <= 1, k, "must be in [0, 1]");
  require(s.split == "val" || s.split == "test", "split", "expected val or test");
  // Every batch shape (a multiple of the stride 32, also with rect and multi_scale) must divide into mask pixels.
  require(32 % s.mask_ratio == 0, "mask_ratio", "must divide the stride 32: 1, 2, 4, 8, 16 or 32");
  require(s.cache == "ram" || s.cache == "disk" || s.cache == "False" || s.cache == "True", "cache",
          "expected ram, disk, True or False");
  return s;
}

}  // namespace lucid::engine

#!/usr/bin/env bash
# The scale workload: N training image files (default 20,000) made from the coco128-seg images after
# the first 16, hard-linked under distinct names (each name is its own file to the loaders: decoded
# and cached on its own, as a dataset of N images would be), and the first 16 images as a disjoint
# validation split; Ultralytics layout and dataset YAML (written last).
#   bench/scale_workload.sh OUT_DIR [N]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
shared=${LUCID_SHARED:-$here/../../shared}
src=$shared/data/coco128-seg
out=${1:?usage: scale_workload.sh OUT_DIR [N]}
n=${2:-20000}
[ -f "$out/data.yaml" ] && [ "$(cat "$out/.count" 2>/dev/null)" = "$n" ] && exit 0
rm -rf "$out"; mkdir -p "$out"/images/{train,val} "$out"/labels/{train,val}
mapfile -t imgs < <(ls "$src"/images/train2017/*.jpg | sort)
put() {  # put SRC_JPG SPLIT NAME
  ln "$1" "$out/images/$2/$3.jpg" 2>/dev/null || cp "$1" "$out/images/$2/$3.jpg"
  local lab=$src/labels/train2017/$(basename "$1" .jpg).txt
  if [ -f "$lab" ]; then cp "$lab" "$out/labels/$2/$3.txt"; fi
}
for ((i = 0; i < 16; i++)); do put "${imgs[$i]}" val "$(basename "${imgs[$i]}" .jpg)"; done
pool=$(( ${#imgs[@]} - 16 ))
for ((k = 0; k < n; k++)); do
  i=$(( 16 + k % pool ))
  put "${imgs[$i]}" train "$(printf 's%06d_%s' "$k" "$(basename "${imgs[$i]}" .jpg)")"
done
{
  echo "path: $out"; echo "train: images/train"; echo "val: images/val"; echo "names:"
  c=0; while IFS= read -r name; do echo "  $c: $name"; c=$((c + 1)); done < "$src/classes.txt"
} > "$out/data.yaml.tmp"
echo "$n" > "$out/.count"
mv "$out/data.yaml.tmp" "$out/data.yaml"
echo "scale workload: $(ls "$out"/images/train | wc -l) train, $(ls "$out"/images/val | wc -l) val images -> $out/data.yaml"

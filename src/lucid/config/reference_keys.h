// The keys of the reference's configuration (ultralytics 8.4.190: cfg/default.yaml, and save_dir,
// which its runs add to args.yaml): what an Ultralytics args.yaml may hold, and which of lucid's
// own keys its cfg= loader accepts (any other key is a SyntaxError there).
#pragma once
#include <set>
#include <string>

namespace lucid::config {

// A run's record: args.yaml holds its options that are the reference's keys, so that the reference's
// cfg= loads it; lucid_args.yaml beside it holds lucid's own (capture_*, world, ...).
inline constexpr const char* kArgsFile = "args.yaml";
inline constexpr const char* kLucidArgsFile = "lucid_args.yaml";

const std::set<std::string>& reference_keys();

// The reference's bare boolean flags (entrypoint in cfg/__init__.py): a key given without `=value`
// means True when the reference's default is a boolean or the key is one of half, int8, end2end,
// nms (whose defaults are missing or None).
bool reference_bare_flag(const std::string& key);

}  // namespace lucid::config

// YAML from strangers (dataset YAMLs, options files, the model dict inside a weights file): an
// alias repeats its anchor's whole node, so a few lines of nested aliases ("billion laughs") expand
// to billions of nodes for anything that walks the tree. The text's expanded size is counted from
// the parser's events (each alias adds its anchor's size, in linear time) before the tree is built.
#pragma once
#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace lucid::config {

// More expanded nodes than any real dataset, options or model YAML holds (a dataset of 100,000
// class names is 200,000).
constexpr uint64_t kMaxYamlNodes = 1'000'000;

// Deeper than any real YAML nests (a model YAML nests 4 levels); yaml-cpp's parser recurses per
// level and stops at its own limit with nothing but "bad file".
constexpr size_t kMaxYamlDepth = 256;

// The first document of `text` parsed, after checking that its nodes, with every alias expanded,
// number at most max_nodes and nest at most kMaxYamlDepth levels; more is a UserError naming
// `source` and the line that passed the limit (saying whether aliases or plain entries did). Syntax errors are
// YAML::Exceptions, as YAML::Load's.
YAML::Node load_bounded_yaml(const std::string& text, const std::string& source, uint64_t max_nodes = kMaxYamlNodes);

}  // namespace lucid::config

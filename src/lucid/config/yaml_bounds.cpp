#include "lucid/config/yaml_bounds.h"

#include <yaml-cpp/eventhandler.h>

#include <sstream>
#include <unordered_map>
#include <vector>

#include "lucid/util/error.h"

namespace lucid::config {

namespace {

// Counts the nodes of one document as if every alias were its anchor's node copied in place.
class ExpansionCounter : public YAML::EventHandler {
 public:
  ExpansionCounter(std::string source, uint64_t limit) : source_(std::move(source)), limit_(limit) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor, const std::string&) override {
    leaf(mark, anchor);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    const auto it = sizes_.find(anchor);
    aliases_ = true;
    add(mark, it == sizes_.end() ? 1 : it->second);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapEnd() override { close(); }

 private:
  struct Open {
    YAML::anchor_t anchor;
    uint64_t size;
    YAML::Mark mark;
  };
  // A list or mapping opens one level deeper; the parser recurses per level, and past its own limit
  // says only "bad file", so the depth is bounded here first.
  void open(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (open_.size() >= kMaxYamlDepth)
      throw error_at(
          source_, mark.line + 1,
          "the YAML nests lists or mappings more than " + std::to_string(kMaxYamlDepth) + " levels deep; refused");
    open_.push_back({anchor, 1, mark});
  }
  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (anchor) sizes_[anchor] = 1;
    add(mark, 1);
  }
  void close() {
    const Open node = open_.back();
    open_.pop_back();
    if (node.anchor) sizes_[node.anchor] = node.size;
    if (!open_.empty()) open_.back().size += node.size;  // its leaves and aliases are in total_ already
  }
  // n more nodes at `mark`, in the innermost open node and in the document; both stay at most the
  // limit, so no sum overflows.
  // Without any alias the count is of the entries written in the text (a list of a million class
  // names), which the message says rather than speaking of aliases.
  void add(const YAML::Mark& mark, uint64_t n) {
    total_ += n;
    if (total_ > limit_)
      throw error_at(source_, mark.line + 1,
                     aliases_ ? "the YAML expands to more than " + std::to_string(limit_) +
                                    " nodes (aliases repeating anchors); refused"
                              : "the YAML holds more than " + std::to_string(limit_) +
                                    " entries (list items, keys and values); refused");
    if (!open_.empty()) open_.back().size += n;
  }

  std::string source_;
  uint64_t limit_;
  uint64_t total_ = 0;
  bool aliases_ = false;
  std::vector<Open> open_;
  std::unordered_map<YAML::anchor_t, uint64_t> sizes_;
};

}  // namespace

YAML::Node load_bounded_yaml(const std::string& text, const std::string& source, uint64_t max_nodes) {
  {
    std::istringstream in(text);
    YAML::Parser parser(in);
    ExpansionCounter counter(source, max_nodes);
    parser.HandleNextDocument(counter);
  }
  return YAML::Load(text);
}

}  // namespace lucid::config

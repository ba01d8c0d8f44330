// An ONNX graph under construction: named values, nodes, initializers and the model's inputs,
// outputs and metadata, serialised through the ONNX project's protobuf messages (onnx_pb.h, kept
// out of this header). Floating values are FP32, or FP16 throughout when half (the file's inputs and
// outputs stay FP32, cast at the edges, as the reference's FP16 files).
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace lucid::engine::onnx {

using Value = std::string;  // a value's name in the graph

struct Attribute {
  std::string name;
  std::variant<int64_t, float, std::vector<int64_t>, std::string> value;
};

// A dimension of a graph input or output: a size, or a name for a dynamic one.
using Dim = std::variant<int64_t, std::string>;

class Graph {
 public:
  Graph(int opset, bool half);
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  int opset() const { return opset_; }
  bool half() const { return half_; }

  // A tensor stored in the file: floating tensors in the graph's float type (FP32 where an operator
  // wants FP32 whatever the graph's type, as Resize's scales), integers as int64.
  Value initializer(const std::string& name, const torch::Tensor& t, bool fp32 = false);
  // Constants, named by a counter: any tensor (as initializer() stores it), 1-D int64 values, and a
  // floating scalar of the graph's type.
  Value constant(const torch::Tensor& t, bool fp32 = false);
  Value ints(const std::vector<int64_t>& values);
  Value scalar(double v);
  // The ONNX element type of the graph's floating values (FLOAT or FLOAT16), for Cast.
  int64_t float_type() const;

  // One node; its outputs are named after its op and a counter.
  std::vector<Value> node(const std::string& op, const std::vector<Value>& inputs, int outputs = 1,
                          const std::vector<Attribute>& attributes = {});
  Value op(const std::string& op, const std::vector<Value>& inputs, const std::vector<Attribute>& attributes = {}) {
    return node(op, inputs, 1, attributes)[0];
  }

  // The FP32 input `name` (cast to FP16 inside a half graph); returns the value the graph reads.
  Value input(const std::string& name, const std::vector<Dim>& dims);
  // Declares `value` as the FP32 output `name` (cast from FP16 in a half graph).
  void output(const std::string& name, const Value& value, const std::vector<Dim>& dims);

  // The model file's bytes: the graph at this opset (IR version to match), with the metadata.
  std::string serialize(const std::string& graph_name, const std::map<std::string, std::string>& metadata,
                        const std::string& producer_version) const;

 private:
  struct Proto;
  std::unique_ptr<Proto> proto_;
  int opset_;
  bool half_;
  int64_t counter_ = 0;
};

}  // namespace lucid::engine::onnx

#include "lucid/deploy/onnx/onnx_graph.h"

#include <onnx/onnx_pb.h>

#include <stdexcept>

namespace lucid::engine::onnx {

namespace pb = ::onnx;

struct Graph::Proto {
  pb::GraphProto graph;
};

namespace {

// The IR version each opset was released with (onnx/helper.py's VERSION_TABLE).
int64_t ir_version_for(int opset) {
  if (opset <= 14) return 7;
  if (opset <= 18) return 8;
  if (opset <= 20) return 9;
  if (opset <= 22) return 10;
  return 11;
}

int32_t float_type_of(bool half) { return half ? pb::TensorProto::FLOAT16 : pb::TensorProto::FLOAT; }

void set_value_info(pb::ValueInfoProto* info, const std::string& name, const std::vector<Dim>& dims) {
  info->set_name(name);
  auto* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(pb::TensorProto::FLOAT);
  auto* shape = tensor->mutable_shape();
  for (const auto& d : dims) {
    auto* dim = shape->add_dim();
    if (const auto* size = std::get_if<int64_t>(&d))
      dim->set_dim_value(*size);
    else
      dim->set_dim_param(std::get<std::string>(d));
  }
}

void set_attribute(pb::AttributeProto* a, const Attribute& attribute) {
  a->set_name(attribute.name);
  if (const auto* i = std::get_if<int64_t>(&attribute.value)) {
    a->set_type(pb::AttributeProto::INT);
    a->set_i(*i);
  } else if (const auto* f = std::get_if<float>(&attribute.value)) {
    a->set_type(pb::AttributeProto::FLOAT);
    a->set_f(*f);
  } else if (const auto* v = std::get_if<std::vector<int64_t>>(&attribute.value)) {
    a->set_type(pb::AttributeProto::INTS);
    for (auto x : *v) a->add_ints(x);
  } else {
    a->set_type(pb::AttributeProto::STRING);
    a->set_s(std::get<std::string>(attribute.value));
  }
}

}  // namespace

Graph::Graph(int opset, bool half) : proto_(std::make_unique<Proto>()), opset_(opset), half_(half) {}
Graph::~Graph() = default;

Value Graph::initializer(const std::string& name, const torch::Tensor& t, bool fp32) {
  auto* out = proto_->graph.add_initializer();
  out->set_name(name);
  for (auto d : t.sizes()) out->add_dims(d);
  torch::Tensor data;
  if (t.is_floating_point()) {
    const bool half = half_ && !fp32;
    data = t.detach().to(torch::kCPU, half ? torch::kFloat16 : torch::kFloat32).contiguous();
    out->set_data_type(float_type_of(half));
  } else {
    data = t.detach().to(torch::kCPU, torch::kInt64).contiguous();
    out->set_data_type(pb::TensorProto::INT64);
  }
  // raw_data is little-endian, as the tensors of every platform LibTorch runs on.
  out->set_raw_data(data.data_ptr(), static_cast<size_t>(data.numel() * data.element_size()));
  return name;
}

Value Graph::constant(const torch::Tensor& t, bool fp32) {
  return initializer("const_" + std::to_string(counter_++), t, fp32);
}

Value Graph::ints(const std::vector<int64_t>& values) {
  return constant(torch::tensor(values, torch::kInt64).reshape({static_cast<int64_t>(values.size())}));
}

Value Graph::scalar(double v) { return constant(torch::tensor(static_cast<float>(v), torch::kFloat32)); }

int64_t Graph::float_type() const { return float_type_of(half_); }

std::vector<Value> Graph::node(const std::string& op, const std::vector<Value>& inputs, int outputs,
                               const std::vector<Attribute>& attributes) {
  auto* n = proto_->graph.add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + std::to_string(counter_));
  for (const auto& v : inputs) n->add_input(v);
  std::vector<Value> names;
  for (int k = 0; k < outputs; ++k) {
    names.push_back(op + "_" + std::to_string(counter_) + (outputs > 1 ? "_" + std::to_string(k) : ""));
    n->add_output(names.back());
  }
  ++counter_;
  for (const auto& a : attributes) set_attribute(n->add_attribute(), a);
  return names;
}

Value Graph::input(const std::string& name, const std::vector<Dim>& dims) {
  set_value_info(proto_->graph.add_input(), name, dims);
  return half_ ? op("Cast", {name}, {{"to", int64_t{pb::TensorProto::FLOAT16}}}) : name;
}

void Graph::output(const std::string& name, const Value& value, const std::vector<Dim>& dims) {
  auto* n = proto_->graph.add_node();
  n->set_name(name + "_out");
  n->add_input(value);
  n->add_output(name);
  if (half_) {
    n->set_op_type("Cast");
    set_attribute(n->add_attribute(), {"to", int64_t{pb::TensorProto::FLOAT}});
  } else {
    n->set_op_type("Identity");
  }
  set_value_info(proto_->graph.add_output(), name, dims);
}

std::string Graph::serialize(const std::string& graph_name, const std::map<std::string, std::string>& metadata,
                             const std::string& producer_version) const {
  pb::ModelProto model;
  model.set_ir_version(ir_version_for(opset_));
  model.set_producer_name("lucid-yolo");
  model.set_producer_version(producer_version);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(opset_);
  *model.mutable_graph() = proto_->graph;
  model.mutable_graph()->set_name(graph_name);
  for (const auto& [key, value] : metadata) {
    auto* p = model.add_metadata_props();
    p->set_key(key);
    p->set_value(value);
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes)) throw std::runtime_error("ONNX: the model could not be serialised");
  return bytes;
}

}  // namespace lucid::engine::onnx

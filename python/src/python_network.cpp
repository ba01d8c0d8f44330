#include "python_network.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>

#include "lucid/deploy/load_network.h"
#include "lucid/util/error.h"
#include "python_errors.h"

namespace py = pybind11;

namespace lucid::python {

namespace {

// The first line of the Python exception being handled (the GIL held).
std::string python_message(const py::error_already_set& e) {
  std::string m = e.what();
  const auto nl = m.find('\n');
  return nl == std::string::npos ? m : m.substr(0, nl);
}

class LUCID_PYTHON_HIDDEN PythonNetwork : public engine::Network {
 public:
  PythonNetwork(std::string what, py::object run, bool end2end, int64_t nc, torch::Device device, int pad)
      : what_(std::move(what)), run_(std::move(run)), end2end_(end2end), nc_(nc), device_(device), pad_(pad) {}
  ~PythonNetwork() override {
    py::gil_scoped_acquire gil;
    run_ = py::object();
  }

  engine::NetworkOutputs run(const torch::Tensor& images, int64_t, bool) override {
    const auto x = images.to(torch::kCPU, torch::kFloat32).contiguous();
    py::gil_scoped_acquire gil;
    try {
      py::array_t<float> in({x.size(0), x.size(1), x.size(2), x.size(3)});
      std::copy(x.data_ptr<float>(), x.data_ptr<float>() + x.numel(), in.mutable_data());
      const auto out = run_(in).cast<py::tuple>();
      if (out.size() != 2) throw UserError(what_ + ": the runtime returned other than (output0, output1)");
      return {tensor(out[0]), tensor(out[1])};
    } catch (py::error_already_set& e) {
      throw UserError(what_ + ": the runtime failed on input " + c10::str(x.sizes()) + ": " + python_message(e));
    }
  }
  bool end2end() const override { return end2end_; }
  int64_t nc() const override { return nc_; }
  torch::Device device() const override { return device_; }
  int pad_multiple(int) const override { return pad_; }

 private:
  // A float32 array as a tensor on the network's device (copied while the GIL is held).
  torch::Tensor tensor(const py::handle& h) const {
    const auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(h);
    if (!a) throw UserError(what_ + ": the runtime returned an output that is not a float32 array");
    std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
    return torch::from_blob(const_cast<float*>(a.data()), shape, torch::kFloat32).clone().to(device_);
  }

  std::string what_;
  py::object run_;
  bool end2end_;
  int64_t nc_;
  torch::Device device_;
  int pad_;
};

engine::LoadedNetwork open_with(const py::object& open, const std::string& option, const std::string& path,
                                const torch::Device& device) {
  const std::string what = option + "=" + path;
  py::gil_scoped_acquire gil;
  py::dict info;
  try {
    info = open(path, device.str()).cast<py::dict>();
  } catch (py::error_already_set& e) {
    throw UserError(what + ": " + python_message(e));
  }
  engine::LoadedNetwork out;
  out.names = info["names"].cast<std::vector<std::string>>();
  out.imgsz = info["imgsz"].cast<int64_t>();
  out.fixed_imgsz = info["fixed_imgsz"].cast<bool>();
  const torch::Device where(info["device"].cast<std::string>());
  const int pad = out.fixed_imgsz ? static_cast<int>(out.imgsz) : info["stride"].cast<int>();
  out.network = std::make_unique<PythonNetwork>(what, info["run"], info["end2end"].cast<bool>(),
                                                static_cast<int64_t>(out.names.size()), where, pad);
  return out;
}

}  // namespace

void register_python_loader(const std::string& suffix, py::object open) {
  // Held for the process's life: the registry outlives the module's objects at interpreter exit,
  // so the reference is leaked rather than released without the GIL.
  auto* kept = new py::object(std::move(open));
  engine::register_network_loader(
      suffix, [kept](const std::string& option, const std::string& path, const torch::Device& device) {
        return open_with(*kept, option, path, device);
      });
}

}  // namespace lucid::python

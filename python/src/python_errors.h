// A Python exception raised inside native code (a callback, a signal handler) while the GIL was
// taken back: kept here, the native call unwound with NativeStop, and raised again once the
// binding holds the GIL at the Python boundary.
#pragma once
#include <pybind11/pybind11.h>

#include <memory>
#include <stdexcept>

// Types that hold Python objects get pybind11's hidden visibility, as its own types have.
#define LUCID_PYTHON_HIDDEN __attribute__((visibility("hidden")))

namespace lucid::python {

struct NativeStop : std::runtime_error {
  NativeStop() : std::runtime_error("stopped by a Python exception") {}
};

class LUCID_PYTHON_HIDDEN ErrorStash {
 public:
  // Call with the GIL held, right after Python reported an error (PyErr_Occurred()).
  void keep_current() {
    if (!error_)
      error_ = std::make_unique<pybind11::error_already_set>();
    else
      PyErr_Clear();
  }
  bool holds() const { return error_ != nullptr; }
  // Raises the kept exception (the GIL held); nothing when none was kept.
  void raise_if_any() {
    if (!error_) return;
    auto e = std::move(error_);
    e->restore();
    throw pybind11::error_already_set();
  }

 private:
  std::unique_ptr<pybind11::error_already_set> error_;
};

}  // namespace lucid::python

#include "fit_observer.h"

#include "convert.h"

#include <pybind11/stl.h>

#include <algorithm>

namespace py = pybind11;

namespace lucid::python {

PythonFitObserver::PythonFitObserver(py::object on_event, py::object wanted, ErrorStash& errors)
    : on_event_(std::move(on_event)), wanted_(std::move(wanted)), errors_(errors) {
  for (auto& w : wants_) w = true;
  refresh_wanted();
}

void PythonFitObserver::refresh_wanted() {
  if (wanted_.is_none() || errors_.holds()) return;
  try {
    const auto names = wanted_().cast<std::vector<std::string>>();
    for (int k = 0; k < engine::kFitEventKinds; ++k) {
      const std::string name = engine::event_name(static_cast<engine::FitEventKind>(k));
      wants_[k] = std::find(names.begin(), names.end(), name) != names.end();
    }
  } catch (py::error_already_set& e) {
    e.restore();
    errors_.keep_current();
  }
}

bool PythonFitObserver::wants(engine::FitEventKind kind) {
  return !on_event_.is_none() && wants_[static_cast<size_t>(kind)].load(std::memory_order_relaxed);
}

void PythonFitObserver::on_event(const engine::FitEvent& event) {
  py::gil_scoped_acquire gil;
  if (errors_.holds() || on_event_.is_none()) return;
  try {
    on_event_(event_dict(event));
  } catch (py::error_already_set& e) {
    e.restore();
    errors_.keep_current();
  }
  refresh_wanted();
}

bool PythonFitObserver::stop_requested() {
  py::gil_scoped_acquire gil;
  // Runs the interpreter's handlers of signals that arrived while native code ran: SIGINT's raises
  // KeyboardInterrupt, which stops the fit here.
  if (!errors_.holds() && PyErr_CheckSignals() != 0) errors_.keep_current();
  return errors_.holds();
}

}  // namespace lucid::python

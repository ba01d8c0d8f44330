#include "fit_observer.h"

#include "convert.h"

namespace py = pybind11;

namespace lucid::python {

void PythonFitObserver::on_event(const engine::FitEvent& event) {
  py::gil_scoped_acquire gil;
  if (errors_.holds() || on_event_.is_none()) return;
  try {
    on_event_(event_dict(event));
  } catch (py::error_already_set& e) {
    e.restore();
    errors_.keep_current();
  }
}

bool PythonFitObserver::stop_requested() {
  py::gil_scoped_acquire gil;
  // Runs the interpreter's handlers of signals that arrived while native code ran: SIGINT's raises
  // KeyboardInterrupt, which stops the fit here.
  if (!errors_.holds() && PyErr_CheckSignals() != 0) errors_.keep_current();
  return errors_.holds();
}

}  // namespace lucid::python

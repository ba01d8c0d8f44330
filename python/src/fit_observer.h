// The fit observer of a train() call from Python: each fit event goes to a Python function (the
// package dispatches it to the callbacks added for its name), and before each step the interpreter's
// pending signals are handled, so Ctrl-C (KeyboardInterrupt) or an exception in a callback stops the
// fit before its next step, with the run's weights/last as the last committed epoch.
#pragma once
#include <pybind11/pybind11.h>

#include "lucid/train/fit_events.h"
#include "python_errors.h"

namespace lucid::python {

class LUCID_PYTHON_HIDDEN PythonFitObserver : public engine::FitObserver {
 public:
  PythonFitObserver(pybind11::object on_event, ErrorStash& errors) : on_event_(std::move(on_event)), errors_(errors) {}
  void on_event(const engine::FitEvent& event) override;
  bool stop_requested() override;

 private:
  pybind11::object on_event_;
  ErrorStash& errors_;
};

// Sets the process's fit observer for its lifetime.
class ObserverScope {
 public:
  explicit ObserverScope(engine::FitObserver* o) { engine::set_fit_observer(o); }
  ~ObserverScope() { engine::set_fit_observer(nullptr); }
};

}  // namespace lucid::python

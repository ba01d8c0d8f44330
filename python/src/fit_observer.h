// The fit observer of a train() or val() call from Python: each event goes to a Python function (the
// package dispatches it to the callbacks added for its name), and before each step the interpreter's
// pending signals are handled, so Ctrl-C (KeyboardInterrupt) or an exception in a callback stops the
// fit before its next step, with the run's weights/last as the last committed epoch. The per-batch
// events reach Python only when `wanted()` (a Python function returning the event names that have
// callbacks, asked again after each event delivered) names them: others cost no GIL.
#pragma once
#include <pybind11/pybind11.h>

#include <array>
#include <atomic>

#include "lucid/train/fit_events.h"
#include "python_errors.h"

namespace lucid::python {

class LUCID_PYTHON_HIDDEN PythonFitObserver : public engine::FitObserver {
 public:
  // The GIL must be held.
  PythonFitObserver(pybind11::object on_event, pybind11::object wanted, ErrorStash& errors);
  void on_event(const engine::FitEvent& event) override;
  bool stop_requested() override;
  bool wants(engine::FitEventKind kind) override;

 private:
  void refresh_wanted();  // with the GIL
  pybind11::object on_event_, wanted_;
  ErrorStash& errors_;
  std::array<std::atomic<bool>, engine::kFitEventKinds> wants_{};
};

// Sets the process's fit observer for its lifetime.
class ObserverScope {
 public:
  explicit ObserverScope(engine::FitObserver* o) { engine::set_fit_observer(o); }
  ~ObserverScope() { engine::set_fit_observer(nullptr); }
};

}  // namespace lucid::python

// Shared pieces of the Python binding (datasynth._core): library errors as
// Python exceptions, and long library calls run off the interpreter's thread.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/status.h"

namespace dspy {

namespace nb = nanobind;
using Json = nlohmann::json;

// A failed ds::Status crossing into Python. The module's translator raises
// it as ValueError (bad data, config, model files), FileNotFoundError,
// FileExistsError, OSError, TooManyInvalidError, KeyboardInterrupt
// (cancelled) or RuntimeError, with the library's message (what the CLI
// prints after "datasynth: error: ").
struct StatusError {
  ds::Code code;
  std::string message;
};
void RegisterErrors(nb::module_& m);

inline void Check(const ds::Status& s) {
  if (!s.ok()) throw StatusError{s.code(), s.ToString(false)};
}
template <class T>
T Take(ds::Result<T> r) {
  Check(r.status());
  return std::move(r).value();
}

// Events from the library thread (observers, progress callbacks), handed to
// Python in batches by RunInterruptible on the interpreter's thread. Each is
// {"kind": ..., ...}; a "progress"-like kind pushed with coalesce replaces
// the previous one still waiting (only the latest progress matters).
class EventQueue {
 public:
  void Push(Json event, bool coalesce = false);
  Json Drain();  // a JSON array; empty when nothing is waiting

 private:
  std::mutex mu_;
  std::vector<Json> events_;
};

// Runs `work` on a new thread that blocks SIGINT and SIGTERM (so do the
// compute threads and processes it starts: no signal handler ever runs on a
// compute thread, as with the CLI's interrupt watcher). The calling thread
// releases the GIL and, about every 50 ms, takes it back to hand the waiting
// events to `on_events` (a callable taking the JSON text of an array; None =
// drop them) and to run Python's signal handlers (PyErr_CheckSignals). A
// Python exception there (KeyboardInterrupt from Ctrl-C, or one raised by
// on_events) sets *cancel: the library stops at its next check and returns
// kCancelled, and that Python exception is raised once `work` has returned.
// Otherwise `work`'s own exception (a StatusError) is rethrown.
void RunInterruptible(const std::function<void()>& work, std::atomic<bool>* cancel,
                      EventQueue* events, nb::handle on_events);

}  // namespace dspy

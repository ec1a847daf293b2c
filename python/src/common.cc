#include "common.h"

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <optional>
#include <thread>

namespace dspy {

namespace {

PyObject* g_too_many_invalid = nullptr;

PyObject* ExceptionFor(ds::Code c, const std::string& message) {
  switch (c) {
    case ds::Code::kInvalidInput:
    case ds::Code::kInvalidArgument:
    case ds::Code::kCorrupt: return PyExc_ValueError;
    case ds::Code::kNotFound: return PyExc_FileNotFoundError;
    case ds::Code::kAlreadyExists: return PyExc_FileExistsError;
    case ds::Code::kIo: return PyExc_OSError;
    case ds::Code::kCancelled: return PyExc_KeyboardInterrupt;
    case ds::Code::kResourceExhausted:
      if (message.find("too many invalid") != std::string::npos) return g_too_many_invalid;
      return message.find("out of memory") != std::string::npos ? PyExc_MemoryError
                                                                : PyExc_RuntimeError;
    default: return PyExc_RuntimeError;
  }
}

const char* PyCodeName(ds::Code c) {
  switch (c) {
    case ds::Code::kOk: return "ok";
    case ds::Code::kInvalidInput: return "invalid_input";
    case ds::Code::kInvalidArgument: return "invalid_argument";
    case ds::Code::kNotFound: return "not_found";
    case ds::Code::kIo: return "io";
    case ds::Code::kCorrupt: return "corrupt";
    case ds::Code::kAlreadyExists: return "already_exists";
    case ds::Code::kResourceExhausted: return "resource_exhausted";
    case ds::Code::kCancelled: return "cancelled";
    case ds::Code::kUnavailable: return "unavailable";
    case ds::Code::kInternal: return "internal";
  }
  return "unknown";
}

}  // namespace

void RegisterErrors(nb::module_& m) {
  g_too_many_invalid = PyErr_NewExceptionWithDoc(
      "datasynth.TooManyInvalidError",
      "Generation produced more than max_invalid invalid records.", PyExc_RuntimeError, nullptr);
  m.attr("TooManyInvalidError") = nb::handle(g_too_many_invalid);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      PyObject* type = ExceptionFor(e.code, e.message);
      nb::object value = nb::steal(PyObject_CallFunction(type, "s", e.message.c_str()));
      if (!value.is_valid()) return;  // the call set its own error
      PyObject_SetAttrString(value.ptr(), "code", nb::str(PyCodeName(e.code)).ptr());
      PyErr_SetObject(type, value.ptr());
    } catch (const nlohmann::json::exception& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
}

void EventQueue::Push(Json event, bool coalesce) {
  std::lock_guard<std::mutex> l(mu_);
  if (coalesce && !events_.empty() && events_.back()["kind"] == event["kind"])
    events_.back() = std::move(event);
  else
    events_.push_back(std::move(event));
}

Json EventQueue::Drain() {
  std::vector<Json> out;
  {
    std::lock_guard<std::mutex> l(mu_);
    out.swap(events_);
  }
  return Json(std::move(out));
}

namespace {

// Hands the waiting events to Python; false (and the error kept in *err) when
// the callback raised.
bool DeliverEvents(EventQueue* events, nb::handle on_events, std::optional<nb::python_error>* err) {
  if (events == nullptr) return true;
  Json batch = events->Drain();
  if (batch.empty() || on_events.is_none() || !on_events.is_valid()) return true;
  try {
    on_events(batch.dump(-1, ' ', false, Json::error_handler_t::replace));
  } catch (nb::python_error& e) {
    if (!err->has_value()) err->emplace(std::move(e));
    return false;
  }
  return true;
}

}  // namespace

void RunInterruptible(const std::function<void()>& work, std::atomic<bool>* cancel,
                      EventQueue* events, nb::handle on_events) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr work_error;
  std::thread t([&] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    try {
      work();
    } catch (...) {
      work_error = std::current_exception();
    }
    std::lock_guard<std::mutex> l(mu);
    done = true;
    cv.notify_all();
  });
  std::optional<nb::python_error> py_error;
  for (bool finished = false; !finished;) {
    {
      nb::gil_scoped_release release;
      std::unique_lock<std::mutex> l(mu);
      finished = cv.wait_for(l, std::chrono::milliseconds(50), [&] { return done; });
    }
    bool ok = DeliverEvents(events, on_events, &py_error);
    if (PyErr_CheckSignals() != 0) {
      if (!py_error.has_value())
        py_error.emplace();  // takes the raised exception (KeyboardInterrupt)
      else
        PyErr_Clear();  // a second Ctrl-C while the library stops: the same request
      ok = false;
    }
    if (!ok && cancel != nullptr) cancel->store(true);
  }
  {
    nb::gil_scoped_release release;
    t.join();
  }
  DeliverEvents(events, on_events, &py_error);
  if (py_error.has_value()) {
    // Ctrl-C: the library's own message says what was kept (a resumable model).
    if (work_error && py_error->matches(PyExc_KeyboardInterrupt)) {
      try {
        std::rethrow_exception(work_error);
      } catch (const StatusError& e) {
        if (e.code == ds::Code::kCancelled) throw;
      } catch (...) {
      }
    }
    throw std::move(*py_error);
  }
  if (work_error) std::rethrow_exception(work_error);
}

}  // namespace dspy

// SPDX-License-Identifier: Apache-2.0
// The live Session. Python callables handed to it (watch_memory, on_report) run on the session's
// worker thread: they take the GIL there, and their exceptions are reported as unraisable rather
// than crossing into C++.
#include <gpudiag/session.hpp>
#include <gpudiag/whatif.hpp>

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>

#include "bindings.hpp"
#include "status_to_python.hpp"

namespace gpudiag::python {

namespace py = pybind11;

namespace {

// Owns a Python callable that C++ may call, copy and destroy on any thread.
class PyCallable {
public:
    explicit PyCallable(py::object fn) : fn_(std::move(fn)) {}
    PyCallable(const PyCallable&) = delete;
    PyCallable& operator=(const PyCallable&) = delete;
    ~PyCallable() {
        py::gil_scoped_acquire gil;
        fn_ = py::object();
    }

    template <typename... Args>
    void operator()(const Args&... args) const noexcept {
        try {
            py::gil_scoped_acquire gil;
            try {
                fn_(args...);
            } catch (py::error_already_set& e) {
                e.discard_as_unraisable("gpudiag session callback");
            }
        } catch (...) {  // a conversion failure must not reach the session's thread
        }
    }

private:
    py::object fn_;
};

// Deleting a session joins its worker thread, which may be waiting for the GIL in a callback.
struct SessionDeleter {
    void operator()(Session* session) const noexcept {
        py::gil_scoped_release release;
        delete session;
    }
};
using SessionHolder = std::unique_ptr<Session, SessionDeleter>;

}  // namespace

void bind_session(py::module_& m) {
    py::class_<CostBudget>(m, "CostBudget")
        .def(py::init<>())
        .def_readwrite("cpu_share", &CostBudget::cpu_share)
        .def_readwrite("step_share", &CostBudget::step_share)
        .def_readwrite("period_ms", &CostBudget::period_ms);

    py::class_<SessionOptions>(m, "SessionOptions")
        .def(py::init<>())
        .def_readwrite("record_path", &SessionOptions::record_path)
        .def_readwrite("record_max_bytes", &SessionOptions::record_max_bytes)
        .def_readwrite("record_window_s", &SessionOptions::record_window_s)
        .def_readwrite("record_window_bytes", &SessionOptions::record_window_bytes)
        .def_readwrite("capture_gpu", &SessionOptions::capture_gpu)
        .def_readwrite("deep", &SessionOptions::deep)
        .def_readwrite("nvml_hz", &SessionOptions::nvml_hz)
        .def_readwrite("queue_capacity", &SessionOptions::queue_capacity)
        .def_readwrite("flush_period_ms", &SessionOptions::flush_period_ms)
        .def_readwrite("report_period_ms", &SessionOptions::report_period_ms)
        .def_readwrite("cost_budget", &SessionOptions::cost_budget)
        .def_readwrite("analysis", &SessionOptions::analysis)
        .def_readwrite("properties", &SessionOptions::properties)
        .def_readwrite("http", &SessionOptions::http)
        .def_readwrite("http_token", &SessionOptions::http_token)
        .def_readwrite("collective_timeout_s", &SessionOptions::collective_timeout_s)
        .def_property(
            "on_report", [](const SessionOptions& o) { return static_cast<bool>(o.on_report); },
            [](SessionOptions& o, py::object fn) {
                if (fn.is_none()) {
                    o.on_report = nullptr;
                    return;
                }
                auto callable = std::make_shared<PyCallable>(std::move(fn));
                o.on_report = [callable](const Report& r) { (*callable)(r); };
            },
            "Called with each periodic Report on the session's thread (set a callable or None).");

    py::class_<HttpStatus>(m, "HttpStatus")
        .def(py::init<>())
        .def_readonly("serving", &HttpStatus::serving)
        .def_readonly("address", &HttpStatus::address)
        .def_readonly("port", &HttpStatus::port)
        .def_readonly("reason", &HttpStatus::reason);

    py::class_<Session, SessionHolder>(m, "Session")
        .def("http_status", &Session::http_status)
        .def_static(
            "create",
            [](SessionOptions options) {
                auto created = Session::create(std::move(options));
                if (!created.is_ok()) raise_status(created.status());
                return SessionHolder(std::move(created).value().release());
            },
            py::arg("options"))
        .def("start", [](Session& s) { check(without_gil([&] { return s.start(); })); })
        .def("stop", [](Session& s) { check(without_gil([&] { return s.stop(); })); })
        .def("running", &Session::running)
        .def("step_begin", &Session::step_begin, py::arg("step"))
        .def("step_end", &Session::step_end, py::arg("step"))
        .def("phase_begin", &Session::phase_begin, py::arg("name"))
        .def("phase_end", &Session::phase_end)
        .def("input_wait_begin", &Session::input_wait_begin)
        .def("input_wait_end", &Session::input_wait_end)
        .def("input_waited", &Session::input_waited, py::arg("since_ns"))
        .def("record", &Session::record, py::arg("event"))
        .def("intern", &Session::intern, py::arg("text"))
        .def_static("now_ns", &Session::now_ns)
        .def(
            "watch_memory",
            [](Session& s, std::uint64_t level_bytes, py::object callback) {
                auto callable = std::make_shared<PyCallable>(std::move(callback));
                std::function<void(std::uint64_t)> fn = [callable](std::uint64_t bytes) {
                    (*callable)(bytes);
                };
                // Released: the worker may hold a session lock while it waits for the GIL.
                return unwrap(
                    without_gil([&] { return s.watch_memory(level_bytes, std::move(fn)); }));
            },
            py::arg("level_bytes"), py::arg("callback"))
        .def(
            "unwatch_memory",
            [](Session& s, WatchId id) {
                check(without_gil([&] { return s.unwatch_memory(id); }));
            },
            py::arg("id"))
        .def(
            "record_watch_action",
            [](Session& s, WatchId id, const std::string& action, bool ok,
               std::uint64_t bytes_freed, const std::string& detail) {
                check(without_gil(
                    [&] { return s.record_watch_action(id, action, ok, bytes_freed, detail); }));
            },
            py::arg("id"), py::arg("action"), py::arg("ok"), py::arg("bytes_freed"),
            py::arg("detail"))
        .def("report", [](Session& s) { return unwrap(without_gil([&] { return s.report(); })); })
        .def(
            "dump",
            [](Session& s, const std::string& path) {
                check(without_gil([&] { return s.dump(path); }));
            },
            py::arg("path") = std::string())
        .def("request_dump", &Session::request_dump)
        .def(
            "replay",
            [](Session& s, const std::string& path) {
                check(without_gil([&] { return s.replay(path); }));
            },
            py::arg("path"))
        .def(
            "whatif",
            [](Session& s, const WhatIfOptions& options) {
                return unwrap(without_gil([&] { return s.whatif(options); }));
            },
            // No default: WhatIfOptions is bound after the session (bind_whatif).
            py::arg("options"))
        .def(
            "record_flight_recorder",
            [](Session& s, const py::bytes& dump, int rank) {
                std::string bytes = dump;  // copied under the GIL, read without it
                check(without_gil([&] { return s.record_flight_recorder(bytes, rank); }));
            },
            py::arg("dump"), py::arg("rank") = -1)
        .def("status", [](const Session& s) { return without_gil([&] { return s.status(); }); })
        .def(
            "pause_capture",
            [](Session& s, const std::string& reason) {
                check(without_gil([&] { return s.pause_capture(reason); }));
            },
            py::arg("reason"))
        .def("resume_capture",
             [](Session& s) { check(without_gil([&] { return s.resume_capture(); })); });
}

}  // namespace gpudiag::python

// SPDX-License-Identifier: Apache-2.0
// The C API: a shim over Session and analyze_files. Every entry point is a firewall: it catches
// everything, maps Status to a code, and keeps the message for gpudiag_last_error().
#include <gpudiag/gpudiag.h>
#include <gpudiag/gpudiag.hpp>
#include <gpudiag/session.hpp>
#include <gpudiag/whatif.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

struct gpudiag_session {
    std::unique_ptr<gpudiag::Session> session;
    gpudiag_report_fn on_report = nullptr;
    void* on_report_user_data = nullptr;
};

namespace {

thread_local std::string g_last_error;

gpudiag_status_t to_c(const gpudiag::Status& s) noexcept {
    if (s.is_ok()) {
        g_last_error.clear();
        return GPUDIAG_OK;
    }
    try {
        g_last_error = s.message();
    } catch (...) {
        g_last_error.clear();
    }
    return static_cast<gpudiag_status_t>(static_cast<int>(s.code()));
}

gpudiag_status_t fail(gpudiag::StatusCode code, const char* message) noexcept {
    return to_c(gpudiag::Status(code, message));
}

template <typename F>
gpudiag_status_t guarded(F&& body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc&) {
        return fail(gpudiag::StatusCode::kResourceExhausted, "out of memory");
    } catch (...) {
        return fail(gpudiag::StatusCode::kInternal, "internal error");
    }
}

char* copy_out(const std::string& text) noexcept {
    auto* out = static_cast<char*>(std::malloc(text.size() + 1));
    if (out != nullptr) std::memcpy(out, text.c_str(), text.size() + 1);
    return out;
}

#define GPUDIAG_C_REQUIRE_SESSION(s)                                                      \
    do {                                                                                  \
        if ((s) == nullptr || !(s)->session) {                                            \
            return fail(gpudiag::StatusCode::kInvalidArgument, "session handle is NULL"); \
        }                                                                                 \
    } while (false)

std::string rendered(const gpudiag::Report& report, gpudiag_format_t format) {
    switch (format) {
        case GPUDIAG_FORMAT_JSON: return gpudiag::render_json(report);
        case GPUDIAG_FORMAT_JSON_COMPACT: return gpudiag::render_json_line(report);
        case GPUDIAG_FORMAT_PROMETHEUS: return gpudiag::render_prometheus(report);
        default: return gpudiag::render_text(report);
    }
}

// A what-if's options from the C arguments, checked before anything runs.
gpudiag_status_t whatif_request(const char* settings, gpudiag_format_t format, char** out,
                                gpudiag::WhatIfOptions& options) {
    if (out == nullptr) return fail(gpudiag::StatusCode::kInvalidArgument, "out is NULL");
    *out = nullptr;
    if (format != GPUDIAG_FORMAT_TEXT && format != GPUDIAG_FORMAT_JSON) {
        return fail(gpudiag::StatusCode::kInvalidArgument,
                    "a what-if is rendered as GPUDIAG_FORMAT_TEXT or GPUDIAG_FORMAT_JSON");
    }
    if (settings != nullptr && *settings != '\0') options.settings.emplace_back(settings);
    return GPUDIAG_OK;
}

gpudiag_status_t whatif_out(const gpudiag::Result<gpudiag::WhatIfResult>& result,
                            gpudiag_format_t format, char** out) {
    if (!result) return to_c(result.status());
    *out = copy_out(format == GPUDIAG_FORMAT_JSON ? gpudiag::whatif_json(*result)
                                                  : gpudiag::whatif_text(*result));
    if (*out == nullptr) return fail(gpudiag::StatusCode::kResourceExhausted, "out of memory");
    return to_c(gpudiag::Status::ok());
}

}  // namespace

extern "C" {

const char* gpudiag_version(void) {
    return gpudiag::version();
}
const char* gpudiag_last_error(void) {
    return g_last_error.c_str();
}
void gpudiag_free(char* text) {
    std::free(text);
}

void gpudiag_session_options_init(gpudiag_session_options_t* o) {
    if (o == nullptr) return;
    std::memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    gpudiag::SessionOptions defaults;
    o->capture_gpu = defaults.capture_gpu ? 1 : 0;
    o->deep = defaults.deep ? 1 : 0;
    o->nvml_hz = defaults.nvml_hz;
    o->queue_capacity = defaults.queue_capacity;
    o->flush_period_ms = defaults.flush_period_ms;
    o->report_period_ms = defaults.report_period_ms;
    o->record_max_bytes = defaults.record_max_bytes;
    o->record_window_s = defaults.record_window_s;
    o->record_window_bytes = defaults.record_window_bytes;
    o->cost_budget_cpu_share = defaults.cost_budget.cpu_share;
    o->cost_budget_step_share = defaults.cost_budget.step_share;
    o->cost_budget_period_ms = defaults.cost_budget.period_ms;
}

gpudiag_status_t gpudiag_session_create(const gpudiag_session_options_t* o,
                                        gpudiag_session_t** out) {
    return guarded([&]() -> gpudiag_status_t {
        if (out == nullptr) return fail(gpudiag::StatusCode::kInvalidArgument, "out is NULL");
        *out = nullptr;
        gpudiag_session_options_t defaults;
        if (o == nullptr) {
            gpudiag_session_options_init(&defaults);
            o = &defaults;
        }
        // Every field up to record_window_bytes is in every struct that carries its size; later
        // fields, when there are some, are read only when `size` covers them.
        constexpr std::size_t kFirstVersion =
            offsetof(gpudiag_session_options_t, record_window_bytes) + sizeof(uint64_t);
        if (o->size < kFirstVersion) {
            return to_c(
                gpudiag::invalid_argument(fmt::format("options.size is {}: fill the options with "
                                                      "gpudiag_session_options_init() first",
                                                      o->size)));
        }
        auto handle = std::make_unique<gpudiag_session>();
        gpudiag::SessionOptions options;
        if (o->record_path != nullptr) options.record_path = o->record_path;
        options.capture_gpu = o->capture_gpu != 0;
        options.deep = o->deep != 0;
        options.nvml_hz = o->nvml_hz;
        options.queue_capacity = o->queue_capacity;
        options.flush_period_ms = o->flush_period_ms;
        options.report_period_ms = o->report_period_ms;
        options.record_max_bytes = o->record_max_bytes;
        options.record_window_s = o->record_window_s;
        options.record_window_bytes = o->record_window_bytes;
        // Appended later: an older caller's struct ends before them, and keeps the defaults.
        if (o->size >= offsetof(gpudiag_session_options_t, cost_budget_period_ms) +
                           sizeof(o->cost_budget_period_ms)) {
            options.cost_budget.cpu_share = o->cost_budget_cpu_share;
            options.cost_budget.step_share = o->cost_budget_step_share;
            options.cost_budget.period_ms = o->cost_budget_period_ms;
        }
        if (o->on_report != nullptr) {
            gpudiag_report_fn fn = o->on_report;
            void* user = o->on_report_user_data;
            options.on_report = [fn, user](const gpudiag::Report& r) {
                std::string json = gpudiag::render_json(r);
                fn(json.c_str(), user);
            };
        }
        auto session = gpudiag::Session::create(std::move(options));
        if (!session) return to_c(session.status());
        handle->session = std::move(*session);
        *out = handle.release();
        return GPUDIAG_OK;
    });
}

void gpudiag_session_destroy(gpudiag_session_t* s) {
    try {
        delete s;  // ~Session stops capture if it runs
    } catch (...) {
    }
}

gpudiag_status_t gpudiag_session_start(gpudiag_session_t* s) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    return guarded([&] { return to_c(s->session->start()); });
}

gpudiag_status_t gpudiag_session_stop(gpudiag_session_t* s) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    return guarded([&] { return to_c(s->session->stop()); });
}

gpudiag_status_t gpudiag_session_record_allocation(gpudiag_session_t* s, int device,
                                                   uint64_t address, uint64_t bytes,
                                                   const char* site) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    return guarded([&] {
        return to_c(
            s->session->record_allocation(device, address, bytes, site == nullptr ? "" : site));
    });
}

gpudiag_status_t gpudiag_session_record_free(gpudiag_session_t* s, int device, uint64_t address,
                                             uint64_t bytes) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    return guarded([&] { return to_c(s->session->record_free(device, address, bytes)); });
}

gpudiag_status_t gpudiag_session_pause_capture(gpudiag_session_t* s, const char* reason) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    return guarded(
        [&] { return to_c(s->session->pause_capture(reason == nullptr ? "paused" : reason)); });
}

gpudiag_status_t gpudiag_session_resume_capture(gpudiag_session_t* s) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    return guarded([&] { return to_c(s->session->resume_capture()); });
}

gpudiag_status_t gpudiag_session_dump(gpudiag_session_t* s, const char* path) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    return guarded([&] { return to_c(s->session->dump(path == nullptr ? "" : path)); });
}

gpudiag_status_t gpudiag_session_record_flight_recorder(gpudiag_session_t* s, const void* dump,
                                                        size_t size, int rank) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    if (dump == nullptr && size != 0) {
        return fail(gpudiag::StatusCode::kInvalidArgument, "dump is NULL");
    }
    return guarded([&] {
        const std::string_view bytes(static_cast<const char*>(dump), dump == nullptr ? 0 : size);
        return to_c(s->session->record_flight_recorder(bytes, rank));
    });
}

gpudiag_status_t gpudiag_session_whatif(gpudiag_session_t* s, const char* settings,
                                        gpudiag_format_t format, char** out) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    return guarded([&]() -> gpudiag_status_t {
        gpudiag::WhatIfOptions options;
        const gpudiag_status_t checked = whatif_request(settings, format, out, options);
        if (checked != GPUDIAG_OK) return checked;
        return whatif_out(s->session->whatif(options), format, out);
    });
}

void gpudiag_session_request_dump(gpudiag_session_t* s) {
    if (s != nullptr && s->session) s->session->request_dump();
}

namespace {

// A marker is taken while the session runs; before start() or after stop() it is not recorded,
// and the caller is told so rather than given success.
gpudiag_status_t marked(gpudiag_session_t* s) {
    if (s->session->running()) return to_c(gpudiag::Status::ok());
    return fail(gpudiag::StatusCode::kFailedPrecondition,
                "the session is not running (start it first; or it has stopped): the marker was "
                "not recorded");
}

}  // namespace

gpudiag_status_t gpudiag_session_step_begin(gpudiag_session_t* s, uint64_t step) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    s->session->step_begin(step);
    return marked(s);
}

gpudiag_status_t gpudiag_session_step_end(gpudiag_session_t* s, uint64_t step) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    s->session->step_end(step);
    return marked(s);
}

gpudiag_status_t gpudiag_session_phase_begin(gpudiag_session_t* s, const char* name) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    if (name == nullptr) return fail(gpudiag::StatusCode::kInvalidArgument, "phase name is NULL");
    s->session->phase_begin(name);
    return marked(s);
}

gpudiag_status_t gpudiag_session_phase_end(gpudiag_session_t* s) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    s->session->phase_end();
    return marked(s);
}

gpudiag_status_t gpudiag_session_input_wait_begin(gpudiag_session_t* s) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    s->session->input_wait_begin();
    return marked(s);
}

gpudiag_status_t gpudiag_session_input_wait_end(gpudiag_session_t* s) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    s->session->input_wait_end();
    return marked(s);
}

gpudiag_status_t gpudiag_session_watch_memory(gpudiag_session_t* s, uint64_t level_bytes,
                                              gpudiag_watch_fn callback, void* user_data,
                                              uint64_t* watch_id) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    if (callback == nullptr) return fail(gpudiag::StatusCode::kInvalidArgument, "callback is NULL");
    return guarded([&]() -> gpudiag_status_t {
        auto id = s->session->watch_memory(level_bytes, [callback, user_data](std::uint64_t bytes) {
            callback(bytes, user_data);
        });
        if (!id) return to_c(id.status());
        if (watch_id != nullptr) *watch_id = *id;
        return GPUDIAG_OK;
    });
}

gpudiag_status_t gpudiag_session_unwatch_memory(gpudiag_session_t* s, uint64_t watch_id) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    return guarded([&] { return to_c(s->session->unwatch_memory(watch_id)); });
}

gpudiag_status_t gpudiag_session_report(gpudiag_session_t* s, gpudiag_format_t format, char** out) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    if (out == nullptr) return fail(gpudiag::StatusCode::kInvalidArgument, "out is NULL");
    *out = nullptr;
    if (format < GPUDIAG_FORMAT_TEXT || format > GPUDIAG_FORMAT_PROMETHEUS) {
        return fail(gpudiag::StatusCode::kInvalidArgument, "unknown format");
    }
    return guarded([&]() -> gpudiag_status_t {
        auto report = s->session->report();
        if (!report) return to_c(report.status());
        *out = copy_out(rendered(*report, format));
        if (*out == nullptr) return fail(gpudiag::StatusCode::kResourceExhausted, "out of memory");
        return GPUDIAG_OK;
    });
}

gpudiag_status_t gpudiag_session_status(gpudiag_session_t* s, const char** level, uint64_t* events,
                                        uint64_t* dropped) {
    GPUDIAG_C_REQUIRE_SESSION(s);
    return guarded([&]() -> gpudiag_status_t {
        gpudiag::CaptureStatus st = s->session->status();
        if (level != nullptr) *level = gpudiag::capture_level_name(st.level);
        if (events != nullptr) *events = st.events;
        if (dropped != nullptr) *dropped = st.dropped;
        return GPUDIAG_OK;
    });
}

gpudiag_status_t gpudiag_analyze_files(const char* const* paths, size_t count,
                                       gpudiag_format_t format, char** out) {
    if (out == nullptr) return fail(gpudiag::StatusCode::kInvalidArgument, "out is NULL");
    *out = nullptr;
    if (paths == nullptr || count == 0) {
        return fail(gpudiag::StatusCode::kInvalidArgument, "no input files given");
    }
    if (format < GPUDIAG_FORMAT_TEXT || format > GPUDIAG_FORMAT_PROMETHEUS) {
        return fail(gpudiag::StatusCode::kInvalidArgument, "unknown format");
    }
    return guarded([&]() -> gpudiag_status_t {
        std::vector<std::string> files;
        for (size_t i = 0; i < count; ++i) {
            if (paths[i] == nullptr) {
                return fail(gpudiag::StatusCode::kInvalidArgument, "a path is NULL");
            }
            files.emplace_back(paths[i]);
        }
        auto report = gpudiag::analyze_files(files);
        if (!report) return to_c(report.status());
        *out = copy_out(rendered(*report, format));
        if (*out == nullptr) return fail(gpudiag::StatusCode::kResourceExhausted, "out of memory");
        return GPUDIAG_OK;
    });
}

gpudiag_status_t gpudiag_whatif_file(const char* path, const char* settings,
                                     gpudiag_format_t format, char** out) {
    return guarded([&]() -> gpudiag_status_t {
        gpudiag::WhatIfOptions options;
        const gpudiag_status_t checked = whatif_request(settings, format, out, options);
        if (checked != GPUDIAG_OK) return checked;
        if (path == nullptr) return fail(gpudiag::StatusCode::kInvalidArgument, "path is NULL");
        return whatif_out(gpudiag::whatif_file(path, options), format, out);
    });
}

}  // extern "C"

// SPDX-License-Identifier: Apache-2.0
// SessionOptions from GPUDIAG_* environment variables: one table, read by services that cannot
// change their code, by the CUDA injection (`gpudiag run -- ./service`), and by docs and --help.
#include <gpudiag/session.hpp>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace gpudiag {
namespace {

using Apply = bool (*)(const char* text, SessionOptions& o);

bool parse_uint(const char* text, std::uint64_t max, std::uint64_t& out) {
    if (*text == '\0' || *text == '-' || *text == '+') return false;
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || v > max) return false;
    out = v;
    return true;
}

bool parse_double(const char* text, double max, double& out) {
    if (*text == '\0') return false;
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (errno != 0 || *end != '\0' || !std::isfinite(v) || v < 0 || v > max) return false;
    out = v;
    return true;
}

bool parse_bool(const char* text, bool& out) {
    const std::string v(text);
    if (v == "1" || v == "true" || v == "yes" || v == "on") {
        out = true;
        return true;
    }
    if (v == "0" || v == "false" || v == "no" || v == "off") {
        out = false;
        return true;
    }
    return false;
}

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

struct Variable {
    const char* name;
    const char* accepts;
    const char* sets;
    Apply apply;
};

// The one table. Validation of combinations (a window without a path, ...) stays in
// Session::create, which names the option.
constexpr Variable kVariables[] = {
    {"GPUDIAG_RECORD", "a path", "record_path: the recording",
     [](const char* t, SessionOptions& o) {
         o.record_path = t;
         return true;
     }},
    {"GPUDIAG_RECORD_MAX_MB", "a whole number of MiB, 0 = no cap",
     "record_max_bytes: the recording file's size cap",
     [](const char* t, SessionOptions& o) {
         std::uint64_t mib = 0;
         if (!parse_uint(t, std::uint64_t{1} << 40, mib)) return false;
         o.record_max_bytes = mib * kMiB;
         return true;
     }},
    {"GPUDIAG_WINDOW_S", "seconds, 0 = off", "record_window_s: keep only the last N seconds",
     [](const char* t, SessionOptions& o) { return parse_double(t, 1e7, o.record_window_s); }},
    {"GPUDIAG_WINDOW_MB", "a whole number of MiB", "record_window_bytes: the window's memory",
     [](const char* t, SessionOptions& o) {
         std::uint64_t mib = 0;
         if (!parse_uint(t, std::uint64_t{1} << 30, mib) || mib == 0) return false;
         o.record_window_bytes = mib * kMiB;
         return true;
     }},
    {"GPUDIAG_CAPTURE_GPU", "1 or 0", "capture_gpu: CUPTI activity",
     [](const char* t, SessionOptions& o) { return parse_bool(t, o.capture_gpu); }},
    {"GPUDIAG_DEEP", "1 or 0", "deep: allocation call sites (takes CUPTI's subscriber)",
     [](const char* t, SessionOptions& o) { return parse_bool(t, o.deep); }},
    {"GPUDIAG_NVML_HZ", "samples a second, 0 = off", "nvml_hz: NVML sampling",
     [](const char* t, SessionOptions& o) { return parse_double(t, 1000, o.nvml_hz); }},
    {"GPUDIAG_COLLECTIVE_TIMEOUT_S", "seconds, 0 = off",
     "collective_timeout_s: dump the window when a collective is in flight this long",
     [](const char* t, SessionOptions& o) { return parse_double(t, 1e7, o.collective_timeout_s); }},
    {"GPUDIAG_QUEUE_CAPACITY", "a power of two >= 64", "queue_capacity: the hand-off's events",
     [](const char* t, SessionOptions& o) {
         std::uint64_t n = 0;
         if (!parse_uint(t, std::uint64_t{1} << 30, n)) return false;
         o.queue_capacity = static_cast<std::uint32_t>(n);
         return true;
     }},
    {"GPUDIAG_HTTP", "host:port, e.g. 127.0.0.1:0 (docs/http.md)",
     "http: answer /metrics, /report, /dump, /healthz over HTTP",
     [](const char* t, SessionOptions& o) {
         o.http = t;
         return true;
     }},
    {"GPUDIAG_HTTP_TOKEN", "a secret", "http_token: the bearer token HTTP requests must carry",
     [](const char* t, SessionOptions& o) {
         o.http_token = t;
         return true;
     }},
    {"GPUDIAG_FLUSH_MS", "milliseconds", "flush_period_ms: how often events are analysed",
     [](const char* t, SessionOptions& o) {
         std::uint64_t ms = 0;
         if (!parse_uint(t, 3'600'000, ms) || ms == 0) return false;
         o.flush_period_ms = static_cast<std::uint32_t>(ms);
         return true;
     }},
};

}  // namespace

Result<SessionOptions> session_options_from_environment(SessionOptions defaults) noexcept {
    try {
        for (const Variable& v : kVariables) {
            const char* text = std::getenv(v.name);
            if (text == nullptr || *text == '\0') continue;
            if (!v.apply(text, defaults)) {
                return invalid_argument(std::string(v.name) + "=\"" + text + "\": expected " +
                                        v.accepts);
            }
        }
        return defaults;
    } catch (...) {
        return resource_exhausted("out of memory reading the environment");
    }
}

std::vector<std::pair<std::string, std::string>> session_environment_variables() {
    std::vector<std::pair<std::string, std::string>> out;
    for (const Variable& v : kVariables) {
        out.emplace_back(v.name, std::string(v.sets) + " (" + v.accepts + ")");
    }
    return out;
}

}  // namespace gpudiag

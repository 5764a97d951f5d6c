// SPDX-License-Identifier: Apache-2.0
// Format detection by content (magic bytes, gzip peeked through zlib) and dispatch to readers.
#include <gpudiag/analyze.hpp>

#include "importers/open_source.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>

namespace gpudiag {
namespace {

constexpr unsigned char kRecordingMagic[8] = {'G', 'P', 'U', 'D', 'I', 'A', 'G', '\0'};
constexpr char kSqliteMagic[16] = "SQLite format 3";  // with its terminating NUL: 16 bytes

bool ends_with(const std::string& s, const char* suffix) {
    const std::size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool is_space(unsigned char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

bool starts_with_at(const unsigned char* text, std::size_t n, std::string_view prefix) {
    return n >= prefix.size() && std::memcmp(text, prefix.data(), prefix.size()) == 0;
}

// JSON text: a gpudiag report (render_json writes "schema_version" first), a Flight Recorder
// dump (its writer sorts its keys, so one of these comes first), else a trace.
InputFormat classify_json(const unsigned char* text, std::size_t n) {
    std::size_t i = 0;
    while (i < n && is_space(text[i])) ++i;
    if (i < n && text[i] == '{') {
        ++i;
        while (i < n && is_space(text[i])) ++i;
        if (starts_with_at(text + i, n - i, "\"schema_version\"")) return InputFormat::kReportJson;
        for (std::string_view key : {"\"comm_lib_version\"", "\"entries\"", "\"nccl_comm_state\"",
                                     "\"pg_config\"", "\"pg_status\""}) {
            if (starts_with_at(text + i, n - i, key)) return InputFormat::kFlightRecorder;
        }
    }
    return InputFormat::kKinetoJson;
}

// A pickle: a Flight Recorder dump names one of its own keys in its first bytes (the dict's
// first keys), a memory snapshot names its segments; anything else is read as a snapshot, whose
// reader says what it lacks.
InputFormat classify_pickle(const unsigned char* head, std::size_t n) {
    const std::string_view text(reinterpret_cast<const char*>(head), n);
    const std::size_t snapshot = std::min(text.find("segments"), text.find("device_traces"));
    for (std::string_view key : {"entries", "pg_config", "pg_status", "nccl_comm_state"}) {
        if (text.find(key) < snapshot) return InputFormat::kFlightRecorder;
    }
    return InputFormat::kTorchSnapshot;
}

// The format of what `path` holds, from its first bytes, inflated when it is gzip (zlib reads a
// plain file through as it is, so one open tells both).
InputFormat classify_file(gzFile f) {
    unsigned char buf[512];
    const int n = gzread(f, buf, sizeof buf);
    if (n <= 0) return InputFormat::kUnknown;
    const auto size = static_cast<std::size_t>(n);
    if (gzdirect(f) == 0) {  // compressed: a pickle, or JSON
        for (std::size_t i = 0; i < size; ++i) {
            const unsigned char c = buf[i];
            if (c == 0x80) return classify_pickle(buf + i, size - i);  // the protocol opcode
            if (is_space(c)) continue;
            if (c == '{' || c == '[') return classify_json(buf + i, size - i);
            return InputFormat::kUnknown;
        }
        return InputFormat::kUnknown;
    }
    return detail::classify_content(std::string_view(reinterpret_cast<const char*>(buf), size));
}

}  // namespace

namespace detail {

InputFormat classify_content(std::string_view text) noexcept {
    const auto* head = reinterpret_cast<const unsigned char*>(text.data());
    const std::size_t n = text.size();
    if (n >= 8 && std::memcmp(head, kRecordingMagic, 8) == 0) return InputFormat::kRecording;
    if (n >= 16 && std::memcmp(head, kSqliteMagic, 16) == 0) return InputFormat::kNsightSqlite;
    if (n >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) return classify_pickle(head, n);
    for (std::size_t i = 0; i < n; ++i) {
        unsigned char c = head[i];
        if (is_space(c)) continue;
        if (i + 2 < n && c == 0xEF && head[i + 1] == 0xBB && head[i + 2] == 0xBF) {  // UTF-8 BOM
            i += 2;
            continue;
        }
        return (c == '{' || c == '[') ? classify_json(head + i, n - i) : InputFormat::kUnknown;
    }
    return InputFormat::kUnknown;
}

}  // namespace detail

Result<InputFormat> detect_format(const std::string& path) noexcept {
    try {
        errno = 0;
        gzFile f = gzopen(path.c_str(), "rb");
        if (f == nullptr) {
            if (errno == ENOENT) return not_found(path + ": no such file");
            return io_error(path + ": cannot open (" + std::strerror(errno) + ")");
        }
        const InputFormat found = classify_file(f);
        const bool empty = found == InputFormat::kUnknown && gztell(f) == 0;
        gzclose(f);
        if (empty) return corrupt_data(path + ": the file is empty");
        if (found == InputFormat::kUnknown &&
            (ends_with(path, ".nsys-rep") || ends_with(path, ".qdrep"))) {
            return unsupported(path +
                               ": an Nsight Systems report, which gpudiag reads once exported "
                               "to SQLite: nsys export --type sqlite --output report.sqlite " +
                               path);
        }
        if (found == InputFormat::kUnknown) {
            return unsupported(path +
                               ": not a format gpudiag reads (expected a .gpudiag recording, a "
                               "PyTorch profiler/Kineto JSON trace, plain or .gz, a torch "
                               "memory snapshot pickle, an Nsight Systems SQLite export, a PyTorch "
                               "Flight Recorder dump, or a gpudiag JSON report)");
        }
        return found;
    } catch (...) {
        return io_error(path + ": cannot read");
    }
}

namespace detail {

Result<std::unique_ptr<EventSource>> open_event_source(const std::string& path,
                                                       const AnalysisOptions& options) {
    auto format = detect_format(path);
    if (!format) return format.status();
    return open_source_as(path, *format, options);
}

Result<std::unique_ptr<EventSource>> open_source_as(const std::string& path, InputFormat format,
                                                    const AnalysisOptions& options) {
    switch (format) {
        case InputFormat::kRecording: return open_recording_source(path, options);
        case InputFormat::kKinetoJson: return open_kineto_source(path, options);
        case InputFormat::kTorchSnapshot: return open_snapshot_source(path, options);
        case InputFormat::kReportJson:
            return invalid_argument(path +
                                    ": a gpudiag report holds findings, not events; "
                                    "analyze_files reads it back as it is");
        case InputFormat::kNsightSqlite: return open_nsight_source(path, options);
        case InputFormat::kFlightRecorder: return open_flight_recorder_source(path, options);
        case InputFormat::kUnknown: break;
    }
    return unsupported(path + ": unknown format");
}

}  // namespace detail
}  // namespace gpudiag

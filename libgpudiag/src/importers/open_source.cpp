// SPDX-License-Identifier: Apache-2.0
// Format detection by content (magic bytes, gzip peeked through zlib) and dispatch to readers.
#include <gpudiag/analyze.hpp>

#include "importers/open_source.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

namespace gpudiag {
namespace {

constexpr unsigned char kRecordingMagic[8] = {'G', 'P', 'U', 'D', 'I', 'A', 'G', '\0'};
constexpr char kSqliteMagic[16] = "SQLite format 3";  // with its terminating NUL: 16 bytes

bool ends_with(const std::string& s, const char* suffix) {
    const std::size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// The first non-whitespace byte of up to `n` decompressed bytes of a gzip file.
int first_inflated_byte(const std::string& path) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (f == nullptr) return -1;
    char buf[512];
    int n = gzread(f, buf, sizeof buf);
    gzclose(f);
    for (int i = 0; i < n; ++i) {
        unsigned char c = static_cast<unsigned char>(buf[i]);
        if (c == 0x80) return c;  // pickle protocol opcode is not whitespace-prefixed
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c;
    }
    return -1;
}

InputFormat classify(const unsigned char* head, std::size_t n, const std::string& path) {
    if (n >= 8 && std::memcmp(head, kRecordingMagic, 8) == 0) return InputFormat::kRecording;
    if (n >= 16 && std::memcmp(head, kSqliteMagic, 16) == 0) return InputFormat::kNsightSqlite;
    if (n >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) {
        return InputFormat::kTorchSnapshot;
    }
    if (n >= 2 && head[0] == 0x1f && head[1] == 0x8b) {
        int c = first_inflated_byte(path);
        if (c == '{' || c == '[') return InputFormat::kKinetoJson;
        if (c == 0x80) return InputFormat::kTorchSnapshot;
        return InputFormat::kUnknown;
    }
    for (std::size_t i = 0; i < n; ++i) {
        unsigned char c = head[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (i + 2 < n && c == 0xEF && head[i + 1] == 0xBB && head[i + 2] == 0xBF) {  // UTF-8 BOM
            i += 2;
            continue;
        }
        return (c == '{' || c == '[') ? InputFormat::kKinetoJson : InputFormat::kUnknown;
    }
    return InputFormat::kUnknown;
}

}  // namespace

Result<InputFormat> detect_format(const std::string& path) noexcept {
    try {
        std::ifstream in(path, std::ios::binary);
        if (!in) {
            if (errno == ENOENT) return not_found(path + ": no such file");
            return io_error(path + ": cannot open (" + std::strerror(errno) + ")");
        }
        unsigned char head[64] = {};
        in.read(reinterpret_cast<char*>(head), sizeof head);
        auto n = static_cast<std::size_t>(in.gcount());
        if (n == 0) return corrupt_data(path + ": the file is empty");
        InputFormat f = classify(head, n, path);
        if (f == InputFormat::kUnknown && (ends_with(path, ".nsys-rep") || ends_with(path, ".qdrep"))) {
            return unsupported(path + ": an Nsight Systems report, which gpudiag reads once exported "
                                      "to SQLite: nsys export --type sqlite --output report.sqlite " +
                               path);
        }
        if (f == InputFormat::kUnknown) {
            return unsupported(path +
                               ": not a format gpudiag reads (expected a .gpudiag recording, a "
                               "PyTorch profiler/Kineto JSON trace, plain or .gz, a torch "
                               "memory snapshot pickle, or an Nsight Systems SQLite export)");
        }
        return f;
    } catch (...) {
        return io_error(path + ": cannot read");
    }
}

namespace detail {

Result<std::unique_ptr<EventSource>> open_event_source(const std::string& path,
                                                       const AnalysisOptions& options) {
    auto format = detect_format(path);
    if (!format) return format.status();
    switch (*format) {
        case InputFormat::kRecording: return open_recording_source(path, options);
        case InputFormat::kKinetoJson: return open_kineto_source(path, options);
        case InputFormat::kTorchSnapshot: return open_snapshot_source(path, options);
        case InputFormat::kNsightSqlite: return open_nsight_source(path, options);
        case InputFormat::kUnknown: break;
    }
    return unsupported(path + ": unknown format");
}

}  // namespace detail
}  // namespace gpudiag

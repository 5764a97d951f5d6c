// SPDX-License-Identifier: Apache-2.0
// Hostile sizes: inputs built to exhaust memory or time are refused (or read) within stated
// limits, with an input error whose message names the real problem, and never take the host
// process down. Each case runs analyze_files in a child process under the limits:
//   address space 1 GiB (RLIMIT_AS; not under sanitizers, whose shadow memory needs more),
//   peak resident memory 512 MiB, and 120 s of wall time (a loaded CI machine; each case takes
//   seconds).
// docs/reliability.md quotes these limits and what each case measured.
#include <gpudiag/analyze.hpp>
#include <gpudiag/recording.hpp>

#include "recording/file_layout.hpp"
#include "sanitized.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>
#include <zlib.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

using testing::TempDir;

namespace fs = std::filesystem;

constexpr long kPeakRssLimitKiB = 512L << 10;
constexpr int kWallLimitSeconds = 120;

void write_file(const std::string& path, std::string_view bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A gzip file of `head`, then `filler` repeated `repeat` times, then `tail`, deflated as it goes.
void write_gzip(const std::string& path, const std::string& head, const std::string& filler,
                std::uint64_t repeat, const std::string& tail) {
    gzFile f = gzopen(path.c_str(), "wb1");
    ASSERT_NE(f, nullptr);
    gzwrite(f, head.data(), static_cast<unsigned>(head.size()));
    std::string block;
    while (block.size() < (1u << 20)) block += filler;
    const std::uint64_t total = filler.size() * repeat;
    for (std::uint64_t done = 0; done < total;) {
        const auto n = static_cast<unsigned>(std::min<std::uint64_t>(block.size(), total - done));
        ASSERT_EQ(gzwrite(f, block.data(), n), static_cast<int>(n));
        done += n;
    }
    gzwrite(f, tail.data(), static_cast<unsigned>(tail.size()));
    gzclose(f);
}

struct Outcome {
    bool exited = false;  // the child ended normally (not killed, not out of memory)
    int code = -1;        // StatusCode of analyze_files, or 0 when it gave a report
    std::string message;  // the error message, or the report's first missing line
    bool complete = false;
    std::uint64_t events = 0;
    long peak_rss_kib = 0;
    double seconds = 0;
};

// analyze_files(path) in a child under the limits; what it returned comes back over a pipe.
Outcome analyze_in_child(const std::string& path) {
    Outcome out;
    int fds[2];
    if (::pipe(fds) != 0) return out;
    const auto start = std::chrono::steady_clock::now();
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(fds[0]);
        ::alarm(kWallLimitSeconds);
#ifndef GPUDIAG_TEST_SANITIZED  // sanitizers reserve terabytes of address space
        constexpr rlim_t kAddressSpaceLimit = rlim_t{1} << 30;
        const rlimit as{kAddressSpaceLimit, kAddressSpaceLimit};
        ::setrlimit(RLIMIT_AS, &as);
#endif
        auto r = analyze_files({path});
        std::string msg;
        int code = 0;
        std::uint64_t events = 0;
        bool complete = false;
        if (r.is_ok()) {
            complete = r->input.complete;
            events = r->input.events;
            msg = r->input.missing.empty() ? std::string() : r->input.missing.front();
        } else {
            code = static_cast<int>(r.status().code());
            msg = r.status().message();
        }
        std::string blob = std::to_string(code) + "\n" + (complete ? "1" : "0") + "\n" +
                           std::to_string(events) + "\n" + msg;
        const char* p = blob.data();
        std::size_t left = blob.size();
        while (left > 0) {
            const ssize_t n = ::write(fds[1], p, left);
            if (n <= 0) break;
            p += n;
            left -= static_cast<std::size_t>(n);
        }
        ::_exit(0);
    }
    ::close(fds[1]);
    std::string blob;
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) blob.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    rusage usage{};
    ::wait4(child, &status, 0, &usage);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.peak_rss_kib = usage.ru_maxrss;
    out.exited = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    const auto a = blob.find('\n');
    const auto b = a == std::string::npos ? a : blob.find('\n', a + 1);
    const auto c = b == std::string::npos ? b : blob.find('\n', b + 1);
    if (c != std::string::npos) {
        out.code = std::stoi(blob.substr(0, a));
        out.complete = blob.substr(a + 1, b - a - 1) == "1";
        out.events = std::stoull(blob.substr(b + 1, c - b - 1));
        out.message = blob.substr(c + 1);
    }
    return out;
}

// Within the limits, ended normally, and an input error (or a report) that says what is wrong.
void expect_within_limits(const Outcome& o, const std::string& what) {
    SCOPED_TRACE(what);
    std::printf("hostile input: %-48s %6.1f s  peak RSS %5ld MiB  -> %s%s\n", what.c_str(),
                o.seconds, o.peak_rss_kib >> 10,
                o.code == 0 ? "report: " : "refused: ", o.message.substr(0, 110).c_str());
    ASSERT_TRUE(o.exited) << "the child was killed (out of memory, or past " << kWallLimitSeconds
                          << " s)";
    EXPECT_LE(o.peak_rss_kib, kPeakRssLimitKiB);
    EXPECT_LT(o.seconds, kWallLimitSeconds);
}

bool input_error(int code) {
    const auto c = static_cast<StatusCode>(code);
    return c == StatusCode::kCorruptData || c == StatusCode::kUnsupported;
}

const std::string kEvent =
    R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 2, "args": {"device": 0, "stream": 7}})";

TEST(HostileInput, GzipBombIsRefusedAfterReadingLittle) {
    TempDir dir("hostile");
    // 1 GiB of '[' behind a trace's start: no boundary between two events anywhere.
    const std::string bomb = dir.file("bomb.json.gz");
    write_gzip(bomb, R"({"traceEvents": [)", "[", std::uint64_t{1} << 30, "");
    const Outcome o = analyze_in_child(bomb);
    expect_within_limits(
        o, "gzip bomb, 1 GiB of '[' (" + std::to_string(fs::file_size(bomb) >> 10) + " KiB)");
    EXPECT_TRUE(input_error(o.code)) << o.code;
    EXPECT_NE(o.message.find("hold no boundary between two events"), std::string::npos)
        << o.message;
    // 1 GiB of zero bytes: not a format gpudiag reads, told from the first bytes.
    const std::string zeros = dir.file("zeros.json.gz");
    write_gzip(zeros, "", std::string(1, '\0'), std::uint64_t{1} << 30, "");
    const Outcome z = analyze_in_child(zeros);
    expect_within_limits(z, "gzip bomb, 1 GiB of zero bytes");
    EXPECT_TRUE(input_error(z.code)) << z.code;
}

TEST(HostileInput, SparseGigabytesBehindAJsonPrefix) {
    TempDir dir("hostile");
    const std::string path = dir.file("sparse.json");
    write_file(path, R"({"traceEvents": [)" + kEvent + ",\n" + kEvent + ",\n");
    fs::resize_file(path, std::uint64_t{2} << 30);  // sparse: no disk used
    const Outcome o = analyze_in_child(path);
    expect_within_limits(o, "2 GiB sparse file behind a JSON prefix");
    // The two events before the zeros are read; the report says where the text turned to zeros.
    ASSERT_EQ(o.code, 0) << o.message;
    EXPECT_FALSE(o.complete);
    EXPECT_EQ(o.events, 2u);
    EXPECT_NE(o.message.find("0x00, which JSON text cannot hold"), std::string::npos) << o.message;
    // With no event before the zeros: an input error that names them.
    const std::string bare = dir.file("bare.json");
    write_file(bare, R"({"traceEvents": [)");
    fs::resize_file(bare, std::uint64_t{2} << 30);
    const Outcome b = analyze_in_child(bare);
    expect_within_limits(b, "2 GiB sparse file, no event before the zeros");
    EXPECT_EQ(static_cast<StatusCode>(b.code), StatusCode::kCorruptData) << b.message;
    EXPECT_NE(b.message.find("0x00"), std::string::npos) << b.message;
}

TEST(HostileInput, DeeplyNestedJson) {
    TempDir dir("hostile");
    const std::string trace = dir.file("nested.json");
    write_file(
        trace,
        R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "stack": )" +
            std::string(200000, '[') + std::string(200000, ']') + R"(, "ts": 1, "dur": 1}]})");
    const Outcome t = analyze_in_child(trace);
    expect_within_limits(t, "trace with a field nested 200 000 deep");
    // Valid JSON: the field gpudiag does not read is skipped however deep, and the event read.
    EXPECT_EQ(t.code, 0) << t.message;
    EXPECT_TRUE(t.complete);
    EXPECT_EQ(t.events, 1u);
    // A saved report nested as deep through its ranks.
    std::string report;
    for (int i = 0; i < 100000; ++i) report += R"({"schema_version": 1, "ranks": [)";
    for (int i = 0; i < 100000; ++i) report += "]}";
    const std::string path = dir.file("nested_report.json");
    write_file(path, report);
    const Outcome r = analyze_in_child(path);
    expect_within_limits(r, "saved report nested 200 000 deep");
    EXPECT_TRUE(input_error(r.code)) << r.code << " " << r.message;
    EXPECT_NE(r.message.find("deep"), std::string::npos) << r.message;
}

TEST(HostileInput, PickleDeclaringHugeLengths) {
    TempDir dir("hostile");
    struct Case {
        const char* name;
        std::string opcode_and_length;
    };
    auto le = [](std::uint64_t v, int n) {
        std::string s;
        for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
        return s;
    };
    for (const Case& c : {Case{"BINUNICODE8 of 2^60 bytes", "\x8d" + le(1ull << 60, 8)},
                          Case{"BINBYTES8 of 2^63 bytes", "\x8e" + le(1ull << 63, 8)},
                          Case{"BINUNICODE of 4 GiB", "X" + le(0xFFFFFFFFu, 4)},
                          Case{"LONG4 of 2 GiB", "\x8b" + le(0x7FFFFFFFu, 4)}}) {
        const std::string path = dir.file("huge.pickle");
        write_file(path, std::string("\x80\x04", 2) + c.opcode_and_length + "abc.");
        const Outcome o = analyze_in_child(path);
        expect_within_limits(o, std::string("pickle declaring a ") + c.name);
        EXPECT_EQ(static_cast<StatusCode>(o.code), StatusCode::kCorruptData) << o.message;
        EXPECT_NE(o.message.find("but only 4 follow"), std::string::npos) << o.message;
    }
}

TEST(HostileInput, RecordingWithForgedChunkSizes) {
    namespace rec = detail::record;
    TempDir dir("hostile");
    const std::string path = dir.file("forged.gpudiag");
    StringTable strings;
    std::vector<Event> events(20000);
    for (std::size_t i = 0; i < events.size(); ++i) {
        events[i].kind = EventKind::kAnnotation;
        events[i].start_ns = events[i].end_ns = 1000 + i;
    }
    SourceInfo info;
    info.producer = "forge";
    RecordingWriterOptions options;
    options.chunk_bytes = 64 << 10;
    ASSERT_TRUE(write_recording(path, info, strings, events, SourceSummary{}, options).is_ok());
    std::ifstream in(path, std::ios::binary);
    std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    // Forge the third chunk's length (re-signing its header, as a hostile writer would): once
    // past the 64 MiB limit, once past the end of the file.
    std::size_t pos = rec::kFileHeaderBytes;
    for (int chunk = 0; chunk < 2; ++chunk) {
        auto h = rec::decode_chunk_header(reinterpret_cast<const unsigned char*>(&bytes[pos]));
        ASSERT_TRUE(h.has_value());
        pos += rec::kChunkHeaderBytes + h->payload_bytes;
    }
    for (const std::uint32_t forged : {0xFFFFFFF0u, 60u << 20}) {
        std::string copy = bytes;
        auto h = rec::decode_chunk_header(reinterpret_cast<const unsigned char*>(&copy[pos]));
        ASSERT_TRUE(h.has_value());
        h->payload_bytes = forged;
        rec::encode_chunk_header(*h, reinterpret_cast<unsigned char*>(&copy[pos]));
        write_file(path, copy);
        const Outcome o = analyze_in_child(path);
        expect_within_limits(
            o, "recording with a chunk claiming " + std::to_string(forged) + " bytes");
        ASSERT_EQ(o.code, 0) << o.message;
        EXPECT_FALSE(o.complete);
        // Only the forged chunk is lost: the walk resumes at the next one.
        EXPECT_EQ(o.events, events.size() - h->event_count);
        EXPECT_NE(o.message.find("claims"), std::string::npos) << o.message;
    }
}

TEST(HostileInput, GigabyteOfWhitespaceInsideValidGzipJson) {
    TempDir dir("hostile");
    const std::string path = dir.file("spaces.json.gz");
    write_gzip(path, R"({"traceEvents": [)" + kEvent + ",", " ", std::uint64_t{1} << 30,
               "\n" + kEvent + "]}");
    const Outcome o = analyze_in_child(path);
    expect_within_limits(o, "1 GiB of whitespace inside valid gzip JSON");
    ASSERT_EQ(o.code, 0) << o.message;
    EXPECT_TRUE(o.complete) << o.message;
    EXPECT_EQ(o.events, 2u);
}

}  // namespace
}  // namespace gpudiag

// SPDX-License-Identifier: Apache-2.0
// kill -9 while recording: a writer killed with SIGKILL at random moments leaves a file that opens
// and yields every chunk it wrote before the kill, and nothing else.
//
// The child records sequence-numbered events (strings chunks interleaved with events chunks) and,
// after each write to the file returns, tells the parent over a pipe how many events the file
// holds: those bytes are in the kernel's page cache, which SIGKILL cannot take back. The parent
// kills it after a random delay (during open, mid-chunk, between chunks), then checks that the
// file reads back contiguously from event 0 to at least the last count it was told, and that
// the analysis reports it as input cut short (never as capture drops).
//
// Runs: GPUDIAG_KILL_RUNS (default 50, the CI version; tools/kill_test.sh runs the long one),
// delays up to GPUDIAG_KILL_MAX_DELAY_MS (default 120), seed GPUDIAG_KILL_SEED (default: time).
#include <gpudiag/analyze.hpp>
#include <gpudiag/recording.hpp>

#include "recording_test_support.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

namespace gpudiag {
namespace {

using namespace testing_support;

std::uint64_t env_or(const char* name, std::uint64_t fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// Runs in the forked child: records sequence-numbered events forever. After every write that
// reached the file it sends the number of events the file then holds (8 bytes) to `report_fd`.
[[noreturn]] void write_until_killed(const std::string& path, int report_fd, std::uint32_t seed) {
    ::alarm(60);  // never outlive a parent that failed to kill us
    std::mt19937 rng(seed);
    StringTable strings;
    RecordingWriterOptions options;
    options.chunk_bytes = 64 << 10;  // 1024 events a chunk: many chunks, many boundaries
    RecordingWriter writer(options);
    if (!writer.open(path).is_ok()) ::_exit(2);
    SourceInfo info;
    info.producer = "kill-test";
    writer.begin(info, strings);
    std::uint64_t reported = 0;
    auto report = [&] {
        const std::uint64_t written = writer.events_written();
        if (written == reported) return;
        reported = written;
        if (::write(report_fd, &written, sizeof written) != sizeof written) ::_exit(4);
    };
    std::vector<Event> batch;
    for (std::uint64_t seq = 0;;) {
        // Batches of random size, flushed at random: chunks of every size end everywhere.
        batch.resize(1 + rng() % 200);
        for (auto& e : batch) {
            // A new name every 4096 events: strings chunks keep interleaving with events chunks.
            const StringId name = strings.intern("step_" + std::to_string(seq / 4096));
            e = Event{};
            e.kind = EventKind::kAnnotation;
            e.start_ns = seq;
            e.end_ns = seq;
            e.annotation.value = static_cast<std::int64_t>(seq);
            e.annotation.text = name;
            ++seq;
        }
        writer.consume(batch);
        report();
        if (rng() % 8 == 0) {
            if (!writer.flush().is_ok()) ::_exit(3);
            report();
        }
    }
}

struct KillRun {
    bool opened = false;         // the file header was complete
    std::uint64_t promised = 0;  // events the child said the file holds before the kill
    std::uint64_t read = 0;      // events read back
    std::uint64_t file_bytes = 0;
};

// One run: fork, let it write for `delay`, SIGKILL, check the file.
void run_once(const std::string& path, std::chrono::microseconds delay, std::uint32_t seed,
              KillRun& out) {
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        ::close(fds[0]);
        write_until_killed(path, fds[1], seed);
    }
    ::close(fds[1]);
    std::this_thread::sleep_for(delay);
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the writer exited on its own (status " << status << ")";
    // Everything the child reported before it died is in the pipe.
    std::uint64_t count = 0;
    while (::read(fds[0], &count, sizeof count) == static_cast<ssize_t>(sizeof count))
        out.promised = count;
    ::close(fds[0]);

    std::error_code ec;
    out.file_bytes = fs::exists(path, ec) ? fs::file_size(path, ec) : 0;
    RecordingReader reader;
    const Status opened = reader.open(path);
    if (!opened.is_ok()) {
        // Killed before its 32-byte header was whole: an input error that says so, and nothing
        // had been written yet.
        ASSERT_LT(out.file_bytes, detail::record::kFileHeaderBytes) << opened.to_string();
        ASSERT_EQ(out.promised, 0u);
        ASSERT_TRUE(opened.code() == StatusCode::kCorruptData ||
                    opened.code() == StatusCode::kNotFound)
            << opened.to_string();
        return;
    }
    out.opened = true;
    CollectingSink sink;
    StringTable strings;
    ASSERT_TRUE(reader.read(sink, strings).is_ok());
    ASSERT_EQ(sink.begins, 1);
    ASSERT_EQ(sink.ends, 1);
    out.read = sink.events.size();
    // Every event written before the kill, contiguous from 0, and nothing invented.
    ASSERT_GE(out.read, out.promised) << "events the writer had written were lost";
    for (std::size_t i = 0; i < sink.events.size(); ++i) {
        const Event& e = sink.events[i];
        ASSERT_EQ(e.start_ns, i);
        ASSERT_EQ(e.annotation.value, static_cast<std::int64_t>(i));
        ASSERT_EQ(strings.lookup(e.annotation.text), "step_" + std::to_string(i / 4096))
            << "event " << i;
    }
    EXPECT_TRUE(sink.summary.truncated);
    EXPECT_EQ(sink.summary.dropped, 0u);  // the capture lost nothing: the file was cut
    if (sink.events.empty()) return;
    // The analysis leads with the cut and never calls it a capture drop.
    auto report = analyze_files({path});
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    EXPECT_FALSE(report->input.complete);
    EXPECT_EQ(report->input.events, out.read);
    EXPECT_EQ(report->capture.dropped, 0u);
}

TEST(RecordingKill, SigkillAtRandomMomentsLosesNothingWritten) {
    const std::uint64_t runs = env_or("GPUDIAG_KILL_RUNS", 50);
    const std::uint64_t max_delay_ms =
        std::max<std::uint64_t>(1, env_or("GPUDIAG_KILL_MAX_DELAY_MS", 120));
    const auto seed = static_cast<std::uint32_t>(
        env_or("GPUDIAG_KILL_SEED", static_cast<std::uint64_t>(std::random_device{}())));
    std::mt19937 rng(seed);
    TempDir dir("kill");
    std::uint64_t opened = 0;
    std::uint64_t events = 0;
    std::uint64_t max_bytes = 0;
    for (std::uint64_t i = 0; i < runs; ++i) {
        const std::string path = dir.file("killed_" + std::to_string(i) + ".gpudiag");
        const auto delay = std::chrono::microseconds(rng() % (max_delay_ms * 1000));
        KillRun run;
        SCOPED_TRACE("run " + std::to_string(i) + " of seed " + std::to_string(seed) +
                     ", killed after " + std::to_string(delay.count()) + " us");
        run_once(path, delay, static_cast<std::uint32_t>(rng()), run);
        if (HasFatalFailure()) return;
        opened += run.opened ? 1 : 0;
        events += run.read;
        max_bytes = std::max(max_bytes, run.file_bytes);
        std::error_code ec;
        fs::remove(path, ec);
    }
    // One line for docs/reliability.md's figures.
    std::printf(
        "kill -9 runs: %llu, files that opened: %llu, events read back: %llu, largest file: "
        "%llu bytes, seed %u\n",
        static_cast<unsigned long long>(runs), static_cast<unsigned long long>(opened),
        static_cast<unsigned long long>(events), static_cast<unsigned long long>(max_bytes), seed);
    EXPECT_GT(opened, runs / 2) << "most kills should land after the header";
}

}  // namespace
}  // namespace gpudiag

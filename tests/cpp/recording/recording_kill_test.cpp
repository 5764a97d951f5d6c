// SPDX-License-Identifier: Apache-2.0
// A writer killed with SIGKILL mid-recording leaves a file that reads up to its last chunk.
#include <gpudiag/recording.hpp>

#include "recording_test_support.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace gpudiag {
namespace {

using namespace testing_support;

// Runs in the forked child: records sequence-numbered events forever, flushing often.
[[noreturn]] void write_until_killed(const std::string& path) {
    ::alarm(30);  // never outlive a parent that failed to kill us
    StringTable strings;
    RecordingWriterOptions options;
    options.chunk_bytes = 64 << 10;
    RecordingWriter writer(options);
    if (!writer.open(path).is_ok()) ::_exit(2);
    SourceInfo info;
    info.producer = "kill-test";
    writer.begin(info, strings);
    Event batch[64];
    for (std::uint64_t seq = 0;; seq += 64) {
        // A new name every 4096 events: strings chunks keep interleaving with events chunks.
        const StringId name = strings.intern("step_" + std::to_string(seq / 4096));
        for (std::uint64_t k = 0; k < 64; ++k) {
            Event& e = batch[k];
            e.kind = EventKind::kAnnotation;
            e.start_ns = seq + k;
            e.end_ns = seq + k;
            e.annotation.value = static_cast<std::int64_t>(seq + k);
            e.annotation.text = name;
        }
        writer.consume(batch);
        if ((seq / 64) % 16 == 0 && !writer.flush().is_ok()) ::_exit(3);
    }
}

TEST(RecordingKill, SigkilledWriterLeavesAReadablePrefix) {
    TempDir dir("kill");
    const std::string path = dir.file("killed.gpudiag");
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) write_until_killed(path);

    // Let it write a few MiB, then kill it wherever it is.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
        std::error_code ec;
        if (std::filesystem::file_size(path, ec) > (4u << 20) && !ec) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the writer exited on its own (status " << status << ")";

    CollectingSink sink;
    StringTable strings;
    ASSERT_TRUE(read_recording(path, sink, strings).is_ok());
    EXPECT_TRUE(sink.summary.truncated);
    EXPECT_EQ(sink.source.producer, "kill-test");
    ASSERT_FALSE(sink.events.empty());
    // Contiguous from 0: nothing lost before the last complete chunk, nothing invented.
    for (std::size_t i = 0; i < sink.events.size(); ++i) {
        const Event& e = sink.events[i];
        ASSERT_EQ(e.start_ns, i);
        ASSERT_EQ(e.annotation.value, static_cast<std::int64_t>(i));
        ASSERT_EQ(strings.lookup(e.annotation.text), "step_" + std::to_string(i / 4096))
            << "event " << i;
    }
    auto info = read_recording_info(path);
    ASSERT_TRUE(info.is_ok());
    EXPECT_TRUE(info->truncated);
    EXPECT_FALSE(info->closed_cleanly);
    EXPECT_GE(info->events, sink.events.size());
}

}  // namespace
}  // namespace gpudiag

// SPDX-License-Identifier: Apache-2.0
// A program that starts a recording session and returns from main without stop(), the way a
// script that never calls gpudiag.stop() ends. capture_stub_test runs it with the stub NVIDIA
// libraries selected through the environment and reads the recording it leaves.
//
//     session_exit_app <recording path>
// Exit status: 0 when main returned (whatever the exit path then does is what is tested);
// 2..5 when the session could not be set up as the test needs.
#include <gpudiag/session.hpp>

#include "cupti_records.hpp"

#include <chrono>
#include <cstdint>

extern "C" void gpudiag_stub_cupti_queue_buffer(const void* records, size_t bytes);

// Never destroyed: a session object still alive when the process exits (reachable, so leak
// checkers do not count it).
gpudiag::Session* g_left_running = nullptr;

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    gpudiag::SessionOptions options;
    options.record_path = argv[1];
    options.nvml_hz = 0;
    auto session = gpudiag::Session::create(options);
    if (!session.is_ok()) return 3;
    if (!(*session)->start().is_ok()) return 4;
    if ((*session)->status().level < gpudiag::CaptureLevel::kCuptiActivity) return 5;
    (*session)->step_begin(1);
    // Records still inside CUPTI when main returns: only a flush on the way out delivers them.
    auto now = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count());
    gpudiag::test::RecordBuffer records;
    for (std::uint64_t i = 0; i < 100; ++i) {
        records.add(gpudiag::test::memory_record(true, 0x10000 + i * 0x1000, 4096,
                                                 static_cast<std::uint32_t>(i), now + i));
    }
    gpudiag_stub_cupti_queue_buffer(records.data(), records.size());
    (*session)->step_end(1);
    g_left_running = session->release();
    return 0;
}

// SPDX-License-Identifier: Apache-2.0
// Writes a SIMULATED recording of a node's NVML readings (tests/data/sick_node.gpudiag): four
// H200s in one data-parallel job, sampled once a second for two minutes the way NvmlSampler reads
// them (same counters, same order within a round, the card's health every 10 s), with one planted
// fault per GPU after GPU 0, the healthy reference:
//   GPU 1: an Xid 48 (double-bit ECC error) 40 s in, then one uncorrected ECC error and a memory
//          row remapped for it, waiting for a reset;
//   GPU 2: a PCIe link that trained at Gen 5 x8 of x16;
//   GPU 3: 14 C hotter than its peers, hardware thermal slowdown in a third of its samples, its
//          SM clock down to about 1.6 GHz then.
// Every event is generated here, deterministically; the recording says it is simulated. The
// monitoring test serves its diagnosis to a real Prometheus and expects the card alerts to fire.
//
//   make_sick_node_recording OUTPUT.gpudiag
#include <gpudiag/gpudiag.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using namespace gpudiag;

constexpr std::uint32_t kPid = 5151;
constexpr int kGpus = 4;
constexpr int kSeconds = 120;
constexpr int kSlowEvery = 10;  // rounds between two readings of the card's health
constexpr int kXidAt = 40;      // seconds in
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

struct Lcg {  // deterministic on every machine
    std::uint64_t state = 0xD1B54A32D192ED03ull;
    double uniform() {  // [0, 1)
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<double>(state >> 11) / 9007199254740992.0;
    }
};

class NodeBuilder {
public:
    void run() {
        for (int s = 0; s < kSeconds; ++s) {
            const std::uint64_t t = 1'000'000'000ull * static_cast<std::uint64_t>(s + 1);
            if (s == kXidAt) counter(t, 1, CounterKind::kXidError, 48);
            for (int gpu = 0; gpu < kGpus; ++gpu) round(t, gpu, s);
        }
    }
    [[nodiscard]] const std::vector<Event>& events() const { return events_; }

private:
    void round(std::uint64_t t, int gpu, int s) {
        const bool hot_gpu = gpu == 3;
        const bool slowed = hot_gpu && rng_.uniform() < 0.33;
        counter(t, gpu, CounterKind::kGpuUtilizationPercent, 96 + 3 * rng_.uniform());
        counter(t, gpu, CounterKind::kMemoryUtilizationPercent, 45 + 10 * rng_.uniform());
        if (s > 0) {  // GPM: the window since the last round
            counter(t, gpu, CounterKind::kSmActivePercent, 70 + 8 * rng_.uniform());
            counter(t, gpu, CounterKind::kSmOccupancyPercent, 38 + 6 * rng_.uniform());
            counter(t, gpu, CounterKind::kTensorActivePercent, 41 + 8 * rng_.uniform());
            counter(t, gpu, CounterKind::kDramActivePercent, 33 + 6 * rng_.uniform());
        }
        counter(t, gpu, CounterKind::kDeviceMemoryUsedBytes, static_cast<double>(118 * kGiB));
        counter(t, gpu, CounterKind::kDeviceMemoryTotalBytes, static_cast<double>(141 * kGiB));
        counter(t, gpu, CounterKind::kSmClockMhz, slowed ? 1590 + 40 * rng_.uniform() : 1980);
        counter(t, gpu, CounterKind::kSmClockMaxMhz, 1980);
        const double temperature = (hot_gpu ? 80 : 66) + 3 * rng_.uniform();
        counter(t, gpu, CounterKind::kTemperatureC, temperature);
        counter(t, gpu, CounterKind::kPowerWatts, 560 + 60 * rng_.uniform());
        counter(t, gpu, CounterKind::kPowerLimitWatts, 700);
        if (s % kSlowEvery == 0) card_health(t, gpu, s);
        counter(t, gpu, CounterKind::kThrottleReasons,
                slowed ? static_cast<double>(clock_event_reason::kHwThermal) : 0);
        const bool after_xid = gpu == 1 && s >= kXidAt;
        counter(t, gpu, CounterKind::kEccCorrectedErrors, 0);
        counter(t, gpu, CounterKind::kEccUncorrectedErrors, after_xid ? 1 : 0);
        counter(t, gpu, CounterKind::kProcessMemoryUsedBytes, static_cast<double>(117 * kGiB));
        counter(t, gpu, CounterKind::kForeignProcessMemoryBytes, 0);
    }

    void card_health(std::uint64_t t, int gpu, int s) {
        const bool narrow = gpu == 2;
        counter(t, gpu, CounterKind::kPcieLinkGeneration, 5);
        counter(t, gpu, CounterKind::kPcieLinkGenerationMax, 5);
        counter(t, gpu, CounterKind::kPcieLinkWidth, narrow ? 8 : 16);
        counter(t, gpu, CounterKind::kPcieLinkWidthMax, 16);
        counter(t, gpu, CounterKind::kPcieReplays, 0);
        counter(t, gpu, CounterKind::kNvlinkLinksActive, 18);
        counter(t, gpu, CounterKind::kNvlinkReplayErrors, 0);
        counter(t, gpu, CounterKind::kNvlinkRecoveryErrors, 0);
        counter(t, gpu, CounterKind::kNvlinkCrcErrors, 0);
        counter(t, gpu, CounterKind::kPowerLimitDefaultWatts, 700);
        counter(t, gpu, CounterKind::kPersistenceMode, 1);
        counter(t, gpu, CounterKind::kMigMode, 0);
        const bool remapped = gpu == 1 && s >= kXidAt;
        counter(t, gpu, CounterKind::kRemappedRowsCorrectable, 0);
        counter(t, gpu, CounterKind::kRemappedRowsUncorrectable, remapped ? 1 : 0);
        counter(t, gpu, CounterKind::kRowRemapPending, remapped ? 1 : 0);
        counter(t, gpu, CounterKind::kRowRemapFailed, 0);
    }

    void counter(std::uint64_t t, int gpu, CounterKind kind, double value) {
        Event e;
        e.kind = EventKind::kCounter;
        e.process = kPid;
        e.start_ns = e.end_ns = t;
        e.device = static_cast<std::uint16_t>(gpu);
        e.counter.counter = kind;
        e.counter.value = value;
        events_.push_back(e);
    }

    std::vector<Event> events_;
    Lcg rng_;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUTPUT.gpudiag\n", argv[0]);
        return 2;
    }
    NodeBuilder builder;
    builder.run();
    StringTable strings;
    SourceInfo info;
    info.producer = "gpudiag sick-node generator";
    info.description = "simulated NVML readings of a 4-GPU node (2 minutes at 1 Hz)";
    info.simulated = true;
    info.pid = kPid;
    info.hostname = "simulated-node";
    for (int gpu = 0; gpu < kGpus; ++gpu) {
        const std::string n = std::to_string(gpu);
        info.devices.push_back({static_cast<std::uint16_t>(gpu), "NVIDIA H200 (simulated)",
                                141 * kGiB, "GPU-00000000-0000-4000-8000-00000000000" + n,
                                "00000000:" + std::to_string(18 + 16 * gpu) + ":00.0"});
    }
    SourceSummary summary;
    summary.events = builder.events().size();
    summary.notes.push_back(
        "Every event of this recording was generated by "
        "tools/make_demo/make_sick_node_recording.cpp; none was observed on a GPU.");
    Status s = write_recording(argv[1], info, strings, builder.events(), summary);
    if (!s.is_ok()) {
        std::fprintf(stderr, "%s\n", s.to_string().c_str());
        return 1;
    }
    std::printf("wrote %zu simulated events to %s\n", builder.events().size(), argv[1]);
    return 0;
}

// SPDX-License-Identifier: Apache-2.0
// A 48-hour service in minutes: an always-on Session is fed the GENERATED event stream of an
// inference service (tests/soak/service_workload.hpp: requests, allocations, kernels, NVML
// samples; a planted slow leak at one site), time-compressed, from several producer threads.
// It must hold:
//   - every event offered is either processed or counted as dropped, exactly (in = processed +
//     counted drops), whatever the number of producers;
//   - resident memory stays bounded the whole time: after the first service hour it grows by no
//     more than kGrowthBound, however long the run;
//   - at the end the leak is reported, at the planted site, with the planted rate.
//
// CI runs a short version (GPUDIAG_SOAK_HOURS, default 6 service hours). The long one is
// tools/soak.sh (48 hours), which writes the figures docs/reliability.md quotes.
#include "api/session_test_support.hpp"
#include "sanitized.hpp"
#include "service_workload.hpp"

#include <gpudiag/gpudiag.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

namespace gpudiag::soak {
namespace {

// Resident memory and throughput mean nothing under sanitizers (shadow memory, quarantine).
#ifndef GPUDIAG_TEST_SANITIZED
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
// What a session may add to its host's resident memory after its first service hour, however
// long it runs: its tables are capped and its series are bounded. Generous against allocator
// noise, far below what unbounded growth would reach (48 h of this stream is 50 M events).
constexpr std::uint64_t kGrowthBound = 32 * kMiB;
constexpr std::uint64_t kSecondNs = 1'000'000'000ull;
constexpr std::uint64_t kHourNs = 3600 * kSecondNs;

double env_number(const char* name, double fallback) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') return fallback;
    char* end = nullptr;
    const double value = std::strtod(text, &end);
    return end != text && value > 0 ? value : fallback;
}

std::uint64_t resident_bytes() {
    long total = 0;
    long resident = 0;
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    if (f == nullptr) return 0;
    if (std::fscanf(f, "%ld %ld", &total, &resident) != 2) resident = 0;
    std::fclose(f);
    return static_cast<std::uint64_t>(resident) *
           static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

/// Resident memory sampled by service hour: the producers report how far they got.
class ResidentWatch {
public:
    void at_service_time(std::uint64_t t_ns) {
        const std::uint64_t hour = t_ns / kHourNs;
        std::lock_guard lock(mutex_);
        if (hour < next_hour_) return;
        next_hour_ = hour + 1;
        const std::uint64_t rss = resident_bytes();
        by_hour_.push_back(rss);
        if (hour >= 1) after_first_hour_max_ = std::max(after_first_hour_max_, rss);
        if (hour == 1) at_first_hour_ = rss;
    }
    [[nodiscard]] std::uint64_t at_first_hour() const { return at_first_hour_; }
    [[nodiscard]] std::uint64_t max_after_first_hour() const { return after_first_hour_max_; }
    [[nodiscard]] const std::vector<std::uint64_t>& by_hour() const { return by_hour_; }

private:
    std::mutex mutex_;
    std::uint64_t next_hour_ = 0;
    std::uint64_t at_first_hour_ = 0;
    std::uint64_t after_first_hour_max_ = 0;
    std::vector<std::uint64_t> by_hour_;
};

struct ProducerCount {
    std::uint64_t offered = 0;    // record() calls
    std::uint64_t refused = 0;    // record() returned false: the session must count each
    std::uint64_t delivered = 0;  // events of the stream that got in
};

struct SoakRun {
    ServiceWorkloadTruth truth;
    std::vector<ProducerCount> producers;
    CaptureStatus status;
    Report report;
    double wall_s = 0;
    std::uint64_t reports_during_run = 0;
};

// Producers move through service time together (a barrier every service second), as threads
// of one service share a clock: what each offers is within a second of the others.
SoakRun run_service(Session& s, const ServiceWorkloadOptions& base, std::uint32_t producers,
                    ResidentWatch& watch) {
    SoakRun run;
    run.producers.resize(producers);
    std::vector<ServiceWorkload> shards;
    shards.reserve(producers);
    for (std::uint32_t k = 0; k < producers; ++k) {
        ServiceWorkloadOptions o = base;
        o.shard = k;
        o.shards = producers;
        shards.emplace_back(o, [&s](std::string_view text) { return s.intern(text); });
    }
    const auto seconds = static_cast<std::uint64_t>(base.hours * 3600.0) + 1;
    std::barrier sync(static_cast<std::ptrdiff_t>(producers));
    const auto t0 = std::chrono::steady_clock::now();
    auto produce = [&](std::uint32_t k) {
        ServiceWorkload& w = shards[k];
        ProducerCount& count = run.producers[k];
        std::vector<Event> batch;
        bool more = true;
        for (std::uint64_t second = 1; second <= seconds; ++second) {
            const std::uint64_t until = base.epoch_ns + second * kSecondNs;
            while (more && (batch.empty() || batch.back().start_ns < until)) {
                std::vector<Event> next;
                more = w.next(next);
                batch.insert(batch.end(), next.begin(), next.end());
            }
            std::size_t sent = 0;
            for (; sent < batch.size() && (batch[sent].start_ns < until || !more); ++sent) {
                ++count.offered;
                // A service would drop and move on; the soak retries so that the leak's every
                // block gets in, and checks that each refusal was counted.
                while (!s.record(batch[sent])) {
                    ++count.refused;
                    ++count.offered;
                    std::this_thread::yield();
                }
                ++count.delivered;
            }
            batch.erase(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(sent));
            if (k == 0) watch.at_service_time(until - base.epoch_ns);
            sync.arrive_and_wait();
        }
    };
    std::vector<std::thread> threads;
    for (std::uint32_t k = 0; k < producers; ++k) threads.emplace_back(produce, k);
    for (auto& t : threads) t.join();
    run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& w : shards) run.truth.add(w.truth());
    return run;
}

void write_figures(const SoakRun& run, const ResidentWatch& watch, std::uint32_t producers,
                   double hours, const Finding* leak) {
    const char* path = std::getenv("GPUDIAG_SOAK_FIGURES");
    if (path == nullptr || *path == '\0') return;
    std::ofstream out(path);
    std::uint64_t offered = 0;
    std::uint64_t refused = 0;
    for (const auto& p : run.producers) {
        offered += p.offered;
        refused += p.refused;
    }
    out << "service_hours\t" << hours << "\nproducers\t" << producers << "\nevents\t"
        << run.truth.events << "\noffered\t" << offered << "\nrefused_and_counted\t" << refused
        << "\nsession_events\t" << run.status.events << "\nsession_dropped\t" << run.status.dropped
        << "\nwall_s\t" << run.wall_s << "\nevents_per_s\t"
        << static_cast<double>(run.truth.events) / run.wall_s << "\nrss_first_hour_mib\t"
        << static_cast<double>(watch.at_first_hour()) / kMiB << "\nrss_max_after_mib\t"
        << static_cast<double>(watch.max_after_first_hour()) / kMiB << "\nplanted_bytes_per_hour\t"
        << run.truth.leak_bytes_per_hour() << "\nreports_during_run\t" << run.reports_during_run;
    if (leak != nullptr) {
        for (const auto& f : leak->figures) {
            if (f.key == "leak_rate_bytes_per_hour")
                out << "\nreported_bytes_per_hour\t" << f.value;
            if (f.key == "since_ns") out << "\nreported_onset_s\t" << f.value / 1e9;
        }
        if (!leak->sites.empty()) out << "\nreported_site\t" << leak->sites.front().location;
    }
    out << "\nrss_by_hour_mib";
    for (const auto rss : watch.by_hour()) out << '\t' << rss / kMiB;
    out << '\n';
}

void soak(double hours, std::uint32_t producers) {
    ServiceWorkloadOptions workload;
    workload.hours = hours;

    SessionOptions o = testing::cpu_options();
    std::atomic<std::uint64_t> reports{0};
    o.report_period_ms = 250;  // a service asking for the diagnosis so far, often
    o.on_report = [&reports](const Report&) { reports.fetch_add(1); };
    auto s = testing::make(o);
    ASSERT_NE(s, nullptr);
    ASSERT_TRUE(s->start().is_ok());

    ResidentWatch watch;
    SoakRun run = run_service(*s, workload, producers, watch);
    ASSERT_TRUE(s->stop().is_ok());
    run.status = s->status();
    run.reports_during_run = reports.load();
    auto report = s->report();
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    run.report = std::move(*report);

    // Exact accounting: every offer was processed or counted as dropped.
    std::uint64_t offered = 0;
    std::uint64_t delivered = 0;
    for (const auto& p : run.producers) {
        offered += p.offered;
        delivered += p.delivered;
    }
    EXPECT_EQ(delivered, run.truth.events);
    EXPECT_EQ(run.status.events + run.status.dropped, offered);
    EXPECT_EQ(run.status.events, run.truth.events);
    // The report says what it covers: all of the service's time, and whether drops cost it.
    EXPECT_EQ(run.report.input.first_ns, run.truth.first_ns);
    EXPECT_EQ(run.report.input.last_ns, run.truth.last_ns);
    // (A report is partial when 1 % or more of what was offered was dropped.)
    EXPECT_EQ(run.report.input.complete, run.status.dropped * 100 < offered);

    // Bounded: flat after the first service hour.
    EXPECT_LE(watch.max_after_first_hour(), watch.at_first_hour() + kGrowthBound)
        << "resident memory grew from " << watch.at_first_hour() / kMiB << " MiB to "
        << watch.max_after_first_hour() / kMiB << " MiB";

    // The planted leak: found, at its site, at its rate.
    const Finding* leak = run.report.finding("memory_leak");
    write_figures(run, watch, producers, hours, leak);
    if (const char* path = std::getenv("GPUDIAG_SOAK_REPORT"); path != nullptr && *path != '\0') {
        std::ofstream(path) << render_text(run.report);
    }
    ASSERT_NE(leak, nullptr) << render_text(run.report);
    ASSERT_FALSE(leak->sites.empty());
    EXPECT_EQ(leak->sites.front().location, workload.leak_site);
    double rate = -1;
    for (const auto& f : leak->figures) {
        if (f.key == "leak_rate_bytes_per_hour") rate = f.value;
    }
    const double planted = run.truth.leak_bytes_per_hour();
    EXPECT_NEAR(rate, planted, planted * 0.05) << render_text(run.report);
    // Planted from the first request: dated from the start of the service.
    const Figure* since = nullptr;
    for (const auto& f : leak->figures) {
        if (f.key == "since_ns") since = &f;
    }
    ASSERT_NE(since, nullptr);
    EXPECT_LT(since->value, 0.05 * hours * 3600e9) << leak->title;
    // Periodic reports kept coming while producers kept the hand-off full (each drain takes at
    // most one hand-off's worth, so the worker cannot hold the analyses' lock for good).
    EXPECT_GT(run.reports_during_run, 0u);
}
#endif

TEST(ServiceSoak, HoursOfServiceStayBoundedCountEveryDropAndFindTheLeak) {
#ifdef GPUDIAG_TEST_SANITIZED
    GTEST_SKIP() << "resident memory and throughput are not meaningful under sanitizers";
#else
    const double hours = env_number("GPUDIAG_SOAK_HOURS", 6);
    // One producer, then four (tools/soak.sh picks one with GPUDIAG_SOAK_PRODUCERS).
    std::vector<std::uint32_t> counts{1, 4};
    if (std::getenv("GPUDIAG_SOAK_PRODUCERS") != nullptr) {
        counts = {static_cast<std::uint32_t>(std::clamp(env_number("GPUDIAG_SOAK_PRODUCERS", 4),
                                                        1.0, double{ServiceWorkload::kMaxShards}))};
    }
    for (const std::uint32_t producers : counts) {
        SCOPED_TRACE(std::to_string(producers) + " producers");
        soak(hours, producers);
    }
#endif
}

}  // namespace
}  // namespace gpudiag::soak

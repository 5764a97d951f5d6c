// SPDX-License-Identifier: Apache-2.0
// The 48-hour service, time-compressed through Session::record: a C++ inference service without
// a framework allocator whose driver-level memory (cudaMalloc, as CUPTI reports it) climbs from
// 10 GB to 24 GB until requests fail; and a watch whose action is recorded next to what emptying
// the cache could have returned.
#include <gpudiag/gpudiag.hpp>

#include "session_test_support.hpp"
#include "temp_dir.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

namespace gpudiag {
namespace {

using testing::put;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
constexpr std::uint64_t kMinute = 60'000'000'000ull;

SessionOptions cpu_options() {
    SessionOptions o = testing::cpu_options();
    o.queue_capacity = 1u << 16;
    return o;
}

Event driver(EventKind kind, std::uint64_t t, std::uint64_t address, std::uint64_t bytes,
             StringId site) {
    Event e;
    e.kind = kind;
    e.device = 0;
    e.flags = static_cast<std::uint8_t>(MemoryKind::kDevice);
    e.start_ns = e.end_ns = t;
    e.memory.address = address;
    e.memory.bytes = bytes;
    e.memory.site = site;
    return e;
}

// NVML's capacity of device 0 at `t`, as a live session samples it.
Event capacity_at(std::uint64_t t, std::uint64_t bytes) {
    Event e;
    e.kind = EventKind::kCounter;
    e.device = 0;
    e.start_ns = e.end_ns = t;
    e.counter.counter = CounterKind::kDeviceMemoryTotalBytes;
    e.counter.value = static_cast<double>(bytes);
    return e;
}

const Figure* figure(const Finding& f, const char* key) {
    for (const auto& fig : f.figures) {
        if (fig.key == key) return &fig;
    }
    return nullptr;
}

// The service loads a 10 GiB model, then serves one request a minute: a 256 MiB workspace
// allocated and freed, plus, from hour 8 on, 6 MiB a request that is never freed (the planted
// leak, at its own call site). The 24 GiB device fills near hour 47; from then on the workspace
// allocations fail, as CUPTI reports them: an out-of-memory event with no device.
TEST(ServiceMemory, PlantedDriverLeakIsFoundWithItsSiteRateAndOnsetAndExplainsTheOoms) {
    auto created = Session::create(cpu_options());
    ASSERT_TRUE(created.is_ok());
    Session& s = **created;
    ASSERT_TRUE(s.start().is_ok());
    const StringId model = s.intern("svc.cpp:40 Model::load (cudaMalloc)");
    const StringId workspace = s.intern("svc.cpp:61 Engine::run workspace (cudaMalloc)");
    const StringId planted = s.intern("svc.cpp:88 Engine::bind_output (cudaMalloc)");
    const std::uint64_t t0 = 1'000'000'000'000ull;

    put(s, capacity_at(t0, 24 * kGiB));
    put(s, driver(EventKind::kDeviceAlloc, t0 + 1, 0x7f0000000000, 10 * kGiB, model));

    std::uint64_t used = 10 * kGiB;
    std::uint64_t leak_address = 0x7a0000000000;
    int failures = 0;
    for (std::uint64_t minute = 0; minute < 48 * 60; ++minute) {
        const std::uint64_t t = t0 + (minute + 1) * kMinute;
        if (used + 256 * kMiB > 24 * kGiB) {
            Event oom;  // CUPTI: an allocation API returned cudaErrorMemoryAllocation
            oom.kind = EventKind::kOutOfMemory;
            oom.start_ns = oom.end_ns = t;
            oom.oom.requested_bytes = 256 * kMiB;  // known in deep mode
            put(s, oom);
            ++failures;
            continue;
        }
        put(s, driver(EventKind::kDeviceAlloc, t, 0x7e0000000000, 256 * kMiB, workspace));
        if (minute >= 8 * 60) {
            put(s, driver(EventKind::kDeviceAlloc, t + 1000, leak_address, 6 * kMiB, planted));
            leak_address += 6 * kMiB;
            used += 6 * kMiB;
        }
        put(s, driver(EventKind::kDeviceFree, t + 2000, 0x7e0000000000, 256 * kMiB, workspace));
    }
    ASSERT_GT(failures, 1);
    ASSERT_TRUE(s.stop().is_ok());
    auto report = s.report();
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    EXPECT_EQ(report->capture.dropped, 0u);
    if (std::getenv("PRINT")) std::puts(render_text(*report).c_str());

    // The leak: outside any framework, from the planted site, at its rate, since hour 8.
    std::size_t leak_index = report->findings.size();
    std::size_t oom_index = report->findings.size();
    int oom_findings = 0;
    for (std::size_t i = 0; i < report->findings.size(); ++i) {
        if (report->findings[i].id == "memory_leak") leak_index = std::min(leak_index, i);
        if (report->findings[i].id == "out_of_memory") {
            oom_index = i;
            ++oom_findings;
        }
    }
    ASSERT_LT(leak_index, report->findings.size()) << render_text(*report);
    const Finding& leak = report->findings[leak_index];
    ASSERT_FALSE(leak.sites.empty());
    EXPECT_EQ(leak.sites.front().location, "svc.cpp:88 Engine::bind_output (cudaMalloc)");
    EXPECT_GT(leak.sites.front().share, 0.99);
    const Figure* rate = figure(leak, "leak_rate_bytes_per_hour");
    ASSERT_NE(rate, nullptr);
    EXPECT_NEAR(rate->value, 360.0 * kMiB, 0.05 * 360.0 * kMiB);  // 6 MiB a minute
    const Figure* since = figure(leak, "since_ns");
    ASSERT_NE(since, nullptr);
    EXPECT_NEAR(since->value / 1e9, 8 * 3600.0, 1800.0);  // within half an hour of the onset
    EXPECT_NE(leak.title.find("outside"), std::string::npos) << leak.title;
    EXPECT_NE(figure(leak, "time_until_full_ns"), nullptr);
    EXPECT_EQ(report->finding("memory_outside_framework"), nullptr)
        << "no framework to be outside of";

    // The failures: one finding, after the leak, explained by it, with service advice.
    EXPECT_EQ(oom_findings, 1) << render_text(*report);
    ASSERT_LT(oom_index, report->findings.size());
    EXPECT_GT(oom_index, leak_index);
    const Finding& oom = report->findings[oom_index];
    EXPECT_EQ(figure(oom, "failures")->value, failures);
    EXPECT_NE(oom.title.find("(memory_leak)"), std::string::npos) << oom.title;
    EXPECT_NE(oom.summary.find("svc.cpp:88"), std::string::npos) << oom.summary;
    EXPECT_EQ(leak.severity, Severity::kCritical);  // it took requests down
    for (const auto& a : oom.advice) {
        EXPECT_EQ(a.find("FSDP"), std::string::npos) << a;
        EXPECT_EQ(a.find("batch"), std::string::npos) << a;
    }
    EXPECT_EQ(oom.device, 0);  // inferred: the only device the process allocates on
}

const Figure* section_figure(const Report& r, const char* section, const char* key) {
    const Section* s = r.section(section);
    if (s == nullptr) return nullptr;
    for (const auto& f : s->figures) {
        if (f.key == key) return &f;
    }
    return nullptr;
}

// The same service in window mode (a one-hour window on disk): the dump written when the first
// request fails begins with what was held before its window, so it states the held memory, the
// leak's rate, site and onset, and the time until full of the whole session, not of its hour.
TEST(ServiceMemory, AnOomDumpOfAWindowStatesWhatTheWholeSessionDoes) {
    testing::TempDir dir("oom_dump");
    SessionOptions o = cpu_options();
    o.record_path = dir.file("svc.gpudiag");
    o.record_window_s = 3600;
    o.record_window_bytes = 16 * kMiB;
    auto created = Session::create(o);
    ASSERT_TRUE(created.is_ok());
    Session& s = **created;
    ASSERT_TRUE(s.start().is_ok());
    const StringId workspace = s.intern("svc.cpp:61 Engine::run workspace (cudaMalloc)");
    const StringId planted = s.intern("svc.cpp:88 Engine::bind_output (cudaMalloc)");
    const std::uint64_t t0 = 1'000'000'000'000ull;
    put(s, capacity_at(t0, 24 * kGiB));
    put(s, driver(EventKind::kDeviceAlloc, t0 + 1, 0x7f0000000000, 10 * kGiB,
                  s.intern("svc.cpp:40 Model::load (cudaMalloc)")));
    std::uint64_t used = 10 * kGiB;
    std::uint64_t leak_address = 0x7a0000000000;
    for (std::uint64_t minute = 0;; ++minute) {
        const std::uint64_t t = t0 + (minute + 1) * kMinute;
        if (used + 256 * kMiB > 24 * kGiB) {
            Event oom;
            oom.kind = EventKind::kOutOfMemory;
            oom.start_ns = oom.end_ns = t;
            oom.oom.requested_bytes = 256 * kMiB;
            put(s, oom);
            break;  // the first failure: nothing after it, so the dump and the session agree
        }
        put(s, driver(EventKind::kDeviceAlloc, t, 0x7e0000000000, 256 * kMiB, workspace));
        if (minute >= 8 * 60) {
            put(s, driver(EventKind::kDeviceAlloc, t + 1000, leak_address, 6 * kMiB, planted));
            leak_address += 6 * kMiB;
            used += 6 * kMiB;
        }
        put(s, driver(EventKind::kDeviceFree, t + 2000, 0x7e0000000000, 256 * kMiB, workspace));
    }
    std::vector<std::string> dumps;
    for (int i = 0; i < 1000 && dumps.empty(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        dumps = dir.files("svc-dump-", "-oom.gpudiag");
    }
    ASSERT_EQ(dumps.size(), 1u) << "no dump for the failed allocation";
    ASSERT_TRUE(s.stop().is_ok());
    auto whole = s.report();
    ASSERT_TRUE(whole.is_ok());
    auto dumped = analyze_files({dumps.front()});
    ASSERT_TRUE(dumped.is_ok()) << dumped.status().to_string();
    if (std::getenv("PRINT")) std::puts(render_text(*dumped).c_str());

    for (const char* key : {"outside_framework_bytes", "capacity_bytes", "peak_used_bytes"}) {
        const Figure* a = section_figure(*whole, "memory", key);
        const Figure* b = section_figure(*dumped, "memory", key);
        ASSERT_NE(a, nullptr) << key;
        ASSERT_NE(b, nullptr) << key << render_text(*dumped);
        EXPECT_EQ(a->value, b->value) << key;
    }
    const Finding* leak_whole = whole->finding("memory_leak");
    const Finding* leak_dump = dumped->finding("memory_leak");
    ASSERT_NE(leak_whole, nullptr);
    ASSERT_NE(leak_dump, nullptr) << render_text(*dumped);
    ASSERT_FALSE(leak_dump->sites.empty());
    EXPECT_EQ(leak_dump->sites.front().location, leak_whole->sites.front().location);
    for (const char* key : {"leak_rate_bytes_per_hour", "time_until_full_ns", "since_ns"}) {
        const Figure* a = figure(*leak_whole, key);
        const Figure* b = figure(*leak_dump, key);
        ASSERT_NE(a, nullptr) << key;
        ASSERT_NE(b, nullptr) << key;
        EXPECT_NEAR(b->value, a->value, 0.02 * std::abs(a->value)) << key;
    }
    EXPECT_NE(dumped->finding("out_of_memory"), nullptr);
}

Event step_marker(EventKind kind, std::uint64_t t, std::uint64_t step) {
    Event e;
    e.kind = kind;
    e.start_ns = e.end_ns = t;
    e.range.id = step;
    e.range.category = RangeCategory::kStep;
    return e;
}

// The same service marking one step per request, as the README suggests, stopped before the
// first failure: the leak is still given per hour (at the requests' pace) with a time until
// full, and as the cause of the device being near full it ranks before near_oom, which names it.
TEST(ServiceMemory, PerRequestStepsStillGiveAnHourlyRateAndTheCauseComesFirst) {
    auto created = Session::create(cpu_options());
    ASSERT_TRUE(created.is_ok());
    Session& s = **created;
    ASSERT_TRUE(s.start().is_ok());
    const StringId workspace = s.intern("svc.cpp:61 Engine::run workspace (cudaMalloc)");
    const StringId planted = s.intern("svc.cpp:88 Engine::bind_output (cudaMalloc)");
    const std::uint64_t t0 = 1'000'000'000'000ull;
    put(s, capacity_at(t0, 24 * kGiB));
    put(s, driver(EventKind::kDeviceAlloc, t0 + 1, 0x7f0000000000, 10 * kGiB,
                  s.intern("svc.cpp:40 Model::load (cudaMalloc)")));
    std::uint64_t used = 10 * kGiB;
    std::uint64_t leak_address = 0x7a0000000000;
    for (std::uint64_t minute = 0; used + 256 * kMiB + 6 * kMiB <= 24 * kGiB; ++minute) {
        const std::uint64_t t = t0 + (minute + 1) * kMinute;
        put(s, step_marker(EventKind::kStepBegin, t, minute));
        put(s, driver(EventKind::kDeviceAlloc, t + 10, 0x7e0000000000, 256 * kMiB, workspace));
        if (minute >= 8 * 60) {
            put(s, driver(EventKind::kDeviceAlloc, t + 1000, leak_address, 6 * kMiB, planted));
            leak_address += 6 * kMiB;
            used += 6 * kMiB;
        }
        put(s, driver(EventKind::kDeviceFree, t + 2000, 0x7e0000000000, 256 * kMiB, workspace));
        put(s, step_marker(EventKind::kStepEnd, t + 3000, minute));
    }
    ASSERT_TRUE(s.stop().is_ok());
    auto report = s.report();
    ASSERT_TRUE(report.is_ok());
    if (std::getenv("PRINT")) std::puts(render_text(*report).c_str());
    std::size_t leak_at = report->findings.size();
    std::size_t near_at = report->findings.size();
    for (std::size_t i = 0; i < report->findings.size(); ++i) {
        if (report->findings[i].id == "memory_leak" && leak_at == report->findings.size())
            leak_at = i;
        if (report->findings[i].id == "near_oom") near_at = i;
    }
    ASSERT_LT(leak_at, report->findings.size()) << render_text(*report);
    ASSERT_LT(near_at, report->findings.size()) << render_text(*report);
    EXPECT_LT(leak_at, near_at) << "the symptom ranks before its cause";
    const Finding& leak = report->findings[leak_at];
    EXPECT_EQ(leak.severity, Severity::kCritical);
    ASSERT_NE(figure(leak, "leak_rate_bytes_per_step"), nullptr);
    const Figure* hourly = figure(leak, "leak_rate_bytes_per_hour");
    ASSERT_NE(hourly, nullptr) << render_text(*report);
    EXPECT_NEAR(hourly->value, 360.0 * kMiB, 0.05 * 360.0 * kMiB);
    EXPECT_NE(figure(leak, "time_until_full_ns"), nullptr);
    EXPECT_NE(leak.title.find("per hour"), std::string::npos) << leak.title;
    EXPECT_NE(report->findings[near_at].title.find("(memory_leak)"), std::string::npos)
        << report->findings[near_at].title;
}

// A capture that dropped half its events understates a leak's rate: the finding says the rate
// is a lower bound, in its title and its evidence.
TEST(ServiceMemory, UnderHeavyDropsTheRateIsALowerBound) {
    testing::TempDir dir("lower_bound");
    StringTable strings;
    const StringId planted = strings.intern("svc.cpp:88 Engine::bind_output (cudaMalloc)");
    const std::uint64_t t0 = 1'000'000'000'000ull;
    std::vector<Event> events;
    events.push_back(capacity_at(t0, 24 * kGiB));
    events.push_back(driver(EventKind::kDeviceAlloc, t0 + 1, 0x7f0000000000, 10 * kGiB, 0));
    for (std::uint64_t minute = 0; minute < 24 * 60; ++minute) {
        const std::uint64_t t = t0 + (minute + 1) * kMinute;
        events.push_back(driver(EventKind::kDeviceAlloc, t, 0x7a0000000000 + minute * 6 * kMiB,
                                6 * kMiB, planted));
    }
    SourceSummary summary;
    summary.events = events.size();
    summary.dropped = events.size();  // as many lost as kept
    const std::string path = dir.file("dropped.gpudiag");
    ASSERT_TRUE(write_recording(path, SourceInfo{}, strings, events, summary).is_ok());
    auto report = analyze_files({path});
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    const Finding* leak = report->finding("memory_leak");
    ASSERT_NE(leak, nullptr) << render_text(*report);
    EXPECT_NE(leak->title.find("grows by at least"), std::string::npos) << leak->title;
    EXPECT_TRUE(std::any_of(leak->evidence.begin(), leak->evidence.end(), [](const std::string& e) {
        return e.find("the rate reads low") != std::string::npos;
    }));
}

// A step-less service with no leak: requests allocate and free, with noise; no memory_leak and no
// growth verdict.
TEST(ServiceMemory, SteadyServiceIsNotALeak) {
    auto created = Session::create(cpu_options());
    ASSERT_TRUE(created.is_ok());
    Session& s = **created;
    ASSERT_TRUE(s.start().is_ok());
    const StringId workspace = s.intern("svc.cpp:61 Engine::run workspace (cudaMalloc)");
    const std::uint64_t t0 = 1'000'000'000'000ull;
    put(s, driver(EventKind::kDeviceAlloc, t0, 0x7f0000000000, 10 * kGiB,
                  s.intern("svc.cpp:40 load")));
    for (std::uint64_t minute = 0; minute < 24 * 60; ++minute) {
        const std::uint64_t t = t0 + (minute + 1) * kMinute;
        std::uint64_t bytes = (200 + (minute * 7919) % 113) * kMiB;  // varies per request
        put(s, driver(EventKind::kDeviceAlloc, t, 0x7e0000000000, bytes, workspace));
        put(s, driver(EventKind::kDeviceFree, t + 2000, 0x7e0000000000, bytes, workspace));
    }
    ASSERT_TRUE(s.stop().is_ok());
    auto report = s.report();
    ASSERT_TRUE(report.is_ok());
    EXPECT_EQ(report->finding("memory_leak"), nullptr) << render_text(*report);
    EXPECT_EQ(report->finding("memory_growth_in_iteration"), nullptr);
}

// A watch whose owner empties the cache: the crossing is kept with what empty_cache could return
// then (from the allocator's segments) and the action's result.
TEST(ServiceMemory, WatchActionIsRecordedWithWhatItCouldReturn) {
    auto created = Session::create(cpu_options());
    ASSERT_TRUE(created.is_ok());
    Session& s = **created;
    std::atomic<bool> acted{false};
    WatchId id = 0;
    Session* session = &s;
    auto added = s.watch_memory(3 * kGiB, [&](std::uint64_t) {
        // What a built-in "empty_cache" action does: free, then say what it freed.
        acted = session->record_watch_action(id, "empty_cache", true, 2 * kGiB, "").is_ok();
    });
    ASSERT_TRUE(added.is_ok());
    id = *added;
    EXPECT_EQ(s.record_watch_action(id, "empty_cache", true, 0, "").code(), StatusCode::kNotFound);
    ASSERT_TRUE(s.start().is_ok());
    // A 2 GiB segment half used (1 GiB stranded), then a 2 GiB wholly free one (releasable),
    // which takes the process to 4 GiB: the crossing.
    put(s, driver(EventKind::kSegmentAlloc, 0, 0x7f0080000000, 2 * kGiB, 0));
    Event block = driver(EventKind::kBlockAlloc, 0, 0x7f0080000000, kGiB, 0);
    block.memory.aux = kGiB;
    put(s, block);
    put(s, driver(EventKind::kSegmentAlloc, 0, 0x7f0000000000, 2 * kGiB, 0));
    for (int i = 0; i < 400 && !acted.load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(acted.load());
    ASSERT_TRUE(s.stop().is_ok());
    auto report = s.report();
    ASSERT_TRUE(report.is_ok());
    const Section* mem = report->section("memory");
    ASSERT_NE(mem, nullptr);
    const Table* crossings = nullptr;
    for (const auto& t : mem->tables) {
        if (t.id == "watch_crossings") crossings = &t;
    }
    ASSERT_NE(crossings, nullptr) << render_text(*report);
    ASSERT_EQ(crossings->rows.size(), 1u);
    const auto& row = crossings->rows.front();
    EXPECT_EQ(std::get<std::string>(row[4]), "2.0 GiB");  // empty_cache could return
    EXPECT_EQ(std::get<std::string>(row[5]), "1.0 GiB");  // stranded: it could not
    EXPECT_EQ(std::get<std::string>(row[6]), "empty_cache");
    EXPECT_EQ(std::get<std::string>(row[7]), "freed 2.0 GiB");
}

}  // namespace
}  // namespace gpudiag

// SPDX-License-Identifier: Apache-2.0
// The soak tests' generated workload holds exactly what its truth() says: the planted leak at its
// rate and site, every block but the leaked ones freed, events in time order, the same run for a
// seed whatever the number of shards it is produced in, and a source labelled as generated.
#include "service_workload.hpp"

#include <gpudiag/string_table.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <vector>

namespace gpudiag::soak {
namespace {

ServiceWorkloadOptions two_hours() {
    ServiceWorkloadOptions o;
    o.hours = 2;
    o.requests_per_second = 10;
    o.leak_every = 100;
    o.leak_bytes = 1 << 20;
    o.devices = 2;
    return o;
}

std::vector<Event> run(ServiceWorkload& w) {
    std::vector<Event> all;
    while (w.next(all)) {
    }
    return all;
}

TEST(ServiceWorkload, HoldsWhatItsTruthSays) {
    StringTable strings;
    ServiceWorkload w(two_hours(), [&](std::string_view s) { return strings.intern(s); });
    EXPECT_TRUE(w.source().simulated);
    const std::vector<Event> events = run(w);
    const ServiceWorkloadTruth& t = w.truth();
    EXPECT_EQ(t.events, events.size());
    // About 10 requests a second for two hours.
    EXPECT_NEAR(static_cast<double>(t.requests), 72000, 72000 * 0.03);
    EXPECT_EQ(t.kernels, t.requests * 12);
    EXPECT_EQ(t.leaked_blocks, t.requests / 100);
    EXPECT_EQ(t.leaked_bytes, t.leaked_blocks << 20);
    EXPECT_NEAR(t.leak_bytes_per_hour(), 10.0 / 100 * 3600 * (1 << 20),
                0.05 * 10.0 / 100 * 3600 * (1 << 20));
    // Every block is freed but the leaked ones, which are all at the leak's site.
    std::map<std::uint64_t, const Event*> live;
    std::uint64_t kernels = 0;
    std::uint64_t counters = 0;
    std::map<std::pair<std::uint16_t, std::uint32_t>, std::uint64_t> stream_free;  // device, stream
    for (const Event& e : events) {
        if (e.kind == EventKind::kBlockAlloc) {
            ASSERT_TRUE(live.emplace(e.memory.address, &e).second) << "address allocated twice";
        } else if (e.kind == EventKind::kBlockFree) {
            ASSERT_EQ(live.erase(e.memory.address), 1u);
        } else if (e.kind == EventKind::kKernel) {
            ++kernels;
            auto& free_at = stream_free[{e.device, e.stream}];
            EXPECT_GE(e.start_ns, free_at) << "kernels overlap on a stream";
            free_at = e.end_ns;
        } else if (e.kind == EventKind::kCounter) {
            ++counters;
        }
    }
    EXPECT_EQ(kernels, t.kernels);
    EXPECT_EQ(counters, t.samples);
    EXPECT_EQ(t.samples, 2u * 7200u * 6u);  // six metrics a second on each of two devices
    ASSERT_EQ(live.size(), t.leaked_blocks);
    for (const auto& [address, e] : live) {
        EXPECT_EQ(strings.lookup(e->memory.site), two_hours().leak_site);
        EXPECT_EQ(e->memory.bytes, 1u << 20);
    }
}

TEST(ServiceWorkload, ShardsTogetherAreTheSameRun) {
    StringTable strings;
    auto intern = [&](std::string_view s) { return strings.intern(s); };
    ServiceWorkload whole(two_hours(), intern);
    std::vector<Event> one = run(whole);
    for (const std::uint32_t shards : {2u, 3u, 8u}) {
        ServiceWorkloadTruth sum;
        std::uint64_t events = 0;
        std::vector<std::uint64_t> request_starts;
        for (std::uint32_t k = 0; k < shards; ++k) {
            ServiceWorkloadOptions o = two_hours();
            o.shard = k;
            o.shards = shards;
            ServiceWorkload part(o, intern);
            const std::vector<Event> got = run(part);
            events += got.size();
            sum.add(part.truth());
            for (const Event& e : got) {
                if (e.kind == EventKind::kBlockAlloc && e.memory.bytes == (4u << 20))
                    request_starts.push_back(e.start_ns);
            }
        }
        SCOPED_TRACE(shards);
        EXPECT_EQ(events, one.size());
        EXPECT_EQ(sum.requests, whole.truth().requests);
        EXPECT_EQ(sum.leaked_blocks, whole.truth().leaked_blocks);
        EXPECT_EQ(sum.leaked_bytes, whole.truth().leaked_bytes);
        EXPECT_EQ(sum.samples, whole.truth().samples);
        EXPECT_EQ(sum.first_ns, whole.truth().first_ns);
        // Kernel durations are each shard's own draws: the last kernel ends about as late.
        EXPECT_NEAR(static_cast<double>(sum.last_ns), static_cast<double>(whole.truth().last_ns),
                    1e7);
        // The same arrival times: every request of the run, once.
        std::vector<std::uint64_t> expected;
        for (const Event& e : one) {
            if (e.kind == EventKind::kBlockAlloc && e.memory.bytes == (4u << 20))
                expected.push_back(e.start_ns);
        }
        std::sort(request_starts.begin(), request_starts.end());
        EXPECT_EQ(request_starts, expected);
    }
}

TEST(ServiceWorkload, SameSeedSameStream) {
    StringTable a_strings;
    StringTable b_strings;
    ServiceWorkloadOptions o = two_hours();
    o.hours = 0.1;
    ServiceWorkload a(o, [&](std::string_view s) { return a_strings.intern(s); });
    ServiceWorkload b(o, [&](std::string_view s) { return b_strings.intern(s); });
    const auto x = run(a);
    const auto y = run(b);
    ASSERT_EQ(x.size(), y.size());
    for (std::size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(0, std::memcmp(&x[i], &y[i], sizeof(Event))) << i;
}

}  // namespace
}  // namespace gpudiag::soak

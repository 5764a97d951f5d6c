// SPDX-License-Identifier: Apache-2.0
// MemorySeries: a device's memory levels over time in at most `capacity` points, however long
// the run. Each point summarises a time bucket (min/max/last); when the points fill up,
// neighbours are merged pairwise and the bucket width doubles, so resolution degrades evenly
// instead of the history being cut.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpudiag::detail {

struct MemoryLevels {
    std::uint64_t allocated = 0;  ///< live framework blocks, rounded
    std::uint64_t reserved = 0;   ///< framework segments
    std::uint64_t outside = 0;    ///< device memory held outside the framework
    std::uint64_t process = 0;    ///< NVML's figure for the process (0 when not sampled)
};

struct MemorySeriesPoint {
    std::uint64_t start_ns = 0;
    std::uint64_t allocated_min = 0;
    std::uint64_t allocated_max = 0;
    std::uint64_t allocated_last = 0;
    std::uint64_t reserved_max = 0;
    std::uint64_t reserved_last = 0;
    std::uint64_t used_max = 0;  ///< reserved + outside
    std::uint64_t outside_last = 0;
    // Lowest levels in the bucket: what persisted through it (the trends use them).
    std::uint64_t reserved_min = 0;
    std::uint64_t outside_min = 0;
    std::uint64_t process_min = 0;
    std::uint64_t process_max = 0;

    void merge(const MemorySeriesPoint& later) {
        allocated_min = std::min(allocated_min, later.allocated_min);
        allocated_max = std::max(allocated_max, later.allocated_max);
        reserved_max = std::max(reserved_max, later.reserved_max);
        used_max = std::max(used_max, later.used_max);
        reserved_min = std::min(reserved_min, later.reserved_min);
        outside_min = std::min(outside_min, later.outside_min);
        process_min = std::min(process_min, later.process_min);
        process_max = std::max(process_max, later.process_max);
        allocated_last = later.allocated_last;
        reserved_last = later.reserved_last;
        outside_last = later.outside_last;
    }
};

class MemorySeries {
public:
    explicit MemorySeries(std::size_t capacity = 2048, std::uint64_t initial_width_ns = 1000)
        : capacity_(std::max<std::size_t>(capacity, 4) & ~std::size_t{1}),
          width_ns_(std::max<std::uint64_t>(initial_width_ns, 1)) {}

    /// Records the levels at time `t_ns`. Times before the current bucket (small disorder)
    /// count in the current bucket.
    void record(std::uint64_t t_ns, const MemoryLevels& v) {
        if (!open_) {
            if (!started_) {
                origin_ns_ = t_ns;
                started_ = true;
            }
            open(t_ns, v);
            return;
        }
        if (t_ns >= bucket_end()) {
            close();
            open(t_ns, v);
            return;
        }
        update(v);
    }

    /// Closed points plus the open bucket, oldest first.
    [[nodiscard]] std::vector<MemorySeriesPoint> points() const {
        std::vector<MemorySeriesPoint> out = points_;
        if (open_) out.push_back(current_);
        return out;
    }
    [[nodiscard]] std::size_t size() const noexcept { return points_.size() + (open_ ? 1 : 0); }
    [[nodiscard]] std::uint64_t width_ns() const noexcept { return width_ns_; }
    [[nodiscard]] std::uint64_t origin_ns() const noexcept { return origin_ns_; }
    /// Number of closed buckets so far (grows by one each time a bucket closes).
    [[nodiscard]] std::uint64_t closed_buckets() const noexcept { return closed_; }

private:
    [[nodiscard]] std::uint64_t bucket_end() const noexcept {
        return current_.start_ns + width_ns_;
    }
    void open(std::uint64_t t_ns, const MemoryLevels& v) {
        // Align to the bucket grid so merged pairs cover equal spans.
        std::uint64_t offset = t_ns >= origin_ns_ ? (t_ns - origin_ns_) / width_ns_ * width_ns_ : 0;
        current_ = MemorySeriesPoint{};
        current_.start_ns = origin_ns_ + offset;
        current_.allocated_min = current_.allocated_max = v.allocated;
        current_.reserved_min = v.reserved;
        current_.outside_min = v.outside;
        current_.process_min = current_.process_max = v.process;
        open_ = true;
        update(v);
    }
    void update(const MemoryLevels& v) {
        current_.allocated_min = std::min(current_.allocated_min, v.allocated);
        current_.allocated_max = std::max(current_.allocated_max, v.allocated);
        current_.allocated_last = v.allocated;
        current_.reserved_max = std::max(current_.reserved_max, v.reserved);
        current_.reserved_last = v.reserved;
        current_.used_max = std::max(current_.used_max, v.reserved + v.outside);
        current_.outside_last = v.outside;
        current_.reserved_min = std::min(current_.reserved_min, v.reserved);
        current_.outside_min = std::min(current_.outside_min, v.outside);
        current_.process_min = std::min(current_.process_min, v.process);
        current_.process_max = std::max(current_.process_max, v.process);
    }
    void close() {
        // After a compaction the open bucket may fall in the last merged one: fold it in.
        if (!points_.empty() && points_.back().start_ns == current_.start_ns) {
            points_.back().merge(current_);
        } else {
            points_.push_back(current_);
        }
        open_ = false;
        ++closed_;
        if (points_.size() >= capacity_) compact();
    }
    // Halves the points: each pair of buckets [2k, 2k+1] on the doubled grid becomes one.
    void compact() {
        width_ns_ *= 2;
        std::vector<MemorySeriesPoint> merged;
        merged.reserve(capacity_ / 2 + 1);
        for (const auto& p : points_) {
            std::uint64_t start = origin_ns_ + (p.start_ns - origin_ns_) / width_ns_ * width_ns_;
            if (!merged.empty() && merged.back().start_ns == start) {
                merged.back().merge(p);
            } else {
                merged.push_back(p);
                merged.back().start_ns = start;
            }
        }
        points_ = std::move(merged);
        if (open_)
            current_.start_ns =
                origin_ns_ + (current_.start_ns - origin_ns_) / width_ns_ * width_ns_;
    }

    std::size_t capacity_;
    std::uint64_t width_ns_;
    std::uint64_t origin_ns_ = 0;
    bool started_ = false;
    bool open_ = false;
    std::uint64_t closed_ = 0;
    MemorySeriesPoint current_;
    std::vector<MemorySeriesPoint> points_;
};

}  // namespace gpudiag::detail

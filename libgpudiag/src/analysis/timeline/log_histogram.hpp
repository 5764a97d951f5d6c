// SPDX-License-Identifier: Apache-2.0
// LogHistogram: bounded-memory quantiles of durations (8 bins per power of two, ~9 % wide), so a
// median over millions of kernels costs 4 KiB, not a sorted copy.
#pragma once

#include <array>
#include <bit>
#include <cstdint>

namespace gpudiag::detail {

class LogHistogram {
public:
    void add(std::uint64_t value) noexcept {
        ++bins_[bin_of(value)];
        ++count_;
    }
    [[nodiscard]] std::uint64_t count() const noexcept { return count_; }

    /// The q-quantile (0..1), reported as the middle of its bin; 0 when empty.
    [[nodiscard]] double quantile(double q) const noexcept {
        if (count_ == 0) return 0;
        auto rank = static_cast<std::uint64_t>(q * static_cast<double>(count_ - 1));
        std::uint64_t seen = 0;
        for (std::size_t b = 0; b < bins_.size(); ++b) {
            seen += bins_[b];
            if (seen > rank) return bin_middle(b);
        }
        return bin_middle(bins_.size() - 1);
    }

private:
    static constexpr int kSubBins = 8;

    static std::size_t bin_of(std::uint64_t v) noexcept {
        if (v < kSubBins) return static_cast<std::size_t>(v);
        int exp = 63 - std::countl_zero(v);  // v in [2^exp, 2^(exp+1))
        auto sub = static_cast<std::size_t>((v >> (exp - 3)) & (kSubBins - 1));
        return static_cast<std::size_t>(exp - 2) * kSubBins + sub;
    }
    static double bin_middle(std::size_t b) noexcept {
        if (b < kSubBins) return static_cast<double>(b);
        std::size_t exp = b / kSubBins + 2;
        std::size_t sub = b % kSubBins;
        double lo = static_cast<double>((std::uint64_t{kSubBins} + sub) << (exp - 3));
        double width = static_cast<double>(std::uint64_t{1} << (exp - 3));
        return lo + width / 2;
    }

    std::array<std::uint64_t, 64 * kSubBins> bins_{};
    std::uint64_t count_ = 0;
};

}  // namespace gpudiag::detail

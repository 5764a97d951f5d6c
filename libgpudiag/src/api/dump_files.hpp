// SPDX-License-Identifier: Apache-2.0
// DumpFiles: where a session's dumps go and which of them stay, so that the evidence a service
// leaves is never lost to an early flapping watch and never overwritten by a restart.
//
// Names carry the process and the moment: <stem>-dump-<pid>-<UTC yyyymmddThhmmss>-<n>-<why><ext>
// beside record_path, created exclusively (a name taken is never truncated: the next number is
// tried). Retention, per reason (requested, oom, watch): the first dump of each reason is kept for
// good, and the most recent ones besides it up to kRecentPerReason; over the byte budget, the
// oldest dumps that are neither a reason's first nor the newest go first. An operator's request
// or an out-of-memory dump is always written: room is made by deleting, never by refusing. A
// watch that fires again and again writes at most one dump per kWatchDumpSpacing.
//
// The recording a previous run left at record_path is renamed, not truncated, at start:
// <stem>-previous-<its UTC mtime><ext>, at most kPreviousKept of them.
#pragma once

#include <gpudiag/status.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gpudiag::detail {

class DumpFiles {
public:
    static constexpr std::size_t kRecentPerReason = 4;
    static constexpr std::size_t kPreviousKept = 3;
    static constexpr std::chrono::seconds kWatchDumpSpacing{30};

    /// `record_path`: the session's recording; `budget_bytes`: what all dumps may take (0 = no
    /// budget).
    DumpFiles(const std::string& record_path, std::uint64_t budget_bytes, long pid);

    /// Whether a dump for `why` is to be written now (a watch's is spaced; the others always are).
    [[nodiscard]] bool due(const std::string& why, std::chrono::steady_clock::time_point now);
    /// A name for the next dump of `why`, not taken on disk.
    [[nodiscard]] std::string next_path(const std::string& why) const;
    /// `path` was written for `why`: it is kept, and older ones are deleted as the policy says.
    void written(const std::string& path, const std::string& why);

    /// Moves away what a previous run left at `record_path` (and old moved-away ones past
    /// kPreviousKept). Returns the new name, or "" when there was nothing there.
    static Result<std::string> keep_previous(const std::string& record_path);

    [[nodiscard]] std::uint64_t written_count() const noexcept { return written_; }
    [[nodiscard]] std::uint64_t deleted_count() const noexcept { return deleted_; }
    [[nodiscard]] std::uint64_t spaced_out() const noexcept { return spaced_out_; }
    [[nodiscard]] std::uint64_t bytes_kept() const noexcept;
    /// The dumps on disk now, oldest first.
    [[nodiscard]] std::vector<std::string> kept() const;

private:
    struct Dump {
        std::string path;
        std::string why;
        std::uint64_t bytes;
        bool first_of_reason;
    };
    void prune();

    std::string stem_;
    std::string extension_;
    std::uint64_t budget_;
    long pid_;
    std::vector<Dump> dumps_;  // oldest first
    std::uint64_t written_ = 0;
    std::uint64_t deleted_ = 0;
    std::uint64_t spaced_out_ = 0;
    std::chrono::steady_clock::time_point last_watch_dump_{};
    bool watch_dumped_ = false;
};

}  // namespace gpudiag::detail

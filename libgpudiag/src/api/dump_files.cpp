// SPDX-License-Identifier: Apache-2.0
#include "api/dump_files.hpp"

#include "support/file_name.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <system_error>

namespace gpudiag::detail {
namespace {

namespace fs = std::filesystem;

std::string utc_stamp(std::time_t t) {
    std::tm tm{};
    gmtime_r(&t, &tm);
    char out[32];
    std::strftime(out, sizeof out, "%Y%m%dT%H%M%S", &tm);
    return out;
}

bool exists(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

std::uint64_t size_of(const std::string& path) {
    std::error_code ec;
    const auto n = fs::file_size(path, ec);
    return ec ? 0 : static_cast<std::uint64_t>(n);
}

}  // namespace

DumpFiles::DumpFiles(const std::string& record_path, std::uint64_t budget_bytes, long pid)
    : budget_(budget_bytes), pid_(pid) {
    std::tie(stem_, extension_) = split_extension(record_path);
}

bool DumpFiles::due(const std::string& why, std::chrono::steady_clock::time_point now) {
    if (why != "watch") return true;
    if (watch_dumped_ && now - last_watch_dump_ < kWatchDumpSpacing) {
        ++spaced_out_;
        return false;
    }
    watch_dumped_ = true;
    last_watch_dump_ = now;
    return true;
}

std::string DumpFiles::next_path(const std::string& why) const {
    const std::string stamp = utc_stamp(std::time(nullptr));
    for (std::uint64_t n = written_ + 1;; ++n) {
        std::string path =
            fmt::format("{}-dump-{}-{}-{}-{}{}", stem_, pid_, stamp, n, why, extension_);
        if (!exists(path)) return path;
    }
}

void DumpFiles::written(const std::string& path, const std::string& why) {
    ++written_;
    const bool first =
        std::none_of(dumps_.begin(), dumps_.end(), [&](const Dump& d) { return d.why == why; });
    dumps_.push_back(Dump{path, why, size_of(path), first});
    prune();
}

// The newest dump stays whatever the budget: it is the one just asked for.
void DumpFiles::prune() {
    auto recent_of = [&](const std::string& why) {
        std::size_t n = 0;
        for (const Dump& d : dumps_) n += (d.why == why && !d.first_of_reason) ? 1 : 0;
        return n;
    };
    auto remove_at = [&](std::size_t i) {
        std::error_code ec;
        fs::remove(dumps_[i].path, ec);
        dumps_.erase(dumps_.begin() + static_cast<std::ptrdiff_t>(i));
        ++deleted_;
    };
    // Past kRecentPerReason of one reason: its oldest non-first go.
    for (std::size_t i = 0; i + 1 < dumps_.size();) {
        if (!dumps_[i].first_of_reason && recent_of(dumps_[i].why) > kRecentPerReason) {
            remove_at(i);
        } else {
            ++i;
        }
    }
    // Over the budget: the oldest that are neither a first nor the newest go, then the firsts.
    for (bool firsts : {false, true}) {
        for (std::size_t i = 0; budget_ > 0 && bytes_kept() > budget_ && i + 1 < dumps_.size();) {
            if (dumps_[i].first_of_reason == firsts) {
                remove_at(i);
            } else {
                ++i;
            }
        }
    }
}

std::uint64_t DumpFiles::bytes_kept() const noexcept {
    std::uint64_t total = 0;
    for (const Dump& d : dumps_) total += d.bytes;
    return total;
}

std::vector<std::string> DumpFiles::kept() const {
    std::vector<std::string> out;
    out.reserve(dumps_.size());
    for (const Dump& d : dumps_) out.push_back(d.path);
    return out;
}

Result<std::string> DumpFiles::keep_previous(const std::string& record_path) {
    struct stat st {};
    if (::stat(record_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        return std::string();
    }
    const auto [stem, ext] = split_extension(record_path);
    std::string moved = stem + "-previous-" + utc_stamp(st.st_mtime) + ext;
    for (int n = 2; exists(moved); ++n) {
        moved = fmt::format("{}-previous-{}-{}{}", stem, utc_stamp(st.st_mtime), n, ext);
    }
    if (std::rename(record_path.c_str(), moved.c_str()) != 0) {
        return io_error(record_path +
                        ": a previous run's recording is there and could not be "
                        "kept aside (" +
                        std::strerror(errno) + "); it is not overwritten");
    }
    // The oldest moved-away recordings past kPreviousKept go (names sort by time).
    const fs::path folder = fs::path(record_path).parent_path().empty()
                                ? fs::path(".")
                                : fs::path(record_path).parent_path();
    const std::string prefix = fs::path(stem).filename().string() + "-previous-";
    std::vector<std::string> previous;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(folder, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind(prefix, 0) == 0 && name.size() >= ext.size() &&
            name.compare(name.size() - ext.size(), ext.size(), ext) == 0) {
            previous.push_back(e.path().string());
        }
    }
    std::sort(previous.begin(), previous.end());
    for (std::size_t i = 0; i + kPreviousKept < previous.size(); ++i) fs::remove(previous[i], ec);
    return moved;
}

}  // namespace gpudiag::detail

// SPDX-License-Identifier: Apache-2.0
#include "api/replay_sink.hpp"

#include "core/event_strings.hpp"

#include <chrono>
#include <thread>

namespace gpudiag::detail {

void ReplaySink::begin(const SourceInfo& info, const StringTable& strings) {
    source_ = info;
    strings_ = &strings;
}

StringId ReplaySink::session_id(StringId recorded) {
    if (recorded <= StringTable::kOverflowString || strings_ == nullptr) return recorded;
    constexpr std::size_t kMaxCached = std::size_t{1} << 20;  // recorded ids are dense
    if (recorded >= kMaxCached) return session_.intern(strings_->lookup(recorded));
    if (recorded >= ids_.size()) ids_.resize(recorded + std::size_t{1}, kNoString);
    if (ids_[recorded] == kNoString) ids_[recorded] = session_.intern(strings_->lookup(recorded));
    return ids_[recorded];
}

void ReplaySink::consume(std::span<const Event> events) {
    for (Event e : events) {
        if (StringId* id = string_id_of(e)) *id = session_id(*id);
        // The hand-off is bounded; a replay waits for the worker instead of dropping.
        while (!session_.record(e)) {
            if (!session_.running()) return;
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        ++events_;
    }
}

}  // namespace gpudiag::detail

// SPDX-License-Identifier: Apache-2.0
// ReplaySink: feeds events read from a recording into a running Session, their names interned
// again in the session's table, waiting for the hand-off rather than dropping (Session::replay).
#pragma once

#include <gpudiag/session.hpp>
#include <gpudiag/sink.hpp>

#include <cstdint>
#include <vector>

namespace gpudiag::detail {

class ReplaySink final : public EventSink {
public:
    explicit ReplaySink(Session& session) : session_(session) {}

    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;

    [[nodiscard]] std::uint64_t events() const noexcept { return events_; }
    [[nodiscard]] const SourceInfo& source() const noexcept { return source_; }

private:
    StringId session_id(StringId recorded);

    Session& session_;
    const StringTable* strings_ = nullptr;
    std::vector<StringId> ids_;  // recorded id -> session id (0 = not looked up yet)
    SourceInfo source_;
    std::uint64_t events_ = 0;
};

}  // namespace gpudiag::detail

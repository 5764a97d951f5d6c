// SPDX-License-Identifier: Apache-2.0
// ChromeTraceWriter: an EventSink that streams events as Chrome trace events to a FILE.
#pragma once

#include <gpudiag/sink.hpp>

#include "support/json_writer.hpp"

#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <utility>

namespace gpudiag::detail {

class ChromeTraceWriter final : public EventSink {
public:
    /// Live allocations tracked for the memory counters; beyond this the counters stop (a
    /// counted note says so) rather than the table growing without bound.
    static constexpr std::size_t kMaxTrackedAllocations = std::size_t{1} << 22;

    /// `out` stays owned by the caller. Call finish() after the last source.
    explicit ChromeTraceWriter(std::FILE* out);

    void begin(const SourceInfo& info, const StringTable& strings) override;
    void consume(std::span<const Event> events) override;
    void end(const SourceSummary& summary) override;

    /// Closes the JSON document and flushes. Returns false on a write error.
    bool finish();
    [[nodiscard]] std::uint64_t events_written() const noexcept { return written_; }
    /// A remark stored in the trace's otherData (e.g. where reading stopped).
    void set_note(std::string note) { note_ = std::move(note); }

private:
    void write(const Event& e);
    void complete(const char* name_prefix, std::string_view name, const char* category,
                  std::uint64_t pid, std::uint64_t tid, const Event& e);
    void memory(const Event& e);
    void counter(std::string_view name, std::uint64_t pid, std::uint64_t ts_ns, double value);
    void name_gpu(std::uint16_t device);
    void flush_if_large();
    std::string_view text(StringId id) const;

    std::FILE* out_;
    std::string note_;
    std::string buffer_;
    JsonWriter json_;
    const StringTable* strings_ = nullptr;
    std::uint64_t written_ = 0;
    std::uint64_t origin_ns_ = 0;  // first timestamp of the first source: keeps ts small
    bool have_origin_ = false;
    bool write_failed_ = false;
    bool tracking_full_ = false;
    std::uint32_t source_index_ = 0;
    std::unordered_map<std::uint64_t, std::uint64_t> live_;    // (device, address) -> bytes
    std::unordered_map<std::uint16_t, double> in_use_;         // device -> bytes
    std::unordered_map<std::uint16_t, bool> gpu_named_;
};

}  // namespace gpudiag::detail

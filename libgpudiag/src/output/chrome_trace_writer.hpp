// SPDX-License-Identifier: Apache-2.0
// ChromeTraceWriter: the Chrome trace-event JSON of an export, streamed to a file in 1 MiB pieces
// (an export's memory does not grow with the input). Times are ns on the inputs' clock, written as
// µs from the first event seen. It counts what it drew, so the export can tell an input that gave
// nothing to draw from one that did.
#pragma once

#include <gpudiag/status.hpp>

#include "support/json_writer.hpp"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace gpudiag::detail {

class ChromeTraceWriter {
public:
    /// A slice's or marker's argument: a name and an integer.
    using Arg = std::pair<const char*, std::int64_t>;

    explicit ChromeTraceWriter(std::FILE* out);

    /// Closes the event array, writes `other_data` (the writer's own object, filled by the
    /// caller) and flushes.
    Status finish(const std::function<void(JsonWriter&)>& other_data);
    Status maybe_flush();
    void set_origin_if_unset(std::uint64_t ns);

    /// A slice [start, end] on track (pid, tid); `cname` is one of Chrome's reserved colours.
    void complete(std::string_view name, const char* cat, std::uint64_t pid, std::uint64_t tid,
                  std::uint64_t start, std::uint64_t end, const char* cname = nullptr,
                  std::initializer_list<Arg> args = {});
    /// A marker at `ts` on track (pid, tid) (thread scope).
    void instant(std::string_view name, const char* cat, std::uint64_t pid, std::uint64_t tid,
                 std::uint64_t ts, std::initializer_list<Arg> args = {});
    void counter(std::uint64_t pid, const char* name, std::uint64_t ts, double value);
    void process_name(std::uint64_t pid, const std::string& name, int sort);
    void thread_name(std::uint64_t pid, std::uint64_t tid, const std::string& name);
    /// Where chrome://tracing puts the track among its process' tracks (Perfetto orders by tid).
    void thread_sort_index(std::uint64_t pid, std::uint64_t tid, std::int64_t sort);

    /// Slices and counter samples written so far (markers and metadata draw no timeline).
    [[nodiscard]] std::uint64_t drawn() const { return drawn_; }

private:
    Status flush();
    [[nodiscard]] double us(std::uint64_t ns) const;
    void metadata(const char* what, std::uint64_t pid, std::uint64_t tid, const char* key,
                  const std::string& name, std::int64_t number);
    void args(std::initializer_list<Arg> list);

    std::FILE* out_;
    std::string buffer_;
    JsonWriter json_;
    std::uint64_t origin_ = 0;
    bool has_origin_ = false;
    std::uint64_t drawn_ = 0;
};

}  // namespace gpudiag::detail

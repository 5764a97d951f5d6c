// SPDX-License-Identifier: Apache-2.0
#include "output/chrome_trace_writer.hpp"

#include <cerrno>
#include <cstring>

namespace gpudiag::detail {
namespace {

constexpr std::size_t kFlushBytes = 1 << 20;

}  // namespace

ChromeTraceWriter::ChromeTraceWriter(std::FILE* out) : out_(out), json_(buffer_, false) {
    json_.begin_object().key("traceEvents").begin_array();
}

Status ChromeTraceWriter::finish(const std::function<void(JsonWriter&)>& other_data) {
    json_.end_array();
    json_.field("displayTimeUnit", "ns");
    json_.key("otherData").begin_object().field("producer", "gpudiag");
    if (other_data) other_data(json_);
    json_.end_object();
    json_.end_object();
    buffer_ += '\n';
    return flush();
}

Status ChromeTraceWriter::maybe_flush() {
    return buffer_.size() >= kFlushBytes ? flush() : Status::ok();
}

void ChromeTraceWriter::set_origin_if_unset(std::uint64_t ns) {
    if (!has_origin_) {
        origin_ = ns;
        has_origin_ = true;
    }
}

void ChromeTraceWriter::complete(std::string_view name, const char* cat, std::uint64_t pid,
                                 std::uint64_t tid, std::uint64_t start, std::uint64_t end,
                                 const char* cname, std::initializer_list<Arg> list) {
    json_.begin_object();
    json_.field("ph", "X").field("name", name).field("cat", cat);
    json_.field("pid", pid).field("tid", tid);
    json_.key("ts").value(us(start));
    json_.key("dur").value(static_cast<double>(end > start ? end - start : 0) / 1000.0);
    if (cname != nullptr) json_.field("cname", cname);
    args(list);
    json_.end_object();
    ++drawn_;
}

void ChromeTraceWriter::instant(std::string_view name, const char* cat, std::uint64_t pid,
                                std::uint64_t tid, std::uint64_t ts,
                                std::initializer_list<Arg> list) {
    json_.begin_object();
    json_.field("ph", "i").field("s", "t").field("name", name).field("cat", cat);
    json_.field("pid", pid).field("tid", tid);
    json_.key("ts").value(us(ts));
    args(list);
    json_.end_object();
}

void ChromeTraceWriter::counter(std::uint64_t pid, const char* name, std::uint64_t ts,
                                double value) {
    json_.begin_object().field("ph", "C").field("name", name).field("pid", pid);
    json_.key("ts").value(us(ts));
    json_.key("args").begin_object().field("value", value).end_object();
    json_.end_object();
    ++drawn_;
}

void ChromeTraceWriter::process_name(std::uint64_t pid, const std::string& name, int sort) {
    metadata("process_name", pid, 0, "name", name, 0);
    metadata("process_sort_index", pid, 0, "sort_index", std::string(), sort);
}

void ChromeTraceWriter::thread_name(std::uint64_t pid, std::uint64_t tid, const std::string& name) {
    metadata("thread_name", pid, tid, "name", name, 0);
}

void ChromeTraceWriter::thread_sort_index(std::uint64_t pid, std::uint64_t tid, std::int64_t sort) {
    metadata("thread_sort_index", pid, tid, "sort_index", std::string(), sort);
}

// A metadata record: a text argument when `name` is not empty, else the number.
void ChromeTraceWriter::metadata(const char* what, std::uint64_t pid, std::uint64_t tid,
                                 const char* key, const std::string& name, std::int64_t number) {
    json_.begin_object().field("ph", "M").field("name", what).field("pid", pid).field("tid", tid);
    json_.key("args").begin_object();
    if (name.empty()) {
        json_.field(key, number);
    } else {
        json_.field(key, name);
    }
    json_.end_object().end_object();
}

void ChromeTraceWriter::args(std::initializer_list<Arg> list) {
    if (list.size() == 0) return;
    json_.key("args").begin_object();
    for (const Arg& a : list) json_.field(a.first, a.second);
    json_.end_object();
}

double ChromeTraceWriter::us(std::uint64_t ns) const {
    return static_cast<double>(static_cast<std::int64_t>(ns - origin_)) / 1000.0;
}

Status ChromeTraceWriter::flush() {
    if (!buffer_.empty() &&
        std::fwrite(buffer_.data(), 1, buffer_.size(), out_) != buffer_.size()) {
        return io_error(std::string("cannot write the trace (") + std::strerror(errno) + ")");
    }
    buffer_.clear();
    return Status::ok();
}

}  // namespace gpudiag::detail

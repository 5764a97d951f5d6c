// SPDX-License-Identifier: Apache-2.0
// Chrome trace export: replays each input through a ChromeTraceSink (the timeline analysis for
// the idle gaps and their causes, and the trace's events at once), streaming JSON to the output
// file in 1 MiB pieces. An input that gives nothing to draw is refused, with what it held: an
// empty trace would open as a blank timeline, which reads as "nothing happened".
#include <gpudiag/trace_export.hpp>

#include "importers/open_source.hpp"
#include "output/chrome_trace_sink.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <new>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace gpudiag {
namespace {

struct FileCloser {
    void operator()(std::FILE* f) const noexcept {
        if (f != nullptr) std::fclose(f);
    }
};

// Removes the output unless the export succeeded: no half-written or empty trace is left behind.
// Only a regular file: an export to /dev/null must not remove /dev/null.
class RemoveUnlessKept {
public:
    explicit RemoveUnlessKept(std::string path) : path_(std::move(path)) {}
    ~RemoveUnlessKept() {
        std::error_code ec;
        if (!kept_ && std::filesystem::is_regular_file(path_, ec))
            std::filesystem::remove(path_, ec);
    }
    RemoveUnlessKept(const RemoveUnlessKept&) = delete;
    RemoveUnlessKept& operator=(const RemoveUnlessKept&) = delete;
    void keep() { kept_ = true; }

private:
    std::string path_;
    bool kept_ = false;
};

Status nothing_to_draw(const std::vector<std::string>& empty) {
    std::string text;
    for (const std::string& e : empty) text += (text.empty() ? "" : "; ") + e;
    return failed_precondition(
        text +
        ": nothing to draw, so no trace was written (without a GPU, a recording shows only what "
        "the program marked: steps, phases such as gpudiag.phase(), DataLoader waits)");
}

Status export_impl(const std::vector<std::string>& inputs, const std::string& output_path,
                   const AnalysisOptions& options) {
    if (inputs.empty()) return invalid_argument("no input files given");
    if (output_path.empty()) return invalid_argument("no output path given");
    RemoveUnlessKept cleanup(output_path);  // declared first: runs after the file is closed
    std::unique_ptr<std::FILE, FileCloser> out(std::fopen(output_path.c_str(), "wb"));
    if (!out) {
        cleanup.keep();  // not ours: we could not create it
        return io_error(output_path + ": cannot create (" + std::strerror(errno) + ")");
    }
    detail::ChromeTraceWriter writer(out.get());
    detail::HostTracks::Counts counts;
    std::vector<std::string> empty;  // inputs that drew nothing, with what they held
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        auto source = detail::open_event_source(inputs[i], options);
        if (!source) return source.status();
        StringTable strings;
        detail::ChromeTraceSink sink(writer, i, options, counts);
        Status st = (*source)->run(sink, strings);
        if (!sink.status().is_ok()) return sink.status();
        if (!st.is_ok()) return Status(st.code(), inputs[i] + ": " + st.message());
        if (!sink.drew()) empty.push_back(inputs[i] + " " + sink.held());
    }
    if (!empty.empty()) return nothing_to_draw(empty);
    Status st =
        writer.finish([&](detail::JsonWriter& json) { detail::write_marker_counts(json, counts); });
    if (!st.is_ok()) return Status(st.code(), output_path + ": " + st.message());
    if (std::fflush(out.get()) != 0) return io_error(output_path + ": cannot write");
    cleanup.keep();
    return Status::ok();
}

}  // namespace

Status export_chrome_trace(const std::vector<std::string>& inputs, const std::string& output_path,
                           const AnalysisOptions& options) noexcept {
    try {
        return export_impl(inputs, output_path, options);
    } catch (const std::bad_alloc&) {
        return resource_exhausted("out of host memory while exporting");
    } catch (const std::exception& e) {
        return internal_error(std::string("export failed: ") + e.what());
    } catch (...) {
        return internal_error("export failed with an unknown exception");
    }
}

}  // namespace gpudiag

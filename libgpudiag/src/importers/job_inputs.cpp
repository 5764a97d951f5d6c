// SPDX-License-Identifier: Apache-2.0
#include "importers/job_inputs.hpp"

#include "importers/archive.hpp"
#include "importers/open_source.hpp"

#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace gpudiag::detail {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kMaxInputs = 1 << 20;  // files of one job: a sanity bound
constexpr int kMaxFolderDepth = 4;
constexpr std::size_t kSniffBytes = 64;

bool has_glob_chars(const std::string& s) {
    return s.find_first_of("*?[") != std::string::npos;
}

// The paths a glob pattern matches, sorted.
Result<std::vector<std::string>> glob_paths(const std::string& pattern) {
    glob_t g{};
    int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
    std::vector<std::string> out;
    if (rc == 0) {
        for (std::size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
    }
    globfree(&g);
    if (out.empty()) return not_found(pattern + ": no file matches");
    std::sort(out.begin(), out.end());
    return out;
}

// The first bytes of `in`'s content (inflated when gzip).
Result<std::string> sniff(std::unique_ptr<ByteStream> in) {
    auto content = content_of(std::move(in));
    if (!content) return content.status();
    std::string head(kSniffBytes, '\0');
    auto got = read_fully(**content, head.data(), head.size());
    if (!got) return got.status();
    head.resize(*got);
    return head;
}

// Adds the readable members of the archive at `path`.
Status add_archive(const std::string& path, std::vector<FoundInput>& out) {
    auto in = open_content_stream(path);
    if (!in) return in.status();
    TarReader tar(std::move(*in));
    std::vector<FoundInput> members;
    for (;;) {
        auto more = tar.next();
        if (!more) return Status(more.status().code(), path + ": " + more.status().message());
        if (!*more) break;
        auto head = sniff(borrowed_stream(tar.member()));
        const InputFormat format = head ? classify_content(*head) : InputFormat::kUnknown;
        if (format != InputFormat::kUnknown)
            members.push_back({JobInput{path, tar.name()}, format});
        if (out.size() + members.size() > kMaxInputs)
            return invalid_argument(path + ": too many members");
    }
    if (members.empty())
        return invalid_argument(path + ": no member gpudiag reads in this archive");
    // In name order, as a folder's files: archives list members in the order they were added.
    std::sort(members.begin(), members.end(), [](const FoundInput& a, const FoundInput& b) {
        return a.input.member < b.input.member;
    });
    out.insert(out.end(), members.begin(), members.end());
    return Status::ok();
}

// Adds one file: itself when gpudiag reads its format, its members when it is an archive.
// `listed`: found in a folder, where other files are skipped rather than refused.
Status add_file(const std::string& path, std::vector<FoundInput>& out, bool listed) {
    auto format = detect_format(path);
    if (format) {
        out.push_back({JobInput{path, {}}, *format});
        return Status::ok();
    }
    auto tar = is_tar_archive(path);
    if (tar && *tar) return add_archive(path, out);
    if (listed) return Status::ok();
    return format.status();
}

// The readable files under `dir`, sorted by path, subfolders included down to kMaxFolderDepth.
Status add_folder(const std::string& dir, std::vector<FoundInput>& out) {
    std::vector<std::string> files;
    std::error_code ec;
    fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
    if (ec) return io_error(dir + ": cannot list (" + ec.message() + ")");
    for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (ec) return io_error(dir + ": cannot list (" + ec.message() + ")");
        if (it.depth() >= kMaxFolderDepth) it.disable_recursion_pending();
        const std::string name = it->path().filename().string();
        if (!name.empty() && name[0] == '.') {  // hidden files and folders (tool state)
            if (it->is_directory(ec)) it.disable_recursion_pending();
            continue;
        }
        if (!it->is_regular_file(ec)) continue;
        files.push_back(it->path().string());
        if (files.size() > kMaxInputs) return invalid_argument(dir + ": too many files");
    }
    std::sort(files.begin(), files.end());
    const std::size_t before = out.size();
    for (const auto& f : files) GPUDIAG_RETURN_IF_ERROR(add_file(f, out, true));
    if (out.size() == before) {
        return invalid_argument(dir +
                                ": no file gpudiag reads in this folder (traces, snapshots, "
                                "recordings, Nsight SQLite exports, or archives of them)");
    }
    return Status::ok();
}

Status add_path(const std::string& path, std::vector<FoundInput>& out) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) return add_folder(path, out);
    if (!fs::exists(path, ec) && has_glob_chars(path)) {
        auto matches = glob_paths(path);
        if (!matches) return matches.status();
        for (const auto& m : *matches) {
            if (fs::is_directory(m, ec))
                GPUDIAG_RETURN_IF_ERROR(add_folder(m, out));
            else
                GPUDIAG_RETURN_IF_ERROR(add_file(m, out, true));
        }
        return Status::ok();
    }
    return add_file(path, out, false);
}

// A member copied out to a temporary file (for readers that need a file), removed with it.
class TempFile {
public:
    TempFile() = default;
    ~TempFile() {
        if (!path_.empty()) std::remove(path_.c_str());
    }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;

    Status write_from(ByteStream& in) {
        const char* dir = std::getenv("TMPDIR");
        std::string templ =
            std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/gpudiag-member-XXXXXX";
        int fd = ::mkstemp(templ.data());
        if (fd < 0)
            return io_error("cannot create a temporary file in " +
                            templ.substr(0, templ.rfind('/')));
        path_ = templ;
        std::FILE* f = ::fdopen(fd, "wb");
        if (f == nullptr) {
            ::close(fd);
            return io_error("cannot write " + path_);
        }
        std::vector<char> buffer(1 << 20);
        Status status = Status::ok();
        for (;;) {
            auto got = in.read(buffer.data(), buffer.size());
            if (!got) {
                status = got.status();
                break;
            }
            if (*got == 0) break;
            if (std::fwrite(buffer.data(), 1, *got, f) != *got) {
                status = io_error("cannot write " + path_ + " (disk full?)");
                break;
            }
        }
        if (std::fclose(f) != 0 && status.is_ok()) status = io_error("cannot write " + path_);
        return status;
    }
    [[nodiscard]] const std::string& path() const noexcept { return path_; }

private:
    std::string path_;
};

// Runs `inner` under another name: the input's, where the source read a temporary copy.
class RenamedSource final : public EventSource {
public:
    RenamedSource(std::unique_ptr<EventSource> inner, std::unique_ptr<TempFile> file,
                  std::string name)
        : inner_(std::move(inner)), file_(std::move(file)), name_(std::move(name)) {}

    Status run(EventSink& sink, StringTable& strings) override {
        Renamer renamer(sink, *this);
        Status s = inner_->run(renamer, strings);
        if (s.is_ok()) return s;
        return Status(s.code(), renamed(s.message()));
    }

private:
    class Renamer final : public EventSink {
    public:
        Renamer(EventSink& sink, RenamedSource& owner) : sink_(sink), owner_(owner) {}
        void begin(const SourceInfo& info, const StringTable& strings) override {
            SourceInfo renamed = info;
            renamed.description = owner_.name_;
            sink_.begin(renamed, strings);
        }
        void consume(std::span<const Event> events) override { sink_.consume(events); }
        void end(const SourceSummary& summary) override {
            SourceSummary s = summary;
            for (auto& n : s.notes) n = owner_.renamed(n);
            sink_.end(s);
        }

    private:
        EventSink& sink_;
        RenamedSource& owner_;
    };

    std::string renamed(std::string text) const {
        const std::string& from = file_->path();
        for (std::size_t at = text.find(from); !from.empty() && at != std::string::npos;
             at = text.find(from, at + name_.size())) {
            text.replace(at, from.size(), name_);
        }
        return text;
    }

    std::unique_ptr<EventSource> inner_;
    std::unique_ptr<TempFile> file_;
    std::string name_;
};

}  // namespace

Result<std::vector<FoundInput>> find_inputs(const std::vector<std::string>& paths) {
    if (paths.empty()) return invalid_argument("no input files given");
    std::vector<FoundInput> out;
    for (const auto& p : paths) GPUDIAG_RETURN_IF_ERROR(add_path(p, out));
    return out;
}

Result<std::vector<JobInput>> expand_inputs(const std::vector<std::string>& paths) {
    auto found = find_inputs(paths);
    if (!found) return found.status();
    std::vector<JobInput> out;
    out.reserve(found->size());
    for (auto& f : *found) out.push_back(std::move(f.input));
    return out;
}

Result<FoundInput> find_input(const JobInput& input) {
    if (input.member.empty()) {
        auto format = detect_format(input.path);
        if (!format) return format.status();
        return FoundInput{input, *format};
    }
    auto member = open_archive_member(input.path, input.member);
    if (!member) return member.status();
    auto head = sniff(std::move(*member));
    if (!head) return head.status();
    const InputFormat f = classify_content(*head);
    if (f == InputFormat::kUnknown)
        return unsupported(input.name() + ": not a format gpudiag reads");
    return FoundInput{input, f};
}

Result<std::unique_ptr<EventSource>> open_found_input(const FoundInput& found,
                                                      const AnalysisOptions& options) {
    const JobInput& input = found.input;
    if (input.member.empty()) return open_source_as(input.path, found.format, options);
    if (found.format == InputFormat::kKinetoJson) {
        const JobInput copy = input;
        return open_kineto_stream_source(
            input.name(), [copy] { return open_archive_member(copy.path, copy.member); }, options);
    }
    auto member = open_archive_member(input.path, input.member);
    if (!member) return member.status();
    auto file = std::make_unique<TempFile>();
    GPUDIAG_RETURN_IF_ERROR(file->write_from(**member));
    auto inner = open_source_as(file->path(), found.format, options);
    if (!inner)
        return Status(inner.status().code(), input.name() + ": " + inner.status().message());
    return std::unique_ptr<EventSource>(
        std::make_unique<RenamedSource>(std::move(*inner), std::move(file), input.name()));
}

std::int32_t rank_from_name(const JobInput& input) {
    fs::path p(input.member.empty() ? input.path : input.member);
    for (const std::string& part : {p.filename().string(), p.parent_path().filename().string()}) {
        std::string lower(part);
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        for (std::string_view word : {"rank", "worker"}) {
            for (std::size_t at = lower.find(word); at != std::string::npos;
                 at = lower.find(word, at + 1)) {
                if (at > 0 && std::isalpha(static_cast<unsigned char>(lower[at - 1]))) continue;
                std::size_t d = at + word.size();
                if (d < lower.size() && (lower[d] == '-' || lower[d] == '_' || lower[d] == ' '))
                    ++d;
                std::size_t end = d;
                while (end < lower.size() && end - d < 9 &&
                       std::isdigit(static_cast<unsigned char>(lower[end])))
                    ++end;
                if (end == d ||
                    (end < lower.size() && std::isdigit(static_cast<unsigned char>(lower[end]))))
                    continue;
                return static_cast<std::int32_t>(std::stol(lower.substr(d, end - d)));
            }
        }
    }
    return -1;
}

}  // namespace gpudiag::detail

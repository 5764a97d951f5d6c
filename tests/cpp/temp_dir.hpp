// SPDX-License-Identifier: Apache-2.0
// TempDir: a folder of one test's own under the system's temporary directory, named after the
// test's tag and process, removed with everything in it when the test ends.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace gpudiag::testing {

class TempDir {
public:
    explicit TempDir(const std::string& tag)
        : path_(std::filesystem::temp_directory_path() /
                ("gpudiag_" + tag + "_" + std::to_string(::getpid()))) {
        std::filesystem::create_directories(path_);
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    /// The path of `name` inside the folder.
    [[nodiscard]] std::string file(const std::string& name) const {
        return (path_ / name).string();
    }
    /// The files whose names start with `prefix` and end with `suffix`, sorted.
    [[nodiscard]] std::vector<std::string> files(const std::string& prefix,
                                                 const std::string& suffix) const {
        std::vector<std::string> out;
        std::error_code ignored;
        for (const auto& e : std::filesystem::directory_iterator(path_, ignored)) {
            const std::string name = e.path().filename().string();
            if (name.size() >= prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
                name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
                out.push_back(e.path().string());
            }
        }
        std::sort(out.begin(), out.end());
        return out;
    }

private:
    std::filesystem::path path_;
};

}  // namespace gpudiag::testing

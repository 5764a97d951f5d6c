// SPDX-License-Identifier: Apache-2.0
// Status codes, their names, and the version string.
#include <gpudiag/status.hpp>
#include <gpudiag/version.hpp>

namespace gpudiag {

const char* version() noexcept {
    return GPUDIAG_VERSION_STRING;
}

Status::Status(StatusCode code, std::string message) noexcept
    : code_(code), message_(std::move(message)) {}

std::string Status::to_string() const {
    if (is_ok()) return "ok";
    return std::string(status_code_name(code_)) + ": " + message_;
}

Status invalid_argument(std::string m) noexcept {
    return {StatusCode::kInvalidArgument, std::move(m)};
}
Status not_found(std::string m) noexcept {
    return {StatusCode::kNotFound, std::move(m)};
}
Status unavailable(std::string m) noexcept {
    return {StatusCode::kUnavailable, std::move(m)};
}
Status corrupt_data(std::string m) noexcept {
    return {StatusCode::kCorruptData, std::move(m)};
}
Status unsupported(std::string m) noexcept {
    return {StatusCode::kUnsupported, std::move(m)};
}
Status io_error(std::string m) noexcept {
    return {StatusCode::kIoError, std::move(m)};
}
Status resource_exhausted(std::string m) noexcept {
    return {StatusCode::kResourceExhausted, std::move(m)};
}
Status failed_precondition(std::string m) noexcept {
    return {StatusCode::kFailedPrecondition, std::move(m)};
}
Status internal_error(std::string m) noexcept {
    return {StatusCode::kInternal, std::move(m)};
}

}  // namespace gpudiag

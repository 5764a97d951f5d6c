// SPDX-License-Identifier: Apache-2.0
// Status and Result<T>: how every public gpudiag function reports failure (it never throws).
#pragma once

#include <gpudiag/export.hpp>
#include <gpudiag/names.hpp>

#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace gpudiag {

/// What went wrong, coarsely; the message says exactly what and what to do about it.
enum class StatusCode : int {
    kOk = 0,
    kInvalidArgument = 1,  ///< the caller passed something unusable (null, out of range, bad state)
    kNotFound = 2,         ///< a file, device or name does not exist
    kUnavailable = 3,      ///< a capability is absent here (no GPU, CUPTI held by another tool)
    kCorruptData = 4,      ///< input that is not what it claims to be (bad trace, hostile pickle)
    kUnsupported = 5,      ///< valid input of a kind or version gpudiag does not handle
    kIoError = 6,          ///< the operating system refused a read or write
    kResourceExhausted = 7,   ///< a configured bound was reached (buffer cap, memory cap)
    kFailedPrecondition = 8,  ///< the call is fine but not now (stop before start)
    kInternal = 9,            ///< a bug in gpudiag: please report it
};
template <>
GPUDIAG_API EnumNames<StatusCode> enum_names<StatusCode>() noexcept;

/// The stable lower-case name of a code, e.g. "invalid_argument".
GPUDIAG_API const char* status_code_name(StatusCode code) noexcept;

/// A code and a human-readable message. Cheap to copy when OK.
class [[nodiscard]] Status {
public:
    Status() noexcept = default;
    GPUDIAG_API Status(StatusCode code, std::string message) noexcept;

    static Status ok() noexcept { return Status(); }

    [[nodiscard]] bool is_ok() const noexcept { return code_ == StatusCode::kOk; }
    explicit operator bool() const noexcept { return is_ok(); }
    [[nodiscard]] StatusCode code() const noexcept { return code_; }
    [[nodiscard]] const std::string& message() const noexcept { return message_; }
    /// "invalid_argument: <message>" or "ok".
    [[nodiscard]] GPUDIAG_API std::string to_string() const;

private:
    StatusCode code_ = StatusCode::kOk;
    std::string message_;
};

GPUDIAG_API Status invalid_argument(std::string message) noexcept;
GPUDIAG_API Status not_found(std::string message) noexcept;
GPUDIAG_API Status unavailable(std::string message) noexcept;
GPUDIAG_API Status corrupt_data(std::string message) noexcept;
GPUDIAG_API Status unsupported(std::string message) noexcept;
GPUDIAG_API Status io_error(std::string message) noexcept;
GPUDIAG_API Status resource_exhausted(std::string message) noexcept;
GPUDIAG_API Status failed_precondition(std::string message) noexcept;
GPUDIAG_API Status internal_error(std::string message) noexcept;

/// Either a value or a non-OK Status. Accessing the value of an error Result is a programming
/// error; value() then returns a default-constructed T rather than aborting the host process.
template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) noexcept(std::is_nothrow_move_constructible_v<T>)  // NOLINT: implicit by design
        : status_(), value_(std::move(value)), has_value_(true) {}
    Result(Status status) noexcept  // NOLINT: implicit by design
        : status_(std::move(status)) {
        if (status_.is_ok()) {
            status_ =
                Status(StatusCode::kInternal, "Result built from an OK status without a value");
        }
    }

    [[nodiscard]] bool is_ok() const noexcept { return has_value_; }
    explicit operator bool() const noexcept { return has_value_; }
    [[nodiscard]] const Status& status() const noexcept { return status_; }

    T& value() & noexcept { return value_; }
    const T& value() const& noexcept { return value_; }
    T&& value() && noexcept { return std::move(value_); }
    T* operator->() noexcept { return &value_; }
    const T* operator->() const noexcept { return &value_; }
    T& operator*() & noexcept { return value_; }
    const T& operator*() const& noexcept { return value_; }

private:
    Status status_;
    T value_{};
    bool has_value_ = false;
};

}  // namespace gpudiag

/// Returns the Status of `expr` from the enclosing function when it is not OK.
#define GPUDIAG_RETURN_IF_ERROR(expr)                   \
    do {                                                \
        ::gpudiag::Status gpudiag_status_tmp_ = (expr); \
        if (!gpudiag_status_tmp_.is_ok()) {             \
            return gpudiag_status_tmp_;                 \
        }                                               \
    } while (false)

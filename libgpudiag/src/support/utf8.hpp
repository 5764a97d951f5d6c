// SPDX-License-Identifier: Apache-2.0
// Text from files is not always valid UTF-8 (an SQLite column holds whatever bytes were written);
// reports, JSON and Python need it to be.
#pragma once

#include <string>
#include <string_view>

namespace gpudiag::detail {

/// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or values past U+10FFFF).
bool is_valid_utf8(std::string_view text) noexcept;

/// `text` itself when it is valid UTF-8; otherwise a copy in `scratch` in which every byte that
/// does not belong to a well-formed sequence became U+FFFD. Throws std::bad_alloc.
std::string_view valid_utf8(std::string_view text, std::string& scratch);

}  // namespace gpudiag::detail

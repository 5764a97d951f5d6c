// SPDX-License-Identifier: Apache-2.0
// The names a source gives as SourceInfo::producer, spelled once: readers set them, and analyses
// and renderers that depend on what made the events compare against them.
#pragma once

#include <string_view>

namespace gpudiag::detail {

inline constexpr std::string_view kProducerCapture = "gpudiag-capture";  ///< a live session
inline constexpr std::string_view kProducerKineto = "kineto";
inline constexpr std::string_view kProducerNsight = "nsight-systems";
inline constexpr std::string_view kProducerTorchSnapshot = "torch-snapshot";

}  // namespace gpudiag::detail

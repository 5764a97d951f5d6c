// SPDX-License-Identifier: Apache-2.0
// Symbol visibility for the gpudiag library (GPUDIAG_API, from the C-compatible export.h), and
// GPUDIAG_HAS_SPAN: the public C++ headers work from C++17, except the parts that take a
// std::span of events (EventSink, RecordingWriter/Reader, analyze_events), which need C++20.
#pragma once

#include <gpudiag/export.h>

#if defined(__has_include)
#    if __has_include(<version>)
#        include <version>
#    endif
#endif
#if defined(__cpp_lib_span)
#    define GPUDIAG_HAS_SPAN 1
#else
#    define GPUDIAG_HAS_SPAN 0
#endif

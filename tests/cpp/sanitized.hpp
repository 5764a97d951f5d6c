// SPDX-License-Identifier: Apache-2.0
// GPUDIAG_TEST_SANITIZED: defined when the tests run under AddressSanitizer or ThreadSanitizer,
// which reserve terabytes of address space, so tests that limit it (RLIMIT_AS) cannot run.
#pragma once

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#    define GPUDIAG_TEST_SANITIZED 1
#elif defined(__has_feature)
#    if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#        define GPUDIAG_TEST_SANITIZED 1
#    endif
#endif

/* SPDX-License-Identifier: Apache-2.0 */
/* Symbol visibility for the gpudiag library; valid C and C++ (the C API's gpudiag.h uses it). */
#ifndef GPUDIAG_EXPORT_H
#define GPUDIAG_EXPORT_H

#if defined(GPUDIAG_STATIC_DEFINE)
#    define GPUDIAG_API
#elif defined(_WIN32)
#    if defined(GPUDIAG_BUILDING)
#        define GPUDIAG_API __declspec(dllexport)
#    else
#        define GPUDIAG_API __declspec(dllimport)
#    endif
#else
#    define GPUDIAG_API __attribute__((visibility("default")))
#endif

#endif /* GPUDIAG_EXPORT_H */

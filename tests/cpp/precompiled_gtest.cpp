// SPDX-License-Identifier: Apache-2.0
// gpudiag_test_pch's only source (tests/CMakeLists.txt): the program exists to precompile
// <gtest/gtest.h> once for every test program, and holds no test of its own.

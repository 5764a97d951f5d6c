// SPDX-License-Identifier: Apache-2.0
// LayerInputShapes: the batch dimensions a trace's layers were fed, from the "Input Dims" PyTorch
// records for each operator when profiled with record_shapes=True. Two runs whose layers saw
// different batches (4 sequences of 128 tokens against 8 of 1024) do different work per step, so
// their times and memory peaks are not like for like: the comparison says so (input_shapes).
//
// Only the calls of layers with weights are read, each for the input that carries the batch:
//   aten::linear                       the activation's dims but the last (the features): 4x128
//   aten::conv1d / conv2d / conv3d     the activation's first dim (the images):            32
//   aten::embedding                    the indices' dims (its first input is the table):  4x128
// Other operators' shapes follow from these or are the model's own (weights, heads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpudiag::detail {

class LayerInputShapes {
public:
    /// Where, in an operator's "Input Dims", the batch is read; -1 when the operator is not one
    /// of the layers above.
    static int batch_input(std::string_view op) noexcept;

    /// One call of `op` whose batch-carrying input had `dims` (`rank` of them).
    void add(std::string_view op, const std::int64_t* dims, std::size_t rank);
    /// The counts of a later part of the same trace.
    void merge(const LayerInputShapes& later);

    /// The batch dimensions of at least half of the calls read ("4x128"), or "" when none was
    /// read or their batches vary (sequences padded per batch, say): then no one shape stands
    /// for the run.
    [[nodiscard]] std::string dominant() const;
    [[nodiscard]] std::uint64_t calls() const noexcept { return calls_; }

    /// Distinct shapes counted at most. Past them the batches vary too much for one to stand for
    /// the run: dominant() is "". (A cap that dropped the later shapes would count differently in
    /// a split parse, whose parts meet their shapes in another order.)
    static constexpr std::size_t kMaxShapes = 256;

private:
    void count(std::string_view key, std::uint64_t n);

    std::vector<std::pair<std::string, std::uint64_t>> counts_;  // in order of first call
    std::uint64_t calls_ = 0;
    bool overflowed_ = false;  // more than kMaxShapes distinct shapes
};

}  // namespace gpudiag::detail

// SPDX-License-Identifier: Apache-2.0
#include "importers/kineto/layer_input_shapes.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace gpudiag::detail {
namespace {

enum class Batch { kLeading, kFirst, kAll };

struct Layer {
    std::string_view op;
    int input;
    Batch batch;
};

constexpr Layer kLayers[] = {
    {"aten::linear", 0, Batch::kLeading}, {"aten::conv1d", 0, Batch::kFirst},
    {"aten::conv2d", 0, Batch::kFirst},   {"aten::conv3d", 0, Batch::kFirst},
    {"aten::embedding", 1, Batch::kAll},
};

const Layer* layer(std::string_view op) noexcept {
    for (const Layer& l : kLayers) {
        if (l.op == op) return &l;
    }
    return nullptr;
}

}  // namespace

int LayerInputShapes::batch_input(std::string_view op) noexcept {
    const Layer* l = layer(op);
    return l == nullptr ? -1 : l->input;
}

void LayerInputShapes::add(std::string_view op, const std::int64_t* dims, std::size_t rank) {
    const Layer* l = layer(op);
    if (l == nullptr) return;
    std::size_t kept = rank;
    if (l->batch == Batch::kLeading) kept = rank > 0 ? rank - 1 : 0;
    if (l->batch == Batch::kFirst) kept = std::min<std::size_t>(rank, 1);
    if (kept == 0) return;  // an unbatched call says nothing of the batch
    ++calls_;
    count(fmt::format("{}", fmt::join(dims, dims + kept, "x")), 1);
}

void LayerInputShapes::merge(const LayerInputShapes& later) {
    calls_ += later.calls_;
    overflowed_ = overflowed_ || later.overflowed_;
    for (const auto& [key, n] : later.counts_) count(key, n);
}

void LayerInputShapes::count(std::string_view key, std::uint64_t n) {
    auto it = std::find_if(counts_.begin(), counts_.end(),
                           [key](const auto& c) { return c.first == key; });
    if (it != counts_.end()) {
        it->second += n;
    } else if (counts_.size() < kMaxShapes) {
        counts_.emplace_back(key, n);
    } else {
        overflowed_ = true;
    }
}

std::string LayerInputShapes::dominant() const {
    if (overflowed_) return {};
    for (const auto& [key, n] : counts_) {
        if (2 * n >= calls_) return key;  // the first in file order where two share half
    }
    return {};
}

}  // namespace gpudiag::detail

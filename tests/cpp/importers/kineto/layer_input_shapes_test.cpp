// SPDX-License-Identifier: Apache-2.0
// The batch a trace's layers were fed (source property input_shapes): which input of which
// operator is read, which dims of it are the batch, when no one shape stands for the run, and the
// real SwitchTransformers pair, whose file names say the batch.
#include "importers/kineto/layer_input_shapes.hpp"
#include "corpus.hpp"
#include "importers/kineto/kineto_parser.hpp"
#include "importers/kineto/trace_buffer.hpp"

#include <gpudiag/analyze.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

using detail::LayerInputShapes;

void add(LayerInputShapes& shapes, const char* op, std::vector<std::int64_t> dims, int times = 1) {
    for (int i = 0; i < times; ++i) shapes.add(op, dims.data(), dims.size());
}

TEST(LayerInputShapes, EachLayerGivesItsBatchDims) {
    EXPECT_EQ(LayerInputShapes::batch_input("aten::linear"), 0);
    EXPECT_EQ(LayerInputShapes::batch_input("aten::conv2d"), 0);
    EXPECT_EQ(LayerInputShapes::batch_input("aten::embedding"), 1);  // after the table
    EXPECT_EQ(LayerInputShapes::batch_input("aten::addmm"), -1);
    EXPECT_EQ(LayerInputShapes::batch_input("aten::convolution"), -1);  // conv2d's own callee

    LayerInputShapes linear;
    add(linear, "aten::linear", {4, 128, 1024});
    EXPECT_EQ(linear.dominant(), "4x128");  // the features are the layer's, not the batch
    LayerInputShapes conv;
    add(conv, "aten::conv2d", {32, 256, 14, 14});
    EXPECT_EQ(conv.dominant(), "32");  // channels and size change from layer to layer
    LayerInputShapes embedding;
    add(embedding, "aten::embedding", {4, 128});
    EXPECT_EQ(embedding.dominant(), "4x128");
    LayerInputShapes unbatched;
    add(unbatched, "aten::linear", {1024});
    add(unbatched, "aten::matmul", {4, 128, 64});
    EXPECT_EQ(unbatched.calls(), 0u);
    EXPECT_EQ(unbatched.dominant(), "");
}

TEST(LayerInputShapes, OneShapeMustHoldHalfTheCalls) {
    LayerInputShapes padded;  // sequences padded to each batch's longest
    add(padded, "aten::linear", {8, 97, 512}, 4);
    add(padded, "aten::linear", {8, 120, 512}, 3);
    add(padded, "aten::linear", {8, 64, 512}, 3);
    EXPECT_EQ(padded.dominant(), "");

    LayerInputShapes moe;  // experts fed a routed share of the tokens, now and then
    add(moe, "aten::linear", {4, 128, 1024}, 9);
    add(moe, "aten::linear", {37, 1024}, 1);
    EXPECT_EQ(moe.dominant(), "4x128");

    LayerInputShapes tie;
    add(tie, "aten::linear", {2, 8, 16}, 2);
    add(tie, "aten::linear", {4, 8, 16}, 2);
    EXPECT_EQ(tie.dominant(), "2x8");  // the first seen: deterministic, and so the same in slices

    // More distinct shapes than are counted: none stands for the run.
    LayerInputShapes many;
    for (std::size_t b = 1; b <= 2 * LayerInputShapes::kMaxShapes; ++b) {
        add(many, "aten::linear", {static_cast<std::int64_t>(b), 16});
    }
    EXPECT_EQ(many.calls(), 2 * LayerInputShapes::kMaxShapes);
    EXPECT_EQ(many.dominant(), "");
}

TEST(LayerInputShapes, MergeAddsALaterPartsCounts) {
    LayerInputShapes first;
    add(first, "aten::linear", {4, 8, 16}, 1);
    LayerInputShapes later;
    add(later, "aten::linear", {2, 8, 16}, 2);
    first.merge(later);
    EXPECT_EQ(first.calls(), 3u);
    EXPECT_EQ(first.dominant(), "2x8");
}

// A split parse meets the shapes in another order than the serial one: past the cap both must
// still agree, here where the first shape returns after many others.
TEST(LayerInputShapes, PastTheCapSplitAndSerialAgree) {
    LayerInputShapes serial;
    LayerInputShapes first;
    LayerInputShapes later;
    for (LayerInputShapes* s : {&serial, &first}) add(*s, "aten::linear", {4, 8, 16}, 3);
    for (std::size_t b = 100; b < 100 + LayerInputShapes::kMaxShapes; ++b) {
        for (LayerInputShapes* s : {&serial, &later}) {
            add(*s, "aten::linear", {static_cast<std::int64_t>(b), 16});
        }
    }
    for (LayerInputShapes* s : {&serial, &later}) {
        add(*s, "aten::linear", {4, 8, 16}, 2 * static_cast<int>(LayerInputShapes::kMaxShapes));
    }
    first.merge(later);
    EXPECT_EQ(first.calls(), serial.calls());
    EXPECT_EQ(first.dominant(), serial.dominant());
    EXPECT_EQ(serial.dominant(), "");  // 257 distinct shapes: too many to count
}

// What the parser reads: each layer's batch-carrying input, "name" before "args" as Kineto writes
// them; other operators and malformed dims are passed over.
const char* kShapesTrace = R"JSON({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::embedding", "pid": 1, "tid": 1, "ts": 1, "dur": 1,
   "args": {"External id": 3, "Input Dims": [[100000, 1024], [4, 128], [], [], []], "Input type": ["float"]}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 2, "dur": 1,
   "args": {"Input Dims": [[4, 128, 1024], [4096, 1024], [4096]]}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 3, "dur": 1,
   "args": {"Input Dims": [[[4, 128, 1024]], [4096, 1024]]}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 4, "dur": 1,
   "args": {"Input Dims": [[1, 2, 3, 4, 5, 6, 7], [1]]}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 5, "dur": 1,
   "args": {"Input Dims": [[9, 9], [9, 9]]}},
  {"ph": "X", "cat": "cpu_op", "args": {"Input Dims": [[9, 9, 9]]}, "name": "aten::linear", "pid": 1, "tid": 1, "ts": 6, "dur": 1},
  {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1, "tid": 1, "ts": 7, "dur": 1,
   "args": {"Input Dims": "none"}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 8, "dur": 1}
]})JSON";

TEST(LayerInputShapes, TheParserReadsEachLayersBatchInput) {
    detail::TraceBuffer buffer(std::strlen(kShapesTrace));
    std::memcpy(buffer.data(), kShapesTrace, std::strlen(kShapesTrace));
    buffer.resize(std::strlen(kShapesTrace));
    StringTable strings;
    detail::KinetoParseResult r;
    ASSERT_TRUE(detail::parse_kineto_trace(buffer, "t", strings, r).is_ok());
    EXPECT_EQ(r.info.property("input_shapes"), "4x128");  // the two calls with readable dims
    EXPECT_EQ(r.events.size(), 8u);                       // every operator is still a range
}

// One SwitchTransformers forward pass at batch 4 x 128 tokens and at 8 x 1024 (the file names;
// the embedding's and every encoder linear's inputs agree); the MoE experts' routed calls are
// the few others.
TEST(LayerInputShapes, SwitchTransformersPairReadsItsTwoBatches) {
    const std::string b4 = testing::corpus_kineto_trace("switchtransformers_batch4_seq128.json");
    const std::string b8 = testing::corpus_kineto_trace("switchtransformers_batch8_seq1024.json");
    GPUDIAG_REQUIRE_FILES(b4, b8);
    auto small = analyze_files({b4});
    auto large = analyze_files({b8});
    ASSERT_TRUE(small.is_ok() && large.is_ok());
    EXPECT_EQ(small->source.property("input_shapes"), "4x128");
    EXPECT_EQ(large->source.property("input_shapes"), "8x1024");
}

}  // namespace
}  // namespace gpudiag

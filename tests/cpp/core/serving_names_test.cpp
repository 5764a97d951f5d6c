// SPDX-License-Identifier: Apache-2.0
// What serving traces' names say: the engines' iteration ranges, as the engines write them (vLLM
// v1's GPU model runner, TensorRT-LLM's PyTorch executor, SGLang's scheduler), and communication
// kernels by what they do, as their libraries name them.

#include "core/serving_names.hpp"
#include "core/range_names.hpp"

#include <gtest/gtest.h>

#include <string>

namespace gpudiag::detail {
namespace {

TEST(ServingStep, VllmIterationsByWhatTheirBatchHeld) {
    // The name in the corpus' vLLM trace: one prefill request, no decode.
    ServingStep s = serving_step("execute_context_1(888_788544)_generation_0(0)");
    ASSERT_TRUE(s.known);
    EXPECT_EQ(s.engine, ServingEngine::kVllm);
    EXPECT_EQ(s.kind, ServingStepKind::kPrefill);
    EXPECT_FALSE(s.numbered);
    EXPECT_EQ(serving_step("execute_context_0(0)_generation_32(32)").kind,
              ServingStepKind::kDecode);
    EXPECT_EQ(serving_step("execute_context_2(1024)_generation_30(30)").kind,
              ServingStepKind::kMixed);
    EXPECT_EQ(serving_step("execute_context_0(0)_generation_0(0)").kind, ServingStepKind::kUnknown);
    EXPECT_TRUE(serving_step("execute_context_0(0)_generation_0(0)").known);
}

TEST(ServingStep, TensorRtLlmIterationsCarryTheirNumber) {
    ServingStep s = serving_step("[Executor] _forward_step 41: 0 ctx reqs, 32 gen reqs");
    ASSERT_TRUE(s.known);
    EXPECT_EQ(s.engine, ServingEngine::kTensorRtLlm);
    EXPECT_EQ(s.kind, ServingStepKind::kDecode);
    EXPECT_TRUE(s.numbered);
    EXPECT_EQ(s.number, 41);
    EXPECT_EQ(serving_step("_forward_step 3: 4 ctx reqs, 0 gen reqs").kind,
              ServingStepKind::kPrefill);
    // An iteration whose counts the name does not give is still one.
    EXPECT_EQ(serving_step("_forward_step 3").kind, ServingStepKind::kUnknown);
}

TEST(ServingStep, SglangBatchesAreIterationsOfUnknownKind) {
    ServingStep s = serving_step("scheduler.run_batch");
    ASSERT_TRUE(s.known);
    EXPECT_EQ(s.engine, ServingEngine::kSglang);
    EXPECT_EQ(s.kind, ServingStepKind::kUnknown);
    EXPECT_FALSE(serving_step("scheduler.run_batch_later").known);
}

TEST(ServingStep, OtherNamesAreNoIterations) {
    // A range named after the phase may hold a whole generation loop: not one iteration.
    for (const char* name : {"prefill", "decode", "ProfilerStep#3", "execute_model",
                             "execute_context_x(1)_generation_0(0)", "execute_context_1(5)",
                             "[Executor] _forward_step x: 1 ctx reqs", "", "forward"}) {
        EXPECT_FALSE(serving_step(name).known) << name;
    }
}

TEST(ServingStep, NvtxPrefillAndDecodeArePhasesNotSteps) {
    for (const char* name : {"prefill", "Decode"}) {
        const RangeMeaning m = nvtx_range_meaning(name);
        EXPECT_TRUE(m.known) << name;
        EXPECT_EQ(m.category, RangeCategory::kPhase) << name;
    }
    EXPECT_FALSE(nvtx_range_meaning("prefill_chunk").known);
}

TEST(CommKernel, RecognisedByWhatTheyDo) {
    struct Case {
        const char* kernel;
        CommKernel kind;
    };
    const Case cases[] = {
        {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", CommKernel::kNccl},
        {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", CommKernel::kNccl},
        {"void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*,"
         " unsigned long, unsigned int**, unsigned long, unsigned long)",
         CommKernel::kSymmetricMemory},
        {"void c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 16, 8>(float**, "
         "unsigned long, float*)",
         CommKernel::kSymmetricMemory},
        {"void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, "
         "vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
         CommKernel::kCustomAllReduce},
        {"void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport<"
         "__nv_bfloat16>(...)",
         CommKernel::kFusedAllReduce},
        {"void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*, ...)",
         CommKernel::kExpertAllToAll},
        {"void deep_ep::internode_ll::combine<false, 7168>(void*, ...)",
         CommKernel::kExpertAllToAll},
        // The vLLM trace's compute kernels, a TensorRT-LLM one among them: not communication.
        {"void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long)",
         CommKernel::kNone},
        {"void tensorrt_llm::kernels::quantize_with_block_size<(tensorrt_llm::"
         "BlockScaleQuantizationType)2, __nv_bfloat16, 32, true>(int, int, int, int)",
         CommKernel::kNone},
        {"void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams<"
         "cutlass::bfloat16_t, cutlass::bfloat16_t, 4, true> >(...)",
         CommKernel::kNone},
        {"nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", CommKernel::kNone},
    };
    for (const Case& c : cases) EXPECT_EQ(comm_kernel(c.kernel), c.kind) << c.kernel;
}

TEST(ServingEngine, FromKernelsOnlyVllmsOwnLibrary) {
    EXPECT_EQ(engine_of_kernel("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long)"),
              ServingEngine::kVllm);
    // FlashInfer ships TensorRT-LLM's kernels to every engine: they name no engine.
    EXPECT_EQ(engine_of_kernel("void tensorrt_llm::kernels::quantize_with_block_size<2>(int)"),
              ServingEngine::kNone);
}

TEST(ServingSeen, StepsBeforeKernelsNameTheEngineAndSayWhatWasRead) {
    ServingSeen seen;
    seen.note_kernel("void vllm::rms_norm_kernel<float>(float*)", CommKernel::kNone);
    EXPECT_EQ(seen.engine, ServingEngine::kVllm);
    EXPECT_FALSE(seen.engine_from_steps);
    const std::string trt = "[Executor] _forward_step 7: 0 ctx reqs, 8 gen reqs";
    seen.note_step(serving_step(trt), trt);
    seen.note_step(serving_step(trt), trt);
    EXPECT_EQ(seen.engine, ServingEngine::kTensorRtLlm);  // the iteration ranges outweigh kernels
    EXPECT_TRUE(seen.engine_from_steps);
    EXPECT_EQ(seen.steps(), 2u);
    EXPECT_EQ(seen.steps_description(),
              "2 TensorRT-LLM engine iterations (\"" + trt + "\") read as steps: 2 decode");
    EXPECT_EQ(seen.comm_description(), "");
    seen.note_kernel("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)", CommKernel::kNccl);
    seen.note_kernel("multimem_all_reduce_kernel<float>", CommKernel::kSymmetricMemory);
    EXPECT_EQ(seen.comm_description(),
              "NCCL (ncclDevKernel_AllReduce_Sum_bf16_RING_LL(...)); symmetric-memory all-reduce "
              "(multimem_all_reduce_kernel<float>)");
}

}  // namespace
}  // namespace gpudiag::detail

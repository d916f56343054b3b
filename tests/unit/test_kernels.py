"""GPU kernels by family and precision (``analyzers.kernels``): names as the vendors'
libraries write them, declared here with what they are, and the breakdown's shares. The
real GPU traces recorded by other projects: ``tests/integration/test_gpu_traces.py``."""

from __future__ import annotations

import pandas as pd
import pytest

from probe.analyzers.kernels import classify_kernels, kernel_breakdown

# name -> (family, precision): the naming each library documents or prints
DECLARED = {
    "volta_sgemm_128x64_nn": ("gemm", "fp32"),  # cuBLAS SIMT single precision
    "ampere_tf32_s1688gemm_tf32_256x128_16x3_nn": ("gemm", "tf32"),
    "volta_h884gemm_64x64_ldg8_nn": ("gemm", "fp16"),  # HMMA 8x8x4 tensor cores
    "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4": ("gemm", "bf16"),
    "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8": ("gemm", "bf16"),
    "nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_NTT": ("gemm", "unknown"),  # letters not read
    "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3": ("gemm", "fp4"),
    "implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>": (
        "conv",
        "fp32",
    ),
    "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw": ("conv", "tf32"),
    "volta_scudnn_128x64_relu_interior_nn_v1": ("conv", "fp32"),
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, "
    "false, cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t>"
    " >, false, true, false, false, true, true, false, false>(Flash_fwd_params)": (
        "attention",
        "bf16",
    ),
    "fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)": (
        "attention",
        "fp16",
    ),
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, "
    "c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, int)": ("softmax", "bf16"),
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
    "std::array<char*, 3ul> >(int, at::native::AddFunctor<float>, std::array<char*, 3ul>)": (
        "elementwise",
        "fp32",
    ),
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>"
    "(int, float, c10::Half const*)": ("norm", "fp16"),
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
    "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >": (
        "reduction",
        "fp32",
    ),
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)": ("collective", "fp32"),
    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)": (
        "collective",
        "unknown",
    ),
    "triton_poi_fused_add_mul_0": ("fused", "unknown"),
    "triton_tem_fused_mm_0": ("gemm", "unknown"),
    # a C++ name that merely contains "conv" is no convolution
    "vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8> vllm::_typeConvert<c10::BFloat16>": (
        "norm",
        "bf16",
    ),
    "some_vendor_kernel_v2": ("other", "unknown"),
    # FP32 operands on TF32 tensor-core shapes (an FP32 bmm with TF32 allowed, H200)
    "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>(...)": (
        "gemm",
        "tf32",
    ),
}


def kernels_of(names_and_ns: list[tuple[str, int]]) -> pd.DataFrame:
    return pd.DataFrame(
        {"name": [n for n, _ in names_and_ns], "dur_ns": [d for _, d in names_and_ns]}
    )


def test_kernel_names_read_as_the_libraries_write_them():
    classified = classify_kernels(kernels_of([(n, 1000) for n in DECLARED]))
    read = zip(classified["family"], classified["precision"], strict=True)
    got = dict(zip(classified["name"], read, strict=True))
    wrong = {n: (got[n], want) for n, want in DECLARED.items() if got[n] != want}
    assert not wrong, wrong


def test_the_breakdown_gives_each_family_and_precision_its_share_of_gpu_time():
    k = kernels_of(
        [("volta_sgemm_128x64_nn", 600_000)] * 2
        + [("void at::native::vectorized_elementwise_kernel<4, AddFunctor<float>>", 4_000)] * 50
    )
    b = kernel_breakdown(k)
    top = b.iloc[0]
    assert (top["family"], top["precision"], top["kernels"]) == ("gemm", "fp32", 2)
    assert top["share"] == pytest.approx(1.2e6 / 1.4e6)
    small = b.iloc[1]
    assert small["family"] == "elementwise" and small["short_share"] == 1.0
    assert b["share"].sum() == pytest.approx(1.0)
    assert kernel_breakdown(k.iloc[:0]).empty


# names of a BF16 encoder's kernels on an H200 (torch 2.11, tests/gpu_corpus): cuBLASLt's
# nvjet GEMMs say no type, cuDNN's fused attention says f16 for BF16 inputs
NVJET = "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_bias_TNT"
CUDNN_SDPA = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64"
TF32_XMMA = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1"


def launched(*rows: tuple[str, int]) -> pd.DataFrame:
    """Kernels by (name, external id of the op that launched each)."""
    k = kernels_of([(n, 1000) for n, _ in rows])
    return k.assign(external_id=[e for _, e in rows])


OPS = pd.DataFrame(
    {
        "external_id": [1, 2, 3, 4],
        "name": ["aten::addmm", "aten::_cudnn_attention_forward", "aten::addmm", "aten::mm"],
        "input_types": [
            '["c10::BFloat16","c10::BFloat16","c10::BFloat16","Scalar","Scalar"]',
            '["c10::BFloat16","c10::BFloat16","c10::BFloat16","","Scalar"]',
            '["float","float","float","Scalar","Scalar"]',
            '["c10::Float8_e4m3fn","c10::Float8_e4m3fn","float","float"]',
        ],
    }
)


def test_a_kernel_whose_name_says_no_type_takes_its_launching_op_s_narrow_float():
    k = classify_kernels(launched((NVJET, 1), (CUDNN_SDPA, 2), (NVJET, 4)), OPS)
    assert list(k["precision"]) == ["bf16", "bf16", "fp8"]  # FP8 scales are FP32: narrowest
    assert list(classify_kernels(launched((NVJET, 1)))["precision"]) == ["unknown"]  # no ops


def test_an_fp32_op_leaves_the_name_s_reading_fp32_and_tf32_alike_to_cublas():
    k = classify_kernels(launched((NVJET, 3), (TF32_XMMA, 3), (NVJET, 99)), OPS)
    assert list(k["precision"]) == ["unknown", "tf32", "unknown"]

# The fused-attention pairs at three more shapes (1 x 512, 2 x 2048, 16 x 512 tokens,
# BF16), recorded after the host-side estimate was written, to check it on cases it was
# not made on: one call of the device tool. record.py needs torch only (on the device).
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())"
timeout 240 python3 tests/gpu_corpus/record.py --out "$OUT/traces" --only \
    enc_b1_t512_bf16 enc_b1_t512_bf16_sdpa enc_b2_t2048_bf16 enc_b2_t2048_bf16_sdpa \
    enc_b16_t512_bf16 enc_b16_t512_bf16_sdpa 2>&1 | grep -v USDT
ls -la "$OUT/traces"

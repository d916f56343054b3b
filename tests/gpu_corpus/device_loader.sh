# The data-loader pair again, each block timed after the 4 workers' prefetch queue has
# drained (record.py's SETTLE): the rate the workers sustain, not the batches they
# queued during the other side's turn. One call of the device tool; torch only.
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv
nproc
timeout 200 python3 tests/gpu_corpus/record.py --out "$OUT/traces" --only loader_w0 loader_w4 \
    2>&1 | grep -v USDT
ls -la "$OUT/traces"

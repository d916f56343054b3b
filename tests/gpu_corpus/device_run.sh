# How the GPU corpus was made: one call of the device tool (a lent H100/H200, torch
# preinstalled there, nothing reachable), with probe's missing dependencies carried as
# wheels in .whl (README.md). Writes $OUT/runs.tar.gz (probe run on gpu_service.py, with
# and without stages, and the service's own timings) and $OUT/traces.tar.gz (record.py).
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())"
python3 setup.py -q build_ext --inplace 2>&1 | tail -2
mkdir -p /tmp/runs
python3 tests/gpu_corpus/gpu_service.py --seconds 4 --timings | tee /tmp/runs/service_truth.json
python3 tests/gpu_corpus/gpu_service.py --seconds 4 --timings --plain | tee /tmp/runs/service_truth_plain.json
for mode in stages plain; do
    flag=$([ $mode = plain ] && echo --plain)
    timeout 90 python3 -m probe.cli run -o /tmp/runs/run_$mode tests/gpu_corpus/gpu_service.py \
        --seconds 8 $flag 2>&1 | grep -v USDT
done
tar czf "$OUT/runs.tar.gz" -C /tmp runs
timeout 330 python3 tests/gpu_corpus/record.py --out /tmp/traces 2>&1 | grep -v USDT
tar czf "$OUT/traces.tar.gz" -C /tmp traces
ls -la /tmp/traces "$OUT"

# The CUPTI teardown check (README.md): the service's stage times after a torch.profiler
# window under probe run, with Kineto's teardown on (probe's default since) and off
# (TEARDOWN_CUPTI=0: Kineto's own default before CUDA 12.6), twice each, beside plain runs.
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
python3 setup.py -q build_ext --inplace 2>&1 | tail -2
for i in 1 2; do
    python3 tests/gpu_corpus/gpu_service.py --seconds 5 --timings --plain
    python3 -m probe.cli run --no-report -o /tmp/on$i tests/gpu_corpus/gpu_service.py \
        --seconds 8 2>&1 | grep -E "^\{|^probe"
    TEARDOWN_CUPTI=0 python3 -m probe.cli run --no-report -o /tmp/off$i \
        tests/gpu_corpus/gpu_service.py --seconds 8 2>&1 | grep -E "^\{|^probe"
done
python3 tests/gpu_corpus/after_window.py /tmp/on1 /tmp/off1 /tmp/on2 /tmp/off2
tar czf "$OUT/teardown.tar.gz" -C /tmp on1 off1 on2 off2

# What probe costs a launch-bound GPU service, beside py-spy at 100 Hz (README.md): three
# rounds of the undecorated gpu_service.py for 8 s plain, under `probe run` (defaults)
# and under `py-spy record -r 100`, in turn. Each line: the arm, the service's own
# ms a request over its loop (after its warm-up), and the whole process's wall seconds.
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH || exit 1
python3 setup.py -q build_ext --inplace 2>&1 | tail -2
svc="tests/gpu_corpus/gpu_service.py --seconds 8 --plain"
arm() {  # name, command...
    local name=$1; shift
    local t0=$(date +%s.%N)
    local line=$("$@" 2>&1 | grep -E '^\{"requests"' | tail -1)
    local t1=$(date +%s.%N)
    echo "$name $(python3 -c "print(round($t1 - $t0, 2))") $line" | tee -a /tmp/arms.txt
}
for i in 1 2 3; do
    arm plain python3 $svc
    arm probe python3 -m probe.cli run -o /tmp/probe$i $svc
    arm py-spy py-spy record -r 100 -o /tmp/spy$i.txt -f raw -- python3 $svc
done
python3 -m probe.cli analyze /tmp/probe1 --no-write 2>&1 | head -12
cp /tmp/arms.txt "$OUT/"; tar czf "$OUT/overhead_runs.tar.gz" -C /tmp probe1 probe2 probe3

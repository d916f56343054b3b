"""The catalog of fixes: what triggers each, how its local speedup is modelled, how to do it.

``recommend(findings, bd, facts, leak)`` -> ``Recommendation`` s sorted by estimated
end-to-end speedup (a detected leak's ``fix_leak`` first: a leaking service is killed
by the OOM killer whatever its speed). No recommendation without evidence: each is
triggered by a named finding and carries the figures that triggered it.

The estimated speedup is of throughput over the serving window (requests per second),
and, for a service serving one request at a time, of latency as well. Each model's
assumed constant is in ``MODEL`` with the source of its number; every other input is
measured in the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from analyzers.amdahl import (
    amdahl,
    ceiling,
    local_speedup_for,
    max_throughput,
    mva_throughput,
)
from analyzers.breakdown import Breakdown
from analyzers.rules import THRESHOLDS, Finding, RunFacts, stage_rows

__all__ = ["CATALOG", "MODEL", "Recommendation", "demands", "recommend"]


@dataclass(frozen=True)
class Model:
    # Threads for concurrent I/O: Goetz's sizing rule (Java Concurrency in Practice,
    # 8.2), threads = cores x (1 + wait/service), capped at a pool size that keeps
    # upstreams and sockets reasonable; the GIL's share is bounded apart (bottleneck law).
    io_workers_max: int = 16
    # Requests in flight together cost more CPU each than one at a time: GIL hand-offs
    # between threads, caches and memory bandwidth shared between processes. Measured
    # on this machine class (2 vCPUs), per-request CPU of the concurrent run against the
    # sequential one: +27% for the multimodal sample at 16 threads (5.2 -> 6.6 ms), 0 to
    # +30% across runs of the image sample; we apply +15%. Two BLAS-bound processes
    # reached 1.75-1.8x of one (without probe): 0.9 of each extra instance.
    contention_cpu: float = 1.15
    instance_efficiency: float = 0.9
    # Vectorising an interpreted numeric loop with numpy: NumPy ufuncs run 10-100x a
    # Python loop over the same data (NumPy user guide, "What is NumPy": vectorization;
    # VanderPlas, Python Data Science Handbook, ch. 2.3); on the small arrays of a
    # per-request stage the ~1 us per-call overhead keeps it below the low end. Measured
    # on the tagging sample (k-means over 576 pixels a request): 6.7-7x for the stage.
    # We use 8: the one case we measured, rounded up; revisit with more cases.
    vectorize: float = 8.0
    # Batch size suggested for dynamic batching (Triton's dynamic batcher and TorchServe
    # default examples use preferred batch sizes of 8-32); the model amortises the
    # per-op interpreter time of a stage over the batch.
    batch: int = 16
    # Half precision on a tensor-core GPU: FP16 GEMMs run at 2x or more the FP32 rate
    # (NVIDIA Mixed Precision Training guide); the model applies 2x to the GPU time.
    fp16: float = 2.0
    # Kernel fusion / CUDA graphs remove most per-kernel launch cost (PyTorch CUDA
    # Graphs blog: launch-bound models 1.1-3x); 3x on the CPU-side launch time.
    fusion: float = 3.0
    # Pinned memory and non-blocking copies roughly double effective H2D bandwidth
    # (NVIDIA "How to Optimize Data Transfers in CUDA C/C++").
    transfer: float = 2.0
    # Estimated gains below this are within the estimate's own error (the diagnosis is
    # held to 25% of the realised speedup): not worth a recommendation.
    min_speedup: float = 1.25


MODEL = Model()

CATALOG: dict[str, str] = {
    "concurrent_io": "Make the {stage} calls concurrent",
    "faster_codec": "Use a faster codec in {stage}",
    "compress_payload": "Send smaller payloads to {stage}",
    "vectorize_python": "Vectorise the Python loops in {stage}",
    "multiprocess": "Move {stage} to a process pool",
    "split_cpu_gpu_pipeline": "Run {stage} off the GPU path",
    "fp16": "Run the model in {stage} in FP16",
    "int8_calibration": "Quantise the model in {stage} to INT8",
    "kernel_fusion": "Fuse the small kernels of {stage}",
    "inference_runtime": "Serve the model in {stage} with an inference runtime",
    "io_binding": "Keep {stage}'s tensors on the device",
    "dynamic_batching": "Batch requests through {stage}",
    "multi_instance": "Run one instance per core",
    "model_packing": "Pack several models on the GPU",
    "cache_results": "Cache the results of {stage}",
    "reduce_lock_scope": "Shorten what holds the lock in {stage}",
    "lazy_init": "Initialise {stage} at start-up, not in the first request",
    "fix_leak": "Bound what grows: {stage}",
}

_HOW: dict[str, str] = {
    "concurrent_io": (
        "{stage} waits on {what} for {wait:.0%} of its time, one request at a time. "
        "Overlap the waits ({workers} in flight):\n"
        "    from concurrent.futures import ThreadPoolExecutor\n"
        "    pool = ThreadPoolExecutor(max_workers={workers})\n"
        "    for result in pool.map(handle, requests):  # handle() calls {stage}\n"
        "        ...\n"
        "or, in asyncio, `await asyncio.gather(*(fetch(u) for u in urls))` with an async "
        "client (httpx.AsyncClient, aiohttp). Waited in: {top_call}."
    ),
    "vectorize_python": (
        "{stage} spends {py:.0%} of its time in Python code: the interpreter and the "
        "builtins it calls (hottest line {top_line}). Replace per-element loops by "
        "whole-array numpy operations:\n"
        "    # before: for x in items: total += (x - c) ** 2\n"
        "    arr = np.asarray(items)\n"
        "    total = ((arr - c) ** 2).sum()\n"
        "Broadcasting (`a[:, None, :] - b[None, :, :]`) replaces nested loops."
    ),
    "dynamic_batching": (
        "{stage} runs its tensor ops one request at a time; {py:.0%} of it is the "
        "interpreter between ops, paid again for every request. Group requests:\n"
        "    batch = collect(queue, max_size={batch}, max_wait_ms=5)\n"
        "    outputs = {stage}(np.stack([r.input for r in batch]))\n"
        "(Triton's dynamic batcher, TorchServe batch_size/max_batch_delay, Ray Serve "
        "@serve.batch do this for you)."
    ),
    "multi_instance": (
        "The service is CPU-bound in {stage} and uses {used:.1f} of {cores} cores. Run "
        "one worker process per core behind the same queue or port:\n"
        "    gunicorn -w {cores} app:app          # or uvicorn --workers {cores}\n"
        "    # batch jobs: ProcessPoolExecutor(max_workers={cores}).map(handle, jobs)\n"
        "Pin BLAS to one thread per process (OMP_NUM_THREADS=1) so workers do not "
        "oversubscribe the cores."
    ),
    "multiprocess": (
        "{stage} runs Python on {threads} threads that wait for the GIL {gil:.0%} of the "
        "time. Move it to processes:\n"
        "    from concurrent.futures import ProcessPoolExecutor\n"
        "    pool = ProcessPoolExecutor(max_workers={cores})\n"
        "    result = pool.submit({stage}, payload).result()"
    ),
    "reduce_lock_scope": (
        "{stage} waits {lock:.0%} of its time on a lock ({top_call}). Hold it only "
        "around the shared state, not the work:\n"
        "    value = compute(x)          # outside\n"
        "    with lock:\n"
        "        shared[key] = value     # inside, short"
    ),
    "lazy_init": (
        "{stage} ran inside the first request and made it {ratio:.0f}x the median "
        "request ({seconds:.2f} s). Do it at start-up, before taking traffic:\n"
        "    MODEL = load_model()   # module level or the server's startup hook\n"
        "    def handle(req): return MODEL(req)\n"
        "and report ready (health check) only once it is done."
    ),
    "split_cpu_gpu_pipeline": (
        "The GPU idles while {stage} keeps the CPU busy. Run {stage} on its own "
        "thread or process, feeding the model through a bounded queue:\n"
        "    q = queue.Queue(maxsize=8)\n"
        "    threading.Thread(target=lambda: [q.put({stage}(x)) for x in inputs]).start()\n"
        "    while (x := q.get()) is not None: model(x)\n"
        "(torch DataLoader(num_workers=N, pin_memory=True) for input pipelines)."
    ),
    "fp16": (
        "The GPU is busy in {stage}. Run it in half precision:\n"
        "    model = model.half()            # or\n"
        "    with torch.autocast('cuda', dtype=torch.float16): out = model(x)"
    ),
    "inference_runtime": (
        "Export the model in {stage} and serve it with TensorRT or ONNX Runtime "
        "(graph optimisation, fused kernels):\n"
        "    torch.onnx.export(model, example, 'model.onnx')\n"
        "    sess = onnxruntime.InferenceSession('model.onnx', providers=[...])"
    ),
    "kernel_fusion": (
        "{stage} launches many small kernels and the GPU waits between them. Fuse them:\n"
        "    model = torch.compile(model, mode='reduce-overhead')  # CUDA graphs\n"
        "or capture a static-shape step with torch.cuda.CUDAGraph."
    ),
    "io_binding": (
        "{stage} waits on host-device copies ({top_call}). Pin host memory, copy "
        "asynchronously and keep results on the device:\n"
        "    x = x.pin_memory().to('cuda', non_blocking=True)\n"
        "    # ONNX Runtime: session.io_binding() to bind device buffers"
    ),
    "fix_leak": (
        "Memory grows {rate} and does not come back. {sites}Bound it:\n"
        "    from functools import lru_cache     # or cachetools.LRUCache(maxsize=...)\n"
        "    @lru_cache(maxsize=1024)\n"
        "    def cached(key): ..."
    ),
}


_THROUGHPUT_FIXES = {"concurrent_io", "multi_instance", "multiprocess", "dynamic_batching"}


@dataclass(frozen=True)
class Recommendation:
    id: str
    stage: str
    estimated_speedup: float
    p: float
    s: float
    ceiling: float
    title: str
    how: str
    evidence: dict[str, Any] = field(default_factory=dict)
    model: str = ""

    @property
    def scope(self) -> str:
        """``throughput``: the estimate scales the whole service's request rate (it
        combines with others by multiplying); ``path``: Amdahl on a share of the path."""
        return "throughput" if self.id in _THROUGHPUT_FIXES else "path"

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return round(x, 3) if math.isfinite(x) else None

        return {
            "id": self.id,
            "stage": self.stage,
            "estimated_speedup": num(self.estimated_speedup),
            "p": num(self.p),
            "s": num(self.s),
            "ceiling": num(self.ceiling),
            "title": self.title,
            "how": self.how,
            "evidence": self.evidence,
            "model": self.model,
            "scope": self.scope,
        }


def _rec(
    rid: str,
    stage: str,
    p: float,
    s: float,
    how: dict[str, Any],
    evidence: dict[str, Any],
    model: str,
    limit: float | None = None,
    speedup: float | None = None,
) -> Recommendation:
    """Amdahl's estimate for a share ``p`` made ``s`` times faster, unless ``speedup``
    comes from a throughput model (then ``limit`` is its ceiling, the bottleneck law's)."""
    if speedup is None:
        speedup = amdahl(p, s)
    return Recommendation(
        rid,
        stage,
        speedup,
        p,
        s,
        ceiling(p) if limit is None else limit,
        CATALOG[rid].format(stage=stage),
        _HOW[rid].format(stage=stage, **how),
        evidence,
        model,
    )


def demands(bd: Breakdown, facts: RunFacts, cold: dict[str, Any] | None) -> dict[str, Any]:
    """Per request: seconds of GIL, of other CPU, and of waiting; the cores free.

    The process's CPU over the serving window (probe's own threads left out), per
    request. Of it, the GIL's: everything but numeric-library kernels. CPython holds the
    GIL while it interprets and inside C calls unless they release it, which numpy's
    and torch's kernels do (and blocking I/O, already counted as waiting). Every thread
    counts, the service's helpers too. A cold start's excess is left out: it happens once.
    """
    req = bd.requests
    if not req.count or not req.throughput_per_s:
        return {}
    cpu = facts.process_cores * req.window_s
    if cold:
        cpu = max(0.0, cpu - float(cold["seconds"]))
    holds_gil = 1.0 - bd.tensor_cpu_s / bd.cpu_s if bd.cpu_s > 0 else 1.0
    d_cpu = cpu / req.count
    d_gil = d_cpu * holds_gil
    latency = req.total_s / req.count - (float(cold["seconds"]) / req.count if cold else 0.0)
    free = max(1.0, facts.cpu_count - max(0.0, facts.host_cores_busy - facts.process_cores))
    bound, which = max_throughput({"cpu": (d_cpu, free), "gil": (d_gil, 1.0)})
    return {
        "cpu_s_per_request": round(d_cpu, 6),
        "gil_s_per_request": round(d_gil, 6),
        "wait_s_per_request": round(max(0.0, latency - d_cpu), 6),
        "cores_available": round(free, 2),
        "max_throughput_per_s": round(bound, 1) if math.isfinite(bound) else None,
        "bound_by": which,
    }


def _bound_ratio(demands: dict[str, Any], bd: Breakdown) -> float | None:
    bound, now = demands.get("max_throughput_per_s"), bd.requests.throughput_per_s
    return bound / now if bound and now else None


def _concurrency_speedup(demands: dict[str, Any], workers: int) -> float:
    """Closed-system MVA: ``workers`` requests in flight against one in flight."""
    think = float(demands["wait_s_per_request"])
    d_cpu, d_gil = float(demands["cpu_s_per_request"]), float(demands["gil_s_per_request"])
    cores = max(1, round(float(demands["cores_available"])))
    one = mva_throughput(think, {"gil": (d_gil, 1), "cpu": (max(0.0, d_cpu - d_gil), cores)}, 1)
    k = MODEL.contention_cpu if workers > 1 else 1.0
    many = {"gil": (d_gil * k, 1), "cpu": (max(0.0, d_cpu - d_gil) * k, cores)}
    return mva_throughput(think, many, workers) / one if one > 0 else 1.0


def recommend(
    findings: list[Finding],
    bd: Breakdown,
    facts: RunFacts,
    *,
    cold: dict[str, Any] | None = None,
    leak: dict[str, Any] | None = None,
    model: Model = MODEL,
) -> list[Recommendation]:
    recs: list[Recommendation] = []
    rows = stage_rows(bd)
    sequential = bd.requests.concurrency < 1.5
    cap_figures = demands(bd, facts, cold)
    cores = max(1, facts.cpu_count)
    for f in findings:
        if f.share < THRESHOLDS.major_share or f.stage not in rows.index:
            continue
        row = rows.loc[f.stage]
        p = f.share
        ev = {"finding": f"{f.kind}/{f.subkind}", "path_share": round(p, 4), **f.evidence}
        # Not for sleeps: a sleep on the request path is the service's own choice
        # (polling, back-off, pacing), not a call to overlap.
        if f.kind == "io" and f.subkind in ("network", "disk") and sequential:
            wait = float(row[f"wait_{f.subkind}"])
            # Goetz's rule over the whole request: its waits in this stage against the
            # CPU each request needs (the part that cannot overlap under the GIL).
            n = max(1, bd.requests.count)
            wait_s = float(row["path_s"]) * wait / n
            service_s = cap_figures.get("cpu_s_per_request") or max(
                1e-6, float(row["path_s"]) * (1.0 - wait) / n
            )
            ratio = wait_s / max(service_s, 1e-9)
            free = float(cap_figures.get("cores_available") or 1.0)
            workers = int(min(model.io_workers_max, math.ceil(free * (1.0 + ratio))))
            what = {"network": "the network", "disk": "the disk"}[f.subkind]
            # Whole requests overlap, not only this stage: the estimate is the MVA
            # throughput ratio, which can pass the stage's Amdahl ceiling.
            speedup = (
                _concurrency_speedup(cap_figures, workers) if cap_figures else amdahl(p, workers)
            )
            recs.append(
                _rec(
                    "concurrent_io",
                    f.stage,
                    p,
                    local_speedup_for(p, speedup),
                    {"what": what, "wait": wait, "workers": workers, "top_call": row["top_call"]},
                    {
                        **ev,
                        "wait_share": round(wait, 4),
                        "wait_to_service": round(ratio, 2),
                        "workers": workers,
                        **cap_figures,
                    },
                    f"{workers} requests in flight (Goetz: cores x (1 + wait/service), at most "
                    f"{model.io_workers_max}); throughput by mean-value analysis of the "
                    "measured per-request demands: waits, the GIL, the cores",
                    _bound_ratio(cap_figures, bd) or ceiling(p),
                    speedup=speedup,
                )
            )
        elif f.kind == "cpu" and f.subkind == "python" and float(row["tensor_share"]) < 0.5:
            loop = float(row["cpu_share"]) * (1.0 - float(row["tensor_share"]))
            s = amdahl(loop, model.vectorize)
            recs.append(
                _rec(
                    "vectorize_python",
                    f.stage,
                    p,
                    s,
                    {"py": loop, "top_line": row["top_line"]},
                    {**ev, "interpreted_share": round(loop, 4)},
                    f"s = 1/((1-f) + f/{model.vectorize:g}), f = the stage's on-CPU time "
                    "outside numeric-library ops",
                )
            )
        elif f.kind in ("cpu", "gpu") and float(row["tensor_share"]) >= 0.5 and sequential:
            py = float(row["cpu_share"]) * float(row["python_share"])
            s = amdahl(py, model.batch)
            recs.append(
                _rec(
                    "dynamic_batching",
                    f.stage,
                    p,
                    s,
                    {"py": py, "batch": model.batch},
                    {**ev, "interpreter_share": round(py, 4)},
                    f"s = 1/((1-f) + f/{model.batch}), f = interpreter time between the "
                    "stage's tensor ops (amortised over the batch)",
                )
            )
        if f.kind == "contention" and f.subkind == "gil":
            threads = int(row["threads"])
            s = float(min(threads, cores))
            recs.append(
                _rec(
                    "multiprocess",
                    f.stage,
                    p,
                    s,
                    {"threads": threads, "gil": float(row["wait_gil"]), "cores": cores},
                    ev,
                    "s = min(threads, cores): processes run in parallel without the GIL",
                )
            )
        if f.kind == "contention" and f.subkind == "lock":
            lock = float(row["wait_lock"])
            recs.append(
                _rec(
                    "reduce_lock_scope",
                    f.stage,
                    p,
                    1.0 / max(1e-6, 1.0 - lock),
                    {"lock": lock, "top_call": row["top_call"]},
                    ev,
                    "s = 1/(1 - lock wait share): the waits removed",
                )
            )
        if f.kind == "gpu" and f.subkind == "gpu_compute":
            recs.append(
                _rec(
                    "fp16",
                    f.stage,
                    p,
                    model.fp16,
                    {},
                    ev,
                    f"s = {model.fp16:g} on the GPU-bound stage",
                )
            )
        if f.kind == "gpu" and f.subkind == "launch_bound":
            share = float(row["cpu_share"])
            s = amdahl(share, model.fusion)
            recs.append(
                _rec(
                    "kernel_fusion",
                    f.stage,
                    p,
                    s,
                    {},
                    ev,
                    f"s = 1/((1-f) + f/{model.fusion:g}), f = launch (CPU) share",
                )
            )
        if f.kind == "gpu" and f.subkind == "transfer":
            wait = float(row["wait_gpu_sync"])
            s = amdahl(wait, model.transfer)
            recs.append(
                _rec(
                    "io_binding",
                    f.stage,
                    p,
                    s,
                    {"top_call": row["top_call"]},
                    ev,
                    f"s = 1/((1-f) + f/{model.transfer:g}), f = copy wait share",
                )
            )
        if f.kind == "gpu" and f.subkind == "gpu_starved":
            recs.append(
                _rec(
                    "split_cpu_gpu_pipeline",
                    f.stage,
                    p,
                    math.inf,
                    {},
                    ev,
                    "the CPU stage overlaps the GPU work: its time leaves the path",
                )
            )
    _add_multi_instance(recs, findings, facts, rows, cores)
    if cold:
        total = bd.requests.total_s
        p = min(1.0, cold["seconds"] / total) if total > 0 else 0.0
        figures = {k: v for k, v in cold.items() if k != "stage"}
        recs.append(
            _rec(
                "lazy_init",
                cold["stage"],
                p,
                math.inf,
                figures,
                {"finding": "cold_start", **cold},
                "s = infinite: the initialisation leaves the request path",
            )
        )
    recs = [r for r in recs if r.estimated_speedup >= model.min_speedup]
    recs.sort(key=lambda r: -r.estimated_speedup)
    if leak and leak.get("detected"):
        recs.insert(0, _leak_rec(leak))
    return recs


def _add_multi_instance(
    recs: list[Recommendation], findings: list[Finding], facts: RunFacts, rows: Any, cores: int
) -> None:
    """A CPU-bound service on one core of several: one instance per core (throughput)."""
    if not findings or cores < 2 or facts.process_cores <= 0:
        return
    top = findings[0]
    if top.kind != "cpu" or top.share < THRESHOLDS.bottleneck_share:
        return
    others = max(0.0, facts.host_cores_busy - facts.process_cores)
    free = max(1.0, cores - others)
    # One instance per free core, each as fast as this one, until the cores run out;
    # co-running instances share caches and memory bandwidth (instance_efficiency).
    instances = float(round(free))
    s = min(instances, free / max(facts.process_cores, 1e-6))
    s = 1.0 + (s - 1.0) * MODEL.instance_efficiency if instances > 1 else s
    if s < MODEL.min_speedup:
        return
    recs.append(
        Recommendation(
            "multi_instance",
            top.stage,
            s,
            1.0,
            s,
            free / facts.process_cores,
            CATALOG["multi_instance"].format(stage=top.stage),
            _HOW["multi_instance"].format(stage=top.stage, used=facts.process_cores, cores=cores),
            {
                "finding": f"{top.kind}/{top.subkind}",
                "process_cores": round(facts.process_cores, 2),
                "cpu_count": cores,
                "host_cores_busy": round(facts.host_cores_busy, 2),
            },
            "bottleneck law: CPU throughput scales with the cores left free by other processes",
        )
    )


def _leak_rec(leak: dict[str, Any]) -> Recommendation:
    sites = leak.get("top_sites") or []
    where = sites[0]["site"] if sites else "the growing objects"
    named = f"Top growing site: {where}. " if sites else "Run with --memory to name the sites. "
    rate = f"{leak.get('slope_bytes_per_s', 0.0) / 1e6:.2f} MB/s"
    return Recommendation(
        "fix_leak",
        where,
        1.0,
        0.0,
        1.0,
        1.0,
        CATALOG["fix_leak"].format(stage=where),
        _HOW["fix_leak"].format(rate=rate, sites=named),
        {
            "slope_bytes_per_s": leak.get("slope_bytes_per_s"),
            "confidence": leak.get("confidence"),
            "top_sites": sites[:3],
        },
        "a leak costs memory, not time, until it costs everything: the speedup is 1",
    )

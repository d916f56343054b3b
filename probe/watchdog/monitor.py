"""The watch loop: read memory, feed the detector, arm attribution, raise alerts.

``Monitor`` is shared by ``probe watch`` (memory read from outside with psutil) and the
in-process watchdog (its own process). Clock, memory source, attribution and sinks are
injected, so the loop is tested on fakes in milliseconds.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from probe.analyzers.leaks import (
    DetectorSettings,
    LeakVerdict,
    LiveLeakDetector,
    TracedStart,
    final_verdict,
    pile_text,
    piling_up,
    shares_of_the_rise,
    snapshot_growth,
)
from probe.watchdog.formats import AttributionSnapshot, TracingState

if TYPE_CHECKING:
    from probe.watchdog.config import WatchConfig

__all__ = ["Attribution", "Monitor", "Sink", "attribution_interval"]

log = logging.getLogger("probe.watch")

# A process watched for less than its warm-up plus a window and a half (the slow test's
# first judgement: ``DetectorSettings.first_judged_s``) is judged at exit on its
# whole series by the recorded-run test; these many readings are kept for that.
_SHORT_LIFE_READINGS = 4096
# Readings ten times a second for this long at first, whatever the interval: a process
# that lives seconds still leaves a series the recorded-run test can judge at its end.
_EARLY_READINGS_S = 30.0
_EARLY_INTERVAL_S = 0.1
# The threads and descriptors, and the live heap, kept over the last window to explain
# an alert (what piled up, what holds the growth), read at most once a second: listing
# the descriptors costs with their number (~0.1 ms for a thousand).
_WITNESS_EVERY_S = 1.0
# At most this many kept, whatever the window (a day's window at a reading a second
# would keep 86,400): the oldest go first.
_WITNESS_READINGS = 8192
# Threads or descriptors that pile up are looked for this often once warmed up (each
# look fits the window's readings, at most _PILE_POINTS of them, evenly taken: Theil-Sen
# is quadratic in them), and each kind is alerted once.
_PILE_EVERY_S = 10.0
_PILE_POINTS = 240


def attribution_interval(settings: DetectorSettings) -> float:
    """Seconds between attribution snapshots once armed: a twelfth of the window, at most
    30 s (the sites should follow the alert within a minute), at least a bin."""
    return min(30.0, max(settings.bin_s, settings.window_s / 12))


def _with_growth(
    v: LeakVerdict, snapshots: list[AttributionSnapshot], note: str = ""
) -> LeakVerdict:
    """``v`` with what grew across the attribution snapshots attached, and ``note``: how
    long tracing lasted and why it stopped."""
    growth = snapshot_growth(snapshots)
    return replace(
        v,
        top_sites=growth["top_sites"],
        growing_types=growth["growing_types"],
        growing_containers=growth["growing_containers"],
        attribution_note=note or v.attribution_note,
    )


def _traced_s(snapshots: list[AttributionSnapshot]) -> float:
    """The time the snapshots span: from the arming's baseline to the latest."""
    return float(snapshots[-1]["t_s"]) - float(snapshots[0]["t_s"]) if snapshots else 0.0


class Sink(Protocol):
    def send(self, payload: dict[str, Any]) -> None: ...
    def close(self, timeout: float = ...) -> None: ...


class Attribution(Protocol):
    """Where growth is attributed: a ``SiteTracker`` in-process, an ``AgentLink`` outside."""

    def arm(self) -> None: ...
    def disarm(self) -> None: ...
    def poll(self) -> None: ...  # called every reading: snapshot when one is due
    def request_snapshot(self) -> None: ...
    def snapshots(self) -> list[AttributionSnapshot]: ...
    def exiting_at(self) -> float | None: ...  # when the process began to exit (monotonic)
    def tracing_state(self) -> TracingState | None: ...  # what its tracing costs, when it ended
    def requests_done(self) -> int | None: ...  # requests finished so far, while counted
    def python_blocks(self) -> int | None: ...  # its live Python heap (allocated blocks)
    def malloc_in_use(self) -> int | None: ...  # the bytes its malloc holds, when read
    # what a full collection freed at the end (``probe.samplers.heap.full_collection_witness``)
    def full_collection(self) -> dict[str, Any] | None: ...


class Monitor:
    def __init__(
        self,
        read_memory: Callable[[], float | None],
        settings: DetectorSettings | None = None,
        *,
        process: dict[str, Any] | None = None,
        limit_bytes: float | None = None,
        limit_source: str | None = None,
        sinks: Sequence[Sink] = (),
        metrics: Any = None,
        attribution: Attribution | None = None,
        traced_until_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        read_counts: Callable[[], dict[str, float] | None] | None = None,
    ) -> None:
        self.settings = settings or DetectorSettings()
        self.detector = LiveLeakDetector(self.settings, limit_bytes)
        self.process = process or {}
        self.limit_bytes = limit_bytes
        self.limit_source = limit_source
        self._read = read_memory
        self._read_counts = read_counts
        # (t, threads, descriptors, live blocks, malloc's bytes): an alert's witnesses
        window_readings = int(self.settings.window_s / _WITNESS_EVERY_S) + 2
        self._witnesses: deque[tuple[float, ...]] = deque(
            maxlen=min(_WITNESS_READINGS, window_readings)
        )
        self.open_files_limit: int | None = None  # the process's, as last read
        self.piled: list[dict[str, Any]] = []  # what was alerted as piling up, in order
        self._piles_looked_at = 0.0
        self._sinks = list(sinks)
        self._metrics = metrics
        self._attribution = attribution
        self._clock = clock
        self._t0 = clock()
        self.started_at = wall_clock()
        self._early: list[tuple[float, float]] = []
        # (t, requests finished) beside the early readings: the short life's work axis,
        # none once the count has stopped being kept (``probe.watchdog.work``)
        self._work: list[tuple[float, float]] | None = []
        self._heap: list[tuple[float, float]] = []  # (t, live Python blocks), the same span
        # (t, CPU seconds used so far), once a second over the same span: the short life's
        # work axis where no requests are counted
        self._cpu: list[tuple[float, float]] = []
        self._in_use: list[float] = []  # malloc's bytes in use at those readings (NaN: unread)
        self._last_in_use = math.nan  # the last value read of them
        self._full_collection: dict[str, Any] | None = None  # taken once, at the end
        self.last_bytes: float | None = None
        self.alerted: LeakVerdict | None = None
        self.attributed: LeakVerdict | None = None  # the follow-up alert, with the sites
        self._sink_errors = 0
        # the caller armed attribution for the first ``traced_until_s`` (a process that ends
        # before any live judgement still gets its sites); disarmed then, unless leaking
        self._armed = attribution is not None and traced_until_s > 0
        self._traced_until = traced_until_s if self._armed else None
        self._attribution_gap = attribution_interval(self.settings)
        self._attribution_due: float | None = None  # when to send the sites after an alert
        self._attribution_tries = 0
        self._attribution_note = ""  # how long it traced after the alert, why it stopped
        # tracemalloc's own memory is taken out of the short-life series while it traces,
        # and the stop of the traced start (its last snapshot) is left out of it
        self._tracing_known = self._armed
        self._traced = TracedStart() if self._armed else None

    @classmethod
    def from_config(
        cls,
        config: WatchConfig,
        read_memory: Callable[[], float | None],
        process: dict[str, Any],
        *,
        limit: tuple[float | None, str | None] = (None, None),
        sinks: Sequence[Sink] = (),
        metrics: Any = None,
        attribution: Attribution | None = None,
        read_counts: Callable[[], dict[str, float] | None] | None = None,
    ) -> Monitor:
        """The monitor of one watch, ``probe watch``'s or the in-process watchdog's."""
        return cls(
            read_memory,
            config.detector,
            process=process,
            limit_bytes=limit[0],
            limit_source=limit[1],
            sinks=sinks,
            metrics=metrics,
            attribution=attribution,
            traced_until_s=config.traced_start_s,
            read_counts=read_counts,
        )

    @property
    def elapsed_s(self) -> float:
        return self._clock() - self._t0

    def tick(self) -> bool:
        """One reading. False when the memory could not be read (the process is gone)."""
        value = self._read()
        if value is None:
            return False
        now = self._clock() - self._t0
        self.last_bytes = value
        # the requests finished: the short life's work axis, and the live slow test's
        # check of a rise against their rate (``analyzers.leaks.rate``)
        done = None if self._attribution is None else self._safely(self._attribution.requests_done)
        # the live Python heap, read once a reading: the short life's and the piles'
        # witness, and the rate check's of what the allocator holds
        blocks = (
            None if self._attribution is None else self._safely(self._attribution.python_blocks)
        )
        if len(self._early) < _SHORT_LIFE_READINGS:
            self._early.append((now, value - self._tracing_bytes()))
            self._count_work(now, done)
            self._read_heap(now, blocks)
        self._read_witnesses(now, blocks)
        self._look_for_piles(now)
        flagged = self.detector.add(
            now,
            value,
            None if done is None else float(done),
            None if blocks is None else float(blocks),
        )
        if self._attribution is not None:
            if self._traced_until is not None and now >= self._traced_until:
                self._traced_until = None
                if self.alerted is None and flagged is None:
                    self._armed = False
                    self._safely(self._attribution.disarm)
            self._safely(self._attribution.poll)
        if self._metrics is not None:
            self._safely(self._metrics.update, value, self.detector.verdict.to_dict())
        if flagged is not None:
            # Attribution is armed by the alert, not before: tracemalloc slows the service,
            # which slows its leak, which the detector would read as a plateau.
            if self._attribution is not None:
                if not self._armed:
                    self._armed = True
                    self._safely(self._attribution.arm)
                self._attribution_due = now + self._attribution_gap
            self.alerted = self.verdict()
            self.alert(self.alerted)
        elif self._attribution_due is not None and now >= self._attribution_due:
            self._send_attribution(now)
        return True

    def _tracing_bytes(self) -> float:
        """tracemalloc's own memory now, while the traced start lasts (then 0: during its
        stop the readings stay as read, the stop is left out of the judgement anyway);
        notes when that stop began and ended."""
        if not self._tracing_known or self._attribution is None:
            return 0.0
        try:
            state = self._attribution.tracing_state()
        except Exception:  # noqa: BLE001 -- an unreadable state: nothing taken out
            return 0.0
        if not state:
            return 0.0
        if state.get("stopping_at") is not None:
            stopping, stopped = state.get("stopping_at"), state.get("stopped_at")
            if stopping is not None and stopped is not None:
                self._tracing_known = False
                self._traced = TracedStart(float(stopping) - self._t0, float(stopped) - self._t0)
            return 0.0
        return float(state.get("bookkeeping_bytes") or 0)

    def _count_work(self, now: float, done: int | None) -> None:
        if self._attribution is None or self._work is None:
            return
        if done is None:  # not counted, or unreadable: no work axis
            if self._work:
                self._work = None  # counted, then no longer: the count has a hole
            return
        self._work.append((now, float(done)))

    def _read_heap(self, now: float, blocks: int | None) -> None:
        if self._attribution is None:
            return
        if blocks is None:  # none read, or unreadable: no heap witness
            return
        # probe watch's agent sets its gauge every 0.2 s and the early readings come every
        # 0.1 s: a value read again is the gauge not yet set again, not a second reading,
        # and kept it would count one reading twice in the heap's trend tests (a live heap
        # counted to the block does not sit still for 0.1 s while the service runs)
        if self._heap and self._heap[-1][1] == float(blocks):
            return
        self._heap.append((now, float(blocks)))
        # the same for malloc's bytes, which the agent sets only when its budget allows
        in_use = self._safely(self._attribution.malloc_in_use)
        fresh = in_use is not None and float(in_use) != self._last_in_use
        self._in_use.append(float(in_use) if fresh else math.nan)
        if fresh:
            self._last_in_use = float(in_use)

    def _read_witnesses(self, now: float, blocks: int | None) -> None:
        """The threads and descriptors, and the live heap (``blocks``, read now), once a
        second."""
        if self._witnesses and now - self._witnesses[-1][0] < _WITNESS_EVERY_S:
            return
        counts = self._safely(self._read_counts) if self._read_counts is not None else None
        limit = (counts or {}).get("open files limit")
        if limit is not None:
            self.open_files_limit = int(limit)
        used = (counts or {}).get("cpu seconds")
        if used is not None and len(self._early) < _SHORT_LIFE_READINGS:
            self._cpu.append((now, float(used)))
        in_use = None
        if self._attribution is not None:
            in_use = self._safely(self._attribution.malloc_in_use)
        nan = math.nan
        self._witnesses.append(
            (
                now,
                float((counts or {}).get("threads", nan)),
                float((counts or {}).get("file descriptors", nan)),
                nan if blocks is None else float(blocks),
                nan if in_use is None else float(in_use),
            )
        )

    def _window_piles(self) -> tuple[list[dict[str, Any]], np.ndarray | None]:
        """What piled up over the last window's witnesses, and their columns (None with
        fewer than three readings)."""
        window = [w for w in self._witnesses if w[0] >= self.elapsed_s - self.settings.window_s]
        if len(window) < 3:
            return [], None
        if len(window) > _PILE_POINTS:
            window = [window[int(i)] for i in np.linspace(0, len(window) - 1, _PILE_POINTS)]
        columns = np.array(window).T
        t, threads, fds = columns[:3]
        return piling_up({"threads": (t, threads), "file descriptors": (t, fds)}), columns

    def _look_for_piles(self, now: float) -> None:
        """Every _PILE_EVERY_S once warmed up: a kind newly piling up over the window is
        alerted (``probe.pile``), once; descriptors and threads run out before memory."""
        if now < self.settings.warmup_s or now - self._piles_looked_at < _PILE_EVERY_S:
            return
        self._piles_looked_at = now
        seen = {p["what"] for p in self.piled}
        for pile in self._window_piles()[0]:
            if pile["what"] not in seen:
                self.piled.append(pile)
                self.alert_pile(pile)

    def alert_pile(self, pile: dict[str, Any]) -> None:
        """Send what piles up to every sink (``probe.pile``)."""
        from probe.watchdog.alerts import pile_payload

        payload = pile_payload(pile, self.process, self.pile_text(pile))
        for sink in self._sinks:
            self._safely(sink.send, payload)

    def pile_text(self, pile: dict[str, Any]) -> str:
        window = f" over the last {self.settings.window_s:g} s"
        return pile_text(pile, self.open_files_limit, why=window)

    def _explained(self, v: LeakVerdict) -> LeakVerdict:
        """A verdict with what piled up over the last window beside it, and, for a leak
        whose verdict has none yet, what holds its growth (``probe run``'s witnesses: the
        same analyzers)."""
        piles, columns = self._window_piles()
        if columns is None:
            return v
        t, _, _, blocks, in_use = columns
        v = replace(v, piling_up=piles)
        if not v.detected or v.small_objects_share is not None:
            return v
        share, malloc = shares_of_the_rise(v.slope_bytes_per_s, (t, blocks), (t, in_use))
        return replace(v, small_objects_share=share, malloc_share=malloc)

    def verdict(self, *, final: bool = False) -> LeakVerdict:
        """The detector's verdict with attribution attached; ``final``: the process has
        ended, and one watched too briefly for the live tests is judged on its whole series."""
        if final and self._armed and self._attribution is not None:
            self._safely(self._attribution.request_snapshot)  # the sites as they ended
        v = (
            final_verdict(
                self.detector,
                self._serving_readings(),
                self.elapsed_s,
                self._traced,
                work=self._work or None,
                cpu=self._cpu or None,
                heap=self._heap or None,
                malloc_in_use=self._in_use
                if any(not math.isnan(b) for b in self._in_use)
                else None,
                full_collection=self._full_collection_at_end(),
            )
            if final
            else self.detector.verdict
        )
        if v.detected or final:  # a last word on a quiet process names what piled up too
            v = self._explained(v)
        if v.detected and self._attribution is not None:
            v = _with_growth(v, self._attribution.snapshots(), self._attribution_note)
        return v

    def _full_collection_at_end(self) -> dict[str, Any] | None:
        """What a full collection freed at the end, its time (``at_s``) on the readings'
        clock; taken once (in-process it is made now, at the watchdog's stop)."""
        if self._full_collection is None and self._attribution is not None:
            full = self._safely(self._attribution.full_collection)
            if isinstance(full, dict) and full.get("at") is not None:
                self._full_collection = {**full, "at_s": float(full["at"]) - self._t0}
        return self._full_collection

    def _serving_readings(self) -> list[tuple[float, float]]:
        """The readings up to when the process began to exit: its interpreter's teardown
        and probe's last snapshot are not the service's behaviour (``probe run`` leaves
        them out the same way, by its serving window)."""
        exiting = None
        if self._attribution is not None:
            exiting = self._attribution.exiting_at()
        if exiting is None:
            return self._early
        ended = exiting - self._t0
        return [r for r in self._early if r[0] <= ended]

    def verdict_dict(self, *, final: bool = False) -> dict[str, Any]:
        return self.verdict(final=final).to_dict()

    def alert(self, verdict: LeakVerdict, event: str = "probe.leak") -> None:
        """Send ``verdict`` to every sink (a failing sink is logged, the others still get it)."""
        from probe.watchdog.alerts import alert_payload

        payload = alert_payload(verdict.to_dict(), self.process, event)
        for sink in self._sinks:
            self._safely(sink.send, payload)

    def _send_attribution(self, now: float) -> None:
        """The follow-up alert: what grows since attribution was armed. Then tracing ends
        (``_end_attribution``)."""
        assert self._attribution is not None
        self._safely(self._attribution.request_snapshot)
        snapshots = self._snapshots()  # read once: the agent's file can be megabytes
        verdict = self.detector.verdict
        self._attribution_tries += 1
        # stopped by its own bound: the snapshots it has are all there will be
        stopped = self._tracing_stopped_because()
        # growth needs the arming's baseline and a snapshot after it: an agent slow to
        # answer (a large heap to copy) left only the baseline, whose sites are there but
        # whose containers cannot have grown yet -- wait for the next one
        compared = len(snapshots) >= 2
        if compared and verdict.detected:
            verdict = _with_growth(verdict, snapshots, self._note(snapshots, stopped, True))
            if verdict.top_sites or verdict.growing_containers:
                self.alert(verdict, "probe.leak.attribution")
                self.attributed = verdict
                self._end_attribution(verdict.attribution_note)
                return
        if self._attribution_tries >= 5 or (compared and stopped):
            self._end_attribution(self._note(snapshots, stopped, False))
        else:
            self._attribution_due = now + self._attribution_gap

    def _end_attribution(self, note: str) -> None:
        """Tracing stops once the sites have gone out (or nothing grew in five tries), unless
        it was asked for the whole life (``--attribution always``). Left on, it cost a
        served store of two million live blocks 3.5-4.5 GB and 44% of a core after 30 min
        (``benchmarks/watch_ramp.py``'s first run, 2026-12-03), for sites already sent."""
        assert self._attribution is not None
        self._attribution_due = None
        self._attribution_note = note
        if self._traced_until is None:  # armed by the alert: not traced for the whole life
            self._armed = False
            self._safely(self._attribution.disarm)

    def _note(self, snapshots: list[AttributionSnapshot], stopped: str | None, sent: bool) -> str:
        """How long it traced after the alert and why it stopped (none traced for life)."""
        # the span the sites cover: tracing began a little before it, and lasts until the
        # sites are sent (an agent slow to answer leaves them on an earlier snapshot)
        span = f"{_traced_s(snapshots):,.0f} s traced from the alert"
        if stopped:
            return f"sites over {span}, then tracing stopped: {stopped}"
        if self._traced_until is not None:
            return ""  # --attribution always: tracing goes on, as asked
        if sent:
            return f"sites over {span}; tracing stopped once they were sent"
        return f"nothing grew that tracemalloc could see over {span}; tracing stopped"

    def _tracing_stopped_because(self) -> str | None:
        """Why the tracker stopped tracing on its own, if it did (its tables' bound)."""
        assert self._attribution is not None
        state = self._safely(self._attribution.tracing_state)
        because = state.get("stopped_because") if isinstance(state, dict) else None
        return str(because) if because else None

    def _snapshots(self) -> list[AttributionSnapshot]:
        try:
            return self._attribution.snapshots() if self._attribution is not None else []
        except Exception:  # noqa: BLE001 -- unreadable: none
            return []

    def _safely(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, or None when it failed (logged, the first three times)."""
        try:
            return fn(*args)
        except Exception as e:  # a sink's failure must not stop the watch
            self._sink_errors += 1
            if self._sink_errors <= 3:
                log.warning("probe: watch: %s failed: %r", getattr(fn, "__qualname__", fn), e)
            return None

    def run(self, stop: threading.Event, until: Callable[[Monitor], bool] | None = None) -> str:
        """The watch loop, for ``probe watch`` and the in-process watchdog alike: a reading
        every interval (every 0.1 s for the first 30 s) until ``stop`` is set, the memory
        can't be read, or ``until(self)``, asked after every reading, says to stop.
        Returns which: "stopped", "gone" or "until"."""
        next_at = self._clock()
        while not stop.is_set():
            if not self.tick():
                return "gone"
            if until is not None and until(self):
                return "until"
            step = self.settings.interval_s
            if self.elapsed_s < _EARLY_READINGS_S:
                step = min(step, _EARLY_INTERVAL_S)
            next_at += step
            delay = next_at - self._clock()
            if delay < 0:  # fell behind (a suspended host): skip, don't burst
                next_at = self._clock()
                delay = 0.0
            stop.wait(delay)
        return "stopped"

    def close(self, timeout: float = 10.0) -> None:
        deadline = self._clock() + timeout
        for sink in [*self._sinks, self._metrics]:
            if sink is not None:
                self._safely(sink.close, max(0.0, deadline - self._clock()))

    def report(self, verdict: dict[str, Any] | None = None) -> dict[str, Any]:
        """Everything the leak report shows, as plain data (times: seconds since start)."""
        s = self.settings
        bins: dict[str, Any] = self.detector.bins()
        if not len(bins["t_s"]) and self._early:  # shorter than one bin: the raw readings
            t, y = zip(*self._early, strict=True)
            bins = {"t_s": t, "min": y, "median": y, "max": y}
        return {
            "schema": "probe.leak/1",
            "process": self.process,
            "started_at": self.started_at,
            "watched_s": round(self.elapsed_s, 1),
            "readings": self.detector.readings,
            "settings": {
                "interval_s": s.interval_s,
                "window_s": s.window_s,
                "fast_window_s": s.fast_window_s,
                "warmup_s": s.warmup_s,
                "bin_s": s.bin_s,
            },
            "limit_bytes": self.limit_bytes,
            "limit_source": self.limit_source,
            "memory_bytes": self.last_bytes,
            "verdict": verdict if verdict is not None else self.verdict_dict(),
            # NaN (a bin whose requests were not counted) is not JSON: null
            "series": {
                k: [float(x) if math.isfinite(x) else None for x in v] for k, v in bins.items()
            },
        }

    def status_line(self) -> str:
        from probe.reports.leak import status_text

        return status_text(
            self.detector.verdict.to_dict(),
            self.last_bytes,
            self.settings.warmup_s - self.elapsed_s,
        )

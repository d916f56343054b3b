"""probe watch's hook into a Python command it launches.

``probe watch -- python service.py`` puts this directory first on the command's
PYTHONPATH, so Python imports this file at start-up (the ``site`` module's
``sitecustomize`` hook). If ``PROBE_WATCH_AGENT`` is set it starts the attribution agent
(``probe.watchdog.attribution.Agent``), then takes itself out of the environment -- the
service's own child processes are not watched -- and hands over to any other
``sitecustomize`` on the path. Any failure leaves the service untouched.
"""

import os
import sys


def _boot() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    config = os.environ.pop("PROBE_WATCH_AGENT", None)
    rest = [
        p
        for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if p and os.path.abspath(p) != here
    ]
    if rest:
        os.environ["PYTHONPATH"] = os.pathsep.join(rest)
    else:
        os.environ.pop("PYTHONPATH", None)
    if config:
        try:
            import json
            from pathlib import Path

            from probe.watchdog.attribution import Agent

            cfg = json.loads(config)
            Agent(
                Path(cfg["dir"]), snapshot_s=float(cfg["snapshot_s"]), frames=int(cfg["frames"])
            ).start()
        except Exception as e:  # noqa: BLE001 -- report it to the watcher, never to the service
            try:
                with open(os.path.join(json.loads(config)["dir"], "agent.error"), "w") as f:
                    f.write(repr(e))
            except Exception:  # noqa: BLE001
                pass
    # the next sitecustomize on the path, if there is one (the import system expects a
    # module under this name when we return: ours goes back if there is no other)
    ours = sys.modules.pop("sitecustomize")
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import sitecustomize  # noqa: F401
    except ImportError:
        sys.modules["sitecustomize"] = ours
    finally:
        sys.path[:] = saved


_boot()

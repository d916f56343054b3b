"""The compiled parts: probe.spans' hot path (probe/_fastspans.c) and the stack sampler's
reads at the tick's instant (probe/_tickpeek.c).

Optional by design: where no C compiler (or no Python headers) is found, the build
says so and installs probe without them; probe.spans runs its pure-Python path and the
stack sampler reads frames with the GIL held.
Everything else is declared in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("probe._fastspans", ["probe/_fastspans.c"], optional=True),
        Extension(
            "probe._tickpeek", ["probe/_tickpeek.c", "probe/_tickpeek_layout.c"], optional=True
        ),
    ]
)

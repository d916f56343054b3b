"""The one compiled part: probe.spans' hot path (probe/_fastspans.c).

Optional by design: where no C compiler (or no Python headers) is found, the build
says so and installs probe without it, and probe.spans runs its pure-Python path.
Everything else is declared in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("probe._fastspans", ["probe/_fastspans.c"], optional=True),
    ]
)

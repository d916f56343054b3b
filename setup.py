"""The compiled parts: probe.spans' hot path (probe/_fastspans.c), the stack sampler's
reads at the tick's instant (probe/_tickpeek.c) and the closing of a torch.profiler
window without the GIL (probe/_torchclose.cpp: C++, to catch what torch throws).

Optional by design: where no compiler (or no Python headers) is found, the build
says so and installs probe without them; probe.spans runs its pure-Python path, the
stack sampler reads frames with the GIL held and a torch window closes through torch's
Python binding, which holds it.
Everything else is declared in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("probe._fastspans", ["probe/_fastspans.c"], optional=True),
        Extension(
            "probe._tickpeek", ["probe/_tickpeek.c", "probe/_tickpeek_layout.c"], optional=True
        ),
        Extension(
            "probe._torchclose",
            ["probe/_torchclose.cpp"],
            language="c++",
            extra_compile_args=["-std=c++17", "-fvisibility=hidden"],
            optional=True,
        ),
    ]
)

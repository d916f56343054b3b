"""Whether this machine can build probe's C part: the span tests (the compiled path must
be the one in use here) and the build tests (the sdist builds it) ask the same thing."""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path


def c_compiler_and_headers() -> bool:
    """A C compiler (``$CC``, else the one Python was built with) and ``Python.h``."""
    compiler = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    return shutil.which(compiler.split()[0]) is not None and headers.is_file()


def cxx_compiler() -> bool:
    """A C++ compiler (``$CXX``, else the one Python was built with): what builds
    ``probe/_torchclose.cpp``."""
    compiler = os.environ.get("CXX") or sysconfig.get_config_var("CXX") or "c++"
    return shutil.which(compiler.split()[0]) is not None

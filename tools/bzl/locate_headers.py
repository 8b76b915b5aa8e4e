"""Asks the installed Python packages where their C/C++ headers are.

Run by the repository rules in python_headers.bzl with the host `python3` (the one the
pinned requirements were installed into). Prints one JSON object: {"include": DIR,
"version": STR} (for `python` also "tag", e.g. cp311, and "ext_suffix"). Exits 1 with a one-line reason when the package is missing, so the build
error names the package and the requirements file to install.

    locate_headers.py python                  # sysconfig include dir of this interpreter
    locate_headers.py pybind11                # pybind11.get_include()
    locate_headers.py wheel DIST HEADER       # include root of HEADER (e.g. crt/host_defines.h)
                                              # inside distribution DIST
"""

import importlib.metadata
import json
import os
import sys
import sysconfig


def python_include() -> dict:
    include = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        raise LookupError(f"{sys.executable} has no Python.h under {include} (install its headers)")
    # the wheel's python tag and the file name suffix of its extension modules
    tag = f"{sys.implementation.name[:2]}{sys.version_info.major}{sys.version_info.minor}"
    return {"include": include, "version": sysconfig.get_python_version(), "tag": tag,
            "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX")}


def pybind11_include() -> dict:
    try:
        import pybind11
    except ImportError as e:
        raise LookupError(f"pybind11 is not installed for {sys.executable} "
                          "(pip install -r requirements.txt)") from e
    return {"include": pybind11.get_include(), "version": pybind11.__version__}


def wheel_include(dist: str, header: str) -> dict:
    try:
        files = importlib.metadata.files(dist) or []
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError as e:
        raise LookupError(f"{dist} is not installed for {sys.executable} "
                          "(pip install --no-deps -r requirements-headers.txt)") from e
    parts = header.split("/")
    for f in files:
        if tuple(f.parts[-len(parts):]) == tuple(parts):
            folder = os.path.realpath(f.locate())
            for _ in parts:  # up from the file to the folder `#include <HEADER>` starts at
                folder = os.path.dirname(folder)
            return {"include": folder, "version": version}
    raise LookupError(f"{dist} {version} has no {header} in its file list")


def main(argv: list) -> int:
    kinds = {"python": (python_include, 0), "pybind11": (pybind11_include, 0),
             "wheel": (wheel_include, 2)}
    if not argv or argv[0] not in kinds or len(argv) - 1 != kinds[argv[0]][1]:
        print(f"usage: see {__file__}", file=sys.stderr)
        return 2
    fn, _ = kinds[argv[0]]
    try:
        print(json.dumps(fn(*argv[1:])))
    except LookupError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

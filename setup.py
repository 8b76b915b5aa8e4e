"""The PEP 517 build (`pip install .[all]`) for machines without Bazel and other Pythons.

It builds what Bazel's //:wheel ships, the C++ extension compiled by this machine's
compiler for this Python, from the lists Bazel reads: the source roots, dependencies,
extras and metadata of tools/bzl/package.bzl and the extension's sources of
backend_cc/sources.bzl. Every `<root>/cudnn/` tree lands in one `cudnn` package, as in
the Bazel wheel.

Headers come from where the Bazel build finds them (tools/bzl/locate_headers.py: the
installed wheels of backend_cc/sources.bzl's EXTERNAL_HEADERS, which pyproject.toml
lists as build requirements), else from $CUDNN_INCLUDE_DIR / $CUDA_INCLUDE_DIR,
$CUDA_HOME/include or /usr/local/cuda/include. Nothing links libcudnn: the extension
dlopens it at run time.

Offline, with the dependencies as wheel files in a folder (docs/INSTALL.md):
    python3 -m pip install --no-index --find-links WHEELS '.[all]'
A checkout to work in (the extension built in place, beside its sources):
    python3 -m pip install --no-build-isolation --no-deps -e .
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup
from setuptools.command.build_py import build_py

REPO = Path(__file__).resolve().parent


def _tool(name: str):
    """A module of tools/bzl/, by path (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / "bzl" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_values = _tool("starlark_values").read_values
PACKAGE = _values(REPO / "tools" / "bzl" / "package.bzl")
SOURCES = _values(REPO / "backend_cc" / "sources.bzl")


def packages() -> tuple[dict[str, str], dict[str, list[str]]]:
    """({dotted package: folder}, {dotted package: further folders}) of every folder with
    Python modules under a source root. A package with modules in several roots (`cudnn`
    itself: its __init__ in ir/, its __main__ in cli/) maps to its first folder; the
    others' modules join it at build time (_BuildPy)."""
    found: dict[str, str] = {}
    more: dict[str, list[str]] = {}
    for root in PACKAGE["SOURCE_ROOTS"]:
        for folder, subdirs, files in os.walk(REPO / root / "cudnn"):
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
            if any(f.endswith(".py") for f in files):
                rel = Path(folder).relative_to(REPO / root)
                name, where = ".".join(rel.parts), str(Path(folder).relative_to(REPO))
                if name in found:
                    more.setdefault(name, []).append(where)
                else:
                    found[name] = where
    return found, more


class _BuildPy(build_py):
    """Modules of one package from several source roots land in one folder, as in the
    Bazel wheel; two roots shipping the same module is an error."""

    def find_package_modules(self, package, package_dir):
        modules = super().find_package_modules(package, package_dir)
        for folder in MORE_DIRS.get(package, ()):
            modules += super().find_package_modules(package, folder)
        names = [m[1] for m in modules]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise SystemExit(f"setup.py: {package}: modules {twice} come from two source roots")
        return modules


def include_dir(header: str, wheels: list[str], env: tuple[str, ...]) -> str:
    """The include root of `header` (a path such as "crt/host_defines.h"): an installed
    wheel's, else an environment-named or standard folder; SystemExit naming every place
    looked at otherwise."""
    locate = _tool("locate_headers")
    for dist in wheels:
        try:
            return locate.wheel_include(dist, header)["include"]
        except LookupError:
            pass
    candidates = [os.environ[v] for v in env if os.environ.get(v)]
    candidates += [os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include"),
                   "/usr/include"]
    for folder in candidates:
        if os.path.isfile(os.path.join(folder, header)):
            return folder
    sys.exit(f"setup.py: {header} not found: no wheel of {', '.join(wheels)} installed and "
             f"not in {candidates} (set {' or '.join(env)})")


# the variable naming each header's folder when no wheel ships it
_INCLUDE_ENV = {"cudnn_graph.h": ("CUDNN_INCLUDE_DIR",)}


class _BuildExt(build_ext):
    """An in-place build (`pip install -e .`) puts the extension where Bazel does,
    backend_cc/cudnn/, not into the folder of the `cudnn` package's __init__ (ir/cudnn/)."""

    def _get_inplace_equivalent(self, build_py, ext):  # setuptools' in-place target
        inplace_file, regular_file = super()._get_inplace_equivalent(build_py, ext)
        return str(REPO / "backend_cc" / "cudnn" / os.path.basename(inplace_file)), regular_file


def extension() -> Pybind11Extension:
    sources = [f"backend_cc/{s}" for s in SOURCES["CORE_SRCS"] + SOURCES["BINDING_SRCS"]
               if s.endswith(".cc")]
    found = [include_dir(header, wheels, _INCLUDE_ENV.get(header, ("CUDA_INCLUDE_DIR",)))
             for header, wheels in SOURCES["EXTERNAL_HEADERS"].items()]
    return Pybind11Extension(
        "cudnn._pybind_module", sources, cxx_std=17, libraries=["dl"],
        # sources include each other from the repository root ("backend_cc/cc/x.h")
        include_dirs=[str(REPO)] + list(dict.fromkeys(found)))


ParallelCompile(default=0).install()  # the sources compile in parallel, one per core
package_dirs, MORE_DIRS = packages()
setup(
    name=PACKAGE["DISTRIBUTION"],
    version=PACKAGE["VERSION"],
    description=PACKAGE["SUMMARY"],
    long_description=(REPO / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license=PACKAGE["LICENSE"],
    license_files=["LICENSE"],
    python_requires=PACKAGE["PYTHON_REQUIRES"],
    install_requires=PACKAGE["REQUIRES"],
    extras_require=PACKAGE["EXTRA_REQUIRES"],
    packages=sorted(package_dirs),
    package_dir=package_dirs,
    ext_modules=[extension()],
    cmdclass={"build_ext": _BuildExt, "build_py": _BuildPy},
    zip_safe=False,
)

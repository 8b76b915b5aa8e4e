"""What this build of cudnn does on this machine.

    tools/bazel run //:demo [-- --list_ops]        # tables, then the sample graphs
    tools/bazel run //:demo -- explain [sample...]   # only the sample graphs

First the tables: engine families, engine ids and op counts. Then the library's job on
sample graphs (demo_explain.py): each is built, planned and explained, and run where an
engine can (a CUDA device with an engine's dependencies), else the reason.

Each layer is read lazily and only through its public tables:
`cudnn.ops.registry.all_specs()` ({name: OpSpec with .name and .group}) and
`cudnn.engines.manifest.MANIFEST` (families with .name, .engine_id as the family's block
base, and .slots {engine name: slot with .slot}). A layer that has not landed yet is
reported as missing; any other import failure is a bug and propagates.
"""

import collections
import importlib
import os
import sys
from types import ModuleType
from typing import Iterable, List, Optional

from absl import app, flags

import cudnn

_LIST_OPS = flags.DEFINE_bool("list_ops", False, "Also list every op name under its group.")

OPS_MODULE = "cudnn.ops.registry"
MANIFEST_MODULE = "cudnn.engines.manifest"


def optional_import(module_name: str) -> Optional[ModuleType]:
    """The module, or None when it (or a package above it) does not exist yet."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        missing = e.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            return None
        raise  # the module exists but needs something that is not installed


def source_roots() -> List[str]:
    """Names of the folders whose `cudnn/` joins the package, in import order."""
    return [os.path.basename(os.path.dirname(os.path.normpath(p))) for p in cudnn.__path__]


def describe_ops(registry: Optional[ModuleType], list_ops: bool) -> List[str]:
    if registry is None:
        return [f"ops: {OPS_MODULE} is not present yet"]
    specs = registry.all_specs()
    groups = collections.defaultdict(list)
    for name, spec in specs.items():
        groups[spec.group].append(name)
    lines = [f"ops: {len(specs)} in {len(groups)} groups"]
    width = max((len(g) for g in groups), default=0)
    for group in sorted(groups):
        lines.append(f"  {group:<{width}}  {len(groups[group]):>4}")
        if list_ops:
            lines.extend(f"      {name}" for name in sorted(groups[group]))
    return lines


def describe_engines(manifest: Optional[ModuleType]) -> List[str]:
    if manifest is None:
        return [f"engines: {MANIFEST_MODULE} is not present yet"]
    families = list(manifest.MANIFEST)
    count = sum(len(family.slots) for family in families)
    lines = [f"engines: {count} in {len(families)} families"]
    for family in families:
        lines.append(f"  {family.name} (ids from {family.engine_id})")
        for engine_name, slot in sorted(family.slots.items(), key=lambda kv: kv[1].slot):
            lines.append(f"    {family.engine_id + slot.slot:>6}  {engine_name}")
    return lines


def report(list_ops: bool = False) -> List[str]:
    lines = ["cudnn source roots: " + " ".join(source_roots())]
    lines.extend(describe_engines(optional_import(MANIFEST_MODULE)))
    lines.extend(describe_ops(optional_import(OPS_MODULE), list_ops))
    return lines


def main(argv: Iterable[str]) -> None:
    args = list(argv)[1:]
    import demo_explain  # the sample graphs: built, planned, explained and run

    if args[:1] == ["explain"]:
        print(demo_explain.report(args[1:] or demo_explain.SAMPLES, execute=True))
        return
    if args:
        raise app.UsageError(f"unknown command {args[0]!r}; usage: demo [explain [sample...]]")
    sys.stdout.write("\n".join(report(_LIST_OPS.value)) + "\n\n")
    print(demo_explain.report(execute=True))


if __name__ == "__main__":
    app.run(main)

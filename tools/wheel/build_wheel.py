"""Writes a pure-Python wheel (PEP 427) from a list of source files.

    build_wheel.py --out OUT.whl --name NAME --version V --files LIST
                   [--strip-prefix P]... [--require-prefix P] [--summary S]
                   [--python-requires SPEC] [--extra NAME=REQ[,REQ...]]...

LIST holds one line per file: `<path in the source tree>\t<path to read it from>`. Each
file lands at its source-tree path minus the first matching --strip-prefix. Two files that
land on the same path are an error (two source roots both shipping `cudnn/__init__.py`
would otherwise depend on file order), as is a file outside --require-prefix. The archive
is reproducible: sorted entries, fixed timestamps and permissions.
"""

import argparse
import base64
import hashlib
import re
import sys
import zipfile
from typing import Dict, List, Sequence, Tuple

ZIP_DATE = (1980, 1, 1, 0, 0, 0)
TAG = "py3-none-any"


def archive_path(source_path: str, strip_prefixes: Sequence[str]) -> str:
    for prefix in strip_prefixes:
        if source_path.startswith(prefix):
            return source_path[len(prefix):]
    return source_path


def plan_contents(lines: Sequence[str], strip_prefixes: Sequence[str],
                  require_prefix: str) -> Dict[str, str]:
    """{path in the wheel: file to read}, refusing collisions and strays."""
    contents: Dict[str, str] = {}
    origin: Dict[str, str] = {}
    for line in lines:
        if not line.strip():
            continue
        source_path, read_from = line.rstrip("\n").split("\t")
        dest = archive_path(source_path, strip_prefixes)
        if not dest.startswith(require_prefix):
            raise ValueError(f"{source_path} would land at {dest}, outside {require_prefix!r}")
        if dest in contents:
            raise ValueError(f"{source_path} and {origin[dest]} both land at {dest}")
        contents[dest] = read_from
        origin[dest] = source_path
    return contents


def normalized_name(name: str) -> str:
    """The distribution name as wheel file names and .dist-info folders spell it."""
    return re.sub(r"[-_.]+", "_", name).lower()


def metadata(name: str, version: str, summary: str, python_requires: str,
             extras: Sequence[Tuple[str, List[str]]]) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if summary:
        lines.append(f"Summary: {summary}")
    if python_requires:
        lines.append(f"Requires-Python: {python_requires}")
    for extra, requirements in extras:
        lines.append(f"Provides-Extra: {extra}")
        lines.extend(f'Requires-Dist: {req}; extra == "{extra}"' for req in requirements)
    return "\n".join(lines) + "\n"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def write_wheel(out: str, name: str, version: str, contents: Dict[str, str],
                meta: str) -> None:
    dist_info = f"{normalized_name(name)}-{version}.dist-info"
    generated = {
        f"{dist_info}/METADATA": meta.encode(),
        f"{dist_info}/WHEEL": (f"Wheel-Version: 1.0\nGenerator: cudnn build_wheel.py\n"
                               f"Root-Is-Purelib: true\nTag: {TAG}\n").encode(),
    }
    record = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as whl:
        def add(path: str, data: bytes) -> None:
            info = zipfile.ZipInfo(path, ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
            record.append(_record_line(path, data))

        for path in sorted(contents):
            with open(contents[path], "rb") as f:
                add(path, f.read())
        for path in sorted(generated):
            add(path, generated[path])
        record_path = f"{dist_info}/RECORD"
        info = zipfile.ZipInfo(record_path, ZIP_DATE)
        info.external_attr = 0o644 << 16
        whl.writestr(info, "\n".join(record + [f"{record_path},,"]) + "\n")


def _parse_extra(text: str) -> Tuple[str, List[str]]:
    extra, sep, reqs = text.partition("=")
    if not sep or not extra or not reqs:
        raise argparse.ArgumentTypeError(f"--extra wants NAME=REQ[,REQ...], got {text!r}")
    return extra, reqs.split(",")


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--files", required=True)
    parser.add_argument("--strip-prefix", action="append", default=[])
    parser.add_argument("--require-prefix", default="")
    parser.add_argument("--summary", default="")
    parser.add_argument("--python-requires", default="")
    parser.add_argument("--extra", action="append", type=_parse_extra, default=[])
    args = parser.parse_args(argv)
    with open(args.files, encoding="utf-8") as f:
        try:
            contents = plan_contents(f.readlines(), args.strip_prefix, args.require_prefix)
        except ValueError as e:
            print(f"build_wheel.py: {args.name}: {e}", file=sys.stderr)
            return 1
    meta = metadata(args.name, args.version, args.summary, args.python_requires, args.extra)
    write_wheel(args.out, args.name, args.version, contents, meta)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Writes a wheel (PEP 427) from a list of files: pure Python, or with extension modules.

    build_wheel.py --out-dir DIR --name NAME --version V --files LIST
                   [--strip-prefix P]... [--require-prefix P] [--summary S]
                   [--python-requires SPEC] [--requires REQ]... [--extra NAME=REQ]...
                   [--readme FILE] [--license-expression EXPR] [--license-file FILE]
                   [--python-tag cp311 --ext-suffix .cpython-311-x86_64-linux-gnu.so]

LIST holds one line per file: `<path in the source tree>\t<path to read it from>`. Each
file lands at its source-tree path minus the first matching --strip-prefix. Two files that
land on the same path are an error (two source roots both shipping `cudnn/__init__.py`
would otherwise depend on file order), as is a file outside --require-prefix.

A `.so` file makes the wheel a platform wheel: it is renamed to the interpreter's
extension suffix (--ext-suffix) and the wheel is tagged `<python>-<python>-<platform>`,
the platform read off what the objects need from the machine (elf_needs.py: manylinux_2_N
for the newest glibc symbol they use). Without one the wheel is `py3-none-any`. The
wheel lands in DIR under its standard file name. The archive is reproducible: sorted
entries, fixed timestamps and permissions.
"""

import argparse
import base64
import hashlib
import re
import sys
import zipfile
import os
from typing import Dict, List, Optional, Sequence, Tuple

import elf_needs

ZIP_DATE = (1980, 1, 1, 0, 0, 0)
PURE_TAG = "py3-none-any"


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


def with_extension_suffix(contents: Dict[str, str], ext_suffix: str) -> Dict[str, str]:
    """`pkg/_mod.so` -> `pkg/_mod<ext_suffix>` (what the interpreter looks for first)."""
    if not ext_suffix:
        return dict(contents)
    return {(path[:-3] + ext_suffix if path.endswith(".so") else path): src
            for path, src in contents.items()}


def wheel_tag(contents: Dict[str, str], python_tag: str) -> str:
    """py3-none-any without compiled objects, else <python>-<python>-<platform>, the
    platform every object can load on (the newest glibc any of them needs)."""
    objects = [src for path, src in sorted(contents.items()) if path.endswith(".so")]
    if not objects:
        return PURE_TAG
    if not python_tag:
        raise ValueError("extension modules need --python-tag (the interpreter they are built for)")
    tags = [elf_needs.platform_tag(elf_needs.needs(src)) for src in objects]
    if any(t.startswith("linux_") for t in tags):
        platform = next(t for t in tags if t.startswith("linux_"))
    else:  # manylinux_2_N_arch: the largest N
        platform = max(tags, key=lambda t: int(t.split("_")[2]))
    return f"{python_tag}-{python_tag}-{platform}"


def metadata(name: str, version: str, summary: str, python_requires: str,
             extras: Sequence[Tuple[str, List[str]]], requires: Sequence[str] = (),
             readme: str = "", license_expression: str = "",
             license_files: Sequence[str] = ()) -> str:
    """METADATA (core metadata 2.4: License-Expression and License-File need it)."""
    lines = ["Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}"]
    if summary:
        lines.append(f"Summary: {summary}")
    if license_expression:
        lines.append(f"License-Expression: {license_expression}")
    lines.extend(f"License-File: {f}" for f in license_files)
    if python_requires:
        lines.append(f"Requires-Python: {python_requires}")
    lines.extend(f"Requires-Dist: {req}" for req in requires)
    for extra, requirements in extras:
        lines.append(f"Provides-Extra: {extra}")
        lines.extend(f'Requires-Dist: {req}; extra == "{extra}"' for req in requirements)
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        return "\n".join(lines) + "\n\n" + readme
    return "\n".join(lines) + "\n"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def write_wheel(out_dir: str, name: str, version: str, contents: Dict[str, str],
                meta: str, tag: str = PURE_TAG,
                license_files: Optional[Dict[str, str]] = None) -> str:
    """Writes the wheel into out_dir under its standard name; returns its path."""
    dist_info = f"{normalized_name(name)}-{version}.dist-info"
    pure = tag == PURE_TAG
    generated = {
        f"{dist_info}/METADATA": meta.encode(),
        f"{dist_info}/WHEEL": (f"Wheel-Version: 1.0\nGenerator: cudnn build_wheel.py\n"
                               f"Root-Is-Purelib: {'true' if pure else 'false'}\n"
                               f"Tag: {tag}\n").encode(),
    }
    for shown, src in sorted((license_files or {}).items()):
        with open(src, "rb") as f:
            generated[f"{dist_info}/licenses/{shown}"] = f.read()
    out = os.path.join(out_dir, f"{normalized_name(name)}-{version}-{tag}.whl")
    record = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as whl:
        def add(path: str, data: bytes, mode: int = 0o644) -> None:
            info = zipfile.ZipInfo(path, ZIP_DATE)
            info.external_attr = mode << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
            record.append(_record_line(path, data))

        for path in sorted(contents):
            with open(contents[path], "rb") as f:
                add(path, f.read(), 0o755 if path.endswith(".so") else 0o644)
        for path in sorted(generated):
            add(path, generated[path])
        record_path = f"{dist_info}/RECORD"
        info = zipfile.ZipInfo(record_path, ZIP_DATE)
        info.external_attr = 0o644 << 16
        whl.writestr(info, "\n".join(record + [f"{record_path},,"]) + "\n")
    return out


def _parse_extra(text: str) -> Tuple[str, str]:
    # one requirement per flag: a requirement's own specifiers are comma-separated
    # (">=13.2,<13.5"), so a list joined by commas could not be split back
    extra, sep, req = text.partition("=")
    if not sep or not extra or not req:
        raise argparse.ArgumentTypeError(f"--extra wants NAME=REQ, got {text!r}")
    return extra, req


def _group_extras(pairs: Sequence[Tuple[str, str]]) -> List[Tuple[str, List[str]]]:
    """(extra, [requirements]) in the order the extras first appear."""
    grouped: dict = {}
    for extra, req in pairs:
        grouped.setdefault(extra, []).append(req)
    return list(grouped.items())


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--files", required=True)
    parser.add_argument("--strip-prefix", action="append", default=[])
    parser.add_argument("--require-prefix", default="")
    parser.add_argument("--summary", default="")
    parser.add_argument("--python-requires", default="")
    parser.add_argument("--requires", action="append", default=[])
    parser.add_argument("--extra", action="append", type=_parse_extra, default=[])
    parser.add_argument("--readme", default="")
    parser.add_argument("--license-expression", default="")
    parser.add_argument("--license-file", action="append", default=[])
    parser.add_argument("--python-tag", default="")
    parser.add_argument("--ext-suffix", default="")
    args = parser.parse_args(argv)
    with open(args.files, encoding="utf-8") as f:
        try:
            contents = plan_contents(f.readlines(), args.strip_prefix, args.require_prefix)
            contents = with_extension_suffix(contents, args.ext_suffix)
            tag = wheel_tag(contents, args.python_tag)
        except ValueError as e:
            print(f"build_wheel.py: {args.name}: {e}", file=sys.stderr)
            return 1
    readme = ""
    if args.readme:
        with open(args.readme, encoding="utf-8") as f:
            readme = f.read()
    licenses = {os.path.basename(p): p for p in args.license_file}
    meta = metadata(args.name, args.version, args.summary, args.python_requires,
                    _group_extras(args.extra),
                    args.requires, readme, args.license_expression, sorted(licenses))
    os.makedirs(args.out_dir, exist_ok=True)
    write_wheel(args.out_dir, args.name, args.version, contents, meta, tag, licenses)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""build_wheel.py lays files out by source root, refuses ambiguity, and writes a wheel whose
RECORD and METADATA the standard library reads back."""

import base64
import csv
import hashlib
import importlib.metadata
import io
import zipfile

import pytest

import build_wheel

ROOTS = ["ir/", "ops/"]


def _listing(tmp_path, files):
    lines = []
    for source_path, text in files.items():
        real = tmp_path / "src" / source_path
        real.parent.mkdir(parents=True, exist_ok=True)
        real.write_text(text)
        lines.append(f"{source_path}\t{real}\n")
    return lines


def test_strips_the_first_matching_root(tmp_path):
    lines = _listing(tmp_path, {"ir/pkg/__init__.py": "", "ops/pkg/ops/spec.py": "X = 1\n"})
    contents = build_wheel.plan_contents(lines, ROOTS, "pkg/")
    assert sorted(contents) == ["pkg/__init__.py", "pkg/ops/spec.py"]


def test_two_roots_shipping_one_path_is_an_error(tmp_path):
    lines = _listing(tmp_path, {"ir/pkg/__init__.py": "", "ops/pkg/__init__.py": ""})
    with pytest.raises(ValueError, match="both land at pkg/__init__.py"):
        build_wheel.plan_contents(lines, ROOTS, "pkg/")


def test_file_outside_the_package_is_an_error(tmp_path):
    lines = _listing(tmp_path, {"tools/helper.py": ""})
    with pytest.raises(ValueError, match="outside 'pkg/'"):
        build_wheel.plan_contents(lines, ROOTS, "pkg/")


def test_wheel_round_trips_through_importlib_metadata(tmp_path):
    files = {"ir/pkg/__init__.py": "VALUE = 42\n", "ops/pkg/ops/spec.py": "X = 1\n"}
    listing = tmp_path / "files.txt"
    listing.write_text("".join(_listing(tmp_path, files)))
    out = tmp_path / "pkg_dist-1.2.3-py3-none-any.whl"
    rc = build_wheel.main([
        "--out", str(out), "--name", "pkg-dist", "--version", "1.2.3",
        "--files", str(listing), "--require-prefix", "pkg/", "--python-requires", ">=3.10",
        "--extra", "torch=torch>=2.11", *[a for r in ROOTS for a in ("--strip-prefix", r)],
    ])
    assert rc == 0
    with zipfile.ZipFile(out) as whl:
        names = whl.namelist()
        rows = list(csv.reader(io.StringIO(whl.read("pkg_dist-1.2.3.dist-info/RECORD").decode())))
        for path, digest, size in rows:
            if path.endswith("RECORD"):
                assert (digest, size) == ("", "")
                continue
            data = whl.read(path)
            expect = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expect}" and int(size) == len(data), path
        assert whl.read("pkg/__init__.py") == b"VALUE = 42\n"
    assert sorted(r[0] for r in rows) == sorted(names)

    dist = next(importlib.metadata.distributions(path=[str(out)]))
    assert (dist.metadata["Name"], dist.version) == ("pkg-dist", "1.2.3")
    assert dist.requires == ['torch>=2.11; extra == "torch"']
    assert dist.metadata["Requires-Python"] == ">=3.10"


def test_build_is_reproducible(tmp_path):
    listing = tmp_path / "files.txt"
    listing.write_text("".join(_listing(tmp_path, {"ir/pkg/__init__.py": "A = 1\n"})))
    outs = []
    for i in range(2):
        out = tmp_path / f"w{i}.whl"
        assert build_wheel.main(["--out", str(out), "--name", "p", "--version", "1",
                                 "--files", str(listing), "--strip-prefix", "ir/"]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))

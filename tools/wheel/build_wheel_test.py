"""build_wheel.py lays files out by source root, refuses ambiguity, and writes a wheel whose
RECORD and METADATA the standard library reads back."""

import base64
import csv
import hashlib
import importlib.metadata
import io
import shutil
import subprocess
import zipfile

import pytest

import build_wheel
import elf_needs

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
    readme = tmp_path / "README.md"
    readme.write_text("# pkg\n\nWhat it is.\n")
    license_file = tmp_path / "LICENSE"
    license_file.write_text("the license\n")
    rc = build_wheel.main([
        "--out-dir", str(tmp_path / "dist"), "--name", "pkg-dist", "--version", "1.2.3",
        "--files", str(listing), "--require-prefix", "pkg/", "--python-requires", ">=3.10",
        "--requires", "absl-py>=2", "--extra", "torch=torch>=2.11",
        "--extra", "cutile=nvidia-nvvm>=13.2,<13.5", "--extra", "torch=numpy",
        "--readme", str(readme), "--license-expression", "MIT",
        "--license-file", str(license_file),
        *[a for r in ROOTS for a in ("--strip-prefix", r)],
    ])
    assert rc == 0
    out = tmp_path / "dist" / "pkg_dist-1.2.3-py3-none-any.whl"
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
    # a requirement with several specifiers stays whole (pip refused the wheel when the
    # rule joined an extra's requirements with commas and the tool split them again)
    assert dist.requires == ["absl-py>=2", 'torch>=2.11; extra == "torch"', 'numpy; extra == "torch"',
                             'nvidia-nvvm>=13.2,<13.5; extra == "cutile"']
    assert dist.metadata["Requires-Python"] == ">=3.10"
    assert dist.metadata["License-Expression"] == "MIT"
    assert dist.metadata.get_payload().startswith("# pkg")
    assert dist.read_text("licenses/LICENSE") == "the license\n"


def test_build_is_reproducible(tmp_path):
    listing = tmp_path / "files.txt"
    listing.write_text("".join(_listing(tmp_path, {"ir/pkg/__init__.py": "A = 1\n"})))
    outs = []
    for i in range(2):
        out = tmp_path / f"w{i}"
        assert build_wheel.main(["--out-dir", str(out), "--name", "p", "--version", "1",
                                 "--files", str(listing), "--strip-prefix", "ir/"]) == 0
        outs.append((out / "p-1-py3-none-any.whl").read_bytes())
    assert outs[0] == outs[1]


@pytest.fixture(scope="module")
def shared_object(tmp_path_factory):
    """A tiny shared object built with the C compiler on PATH (skip without one)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler on PATH")
    folder = tmp_path_factory.mktemp("so")
    (folder / "m.c").write_text("#include <math.h>\ndouble f(double x) { return sqrt(x); }\n")
    out = folder / "_m.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(folder / "m.c"), "-lm"],
                   check=True)
    return out


def test_an_extension_makes_a_platform_wheel(tmp_path, shared_object):
    listing = tmp_path / "files.txt"
    listing.write_text("".join(_listing(tmp_path, {"ir/pkg/__init__.py": ""}))
                       + f"ir/pkg/_m.so\t{shared_object}\n")
    assert build_wheel.main(["--out-dir", str(tmp_path / "d"), "--name", "p", "--version", "1",
                             "--files", str(listing), "--strip-prefix", "ir/",
                             "--python-tag", "cp311",
                             "--ext-suffix", ".cpython-311-x86_64-linux-gnu.so"]) == 0
    (wheel,) = (tmp_path / "d").iterdir()
    needs = elf_needs.needs(str(shared_object))
    assert wheel.name == f"p-1-cp311-cp311-{elf_needs.platform_tag(needs)}.whl"
    assert wheel.name.startswith("p-1-cp311-cp311-manylinux_2_")
    with zipfile.ZipFile(wheel) as whl:
        assert "pkg/_m.cpython-311-x86_64-linux-gnu.so" in whl.namelist()
        assert "Root-Is-Purelib: false" in whl.read("p-1.dist-info/WHEEL").decode()


def test_extensions_need_a_python_tag(tmp_path, shared_object):
    listing = tmp_path / "files.txt"
    listing.write_text(f"ir/pkg/_m.so\t{shared_object}\n")
    assert build_wheel.main(["--out-dir", str(tmp_path), "--name", "p", "--version", "1",
                             "--files", str(listing), "--strip-prefix", "ir/"]) == 1


def test_platform_tags():
    glibc = elf_needs.ElfNeeds("x86_64", ("libc.so.6", "libm.so.6"),
                               {"libc.so.6": ("GLIBC_2.14", "GLIBC_2.34"), "libm.so.6": ("GLIBC_2.2.5",)})
    assert elf_needs.platform_tag(glibc) == "manylinux_2_34_x86_64"
    cxx = elf_needs.ElfNeeds("x86_64", ("libc.so.6", "libstdc++.so.6"),
                             {"libstdc++.so.6": ("GLIBCXX_3.4.30",)})
    assert elf_needs.platform_tag(cxx) == "linux_x86_64"
    other = elf_needs.ElfNeeds("x86_64", ("libc.so.6", "libcudnn.so.9"), {})
    assert elf_needs.platform_tag(other) == "linux_x86_64"


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))

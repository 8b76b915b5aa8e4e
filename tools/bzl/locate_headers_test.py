"""locate_headers.wheel_include: the include root of a header inside an installed wheel,
for a bare name and for a path below the root (crt/host_defines.h), on a fake wheel."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import locate_headers  # noqa: E402

FILES = ["fake/cu/include/host_defines.h",          # a forwarding header of the same name
         "fake/cu/include/crt/host_defines.h",
         "fake/cu/include/cudnn_graph.h"]


@pytest.fixture
def site(tmp_path, monkeypatch):
    info = tmp_path / "fake_headers-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-headers\nVersion: 1.2.3\n")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in FILES))
    for f in FILES:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("/* */\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_bare_header_gives_its_folder(site):
    found = locate_headers.wheel_include("fake-headers", "cudnn_graph.h")
    assert found == {"include": str(site / "fake" / "cu" / "include"), "version": "1.2.3"}


def test_a_header_below_the_root_gives_the_root_not_its_namesake(site):
    found = locate_headers.wheel_include("fake-headers", "crt/host_defines.h")
    assert found["include"] == str(site / "fake" / "cu" / "include")
    assert os.path.isfile(os.path.join(found["include"], "crt", "host_defines.h"))


def test_missing_header_or_wheel_is_a_lookup_error_naming_it(site):
    with pytest.raises(LookupError, match="fake-headers 1.2.3 has no crt/nothing.h"):
        locate_headers.wheel_include("fake-headers", "crt/nothing.h")
    with pytest.raises(LookupError, match="no-such-wheel is not installed"):
        locate_headers.wheel_include("no-such-wheel", "cudnn_graph.h")


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))

"""Strict mode: a cu_seqlens table checked on its device, the first bad entry named."""
import pytest

torch = pytest.importorskip("torch")

from cudnn.linear_attention.common.cu_seqlens_check import (STRICT_ENV,  # noqa: E402
                                                            check_cu_seqlens, strict_requested)


@pytest.mark.parametrize("table", [[0, 5, 8], [0], [0, 0, 8, 8], [0, 8]])
def test_well_formed_tables_pass(table):
    for dtype in (torch.int32, torch.int64):
        check_cu_seqlens(torch.tensor(table, dtype=dtype), table[-1], "op")


@pytest.mark.parametrize("table, needle", [
    ([0, 5, 12], r"op: cu_seqlens\[2\] = 12: past the token count total_T = 8"),
    ([0, -3, 8], r"cu_seqlens\[1\] = -3: a negative boundary"),
    ([2, 5, 8], r"cu_seqlens\[0\] = 2: the table must start at 0"),
    ([0, 6, 4, 8], r"cu_seqlens\[2\] = 4: below cu_seqlens\[1\] = 6 \(the table must not "
                   r"decrease\)"),
    ([0, 5, 7], r"cu_seqlens\[2\] = 7: the last entry must equal the token count "
                r"total_T = 8"),
    ([0, 12, 4, 8], r"cu_seqlens\[1\] = 12: past"),   # the first bad entry, not the step
])
def test_the_first_bad_entry_is_named(table, needle):
    with pytest.raises(ValueError, match=needle):
        check_cu_seqlens(torch.tensor(table, dtype=torch.int32), 8, "op")


def test_shape_errors():
    with pytest.raises(ValueError, match="1-D table of N \\+ 1 >= 1 entries"):
        check_cu_seqlens(torch.zeros(0, dtype=torch.int32), 0, "op")
    with pytest.raises(ValueError, match="got shape \\[2, 2\\]"):
        check_cu_seqlens(torch.zeros(2, 2, dtype=torch.int32), 0, "op")


def test_long_tables_are_shown_shortened():
    table = list(range(0, 40)) + [3]
    with pytest.raises(ValueError, match=r"\.\.\. \(41 entries\)"):
        check_cu_seqlens(torch.tensor(table), 39, "op")


def test_strict_mode_is_an_argument_or_the_environment(monkeypatch):
    monkeypatch.delenv(STRICT_ENV, raising=False)
    assert not strict_requested() and strict_requested(True)
    for value, on in (("1", True), ("yes", True), ("0", False), ("", False)):
        monkeypatch.setenv(STRICT_ENV, value)
        assert strict_requested() is on
        assert strict_requested(False) is False  # an explicit argument wins


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))

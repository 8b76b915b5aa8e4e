"""sass_line_map.py's parsing on nvdisasm -g text and a Python source: every instruction
gets the line annotation above it and the innermost def enclosing that line (no compile,
no GPU)."""

import random
import textwrap

import pytest

import sass_line_map as lm

SOURCE = textwrap.dedent('''\
    import x


    class Kernel:
        @decorator
        def stage(self):
            a = 1
            def inner():
                return 2
            return a

        def other(self):
            pass


    def helper():
        return 3
    ''')


def test_enclosing_function_is_the_innermost_def(tmp_path):
    path = tmp_path / "k.py"
    path.write_text(SOURCE)
    want = {1: "k.py", 5: "k.py:Kernel.stage", 7: "k.py:Kernel.stage", 9: "k.py:Kernel.stage.inner",
            10: "k.py:Kernel.stage", 12: "k.py:Kernel.other", 13: "k.py:Kernel.other", 14: "k.py",
            16: "k.py:helper", 17: "k.py:helper", 18: "k.py"}
    for line, name in want.items():
        assert lm.enclosing_function(str(path), line) == name, line
    assert lm.enclosing_function(None, 3) == "?"
    assert lm.enclosing_function(str(tmp_path / "missing.py"), 3) == "missing.py"


@pytest.mark.parametrize("seed", [1, 2])
def test_parse_keeps_each_instruction_with_the_annotation_above_it(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "k.py"
    path.write_text(SOURCE)
    text, want = ["\t.headerflags @\"EF_CUDA_SM90\"", "        /*0000*/  LDC R1, c[0x0][0x28] ;"], \
        [("LDC R1, c[0x0][0x28]", None, 0)]
    for n in range(1, 40):
        if rng.random() < 0.4:
            line = rng.choice([7, 9, 13, 17])
            text.append(f'\t//## File "{path}", line {line}')
            where = (str(path), line)
        elif n == 1:
            where = (None, 0)
        instr = rng.choice(["@!P0 HGMMA.64x64x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT", "FFMA R1, R2, R3, R4",
                            "BAR.SYNC.DEFER_BLOCKING 0x1, 0x100"])
        text.append(f"        /*{16 * n:04x}*/                   {instr} ;")
        text.append("        .L_x_%d:" % n if rng.random() < 0.1 else "")
        want.append((instr, *where))
    got = lm.parse_nvdisasm("\n".join(text))
    assert got == want
    entries = lm.line_map("\n".join(text))
    assert [e["index"] for e in entries] == list(range(len(want)))
    assert [e["sass"] for e in entries] == [w[0] for w in want]
    assert all(e["function"] == lm.enclosing_function(w[1], w[2]) for e, w in zip(entries, want))


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))

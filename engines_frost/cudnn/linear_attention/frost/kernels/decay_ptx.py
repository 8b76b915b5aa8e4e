"""Inline PTX for the vector-gate grads kernel's decayed operands (FrostBwdConfig.vec_fast_decay).

Three single instructions the DSL's own operations do not give: a fused multiply-add
(the exponent as one FFMA with log2(e) folded into the reference gate per channel), the
same ex2.approx.ftz as cute.arch.exp but without side effects (ptxas and LLVM may schedule
it freely), and the bf16 hi + lo split of two fp32 values with one packed round-to-nearest
conversion per pair (the DSL lowers a 2-wide bf16 conversion to two scalar conversions;
its cvt_f32x2_bf16x2 saturates and is marked as having side effects). The split rounds
exactly as cvt.rn.bf16.f32 per element does, so hi and lo are bitwise the scalar path's.
"""
from __future__ import annotations

from cutlass import Float32, Int32
from cutlass._mlir import ir
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op

# cute.arch.exp multiplies by this Python float in fp32: the same constant here
LOG2_E = 1.4426950408889634


def _asm(result_type, operands, text, constraints):
    return llvm.inline_asm(result_type, operands, text, constraints, has_side_effects=False,
                           is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT)


@dsl_user_op
def ffma(a, b, c, *, loc=None, ip=None) -> Float32:
    """a * b + c rounded once (fma.rn.f32)."""
    ops = [Float32(x).ir_value(loc=loc, ip=ip) for x in (a, b, c)]
    return Float32(_asm(T.f32(), ops, "fma.rn.f32 $0, $1, $2, $3;", "=f,f,f,f"))


@dsl_user_op
def ex2(a, *, loc=None, ip=None) -> Float32:
    """2^a by ex2.approx.ftz.f32, the instruction cute.arch.exp issues."""
    return Float32(_asm(T.f32(), [Float32(a).ir_value(loc=loc, ip=ip)], "ex2.approx.ftz.f32 $0, $1;", "=f,f"))


@dsl_user_op
def unpack_bf16x2(word, *, loc=None, ip=None):
    """The two bf16 halves of a 32-bit word as fp32 (low half first): one shift and one
    mask (the DSL's element conversion extracts the high half first: a third instruction)."""
    w = Int32(word).ir_value(loc=loc, ip=ip)
    pair = llvm.StructType.get_literal([T.f32(), T.f32()])
    res = _asm(pair, [w], "shl.b32 $0, $2, 16;\n\tand.b32 $1, $2, 0xffff0000;", "=f,=f,r")
    return (Float32(llvm.extractvalue(T.f32(), res, [0], loc=loc, ip=ip)),
            Float32(llvm.extractvalue(T.f32(), res, [1], loc=loc, ip=ip)))


@dsl_user_op
def split_bf16x2(x0, x1, *, loc=None, ip=None):
    """(hi, lo) as two 32-bit words of bf16 pairs (element 0 in the low half, as an MMA
    operand register holds fragment values 2 i, 2 i + 1): hi = bf16(x), lo = bf16(x - hi),
    both round-to-nearest-even. Five instructions for the pair (two packed conversions,
    the two halves back to fp32 by a shift and a mask, two subtractions)."""
    ops = [Float32(x).ir_value(loc=loc, ip=ip) for x in (x0, x1)]
    pair = llvm.StructType.get_literal([T.i32(), T.i32()])
    text = ("{\n\t.reg .f32 a, b;\n\t"
            "cvt.rn.bf16x2.f32 $0, $3, $2;\n\t"
            "shl.b32 a, $0, 16;\n\t"
            "and.b32 b, $0, 0xffff0000;\n\t"
            "sub.f32 a, $2, a;\n\t"
            "sub.f32 b, $3, b;\n\t"
            "cvt.rn.bf16x2.f32 $1, b, a;\n\t}")
    res = _asm(pair, ops, text, "=&r,=r,f,f")
    hi = llvm.extractvalue(T.i32(), res, [0], loc=loc, ip=ip)
    lo = llvm.extractvalue(T.i32(), res, [1], loc=loc, ip=ip)
    return Int32(hi), Int32(lo)

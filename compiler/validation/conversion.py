"""Type conversion: CAST and RESCALE ([SPEC] pseudocode/operators/RESCALE.tosac,
library/scale_helpers.tosac)."""
from __future__ import annotations

from .context import OpContext
from .registry import check, no_extra_rules

check("CAST")(no_extra_rules)        # the type table and equal input/output shapes are the rules

_ROUNDING_EXTENSION = {"SINGLE_ROUND": None, "DOUBLE_ROUND": "EXT-DOUBLEROUND",
                       "INEXACT_ROUND": "EXT-INEXACTROUND"}


@check("RESCALE")
def rescale(ctx: OpContext) -> None:
    in_t, out_t = ctx.dtype("input"), ctx.dtype("output")
    scale32 = bool(ctx.attr("scale32", False))
    rounding = ctx.attr("rounding_mode", "SINGLE_ROUND")
    per_channel = bool(ctx.attr("per_channel", False))
    in_u = bool(ctx.attr("input_unsigned", False))
    out_u = bool(ctx.attr("output_unsigned", False))
    if rounding not in _ROUNDING_EXTENSION:
        ctx.fail(f"rounding_mode {rounding} is not SINGLE_ROUND, DOUBLE_ROUND or INEXACT_ROUND",
                 "rounding_mode is not a rounding_mode_t value")
    izp, ozp = ctx.scalar("input_zp"), ctx.scalar("output_zp")
    izp_name, ozp_name = ctx.name("input_zp"), ctx.name("output_zp")

    # uint16 values may have zero point 0 or 32768; int8/uint8 any value; everything else 0.
    if izp is not None and in_t != "int8" and (in_t != "int16" or not in_u) and izp != 0:
        ctx.fail(f"input_zp is {izp}; it must be 0 for {'unsigned ' if in_u else ''}{in_t} input",
                 "!is_same<in_t,i8_t>() && (!is_same<in_t,i16_t>() || input_unsigned == false) && "
                 "input_zp != 0", izp_name)
    if ozp is not None and out_t != "int8" and (out_t != "int16" or not out_u) and ozp != 0:
        ctx.fail(f"output_zp is {ozp}; it must be 0 for {'unsigned ' if out_u else ''}{out_t} output",
                 "!is_same<out_t,i8_t>() && (!is_same<out_t,i16_t>() || output_unsigned == false) && "
                 "output_zp != 0", ozp_name)
    if izp is not None and in_t == "int16" and in_u and (izp & 0xFFFF) not in (0, 32768):
        ctx.fail(f"input_zp is {izp & 0xFFFF}; a uint16 zero point must be 0 or 32768",
                 "is_same<in_t,i16_t>() && input_unsigned == true && input_zp != 0 && input_zp != 32768",
                 izp_name)
    if ozp is not None and out_t == "int16" and out_u and (ozp & 0xFFFF) not in (0, 32768):
        ctx.fail(f"output_zp is {ozp & 0xFFFF}; a uint16 zero point must be 0 or 32768",
                 "is_same<out_t,i16_t>() && output_unsigned == true && output_zp != 0 && "
                 "output_zp != 32768", ozp_name)
    if scale32 and in_t == "int48":
        ctx.fail("scale32 is true with an int48 input (48-bit values need the 16-bit multiplier)",
                 "scale32 && is_same<in_t,i48_t>()")
    if not scale32 and rounding == "DOUBLE_ROUND":
        ctx.fail("rounding_mode DOUBLE_ROUND needs scale32", "!scale32 && (rounding_mode == DOUBLE_ROUND)")
    if in_u and out_u:
        ctx.fail("input_unsigned and output_unsigned are both true", "input_unsigned && output_unsigned")
    if out_t == "int32" and in_u:
        ctx.fail("input_unsigned is true with an int32 output", "is_same<out_t,i32_t>() && input_unsigned")
    if in_t == "int32" and out_u:
        ctx.fail("output_unsigned is true with an int32 input", "is_same<in_t,i32_t>() && output_unsigned")
    if in_t == "int48" and out_u:
        ctx.fail("output_unsigned is true with an int48 input", "is_same<in_t,i48_t>() && output_unsigned")
    if in_t == "int48" and in_u:
        ctx.fail("input_unsigned is true with an int48 input", "is_same<in_t, i48_t> && input_unsigned")
    if in_t == "int32" and in_u:
        ctx.fail("input_unsigned is true with an int32 input", "is_same<in_t, i32_t> && input_unsigned")
    if out_t == "int32" and out_u:
        ctx.fail("output_unsigned is true with an int32 output", "is_same<out_t, i32_t> && output_unsigned")
    shape = ctx.shape("input")
    if per_channel and len(shape) < 1:
        ctx.fail("per_channel is true for a rank-0 input", "per_channel && rank(input) < 1")

    nc = shape[-1] if per_channel else 1
    count = ctx.dims.get("NC")
    if count != nc:
        why = f"the last input dimension ({nc})" if per_channel else "1 (per_channel is false)"
        ctx.fail(f"multiplier and shift have {count} values; NC must be {why}",
                 "shape(multiplier) != [NC] || shape(shift) != [NC]", ctx.name("multiplier"))
    mul_t = "int32" if scale32 else "int16"
    if ctx.dtype("multiplier") != mul_t:
        ctx.fail(f"multiplier is {ctx.dtype('multiplier')}; scale32={str(scale32).lower()} needs {mul_t}",
                 "type(multiplier) != mul_t (i32_t if scale32 else i16_t) (WrongInputType)",
                 ctx.name("multiplier"))
    # apply_scale_32 / apply_scale_16: REQUIRE(multiplier >= 0), REQUIRE(2 <= shift <= 62)
    multipliers, shifts = ctx.values("multiplier"), ctx.values("shift")
    if multipliers is not None and min(multipliers) < 0:
        ctx.fail_require(f"multiplier {min(multipliers)} is negative", "multiplier >= 0",
                         ctx.name("multiplier"))
    if shifts and not 2 <= min(shifts) <= max(shifts) <= 62:     # (one pass each, in C)
        bad = next(s for s in shifts if not 2 <= s <= 62)
        ctx.fail_require(f"shift {bad} is outside [2, 62]", "2 <= shift && shift <= 62", ctx.name("shift"))
    ext = _ROUNDING_EXTENSION[rounding]
    if ext is not None:
        ctx.need_extension(ext, f"rounding_mode {rounding}")

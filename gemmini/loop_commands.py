"""Gemmini's loop instructions as commands: ``loop_ws`` and ``loop_conv_ws`` give the configuration words and
the start word that ``gemmini.h``'s ``gemmini_loop_ws`` and ``gemmini_loop_conv_ws`` macros issue, as
``isa.Command`` objects.  The bit layouts, the field checks and the decoding are ``gemmini.isa_loops``.
"""

from __future__ import annotations

from .config import DEFAULT_CONFIG, GemminiConfig
from .errors import IsaError
from .isa import Command
from .isa_loops import CONV_ARGS, CONV_FUNCTS, WS_ARGS, WS_FUNCTS, _as_int, check_fields, encode_word, word_fields


def _commands(pairs):
    return tuple(Command(funct, rs1, rs2) for funct, rs1, rs2 in pairs)


def _words(functs, args: dict, config, source) -> tuple:
    layout = (config or DEFAULT_CONFIG).loop_conv_layout
    pairs = []
    for funct in functs:
        mine = {name: args[name] for name in word_fields(funct, layout) if name in args}
        check_fields(funct, mine, config, source)
        pairs.append((funct, *encode_word(funct, mine, source, layout)))
    return _commands(pairs)


def _collect(names, values, kwargs, source) -> dict:
    if len(values) > len(names):
        raise IsaError(f"{len(values)} positional arguments, at most {len(names)}", source=source, field="arguments")
    args = dict(zip(names, values))
    for key, value in kwargs.items():
        if key not in names:
            raise IsaError(f"unknown argument {key!r}", source=source, field=key)
        if key in args:
            raise IsaError("given both by position and by name", source=source, field=key)
        args[key] = value
    return args


def loop_ws(*values, config: GemminiConfig | None = None, **kwargs) -> tuple:
    """The six commands of ``gemmini_loop_ws(I, J, K, pad_I, pad_J, pad_K, A, B, D, C, A_stride, B_stride,
    D_stride, C_stride, A_transpose, B_transpose, full_C, low_D, ex_accumulate, act, a_spad_id, b_spad_id,
    is_resadd)`` (positional in that order, or by name; omitted ones are 0): the bounds, address and stride
    words and the start word.  I, J, K and the pads are in DIM-blocks and rows; strides in elements."""
    src = "isa.loop_ws"
    args = _collect(WS_ARGS, values, kwargs, src)
    for need in ("I", "J", "K"):
        if _as_int(args.get(need, 0), need, src) < 1:
            raise IsaError(f"must be at least 1, got {args.get(need, 0)!r}", source=src, field=need)
    return _words(WS_FUNCTS, args, config, src)


def loop_conv_ws(*values, config: GemminiConfig | None = None, **kwargs) -> tuple:
    """The seven commands of ``gemmini_loop_conv_ws(...)`` with the macro's arguments (``CONV_ARGS``, positional
    in that order or by name; omitted ones are 0): six configuration words and the start word, in
    ``config.loop_conv_layout``."""
    src = "isa.loop_conv_ws"
    args = _collect(CONV_ARGS, values, kwargs, src)
    for need in ("batches", "porows", "pocols", "pochs", "krows", "kcols", "kchs", "orows", "ocols", "stride",
                 "kernel_dim"):
        if _as_int(args.get(need, 0), need, src) < 1:
            raise IsaError(f"must be at least 1, got {args.get(need, 0)!r}", source=src, field=need)
    return _words(CONV_FUNCTS, args, config, src)

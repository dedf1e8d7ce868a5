"""The library configuration the reproduction assumes: gemmini_params.h's defaults.

gemmini-rocc-tests 180c468 ships ``include/gemmini_params.h`` for the default
Gemmini: DIM 16, int8 inputs, int32 accumulator, 4 scratchpad banks of 4096
rows (256 KiB), 1024 accumulator rows (64 KiB), 64-byte DMA rows
(``MAX_BYTES``).  Streams are reproduced for these values only; other values
are accepted for the arithmetic but were not checked against a recording.

``loop_conv_layout`` picks the header version's LOOP_CONV_WS words, which
must be the ones the hardware decodes (``GemminiConfig.loop_conv_layout``):
"180c468" (rectangular images) or "f13847e" (gemmini-rocc-tests ab748c5, the
header Gemmini f13847e pins: square images only; its streams are otherwise
the same, instruction for instruction).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LibParams:
    """``DIM``, ``BANK_NUM``, ``BANK_ROWS``, ``ACC_ROWS``, ``MAX_BYTES`` of gemmini_params.h, and the
    LOOP_CONV_WS encoding (``gemmini.config.LOOP_CONV_LAYOUTS``)."""

    dim: int = 16
    bank_num: int = 4
    bank_rows: int = 4096
    acc_rows: int = 1024
    max_bytes: int = 64
    loop_conv_layout: str = "180c468"

    def __post_init__(self):
        from ..config import LOOP_CONV_LAYOUTS
        from ..errors import CodegenError

        if self.loop_conv_layout not in LOOP_CONV_LAYOUTS:
            raise CodegenError(f"unknown layout {self.loop_conv_layout!r} (one of {', '.join(LOOP_CONV_LAYOUTS)})",
                               source="gemmini.vendor params", field="loop_conv_layout")

    @property
    def sp_rows(self) -> int:
        return self.bank_num * self.bank_rows

    def tile_config(self):
        from costmodel.gemmini_library_tiles import GemminiTileConfig

        return GemminiTileConfig(dim=self.dim, bank_num=self.bank_num, bank_rows=self.bank_rows,
                                 acc_rows=self.acc_rows)


DEFAULT_PARAMS = LibParams()

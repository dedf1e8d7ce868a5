"""The library configuration the reproduction assumes: gemmini_params.h's defaults.

gemmini-rocc-tests 180c468 ships ``include/gemmini_params.h`` for the default
Gemmini: DIM 16, int8 inputs, int32 accumulator, 4 scratchpad banks of 4096
rows (256 KiB), 1024 accumulator rows (64 KiB), 64-byte DMA rows
(``MAX_BYTES``).  Streams are reproduced for these values only; other values
are accepted for the arithmetic but were not checked against a recording.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LibParams:
    """``DIM``, ``BANK_NUM``, ``BANK_ROWS``, ``ACC_ROWS``, ``MAX_BYTES`` of gemmini_params.h."""

    dim: int = 16
    bank_num: int = 4
    bank_rows: int = 4096
    acc_rows: int = 1024
    max_bytes: int = 64

    @property
    def sp_rows(self) -> int:
        return self.bank_num * self.bank_rows

    def tile_config(self):
        from cosa.baselines.gemmini_default import GemminiTileConfig

        return GemminiTileConfig(dim=self.dim, bank_num=self.bank_num, bank_rows=self.bank_rows,
                                 acc_rows=self.acc_rows)


DEFAULT_PARAMS = LibParams()

"""Simulators of Gemmini command streams: a functional model and a timing model."""

from .functional import ExecResult, Machine, execute
from .timing import TimingResult, dma_beats, dma_requests, dma_transfer, timing

__all__ = ["ExecResult", "Machine", "TimingResult", "dma_beats", "dma_requests", "dma_transfer", "execute", "timing"]

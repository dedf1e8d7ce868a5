"""The one rank wrapper of every distributed algorithm: an mpi4py communicator that counts, per named
phase, the words and messages each rank sends and receives.

    ranks = Ranks()                       # MPI.COMM_WORLD (or Ranks(comm))
    with ranks.phase("replication"):
        whole = ranks.allgather(block)
    ranks.traffic()["replication"].words_recv

How each operation is counted (``Traffic``: words = array elements, bytes = their bytes, one message per
buffer handed to MPI).  Every collective is carried out here over counted point-to-point
``Sendrecv``/``Send``/``Recv`` calls, so the counts are what the rank really sends and receives and
``collective_cost`` (the model every algorithm's cost model uses) states the same numbers in closed form:

* ``send``/``recv``: one message of the buffer's words, sent or received.
* ``sendrecv``/``shift``: one message sent and one received; a rank that sends to itself counts both
  (the data goes through MPI like any other).
* ``allgather`` over q ranks (ring): q - 1 steps; at step s the rank passes block (rank - s) to its right
  neighbour and receives block (rank - s - 1) from its left.  Sent: every block but the right
  neighbour's; received: every block but its own; q - 1 messages each way.
* ``reduce_scatter`` (ring): q - 1 steps; at step s the rank sends its partial sum of block
  (rank - s - 1) and receives the left neighbour's partial sum of block (rank - s - 2), adding its own
  contribution; after q - 1 steps it holds the sum of its own block.  Sent: every block but its own;
  received: every block but block (rank - 1); q - 1 messages each way.
* ``allreduce`` (ring): ``reduce_scatter`` of the array cut into q near-equal blocks
  (``numpy.array_split``), then ``allgather`` of the reduced blocks: 2 (q - 1) messages each way.
* ``bcast`` / ``reduce`` (binomial tree rooted at ``root``): a non-root rank receives (bcast) or sends
  (reduce) the whole buffer once; a rank sends (bcast) or receives (reduce) the whole buffer once per
  child in the tree (``binomial_children``).
* ``barrier``: not counted (no payload).

Sleep after send (not network latency): ``ranks.ledger.sleep_after_send_s = 50e-6`` makes the rank call
``time.sleep`` that long after every message it sends.  The message itself is not delayed: the sender
stalls, the receiver does not wait for it, and ``time.sleep`` overshoots by tens of microseconds or, on a
loaded machine, by a scheduler's wake-up.  A real added latency needs a real path (``bench/netpath.py``:
two network namespaces joined by a delayed link).

A phase is a name; nested phases count into the innermost.  Operations outside every phase count into
``"other"``.  Sub-communicators (``split``) share the counters of the wrapper they came from.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field, fields

import numpy as np

OTHER = "other"


@dataclass
class Traffic:
    """What one rank moved in one phase: words (array elements) and bytes, messages, seconds spent."""

    words_sent: int = 0
    words_recv: int = 0
    msgs_sent: int = 0
    msgs_recv: int = 0
    bytes_sent: int = 0
    bytes_recv: int = 0
    seconds: float = 0.0

    def add(self, other: "Traffic") -> "Traffic":
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        return self

    def counts(self) -> tuple[int, int, int, int]:
        """(words_sent, words_recv, msgs_sent, msgs_recv): what a model must equal."""
        return self.words_sent, self.words_recv, self.msgs_sent, self.msgs_recv

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class Ledger:
    """Counters by phase and the stack of open phases, shared by a wrapper and its sub-communicators."""

    by_phase: dict = field(default_factory=dict)
    stack: list = field(default_factory=list)
    on_phase: object = None  # callable(name) told when a phase opens (the launcher's status file)
    sleep_after_send_s: float = 0.0  # sleep-based stall: seconds slept after every message sent (0: none)

    def current(self) -> Traffic:
        name = self.stack[-1] if self.stack else OTHER
        return self.by_phase.setdefault(name, Traffic())


def binomial_children(vrank: int, size: int) -> list[int]:
    """Children of ``vrank`` (rank relative to the root) in the binomial tree over ``size`` ranks."""
    mask = 1
    while mask < size and not vrank & mask:
        mask <<= 1
    kids = []
    mask >>= 1
    while mask > 0:
        if vrank + mask < size:
            kids.append(vrank + mask)
        mask >>= 1
    return kids


def binomial_parent(vrank: int) -> int | None:
    """The parent of ``vrank`` in the binomial tree (None for the root): vrank with its lowest set bit cleared."""
    return None if vrank == 0 else vrank & (vrank - 1)


def collective_cost(op: str, size: int, words, rank: int = 0, root: int = 0) -> tuple[int, int, int, int]:
    """(words_sent, words_recv, msgs_sent, msgs_recv) of ``rank`` in one collective over ``size`` ranks.

    ``words``: allgather: the words of each rank's block (an int, or a list by rank); reduce_scatter: the
    words of each rank's result block (int or list); allreduce, bcast, reduce: the words of the whole
    buffer.  The algorithms are those in the module docstring.
    """
    q = size
    if op in ("allgather", "reduce_scatter"):
        blocks = [words] * q if isinstance(words, (int, np.integer)) else list(words)
        if q == 1:
            return 0, 0, 0, 0
        total = sum(blocks)
        if op == "allgather":
            return total - blocks[(rank + 1) % q], total - blocks[rank], q - 1, q - 1
        return total - blocks[rank], total - blocks[(rank - 1) % q], q - 1, q - 1
    if op == "allreduce":
        blocks = [len(b) for b in np.array_split(np.empty(int(words)), q)]
        a = collective_cost("reduce_scatter", q, blocks, rank)
        b = collective_cost("allgather", q, blocks, rank)
        return tuple(x + y for x, y in zip(a, b))
    if op in ("bcast", "reduce"):
        v = (rank - root) % q
        kids = len(binomial_children(v, q))
        up = 0 if v == 0 else 1
        if op == "bcast":
            return kids * words, up * words, kids, up
        return up * words, kids * words, up, kids
    raise ValueError(f"unknown collective {op!r}")


class Ranks:
    """An mpi4py communicator whose every data movement is counted by phase (see the module docstring)."""

    def __init__(self, comm=None, ledger: Ledger | None = None):
        if comm is None:
            from mpi4py import MPI

            comm = MPI.COMM_WORLD
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.ledger = ledger or Ledger()
        self._splits: dict = {}

    # --- phases and counters ---------------------------------------------------------------------

    @contextmanager
    def phase(self, name: str):
        """Count everything inside into phase ``name`` (and time it)."""
        led = self.ledger
        led.stack.append(name)
        if led.on_phase:
            led.on_phase(name)
        t0 = time.perf_counter()
        try:
            yield self
        finally:
            led.by_phase.setdefault(name, Traffic()).seconds += time.perf_counter() - t0
            led.stack.pop()

    def traffic(self) -> dict[str, Traffic]:
        """This rank's counters by phase (a copy)."""
        return {k: Traffic().add(v) for k, v in self.ledger.by_phase.items()}

    def total(self) -> Traffic:
        out = Traffic()
        for v in self.ledger.by_phase.values():
            out.add(v)
        return out

    def reset(self) -> None:
        self.ledger.by_phase.clear()

    def gather_traffic(self, root: int = 0) -> list[dict] | None:
        """Every rank's ``{phase: Traffic.to_dict()}`` at ``root`` (not counted; None elsewhere)."""
        mine = {k: v.to_dict() for k, v in self.ledger.by_phase.items()}
        return self.comm.gather(mine, root=root)

    def _count(self, sent=None, recv=None) -> None:
        t = self.ledger.current()
        if sent is not None:
            t.words_sent += sent.size
            t.bytes_sent += sent.nbytes
            t.msgs_sent += 1
            if self.ledger.sleep_after_send_s > 0:
                time.sleep(self.ledger.sleep_after_send_s)
        if recv is not None:
            t.words_recv += recv.size
            t.bytes_recv += recv.nbytes
            t.msgs_recv += 1

    # --- point to point --------------------------------------------------------------------------

    def send(self, buf: np.ndarray, dest: int, tag: int = 0) -> None:
        buf = np.ascontiguousarray(buf)
        self.comm.Send(buf, dest=dest, tag=tag)
        self._count(sent=buf)

    def recv(self, buf: np.ndarray, source: int, tag: int = 0) -> np.ndarray:
        """Receive into ``buf`` (C-contiguous, sized by the caller) and return it."""
        self.comm.Recv(buf, source=source, tag=tag)
        self._count(recv=buf)
        return buf

    def sendrecv(self, sendbuf: np.ndarray, dest: int, recvbuf: np.ndarray, source: int, tag: int = 0) -> np.ndarray:
        sendbuf = np.ascontiguousarray(sendbuf)
        self.comm.Sendrecv(sendbuf, dest=dest, sendtag=tag, recvbuf=recvbuf, source=source, recvtag=tag)
        self._count(sent=sendbuf, recv=recvbuf)
        return recvbuf

    def shift(self, buf: np.ndarray, offset: int = 1, tag: int = 7) -> np.ndarray:
        """Send ``buf`` to rank + offset, return what rank - offset sent (same shape and dtype)."""
        out = np.empty_like(buf)
        return self.sendrecv(buf, (self.rank + offset) % self.size, out, (self.rank - offset) % self.size, tag)

    # --- collectives over counted point to point --------------------------------------------------

    def allgather(self, block: np.ndarray, counts: list[int] | None = None) -> np.ndarray:
        """Ring allgather along axis 0: the blocks of all ranks stacked in rank order.

        ``counts``: rows of each rank's block when they differ (default: all like ``block``)."""
        q, me = self.size, self.rank
        block = np.ascontiguousarray(block)
        rows = list(counts) if counts is not None else [block.shape[0]] * q
        starts = np.concatenate([[0], np.cumsum(rows)])
        out = np.empty((int(starts[-1]),) + block.shape[1:], dtype=block.dtype)
        out[starts[me]:starts[me + 1]] = block
        right, left = (me + 1) % q, (me - 1) % q
        for s in range(q - 1):
            sb, rb = (me - s) % q, (me - s - 1) % q
            recv = np.empty((rows[rb],) + block.shape[1:], dtype=block.dtype)
            self.sendrecv(out[starts[sb]:starts[sb + 1]], right, recv, left, tag=11)
            out[starts[rb]:starts[rb + 1]] = recv
        return out

    def reduce_scatter(self, array: np.ndarray, counts: list[int] | None = None) -> np.ndarray:
        """Ring reduce-scatter (sum) along axis 0: this rank's block of the sum of every rank's ``array``.

        ``counts``: rows of each rank's block (default: equal, the rows must divide by the ranks)."""
        q, me = self.size, self.rank
        array = np.ascontiguousarray(array)
        if counts is None:
            if array.shape[0] % q:
                raise ValueError(f"reduce_scatter: {array.shape[0]} rows do not divide among {q} ranks")
            counts = [array.shape[0] // q] * q
        starts = np.concatenate([[0], np.cumsum(counts)])
        blk = lambda b: array[starts[b]:starts[b + 1]]
        right, left = (me + 1) % q, (me - 1) % q
        partial = blk((me - 1) % q).copy() if q > 1 else blk(me).copy()
        for s in range(q - 1):
            rb = (me - s - 2) % q
            recv = np.empty((counts[rb],) + array.shape[1:], dtype=array.dtype)
            self.sendrecv(partial, right, recv, left, tag=12)
            partial = recv + blk(rb)
        return partial

    def allreduce(self, array: np.ndarray) -> np.ndarray:
        """Ring allreduce (sum): reduce-scatter of near-equal blocks of the flattened array, then allgather."""
        flat = np.ascontiguousarray(array).reshape(-1)
        counts = [len(b) for b in np.array_split(flat, self.size)]
        mine = self.reduce_scatter(flat, counts)
        return self.allgather(mine, counts).reshape(np.shape(array))

    def bcast(self, buf: np.ndarray, root: int = 0) -> np.ndarray:
        """Binomial-tree broadcast of ``buf`` (shape and dtype known everywhere) from ``root``."""
        q = self.size
        v = (self.rank - root) % q
        buf = np.ascontiguousarray(buf)
        parent = binomial_parent(v)
        if parent is not None:
            buf = self.recv(np.empty_like(buf), (parent + root) % q, tag=13)
        for kid in binomial_children(v, q):
            self.send(buf, (kid + root) % q, tag=13)
        return buf

    def reduce(self, buf: np.ndarray, root: int = 0) -> np.ndarray | None:
        """Binomial-tree reduction (sum) to ``root``; the sum at root, None elsewhere."""
        q = self.size
        v = (self.rank - root) % q
        acc = np.array(buf, copy=True)
        for kid in reversed(binomial_children(v, q)):
            acc += self.recv(np.empty_like(acc), (kid + root) % q, tag=14)
        parent = binomial_parent(v)
        if parent is not None:
            self.send(acc, (parent + root) % q, tag=14)
            return None
        return acc

    def barrier(self) -> None:
        self.comm.Barrier()

    def split(self, color: int, key: int | None = None, name: str | None = None) -> "Ranks":
        """A sub-communicator (``MPI_Comm_split``, collective, not counted) counting into the same ledger.

        ``name``: the same sub-communicator again on later calls with that name (no new MPI
        communicator: an algorithm called in a loop does not run out of them).  The name must say
        everything that decides the partition (``"15d fiber c=2"``): every rank looks it up at once."""
        if name is not None and name in self._splits:
            return self._splits[name]
        sub = Ranks(self.comm.Split(color, self.rank if key is None else key), self.ledger)
        if name is not None:
            self._splits[name] = sub
        return sub

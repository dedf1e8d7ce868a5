"""A two-host network path made on this machine, with a real added one-way latency, for MPI benchmarks.

Two network namespaces, each holding one MPI rank (MPICH over TCP through libfabric's ``tcp`` provider),
joined by one of two links:

* ``netem``: a veth pair; an added delay is ``tc qdisc add dev LINK root netem delay Xus`` on both ends
  (needs ``tc`` and the kernel's ``sch_netem``); with no added delay the plain veth pair;
* ``delayline``: a TUN device in each namespace and a forwarding process (``python3 bench/netpath.py
  delayline ...``) that copies every IP packet from one device to the other after holding it the added
  delay (a user-space netem for kernels built without ``sch_netem``: the packet really waits, the
  sender does not).  The forwarder wakes once per packet, so its own time is part of the path's latency,
  and with ranks that poll for messages it competes for the cores.

``latency_path(kind, delay_s)`` builds the path under names unique to this process (``czPID...``), yields a
:class:`NetPath` whose ``launch_kw`` make ``targets.mpi.launch`` run rank 0 in the first namespace and rank
1 in the second (``mpiexec`` in the first namespace, ``-launcher ssh`` with ``-launcher-exec`` a script that
enters the host's namespace), and removes everything on the way out, failure or not.  When something is
missing (not root, no ``ip``, no ``tc``, no ``sch_netem``, no ``/dev/net/tun``) it raises
:class:`PathUnavailable`, whose ``missing`` names it, so a benchmark can skip that row.  Every command has
a deadline (``CMD_TIMEOUT_S``).
"""

from __future__ import annotations

import ctypes
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

CMD_TIMEOUT_S = 15.0
KINDS = ("netem", "delayline")
LINK = "czlink"  # the link's name inside both namespaces (so hydra and libfabric pick it by name)
MTU = 65000  # large frames: a 64 KiB message is one packet through the delay line


class PathUnavailable(RuntimeError):
    """The path cannot be built here; ``missing`` names what is missing (a tool, a permission, a kernel part)."""

    def __init__(self, missing: str):
        super().__init__(missing)
        self.missing = missing


@dataclass
class NetPath:
    """A built path: its kind, added one-way delay (s), the namespaces and the hosts' addresses, and the
    keyword arguments of ``targets.mpi.launch`` that place rank 0 and rank 1 on its two ends."""

    kind: str
    delay_s: float
    namespaces: tuple[str, str]
    addresses: tuple[str, str]
    launch_kw: dict = field(default_factory=dict)


def run_cmd(args: list[str], timeout_s: float = CMD_TIMEOUT_S, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command with a deadline; on failure (``check``) raise PathUnavailable with its first error line."""
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        raise PathUnavailable(f"{args[0]} not found (Debian: apt-get install iproute2)") from None
    except subprocess.TimeoutExpired:
        raise PathUnavailable(f"{' '.join(args)} did not finish in {timeout_s:g} s") from None
    if check and proc.returncode != 0:
        line = (proc.stderr or proc.stdout).strip().splitlines()
        raise PathUnavailable(f"{' '.join(args)}: {line[0] if line else f'exit {proc.returncode}'}")
    return proc


def missing_tools(kind: str, delay_s: float, which=None, euid=None) -> str | None:
    """What this row needs and the machine lacks, without touching the network (None when nothing is):
    root (namespaces need CAP_NET_ADMIN), ``ip``, ``tc`` (netem with a delay), ``/dev/net/tun`` (delayline)."""
    which = which or shutil.which
    if kind not in KINDS:
        return f"unknown path kind {kind!r} (one of {', '.join(KINDS)})"
    if (os.geteuid() if euid is None else euid) != 0:
        return "permission to make network namespaces (run as root: CAP_NET_ADMIN)"
    if which("ip") is None:
        return "ip (Debian: apt-get install iproute2)"
    if kind == "netem" and delay_s > 0 and which("tc") is None:
        return "tc (Debian: apt-get install iproute2)"
    if kind == "delayline" and not Path("/dev/net/tun").exists():
        return "/dev/net/tun (the kernel's TUN driver)"
    return None


def unique_tag() -> str:
    """A short name prefix no other process uses: 'cz', this pid, 'x', a random hex digit pair."""
    return f"cz{os.getpid()}x{os.urandom(1).hex()}"


def remove_stale(alive=None) -> list[str]:
    """Delete the namespaces an earlier run left behind (``cz<pid>x<hex>a|b`` whose process is gone, e.g.
    killed with SIGKILL before it could clean up); the names deleted."""
    import re

    alive = alive or (lambda pid: Path(f"/proc/{pid}").exists())
    out = run_cmd(["ip", "netns", "list"], check=False).stdout
    gone = []
    for line in out.splitlines():
        m = re.match(r"^(cz(\d+)x[0-9a-f]{2}[ab])\b", line.strip())
        if m and not alive(int(m.group(2))):
            run_cmd(["ip", "netns", "del", m.group(1)], check=False)
            gone.append(m.group(1))
    return gone


@contextmanager
def _signals_end_the_body():
    """SIGTERM and SIGHUP raise SystemExit inside the body (so its clean-up runs), where they would
    otherwise end the process at once; the handlers before are put back after."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    for s, h in old.items():
        if h in (signal.SIG_DFL, None):
            signal.signal(s, stop)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


def _subnet(tag: str) -> tuple[str, str]:
    """Two addresses of a /30 in 10.231.0.0/16 chosen from ``tag`` (distinct tags rarely collide; a
    collision fails ``ip addr add`` and the row is skipped, never misrouted)."""
    h = zlib.crc32(tag.encode()) % 16384
    base = h * 4
    return f"10.231.{base // 256}.{base % 256 + 1}", f"10.231.{base // 256}.{base % 256 + 2}"


def _launcher_script(folder: Path, hosts: dict[str, str]) -> Path:
    """A shell script hydra calls as its ssh (``SCRIPT [opts] HOST CMD...``): runs CMD in HOST's namespace."""
    cases = "\n".join(f"  {addr}) ns={ns};;" for addr, ns in hosts.items())
    ip = shutil.which("ip") or "ip"
    text = ("#!/bin/sh\n# hydra's launcher: run the proxy in the namespace of its host\n"
            'while [ "${1#-}" != "$1" ]; do shift; done\n'
            f'host=$1; shift\ncase $host in\n{cases}\n  *) echo "no namespace for host $host" >&2; exit 1;;\nesac\n'
            f'exec {ip} netns exec "$ns" /bin/sh -c "$*"\n')
    path = folder / "launch-in-netns.sh"
    path.write_text(text)
    path.chmod(0o755)
    return path


def _launch_kw(ns: tuple[str, str], addrs: tuple[str, str], script: Path) -> dict:
    ip = shutil.which("ip") or "ip"
    return {"prefix": [ip, "netns", "exec", ns[0]],
            "mpiexec_args": ["-launcher", "ssh", "-launcher-exec", str(script), "-hosts", ",".join(addrs),
                             "-iface", LINK, "-ppn", "1"],
            "extra_env": {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": LINK,
                          "HYDRA_LAUNCHER": "ssh"}}


def _up(ns: str, addr: str, peer: str, delay_s: float, kind: str) -> None:
    run_cmd(["ip", "-n", ns, "link", "set", "lo", "up"])
    run_cmd(["ip", "-n", ns, "link", "set", LINK, "mtu", str(MTU)])
    run_cmd(["ip", "-n", ns, "addr", "add", addr, "peer", peer, "dev", LINK])
    run_cmd(["ip", "-n", ns, "link", "set", LINK, "up"])
    if kind == "netem" and delay_s > 0:
        proc = run_cmd(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", LINK, "root", "netem", "delay",
                        f"{delay_s * 1e6:g}us"], check=False)
        if proc.returncode != 0:
            err = (proc.stderr or proc.stdout).strip()
            if "unknown" in err.lower():
                raise PathUnavailable(f"the kernel's sch_netem (tc: {err.splitlines()[0]})")
            raise PathUnavailable(f"tc qdisc add ... netem: {err.splitlines()[0] if err else proc.returncode}")


@contextmanager
def latency_path(kind: str, delay_s: float, tag: str | None = None):
    """Build the path (see the module docstring), yield its :class:`NetPath`, remove it on the way out."""
    missing = missing_tools(kind, delay_s)
    if missing:
        raise PathUnavailable(missing)
    if not (delay_s >= 0 and delay_s < 1):
        raise PathUnavailable(f"added delay must be in [0, 1) s, got {delay_s!r}")
    remove_stale()
    tag = tag or unique_tag()
    ns = (f"{tag}a", f"{tag}b")
    addrs = _subnet(tag)
    folder = Path(tempfile.mkdtemp(prefix=f"{tag}-"))
    with _signals_end_the_body():
        yield from _built(kind, delay_s, tag, ns, addrs, folder)


def _built(kind: str, delay_s: float, tag: str, ns: tuple[str, str], addrs: tuple[str, str], folder: Path):
    """The body of ``latency_path``: build, yield the NetPath, and always take it down."""
    forwarder = None
    made: list[str] = []
    try:
        for n in ns:
            run_cmd(["ip", "netns", "add", n])
            made.append(n)
        if kind == "netem":
            run_cmd(["ip", "link", "add", f"{tag}x", "type", "veth", "peer", "name", f"{tag}y"])
            for dev, n in ((f"{tag}x", ns[0]), (f"{tag}y", ns[1])):
                run_cmd(["ip", "link", "set", dev, "netns", n])
                run_cmd(["ip", "-n", n, "link", "set", dev, "name", LINK])
        else:
            forwarder = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "delayline", ns[0], ns[1],
                                          repr(float(delay_s))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True)
            ready, _, _ = select.select([forwarder.stdout], [], [], CMD_TIMEOUT_S)
            line = forwarder.stdout.readline().strip() if ready else ""
            if line != "ready":
                forwarder.kill()
                err = forwarder.communicate(timeout=CMD_TIMEOUT_S)[1].strip().splitlines()
                raise PathUnavailable(f"the delay line did not start: {(err or [line or 'no answer'])[-1]}")
        _up(ns[0], addrs[0], addrs[1], delay_s, kind)
        _up(ns[1], addrs[1], addrs[0], delay_s, kind)
        script = _launcher_script(folder, {addrs[0]: ns[0], addrs[1]: ns[1]})
        yield NetPath(kind, float(delay_s), ns, addrs, _launch_kw(ns, addrs, script))
    finally:
        if forwarder is not None and forwarder.poll() is None:
            try:
                forwarder.stdin.close()  # EOF: the forwarder's signal to stop
                forwarder.wait(timeout=CMD_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired):
                forwarder.kill()
                forwarder.wait(timeout=CMD_TIMEOUT_S)
        for n in made:  # deleting a namespace deletes the links in it (both veth ends go with the first)
            run_cmd(["ip", "netns", "del", n], check=False)
        shutil.rmtree(folder, ignore_errors=True)


# ------------------------------------------------------------------------------------- the delay line

TUNSETIFF, IFF_TUN, IFF_NO_PI, CLONE_NEWNET, PR_SET_TIMERSLACK = 0x400454CA, 0x0001, 0x1000, 0x40000000, 29


def _tun_in(netns: str, libc) -> int:
    """A TUN device named LINK in namespace ``netns`` (entered and left with setns): its non-blocking fd."""
    import fcntl

    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {netns}")
        fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH22x", LINK.encode(), IFF_TUN | IFF_NO_PI))
    finally:
        libc.setns(home, CLONE_NEWNET)
        os.close(home)
        os.close(target)
    return fd


def delayline(ns_a: str, ns_b: str, delay_s: float, stop_fd: int = 0) -> int:
    """Copy every packet between the TUN devices of ``ns_a`` and ``ns_b`` after holding it ``delay_s``
    (each direction a FIFO: a constant delay keeps the order); stops when ``stop_fd`` reaches EOF."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)  # wake on time: the default timer slack is 50 us
    try:  # run as soon as a packet or a due time comes, ahead of ranks that poll for messages
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(50))
    except (OSError, AttributeError):
        pass
    fa, fb = _tun_in(ns_a, libc), _tun_in(ns_b, libc)
    print("ready", flush=True)
    other = {fa: fb, fb: fa}

    def put(dst: int, pkt: bytes) -> None:
        try:
            os.write(dst, pkt)
        except OSError:  # the far device is not up yet (EIO) or its queue is full: the packet is lost
            pass

    queues: dict[int, deque] = {fa: deque(), fb: deque()}  # packets waiting to be written to that fd
    while True:
        now = time.monotonic()
        for dst, q in queues.items():
            while q and q[0][0] <= now:
                put(dst, q.popleft()[1])
        heads = [q[0][0] for q in queues.values() if q]
        timeout = max(0.0, min(heads) - now) if heads else None
        ready, _, _ = select.select([fa, fb, stop_fd], [], [], timeout)
        if stop_fd in ready:
            return 0
        due = time.monotonic() + delay_s
        for src in ready:
            while True:
                try:
                    pkt = os.read(src, MTU + 64)
                except BlockingIOError:
                    break
                if delay_s <= 0:
                    put(other[src], pkt)
                else:
                    queues[other[src]].append((due, pkt))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "delayline":
        sys.exit(delayline(sys.argv[2], sys.argv[3], float(sys.argv[4])))
    print("usage: netpath.py delayline NS_A NS_B DELAY_S (started by latency_path)", file=sys.stderr)
    sys.exit(2)

"""Rules for ranks that could not meet or talk: a port in use, a rendezvous that timed
out, a refused connection, and NCCL errors and timeouts.

The trainer words its own rendezvous failures (``trainer/distributed.py::rendezvous_hint``):
``ddp-train: rendezvous failed: rank 0 of 2 on n1 waited on n1:20012 (launcher srun,
timeout 60s): DistStoreError: ...`` followed by a list of likely causes. That list names
ports "already in use" and ``NCCL_SOCKET_IFNAME`` whatever happened, so the patterns here
match the error itself, never the hint.
"""

from __future__ import annotations

import re

from ddp_tui.diagnosis.logscan import Hit, Scan, clue
from ddp_tui.diagnosis.model import Diagnosis
from ddp_tui.diagnosis.rules_base import make, rank_words

_IFNAME_HINT = (
    "Set NCCL_DEBUG=INFO (nccl_env in the spec) to see which interface and transport NCCL "
    "picks, and NCCL_SOCKET_IFNAME to the interface that connects the nodes (e.g. ib0 or "
    "eth0; not lo or a docker bridge)."
)

# "... EADDRINUSE, message: address already in use" (c10d), "[Errno 98] Address already in use"
IN_USE = clue(r"EADDRINUSE|[Aa]ddress already in use", "EADDRINUSE", "ddress already in use")
_PORT = re.compile(
    r"port: (\d+)|(?:\]|\b[A-Za-z][\w.-]*|\b\d+\.\d+\.\d+\.\d+):(\d{2,5})\b"
)  # "port: 29500", "[::]:29500", "n1:29500", "10.0.0.1:29500"; not a time of day
# "[W socket.cpp:401]", "api.py:1002]": source locations, whose numbers are not ports.
_SOURCE_LOCATION = re.compile(r"[\w/.-]+\.(?:cpp|cc|h|py):\d+")


def port_of(text: str) -> str:
    """The port a line names ("port: 29500", "n1:29500"), or ""."""
    port = _PORT.search(_SOURCE_LOCATION.sub("", text))
    return (port.group(1) or port.group(2)) if port else ""


_TRAINER_RDZV = clue(
    r"rendezvous failed: rank (?P<rank>\d+) of (?P<world>\d+) on (?P<host>\S+) waited on "
    r"(?P<addr>\S+) \(launcher [^,]*, timeout [^)]*\): (?P<error>.*)$",
    "rendezvous failed: ",
)
_RDZV_TIMEOUT = clue(
    r"^[\w.]*RendezvousTimeoutError\b"
    r"|RendezvousConnectionError"
    r"|The client socket has timed out after \d+m?s while trying to connect to "
    r"\(?(?P<host>[^,\s()]+)(?:, |:)(?P<port>\d+)\)?"
    r"|failed to connect to any network address of \((?P<host2>[^,]+), (?P<port2>\d+)\)"
    r"|Timed out after \d+ seconds waiting for clients\."
    r"|TCPStore[^\n]*timed out|Socket Timeout|connect\(\) timed out",
    "RendezvousTimeoutError",
    "RendezvousConnectionError",
    "The client socket has timed out",
    "failed to connect to any network address",
    "waiting for clients",
    "TCPStore",
    "Socket Timeout",
    "connect() timed out",
)
# c10d's TCPStore server: "Timed out after 9 seconds waiting for clients. 1/2 clients joined."
_JOINED = re.compile(r"(\d+)/(\d+) clients joined")
_TIMED_OUT = re.compile(r"[Tt]imed out|[Tt]imeout")
_PEER_CLOSED = clue(r"Connection (?:closed|reset) by peer", " by peer")
_INIT_FRAMES = re.compile(r"init_process_group|new_group|rendezvous")
_REFUSED = clue(r"Connection refused|ECONNREFUSED", "Connection refused", "ECONNREFUSED")
# [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE,
#   NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.
_NCCL_TIMEOUT = clue(
    r"Watchdog caught collective operation timeout"
    r"|ProcessGroupNCCL[^\n]*ran for \d+ milliseconds before timing out",
    "Watchdog caught collective operation timeout",
    "before timing out",
)
_OP = re.compile(r"OpType=(\w+)")
_TIMEOUT_MS = re.compile(r"Timeout\(ms\)=(\d+)")
# torch.distributed.DistBackendError: NCCL error in: .../ProcessGroupNCCL.cpp:1333, unhandled
#   system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.6
# ncclSystemError: System call (e.g. socket, malloc) or external library call failed ...
_NCCL_ERROR = clue(
    r"NCCL error|nccl(?:Internal|System|UnhandledCuda|InvalidUsage|InvalidArgument|Remote)Error",
    "NCCL error",
    "nccl",
)
_NCCL_KIND = re.compile(r"NCCL error(?: in: [^,\n]*,|:) ([^(\n]+?)\s*\(run with|nccl(\w+?)Error")
_WORDS = re.compile(r"(?<=[a-z])(?=[A-Z])")
_LAST_ERROR = "Last error:"


def _address(scan: Scan, hit: Hit | None) -> str:
    """host:port of the rendezvous: from the error line, else where the job said it met."""
    if hit is not None:
        groups = hit.match.groupdict()
        if groups.get("addr"):
            return str(groups["addr"])
        for host, port in (("host", "port"), ("host2", "port2")):
            if groups.get(host) and groups.get(port):
                return f"{groups[host]}:{groups[port]}"
    return scan.rendezvous()


def _missing_hosts(scan: Scan) -> str:
    """Which nodes' ranks never reported, where ``run.json``/``ranks.jsonl`` tell."""
    facts = scan.facts
    seen = sorted(set(facts.hosts))
    if seen and len(seen) < facts.nodes:
        return (
            f" Only {', '.join(seen)} reported ({len(seen)} of {facts.nodes} nodes): the "
            "other nodes' ranks never joined."
        )
    return ""


def address_in_use(scan: Scan) -> Diagnosis | None:
    hit = scan.find(IN_USE)
    if hit is None:
        return None
    number = port_of(hit.line.text)
    trainer = _TRAINER_RDZV.regex.search(hit.line.text)
    address = trainer.group("addr") if trainer else scan.rendezvous()
    what = f"port {number}" if number else "the rendezvous port"
    at = f" (rendezvous {address})" if address else ""
    return make(
        "address-in-use",
        f"{what} in use" if number else "address in use",
        f"The master rank could not listen on {what}{at}: another process on that node "
        "already holds it (another job, or a stale process of an earlier run).",
        "Retry: a new job gets a new port (ddp-tui derives it from the job id). If it "
        "happens again, find and stop the holder on the first node (ss -ltnp), or ask the "
        "admins: a stale process there holds the port.",
        [hit],
    )


def rendezvous(scan: Scan) -> Diagnosis | None:
    """The ranks never all met: a timeout, or a peer that dropped during set-up."""
    hit = scan.find(_TRAINER_RDZV)
    if hit is not None and _REFUSED.regex.search(hit.group("error")):
        return None  # the connection-refused rule says it better
    if hit is None:
        hit = scan.find(_RDZV_TIMEOUT)
    if hit is None:
        for peer in scan.find_all(_PEER_CLOSED, limit=10):
            if any(_INIT_FRAMES.search(x.text) for x in scan.before(peer, 40)):
                hit = peer
                break
    if hit is None:
        return None
    address = _address(scan, hit)
    groups = hit.match.groupdict()
    joined = ""
    count = _JOINED.search(hit.line.text)
    if count is not None:
        joined = f" Only {count.group(1)} of {count.group(2)} ranks joined."
    if groups.get("rank") and groups.get("world"):
        joined += f" Rank {groups['rank']} of {groups['world']} on {groups['host']} gave up."
    refused = " Connections to it were refused." if scan.find(_REFUSED) else ""
    at = f" at {address}" if address else ""
    # The trainer's line covers every set-up failure; most are timeouts, a few are not.
    error = groups.get("error")
    how = "failed" if isinstance(error, str) and not _TIMED_OUT.search(error) else "timed out"
    return make(
        "rendezvous-timeout",
        f"rendezvous {how}",
        f"The ranks' rendezvous{at} {how}: not every rank arrived."
        f"{joined}{refused}{_missing_hosts(scan)}",
        "Check that every node's task started (srun errors in .err, the other nodes' "
        "logs), that the first node's name resolves and its port is reachable from every "
        "node (firewall), and that GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME pick the interface "
        "that connects the nodes. `ddp-tui preflight` tests the set-up in a short job.",
        [hit],
    )


def connection_refused(scan: Scan) -> Diagnosis | None:
    hit = scan.find(_REFUSED)
    if hit is None:
        return None
    address = scan.rendezvous()
    at = f" ({address})" if address else ""
    return make(
        "connection-refused",
        "connection refused",
        f"A rank's connection to the master{at} was refused: nothing listened on the port "
        "yet (the master rank had not started, or had already exited).",
        "Look for the master rank's own error first (it may have failed before listening). "
        "Check that the first node of the job is reachable from the others on that port "
        "(no firewall rejects it).",
        [hit],
    )


def nccl_timeout(scan: Scan) -> Diagnosis | None:
    hit = scan.find(_NCCL_TIMEOUT)
    if hit is None:
        return None
    op = _OP.search(hit.line.text)
    ms = _TIMEOUT_MS.search(hit.line.text)
    what = f"An NCCL {op.group(1)}" if op else "An NCCL collective"
    within = f" within {int(ms.group(1)) // 1000} s" if ms else " in time"
    who = rank_words(hit)
    return make(
        "nccl-timeout",
        f"NCCL timeout ({op.group(1)})" if op else "NCCL timeout",
        f"{what} did not complete{within}{f' on {who}' if who else ''}: a rank stopped "
        "taking part (it hung, crashed or fell far behind) or the network between the nodes "
        "stalled.",
        "Look for a rank that failed or stalled first (its own log lines). "
        + _IFNAME_HINT
        + " Raise --timeout-sec only if one rank legitimately works alone for long.",
        [hit],
    )


def nccl_error(scan: Scan) -> Diagnosis | None:
    hit = scan.find(_NCCL_ERROR)
    if hit is None:
        return None
    kind = _NCCL_KIND.search(hit.line.text)
    label = ""
    if kind is not None and kind.group(1):
        label = kind.group(1).strip()
    elif kind is not None and kind.group(2):  # ncclSystemError -> "system error"
        label = _WORDS.sub(" ", kind.group(2)).lower() + " error"
    detail = None
    follow = scan.after(hit, 6)
    for i, line in enumerate(follow):
        if line.text.strip() == _LAST_ERROR and i + 1 < len(follow):
            detail = follow[i + 1]
            break
        if line.text.strip().startswith(_LAST_ERROR) and len(line.text.strip()) > 12:
            detail = line
            break
    last = f" Last error: {detail.text.strip()}" if detail is not None else ""
    return make(
        "nccl-error",
        f"NCCL: {label}" if label else "NCCL error",
        f"NCCL failed{f' ({label})' if label else ''}.{last}",
        _IFNAME_HINT + " A system error while connecting usually means the wrong interface or a "
        "firewall; a remote error means another rank died first: look for its own error.",
        [hit, detail],
    )

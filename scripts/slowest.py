"""The slowest tests of a durations file (``make durations`` writes tests/durations.json), and
what share of the suite's time they take.

    python scripts/slowest.py [tests/durations.json] [--top 25]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", default="tests/durations.json", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    seconds: dict[str, float] = json.loads(args.file.read_text())
    total = sum(seconds.values())
    slowest = sorted(seconds.items(), key=lambda kv: -kv[1])[: args.top]
    print(f"{len(seconds)} tests, {total:.0f} s in all (the sum over workers, not wall time)")
    print(f"the {len(slowest)} slowest take {sum(s for _, s in slowest) / total:.1%} of it:")
    for nodeid, sec in slowest:
        print(f"{sec:8.1f} s  {sec / total:5.1%}  {nodeid}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

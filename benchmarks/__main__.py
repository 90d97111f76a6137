"""`python -m benchmarks NAME [args]`: one command per figure (gas, overhead, verify, p2p, vs-ddp, trust, hetero, scale, gpu, bls, first-run, input-errors, committees, network-scale, aggregation-loss, pipeline)."""

from __future__ import annotations

import importlib
import sys


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m benchmarks NAME [--quick] [--json PATH]\n"
              "names: gas, overhead, verify, p2p, vs-ddp, trust, hetero, scale, gpu, bls, first-run, input-errors, committees, network-scale, aggregation-loss, pipeline")
        return 0 if argv else 2
    name = argv[0].replace("-", "_")
    try:
        module = importlib.import_module(f"benchmarks.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"benchmarks.{name}":
            print(f"unknown benchmark {argv[0]!r}", file=sys.stderr)
            return 2
        raise
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What event versions cost the mapper: eventsourcing's own `Mapper` beside `VersionedMapper`
(domain/events.py), which every event of a send and of a replay goes through.

    .venv/bin/python -m scripts.bench.mapper [N]   (default: 20000 webhook deliveries)

Each delivery is a `WebhookDelivery.Created` (version 2) and an `Attempted` (version 1), sealed
with the store's cipher.  Prints the best of 7 rounds of writing and of reading every event,
per event, for each mapper.  No database.  Figures in docs/performance.md, "Replay".
"""
from __future__ import annotations

import argparse
import base64
import time
from typing import Any

from eventsourcing.persistence import Mapper

from sandesh.domain.events import VersionedMapper
from sandesh.domain.webhook import new_delivery
from eventsourcing.cryptography import AESCipher

from sandesh.projections.storage.store import OrjsonTranscoder

ROUNDS = 7


class _Env(dict):
    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key, default)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scripts.bench.mapper",
                                description="Write and read events with the library's mapper and ours.")
    p.add_argument("deliveries", type=int, nargs="?", default=20_000, help="webhook deliveries (two events each)")
    args = p.parse_args(argv)
    cipher = AESCipher(_Env({"CIPHER_KEY": base64.b64encode(b"k" * 32).decode()}))
    events = []
    for n in range(args.deliveries):
        delivery = new_delivery("cl_1", "message.status", f"msg_{n}", "sent", {"id": n}, at=5.0)
        delivery.attempted(200, None, 0.1, 6.0)
        events += delivery.collect_events()
    mappers = {"eventsourcing Mapper": Mapper(OrjsonTranscoder(), cipher=cipher),
               "VersionedMapper": VersionedMapper(OrjsonTranscoder(), cipher=cipher)}
    stored = [mappers["eventsourcing Mapper"].to_stored_event(event) for event in events]
    best = {name: [float("inf"), float("inf")] for name in mappers}
    for _ in range(ROUNDS):
        for name, mapper in mappers.items():
            began = time.perf_counter()
            for event in events:
                mapper.to_stored_event(event)
            wrote = time.perf_counter() - began
            began = time.perf_counter()
            for item in stored:
                mapper.to_domain_event(item)
            read = time.perf_counter() - began
            best[name] = [min(best[name][0], wrote), min(best[name][1], read)]
    for name, (wrote, read) in best.items():
        print(f"{name}: write {wrote / len(events) * 1e6:.2f} µs an event, read {read / len(events) * 1e6:.2f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Logs written by earlier releases, kept as test data (docs/design.md, "Event versions"): their
maker.  tests/integration/test_corpus.py restores them into this release.

    .venv/bin/python -m scripts.devtools.corpus make --commit 3b04555 --release 0.1.0

installs the release of that commit on its own (`release_install`: a git worktree and a venv
under var/releases/<commit>/), creates a fresh database, runs the release's own `sandesh db
migrate`, and runs one scripted workload (scripts/devtools/corpus_workload.py) against the release's own
processes: its `sandesh serve`, workers, emulator and commands.  It then stops them, records what
the release answered, and writes tests/corpus/<release>/: `log.dump` (pg_dump of the whole
database), `answers.json` and `manifest.json` (keys, secrets, ids, the service clock at the end).
Nothing of this checkout's code writes a single event of the log.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from sandesh.projections.storage import db

from .corpus_release import (RELEASES, ROOT, CorpusError, Release, create_database, drop_database, full_commit,
                             pg_tool, release_env, release_event_topics, release_install, run, say)
from .corpus_workload import Receiver, Workload

__all__ = ["release_install", "make", "main"]  # release_install: tests run old releases with it

CORPUS = ROOT / "tests" / "corpus"
# The key every corpus log is encrypted under.  A test key: the logs hold nothing but made-up data.
SECRET_KEY = "corpus-secret-key-of-earlier-releases-0123456789"


def events_by_topic(database: str) -> dict[str, int]:
    with psycopg.connect(database) as conn:
        return db.events_by_topic(conn)


def make(commit: str, release_name: str, out: Path, sims: int, keep_database: bool) -> Path:
    started = time.monotonic()
    commit = full_commit(commit)
    sandesh = release_install(commit)
    name = "sandesh_corpus_" + "".join(c if c.isalnum() else "_" for c in release_name)
    target = out / release_name
    target.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f"corpus-{release_name}-", dir=RELEASES / commit))
    say(f"release {release_name} ({commit[:12]}): database {name}, processes' logs in {workdir}")
    database = create_database(name)
    receiver = Receiver(workdir)
    release = Release(sandesh, release_env(database, secret_key=SECRET_KEY, ca_file=receiver.ca_file,
                                           metrics_dir=workdir / "metrics"), workdir)
    (workdir / "metrics").mkdir()
    try:
        workload = Workload(release, receiver, workdir, sims=sims, release_name=release_name, commit=commit)
        answers, manifest = workload.run()
        manifest["events"] = events_by_topic(database)
        manifest["eventTypesNotWritten"] = [t for t in release_event_topics(sandesh) if t not in manifest["events"]]
        if manifest["eventTypesNotWritten"]:
            say(f"WARNING: the log has no event of {', '.join(manifest['eventTypesNotWritten'])}")
        manifest["madeIn"] = f"{time.monotonic() - started:.0f} s"
        say(f"pg_dump of {name} into {target / 'log.dump'}")
        run([pg_tool("pg_dump"), "--format=custom", "--compress=9", "--no-owner", "--file", str(target / "log.dump"),
             database])
        (target / "answers.json").write_text(json.dumps(answers, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
        (target / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    except BaseException:
        say(f"the release's processes' logs are kept in {workdir}")
        raise
    finally:
        release.stop_all()
        receiver.close()
        if not keep_database:
            drop_database(name)
    shutil.rmtree(workdir)
    say(f"done in {time.monotonic() - started:.0f} s: {target}")
    return target


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m scripts.devtools.corpus",
                                description="Logs written by earlier releases' own code, kept as test data "
                                            "(tests/corpus/<release>/).")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    m = sub.add_parser("make", help="install a release, run the corpus workload against its own processes and "
                                    "write its log.dump, answers.json and manifest.json")
    m.add_argument("--commit", required=True, help="the release's git commit (any spelling git rev-parse takes)")
    m.add_argument("--release", required=True, metavar="VERSION",
                   help="the release's version, e.g. 0.1.0: the corpus folder's name and the database's")
    m.add_argument("--out", type=Path, default=CORPUS, metavar="DIR",
                   help=f"where the release's folder is written (default: {CORPUS.relative_to(ROOT)})")
    m.add_argument("--sims", type=int, default=3, metavar="N",
                   help="emulated modems (default 3: one each of Nepal Telecom, Ncell and Smart Telecom)")
    m.add_argument("--keep-database", action="store_true",
                   help="leave the database sandesh_corpus_<release> on the server afterwards, to look into it")
    i = sub.add_parser("install", help="install a release on its own (git worktree and venv under var/releases/) "
                                       "and print the path of its sandesh command")
    i.add_argument("--commit", required=True, help="the release's git commit")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "install":
            print(release_install(args.commit))
        else:
            make(args.commit, args.release, args.out.resolve(), args.sims, args.keep_database)
    except CorpusError as error:
        say(f"FAILED: {error}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`sandesh up`: everything for a first look (docs/operations.md, "A first look").

With no DATABASE_URL it starts an embedded PostgreSQL under ./var (the pgserver wheel ships
the server; as root it runs it as a `pgserver` system user).  It keeps a server key in
./var/secret_key, writes ./var/sandesh.env so other `sandesh` commands run in this folder
find the same database and key, migrates, makes a demo workspace and client when none exist,
starts emulated modems when no real SIM is registered, and runs the API and the workers
until Ctrl-C.
"""
from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
from pathlib import Path

from sandesh.domain.settings import Settings

from .logs import configure_logging
from .output import emit

VAR = Path("var")


def embedded_database(pgdata: Path, dbname: str = "sandesh") -> str:
    """Start (or join) the embedded PostgreSQL whose data is in `pgdata`, for as long as this
    process runs; returns the URL of database `dbname` on it.  Used by `sandesh up` and, on a
    machine with no server, by the tests (tests/conftest.py)."""
    import pgserver

    pgdata = pgdata.resolve()
    pgdata.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    info = server.get_postmaster_info()
    socket_dir = info.socket_dir if getattr(info, "socket_dir", None) else pgdata
    port = getattr(info, "port", None) or 5432
    _SERVERS.append(server)  # keep the handle alive
    return f"postgresql://postgres@/{dbname}?host={socket_dir}&port={port}"


_SERVERS: list[object] = []


def write_secret(path: Path, text: str) -> None:
    """`text` in a file that only its owner ever reads: created with mode 0600, never chmod-ed after."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # a file there already keeps its mode through O_CREAT
    with os.fdopen(fd, "w") as file:
        file.write(text)


def _secret_key() -> str:
    path = VAR / "secret_key"
    if not path.exists():
        write_secret(path, secrets.token_hex(32) + "\n")
    return path.read_text().strip()


# Besides the database and the key, the settings a command run beside the service must share
# with it: the test clock (`sandesh clock advance`), webhook URLs on this machine (`sandesh client
# update --webhook-url https://localhost:...`), the metrics directory.  Written only when `up` runs
# with them, and rewritten at each start, so a setting dropped from `up` is dropped here too.
SHARED = ("SANDESH_CLOCK", "SANDESH_WEBHOOK_ALLOW_PRIVATE", "SANDESH_METRICS_DIR", "SANDESH_PUBLIC_URL")


def local_env(env: dict[str, str]) -> dict[str, str]:
    """What ./var/sandesh.env gets from the environment `up` runs with."""
    return {name: env[name] for name in ("DATABASE_URL", "SANDESH_SECRET_KEY", *SHARED) if env.get(name)}


def _write_local_env(values: dict[str, str]) -> None:
    write_secret(VAR / "sandesh.env", "# written by `sandesh up`; read by sandesh commands run in this folder\n"
                 + "".join(f"{k}={v}\n" for k, v in values.items()))


DEMO_OWNER = "owner@demo.example"


def _demo_client(settings: Settings, actor: str) -> dict[str, str] | None:
    """The demo workspace, its client and its owner, whose set-password link opens the dashboard."""
    from sandesh.projections import registry
    from sandesh.scripts.service.bootstrap import bootstrap

    runtime = bootstrap(settings, pool_size=2)
    try:
        with runtime.connection() as conn:
            if registry.any_client(conn):
                return None
        sandesh = runtime.sandesh
        workspace = sandesh.operators.create_workspace("Demo", None, {}, actor)
        sandesh.operators.activate_workspace(workspace.id, actor)
        sandesh.operators.credit_workspace(workspace.id, 100_000, "demo balance", actor)
        client, key, secret = sandesh.operators.create_client(workspace.id, "Demo", None, None, actor)
        _, token = sandesh.people.add_person(DEMO_OWNER, "Demo owner", workspace.id, "owner", False, actor)
        return {"workspaceId": workspace.id, "clientId": client.id, "key": key, "webhookSecret": secret,
                "ownerEmail": DEMO_OWNER, "setPasswordLink": f"{settings.public_url}/dashboard/set-password/{token}"}
    finally:
        runtime.close()


def up(args: argparse.Namespace, actor: str) -> int:
    from sandesh.scripts.service.bootstrap import migrate

    VAR.mkdir(exist_ok=True)
    env = dict(os.environ)
    if not os.environ.get("DATABASE_URL"):
        sys.stderr.write("sandesh up: no DATABASE_URL; starting an embedded PostgreSQL under ./var/pg\n")
        env["DATABASE_URL"] = embedded_database(VAR / "pg")
    env.setdefault("SANDESH_SECRET_KEY", _secret_key())
    env.setdefault("SANDESH_PUBLIC_URL", f"http://{args.bind}")  # the links `sandesh user` prints
    _write_local_env(local_env(env))
    settings = Settings.from_env(env)
    migrate(settings)
    demo = _demo_client(settings, actor)
    base_url = f"http://{args.bind}/v1"
    emit({"baseUrl": base_url, "databaseUrl": env["DATABASE_URL"], "demo": demo or "exists already; "
          "make a key with `sandesh client create --workspace WS --brand NAME`"})
    if demo:
        sys.stderr.write(f"\nTry it:\n  curl -H 'x-api-key: {demo['key']}' {base_url}/sms/balance\n"
                         f"Dashboard: set the password of {DEMO_OWNER} at {demo['setPasswordLink']}\n\n")
    from sandesh.workers.supervisor import Child, stop_on_signals, supervise

    configure_logging(settings)
    children = []
    cli = [sys.executable, "-m", "sandesh.scripts.service.cli"]
    if _only_emulated_sims(settings):
        network = ["--network", args.emulate] if args.emulate else []
        emulator = Child("emulator", [*cli, "emulator", "--sims", "2", "--register", "--phones-log",
                                      str(VAR / "phones.jsonl"), *network], env=env, stdout=subprocess.PIPE)
        emulator.start()
        for _ in range(2 + len([kind for kind in args.emulate.split(",") if kind])):
            sys.stderr.write(f"emulated modem: {emulator.process.stdout.readline().decode().strip()}\n")
        emulator.stdout = subprocess.DEVNULL  # when it is restarted nobody reads its lines
        sys.stderr.write(f"what the phones receive is written to {VAR / 'phones.jsonl'}\n")
        children.append(emulator)
    children.append(Child("sandesh serve", [*cli, "serve", "--bind", args.bind], env=env))
    children.append(Child("sandesh worker all", [*cli, "worker", "all"], env=env))
    return supervise(children, stop_on_signals())


def _only_emulated_sims(settings: Settings) -> bool:
    """No SIM registered, or only the emulator's: `up` (re)starts the emulator (docs/operations.md, "A first look")."""
    import psycopg

    from sandesh.projections import registry

    with psycopg.connect(settings.database_url) as conn:
        return not registry.any_sim_not_named(conn, "emu-")

"""A PostgreSQL server of the test's own, which the test may stop and start: faults are real,
and the shared server is never touched.  It uses the binaries the `pgserver` wheel ships (a
dependency of `sandesh up`); as root it runs them as pgserver's `pgserver` system user, as
`sandesh up` does."""
from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

import psycopg


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivatePostgres:
    def __init__(self, root: Path, standby_of: PrivatePostgres | None = None):
        """A new cluster, or (`standby_of`) a streaming standby of that running primary, made by
        pg_basebackup -R under the name `standby`."""
        import pgserver
        from pgserver._commands import POSTGRES_BIN_PATH, pg_basebackup

        self.root, self.port = root, _free_port()
        self.data, self.sockets, self.log = root / "data", root / "sockets", root / "server.log"
        self._initdb, self._pg_ctl = pgserver.initdb, pgserver.pg_ctl
        self._run_as: dict = {}
        root.mkdir(parents=True, exist_ok=True)
        self.sockets.mkdir(exist_ok=True)
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            import pwd

            from pgserver.utils import ensure_folder_permissions, ensure_prefix_permissions, ensure_user_exists

            user = ensure_user_exists("pgserver")
            ensure_prefix_permissions(root)
            # the binaries sit in the checkout's .venv, whose folders may be 0700 (a clone made in
            # `mktemp -d`): the server's user must be able to reach them, as `sandesh up` makes sure
            ensure_prefix_permissions(POSTGRES_BIN_PATH)
            ensure_folder_permissions(POSTGRES_BIN_PATH, 0o055)
            for path in (root, self.sockets):
                os.chown(path, user.pw_uid, user.pw_gid)
            self.log.touch()
            os.chown(self.log, user.pw_uid, user.pw_gid)
            self._run_as = {"user": pwd.getpwnam("pgserver").pw_uid}
        if standby_of is None:
            self._initdb(["-U", "root", "--auth=trust", "-E", "UTF8", "--no-sync"], pgdata=self.data, **self._run_as)
        else:
            pg_basebackup(["-D", str(self.data), "-R", "-X", "stream", "-U", "root", "-h", "127.0.0.1",
                           "-p", str(standby_of.port), "-d", "application_name=standby"], **self._run_as)

    @property
    def url(self) -> str:
        return f"postgresql://root@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._pg_ctl(["-l", str(self.log), "-o", options, "-w", "start"], pgdata=self.data, **self._run_as)
        deadline = time.monotonic() + 30
        while True:
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                assert time.monotonic() < deadline, self.log.read_text()[-2000:]
                time.sleep(0.1)

    def promote(self) -> None:
        """A standby becomes the primary (as Patroni or an operator's `pg_ctl promote` does)."""
        self._pg_ctl(["-w", "promote"], pgdata=self.data, **self._run_as)

    def stop(self, mode: str = "fast") -> None:
        """`fast` ends every session and stops, as an operator's restart would; `immediate` is a crash."""
        self._pg_ctl(["-m", mode, "-w", "stop"], pgdata=self.data, **self._run_as)

    def remove(self) -> None:
        try:
            self.stop("immediate")
        except Exception:  # already stopped
            pass
        shutil.rmtree(self.root, ignore_errors=True)

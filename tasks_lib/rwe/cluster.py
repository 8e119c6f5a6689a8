"""The study database's own PostgreSQL server: a cluster medflows creates, starts and stops.

The shared trust-auth server (127.0.0.1:5432 on dev/CI machines) lets anyone log in as
``postgres`` without a password, so it is never the agent's database (spec §3). medflows runs
its own cluster instead:

* ``initdb --auth=scram-sha-256`` (every ``pg_hba.conf`` line password-checked, no trust rule)
  with an admin role whose random password is kept in ``<state>/admin.pw`` (mode 0600);
* it listens on a **unix socket only** (``listen_addresses = ''``) in ``<state>/socket`` on a
  private port number, so a sandbox without network reaches it only when that folder is bound in;
* run as the ``postgres`` OS user when medflows runs as root (PostgreSQL refuses root), as the
  current user otherwise; started by ``pg_ctl`` and stopped by the postmaster's PID.

``MEDFLOWS_RWE_DB_URL`` points at an existing server instead (a Docker database, a managed one);
it must be an admin URL of a server without trust rules (checked, see :func:`check_no_trust`).
"""

from __future__ import annotations

import glob
import hashlib
import os
import pwd
import resource
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import quote

import psycopg2
from pydantic import Field

from evaluators.core import Frozen, InputDataError
from tasks_lib import services
from tasks_lib.settings import get_settings

ADMIN = "rwe_admin"
"""Superuser of medflows' own cluster (never given to an agent)."""

DATABASE = "rwe_synth"
"""Database holding the study schemas."""


BACKEND_ADDRESS_SPACE = 4 * 2**30
"""Address-space limit (``RLIMIT_AS``) of the server and so of every backend it forks: the
kernel's hard stop on one backend's memory (a run role may ``SET work_mem``; an allocation past
this fails with "out of memory" in that backend alone). The run's watchdog stops a backend of a
run role long before, at its private-memory limit."""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (BACKEND_ADDRESS_SPACE, BACKEND_ADDRESS_SPACE))


LOG_PREFIX = "%m [%p] user=%u db=%d "
"""Server log line prefix: refused requests are attributed to run roles by ``user=``."""


class ClusterError(RuntimeError):
    """The cluster could not be created, started or stopped (our environment's fault)."""


class Server(Frozen):
    """How to reach the study database server as its admin."""

    host: str = Field(description="Socket folder (medflows' cluster) or host name.")
    port: int = Field(description="Port (also names the socket file).")
    user: str = Field(description="Admin role.")
    password: str = Field(description="Admin password (never logged).", repr=False)
    database: str = Field(default=DATABASE, description="Study database.")
    socket_dir: Path | None = Field(default=None, description="Socket folder to bind into a "
                                                              "sandbox (None: external server).")

    def dsn(self, database: str | None = None, user: str | None = None,
            password: str | None = None) -> str:
        """libpq keyword DSN (as admin unless ``user``/``password`` are given)."""
        return (f"host={self.host} port={self.port} dbname={database or self.database} "
                f"user={user or self.user} password={password or self.password} "
                "connect_timeout=10")

    def url(self, database: str | None = None, user: str | None = None,
            password: str | None = None) -> str:
        """SQLAlchemy URL (``postgresql+psycopg2``; a socket folder goes in ``?host=``)."""
        who = f"{quote(user or self.user)}:{quote(password or self.password, safe='')}"
        name = database or self.database
        if self.host.startswith("/"):
            return f"postgresql+psycopg2://{who}@/{name}?host={self.host}&port={self.port}"
        return f"postgresql+psycopg2://{who}@{self.host}:{self.port}/{name}"


def pg_bin(program: str) -> str:
    """Path of a PostgreSQL server program (PATH first, then Debian's versioned folders)."""
    found = shutil.which(program)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{program}"), reverse=True)
    if not candidates:
        raise ClusterError(f"{program} not found: install the Debian package postgresql")
    return candidates[0]


class Cluster:
    """medflows' own cluster under ``state_dir`` (created on first start).

    Args:
        state_dir: folder holding ``data/``, ``socket/``, ``admin.pw`` and ``server.log``.
        port: private port (names the socket file; nothing listens on TCP).
    """

    def __init__(self, state_dir: Path, port: int) -> None:
        self.state_dir, self.port = state_dir.resolve(), port
        self.data, self.socket = self.state_dir / "data", self.state_dir / "socket"
        self.pwfile, self.log = self.state_dir / "admin.pw", self.state_dir / "server.log"
        self.os_user = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name

    def _run(self, argv: list[str], timeout: float = 120, limit_memory: bool = False) -> None:
        user = self.os_user if os.geteuid() == 0 else None
        done = subprocess.run(argv, user=user, capture_output=True, text=True, timeout=timeout,
                              cwd=self.state_dir, check=False,
                              preexec_fn=_limit_memory if limit_memory else None)
        if done.returncode != 0:
            raise ClusterError(f"{Path(argv[0]).name} failed ({done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-800:]}")

    def _own(self, path: Path, mode: int) -> None:
        os.chmod(path, mode)
        if os.geteuid() == 0:
            entry = pwd.getpwnam(self.os_user)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def initialized(self) -> bool:
        """The data folder holds a cluster."""
        return (self.data / "PG_VERSION").exists()

    def init(self) -> None:
        """``initdb --auth=scram-sha-256`` with a random admin password (no trust rules)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.state_dir, 0o755)  # the server's OS user must reach data/ and socket/
        closed = [str(p) for p in self.state_dir.parents
                  if os.geteuid() == 0 and not os.stat(p).st_mode & 0o001]
        if closed:
            raise ClusterError(f"the {self.os_user} OS user cannot enter {closed[0]}: put "
                               "MEDFLOWS_RWE_CLUSTER_DIR under folders others may traverse")
        for folder, mode in ((self.data, 0o700), (self.socket, 0o755)):
            folder.mkdir(exist_ok=True)
            self._own(folder, mode)
        password = secrets.token_urlsafe(24)
        handoff = self.state_dir / "initdb.pw"
        handoff.write_text(password + "\n", encoding="utf-8")
        self._own(handoff, 0o600)
        try:
            self._run([pg_bin("initdb"), "-D", str(self.data), "--auth=scram-sha-256",
                       "-U", ADMIN, f"--pwfile={handoff}", "-E", "UTF8", "--locale=C.UTF-8"])
        finally:
            handoff.unlink(missing_ok=True)
        self.pwfile.write_text(password, encoding="utf-8")
        os.chmod(self.pwfile, 0o600)

    def pid(self) -> int | None:
        """PID of the running postmaster (None: not running)."""
        pidfile = self.data / "postmaster.pid"
        try:
            pid = int(pidfile.read_text(encoding="utf-8").split("\n", 1)[0])
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    def start(self) -> Server:
        """Create the cluster if needed, start it if not running (after a shutdown under way
        has ended); recorded as a medflows service and leased to this process, so the CLI
        command that started it stops it when it ends (:mod:`tasks_lib.services`)."""
        if not self.initialized():
            self.init()
        self._wait_shutdown()
        started = self.pid() is None
        if started:
            self.log.touch()
            self._own(self.log, 0o640)
            options = (f"-p {self.port} -k {self.socket} -c listen_addresses='' "
                       "-c unix_socket_permissions=0777 -c max_connections=60 "
                       f"-c log_line_prefix='{LOG_PREFIX}'")
            self._run([pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w",
                       "-t", "60", "-o", options, "start"], limit_memory=True)
        self._record(started)
        server = self.server()
        ensure_database(server)
        return server

    def service_name(self) -> str:
        """This cluster's instance name among medflows' services (a digest of its folder)."""
        return hashlib.sha256(str(self.state_dir).encode()).hexdigest()[:10]

    def service_key(self) -> str:
        """This cluster's record name (``medflows services status``)."""
        return f"{services.ServiceKind.RWE_CLUSTER.value}-{self.service_name()}"

    def _record(self, started: bool) -> None:
        pid = self.pid()
        if pid is None:
            raise ClusterError(f"the study database server did not start: see {self.log}")
        services.register(services.ServiceKind.RWE_CLUSTER, pid,
                          str(self.socket / f".s.PGSQL.{self.port}"), name=self.service_name(),
                          started_here=started, stop_signal="SIGINT", stop_wait_s=60.0,
                          kill=False)

    def _wait_shutdown(self, timeout: float = 60) -> None:
        """Wait while the postmaster is shutting down (another command stopping it)."""
        deadline = time.monotonic() + timeout
        while self.pid() is not None and self._pidfile_state() == "stopping":
            if time.monotonic() > deadline:
                raise ClusterError(f"the study database server is still shutting down after "
                                   f"{timeout}s")
            time.sleep(0.1)

    def _pidfile_state(self) -> str:
        """The postmaster's state line in ``postmaster.pid`` (ready, starting, stopping)."""
        try:
            lines = (self.data / "postmaster.pid").read_text(encoding="utf-8").split("\n")
        except OSError:
            return ""
        return lines[7].strip() if len(lines) > 7 else ""

    def server(self) -> Server:
        """Admin connection parameters of this cluster."""
        return Server(host=str(self.socket), port=self.port, user=ADMIN,
                      password=self.pwfile.read_text(encoding="utf-8").strip(),
                      socket_dir=self.socket)

    def stop(self, timeout: float = 60) -> None:
        """Fast shutdown by PID (SIGINT to the postmaster), waiting until it is gone; its
        service record goes with it."""
        pid = self.pid()
        if pid is None:
            services.forget(self.service_key())
            return
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except OSError:
                services.forget(self.service_key())
                return
            time.sleep(0.1)
        raise ClusterError(f"the study database server (pid {pid}) did not stop in {timeout}s")

    def destroy(self) -> None:
        """Stop the server and remove its state folder."""
        self.stop()
        shutil.rmtree(self.state_dir, ignore_errors=True)


def connect(server: Server, database: str | None = None, autocommit: bool = True
            ) -> psycopg2.extensions.connection:
    """An admin connection (autocommit by default: role and schema DDL)."""
    conn = psycopg2.connect(server.dsn(database))
    conn.autocommit = autocommit
    return conn


def ensure_database(server: Server) -> None:
    """Create the study database if it is missing."""
    conn = connect(server, "postgres")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (server.database,))
            if cur.fetchone() is None:
                cur.execute(f'CREATE DATABASE "{server.database}"')
    finally:
        conn.close()


def check_no_trust(server: Server) -> None:
    """Refuse a server whose ``pg_hba.conf`` has a trust rule (it would not be a sandbox)."""
    conn = connect(server)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_hba_file_rules WHERE auth_method = 'trust'")
            row = cur.fetchone()
    finally:
        conn.close()
    if row is None or row[0]:
        raise InputDataError("MEDFLOWS_RWE_DB_URL", "this server has trust rules in pg_hba.conf "
                                                   "(anyone may log in without a password); it "
                                                   "cannot hold an agent's database")


def server_from_url(url: str) -> Server:
    """Admin connection parameters from an external ``postgresql://user:pw@host:port/db`` URL."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except Exception as exc:  # sqlalchemy's ArgumentError and friends: the user's setting
        raise InputDataError("MEDFLOWS_RWE_DB_URL", f"not a database URL: {exc}") from None
    host = str(parsed.query.get("host") or parsed.host or "")
    if not host or not parsed.username or parsed.password is None:
        raise InputDataError("MEDFLOWS_RWE_DB_URL", "needs user, password and host")
    return Server(host=host, port=parsed.port or 5432, user=parsed.username,
                  password=str(parsed.password), database=parsed.database or DATABASE)


def default_cluster() -> Cluster:
    """medflows' own cluster from the settings."""
    settings = get_settings()
    return Cluster(settings.rwe_cluster_dir, settings.rwe_cluster_port)


def study_server() -> Server:
    """The study database server: ``MEDFLOWS_RWE_DB_URL`` if set (checked for trust rules),
    else medflows' own cluster (created and started on demand)."""
    url = get_settings().rwe_db_url
    if url:
        server = server_from_url(url)
        check_no_trust(server)
        return server
    return default_cluster().start()


def study_database_url() -> str:
    """SQLAlchemy admin URL of the study server (``MEDFLOWS_RWE_DB_URL``, else medflows' own
    cluster, started on demand): the default of ``medflows pool build rwe``, which loads each
    EHR into its own database there (:func:`tasks_lib.rwe.load.ensure_ehr_database`)."""
    return study_server().url()


def check_study_database(server: Server, schemas: list[str], ehr_hash: str = "") -> None:
    """Fail with the fix when the pool's database or its schemas are not on the study server
    (a pool built into another server, e.g. the shared trust-auth one), or when the database
    records another EHR than the pool's manifest (``ehr_hash``; "" skips that check)."""
    from tasks_lib.rwe.load import recorded_hash

    conn = connect(server, "postgres")
    try:
        with conn.cursor() as cur:
            recorded = recorded_hash(cur, server.database)
    finally:
        conn.close()
    found = recorded is not None
    if found and ehr_hash and recorded != ehr_hash:
        raise InputDataError(f"database {server.database}", f"it holds EHR "
                             f"{(recorded or 'unrecorded')[:16]}, not the pool's {ehr_hash[:16]} "
                             "(its data changed since the pool was built); rebuild the pool: "
                             "medflows pool build rwe --seed S")
    missing = list(schemas)
    if found:
        conn = connect(server)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)",
                            (list(schemas),))
                present = {r[0] for r in cur.fetchall()}
        finally:
            conn.close()
        missing = [s for s in schemas if s not in present]
    if missing:
        raise InputDataError(f"database {server.database}", f"the pool's study database "
                             f"(schemas {', '.join(missing)}) is not on the study server; build "
                             "the pool into it: medflows pool build rwe --seed S (default: "
                             "the study server)")

"""Starting and stopping a crawlcache proxy from Python.

:func:`serve` is a context manager for test suites and scripts::

    with crawlcache.serve(data_dir="fixtures/http", offline=True) as proxy:
        session = crawlcache.client.session(proxy)
        ...

The proxy listens on a free loopback port (``serve --listen 127.0.0.1:0
--print-address``), and is stopped when the block ends. It is also
stopped when the Python process exits or dies, however it dies: it is
started with ``--exit-on-stdin-close`` and its standard input is a pipe
this process holds.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path
from typing import IO, Iterator, Optional, Sequence, Union

from contextlib import contextmanager

StrPath = Union[str, "os.PathLike[str]"]

#: Seconds a proxy may take to print its address before :class:`Proxy`
#: gives up (opening a large store can take a few seconds).
START_TIMEOUT = 60.0

#: Seconds a proxy gets to finish in-flight responses and flush its index
#: after SIGTERM before it is killed.
STOP_TIMEOUT = 30.0


class CrawlcacheError(RuntimeError):
    """The crawlcache binary could not be found, started, or run."""


def find_binary() -> str:
    """The path of the ``crawlcache`` binary.

    In order: ``$CRAWLCACHE_BIN``; the one the wheel installed next to this
    Python (the environment's scripts directory, also for ``pip install
    --user``); ``crawlcache`` on ``PATH``. Raises :class:`CrawlcacheError`
    naming what it looked at when there is none.
    """
    env = os.environ.get("CRAWLCACHE_BIN")
    if env:
        if os.access(env, os.X_OK):
            return env
        raise CrawlcacheError(f"CRAWLCACHE_BIN={env} is not an executable file")
    looked = []
    dirs = [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    user = sysconfig.get_path("scripts", f"{os.name}_user") if os.name == "posix" else None
    if user:
        dirs.append(user)
    for d in dirs:
        if not d:
            continue
        candidate = os.path.join(d, "crawlcache")
        looked.append(candidate)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which("crawlcache")
    if on_path:
        return on_path
    raise CrawlcacheError(
        "the crawlcache binary was not found (looked at $CRAWLCACHE_BIN, "
        + ", ".join(looked)
        + " and PATH): install the wheel (pip install crawlcache), or set CRAWLCACHE_BIN"
    )


def run(args: Sequence[str], *, timeout: float = 120.0) -> str:
    """Runs ``crawlcache ARGS...`` and returns its standard output.

    Raises :class:`CrawlcacheError` with its standard error when it exits
    with a status other than 0 or outlasts ``timeout`` seconds.
    """
    binary = find_binary()
    try:
        done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise CrawlcacheError(f"crawlcache {' '.join(args)} did not finish in {timeout} s") from e
    if done.returncode != 0:
        raise CrawlcacheError(f"crawlcache {' '.join(args)} exited with status {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def version() -> str:
    """The binary's version, as ``crawlcache --version`` prints it (``X.Y.Z``)."""
    return run(["--version"]).split()[-1]


def ca_bundle(data_dir: StrPath, *, roots: Optional[StrPath] = None, path: Optional[StrPath] = None) -> str:
    """Writes a CA bundle for clients of the proxy whose data directory is
    ``data_dir``, and returns its path.

    The bundle holds the system root certificates (or ``roots``) followed
    by the proxy's interception CA (``crawlcache ca bundle``). Clients
    whose CA option replaces their trust store (``verify=`` of requests,
    ``SSL_CERT_FILE``) then accept both the intercepted hosts and those in
    ``tls.bypass_hosts``. Written to ``path``, by default
    ``DATA_DIR/ca-bundle.pem``. Raises :class:`CrawlcacheError` when the
    data directory has no CA (``serve`` creates it on its first start; a
    CA is never created here, so a mistyped directory cannot hand clients
    a CA no proxy uses).
    """
    data_dir = os.fspath(data_dir)
    out = os.fspath(path) if path is not None else os.path.join(data_dir, "ca-bundle.pem")
    args = ["ca", "bundle", out, "--data-dir", data_dir]
    if roots is not None:
        args += ["--roots", os.fspath(roots)]
    run(args)
    return out


class Proxy:
    """A crawlcache proxy process started by this Python process.

    ``url`` is ``http://127.0.0.1:PORT`` once :meth:`start` returned;
    ``data_dir`` holds its store and CA. Stop it with :meth:`stop` (or use
    it as a context manager); it also stops when this process exits or
    dies (its standard input is a pipe held here).

    ``config`` is a TOML file laid over the defaults (``--config``),
    ``offline`` serves only what is stored (``--offline``); ``listen``
    defaults to a free loopback port; ``args`` go to ``serve`` as they are.
    ``stderr`` receives the proxy's log (default: a file ``serve.log`` in
    ``data_dir``).
    """

    def __init__(
        self,
        data_dir: StrPath = "crawlcache-data",
        *,
        offline: bool = False,
        config: Optional[StrPath] = None,
        listen: str = "127.0.0.1:0",
        args: Sequence[str] = (),
        stderr: Optional[IO[str]] = None,
        env: Optional[dict] = None,
    ) -> None:
        self.data_dir = Path(data_dir).absolute()
        self.offline = offline
        self.config = config
        self.listen = listen
        self.args = list(args)
        self.url: Optional[str] = None
        self.process: Optional[subprocess.Popen] = None
        self._stderr = stderr
        self._log: Optional[IO[str]] = None
        self._env = env
        self._ca_bundle: Optional[str] = None

    @property
    def log_path(self) -> Path:
        """Where the proxy's log goes when no ``stderr`` was given."""
        return self.data_dir / "serve.log"

    @property
    def ca_cert(self) -> Path:
        """The interception CA certificate (``DATA_DIR/ca/ca.pem``)."""
        return self.data_dir / "ca" / "ca.pem"

    def ca_bundle(self) -> str:
        """A bundle of the system roots and this proxy's CA (see
        :func:`ca_bundle`), written once per proxy."""
        if self._ca_bundle is None:
            self._ca_bundle = ca_bundle(self.data_dir)
        return self._ca_bundle

    def command(self) -> list[str]:
        """The command line :meth:`start` runs."""
        cmd = [find_binary(), "serve", "--data-dir", str(self.data_dir), "--listen", self.listen, "--print-address", "--exit-on-stdin-close"]
        if self.config is not None:
            cmd += ["--config", os.fspath(self.config)]
        if self.offline:
            cmd.append("--offline")
        return cmd + self.args

    def start(self, timeout: float = START_TIMEOUT) -> "Proxy":
        """Starts the proxy and waits until it accepts connections (at most
        ``timeout`` seconds). Returns ``self``. Raises
        :class:`CrawlcacheError` with the end of its log when it exits or
        prints no address in time."""
        if self.process is not None:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        stderr = self._stderr
        if stderr is None:
            self._log = open(self.log_path, "a", encoding="utf-8")
            stderr = self._log
        self.process = subprocess.Popen(
            self.command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=self._env,
            start_new_session=True,
        )
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        address = line[0].strip() if line else ""
        if not address.startswith("http://"):
            self.stop()
            raise CrawlcacheError(f"crawlcache serve did not start ({' '.join(self.command())}): {self._log_tail()}")
        self.url = address
        return self

    def _log_tail(self) -> str:
        if self._stderr is None and self.log_path.exists():
            return "log " + str(self.log_path) + ":\n" + "".join(self.log_path.read_text(errors="replace").splitlines(True)[-20:])
        return "see its standard error"

    def running(self) -> bool:
        """Whether the process is still running."""
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT) -> Optional[int]:
        """Stops the proxy gracefully (SIGTERM: responses in flight finish,
        the index is flushed), killing it after ``timeout`` seconds. Returns
        its exit status (``None`` when it was not started)."""
        p = self.process
        if p is None:
            return None
        if p.poll() is None:
            try:
                p.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for stream in (p.stdin, p.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        if self._log is not None:
            self._log.close()
            self._log = None
        self.process = None
        return p.returncode

    def __enter__(self) -> "Proxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<crawlcache.Proxy {self.url or 'not started'} data_dir={str(self.data_dir)!r}{' offline' if self.offline else ''}>"


@contextmanager
def serve(
    data_dir: StrPath = "crawlcache-data",
    *,
    offline: bool = False,
    config: Optional[StrPath] = None,
    listen: str = "127.0.0.1:0",
    args: Sequence[str] = (),
) -> Iterator[Proxy]:
    """Runs a proxy for the duration of a ``with`` block and yields the
    :class:`Proxy` (``proxy.url``, ``proxy.data_dir``).

    For test fixtures recorded once and replayed without a network::

        with crawlcache.serve(data_dir="tests/fixtures/http", offline=True) as proxy:
            s = crawlcache.client.session(proxy)
            assert s.get("https://example.com/").status_code == 200
    """
    proxy = Proxy(data_dir, offline=offline, config=config, listen=listen, args=args)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


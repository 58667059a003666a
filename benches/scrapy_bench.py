"""The Scrapy benchmark (benches/scrapy.sh runs it): the same crawl of
PAGES local pages of about 10 kB, CONCURRENCY requests at once, through
the crawlcache add-on and through Scrapy's own HttpCacheMiddleware
(filesystem and dbm storage), each twice online (a first run that fills
the cache, then the re-run a Scrapy user repeats) and once offline (the
origin stopped), and once directly with no cache.

For each run: pages/s (responses over Scrapy's `elapsed_time_seconds`),
the origin requests (lines of nginx's access log), the disk used by the
cache afterwards, and the process CPU seconds (Scrapy's, the proxy's).
Prints a Markdown table and writes it, with the raw figures as JSON, to
the work folder.

    python3 benches/scrapy_bench.py --work DIR [--pages 3000] [--concurrency 32] [--rounds 1]

Needs Scrapy (2.10 or later) in this Python, nginx, and the crawlcache
package importable with `$CRAWLCACHE_BIN` naming the binary to measure.
Only 127.0.0.1 is used.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

SPIDER = r'''
import json, os, resource, sys
import scrapy
from scrapy.crawler import CrawlerProcess

job = json.loads(sys.argv[1])

class Bench(scrapy.Spider):
    name = "bench"
    async def start(self):
        for r in self.start_requests():
            yield r
    def start_requests(self):
        base = job["base"]
        for i in range(job["pages"]):
            yield scrapy.Request(f"{base}/p/{i}.html", dont_filter=True)
    def parse(self, response):
        # What a spider does with a page: a selector over it.
        response.css("title::text").get()

settings = {"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False, "ROBOTSTXT_OBEY": False,
            "CONCURRENT_REQUESTS": job["concurrency"], "CONCURRENT_REQUESTS_PER_DOMAIN": job["concurrency"],
            "RETRY_ENABLED": False, "COOKIES_ENABLED": False}
settings.update(job["settings"])
process = CrawlerProcess(settings)
crawler = process.create_crawler(Bench)
process.crawl(crawler)
process.start()
stats = crawler.stats.get_stats()
usage = resource.getrusage(resource.RUSAGE_SELF)
children = resource.getrusage(resource.RUSAGE_CHILDREN)
out = {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in stats.items()}
out["cpu_self"] = usage.ru_utime + usage.ru_stime
out["cpu_children"] = children.ru_utime + children.ru_stime
print(json.dumps(out))
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def du(path: Path) -> int:
    """Bytes of disk the files under `path` take (allocated blocks)."""
    if not path.exists():
        return 0
    return sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def make_site(root: Path, pages: int) -> int:
    """PAGES HTML files of about 10 kB (distinct text each); returns their total bytes."""
    (root / "p").mkdir(parents=True, exist_ok=True)
    total = 0
    filler = "".join(f"<p>Paragraph {j}: the quick brown fox jumps over the lazy dog near the river bank.</p>\n" for j in range(110))
    for i in range(pages):
        links = "".join(f'<a href="/p/{(i + k) % pages}.html">page {(i + k) % pages}</a>\n' for k in range(1, 11))
        body = f"<!doctype html><html><head><title>Page {i}</title></head><body><h1>Page {i}</h1>\n{links}{filler}</body></html>\n"
        (root / "p" / f"{i}.html").write_text(body)
        total += len(body)
    return total


class Nginx:
    """A private nginx on 127.0.0.1 serving the site, fresh for an hour."""

    def __init__(self, work: Path, site: Path) -> None:
        self.work, self.port = work, free_port()
        self.log = work / "origin.access.log"
        conf = work / "origin.conf"
        conf.write_text(
            f"""daemon off; worker_processes 1; pid {work}/origin.pid; error_log {work}/origin.error.log;
events {{ worker_connections 1024; }}
http {{
  access_log {self.log};
  client_body_temp_path {work}/tmp; proxy_temp_path {work}/tmp; fastcgi_temp_path {work}/tmp; uwsgi_temp_path {work}/tmp; scgi_temp_path {work}/tmp;
  keepalive_requests 100000;
  server {{ listen 127.0.0.1:{self.port}; root {site}; expires 1h; default_type text/html; }}
}}
"""
        )
        (work / "tmp").mkdir(exist_ok=True)
        self.conf = conf
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        user = ["-g", "user root;"] if os.geteuid() == 0 else []
        self.proc = subprocess.Popen(["nginx", "-p", str(self.work), "-c", str(self.conf), *user])
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("nginx did not start: " + (self.work / "origin.error.log").read_text()[-2000:])

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGQUIT)
            self.proc.wait(30)
            self.proc = None

    def requests(self) -> int:
        return sum(1 for _ in self.log.open()) if self.log.exists() else 0


def crawl(job: dict) -> dict:
    run = subprocess.run([sys.executable, "-c", SPIDER, json.dumps(job)], capture_output=True, text=True, timeout=1800, cwd=job["cwd"])
    if run.returncode != 0:
        raise SystemExit(f"crawl failed ({run.returncode}):\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--pages", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=1, help="re-runs measured per set-up (the best and worst are shown)")
    ap.add_argument("--setups", default="direct,crawlcache,filesystem,dbm")
    args = ap.parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    site = work / "site"
    site_bytes = make_site(site, args.pages)
    nginx = Nginx(work, site)
    base = f"http://127.0.0.1:{nginx.port}"
    config = work / "crawlcache.toml"
    # robots.txt off: Scrapy's own cache does not fetch it either.
    config.write_text('[robots]\nmode = "off"\n')
    setups = {
        "direct": {},
        "crawlcache": {"ADDONS": {"crawlcache.scrapy.Addon": 500}, "CRAWLCACHE_DATA_DIR": str(work / "crawlcache-data"), "CRAWLCACHE_CONFIG": str(config)},
        "filesystem": {"HTTPCACHE_ENABLED": True, "HTTPCACHE_DIR": str(work / "httpcache-fs"),
                       "HTTPCACHE_STORAGE": "scrapy.extensions.httpcache.FilesystemCacheStorage"},
        "dbm": {"HTTPCACHE_ENABLED": True, "HTTPCACHE_DIR": str(work / "httpcache-dbm"),
                "HTTPCACHE_STORAGE": "scrapy.extensions.httpcache.DbmCacheStorage"},
    }  # fmt: skip
    cache_dir = {"crawlcache": work / "crawlcache-data", "filesystem": work / "httpcache-fs", "dbm": work / "httpcache-dbm"}
    rows: list[dict] = []
    for name in args.setups.split(","):
        settings = setups[name]
        d = cache_dir.get(name)
        if d is not None and d.exists():
            shutil.rmtree(d)
        phases = ["first", *["re-run"] * args.rounds] if name != "direct" else ["direct"] * args.rounds
        if name != "direct":
            phases.append("offline")
        for phase in phases:
            offline = phase == "offline"
            if offline:
                nginx.stop()
            else:
                nginx.start()
            s = dict(settings)
            if offline and name == "crawlcache":
                s["CRAWLCACHE_OFFLINE"] = True
            before = nginx.requests()
            stats = crawl({"base": base, "pages": args.pages, "concurrency": args.concurrency, "settings": s, "cwd": str(work)})
            if not offline:
                nginx.stop()
            got = int(stats.get("response_received_count", 0))
            elapsed = float(stats.get("elapsed_time_seconds", 0)) or 1e-9
            row = {
                "setup": name, "phase": phase, "pages": got, "pages_per_s": got / elapsed, "elapsed_s": elapsed,
                "origin_requests": nginx.requests() - before, "cache_disk": du(d) if d else 0,
                "cpu_scrapy_s": stats["cpu_self"], "cpu_proxy_s": stats["cpu_children"],
                "hits": int(stats.get("crawlcache/hit", stats.get("httpcache/hit", 0))),
                "errors": int(stats.get("log_count/ERROR", 0)),
            }  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)
    load = os.getloadavg()
    lines = [
        f"{args.pages} pages, {site_bytes / 2**20:.1f} MiB of HTML ({site_bytes / args.pages / 1000:.1f} kB each), "
        f"{args.concurrency} concurrent requests; load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        "",
        "| set-up | run | pages/s | origin requests | cache on disk | Scrapy CPU s | proxy CPU s |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        disk = f"{r['cache_disk'] / 2**20:.1f} MiB" if r["setup"] != "direct" else ""
        cpu_proxy = f"{r['cpu_proxy_s']:.1f}" if r["setup"] == "crawlcache" else ""
        lines.append(
            f"| {r['setup']} | {r['phase']} | {r['pages_per_s']:.0f} | {r['origin_requests']} | {disk} | {r['cpu_scrapy_s']:.1f} | {cpu_proxy} |"
        )
    table = "\n".join(lines)
    print(table)
    (work / "scrapy-bench.md").write_text(table + "\n")
    (work / "scrapy-bench.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A Scrapy crawl for the Python tests, run in a child process:
``python spider.py JOB`` where JOB is JSON with ``settings`` (laid over
quiet defaults; the crawlcache add-on is enabled by the caller's
``ADDONS``), ``urls`` (the start requests), ``follow`` (follow the links
of each page) and ``out`` (where the result goes, as JSON: Scrapy's
stats, one record per response and per failed request, and the proxy URL
the requests went to).

A start URL may carry ``#revalidate``: that request gets
``meta={"crawlcache_revalidate": True}``.
"""

from __future__ import annotations

import json
import sys

import scrapy
from scrapy.crawler import CrawlerProcess


def main() -> None:
    job = json.loads(sys.argv[1])
    responses: list[dict] = []
    errors: list[dict] = []
    proxies: set[str] = set()

    class Crawl(scrapy.Spider):
        name = "crawlcache-test"

        async def start(self):  # Scrapy 2.13+
            for r in self.start_requests():
                yield r

        def start_requests(self):
            for u in job["urls"]:
                meta = {"crawlcache_revalidate": True} if u.endswith("#revalidate") else {}
                yield scrapy.Request(u.removesuffix("#revalidate"), meta=meta, dont_filter=True, errback=self.failed)

        def parse(self, response):
            cs = response.meta.get("crawlcache_cache_status")
            rs = response.meta.get("crawlcache_robots_status")
            proxies.add(response.meta.get("proxy") or "")
            responses.append(
                {
                    "url": response.url,
                    "status": response.status,
                    "outcome": response.meta.get("crawlcache_outcome"),
                    "cache_status": cs.raw if cs else None,
                    "robots_status": rs.raw if rs else None,
                    "body_len": len(response.body),
                }
            )
            if job.get("follow"):
                yield from response.follow_all(css="a", callback=self.parse, errback=self.failed)

        def failed(self, failure):
            request = failure.request
            value = failure.value
            response = getattr(value, "response", None)
            errors.append(
                {
                    "url": request.url,
                    "type": type(value).__name__,
                    "message": str(value),
                    "status": response.status if response is not None else None,
                    "cache_status": response.headers.get("Cache-Status", b"").decode() if response is not None else None,
                }
            )

    settings = {"LOG_LEVEL": "INFO", "TELNETCONSOLE_ENABLED": False, "ROBOTSTXT_OBEY": False, "HTTPCACHE_ENABLED": False}
    settings.update(job["settings"])
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(Crawl)
    process.crawl(crawler)
    process.start()
    stats = {k: v if isinstance(v, (int, float, str)) else str(v) for k, v in crawler.stats.get_stats().items()}
    with open(job["out"], "w") as f:
        json.dump({"stats": stats, "responses": responses, "errors": errors, "proxy": sorted(proxies)}, f, indent=1)


if __name__ == "__main__":
    main()

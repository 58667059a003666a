"""A small Scrapy spider for tests/record_replay/scrapy.rs.

Crawls a site from `start` (every link, redirects followed as Scrapy does),
posts the form at `form` once, and writes one JSON line per response to the
file given with `-a out=PATH`: URL, status, the SHA-256 of the body, and the
URL that was asked for. No retries, no robots.txt (the proxy's business),
404 and 504 kept as items so an offline run shows what it missed. The proxy
comes from the `http_proxy` environment variable, as a crawler deployment
sets it (Scrapy's HttpProxyMiddleware).
"""

import hashlib
import json

import scrapy


class RecordSpider(scrapy.Spider):
    name = "record"
    custom_settings = {
        "ROBOTSTXT_OBEY": False,
        "RETRY_ENABLED": False,
        "HTTPCACHE_ENABLED": False,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "INFO",
        "CONCURRENT_REQUESTS": 4,
        "DOWNLOAD_TIMEOUT": 20,
        "HTTPERROR_ALLOWED_CODES": [404, 504],
    }

    def __init__(self, start, form, out, **kwargs):
        super().__init__(**kwargs)
        self.start_url, self.form_url, self.out = start, form, out
        self.lines = []

    async def start(self):
        # Scrapy 2.13 and later; older versions call start_requests().
        for request in self.start_requests():
            yield request

    def start_requests(self):
        yield scrapy.Request(self.start_url, callback=self.parse, cb_kwargs={"asked": self.start_url})
        yield scrapy.FormRequest(
            self.form_url, formdata={"q": "crawl"}, callback=self.parse, cb_kwargs={"asked": "POST " + self.form_url}
        )

    def parse(self, response, asked):
        self.lines.append(
            {
                "asked": asked,
                "url": response.url,
                "status": response.status,
                "sha256": hashlib.sha256(response.body).hexdigest(),
            }
        )
        if response.status == 200 and b"<a " in response.body:
            for href in response.css("a::attr(href)").getall():
                url = response.urljoin(href)
                yield scrapy.Request(url, callback=self.parse, cb_kwargs={"asked": url})

    def closed(self, reason):
        with open(self.out, "w") as f:
            for line in sorted(self.lines, key=lambda l: (l["asked"], l["url"])):
                f.write(json.dumps(line, sort_keys=True) + "\n")

// crawlcache status page: refreshes the figures from /status.json every
// two seconds and draws the charts as SVG. No library, no build step:
// the binary serves this file as it is (src/admin/status.rs).
"use strict";

(function () {
  var POLL_MS = 2000;
  var SVG = "http://www.w3.org/2000/svg";
  var polls = 0;

  // Formats, as src/admin/status.rs writes them on the server.
  function thousands(n) {
    var s = String(Math.round(n));
    var out = "";
    for (var i = 0; i < s.length; i++) {
      if (i > 0 && (s.length - i) % 3 === 0) out += ",";
      out += s[i];
    }
    return out;
  }
  // As crate::units::format_bytes (the server's figures).
  function bytes(n) {
    var units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    n = Math.max(0, Math.floor(n));
    if (n < 1024) return n + " B";
    var x = n / 1024, u = 0;
    while (x >= 1024 && u + 1 < units.length) { x /= 1024; u++; }
    if (x >= 1023.95 && u + 1 < units.length) { x /= 1024; u++; }
    return x.toFixed(1) + " " + units[u];
  }
  function format(kind, v) {
    if (typeof v !== "number" || !isFinite(v)) return "\u2013";
    switch (kind) {
      case "int": return thousands(v);
      case "bytes": return bytes(v);
      case "pct": return (v * 100).toFixed(1) + " %";
      case "rate": return v.toFixed(1) + "/s";
      default: return String(v);
    }
  }
  function duration(s) {
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min";
    if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
    return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
  }
  function at(obj, path) {
    var parts = path.split(".");
    for (var i = 0; i < parts.length; i++) {
      if (obj === null || obj === undefined) return undefined;
      obj = obj[parts[i]];
    }
    return obj;
  }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svgEl(tag, attrs) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, attrs[k]);
    return e;
  }
  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  // The figures: every element with data-k (a path into the JSON) and
  // data-f (its format).
  function updateValues(s) {
    var nodes = document.querySelectorAll("[data-k]");
    for (var i = 0; i < nodes.length; i++) {
      var n = nodes[i];
      var v = at(s, n.getAttribute("data-k"));
      n.textContent = format(n.getAttribute("data-f"), v);
      n.setAttribute("data-value", typeof v === "number" ? String(v) : "");
    }
  }

  // A stacked bar of shares (0..1) across a 100 x 8 view box.
  function stackedBar(svg, parts) {
    clear(svg);
    var x = 0;
    for (var i = 0; i < parts.length; i++) {
      var w = Math.max(0, Math.min(100 - x, parts[i][1] * 100));
      if (w > 0) svg.appendChild(svgEl("rect", { x: x, y: 0, width: w, height: 8, "class": parts[i][0] }));
      x += w;
    }
    if (x < 100) svg.appendChild(svgEl("rect", { x: x, y: 0, width: 100 - x, height: 8, "class": "empty" }));
    svg.setAttribute("data-rendered", String(polls));
  }

  function drawWindows(s) {
    ["1m", "5m", "15m"].forEach(function (key) {
      var svg = document.getElementById("bar-" + key);
      var w = s.windows && s.windows[key];
      if (!svg) return;
      if (!w) { stackedBar(svg, []); return; }
      var other = Math.max(0, 1 - w.hit_ratio - w.revalidated_ratio - w.stale_ratio - w.miss_ratio);
      if (w.counts.requests === 0) other = 0;
      stackedBar(svg, [["hit", w.hit_ratio], ["reval", w.revalidated_ratio], ["stale", w.stale_ratio], ["miss", w.miss_ratio], ["other", other]]);
      svg.setAttribute("data-requests", String(w.counts.requests));
    });
    var disk = document.getElementById("bar-disk");
    if (disk) stackedBar(disk, [["used", Math.min(1, s.store_used_ratio || 0)]]);
  }

  // Points across the width: the history so far (at least 12, at most
  // the 90 of 15 minutes), so a young proxy's charts are not blank space.
  function span(count) {
    return Math.max(12, Math.min(90, count));
  }

  // Columns over time in a 300-wide view box, newest on the right; each
  // point gives its stacked parts.
  function columns(svg, points, height, partsOf) {
    clear(svg);
    var n = span(points.length);
    var w = 300 / n;
    var max = 0;
    var stacks = points.map(function (p) {
      var parts = partsOf(p);
      var total = parts.reduce(function (a, b) { return a + b[1]; }, 0);
      if (total > max) max = total;
      return parts;
    });
    svg.appendChild(svgEl("line", { x1: 0, y1: height - 0.5, x2: 300, y2: height - 0.5, "class": "base" }));
    var offset = n - stacks.length;
    stacks.forEach(function (parts, i) {
      var y = height;
      parts.forEach(function (part) {
        if (max === 0 || part[1] <= 0) return;
        var h = (part[1] / max) * (height - 2);
        y -= h;
        svg.appendChild(svgEl("rect", { x: (offset + i) * w + 0.2, y: y, width: Math.max(0.4, w - 0.4), height: h, "class": part[0] }));
      });
    });
    svg.setAttribute("data-rendered", String(polls));
    svg.setAttribute("data-points", String(points.length));
    return max;
  }

  function drawSeries(s) {
    var points = (s.series && s.series.points) || [];
    var secs = (s.series && s.series.bucket_seconds) || 10;
    var rps = document.getElementById("chart-rps");
    if (rps) {
      clear(rps);
      var max = 0;
      var values = points.map(function (p) {
        var r = p.at_ms > 0 ? p.requests / (p.at_ms / 1000) : 0;
        if (r > max) max = r;
        return r;
      });
      rps.appendChild(svgEl("line", { x1: 0, y1: 99.5, x2: 300, y2: 99.5, "class": "base" }));
      if (values.length > 0) {
        var n = span(values.length), w = 300 / n, offset = n - values.length;
        var d = "M" + (offset * w) + ",100";
        values.forEach(function (r, i) {
          var y = max > 0 ? 100 - (r / max) * 96 : 100;
          d += " L" + ((offset + i) * w + w / 2).toFixed(2) + "," + y.toFixed(2);
        });
        d += " L300,100 Z";
        rps.appendChild(svgEl("path", { d: d, "class": "area" }));
      }
      rps.setAttribute("data-rendered", String(polls));
      rps.setAttribute("data-points", String(values.length));
      var axis = document.getElementById("axis-rps");
      if (axis) axis.textContent = secs + " s per point \u00b7 last " + duration(span(values.length) * secs) + " \u00b7 peak " + max.toFixed(1) + "/s";
    }
    var outcomes = document.getElementById("chart-outcomes");
    if (outcomes) {
      columns(outcomes, points, 100, function (p) {
        if (p.requests === 0) return [];
        var other = Math.max(0, p.requests - p.hits - p.revalidated - p.stale - p.misses);
        // Shares, so every bar with requests is full height.
        return [["hit", p.hits / p.requests], ["reval", p.revalidated / p.requests], ["stale", p.stale / p.requests], ["miss", p.misses / p.requests], ["other", other / p.requests]];
      });
    }
    var bytesChart = document.getElementById("chart-bytes");
    if (bytesChart) {
      columns(bytesChart, points, 60, function (p) {
        return [["cache", p.bytes_from_cache], ["origin", p.bytes_from_origin]];
      });
    }
  }

  function drawOrigins(s) {
    var body = document.getElementById("origins-rows");
    if (!body) return;
    clear(body);
    var top = (s.origins && s.origins.top) || [];
    var note = document.getElementById("origins-note");
    if (note) {
      var parts = [];
      if (s.origins && s.origins.estimate) parts.push("counts sampled under load (estimates)");
      if (s.origins && s.origins.others > 0) parts.push(thousands(s.origins.others) + " requests to origins not listed");
      note.textContent = parts.join(" \u00b7 ");
    }
    if (top.length === 0) {
      var tr0 = el("tr");
      tr0.appendChild(el("td", { colspan: "7", "class": "none" }, "no requests yet"));
      body.appendChild(tr0);
      return;
    }
    // The same cells as the server renders (src/admin/status.rs origin_row).
    top.forEach(function (o) {
      var r = o.robots || {};
      var tr = el("tr");
      var origin = el("td", { "class": "origin", "data-label": "origin" });
      var host = String(o.origin).replace(/^[a-z]+:\/\//, "");
      origin.appendChild(el("a", { href: "/cache/browse?host=" + encodeURIComponent(host) }, o.origin));
      tr.appendChild(origin);
      function num(label, v, kind) {
        var td = el("td", { "class": "num", "data-label": label });
        td.appendChild(el("span", { "class": "v", "data-value": typeof v === "number" ? String(v) : "" }, format(kind, v)));
        tr.appendChild(td);
      }
      num("requests", o.requests, "int");
      num("hit ratio", o.hit_ratio, "pct");
      num("bytes saved", o.bytes_from_cache, "bytes");
      var st = el("td", { "class": "robots", "data-label": "robots.txt" });
      st.appendChild(el("span", { "class": "state s-" + r.state }, r.state));
      if (typeof r.age_seconds === "number") {
        st.appendChild(document.createTextNode(" "));
        st.appendChild(el("span", { "class": "note" }, duration(r.age_seconds)));
      }
      if (typeof r.back_off_until_ms === "number") {
        st.appendChild(document.createTextNode(" "));
        st.appendChild(el("span", { "class": "note" }, "retry scheduled"));
      }
      tr.appendChild(st);
      tr.appendChild(el("td", { "class": "num", "data-label": "Crawl-delay" }, typeof r.crawl_delay === "number" ? r.crawl_delay + " s" : "\u2013"));
      var e = o.last_error;
      tr.appendChild(el("td", { "class": "err", "data-label": "last error" }, e ? e.status + " at " + new Date(e.at_ms).toISOString() : "\u2013"));
      body.appendChild(tr);
    });
  }

  function drawErrors(s) {
    var list = document.getElementById("errors-list");
    if (!list) return;
    clear(list);
    var recent = (s.errors && s.errors.recent) || [];
    if (recent.length === 0) {
      list.appendChild(el("li", { "class": "none" }, "none"));
      return;
    }
    recent.forEach(function (e) {
      var li = el("li");
      li.appendChild(el("time", {}, new Date(e.at_ms).toISOString()));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("span", { "class": "what" }, e.what));
      li.appendChild(document.createTextNode(" "));
      li.appendChild(el("span", { "class": "msg" }, e.message));
      list.appendChild(li);
    });
  }

  // The origins with an HTTP/2 connection open, as the server drew them.
  function drawH2Origins(s) {
    var list = document.getElementById("h2-origins-list");
    if (!list) return;
    clear(list);
    var origins = (s.http2 && s.http2.origins) || [];
    origins.slice(0, 20).forEach(function (o) {
      list.appendChild(el("li", {}, (o.origin || "") + " \u00b7 " + thousands(o.open || 0) + " open"));
    });
  }

  function drawFleet(s) {
    var section = document.getElementById("fleet");
    if (!section) return;
    var f = s.fleet;
    section.hidden = !f;
    if (!f) return;
    var body = document.getElementById("fleet-rows");
    clear(body);
    function row(name, up, errors) {
      var state = up === true ? "up" : up === false ? "down" : "not configured";
      var tr = el("tr");
      tr.appendChild(el("td", {}, name));
      var td = el("td");
      td.appendChild(el("span", { "class": "state s-" + state.replace(" ", "-") }, state));
      tr.appendChild(td);
      tr.appendChild(el("td", { "class": "num" }, typeof errors === "number" ? thousands(errors) : "\u2013"));
      body.appendChild(tr);
    }
    row("redis", f.redis_up, f.redis_errors);
    row(f.bucket ? "bucket " + f.bucket : "bucket", f.bucket_up, f.bucket_errors);
    var counters = document.getElementById("fleet-counters");
    if (counters && f.counters) {
      var keys = Object.keys(f.counters).sort();
      counters.textContent = "node " + f.node + " \u00b7 " + keys.map(function (k) { return k + " " + thousands(f.counters[k]); }).join(" \u00b7 ");
    }
  }

  function render(s) {
    polls++;
    updateValues(s);
    drawWindows(s);
    drawSeries(s);
    drawOrigins(s);
    drawErrors(s);
    drawH2Origins(s);
    drawFleet(s);
    var updated = document.getElementById("updated");
    if (updated) updated.textContent = "updated " + new Date(s.now_ms).toLocaleTimeString();
    document.documentElement.setAttribute("data-polls", String(polls));
  }

  function poll() {
    fetch("/status.json", { cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error("status " + r.status);
        return r.json();
      })
      .then(function (s) {
        document.documentElement.removeAttribute("data-error");
        render(s);
      })
      .catch(function (e) {
        document.documentElement.setAttribute("data-error", String(e));
        var updated = document.getElementById("updated");
        if (updated) updated.textContent = "cannot reach the proxy (" + e.message + "); retrying";
      })
      .then(function () { setTimeout(poll, POLL_MS); });
  }

  poll();
})();

#!/usr/bin/env python3
"""Figures (gnuplot) and the markdown table of a benches/growth.sh run.

Reads OUT/RUN.csv, OUT/RUN-fill.csv and OUT/RUN-evict.csv and the extra
timings growth.sh wrote, draws OUT/RUN-*.png and writes OUT/RUN.md with the
goals of issue 44 against the last checkpoint. Run again by hand to redraw:

    python3 benches/growth_report.py --run growth-2026-12-07-1m --out benches/runs --extra /dev/null
"""
import argparse
import csv
import os
import subprocess
import sys


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(v, default=None):
    try:
        return float(v)
    except (TypeError, ValueError):
        return default


def fmt(v, digits=0):
    if v is None:
        return "–"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def short(n):
    n = int(n)
    if n >= 1_000_000 and n % 1_000_000 < 1000:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 < 50:
        return f"{n // 1000}k"
    return f"{n:,}"


def gnuplot(script):
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        raise SystemExit("gnuplot failed")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--extra", default="/dev/null")
    ap.add_argument("--machine", default="?")
    ap.add_argument("--commit", default="?")
    ap.add_argument("--settings", default="")
    ap.add_argument("--elapsed", default="")
    a = ap.parse_args()
    base = os.path.join(a.out, a.run)
    cps = rows(base + ".csv")
    fill = rows(base + "-fill.csv")
    evict = rows(base + "-evict.csv")
    extra = {}
    extra_lines = []
    if os.path.exists(a.extra):
        for line in open(a.extra):
            line = line.rstrip("\n")
            if not line:
                continue
            extra_lines.append(line)
            parts = line.split(" ", 1)
            extra[parts[0]] = parts[1] if len(parts) > 1 else ""
    if not cps:
        raise SystemExit(f"no checkpoints in {base}.csv")

    # --- figures ------------------------------------------------------------
    term = 'set terminal pngcairo size 800,480 font "DejaVu Sans,10" noenhanced\n'
    common = term + (
        'set datafile separator ","\nset grid\nset logscale x 10\n'
        'set xlabel "entries (log scale)"\nset format x "%.0s%c"\n'
        "set key outside bottom center horizontal\n"
    )
    hot100k = next((num(c["hot_rps"]) for c in cps if abs(num(c["entries"]) - 100000) < 1000), None)
    figs = []

    def fig(name, body):
        path = f"{base}-{name}.png"
        gnuplot(common + f'set output "{path}"\n' + body)
        figs.append(path)

    F = f"{base}-fill.csv"
    C = f"{base}.csv"
    E = f"{base}-evict.csv"
    fig("fill-rate", f"""
set title "{a.run}: fill rate (new entries/s) and the machine's load"
set ylabel "new entries/s"
set yrange [0:*]
set y2label "1-minute load average"
set y2tics
set y2range [0:*]
plot "{F}" every ::1 using 1:($3 > 0 ? $3 : 1/0) with linespoints pt 7 ps 0.4 title "per fill row", \\
     "{C}" every ::1 using 1:4 with points pt 5 ps 1.2 title "last 10 % of each step (checkpoint)", \\
     "{F}" every ::1 using 1:($3 > 0 ? $6 : 1/0) axes x1y2 with lines dt 3 lc rgb "gray50" title "load1"
""")
    fig("memory", f"""
set title "{a.run}: resident memory (default store.memory_ceiling 256 MiB)"
set ylabel "MiB"
set yrange [0:*]
plot "{F}" every ::1 using 1:($3 > 0 ? $4 : 1/0) with lines lw 2 title "RSS during the fill", \\
     "{F}" every ::1 using 1:($3 > 0 ? $5 : 1/0) with lines dt 2 title "peak RSS since the last start", \\
     "{C}" every ::1 using 1:6 with points pt 5 ps 1.2 title "peak at checkpoint", \\
     "{C}" every ::1 using 1:17 with points pt 4 ps 1.2 title "RSS after restart", \\
     512 with lines lc rgb "red" dt 2 title "goal: 512 MiB"
""")
    fig("bytes-per-entry", f"""
set title "{a.run}: disk per entry beyond the bodies"
set ylabel "bytes per entry (log scale)"
set logscale y 10
plot "{C}" every ::1 using 1:8 with linespoints pt 5 lw 2 title "sled index (du)", \\
     "{C}" every ::1 using 1:12 with linespoints pt 7 lw 2 title "packs + bodies less the distinct body bytes", \\
     150 with lines lc rgb "red" dt 2 title "goal: index 150 B/entry"
""")
    fig("times", f"""
set title "{a.run}: restart to first answer and cache verify"
set ylabel "seconds (log scale)"
set logscale y 10
plot "{C}" every ::1 using 1:16 with linespoints pt 5 lw 2 title "restart to first answer", \\
     "{C}" every ::1 using 1:14 with linespoints pt 7 lw 2 title "cache verify", \\
     "{C}" every ::1 using 1:13 with linespoints pt 9 title "clean shutdown", \\
     2 with lines lc rgb "red" dt 2 title "goal: restart 2 s"
""")
    goal_hits = f", {0.9 * hot100k} with lines lc rgb 'red' dt 2 title 'goal: 0.9 x hot set at 100k'" if hot100k else ""
    fig("hits", f"""
set title "{a.run}: hits per second (wrk -c32 -t2 through the proxy)"
set ylabel "requests/s"
set yrange [0:*]
plot "{C}" every ::1 using 1:18 with linespoints pt 5 lw 2 title "hot set (100,000 entries, warm)", \\
     "{C}" every ::1 using 1:20 with linespoints pt 7 lw 2 title "uniform over all entries (page cache dropped where possible)"{goal_hits}
""")
    if evict:
        fig("evict", f"""
unset logscale x
set format x "%g"
set title "{a.run}: a fill past cache.max_size"
set xlabel "seconds"
set ylabel "MiB"
set yrange [0:*]
set y2label "hot-set hit %"
set y2range [0:105]
set y2tics
plot "{E}" every ::1 using 1:5 with linespoints pt 7 lw 2 title "packs + bodies on disk", \\
     "{E}" every ::1 using 1:3 with linespoints pt 5 title "bytes stored (the budget's count)", \\
     "{E}" every ::1 using 1:4 with lines lc rgb "red" title "cache.max_size", \\
     "{E}" every ::1 using 1:($4 * 1.05) with lines lc rgb "red" dt 2 title "+5 %", \\
     "{E}" every ::1 using 1:11 axes x1y2 with linespoints pt 4 lc rgb "dark-green" title "hot-set hit %"
""")  # against time, not entries
    for p in figs:
        size = os.path.getsize(p)
        if size > 200_000:
            print(f"warning: {p} is {size} bytes (over 200 KB)", file=sys.stderr)

    # --- tables -------------------------------------------------------------
    out = []
    w = out.append
    w(f"## {a.run}\n")
    w(f"Commit {a.commit}; {a.machine}; {a.settings}. Elapsed {a.elapsed} s.\n")
    w("| entries | new/s, last 10 % of step | RSS / peak MiB | index B/entry | store B/entry beyond bodies | restart s (filters built) | verify s | hot-set hits/s (hit %) | random hits/s (hit %, page cache) | load 1/5/15 |")
    w("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for c in cps:
        w(
            f"| {fmt(num(c['entries']))} | {fmt(num(c['fill_rate_last10pct']))} | {c['rss_mib']} / {c['peak_rss_mib']} "
            f"| {fmt(num(c['index_B_per_entry']))} | {fmt(num(c['store_overhead_B_per_entry']))} | {c['restart_s']}{' (' + c['filters_s'] + ')' if c.get('filters_s') else ''} "
            f"| {c['verify_s']}{'' if c['verify_exit'] == '0' else ' (exit ' + c['verify_exit'] + ')'} "
            f"| {fmt(num(c['hot_rps']))} ({c['hot_hit_pct']}) | {fmt(num(c['random_rps']))} ({c['random_hit_pct']}, {c['random_page_cache']}) "
            f"| {c['load1']} / {c['load5']} / {c['load15']} |"
        )
    w("")
    last = cps[-1]
    n = num(last["entries"])
    if extra_lines:
        w("At the last checkpoint (seconds, exit code):\n")
        w("```")
        for line in extra_lines:
            w(line)
        w("```\n")

    # fill windows: first and last W entries
    prev = 0.0
    spans = []
    for r in fill:
        e = num(r["entries"])
        if r.get("note", "").startswith("crash"):
            prev = e
            continue
        spans.append((prev, e, num(r["secs"])))
        prev = e
    wnd = min(1_000_000, n / 10)

    def rate(sel):
        d = sum(b - a for a, b, _ in sel)
        s = sum(t for _, _, t in sel)
        return d / s if s else None

    first = rate([s for s in spans if s[1] <= wnd + 1000])
    lastr = rate([s for s in spans if s[0] >= n - wnd - 1000])
    peak = max(num(c["peak_rss_mib"], 0) for c in cps)
    peak_fill = max((num(r["hwm_mib"], 0) for r in fill), default=0)
    peak = max(peak, peak_fill)
    goals = []

    def goal(name, measured, ok):
        goals.append((name, measured, "met" if ok is True else ("not met" if ok is False else "n/a")))

    if first and lastr:
        goal(
            f"fill rate, last {short(wnd)} ≥ 0.8 × first {short(wnd)}",
            f"{fmt(lastr)} / {fmt(first)} new/s = {lastr / first:.2f}",
            lastr / first >= 0.8,
        )
    # Every phase counts: the fill, a restart (rss_after_restart_mib: once
    # the filters are built) and the fill past the budget.
    after = max((num(c.get("rss_after_restart_mib"), 0) for c in cps), default=0)
    past = max((num(r.get("rss_mib"), 0) for r in evict), default=0)
    worst = max(peak, after, past)
    said = f"peak {fmt(peak)} MiB in the fill, {fmt(after)} after a restart"
    if evict:
        said += f", {fmt(past)} past the budget"
    goal("RSS ≤ 512 MiB (default memory_ceiling)", said, worst <= 512)
    idx = num(last["index_B_per_entry"])
    goal("index ≤ 150 B/entry", f"{fmt(idx)} B/entry", idx <= 150)
    rs = num(last["restart_s"])
    goal("restart to first answer < 2 s", f"{rs} s", rs < 2)
    vs = num(last["verify_s"])
    goal("cache verify < 10 min", f"{vs} s (exit {last['verify_exit']})", vs < 600 and last["verify_exit"] == "0")
    if hot100k and n > 100_000 + 1000:
        h = num(last["hot_rps"])
        goal("hot-set hits ≥ 0.9 × at 100k", f"{fmt(h)} / {fmt(hot100k)} req/s = {h / hot100k:.2f}", h / hot100k >= 0.9)
    if evict:
        # Held against the hot set's hits at the last checkpoint (the row at
        # 0 s is after the budget was lowered, when the first evictions ran).
        base_hit = num(last["hot_hit_pct"])
        evict_rows = evict[1:] if evict[0]["t_s"] in ("0", "0.0") else evict
        settled = evict_rows[len(evict_rows) // 3:] or evict_rows
        mx = num(evict[0]["max_size_mib"])
        du_dev = max(num(r["store_du_mib"]) / mx - 1 for r in settled)
        du_min = min(num(r["store_du_mib"]) / mx - 1 for r in settled)
        # The budget's own count: bodies and records (budget_bytes_mib), or
        # bodies only in runs of a binary before records were counted.
        counted = "budget_bytes_mib" if settled[0].get("budget_bytes_mib") not in (None, "", "0", "0.0") else "bytes_stored_mib"
        bs_dev = max(num(r[counted]) / mx - 1 for r in settled)
        all_dev = max((num(r["store_du_mib"]) + num(r["index_du_mib"])) / mx - 1 for r in settled)
        hits = [num(r["hot_hit_pct"]) for r in settled]
        evr = [num(r["evict_per_s"]) for r in settled]
        newr = [num(r["new_per_s"]) for r in settled]
        goal(
            "past the budget: disk within 5 % of cache.max_size",
            f"packs + bodies {du_min * 100:+.1f} % to {du_dev * 100:+.1f} % of {fmt(mx)} MiB; the budget's own count at most {bs_dev * 100:+.1f} %; with the index (not budgeted) at most {all_dev * 100:+.1f} %",
            abs(du_dev) <= 0.05 and abs(du_min) <= 0.05,
        )
        goal(
            "past the budget: hot-set hit ratio held (within 1 point of the last checkpoint's)",
            f"{min(hits):.1f} to {max(hits):.1f} % hits (at the last checkpoint: {base_hit} %; after the budget was lowered, before the fill: {evict[0]['hot_hit_pct']} %); {fmt(min(evr))} to {fmt(max(evr))} evictions/s, {fmt(min(newr))} to {fmt(max(newr))} new entries/s",
            min(hits) >= base_hit - 1.0,
        )
    crash = extra.get("crash", "")
    if crash:
        kv = dict(p.split("=", 1) for p in crash.split(" ") if "=" in p)
        ok = kv.get("verify_exit") == "0" and kv.get("within") == "yes"
        goal(
            "crash: every invariant holds, loss within the commit window",
            f"lost {kv.get('lost')} answered entries = {kv.get('lost_ms')} ms of fill (bound: {kv.get('bound_ms')} ms, one commit's start to the next one's end; commits traced {kv.get('commits_traced')}, median {kv.get('commit_ms_p50')} ms, longest {kv.get('commit_ms_max')} ms); verify exit {kv.get('verify_exit')}; restart {kv.get('restart_s')} s",
            ok,
        )
    w(f"Goals of issue 44 at {fmt(n)} entries (the issue sets them at 10,000,000):\n")
    w("| goal | measured | |")
    w("|---|---|---|")
    for g in goals:
        w(f"| {g[0]} | {g[1]} | {g[2]} |")
    w("")
    if evict:
        w("Past the budget (a row per sample):\n")
        w("bodies MiB: the distinct bodies' bytes; budget count MiB: what `cache.max_size` bounds (live pack records and body files, `crawlcache_store_budget_bytes`); packs+bodies MiB: their files on disk (`du`, dead records awaiting the tail walk included); the index is outside the budget.\n")
        w("| s | entries | bodies MiB | budget count MiB | max_size MiB | packs+bodies MiB | index MiB | evictions/s | new/s | hot hits/s | hot hit % | RSS MiB | load1 |")
        w("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
        for r in evict:
            w(
                f"| {r['t_s']} | {fmt(num(r['entries']))} | {r['bytes_stored_mib']} | {r.get('budget_bytes_mib') or '?'} | {r['max_size_mib']} | {r['store_du_mib']} | {r['index_du_mib']} "
                f"| {fmt(num(r['evict_per_s']))} | {fmt(num(r['new_per_s']))} | {fmt(num(r['hot_rps']))} | {r['hot_hit_pct']} | {r['rss_mib']} | {r['load1']} |"
            )
        w("")
    w("Figures: " + ", ".join(f"[{os.path.basename(p)}]({os.path.basename(p)})" for p in figs) + "\n")
    with open(base + ".md", "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main()

-- The URLs of benches/growth.sh, for wrk. Entry i (0, 1, 2, ...) has one
-- URL, the same in every run and in every mode, so the reads find what the
-- fill stored:
--   host   one of HOSTS origin ports, Zipf-weighted (host h gets a share
--          proportional to 1/(h+1): a few large sites, many small ones)
--   path   /p/<c>/<i>, a body of its own, or, for DUP_PCT % of the
--          entries, /d/<c>/<k>/<i>, one of DUP_BODIES shared bodies (k);
--          c (0..7) is the size class: the origin answers (c+1) KiB
-- Modes (wrk script arguments after `--`):
--   fill  ORIGIN_PORT DUP_PCT DUP_BODIES HOSTS START QUOTA REPORT THREADS
--         entries START, START+1, ... over the THREADS threads, QUOTA per
--         thread; then the thread asks for /warmup of the first host (a hit)
--         until its QUOTA answers are in, and the process ends itself (wrk
--         would wait for its duration) after writing the count of non-2xx
--         answers to REPORT. So exactly QUOTA new URLs per thread are asked
--         for, each answered before the end: none is cut off in flight
--   read  ORIGIN_PORT DUP_PCT DUP_BODIES HOSTS LO COUNT [SKIP_HOST]
--         entries drawn uniformly from LO .. LO+COUNT-1, none of host
--         SKIP_HOST (0-based; a purged one); prints how many answers were
--         hits (Cache-Status) when wrk ends
local threads = {}
local nthreads = 0

setup = function(thread)
  thread:set("tid", nthreads)
  nthreads = nthreads + 1
  table.insert(threads, thread)
end

init = function(args)
  mode = args[1]
  port0 = tonumber(args[2]); dup_pct = tonumber(args[3]); dup_bodies = tonumber(args[4])
  hosts = tonumber(args[5])
  if mode == "fill" then
    start = tonumber(args[6]); quota = tonumber(args[7]); report = args[8]
    nthreads_all = tonumber(args[9])
  else
    lo = tonumber(args[6]); count = tonumber(args[7]); skip = tonumber(args[8] or "-1")
    math.randomseed(os.time() * 1000 + tid * 7919)
  end
  -- cumulative Zipf weights of the hosts
  cum = {}
  local total = 0
  for h = 1, hosts do total = total + 1 / h end
  local acc = 0
  for h = 1, hosts do acc = acc + (1 / h) / total; cum[h] = acc end
  n = 0; got = 0; bad = 0; hits = 0
  -- wrk calls request() once on thread 0's state to check the request
  -- (script_verify_request) and never sends that one: thread 0 starts a
  -- step back, so that the call it wastes is not one of the QUOTA.
  if tid == 0 then n = -1 end
  filler_since = nil
end

-- Entry i's host (0-based) and path. All arithmetic stays below 2^53.
function entry(i)
  local r = (i * 7919) % 1000003
  local u = (math.floor(r / 100) % 10007) / 10007
  local h = 1
  while h < hosts and u >= cum[h] do h = h + 1 end
  if r % 100 < dup_pct then
    local k = (i + math.floor(r / 7)) % dup_bodies
    local c = k % 8
    return h - 1, "/d/" .. c .. "/" .. k .. "/" .. i
  end
  return h - 1, "/p/" .. (math.floor(r / 13) % 8) .. "/" .. i
end

request = function()
  local i
  if mode == "fill" then
    if n >= quota then
      -- Every new URL asked for: hits until their answers are in. A request
      -- wrk gave up on (-T timeout) is never answered: end 40 s on anyway.
      filler_since = filler_since or os.time()
      if os.time() - filler_since > 40 then
        local f = io.open(report, "w")
        f:write(bad, "\n")
        f:close()
        os.exit(0)
      end
      local authority = "127.0.0.1:" .. port0
      return wrk.format("GET", "http://" .. authority .. "/warmup", { ["Host"] = authority })
    end
    i = start + n * nthreads_all + tid
    n = n + 1
  else
    i = lo + math.floor(math.random() * count)
  end
  local h, path = entry(i)
  while mode ~= "fill" and h == skip do
    i = lo + math.floor(math.random() * count)
    h, path = entry(i)
  end
  local authority = "127.0.0.1:" .. (port0 + h)
  return wrk.format("GET", "http://" .. authority .. path, { ["Host"] = authority })
end

response = function(status, headers, body)
  if mode == "fill" and body and string.sub(body, 1, 4) == "warm" then return end
  got = got + 1
  if status < 200 or status > 299 then bad = bad + 1 end
  if mode == "fill" then
    if got >= quota then
      local f = io.open(report, "w")
      f:write(bad, "\n")
      f:close()
      os.exit(0)
    end
  else
    local cs = headers["Cache-Status"] or headers["cache-status"] or ""
    if string.find(cs, "; hit", 1, true) then hits = hits + 1 end
  end
end

done = function(summary, latency, requests)
  local h, g, b = 0, 0, 0
  for _, t in ipairs(threads) do
    h = h + (t:get("hits") or 0); g = g + (t:get("got") or 0); b = b + (t:get("bad") or 0)
  end
  io.write(string.format("GROWTH hits %d answers %d non2xx %d\n", h, g, b))
end

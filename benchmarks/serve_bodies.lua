-- wrk script of benchmarks/serve.py (issue 12): cycle pre-built KServe v2 request bodies.
-- Usage: wrk ... -s benchmarks/serve_bodies.lua URL -- BODIES_DIR /v2/models/NAME/infer
-- BODIES_DIR/index.txt has one line per body: "FILE HLEN", HLEN being the binary extension's
-- Inference-Header-Content-Length, or "json" for a JSON body. Requests are formatted once in init(),
-- so request() costs nothing. done() prints one line
-- "WRK_JSON {...}" (latency in microseconds from wrk's histogram) for the benchmark to parse.
local reqs = {}
local i = 0

function init(args)
  local dir, path = args[1], args[2]
  for line in io.lines(dir .. "/index.txt") do
    local file, hlen = line:match("^(%S+)%s+(%S+)$")
    local f = assert(io.open(dir .. "/" .. file, "rb"))
    local body = f:read("*a")
    f:close()
    local headers = {}
    if hlen == "json" then
      headers["Content-Type"] = "application/json"
    else
      headers["Content-Type"] = "application/octet-stream"
      headers["Inference-Header-Content-Length"] = hlen
    end
    reqs[#reqs + 1] = wrk.format("POST", path, headers, body)
  end
end

function request()
  i = i % #reqs + 1
  return reqs[i]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests": %d, "duration_us": %d, "bytes": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, ' ..
    '"mean_us": %.1f, "max_us": %d, "connect_errors": %d, "read_errors": %d, "write_errors": %d, ' ..
    '"status_errors": %d, "timeouts": %d}\n',
    summary.requests, summary.duration, summary.bytes, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.mean, latency.max, e.connect, e.read, e.write, e.status, e.timeout))
end

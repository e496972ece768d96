-- wrk script for the send benchmark: POST /v1/sms/send, rotating over the keys in SANDESH_BENCH_KEYS.
local keys = {}
for key in string.gmatch(os.getenv("SANDESH_BENCH_KEYS") or "none", "[^,]+") do
  table.insert(keys, key)
end
local counter = 0
local body = '{"to": "9779812345678", "text": "Your Sandesh order 1234 has shipped. Track it at sandesh.example/t/1234"}'

function setup(thread)
  thread:set("offset", math.random(1, #keys))
end

request = function()
  counter = counter + 1
  local key = keys[((counter + (offset or 0)) % #keys) + 1]
  return wrk.format("POST", "/v1/sms/send", {["x-api-key"] = key, ["content-type"] = "application/json"}, body)
end

done = function(summary, latency, requests)
  io.write(string.format("RESULT requests=%d duration_us=%d p50_ms=%.3f p99_ms=%.3f non2xx=%d socket_errors=%d\n",
    summary.requests, summary.duration, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end

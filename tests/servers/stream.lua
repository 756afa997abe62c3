-- tests/servers/stream.lua: wrk's known request stream. Every wrk thread
-- sends the SAME deterministic sequence (so threads race on the same keys):
-- request i asks for plan (i // 5000) % 3 and device hex(i % 5000), i.e.
-- 15,000 distinct (plan, device) pairs, each repeated once per 15,000
-- requests per thread. The oracle (oracle.py) reads nginx's access log.
local i = 0
request = function()
  local plan = math.floor(i / 5000) % 3
  local device = string.format("%04x", i % 5000)
  i = i + 1
  return wrk.format("GET", "/fc?plan=" .. plan .. "&device=" .. device)
end

-- tests/servers/stream.lua: wrk's known request stream. Every wrk thread
-- sends the SAME deterministic sequence (so threads race on the same keys):
-- request i asks for plan (i // 5000) % 3 and device hex(i % 5000), i.e.
-- 15,000 distinct (plan, device) pairs, each repeated once per 15,000
-- requests per thread. The oracle (oracle.py) reads nginx's access log.
-- An optional wrk argument (wrk ... URL -- /static) replaces the path /fc
-- (scripts/bench-servers.sh compares paths over the same query strings).
local i = 0
local path = "/fc"
init = function(args)
  if args[1] then path = args[1] end
end
request = function()
  local plan = math.floor(i / 5000) % 3
  local device = string.format("%04x", i % 5000)
  i = i + 1
  return wrk.format("GET", path .. "?plan=" .. plan .. "&device=" .. device)
end

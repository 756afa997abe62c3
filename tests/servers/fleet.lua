-- tests/servers/fleet.lua: the fleet test's stream. Request i asks for
-- device hex(i % 1000) and plan (i // 1000) % 4: 4,000 (plan, device) pairs
-- over 1,000 devices; both wrk threads send the same sequence.
local i = 0
request = function()
  local device = string.format("d%03x", i % 1000)
  local plan = math.floor(i / 1000) % 4
  i = i + 1
  return wrk.format("GET", "/fc?plan=" .. plan .. "&device=" .. device)
end

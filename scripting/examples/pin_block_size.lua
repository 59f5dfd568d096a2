-- pin_block_size.lua -- pin the thread-block size to 256: narrow the tuner's
-- parameter space and make the plan itself carry the pinned value.
--
-- Use: copy into $XDG_CONFIG_HOME/ditto/hooks/, or give it to one run:
--   ditto run SPEC.json --hook FILE   (also ditto tui SPEC.json --hook FILE)
--
-- Why: to compare strategies at one block size, or because earlier sessions
-- showed 256 is right for this GPU and the tuner's time is better spent on
-- other parameters.
--
-- Two levers, both used here:
--   ditto.param_space(strategy, {NAME = {values...}})
--       narrows what the tuner tries for a template strategy (the names are
--       the template manifest's params: kernels/spmv_csr_thread.cu declares
--       strategy "csr-thread" with BLOCK in 64..1024).
--   ditto.on("plan", "before", fn)
--       fn(data) runs before the Kernel Architect plans; data.params maps each
--       tunable parameter to the values the plan may use. Editing the table
--       in place is enough: ditto reads it back after the hook.

local BLOCK = 256

ditto.param_space("csr-thread", { BLOCK = { BLOCK } })

local function describe(values)
  if type(values) ~= "table" then
    return "unset"
  end
  local parts = {}
  for i, v in ipairs(values) do
    parts[i] = tostring(v)
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

ditto.on("plan", "before", function(data)
  data.params = data.params or {}
  local was = data.params.BLOCK
  data.params.BLOCK = { BLOCK }
  ditto.log(string.format("pin_block_size: BLOCK pinned to %d (was %s)", BLOCK, describe(was)))
end)

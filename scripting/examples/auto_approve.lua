-- auto_approve.lua -- approve a kernel step without asking when it is verified
-- and measured at least 1.1x as fast as the cuSPARSE baseline.
--
-- Use: copy into $XDG_CONFIG_HOME/ditto/hooks/, or give it to one run:
--   ditto run SPEC.json --hook FILE   (also ditto tui SPEC.json --hook FILE)
--
-- A review function sees the step as the event log records it (see
-- agents/EVENTS.md); the fields this one reads:
--
--   step.kind         the pipeline step: "measure", "tune", "generate", ...
--   step.status       "running", "awaiting review", ...
--   step.artifact     {name =, version =, content = | json =}
--   step.measurement  the worker's measure answer; speedup is the candidate's
--                     speedup over the best cuSPARSE algorithm (1.25 = 25%
--                     faster), next to us, gbps, gflops, roofline ...
--   step.verify       the verification battery's result; passed is true only
--                     when every check (fp64 reference, cuSPARSE, poisoned
--                     outputs, determinism, edge shapes) held
--
-- It returns "approve" or nil. nil is not a rejection: the step goes on to
-- the next review function, then to the person at the review gate. A slow
-- or unverified kernel is therefore still shown, never silently dropped.

local THRESHOLD = 1.1

-- Only these steps carry a verified, measured kernel.
local KERNEL_STEPS = { measure = true, tune = true }

ditto.review(function(step)
  if not KERNEL_STEPS[step.kind] then
    return nil
  end
  local verify, m = step.verify, step.measurement
  -- Missing or malformed results never approve: the check is "passed is
  -- exactly true", not "passed is not false".
  if type(verify) ~= "table" or verify.passed ~= true then
    return nil
  end
  if type(m) ~= "table" or type(m.speedup) ~= "number" then
    return nil
  end
  if m.speedup >= THRESHOLD then
    return "approve"
  end
  return nil
end)

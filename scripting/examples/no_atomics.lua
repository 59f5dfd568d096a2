-- no_atomics.lua -- reject generated kernels that use atomic operations, and
-- tell the Code Generator why.
--
-- Use: copy into $XDG_CONFIG_HOME/ditto/hooks/, or give it to one run:
--   ditto run SPEC.json --hook FILE   (also ditto tui SPEC.json --hook FILE)
--
-- Why: for SpMV/SpMM on a fixed sparsity pattern each output element can have
-- one owner (a thread, a warp, a block) that reduces its row with warp
-- shuffles. A kernel reaching for atomicAdd is usually splitting rows without
-- a reduction plan; float atomics also make the summation order vary between
-- runs, which ditto's determinism check then flags. The rejection reason goes
-- back to the same agent as feedback for its next attempt.
--
-- The kernel is the artifact of a "generate" step (agents/EVENTS.md):
--
--   step.kind      "generate"
--   step.version   the generate step's version (kernel_vN.cu)
--   step.artifact  {name = "kernel", version = N, content = "<CUDA source>"}

-- Blank out comments, keeping every newline so line numbers stay right.
local function strip_comments(src)
  src = src:gsub("/%*.-%*/", function(c) return (c:gsub("[^\n]", " ")) end)
  return (src:gsub("//[^\n]*", ""))
end

-- "atomicAdd on line 12", ... for every atomic call (atomicAdd, atomicCAS,
-- atomicAdd_block, atomicMax_system ...) outside comments.
local function atomic_uses(src)
  local found = {}
  local n = 0
  for text in (strip_comments(src) .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    for name in text:gmatch("%f[%w_](atomic%u[%w_]*)%s*%(") do
      found[#found + 1] = string.format("%s on line %d", name, n)
    end
  end
  return found
end

ditto.review(function(step)
  local a = step.artifact
  if step.kind ~= "generate" or type(a) ~= "table" or type(a.content) ~= "string" then
    return nil
  end
  local found = atomic_uses(a.content)
  if #found == 0 then
    return nil -- no opinion: the person decides
  end
  return "reject", string.format(
    "kernel v%s uses atomics (%s); give each output element a single owner and reduce "
      .. "partial sums with warp shuffles instead",
    tostring(a.version or step.version or "?"), table.concat(found, ", "))
end)

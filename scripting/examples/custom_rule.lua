-- custom_rule.lua -- two house rules checked on every generated kernel, next to
-- ditto's built-in checks: no printf in kernels, and __restrict__ on every
-- pointer parameter of a __global__ function.
--
-- Use: copy into $XDG_CONFIG_HOME/ditto/hooks/, or give it to one run:
--   ditto run SPEC.json --hook FILE   (also ditto tui SPEC.json --hook FILE)
--
-- A rule's check(source) gets the kernel's CUDA source as a string and
-- returns what it flags, as a list of
--   line numbers                  -- the rule's message applies, or
--   {line = N, message = "..."}   -- a message of its own per finding.
-- Each becomes a diagnostic (source "lua") with the rule's id and severity,
-- shown at that line and fed back to the Code Generator.

-- Blank out comments, keeping every newline so line numbers stay right.
local function strip_comments(src)
  src = src:gsub("/%*.-%*/", function(c) return (c:gsub("[^\n]", " ")) end)
  return (src:gsub("//[^\n]*", ""))
end

-- The 1-based line of byte offset pos in text.
local function line_at(text, pos)
  local _, newlines = text:sub(1, pos - 1):gsub("\n", "")
  return newlines + 1
end

ditto.rule {
  id = "no-printf",
  -- Why: device printf goes through a host buffer flushed at sync points; it
  -- serialises the threads that print and makes every timing meaningless.
  message = "printf in a kernel serialises output and distorts timings; remove it before measuring",
  severity = "warning",
  check = function(source)
    local found = {}
    local n = 0
    for text in (strip_comments(source) .. "\n"):gmatch("([^\n]*)\n") do
      n = n + 1
      -- %f: printf as a whole word, so snprintf or my_printf do not match
      if text:find("%f[%w_]printf%s*%(") then
        found[#found + 1] = n
      end
    end
    return found
  end,
}

-- The parameter lists of the __global__ functions in code: for each, the
-- text between the parentheses and the offset where it starts. The list is
-- the last balanced (...) before the body, past __launch_bounds__(...).
local function kernel_params(code)
  local lists = {}
  local init = 1
  while true do
    local g = code:find("__global__", init, true)
    if not g then
      break
    end
    local stop = code:find("[{;]", g) or (#code + 1)
    local head = code:sub(g, stop - 1)
    local last_at, last
    for at, group in head:gmatch("()(%b())") do
      last_at, last = at, group
    end
    if last then
      lists[#lists + 1] = { text = last:sub(2, -2), offset = g + last_at } -- past "("
    end
    init = stop + 1
  end
  return lists
end

ditto.rule {
  id = "restrict-pointers",
  -- Why: without __restrict__ the compiler must assume the output may alias
  -- the inputs, so it cannot route loads through the read-only cache or keep
  -- values in registers across stores.
  message = "pointer parameter without __restrict__",
  severity = "note",
  check = function(source)
    local code = strip_comments(source)
    local found = {}
    for _, list in ipairs(kernel_params(code)) do
      for at, param in list.text:gmatch("()([^,]+)") do
        if param:find("*", 1, true) and not param:find("__restrict", 1, true) then
          local lead = param:match("^%s*()") -- skip the newline after a comma
          local name = param:match("([%w_]+)%s*$") or "?"
          found[#found + 1] = {
            line = line_at(code, list.offset + at - 1 + lead - 1),
            message = string.format(
              "pointer parameter '%s' has no __restrict__: the compiler must assume it aliases "
                .. "the others",
              name),
          }
        end
      end
    end
    return found
  end,
}

-- luacheck's configuration for the Redis scripts (lowkiq/store/scripts), run by `make lint`.
--
-- Redis runs them on Lua 5.1, with its own globals. lowkiq.store.lua assembles each script as Redis receives
-- it: a local per key of SCRIPT_KEYS (K_READY = KEYS[1], ...; lowkiq/store/keys.py), then the definitions of
-- the libraries (_lib.lua and the others of LIBRARIES) the script uses, then its body (an `--#include NAME`
-- line takes NAME.lua's body). A script file alone therefore reads those locals as globals: they are declared here, read from the
-- files that define them, so that a name none defines is still an error.
std = "lua51"
max_line_length = 130  -- as the Python code (pyproject.toml)

local function read(path)
  local file = assert(io.open(path, "r"), "luacheck runs from the repository's root: " .. path)
  local text = file:read("*a")
  file:close()
  return text
end

local redis_globals = { "redis", "cjson", "cmsgpack", "bit", "struct" }
-- A script may rewrite its arguments in place (schedule_tick hands push's body the jobs it chose).
local arguments = { KEYS = { read_only = false, other_fields = true }, ARGV = { read_only = false, other_fields = true } }

local prelude = {}
for name in read("lowkiq/store/keys.py"):gmatch('%("(K_[%w_]+)", "') do prelude[#prelude + 1] = name end

-- The libraries every script may use, in the order lowkiq.store.lua puts them before a script's body (its
-- LIBRARIES, read from there): each may use the ones before it.
local libraries = {}
local listed = read("lowkiq/store/lua.py"):match("\nLIBRARIES = (%b())")
for name in listed:gmatch('"(_[%w_]+)"') do libraries[#libraries + 1] = name end
assert(#libraries > 0, "LIBRARIES not found in lowkiq/store/lua.py")
local defined, unused = {}, {}
for _, library in ipairs(libraries) do
  defined[library], unused[library] = {}, {}
  for line in read("lowkiq/store/scripts/" .. library .. ".lua"):gmatch("[^\n]+") do
    local name = line:match("^local function ([%w_]+)") or line:match("^local ([%w_]+)")
    if name then
      table.insert(defined[library], name)
      table.insert(unused[library], "211/" .. name)  -- used by the scripts, not by the library itself
    end
  end
end

local function globals(...)
  local out = {}
  for _, names in ipairs({ ... }) do
    for key, value in pairs(names) do
      if type(key) == "number" then out[#out + 1] = value else out[key] = value end
    end
  end
  return out
end

local everything = { redis_globals, arguments, prelude }
for _, library in ipairs(libraries) do
  -- a library may also set the variables of the others (refusal() keeps the lease it read for history_length());
  -- the scripts only read them. That each library uses only the ones before it is tests/store/test_lua_libraries.py's.
  files["lowkiq/store/scripts/" .. library .. ".lua"] = {
    read_globals = globals(redis_globals, arguments, prelude),
    globals = globals((unpack or table.unpack)(everything, 4)),
    ignore = unused[library],
  }
  everything[#everything + 1] = defined[library]
end
-- rare(): lowkiq.store.lua writes it for a script that names rare definitions (a `--#rare` line)
everything[#everything + 1] = { "rare" }
files["lowkiq/store/scripts/*.lua"] = { read_globals = globals((unpack or table.unpack)(everything)) }

--[[
stepcast pre-flight at sbatch time (Slurm cli_filter/lua; SPANK cannot see a batch job's
command). Install as cli_filter.lua beside slurm.conf and set CliFilterPlugins=cli_filter/lua.

For `sbatch [options] script.sh [args]`, it reads the script and evaluates its variable and array
assignments (without running anything: no command substitution, no program is started; see
Shell below), takes the first simple command that is a Megatron-LM (--num-layers) or torchtitan
(--job.config_file, --module, --model.name) launch once expanded, and runs `stepcast preflight` on
it with the job's GPU count (-N/--nodes x --gpus-per-node or --gres=gpu[:type]:N, from the
command line or #SBATCH lines). When no command can be built (a variable it needs comes from a
$(...) substitution, a condition that is not evaluated, ...), or the script has no training
command, it says so in one line: a filter never skips the pre-flight silently.
  enforce: a FAIL verdict refuses the submission;  warn: prints, submits;  off: nothing.
The service unreachable: a warning, the job is submitted (fail open). cli_filter runs on the
submit host and is not a security boundary (Slurm's docs): enforcement belongs in the service.

Settings: the table below, or the environment of the submitting user (STEPCAST_MODE,
STEPCAST_SERVER, STEPCAST_BIN, STEPCAST_HARDWARE, STEPCAST_GPUS_PER_NODE); a job may also say
`#SBATCH --stepcast=warn|enforce|off` in its script.
]]

local config = {
  mode = os.getenv("STEPCAST_MODE") or "warn",
  server = os.getenv("STEPCAST_SERVER") or "127.0.0.1:50051",
  bin = os.getenv("STEPCAST_BIN") or "/usr/local/bin/stepcast",
  hardware = os.getenv("STEPCAST_HARDWARE") or "h100-sxm",
  gpus_per_node = tonumber(os.getenv("STEPCAST_GPUS_PER_NODE") or "8"),
  gres_map = { h100 = "h100-sxm", h200 = "h200", a100 = "a100-80gb", b200 = "b200" },
  deadline_ms = 3000,
}

local function say(msg) io.stderr:write("stepcast: " .. msg .. "\n") end

-- ---------------------------------------------------------------------------------------------
-- A bash subset, evaluated without running anything: variable and array assignments
-- (NAME=v, NAME+=v, NAME=(...), NAME+=(...), export/declare/readonly/local NAME=...), the
-- expansions $N ${N} ${N:-d} ${N-d} ${N:=d} ${N:+a} ${A[@]} ${A[*]} ${A[i]} ${#A[@]} $((arith)),
-- quoting ('..', "..", \x), comments, "\" continuations, if/elif/else/fi on [ ] / [[ ]] string
-- tests (=, ==, !=, -z, -n, !, &&, ||). Never evaluated: command substitution $(...) and `...`,
-- file tests, loops, functions, case: a variable that depends on one is "unknown", and a
-- training command that uses it gets no pre-flight, with the reason in one line.
-- ---------------------------------------------------------------------------------------------
local Shell = {}
Shell.__index = Shell

function Shell.new(positional, getenv)
  return setmetatable({ vars = {}, arrays = {}, unknown = {}, positional = positional or {},
                        getenv = getenv or os.getenv }, Shell)
end

-- The value of a scalar (nil, reason when unknown).
function Shell:get(name)
  if self.unknown[name] then return nil, self.unknown[name] end
  if string.match(name, "^%d+$") then return self.positional[tonumber(name)] end
  if self.arrays[name] then return self.arrays[name][1] end
  if self.vars[name] ~= nil then return self.vars[name] end
  return self.getenv(name)
end

local function is_space(c) return c == " " or c == "\t" or c == "\n" end

-- Splits unquoted expansion results on whitespace (IFS default).
local function split_ws(s)
  local out = {}
  for w in string.gmatch(s, "%S+") do table.insert(out, w) end
  return out
end

-- Arithmetic $((...)): integers, + - * / % and parentheses after variable expansion.
function Shell:arith(expr)
  local err
  local e = string.gsub(expr, "%$?{?([%a_][%w_]*)}?", function(n)
    local v, why = self:get(n)
    if why then err = why end
    return tostring(tonumber(v or "0") or 0)
  end)
  if err then return nil, err end
  if string.find(e, "[^%d%s%+%-%*/%%%(%)]") then return nil, "arithmetic '" .. expr .. "' is not evaluated" end
  e = string.gsub(e, "(%d+)%s*/%s*(%d+)", "math.floor(%1/%2)")
  local f
  if loadstring and setfenv then  -- Lua 5.1
    f = loadstring("return " .. e)
    if f then setfenv(f, { math = math }) end
  else                            -- Lua 5.2+
    f = load("return " .. e, "arith", "t", { math = math })
  end
  if not f then return nil, "arithmetic '" .. expr .. "' is not evaluated" end
  local ok, v = pcall(f)
  if not ok or type(v) ~= "number" then return nil, "arithmetic '" .. expr .. "' is not evaluated" end
  return tostring(math.floor(v))
end

-- Reads one ${...} / $NAME / $((..)) at s[i] == "$". Returns next index and a list of
-- {text=..., split=bool} pieces, or nil, reason. `quoted`: inside "...".
function Shell:dollar(s, i, quoted)
  local c = string.sub(s, i + 1, i + 1)
  if string.sub(s, i + 1, i + 2) == "((" then
    local depth, j = 2, i + 3
    while j <= #s and depth > 0 do
      local ch = string.sub(s, j, j)
      if ch == "(" then depth = depth + 1 elseif ch == ")" then depth = depth - 1 end
      j = j + 1
    end
    local v, why = self:arith(string.sub(s, i + 3, j - 3))
    if not v then return nil, why end
    return j, { { text = v } }
  elseif c == "(" then
    return nil, "command substitution $(...) is not evaluated"
  elseif c == "{" then
    local j = string.find(s, "}", i + 2, true)
    if not j then return nil, "unterminated ${" end
    local body = string.sub(s, i + 2, j - 1)
    local count = string.match(body, "^#([%a_][%w_]*)%[[@*]%]$")
    if count then return j + 1, { { text = tostring(#(self.arrays[count] or {})) } } end
    local arr, idx = string.match(body, "^([%a_][%w_]*)%[([^%]]+)%]$")
    if arr then
      if self.unknown[arr] then return nil, self.unknown[arr] end
      local a = self.arrays[arr] or (self.vars[arr] and { self.vars[arr] }) or {}
      if idx == "@" or idx == "*" then
        local pieces = {}
        for _, v in ipairs(a) do table.insert(pieces, { text = v, split = not quoted, element = true }) end
        return j + 1, pieces
      end
      local n = tonumber(idx)
      if not n then return nil, "array index '" .. idx .. "' is not evaluated" end
      return j + 1, { { text = a[n + 1] or "", split = not quoted } }
    end
    local name, op, word = string.match(body, "^([%w_]+)(:?[-=+])(.*)$")
    if not name then name = string.match(body, "^([%w_]+)$") end
    if not name then return nil, "expansion ${" .. body .. "} is not evaluated" end
    local v, why = self:get(name)
    if why then return nil, why end
    if op then
      local empty = (v == nil) or (string.sub(op, 1, 1) == ":" and v == "")
      local kind = string.sub(op, -1)
      local wv, wwhy = self:words_of(word, true)
      if not wv then return nil, wwhy end
      local w = table.concat(wv, " ")
      if kind == "-" then if empty then v = w end
      elseif kind == "=" then if empty then v = w; self.vars[name] = w end
      elseif kind == "+" then v = empty and "" or w end
    end
    return j + 1, { { text = v or "", split = not quoted } }
  elseif string.match(c, "[%a_]") then
    local name = string.match(s, "^[%a_][%w_]*", i + 1)
    local v, why = self:get(name)
    if why then return nil, why end
    return i + 1 + #name, { { text = v or "", split = not quoted } }
  elseif string.match(c, "%d") then
    return i + 2, { { text = self.positional[tonumber(c)] or "", split = not quoted } }
  elseif c == "@" or c == "*" then
    return nil, "$" .. c .. " (the script's arguments) is not evaluated"
  end
  return i + 1, { { text = "$" } }
end

-- Splits and expands one logical line into words; separators (; && || | & > <) are returned as
-- {op=...} entries. keep_quotes_removed. Returns list or nil, reason.
function Shell:words_of(s, no_ops)
  local words, cur, have = {}, "", false
  local function flush() if have then table.insert(words, cur) end; cur, have = "", false end
  local function add_pieces(pieces)
    for k, p in ipairs(pieces) do
      if p.split then
        local parts = split_ws(p.text)
        if #parts > 0 then
          if is_space(string.sub(p.text, 1, 1)) then flush() end
          for n, part in ipairs(parts) do
            if n > 1 then flush() end
            cur = cur .. part; have = true
          end
          if is_space(string.sub(p.text, -1)) then flush() end
        end
        if p.element and k < #pieces then flush() end
      else
        if p.element and k > 1 then flush() end
        cur = cur .. p.text; have = true
      end
    end
  end
  local i, n = 1, #s
  while i <= n do
    local c = string.sub(s, i, i)
    if is_space(c) then flush(); i = i + 1
    elseif c == "'" then
      local j = string.find(s, "'", i + 1, true)
      if not j then return nil, "unterminated '" end
      cur = cur .. string.sub(s, i + 1, j - 1); have = true; i = j + 1
    elseif c == '"' then
      have = true; i = i + 1
      while i <= n and string.sub(s, i, i) ~= '"' do
        local d = string.sub(s, i, i)
        if d == "\\" and string.find('"$\\`', string.sub(s, i + 1, i + 1), 1, true) then
          cur = cur .. string.sub(s, i + 1, i + 1); i = i + 2
        elseif d == "$" then
          local j, pieces = self:dollar(s, i, true)
          if not j then return nil, pieces end
          add_pieces(pieces); i = j
        elseif d == "`" then return nil, "command substitution `...` is not evaluated"
        else cur = cur .. d; i = i + 1 end
      end
      if i > n then return nil, 'unterminated "' end
      i = i + 1
    elseif c == "\\" then cur = cur .. string.sub(s, i + 1, i + 1); have = true; i = i + 2
    elseif c == "$" then
      local j, pieces = self:dollar(s, i, false)
      if not j then return nil, pieces end
      add_pieces(pieces); i = j
    elseif c == "`" then return nil, "command substitution `...` is not evaluated"
    elseif c == "#" and not have then break
    elseif not no_ops and string.find(";&|<>", c, 1, true) then
      flush()
      local op = string.match(s, "^[;&|<>]+", i)
      table.insert(words, { op = op }); i = i + #op
    else cur = cur .. c; have = true; i = i + 1 end
  end
  flush()
  return words
end

-- Evaluates a test command's words ([[ ... ]] or [ ... ]): true, false or nil (not evaluated).
local function eval_test(w)
  local function simple(t)
    local neg = false
    if t[1] == "!" then neg = true; table.remove(t, 1) end
    local r
    if #t == 3 and (t[2] == "==" or t[2] == "=") then r = t[1] == t[3]
    elseif #t == 3 and t[2] == "!=" then r = t[1] ~= t[3]
    elseif #t == 2 and t[1] == "-z" then r = t[2] == ""
    elseif #t == 2 and t[1] == "-n" then r = t[2] ~= ""
    elseif #t == 1 then r = t[1] ~= ""
    else return nil end
    if neg then r = not r end
    return r
  end
  -- Split on && / || between bracket groups, left to right.
  local result, pending_op, group = nil, nil, {}
  local function close()
    local g = {}
    for _, x in ipairs(group) do if x ~= "[[" and x ~= "]]" and x ~= "[" and x ~= "]" then table.insert(g, x) end end
    group = {}
    local r = simple(g)
    if pending_op == nil then result = r
    elseif pending_op == "&&" then
      if result == false or r == false then result = false elseif result == nil or r == nil then result = nil else result = true end
    else
      if result == true or r == true then result = true elseif result == nil or r == nil then result = nil else result = false end
    end
  end
  for _, x in ipairs(w) do
    if type(x) == "table" then
      if x.op == "&&" or x.op == "||" then close(); pending_op = x.op
      elseif x.op == ";" then break
      else return nil end
    else table.insert(group, x) end
  end
  close()
  return result
end

-- Strips an unquoted "# comment" from one physical line.
local function strip_comment(line)
  local i, n, q = 1, #line, nil
  while i <= n do
    local c = string.sub(line, i, i)
    if q then
      if c == q then q = nil elseif c == "\\" and q == '"' then i = i + 1 end
    elseif c == "'" or c == '"' then q = c
    elseif c == "\\" then i = i + 1
    elseif c == "#" and (i == 1 or is_space(string.sub(line, i - 1, i - 1))) then return string.sub(line, 1, i - 1)
    end
    i = i + 1
  end
  return line
end

-- Logical lines: continuations joined, comments stripped, a multi-line NAME=( ... ) joined.
local function logical_lines(lines)
  local out, pending, start, depth = {}, nil, 1, 0
  for n, raw in ipairs(lines) do
    local line = strip_comment(raw)
    local cont = string.match(line, "^(.-)\\%s*$")
    if cont then line = cont end
    if pending then pending = pending .. " " .. line else pending = line; start = n end
    if not cont then
      local opens = select(2, string.gsub(pending, "=%(", "")) - select(2, string.gsub(pending, "%)", ""))
      if not (string.match(pending, "^%s*[%a_][%w_]*%+?=%(") and opens > 0) then
        table.insert(out, { text = pending, line = start }); pending = nil
      end
    end
  end
  if pending then table.insert(out, { text = pending, line = start }) end
  return out
end

-- Runs the assignments of `lines` (a batch script) and returns the first simple command whose
-- words satisfy is_training(words): words, nil; or nil, reason (why no command was built).
function Shell:find_command(lines, is_training)
  local stack = {}  -- {state = true|false|nil, taken = bool}
  local skip_depth = 0
  local first_reason
  local function active()
    for _, f in ipairs(stack) do if f.state ~= true then return f.state end end
    return true
  end
  for _, ll in ipairs(logical_lines(lines)) do
    local text = ll.text
    local kw = string.match(text, "^%s*([%a_]+)")
    if skip_depth > 0 then
      if kw == "for" or kw == "while" or kw == "until" or kw == "case" then skip_depth = skip_depth + 1
      elseif kw == "done" or kw == "esac" or string.match(text, "^%s*}") then skip_depth = skip_depth - 1 end
    elseif kw == "if" or kw == "elif" then
      local cond = string.gsub(string.gsub(text, "^%s*[%a_]+%s*", ""), ";?%s*then%s*$", "")
      local w = self:words_of(cond)
      local r = w and eval_test(w)
      if kw == "if" then
        table.insert(stack, { state = r, taken = r == true, unknown = r == nil })
      else
        local f = stack[#stack]
        if f then
          if f.taken then f.state = false
          elseif f.unknown or r == nil then f.state = nil; f.unknown = true
          else f.state = r; f.taken = r end
        end
      end
    elseif kw == "else" then
      local f = stack[#stack]
      if f then if f.taken then f.state = false elseif f.unknown then f.state = nil else f.state = true; f.taken = true end end
    elseif kw == "fi" then
      table.remove(stack)
    elseif kw == "for" or kw == "while" or kw == "until" or kw == "case" or string.match(text, "^%s*[%w_]+%s*%(%)%s*{?") or kw == "function" then
      if not string.match(text, "done%s*;?%s*$") and not string.match(text, "esac%s*;?%s*$") and not string.match(text, "}%s*$") then
        skip_depth = 1
      end
    else
      local state = active()
      local stripped = string.gsub(text, "^%s*(export%s+)", "")
      stripped = string.gsub(stripped, "^%s*(declare%s+%-?%a*%s*)", "")
      stripped = string.gsub(stripped, "^%s*(readonly%s+)", "")
      stripped = string.gsub(stripped, "^%s*(local%s+)", "")
      local name, plus, rest = string.match(stripped, "^%s*([%a_][%w_]*)(%+?)=(.*)$")
      if name then
        if state == nil then
          self.unknown[name] = name .. " (line " .. ll.line .. ") is assigned under a condition that is not evaluated"
        elseif state == true then
          local arr = string.match(rest, "^%((.*)%)%s*;?%s*$")
          if arr then
            local w, why = self:words_of(arr, true)
            if not w then self.unknown[name] = name .. " (line " .. ll.line .. "): " .. why
            else
              local a = (plus == "+") and (self.arrays[name] or {}) or {}
              for _, x in ipairs(w) do table.insert(a, x) end
              self.arrays[name] = a; self.vars[name] = nil; self.unknown[name] = nil
            end
          else
            -- NAME=value [NAME2=value2 ...]: the value is one word (no splitting).
            local w, why = self:words_of(rest)
            if not w then self.unknown[name] = name .. " (line " .. ll.line .. "): " .. why
            elseif #w > 0 and type(w[1]) == "table" then self.vars[name] = ""
            else
              local v = w[1] or ""
              if plus == "+" then v = (self.vars[name] or "") .. v end
              if self.arrays[name] and plus ~= "+" then self.arrays[name] = nil end
              self.vars[name] = v; self.unknown[name] = nil
            end
          end
        end
      elseif state ~= false then
        local w, why = self:words_of(text)
        if not w then
          if string.find(text, "%-%-num[-_]layers") or string.find(text, "%-%-job%.config_file") or
             string.find(text, "%$") then
            first_reason = first_reason or ("line " .. ll.line .. ": " .. why)
          end
        else
          -- Simple commands between separators; leading NAME=value words are its environment.
          local cmd = {}
          local function check()
            while cmd[1] and string.match(cmd[1], "^[%a_][%w_]*=") do table.remove(cmd, 1) end
            if #cmd > 0 and is_training(cmd) then return true end
            cmd = {}
          end
          for _, x in ipairs(w) do
            if type(x) == "table" then
              if check() then break end
              if x.op == ">" or x.op == "<" or x.op == ">>" then cmd = { "__redirect__" } end
            elseif cmd[1] == "__redirect__" then cmd = {}
            else table.insert(cmd, x) end
          end
          if #cmd > 0 and check() then
            if state == nil then
              return nil, "line " .. ll.line .. ": the training command is under a condition that is not evaluated"
            end
            return cmd
          end
        end
      end
    end
  end
  return nil, first_reason
end


local function read_cmdline()
  local f = io.open("/proc/self/cmdline", "rb")
  if not f then return {} end
  local raw = f:read("*a"); f:close()
  local args = {}
  for a in string.gmatch(raw, "([^%z]*)%z") do table.insert(args, a) end
  return args
end

local function is_script(path)
  local f = io.open(path, "r")
  if not f then return false end
  local first = f:read("*l"); f:close()
  return first ~= nil and string.sub(first, 1, 2) == "#!"
end

-- Options of interest, from "--opt=value", "--opt value" or "-N value" forms.
local function scan_options(args, found)
  local i = 1
  while i <= #args do
    local a = args[i]
    local key, val = string.match(a, "^%-%-([%w%-]+)=(.*)$")
    if not key then
      if a == "-N" or a == "--nodes" or a == "--gpus-per-node" or a == "--gres" or a == "--stepcast" then
        key = string.gsub(a, "^%-+", ""); val = args[i + 1]; i = i + 1
      elseif string.match(a, "^%-N%d") then
        key = "N"; val = string.sub(a, 3)
      end
    end
    if key == "N" then key = "nodes" end
    if key and val and found[key] == nil then found[key] = val end
    i = i + 1
  end
end

local function words(line)
  local out = {}
  for w in string.gmatch(line, "%S+") do
    w = string.gsub(w, "^['\"](.*)['\"]$", "%1")
    table.insert(out, w)
  end
  return out
end

local function quote(w) return "'" .. string.gsub(w, "'", "'\\''") .. "'" end

function slurm_cli_setup_defaults(options, early_pass) return slurm.SUCCESS end
function slurm_cli_post_submit(offset, jobid, stepid) return slurm.SUCCESS end

function slurm_cli_pre_submit(options, pack_offset)
  if options["type"] ~= "sbatch" then return slurm.SUCCESS end
  local args = read_cmdline()
  local script
  for i = 2, #args do
    if string.sub(args[i], 1, 1) ~= "-" and is_script(args[i]) then script = args[i]; break end
  end
  if not script then return slurm.SUCCESS end

  -- The script: #SBATCH options, then the training command with its variables expanded.
  local sbatch_args, lines, script_args = {}, {}, {}
  local after = false
  for i = 2, #args do
    if after then table.insert(script_args, args[i]) end
    if args[i] == script then after = true end
  end
  for line in io.lines(script) do
    local opts = string.match(line, "^#SBATCH%s+(.*)$")
    if opts then
      for _, w in ipairs(words(opts)) do table.insert(sbatch_args, w) end
    end
    table.insert(lines, line)
  end
  local shell = Shell.new(script_args)
  local command, why = shell:find_command(lines, function(w)
    for _, x in ipairs(w) do
      if string.match(x, "^%-%-num[-_]layers") or string.match(x, "^%-%-job%.config_file") or x == "--module" or
         string.match(x, "^%-%-model%.name") then
        return true
      end
    end
    return false
  end)
  local found = {}
  scan_options(args, found)          -- the sbatch command line wins over #SBATCH lines
  scan_options(sbatch_args, found)
  local mode = found["stepcast"] or config.mode
  if mode == "off" then return slurm.SUCCESS end
  if not command then
    say("no pre-flight for " .. script .. ": " ..
        (why or "no Megatron-LM or torchtitan training command found in the script"))
    return slurm.SUCCESS
  end

  local nodes = tonumber(string.match(found["nodes"] or "1", "^(%d+)")) or 1
  local per_node, hardware = config.gpus_per_node, config.hardware
  if found["gpus-per-node"] then
    local t, n = string.match(found["gpus-per-node"], "^(%a[%w]*):(%d+)$")
    per_node = tonumber(n or found["gpus-per-node"]) or per_node
    if t then hardware = config.gres_map[string.lower(t)] or t end
  elseif found["gres"] then
    local t, n = string.match(found["gres"], "^gpu:([%w]+):(%d+)$")
    if not t then n = string.match(found["gres"], "^gpu:(%d+)$") end
    per_node = tonumber(n) or per_node
    if t then hardware = config.gres_map[string.lower(t)] or t end
  end

  local cmd = { quote(config.bin), "preflight", "--server", quote(config.server), "--deadline-ms",
                tostring(config.deadline_ms), "--gpus", tostring(nodes * per_node), "--hardware",
                quote(hardware), "--" }
  for _, w in ipairs(command) do table.insert(cmd, quote(w)) end
  local out = os.tmpname()
  -- Lua 5.1 returns the wait status (exit code x 256); Lua 5.2+ returns true|nil, "exit" or
  -- "signal", and the code (reliability review M6: reading only the first value lost every
  -- FAIL verdict on 5.2+).
  local status, how, num = os.execute(table.concat(cmd, " ") .. " > " .. out .. " 2>&1")
  local code
  if type(status) == "number" then
    code = status > 255 and math.floor(status / 256) or status
  elseif how == "exit" then
    code = num
  else
    code = 128 + (num or 0)
  end
  local f = io.open(out, "r")
  if f then
    for l in f:lines() do io.stderr:write((string.sub(l, 1, 9) == "stepcast:" and l or ("stepcast: " .. l)) .. "\n") end
    f:close()
  end
  os.remove(out)
  if code == 4 then
    if mode == "enforce" then
      say("refusing the submission (stepcast mode enforce); #SBATCH --stepcast=warn submits it anyway")
      return slurm.ERROR
    end
    say("FAIL verdict, submitting anyway (mode " .. mode .. ")")
  elseif code ~= 0 and code ~= 3 then
    say("WARNING: no pre-flight (stepcast exit " .. tostring(code) .. "); submitting without it")
  end
  return slurm.SUCCESS
end

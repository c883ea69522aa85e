--[[
stepcast pre-flight at sbatch time (Slurm cli_filter/lua; SPANK cannot see a batch job's
command). Install as cli_filter.lua beside slurm.conf and set CliFilterPlugins=cli_filter/lua.

For `sbatch [options] script.sh [args]` (also `sbatch --wrap="..."` and a script on standard
input, `sbatch <<EOF` or `sbatch < job.sh`), it reads the script and evaluates its variable and
array assignments (without running anything: no command substitution, no program is started;
see Shell below), finds the training command (Megatron-LM, torchtitan, NeMo / Megatron-Bridge),
also inside `srun ... bash -c "$CMD"` / `sh -c`, heredocs (`bash <<EOF`, `cat > run.sh <<EOF`
then `bash run.sh`) and multi-line quoted strings, and runs `stepcast preflight` on it with the
job's GPU count (-N/--nodes x --gpus-per-node or --gres=gpu[:type]:N, from the command line or
#SBATCH lines). Only the variables the training command uses are needed: an unrelated
`LOG_DIR=$(date)` does not block it, and a value the command needs but that cannot be evaluated
is reported with the flag it is for. When no pre-flight can be made, one line says why: a filter
never skips the pre-flight silently.
  enforce: a FAIL verdict refuses the submission;  warn: prints, submits;  off: nothing.
A script on a pipe (`sbatch <<EOF` in bash 5.1+) is gone by the time the filter runs (sbatch read
it first): the filter holds the job, reads the script back from slurmctld after submission
(`scontrol write batch_script JOBID -`), pre-flights it, and releases the job (or, enforce + FAIL,
cancels it).
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
  scontrol = os.getenv("STEPCAST_SCONTROL") or "scontrol",
  scancel = os.getenv("STEPCAST_SCANCEL") or "scancel",
}

local function say(msg) io.stderr:write("stepcast: " .. msg .. "\n") end

-- ---------------------------------------------------------------------------------------------
-- A bash subset, evaluated without running anything: variable and array assignments
-- (NAME=v, NAME+=v, NAME=(...), NAME+=(...), export/declare/readonly/local NAME=...), the
-- expansions $N ${N} ${N:-d} ${N-d} ${N:=d} ${N:+a} ${N,,} ${N^^} ${N,} ${N^} ${#N} ${N:o:l}
-- ${N#p} ${N##p} ${N%p} ${N%%p} ${N/a/b} ${N//a/b} ${A[@]} ${A[*]} ${A[i]} ${#A[@]} $((arith)),
-- quoting ('..', "..", \x) over several lines, comments, "\" continuations, heredocs, if/elif/
-- else/fi on [ ] / [[ ]] string tests (=, ==, !=, -z, -n, !, &&, ||). Never evaluated: command
-- substitution $(...) and `...`, file tests, loops, functions, case. A value that depends on one
-- is "unknown": in a word it becomes a marker (UNKNOWN_MARK .. n .. "@") that carries why; the
-- training command may hold markers in arguments stepcast does not read (--save $(pwd)/ckpt);
-- one in an argument it reads, or standing for whole words, means no pre-flight, said in a line.
-- ---------------------------------------------------------------------------------------------
local UNKNOWN_MARK = "@stepcast_unknown_"  -- no Lua pattern magic characters

local Shell = {}
Shell.__index = Shell

function Shell.new(positional, getenv)
  return setmetatable({ vars = {}, arrays = {}, unknown = {}, positional = positional or {},
                        getenv = getenv or os.getenv, reasons = {}, files = {} }, Shell)
end

-- A marker for an unknown value (its reason kept).
function Shell:mark(reason)
  table.insert(self.reasons, reason)
  return UNKNOWN_MARK .. #self.reasons .. "@"
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

-- A glob (*, ?) as a Lua pattern; `greedy` for ## and %%.
local function glob_pattern(glob, greedy)
  local p = string.gsub(glob, "[%^%$%(%)%%%.%[%]%+%-]", "%%%0")
  p = string.gsub(p, "%*", greedy and ".*" or ".-")
  p = string.gsub(p, "%?", ".")
  return p
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

-- The end of a balanced "(...)" starting at s[i] == "(" (quotes respected); nil if unbalanced.
local function balanced_end(s, i)
  local depth, j, q = 0, i, nil
  while j <= #s do
    local ch = string.sub(s, j, j)
    if q then
      if ch == q then q = nil elseif ch == "\\" and q == '"' then j = j + 1 end
    elseif ch == "'" or ch == '"' then q = ch
    elseif ch == "\\" then j = j + 1
    elseif ch == "(" then depth = depth + 1
    elseif ch == ")" then depth = depth - 1; if depth == 0 then return j end end
    j = j + 1
  end
  return nil
end

-- Applies a ${NAME<op>...} operator to value v (a string).
local function apply_op(v, body)
  local op, a = string.match(body, "^[%w_]+([,%^]+)$")
  if op == ",," then return string.lower(v) end
  if op == "^^" then return string.upper(v) end
  if op == "," then return string.lower(string.sub(v, 1, 1)) .. string.sub(v, 2) end
  if op == "^" then return string.upper(string.sub(v, 1, 1)) .. string.sub(v, 2) end
  local off, len = string.match(body, "^[%w_]+:%s*(%-?%d+)%s*:?%s*(%-?%d*)$")
  if off then
    off = tonumber(off); if off < 0 then off = #v + off end
    if len == "" then return string.sub(v, off + 1) end
    len = tonumber(len)
    if len < 0 then return string.sub(v, off + 1, #v + len) end
    return string.sub(v, off + 1, off + len)
  end
  local dir, pat = string.match(body, "^[%w_]+([#%%]+)(.*)$")
  if dir == "#" or dir == "##" then
    local m = string.match(v, "^" .. glob_pattern(pat, dir == "##"))
    return m and string.sub(v, #m + 1) or v
  end
  if dir == "%" or dir == "%%" then
    local p = glob_pattern(pat, dir == "%%")
    local best
    for i = 1, #v + 1 do
      if string.match(string.sub(v, i), "^" .. p .. "$") then
        if dir == "%%" then best = i; break end
        best = i
      end
    end
    return best and string.sub(v, 1, best - 1) or v
  end
  local all, from, to = string.match(body, "^[%w_]+/(/?)([^/]*)/?(.*)$")
  if from and from ~= "" then
    local p = string.gsub(from, "[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")
    local r = string.gsub(to, "%%", "%%%%")
    return (string.gsub(v, p, r, all == "/" and nil or 1))
  end
  return nil
end

-- Reads one ${...} / $NAME / $((..)) / $(..) at s[i] == "$". Returns next index and a list of
-- {text=..., split=bool} pieces, or nil, reason. `quoted`: inside "...". An unknown value or a
-- command substitution gives a marker piece (unknown=true) unless `strict` (conditions, tests).
function Shell:dollar(s, i, quoted, strict)
  local c = string.sub(s, i + 1, i + 1)
  local function unknown(next_i, reason)
    if strict then return nil, reason end
    return next_i, { { text = self:mark(reason), split = false, unknown = true } }
  end
  if string.sub(s, i + 1, i + 2) == "((" then
    local depth, j = 2, i + 3
    while j <= #s and depth > 0 do
      local ch = string.sub(s, j, j)
      if ch == "(" then depth = depth + 1 elseif ch == ")" then depth = depth - 1 end
      j = j + 1
    end
    local v, why = self:arith(string.sub(s, i + 3, j - 3))
    if not v then return unknown(j, why) end
    return j, { { text = v } }
  elseif c == "(" then
    local j = balanced_end(s, i + 1)
    if not j then return nil, "unterminated $(" end
    return unknown(j + 1, "command substitution $(" .. string.sub(s, i + 2, j - 1) .. ") is not evaluated")
  elseif c == "{" then
    local j = string.find(s, "}", i + 2, true)
    if not j then return nil, "unterminated ${" end
    local body = string.sub(s, i + 2, j - 1)
    local count = string.match(body, "^#([%a_][%w_]*)%[[@*]%]$")
    if count then return j + 1, { { text = tostring(#(self.arrays[count] or {})) } } end
    local lname = string.match(body, "^#([%a_][%w_]*)$")
    if lname then
      local v, why = self:get(lname)
      if why then return unknown(j + 1, why) end
      return j + 1, { { text = tostring(#(v or "")) } }
    end
    local arr, idx = string.match(body, "^([%a_][%w_]*)%[([^%]]+)%]$")
    if arr then
      if self.unknown[arr] then return unknown(j + 1, self.unknown[arr]) end
      local a = self.arrays[arr] or (self.vars[arr] and { self.vars[arr] }) or {}
      if idx == "@" or idx == "*" then
        local pieces = {}
        for _, v in ipairs(a) do table.insert(pieces, { text = v, split = not quoted, element = true }) end
        return j + 1, pieces
      end
      local n = tonumber(idx)
      if not n then return unknown(j + 1, "array index '" .. idx .. "' is not evaluated") end
      return j + 1, { { text = a[n + 1] or "", split = not quoted } }
    end
    local name, op, word = string.match(body, "^([%w_]+)(:?[-=+])(.*)$")
    if not name then name = string.match(body, "^([%w_]+)$") end
    local special
    if not name then
      name = string.match(body, "^([%w_]+)")
      special = name ~= nil
    end
    if not name then return unknown(j + 1, "expansion ${" .. body .. "} is not evaluated") end
    local v, why = self:get(name)
    if why then return unknown(j + 1, why) end
    if special then
      local r = apply_op(v or "", body)
      if not r then return unknown(j + 1, "expansion ${" .. body .. "} is not evaluated") end
      return j + 1, { { text = r, split = not quoted } }
    end
    if op then
      local empty = (v == nil) or (string.sub(op, 1, 1) == ":" and v == "")
      local kind = string.sub(op, -1)
      local wv, wwhy = self:words_of(word, true, strict)
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
    if why then return unknown(i + 1 + #name, why) end
    return i + 1 + #name, { { text = v or "", split = not quoted } }
  elseif string.match(c, "%d") then
    return i + 2, { { text = self.positional[tonumber(c)] or "", split = not quoted } }
  elseif c == "@" or c == "*" then
    return unknown(i + 2, "$" .. c .. " (the script's arguments) is not evaluated")
  end
  return i + 1, { { text = "$" } }
end

-- Splits and expands one logical line into words; separators (; && || | & > <) are returned as
-- {op=...} entries. Returns the list or nil, reason. `strict`: unknown values are errors.
function Shell:words_of(s, no_ops, strict)
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
        if d == "\\" and string.find('"$\\`\n', string.sub(s, i + 1, i + 1), 1, true) then
          if string.sub(s, i + 1, i + 1) ~= "\n" then cur = cur .. string.sub(s, i + 1, i + 1) end
          i = i + 2
        elseif d == "$" then
          local j, pieces = self:dollar(s, i, true, strict)
          if not j then return nil, pieces end
          add_pieces(pieces); i = j
        elseif d == "`" then
          local j = string.find(s, "`", i + 1, true)
          if not j or strict then return nil, "command substitution `...` is not evaluated" end
          cur = cur .. self:mark("command substitution `" .. string.sub(s, i + 1, j - 1) .. "` is not evaluated")
          i = j + 1
        else cur = cur .. d; i = i + 1 end
      end
      if i > n then return nil, 'unterminated "' end
      i = i + 1
    elseif c == "\\" then
      if string.sub(s, i + 1, i + 1) ~= "\n" then cur = cur .. string.sub(s, i + 1, i + 1); have = true end
      i = i + 2
    elseif c == "$" then
      local j, pieces = self:dollar(s, i, false, strict)
      if not j then return nil, pieces end
      add_pieces(pieces); i = j
    elseif c == "`" then
      local j = string.find(s, "`", i + 1, true)
      if not j or strict then return nil, "command substitution `...` is not evaluated" end
      cur = cur .. self:mark("command substitution `" .. string.sub(s, i + 1, j - 1) .. "` is not evaluated")
      have = true; i = j + 1
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

-- Logical lines of a script: "\" continuations joined, comments stripped, a quoted string or
-- $(...) that spans lines kept in one line (joined with "\n"), a multi-line NAME=( ... ) joined,
-- and each heredoc body (<<WORD, <<-WORD, <<'WORD') attached to the line that opens it:
-- {text=, line=, heredoc={lines=..., quoted=bool}}.
local function logical_lines(lines)
  local out = {}
  local cur, start, q, paren, joiner = nil, 1, nil, 0, nil
  local pending_heredoc = {}  -- delimiters opened on the current logical line
  local n = 1
  while n <= #lines do
    local raw = lines[n]
    -- Scan the physical line, tracking quotes, comments, parentheses and heredoc openers.
    local i, len, text = 1, #raw, ""
    local cont = false
    while i <= len do
      local c = string.sub(raw, i, i)
      if q then
        text = text .. c
        if c == q then q = nil
        elseif c == "\\" and q == '"' and i < len then text = text .. string.sub(raw, i + 1, i + 1); i = i + 1 end
      elseif c == "'" or c == '"' then q = c; text = text .. c
      elseif c == "\\" then
        if i == len then cont = true else text = text .. c .. string.sub(raw, i + 1, i + 1); i = i + 1 end
      elseif c == "#" and (i == 1 or is_space(string.sub(raw, i - 1, i - 1))) then
        break
      else
        if c == "(" then paren = paren + 1 elseif c == ")" then paren = paren - 1 end
        if c == "<" and paren <= 0 and string.sub(raw, i, i + 1) == "<<" and string.sub(raw, i + 2, i + 2) ~= "<" then
          local dash, qd, word = string.match(raw, "^<<(%-?)%s*(['\"]?)([%w_]+)['\"]?", i)
          if word then table.insert(pending_heredoc, { word = word, dash = dash == "-", quoted = qd ~= "" }) end
        end
        text = text .. c
      end
      i = i + 1
    end
    if cur == nil then cur = text; start = n else cur = cur .. joiner .. text end
    -- A "\" continuation joins the next line as bash does (nothing between); an open quote,
    -- $(...) or array keeps the newline.
    joiner = cont and "" or "\n"
    n = n + 1
    if not cont and not q and paren <= 0 then
      local entry = { text = cur, line = start }
      -- Heredoc bodies follow the line, one per opener, in order.
      for _, h in ipairs(pending_heredoc) do
        local body = {}
        while n <= #lines do
          local l = lines[n]; n = n + 1
          local cmp = h.dash and string.gsub(l, "^\t+", "") or l
          if cmp == h.word then break end
          table.insert(body, h.dash and cmp or l)
        end
        entry.heredoc = entry.heredoc or {}
        table.insert(entry.heredoc, { lines = body, quoted = h.quoted })
      end
      pending_heredoc = {}
      table.insert(out, entry)
      cur, paren = nil, 0
    end
  end
  if cur then table.insert(out, { text = cur, line = start }) end
  return out
end

local SHELLS = { bash = true, sh = true, zsh = true, dash = true }
local function base(w) return string.match(w, "([^/]+)$") or w end

-- The program a command runs after its launchers (srun/env/nsys ... options): index in cmd.
local function program_index(cmd)
  local i = 1
  while i <= #cmd do
    local b = base(cmd[i])
    if b == "srun" or b == "env" or b == "nsys" or b == "numactl" or b == "time" or b == "nohup" then
      i = i + 1
      if cmd[i] == "profile" then i = i + 1 end
      while i <= #cmd and string.sub(cmd[i], 1, 1) == "-" do
        local a = cmd[i]
        i = i + 1
        -- "--opt value" when the next word is not an option or a program.
        if not string.find(a, "=", 1, true) and #a > 1 and cmd[i] and string.sub(cmd[i], 1, 1) ~= "-" and
           not SHELLS[base(cmd[i])] and not string.match(cmd[i], "%.py$") and not string.match(cmd[i], "%.sh$") and
           base(cmd[i]) ~= "python" and base(cmd[i]) ~= "python3" and base(cmd[i]) ~= "torchrun" and
           not ({ ["-l"] = 1, ["--label"] = 1, ["--exclusive"] = 1, ["--overlap"] = 1, ["-u"] = 1, ["--unbuffered"] = 1,
                  ["--pty"] = 1, ["--container-remap-root"] = 1, ["--no-container-mount-home"] = 1 })[a] then
          i = i + 1
        end
      end
    elseif string.match(cmd[i], "^[%a_][%w_]*=") then i = i + 1
    else return i end
  end
  return nil
end

-- Runs the assignments of `lines` (a batch script) and returns the first simple command whose
-- words satisfy is_training(words): words, nil; or nil, reason (why no command was built).
-- Follows `bash -c STRING`, heredocs fed to a shell, and scripts written by `cat > F <<EOF`.
function Shell:find_command(lines, is_training, depth)
  depth = depth or 0
  if depth > 4 then return nil, "commands nested too deeply" end
  local stack = {}  -- {state = true|false|nil, taken = bool}
  local skip_depth = 0
  local first_reason
  local function active()
    for _, f in ipairs(stack) do if f.state ~= true then return f.state end end
    return true
  end
  local function nested(cmd, ll)
    -- srun ... bash -c "STRING": the string is a script.
    local p = program_index(cmd)
    if p and SHELLS[base(cmd[p])] then
      local j = p + 1
      while cmd[j] and string.sub(cmd[j], 1, 1) == "-" and cmd[j] ~= "-c" do j = j + 1 end
      if cmd[j] == "-c" and cmd[j + 1] then
        local inner = {}
        for l in string.gmatch(cmd[j + 1] .. "\n", "([^\n]*)\n") do table.insert(inner, l) end
        -- The string was expanded once already (it is a word); its own quoting stays.
        local sub = Shell.new(self.positional, self.getenv)
        sub.vars, sub.arrays, sub.unknown, sub.reasons, sub.files = self.vars, self.arrays, self.unknown, self.reasons, self.files
        return sub:find_command(inner, is_training, depth + 1)
      end
      -- bash <<EOF (the heredoc on stdin), or bash run.sh (a file written by the script).
      if cmd[j] == nil and ll.heredoc then
        return self:find_command(ll.heredoc[1].lines, is_training, depth + 1)
      end
      if cmd[j] and self.files[cmd[j]] then return self:find_command(self.files[cmd[j]], is_training, depth + 1) end
    end
    if p and self.files[cmd[p]] then return self:find_command(self.files[cmd[p]], is_training, depth + 1) end
    return nil
  end
  for _, ll in ipairs(logical_lines(lines)) do
    local text = ll.text
    local kw = string.match(text, "^%s*([%a_]+)")
    if skip_depth > 0 then
      if kw == "for" or kw == "while" or kw == "until" or kw == "case" then skip_depth = skip_depth + 1
      elseif kw == "done" or kw == "esac" or string.match(text, "^%s*}") then skip_depth = skip_depth - 1 end
    elseif kw == "if" or kw == "elif" then
      local cond = string.gsub(string.gsub(text, "^%s*[%a_]+%s*", ""), ";?%s*then%s*$", "")
      local w = self:words_of(cond, false, true)
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
    elseif kw == "then" or kw == "do" then
      -- nothing
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
      if name and string.sub(rest, 1, 1) ~= "(" then
        -- NAME=value cmd ...: an environment prefix of a command, not an assignment line.
        local w = self:words_of(stripped)
        if w then
          for _, x in ipairs(w) do
            if type(x) == "table" then break end
            if not string.match(x, "^[%a_][%w_]*%+?=") then name = nil; break end
          end
        end
      end
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
            -- NAME=value: one word (bash does not split it); an unknown part is remembered as
            -- the variable's reason, so a command that uses it says why.
            local before = #self.reasons
            local w, why = self:words_of(rest)
            if not w then self.unknown[name] = name .. " (line " .. ll.line .. "): " .. why
            else
              local parts = {}
              for _, x in ipairs(w) do if type(x) == "table" then break end; table.insert(parts, x) end
              local v = table.concat(parts, " ")
              if #self.reasons > before and string.find(v, UNKNOWN_MARK, 1, true) then
                -- Keep the marker (the command shows where it is used) and name the variable.
                for k = before + 1, #self.reasons do
                  self.reasons[k] = name .. " (line " .. ll.line .. "): " .. self.reasons[k]
                end
              end
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
             string.find(text, "%-%-module") then
            first_reason = first_reason or ("line " .. ll.line .. ": " .. why)
          end
        else
          -- `cat > F <<EOF` / `cat <<EOF > F`: remember F's text for a later `bash F`.
          if ll.heredoc and base(w[1] or "") == "cat" then
            for k, x in ipairs(w) do
              if type(x) == "table" and (x.op == ">" or x.op == ">>") and type(w[k + 1]) == "string" then
                self.files[w[k + 1]] = ll.heredoc[1].lines
              end
            end
          end
          -- Simple commands between separators; leading NAME=value words are its environment.
          local cmd = {}
          local found, found_why
          local function check()
            -- Leading NAME=value words are the command's environment: kept (stepcast reads
            -- MODULE / CONFIG / NGPU for torchtitan's run_train.sh and skips the others).
            local p = 1
            while cmd[p] and string.match(cmd[p], "^[%a_][%w_]*=") do p = p + 1 end
            if #cmd >= p then
              if is_training(cmd) then
                local prog = program_index(cmd)
                if prog and base(cmd[prog]) == "run_train.sh" then
                  -- run_train.sh reads them from the environment: the script's exports count.
                  for _, v in ipairs({ "NGPU", "MODULE", "CONFIG", "CONFIG_FILE" }) do
                    local given = false
                    for k = 1, prog - 1 do given = given or string.match(cmd[k], "^" .. v .. "=") ~= nil end
                    local val = self:get(v)
                    if not given and val then table.insert(cmd, 1, v .. "=" .. val) end
                  end
                end
                found = cmd; return true
              end
              local prog = program_index(cmd)
              if prog and (string.match(cmd[prog], "%.py$") or base(cmd[prog]) == "torchrun" or
                           base(cmd[prog]) == "python" or base(cmd[prog]) == "python3") then
                local whole = self:standalone_unknown(cmd)
                if whole then
                  found_why = found_why or ("line " .. ll.line .. ": the arguments of " .. base(cmd[prog]) ..
                                            " are not evaluated (" .. whole .. ")")
                end
              end
              local inner, inner_why = nested(cmd, ll)
              if inner then found = inner; return true end
              if inner_why then found_why = found_why or inner_why end
            end
            cmd = {}
          end
          for _, x in ipairs(w) do
            if type(x) == "table" then
              if check() then break end
              if x.op == ">" or x.op == "<" or x.op == ">>" or x.op == "<<" or x.op == "2>" or x.op == "&>" then
                cmd = { "__redirect__" }
              end
            elseif cmd[1] == "__redirect__" then cmd = {}
            else table.insert(cmd, x) end
          end
          if not found and #cmd > 0 then check() end
          if found then
            if state == nil then
              return nil, "line " .. ll.line .. ": the training command is under a condition that is not evaluated"
            end
            return found
          end
          first_reason = first_reason or found_why
        end
      end
    end
  end
  return nil, first_reason
end

-- The reason behind the first marker in `s`, or nil.
function Shell:reason_in(s)
  local k = string.match(s, UNKNOWN_MARK .. "(%d+)@")
  return k and self.reasons[tonumber(k)] or nil
end

-- `s` with each marker replaced by `repl(reason)`.
function Shell:unmark(s, repl)
  return (string.gsub(s, UNKNOWN_MARK .. "(%d+)@", function(k) return repl(self.reasons[tonumber(k)] or "?") end))
end

-- A marker standing for whole words of the command (not inside a --flag value) could be any
-- arguments, the flags stepcast reads included: nil when there is none, else the reason.
function Shell:standalone_unknown(cmd)
  for i, w in ipairs(cmd) do
    if string.match(w, "^" .. UNKNOWN_MARK .. "%d+@$") then
      local prev = cmd[i - 1] or ""
      local value_of_flag = string.sub(prev, 1, 2) == "--" and not string.find(prev, "=", 1, true)
      if not value_of_flag then return self:reason_in(w) end
    end
  end
  return nil
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

local function read_lines(path)
  local lines = {}
  local f = io.open(path, "r")
  if not f then return nil end
  for line in f:lines() do table.insert(lines, line) end
  f:close()
  return lines
end

-- sbatch's options that take a value (so the script is not mistaken for one).
local SBATCH_VALUE = {}
for _, o in ipairs({ "-A", "-a", "-b", "-c", "-D", "-d", "-e", "-G", "-i", "-J", "-L", "-M", "-m", "-N", "-n", "-o",
                     "-p", "-q", "-S", "-t", "-w", "-x", "-F", "-C" }) do SBATCH_VALUE[o] = true end

-- Options of interest, from "--opt=value", "--opt value" or "-N value" forms.
local function scan_options(args, found)
  local i = 1
  while i <= #args do
    local a = args[i]
    local key, val = string.match(a, "^%-%-([%w%-]+)=(.*)$")
    if not key then
      if a == "-N" or a == "--nodes" or a == "--gpus-per-node" or a == "--gres" or a == "--stepcast" or a == "--wrap" then
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

local function is_training(w)
  for _, x in ipairs(w) do
    if string.match(x, "^%-%-num[-_]layers") or string.match(x, "^%-%-job%.config_file") or x == "--module" or
       string.match(x, "^%-%-model%.name") or string.match(x, "^%-%-hybrid[-_]") or x == "--factory" or
       x == "--recipe" or string.match(x, "^%-%-factory=") or string.match(x, "^%-%-recipe=") or
       string.match(base(x), "^run_train%.sh$") then
      return true
    end
  end
  return false
end

-- Runs `stepcast preflight` for the command; returns the exit code and prints its lines with
-- each unknown value shown as the variable it came from.
local function preflight(shell, command, gpus, hardware, label)
  local cmd = { quote(config.bin), "preflight", "--server", quote(config.server), "--deadline-ms",
                tostring(config.deadline_ms), "--gpus", tostring(gpus), "--hardware", quote(hardware), "--" }
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
  local lines = {}
  if f then
    for l in f:lines() do table.insert(lines, l) end
    f:close()
  end
  os.remove(out)
  -- An error about a value the filter could not evaluate: that is why there is no pre-flight.
  if code == 2 then
    for _, l in ipairs(lines) do
      local why = shell:reason_in(l)
      if why then
        local msg = shell:unmark(string.gsub(l, "^stepcast:%s*", ""), function() return "<unknown>" end)
        say("no pre-flight for " .. label .. ": " .. msg .. " (" .. why .. ")")
        return nil
      end
    end
  end
  for _, l in ipairs(lines) do
    l = shell:unmark(l, function(r)
      local v = string.match(r, "^([%a_][%w_]*) %(line") or "?"
      return "$" .. v
    end)
    io.stderr:write((string.sub(l, 1, 9) == "stepcast:" and l or ("stepcast: " .. l)) .. "\n")
  end
  return code
end

-- The job's pre-flight from its script lines and options; returns "refuse" (enforce + FAIL),
-- or nil (submit).
local function check_script(lines, script_args, label, cmdline_args)
  local sbatch_args = {}
  for _, line in ipairs(lines) do
    local opts = string.match(line, "^#SBATCH%s+(.*)$")
    if opts then
      for _, w in ipairs(words(opts)) do table.insert(sbatch_args, w) end
    end
  end
  local found = {}
  scan_options(cmdline_args, found)          -- the sbatch command line wins over #SBATCH lines
  scan_options(sbatch_args, found)
  local mode = found["stepcast"] or config.mode
  if mode == "off" then return nil end
  local shell = Shell.new(script_args)
  local command, why = shell:find_command(lines, is_training)
  if not command then
    say("no pre-flight for " .. label .. ": " ..
        (why or "no Megatron-LM, torchtitan, NeMo or Megatron-Bridge training command found in the script"))
    return nil
  end
  local whole = shell:standalone_unknown(command)
  if whole then
    say("no pre-flight for " .. label .. ": the training command's arguments include a value that is not evaluated (" ..
        whole .. ")")
    return nil
  end
  local nodes_text = found["nodes"] or "1"
  local nodes = tonumber(string.match(nodes_text, "^(%d+)"))
  if not nodes then
    say("no pre-flight for " .. label .. ": the node count '" .. nodes_text .. "' (-N/--nodes) is not a number")
    return nil
  end
  local per_node, hardware = config.gpus_per_node, config.hardware
  if found["gpus-per-node"] then
    local t, n = string.match(found["gpus-per-node"], "^(%a[%w]*):(%d+)$")
    per_node = tonumber(n or found["gpus-per-node"]) or per_node
    if t then hardware = config.gres_map[string.lower(t)] or t end
  elseif found["gres"] then
    local t, n = string.match(found["gres"], "^gpu:([%w]+):(%d+)$")
    if not t then n = string.match(found["gres"], "^gpu:(%d+)$") end
    if not n and string.match(found["gres"], "^gpu") then
      say("no pre-flight for " .. label .. ": the GPU count '" .. found["gres"] .. "' (--gres) is not a number")
      return nil
    end
    per_node = tonumber(n) or per_node
    if t then hardware = config.gres_map[string.lower(t)] or t end
  end
  local code = preflight(shell, command, nodes * per_node, hardware, label)
  if code == nil then return nil end
  if code == 4 then
    if mode == "enforce" then
      say("refusing the submission (stepcast mode enforce); #SBATCH --stepcast=warn submits it anyway")
      return "refuse"
    end
    say("FAIL verdict, submitting anyway (mode " .. mode .. ")")
  elseif code ~= 0 and code ~= 3 then
    say("WARNING: no pre-flight (stepcast exit " .. tostring(code) .. "); submitting without it")
  end
  return nil
end

-- The batch script and its arguments from sbatch's command line: path, args; or "wrap", text.
local function find_script(args)
  local i = 2
  while i <= #args do
    local a = args[i]
    if a == "--" then i = i + 1; break end
    if string.sub(a, 1, 1) ~= "-" then
      if is_script(a) then
        local rest = {}
        for k = i + 1, #args do table.insert(rest, args[k]) end
        return a, rest
      end
    elseif SBATCH_VALUE[a] then
      i = i + 1
    end
    i = i + 1
  end
  return nil
end

function slurm_cli_setup_defaults(options, early_pass) return slurm.SUCCESS end

-- A script that came on a pipe: the job was held in pre_submit; read the script back from
-- slurmctld, pre-flight it, then release the job, or cancel it (enforce + FAIL).
function slurm_cli_post_submit(offset, jobid, stepid)
  -- slurm.cli_store / cli_retrieve take an integer key (cli_filter_lua.c _store_data); key 0 here.
  local held = slurm.cli_retrieve and slurm.cli_retrieve(0) or _G.stepcast_held
  if held ~= "1" then return slurm.SUCCESS end
  local label = "job " .. tostring(jobid) .. " (script on standard input)"
  local tmp = os.tmpname()
  local st = os.execute(config.scontrol .. " write batch_script " .. tostring(jobid) .. " " .. tmp .. " >/dev/null 2>&1")
  local lines = read_lines(tmp) or {}
  os.remove(tmp)
  local verdict
  if #lines == 0 then
    say("no pre-flight for " .. label .. ": scontrol write batch_script gave nothing")
  else
    verdict = check_script(lines, {}, label, read_cmdline())
  end
  if verdict == "refuse" then
    os.execute(config.scancel .. " " .. tostring(jobid) .. " >/dev/null 2>&1")
    say("job " .. tostring(jobid) .. " cancelled (stepcast mode enforce)")
  else
    os.execute(config.scontrol .. " release " .. tostring(jobid) .. " >/dev/null 2>&1")
  end
  return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, pack_offset)
  if options["type"] ~= "sbatch" then return slurm.SUCCESS end
  local args = read_cmdline()
  local found = {}
  scan_options(args, found)
  if (found["stepcast"] or config.mode) == "off" then return slurm.SUCCESS end
  local script, script_args = find_script(args)
  if script then
    local lines = read_lines(script)
    if not lines then
      say("no pre-flight for " .. script .. ": cannot read it")
      return slurm.SUCCESS
    end
    return check_script(lines, script_args, script, args) == "refuse" and slurm.ERROR or slurm.SUCCESS
  end
  -- sbatch --wrap="CMD": a one-line script.
  local wrap = options["wrap"] or found["wrap"]
  if wrap and wrap ~= "" then
    return check_script({ "#!/bin/sh", wrap }, {}, "--wrap", args) == "refuse" and slurm.ERROR or slurm.SUCCESS
  end
  -- The script on standard input (sbatch <<EOF, sbatch < job.sh). A regular file can be read
  -- again from the start; a pipe has been read by sbatch already.
  local lines = read_lines("/proc/self/fd/0")
  if lines and #lines > 0 then
    return check_script(lines, {}, "the script on standard input", args) == "refuse" and slurm.ERROR or slurm.SUCCESS
  end
  -- Hold the job; slurm_cli_post_submit reads it back, pre-flights and releases (or cancels) it.
  if options["hold"] == "set" then
    say("no pre-flight for the script on standard input: the job is held by its submitter (--hold)")
    return slurm.SUCCESS
  end
  options["hold"] = "set"
  if slurm.cli_store then slurm.cli_store(0, "1") else _G.stepcast_held = "1" end
  say("the script came on standard input: holding the job for its pre-flight, which reads it back from slurmctld")
  return slurm.SUCCESS
end

-- For tests (tests/slurm_test.sh runs the evaluator alone under a Lua interpreter).
stepcast_cli_filter = { Shell = Shell, is_training = is_training, logical_lines = logical_lines }

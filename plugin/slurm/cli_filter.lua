--[[
stepcast pre-flight at sbatch time (Slurm cli_filter/lua; SPANK cannot see a batch job's
command). Install as cli_filter.lua beside slurm.conf and set CliFilterPlugins=cli_filter/lua.

For `sbatch [options] script.sh`, it reads the script, takes the first command line that is a
Megatron-LM (--num-layers) or torchtitan (--job.config_file) launch (joining "\" continuations;
shell variables are not expanded), and runs `stepcast preflight` on it with the job's GPU count
(-N/--nodes x --gpus-per-node or --gres=gpu[:type]:N, from the command line or #SBATCH lines).
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

  -- The script: #SBATCH options and the training command line.
  local sbatch_args, command, pending = {}, nil, ""
  for line in io.lines(script) do
    local opts = string.match(line, "^#SBATCH%s+(.*)$")
    if opts then
      for _, w in ipairs(words(opts)) do table.insert(sbatch_args, w) end
    elseif not string.match(line, "^%s*#") then
      local body, cont = string.match(line, "^(.-)%s*\\%s*$")
      if body then
        pending = pending .. body .. " "
      else
        local full = pending .. line; pending = ""
        if command == nil and (string.find(full, "--num[-_]layers") or string.find(full, "--job.config_file")) then
          command = full
        end
      end
    end
  end
  local found = {}
  scan_options(args, found)          -- the sbatch command line wins over #SBATCH lines
  scan_options(sbatch_args, found)
  local mode = found["stepcast"] or config.mode
  if mode == "off" then return slurm.SUCCESS end
  if not command then return slurm.SUCCESS end

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
  for _, w in ipairs(words(command)) do table.insert(cmd, quote(w)) end
  local out = os.tmpname()
  local status = os.execute(table.concat(cmd, " ") .. " > " .. out .. " 2>&1")
  local code = status
  if type(status) == "number" and status > 255 then code = math.floor(status / 256) end
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

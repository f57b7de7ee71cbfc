--[[
blox-slurm job-submit plugin (JobSubmitPlugins=lua; written for Slurm 22.05's Lua 5.1).

For a job whose partition is managed by blox-slurm:
  * optional hints in --comment ("blox:model=resnet50,iters=20000") are checked against a strict
    grammar; a malformed hint rejects the submission with a message to the user;
  * admin_comment is set to the mark the controller trusts (users cannot set admin_comment):
        blox:managed[,failopen][;key=value]...      hints normalized, keys sorted
  * the job is made requeueable (the controller preempts with `scontrol requeuehold`);
  * the job is held (priority 0) so Slurm's own scheduler does not start it -- unless the
    controller's heartbeat is stale: then it is left schedulable and marked ",failopen", so a dead
    controller never leaves new jobs held.
Jobs in other partitions are not touched at all.

A job that names no partition falls to the default partition: the one in part_list (the
partitions this user may use) with flag_default == 1. A comma-separated partition list must be
all managed or all unmanaged; a mixed list is rejected, because a held job could otherwise never
start in the unmanaged partitions and a released one could escape the policy there.

Configuration: blox_job_submit.conf beside this script (Slurm loads this script from the
directory of slurm.conf, so that is where the file is looked for), read when Slurm loads the
script: at slurmctld start, and on the next submission or update after this script's mtime
changed (`touch job_submit.lua` after editing the config; in 22.05 `scontrol reconfigure` alone
does not reload an unchanged script).
Any error in it means the defaults below plus one error line in slurmctld's log: an error raised
while loading would stop slurmctld from starting.

Hints are only ever matched with Lua patterns: never loaded, evaluated or given to a shell.
The functions in the global table `blox_job_submit` carry no Slurm state, so tests load this file
with a stub `slurm` table in a standalone lua5.1 and compare them with the Python parser
(blox_slurm/slurm/job_submit.py), which must implement the same grammar and messages.
--]]

local M = {}
blox_job_submit = M

-- job_desc.priority when an update does not touch priority (NO_VAL in slurm.h)
local NO_VAL = 4294967294
local NO_VAL16 = 65534

-- What an owner may not change on a managed job, with why: each would undo a decision the
-- scheduler made or is about to make. Strings are nil and numbers NO_VAL(16) when an update
-- leaves the field alone. (Dependencies and begin times stay the owner's: the controller
-- treats a job Slurm will not start as not runnable.)
local GUARDED = {
  { "partition", "moving it would leave it held where nothing schedules it" },
  { "requeue", "the scheduler preempts it by requeueing it" },
  { "req_nodes", "the scheduler places it" },
  { "exc_nodes", "the scheduler places it" },
  { "min_nodes", "its size is what the scheduler granted" },
  { "max_nodes", "its size is what the scheduler granted" },
  { "tres_per_node", "its GPUs are what the scheduler granted" },
  { "tres_per_job", "its GPUs are what the scheduler granted" },
  { "tres_per_socket", "its GPUs are what the scheduler granted" },
  { "tres_per_task", "its GPUs are what the scheduler granted" },
  { "num_tasks", "its size is what the scheduler granted" },
  { "cpus_per_task", "its CPUs are part of where it fits" },
}

--- Whether any GPU request of the job asks for at least one ("gres/gpu:2", "gres:gpu:v100:1",
--- "gres/gpu" alone means one; "gres/gpu:0" asks for none).
function M.asks_for_gpus(job_desc)
  for _, name in ipairs({ "tres_per_node", "tres_per_job", "tres_per_socket", "tres_per_task" }) do
    local value = job_desc[name]
    if value ~= nil then
      for item in value:gmatch("[^,]+") do
        if item:find("gpu", 1, true) ~= nil and tonumber(item:match(":(%d+)$") or "1") > 0 then
          return true
        end
      end
    end
  end
  return false
end

--- Why a submission cannot be scheduled job by job as the policy decides (nil if it can):
--- a job without GPUs is never started by the controller (it would wait held for ever); the
--- components of a heterogeneous job cannot be pinned and started as one; a node range
--- (-N 1-3) lets Slurm grow a grant past what the policy gave. (Arrays are welcome: the
--- controller splits their tasks off and schedules each as a job.)
function M.unschedulable_shape(job_desc)
  if not M.asks_for_gpus(job_desc) then
    return "this partition runs GPU jobs: ask for GPUs (--gres=gpu:N or --gpus=N) or submit "
      .. "to another partition"
  end
  local het = job_desc.het_job_offset
  if het ~= nil and het ~= NO_VAL then
    return "heterogeneous jobs are not scheduled here (their components cannot be started "
      .. "together): submit the components as separate jobs"
  end
  local max_nodes = job_desc.max_nodes
  if max_nodes ~= nil and max_nodes ~= NO_VAL and max_nodes ~= 0
      and max_nodes ~= job_desc.min_nodes then
    return "give a fixed node count (-N " .. tostring(job_desc.min_nodes) .. "), not a range: "
      .. "the scheduler grants an exact size"
  end
  return nil
end

--- The first guarded field an update sets, with the reason; nil when it sets none.
function M.guarded_change(job_desc)
  for _, entry in ipairs(GUARDED) do
    local value = job_desc[entry[1]]
    if value ~= nil and value ~= NO_VAL and value ~= NO_VAL16 then
      return entry[1], entry[2]
    end
  end
  return nil
end
local MAX_COMMENT = 512
local MAX_ELASTIC_GPUS = 4096
local HINT_PREFIX = "blox:"
local MARK = "blox:managed"
local FAILOPEN = ",failopen"

M.DEFAULTS = {
  managed_partitions = { "blox" },
  heartbeat = "/var/lib/blox-slurm/heartbeat",
  max_age = 90,
  operator_uids = {},
}

-- ------------------------------------------------------------------ hint grammar

-- A decimal integer 1..max; leading zeros are dropped. 15 digits are exact in a Lua 5.1 double.
local function whole_number(text, max)
  if not text:match("^[0-9]+$") then return nil end
  local digits = (text:gsub("^0+", ""))
  if digits == "" or #digits > 15 or tonumber(digits) > max then return nil end
  return digits
end

local HINTS = {
  duration = {
    check = function(v) return whole_number(v, 100000000) end,
    expect = "a whole number of seconds, 1 to 100000000",
  },
  iters = {
    check = function(v) return whole_number(v, 1000000000000) end,
    expect = "a whole number, 1 to 1000000000000",
  },
  model = {
    check = function(v)
      if #v <= 64 and v:match("^[A-Za-z0-9_.+%-]+$") then return v end
      return nil
    end,
    expect = "1 to 64 letters, digits or _ . + -",
  },
  -- Opt-in to resizing within [min_gpus, max_gpus]; jobs without it keep their GPU count.
  elastic = {
    check = function(v) return whole_number(v, 1) end,
    expect = "1",
  },
  min_gpus = {
    check = function(v) return whole_number(v, MAX_ELASTIC_GPUS) end,
    expect = "a whole number of GPUs, 1 to " .. MAX_ELASTIC_GPUS,
  },
  max_gpus = {
    check = function(v) return whole_number(v, MAX_ELASTIC_GPUS) end,
    expect = "a whole number of GPUs, 1 to " .. MAX_ELASTIC_GPUS,
  },
}
local ALLOWED = "allowed: duration, elastic, iters, max_gpus, min_gpus, model"

-- The elastic hints only make sense together (see job_submit.py's _check_elastic).
local function check_elastic(values)
  if (values.min_gpus ~= nil or values.max_gpus ~= nil) and values.elastic == nil then
    return "blox-slurm: hints min_gpus and max_gpus need elastic=1 in --comment"
  end
  if values.elastic ~= nil and values.max_gpus == nil then
    return "blox-slurm: elastic=1 needs max_gpus=N in --comment"
  end
  if tonumber(values.min_gpus or "1") > tonumber(values.max_gpus or MAX_ELASTIC_GPUS) then
    return "blox-slurm: min_gpus is above max_gpus in --comment"
  end
  return nil
end

local function unknown_key(key)
  -- Echo the key only when it cannot smuggle control characters or bulk into the message.
  if #key <= 32 and key:match("^[A-Za-z0-9_]+$") then
    return "blox-slurm: unknown hint '" .. key .. "' in --comment; " .. ALLOWED
  end
  return "blox-slurm: unknown hint in --comment; " .. ALLOWED
end

--- Hints of a --comment as the normalized ";key=value..." suffix of the mark (keys sorted).
--- A comment that does not start with "blox:" carries no hints: "". Invalid: nil, message.
function M.parse_hints(comment)
  if comment == nil or comment:sub(1, #HINT_PREFIX) ~= HINT_PREFIX then return "" end
  if #comment > MAX_COMMENT then
    return nil, "blox-slurm: --comment hints may be at most " .. MAX_COMMENT .. " characters"
  end
  local values, keys = {}, {}
  for pair in (comment:sub(#HINT_PREFIX + 1) .. ","):gmatch("([^,]*),") do
    if pair == "" then
      return nil, "blox-slurm: empty hint in --comment; expected blox:key=value[,key=value...]"
    end
    local key, value = pair:match("^([^=]*)=(.*)$")
    if key == nil then
      return nil, "blox-slurm: hint without '=' in --comment; expected key=value"
    end
    local spec = HINTS[key]
    if spec == nil then return nil, unknown_key(key) end
    if values[key] ~= nil then
      return nil, "blox-slurm: hint '" .. key .. "' given twice in --comment"
    end
    local normalized = spec.check(value)
    if normalized == nil then
      return nil, "blox-slurm: bad value for hint '" .. key .. "' in --comment: expected "
        .. spec.expect
    end
    values[key] = normalized
    keys[#keys + 1] = key
  end
  local err = check_elastic(values)
  if err ~= nil then return nil, err end
  table.sort(keys)
  local out = {}
  for _, key in ipairs(keys) do out[#out + 1] = ";" .. key .. "=" .. values[key] end
  return table.concat(out)
end

-- ------------------------------------------------------------------ heartbeat

--- The controller's heartbeat: one integer of Unix seconds (optionally surrounded by
--- whitespace), at most 64 bytes. Missing, unreadable or anything else: nil.
function M.read_heartbeat(path)
  local f = io.open(path, "rb")
  if f == nil then return nil end
  local text = f:read(65)
  f:close()
  if text == nil or #text > 64 then return nil end
  local digits = text:match("^[ \t\r\n]*([0-9]+)[ \t\r\n]*$")
  if digits == nil or #digits > 12 then return nil end
  return tonumber(digits)
end

--- Fresh when it is at most max_age seconds away from now in either direction: a timestamp
--- far in the future is as untrustworthy as an old one and must not hold jobs forever.
function M.heartbeat_fresh(path, max_age, now)
  local ts = M.read_heartbeat(path)
  return ts ~= nil and math.abs(now - ts) <= max_age
end

-- ------------------------------------------------------------------ configuration

local function trim(s) return (s:gsub("^[ \t\r]+", ""):gsub("[ \t\r]+$", "")) end

local function split_commas(text)
  local items = {}
  for item in (text .. ","):gmatch("([^,]*),") do items[#items + 1] = trim(item) end
  return items
end

local CONFIG_KEYS = {
  managed_partitions = function(v)
    local names = split_commas(v)
    for _, name in ipairs(names) do
      if not name:match("^[A-Za-z0-9_%-]+$") then return nil end
    end
    return names
  end,
  heartbeat = function(v)
    if v:match("^/[^ \t]*$") then return v end
    return nil
  end,
  max_age = function(v)
    local n = whole_number(v, 1000000)
    return n and tonumber(n)
  end,
  operator_uids = function(v)
    if v == "" then return {} end
    local uids = {}
    for _, item in ipairs(split_commas(v)) do
      if not item:match("^[0-9]+$") or #item > 10 then return nil end
      uids[#uids + 1] = tonumber(item)
    end
    return uids
  end,
}

--- "key = value" lines, '#' starts a comment. Returns the config table, or the defaults and a
--- message when the file has any error (a missing file is not an error: nil message).
function M.load_config(path)
  local f = io.open(path, "r")
  if f == nil then return M.DEFAULTS, nil end
  local config = {}
  for k, v in pairs(M.DEFAULTS) do config[k] = v end
  local seen, lineno, err = {}, 0, nil
  for raw in f:lines() do
    lineno = lineno + 1
    local line = trim((raw:gsub("#.*$", "")))
    if line ~= "" then
      local key, value = line:match("^([a-z_]+)[ \t]*=[ \t]*(.-)$")
      local parse = key and CONFIG_KEYS[key]
      local parsed = parse and parse(value)
      if parsed == nil then
        err = path .. ":" .. lineno .. ": expected one of managed_partitions, heartbeat, "
          .. "max_age, operator_uids with a valid value"
        break
      elseif seen[key] then
        err = path .. ":" .. lineno .. ": " .. key .. " given twice"
        break
      end
      seen[key] = true
      config[key] = parsed
    end
  end
  f:close()
  if err ~= nil then return M.DEFAULTS, err end
  return config, nil
end

local function script_dir()
  local source = debug.getinfo(1, "S").source
  return source:match("^@(.*)/[^/]*$")
end

local CONFIG
do
  local dir = script_dir()
  local err
  if dir == nil then
    CONFIG, err = M.DEFAULTS, "cannot tell which directory job_submit.lua was loaded from"
  else
    CONFIG, err = M.load_config(dir .. "/blox_job_submit.conf")
  end
  if err ~= nil then slurm.log_error("blox-slurm: %s; using the defaults", err) end
  M.config = CONFIG
end

local MANAGED = {}
for _, name in ipairs(CONFIG.managed_partitions) do MANAGED[name] = true end
local OPERATORS = { [0] = true }
for _, uid in ipairs(CONFIG.operator_uids) do OPERATORS[uid] = true end

-- ------------------------------------------------------------------ Slurm entry points

local function requested_partitions(job_desc, part_list)
  if job_desc.partition ~= nil then return split_commas(job_desc.partition) end
  for name, part in pairs(part_list) do
    if part.flag_default == 1 then return { name } end
  end
  return {}
end

-- "managed", "unmanaged", or "mixed"
local function classify(names)
  local managed = 0
  for _, name in ipairs(names) do
    if MANAGED[name] then managed = managed + 1 end
  end
  if managed == 0 then return "unmanaged" end
  if managed == #names then return "managed" end
  return "mixed"
end

local function reject(message, code)
  slurm.log_user(message)
  return code or slurm.ERROR
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local names = requested_partitions(job_desc, part_list)
  local kind = classify(names)
  if kind == "unmanaged" then return slurm.SUCCESS end
  if kind == "mixed" then
    return reject("blox-slurm: the partition list " .. table.concat(names, ",") .. " mixes "
      .. "partitions blox-slurm schedules with others; submit to one kind only")
  end
  local shape_err = M.unschedulable_shape(job_desc)
  if shape_err ~= nil then return reject("blox-slurm: " .. shape_err) end
  local hints, err = M.parse_hints(job_desc.comment)
  if hints == nil then return reject(err) end

  local mark = MARK
  if M.heartbeat_fresh(CONFIG.heartbeat, CONFIG.max_age, os.time()) then
    job_desc.priority = 0
  else
    mark = MARK .. FAILOPEN
    slurm.log_info("blox-slurm: controller heartbeat %s missing or stale: job of uid %d "
      .. "left schedulable (fail-open)", CONFIG.heartbeat, submit_uid)
  end
  job_desc.requeue = 1
  job_desc.admin_comment = mark .. hints
  return slurm.SUCCESS
end

-- scontrol (22.05) shows users only the error code of a refused update, not log_user's text:
-- say why in slurmctld's log too.
local function refuse(job_ptr, uid, message, code)
  slurm.log_info("blox-slurm: refused an update of job %d by uid %d: %s", job_ptr.job_id, uid,
    message)
  return reject(message, code)
end

--- Runs on every update, including each release the controller makes: touches nothing, only
--- refuses what would let a user step around the scheduler.
function slurm_job_modify(job_desc, job_ptr, part_list, modify_uid)
  local admin = job_ptr.admin_comment
  local marked = admin ~= nil and admin:sub(1, #MARK) == MARK
  local operator = OPERATORS[modify_uid] == true
  if marked and not operator then
    -- A submit-time hold is a *user* hold in Slurm (JobHeldUser), so without this check a
    -- user could `scontrol release` a job the policy has not started.
    local priority = job_desc.priority
    if priority ~= nil and priority ~= NO_VAL then
      return refuse(job_ptr, modify_uid, "blox-slurm schedules this job: its hold and priority "
        .. "are the scheduler's; cancel and resubmit to change it", slurm.ESLURM_ACCESS_DENIED)
    end
    local field, why = M.guarded_change(job_desc)
    if field ~= nil then
      return refuse(job_ptr, modify_uid, "blox-slurm schedules this job: " .. field .. " cannot "
        .. "change (" .. why .. "); cancel and resubmit to change it",
        slurm.ESLURM_ACCESS_DENIED)
    end
  end
  if not marked and not operator and job_desc.partition ~= nil
      and classify(split_commas(job_desc.partition)) ~= "unmanaged" then
    return refuse(job_ptr, modify_uid, "blox-slurm: a job cannot be moved into a partition "
      .. "blox-slurm schedules; submit it there instead", slurm.ESLURM_ACCESS_DENIED)
  end
  if job_desc.comment ~= nil
      and (marked or classify(split_commas(job_ptr.partition or "")) ~= "unmanaged") then
    local hints, err = M.parse_hints(job_desc.comment)
    if hints == nil then return refuse(job_ptr, modify_uid, err) end
  end
  return slurm.SUCCESS
end

return slurm.SUCCESS

-- Argo CD health of a quarry.dev SearchEngine (resource.customizations.health.quarry.dev_SearchEngine).
-- Ready=True, or scaled to zero while idle (reason Idle) -> Healthy; Stalled=True (settings that
-- cannot be rendered) -> Degraded; starting or not yet observed -> Progressing.
local hs = {status = "Progressing", message = "Waiting for the Quarry operator"}
local function condition(conditions, t)
  if conditions == nil then return nil end
  for _, c in ipairs(conditions) do
    if c.type == t then return c end
  end
  return nil
end
if obj.status == nil then
  return hs
end
local status = obj.status
local generation = obj.metadata and obj.metadata.generation
if generation ~= nil and status.observedGeneration ~= nil and status.observedGeneration < generation then
  hs.message = "Waiting for the operator to observe generation " .. tostring(generation)
  return hs
end
local stalled = condition(status.conditions, "Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = (stalled.reason or "Stalled") .. ": " .. (stalled.message or "")
  return hs
end
local ready = condition(status.conditions, "Ready")
if ready == nil then
  return hs
end
if ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or "Ready"
elseif ready.reason == "Idle" then
  -- Scaled to zero on purpose; it starts when a run needs it.
  hs.status = "Healthy"
  hs.message = ready.message or "Idle: scaled to zero until a run needs it"
else
  hs.message = (ready.reason or "Starting") .. ": " .. (ready.message or "")
end
return hs

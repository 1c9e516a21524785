-- Argo CD health of a quarry.dev ResearchSchedule (resource.customizations.health.quarry.dev_ResearchSchedule).
-- Stalled=True (a pattern, time zone or template that cannot be used) -> Degraded; spec.suspend ->
-- Suspended; Ready=True -> Healthy; not yet observed -> Progressing.
local hs = {status = "Progressing", message = "Waiting for the Quarry operator"}
local function condition(conditions, t)
  if conditions == nil then return nil end
  for _, c in ipairs(conditions) do
    if c.type == t then return c end
  end
  return nil
end
local status = obj.status
if status == nil then
  return hs
end
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
if obj.spec ~= nil and obj.spec.suspend == true then
  hs.status = "Suspended"
  hs.message = "spec.suspend is true: no new runs"
  return hs
end
local ready = condition(status.conditions, "Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = "next run at " .. (status.nextScheduleTime or "an unknown time")
  return hs
end
return hs

-- Argo CD health of a quarry.dev ResearchProfile (resource.customizations.health.quarry.dev_ResearchProfile).
-- A profile is configuration: problems with it (a missing Secret or key) show on the runs that use
-- it, as Stalled with a reason. Ready=False or Stalled=True -> Degraded; otherwise Healthy.
local hs = {status = "Healthy", message = "Profile accepted"}
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
  hs.status = "Progressing"
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
if ready ~= nil and ready.status == "False" then
  hs.status = "Degraded"
  hs.message = (ready.reason or "NotReady") .. ": " .. (ready.message or "")
elseif ready ~= nil then
  hs.message = ready.message or "Ready"
end
return hs

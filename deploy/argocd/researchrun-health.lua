-- Argo CD health of a quarry.dev ResearchRun (resource.customizations.health.quarry.dev_ResearchRun).
-- Completed -> Healthy; Failed or Cancelled -> Degraded; Stalled=True (a missing profile, Secret or
-- SearchEngine) -> Degraded; spec.suspend or a plan awaiting approval -> Suspended; anything in
-- progress -> Progressing.
local hs = {status = "Progressing", message = "Waiting for the Quarry operator"}
local function condition(conditions, t)
  if conditions == nil then return nil end
  for _, c in ipairs(conditions) do
    if c.type == t then return c end
  end
  return nil
end
if obj.status == nil then
  if obj.spec ~= nil and obj.spec.suspend == true then
    hs.status = "Suspended"
    hs.message = "spec.suspend is true"
  end
  return hs
end
local status = obj.status
local generation = obj.metadata and obj.metadata.generation
if generation ~= nil and status.observedGeneration ~= nil and status.observedGeneration < generation then
  hs.message = "Waiting for the operator to observe generation " .. tostring(generation)
  return hs
end
local succeeded = condition(status.conditions, "Succeeded")
local stalled = condition(status.conditions, "Stalled")
local phase = status.phase or "Pending"
if phase == "Completed" then
  hs.status = "Healthy"
  local budget = condition(status.conditions, "BudgetExceeded")
  if budget ~= nil and budget.status == "True" then
    hs.message = "Completed with a partial report (" .. (budget.reason or "BudgetExceeded") .. ")"
  else
    hs.message = (succeeded and succeeded.message) or "Completed"
  end
  return hs
end
if phase == "Failed" or phase == "Cancelled" then
  hs.status = "Degraded"
  local reason = (succeeded and succeeded.reason) or phase
  local message = (succeeded and succeeded.message) or status.message or phase
  hs.message = reason .. ": " .. message
  return hs
end
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = (stalled.reason or "Stalled") .. ": " .. (stalled.message or "")
  return hs
end
local awaiting = condition(status.conditions, "AwaitingApproval")
if awaiting ~= nil and awaiting.status == "True" then
  hs.status = "Suspended"
  hs.message = "AwaitingApproval: " .. (awaiting.message or "the plan waits for approval")
  return hs
end
if (obj.spec ~= nil and obj.spec.suspend == true) or (succeeded ~= nil and succeeded.reason == "Suspended") then
  hs.status = "Suspended"
  hs.message = status.message or "spec.suspend is true"
  return hs
end
hs.message = phase
if status.progress ~= nil then
  hs.message = phase .. " (" .. status.progress .. ")"
end
local reconciling = condition(status.conditions, "Reconciling")
if reconciling ~= nil and reconciling.reason == "WaitingForSearchEngine" then
  hs.message = phase .. ": " .. (reconciling.message or "waiting for the SearchEngine")
end
return hs

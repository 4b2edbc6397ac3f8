-- Shared by the queue's scripts (prepended to each): what an entry may be, checked here in
-- Redis, so that nothing larger than the bounds ever crosses the wire, and whether a delivery
-- still owns the entry it ran.

-- The fields of the encoding; anything else in an entry is not copied into a dead letter.
local KNOWN = { v = true, id = true, op = true, args = true, at = true, sig = true }

-- Why `fields` (a flat name, value list) do not fit the bounds, or nil when they do.
local function oversize(fields, max_field, max_args, max_fields)
  if #fields > 2 * max_fields then
    return 'the entry has ' .. math.floor(#fields / 2) .. ' fields, bound ' .. max_fields
  end
  for i = 1, #fields, 2 do
    local name, value = fields[i], fields[i + 1]
    local bound = max_field
    if name == 'args' then bound = max_args end
    if #name > 16 then
      return 'a field name is ' .. #name .. ' bytes, bound 16'
    end
    if #value > bound then
      if KNOWN[name] then
        return 'field `' .. name .. '` is ' .. #value .. ' bytes, bound ' .. bound
      end
      return 'a field is ' .. #value .. ' bytes, bound ' .. bound
    end
  end
  return nil
end

-- Each entry of `raw` ({id, fields} pairs, as XREADGROUP and XAUTOCLAIM give them) as
-- {id, deliveries, 'ok', fields}, or {id, deliveries, 'too_large', why} with no field at all.
-- An entry deleted meanwhile (listed with no fields by Redis 6.2) is left out.
local function checked(raw, deliveries_of, max_field, max_args, max_fields)
  local out = {}
  for _, entry in ipairs(raw) do
    local id, fields = entry[1], entry[2]
    if type(fields) == 'table' then
      local why = oversize(fields, max_field, max_args, max_fields)
      if why then
        out[#out + 1] = { id, deliveries_of(id), 'too_large', why }
      else
        out[#out + 1] = { id, deliveries_of(id), 'ok', fields }
      end
    end
  end
  return out
end

-- Nil when the delivery that ran entry `id` still owns it: pending, with `consumer`, delivered
-- `deliveries` times (so a claim by another worker, or by another worker of this instance,
-- is seen). Else why not: `not_pending` or `claimed`.
local function not_owned(key, group, id, consumer, deliveries)
  local pending = redis.call('XPENDING', key, group, id, id, 1)[1]
  if not pending then
    return 'not_pending'
  end
  if pending[2] ~= consumer or tonumber(pending[4]) ~= tonumber(deliveries) then
    return 'claimed'
  end
  return nil
end

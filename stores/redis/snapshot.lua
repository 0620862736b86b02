#!lua name=lambda_reader_VERSION

-- The realtime snapshot of one query, read by Redis itself in one call (stores.redis.reader).
--
-- A function runs atomically: the served pointer, the speed layer's commit and the served
-- generation's keys are read at one instant, between two transactions of the speed layer or of a
-- generation switch, never across one. The generation is known only once the pointer is read,
-- which is why this runs server-side: the realtime keys it reads are derived here from the
-- pointer, not declared by the caller (hence 'no-cluster').
--
-- The reader ends the library's and the function's names with a hash of this file, so workers of
-- two releases sharing one Redis each call their own code.
--
-- KEYS: the served pointer, the speed layer's commit.
-- ARGV: the realtime prefix (generation number and ':' follow it), the suffix of the generation's
--   set of counted views, the suffix of its set of visit flags, then three counts: field lists,
--   hashes, rankings. Then each field list (its length, its fields), each hash (its key suffix,
--   the 1-based index of its field list) and each ranking (its key suffix).
-- Reply: {served, commit} when nothing is served (nil where a key is missing), else
--   {served, commit, views, flags, hash 1 values, ..., ranking 1 (member, score, ...), ...}.

-- The served pointer and the commit (KEYS 1 and 2), and the served generation's key prefix (ARGV 1
-- followed by the generation and ':'); no prefix when nothing is served.
local function served_generation(keys, args)
  local served = redis.call('GET', keys[1])
  local commit = redis.call('GET', keys[2])
  if not served then
    return served, commit, nil
  end
  return served, commit, args[1] .. string.format('%d', cjson.decode(served).gen) .. ':'
end

local function snapshot(keys, args)
  local served, commit, prefix = served_generation(keys, args)
  if not prefix then
    return {false, commit}
  end
  local reply = {
    served,
    commit,
    redis.call('SMEMBERS', prefix .. args[2]),
    redis.call('SMEMBERS', prefix .. args[3]),
  }
  local n_lists, n_hashes, n_ranks = tonumber(args[4]), tonumber(args[5]), tonumber(args[6])
  local i = 7
  local lists = {}
  for l = 1, n_lists do
    local n = tonumber(args[i])
    lists[l] = {unpack(args, i + 1, i + n)}
    i = i + n + 1
  end
  local at = #reply
  for _ = 1, n_hashes do
    at = at + 1
    reply[at] = redis.call('HMGET', prefix .. args[i], unpack(lists[tonumber(args[i + 1])]))
    i = i + 2
  end
  for _ = 1, n_ranks do
    at = at + 1
    reply[at] = redis.call('ZRANGE', prefix .. args[i], 0, -1, 'WITHSCORES')
    i = i + 1
  end
  return reply
end

-- The filter table's realtime rows of one site and some days (stores.redis.filter_rows), read
-- the same way: the served pointer, the commit, the served generation's counted views, the counts
-- of the site's lists (its hash of sizes) and the lists at one instant, so the rows are exactly
-- those of the micro-batches the commit names, and the counts exactly theirs.
--
-- The lists are read only within the caller's budget: when the served generation is the one the
-- budget is for and neither the counted rows nor the counted bytes of the days' lists are above
-- it; otherwise the reply holds the counts alone, and the caller, which knows the served
-- generation now, refuses the query or asks again with a budget for it. So a read too big for the
-- caller's limits is never made.
--
-- KEYS: the served pointer, the speed layer's commit.
-- ARGV: the realtime prefix, the suffix of the generation's set of counted views, the suffix of the
--   site's hash of sizes (stores.redis.keys.filter_sizes_suffix), the budget: the generation it is
--   for ('' for no budget: the lists are read whatever their size), its rows and its bytes; the
--   suffix of the generation's set of visit flags; then per day its list's key suffix
--   (stores.redis.keys.filter_suffix), its rows field and its bytes field in the hash of sizes.
-- Reply: {served, commit} when nothing is served, else {served, commit, views, {rows, bytes, read},
--   visit flags, list 1's elements, ...}, the lists' elements only when read is 1.
local function filters(keys, args)
  local served, commit, prefix = served_generation(keys, args)
  if not prefix then
    return {false, commit}
  end
  local n = (#args - 7) / 3
  local rows, bytes = 0, 0
  if n > 0 then
    local fields = {}
    for d = 1, n do
      fields[2 * d - 1] = args[7 + 3 * d - 1]
      fields[2 * d] = args[7 + 3 * d]
    end
    local sizes = redis.call('HMGET', prefix .. args[3], unpack(fields))
    for d = 1, n do
      rows = rows + (tonumber(sizes[2 * d - 1]) or 0)
      bytes = bytes + (tonumber(sizes[2 * d]) or 0)
    end
  end
  local read = args[4] == ''
    or (prefix == args[1] .. args[4] .. ':' and rows <= tonumber(args[5]) and bytes <= tonumber(args[6]))
  local reply = {
    served,
    commit,
    redis.call('SMEMBERS', prefix .. args[2]),
    {rows, bytes, read and 1 or 0},
    redis.call('SMEMBERS', prefix .. args[7]),
  }
  if read then
    for d = 1, n do
      reply[#reply + 1] = redis.call('LRANGE', prefix .. args[7 + 3 * d - 2], 0, -1)
    end
  end
  return reply
end

redis.register_function{
  function_name = 'lambda_filters_VERSION',
  callback = filters,
  flags = {'no-writes', 'no-cluster'},
}

redis.register_function{
  function_name = 'lambda_snapshot_VERSION',
  callback = snapshot,
  flags = {'no-writes', 'no-cluster'},
}

package redisstore

import "github.com/redis/go-redis/v9"

// The record is one hash per key; its fields are named in record.go.
// Every script touches KEYS[1] only, so each runs on the one node that
// holds the key in Redis Cluster. Numbers are epoch seconds (exp) and
// epoch milliseconds (everything else); Lua compares them as doubles,
// exact far beyond year 9999 in milliseconds.

// claimScript implements Store.Claim: the key is free when absent,
// expired (exp < now_s), or IN_PROGRESS with the caller's own token, or
// IN_PROGRESS with its lease run out (lease < now_ms) and the caller's
// fingerprint. Free: the record is replaced and the script returns its
// first token (field ft): the caller's token for a new life (absent or
// expired), the existing record's life (ft, or tok on a hash written
// before ft existed) for a takeover or the owner's own re-claim. Not
// free: it returns the hash as a flat array (HGETALL).
//
//	KEYS[1]  key
//	ARGV     now_s, now_ms, fingerprint, token, lease_ms, exp_s, ttl_at_ms,
//	         request_id, trace (empty: none)
var claimScript = redis.NewScript(`
local ft = ARGV[4]
local cur = redis.call('HMGET', KEYS[1], 'st', 'fp', 'tok', 'lease', 'exp', 'ft')
if cur[1] then
  if tonumber(cur[5]) >= tonumber(ARGV[1]) then
    local free = cur[1] == 'IN_PROGRESS' and
      (cur[3] == ARGV[4] or (tonumber(cur[4]) < tonumber(ARGV[2]) and cur[2] == ARGV[3]))
    if not free then
      return redis.call('HGETALL', KEYS[1])
    end
    ft = cur[6] or cur[3]
  end
  redis.call('DEL', KEYS[1])
end
redis.call('HSET', KEYS[1], 'st', 'IN_PROGRESS', 'fp', ARGV[3], 'tok', ARGV[4],
  'lease', ARGV[5], 'exp', ARGV[6], 'cat', ARGV[2], 'uat', ARGV[2], 'ft', ft)
if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'rid', ARGV[8]) end
if ARGV[9] ~= '' then redis.call('HSET', KEYS[1], 'tc', ARGV[9]) end
redis.call('PEXPIREAT', KEYS[1], ARGV[7])
return ft
`)

// completeScript implements Store.Complete: only when the record carries
// the token and has not expired, it becomes COMPLETED with the result
// fields (an empty header or body argument removes the field) and the new
// expiry, and the script returns 1; otherwise it changes nothing and
// returns 0.
//
//	KEYS[1]  key
//	ARGV     token, now_s, exp_s, now_ms, res_status, omitted (0 or 1),
//	         headers, body, ttl_at_ms, request_id, trace (empty: none)
var completeScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'tok', 'exp')
if not cur[1] or cur[1] ~= ARGV[1] or tonumber(cur[2]) < tonumber(ARGV[2]) then
  return 0
end
redis.call('HSET', KEYS[1], 'st', 'COMPLETED', 'exp', ARGV[3], 'uat', ARGV[4],
  'rs', ARGV[5], 'ro', ARGV[6])
if ARGV[7] == '' then redis.call('HDEL', KEYS[1], 'rh') else redis.call('HSET', KEYS[1], 'rh', ARGV[7]) end
if ARGV[8] == '' then redis.call('HDEL', KEYS[1], 'rb') else redis.call('HSET', KEYS[1], 'rb', ARGV[8]) end
if ARGV[10] == '' then redis.call('HDEL', KEYS[1], 'rid') else redis.call('HSET', KEYS[1], 'rid', ARGV[10]) end
if ARGV[11] == '' then redis.call('HDEL', KEYS[1], 'tc') else redis.call('HSET', KEYS[1], 'tc', ARGV[11]) end
redis.call('PEXPIREAT', KEYS[1], ARGV[9])
return 1
`)

// releaseScript implements Store.Release: only when the record carries
// the token and is IN_PROGRESS, it ends the lease at once (lease 0) and
// returns 1; the record, with its fingerprint, stays until it expires.
// Otherwise it changes nothing and returns 0.
//
//	KEYS[1]  key
//	ARGV     token
var releaseScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'tok', 'st')
if cur[1] == ARGV[1] and cur[2] == 'IN_PROGRESS' then
  redis.call('HSET', KEYS[1], 'lease', '0')
  return 1
end
return 0
`)

// extendScript implements Store.Extend: only when the record carries the
// token, is IN_PROGRESS, has not expired (exp >= now_s) and its lease has
// not run out (lease >= now_ms), it sets the new lease, expiry and server
// TTL and returns 1; otherwise it changes nothing and returns 0.
//
//	KEYS[1]  key
//	ARGV     token, now_s, now_ms, lease_ms, exp_s, ttl_at_ms
var extendScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'tok', 'st', 'exp', 'lease')
if cur[1] ~= ARGV[1] or cur[2] ~= 'IN_PROGRESS' or tonumber(cur[3]) < tonumber(ARGV[2])
    or tonumber(cur[4]) < tonumber(ARGV[3]) then
  return 0
end
redis.call('HSET', KEYS[1], 'lease', ARGV[4], 'exp', ARGV[5], 'uat', ARGV[3])
redis.call('PEXPIREAT', KEYS[1], ARGV[6])
return 1
`)

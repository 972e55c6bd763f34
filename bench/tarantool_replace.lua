-- Durable writes in Tarantool memtx, the peer of `ataman bench engine`:
-- N fibers each doing box.space:replace of 16-digit decimal keys (uniform
-- in 0..KEYS) and VALUE-byte values, WAL mode fsync (each transaction is
-- acknowledged after the WAL write and fsync; Tarantool groups fibers'
-- transactions into one write like ataman's WAL thread).
--
-- usage: tarantool tarantool_replace.lua WORK_DIR OPS FIBERS KEYS VALUE_BYTES
-- prints one JSON line: ops, fibers, elapsed_sec, ops_per_sec, p50_us, p99_us, p999_us
local work_dir, ops, fibers, keys, value_bytes = arg[1], tonumber(arg[2]), tonumber(arg[3]), tonumber(arg[4]), tonumber(arg[5])
box.cfg{
    work_dir = work_dir,
    wal_mode = 'fsync',
    memtx_memory = 1024 * 1024 * 1024,
    log = work_dir .. '/tarantool.log',
    checkpoint_interval = 0,
}
local space = box.schema.space.create('bench', {if_not_exists = true})
space:create_index('pk', {type = 'hash', parts = {1, 'string'}, if_not_exists = true})

local fiber = require('fiber')
local clock = require('clock')
local json = require('json')

-- Incompressible values: windows of a pool of random bytes.
local POOL_BYTES = 1024 * 1024
local parts = {}
for i = 1, POOL_BYTES / 4 do
    parts[i] = string.char(math.random(0, 255), math.random(0, 255), math.random(0, 255), math.random(0, 255))
end
local pool = table.concat(parts)

local per_fiber = math.floor(ops / fibers)
local latencies = {}
local done = fiber.channel(fibers)
local start = clock.monotonic()
for f = 1, fibers do
    fiber.create(function()
        for _ = 1, per_fiber do
            local key = string.format('%016d', math.random(0, keys - 1))
            local offset = math.random(1, POOL_BYTES - value_bytes)
            local t0 = clock.monotonic()
            space:replace{key, pool:sub(offset, offset + value_bytes - 1)}
            latencies[#latencies + 1] = (clock.monotonic() - t0) * 1e6
        end
        done:put(true)
    end)
end
for _ = 1, fibers do done:get() end
local elapsed = clock.monotonic() - start
table.sort(latencies)
local function q(p) return latencies[math.max(1, math.ceil(#latencies * p))] end
print(json.encode({
    ops = #latencies, fibers = fibers, elapsed_sec = elapsed,
    ops_per_sec = #latencies / elapsed,
    p50_us = q(0.5), p99_us = q(0.99), p999_us = q(0.999),
}))
os.exit(0)

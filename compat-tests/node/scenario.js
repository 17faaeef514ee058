#!/usr/bin/env node
// kafkajs compat scenario: the same steps and checks as compat-tests/clients/scenario_common.py.
// Usage: node scenario.js BOOTSTRAP TOPIC   (exit 0 and a JSON summary on stdout; 1 on a mismatch)
//
// kafkajs has no assign(): its consumer always joins a group. To read "by assignment, from the
// beginning, without a group" this program uses kafkajs's own cluster/broker objects (the ones its
// consumer uses internally) and sends Fetch requests to each partition's leader itself.
// ListOffsets: admin.fetchTopicOffsets (earliest/latest), admin.fetchTopicOffsetsByTimestamp (which
// answers the high watermark when no record is that recent), and the raw ListOffsets answer (-1).
'use strict'

const { Kafka, Partitioners, logLevel } = require('kafkajs')

const CLIENT = 'kafkajs'
const PARTITIONS = 3
const N_RECORDS = 30
const N_KEYS = 5
const TS_STEP = 10
const TIMEOUT_MS = 1000 * Number(process.env.SCENARIO_TIMEOUT || 90)

class Mismatch extends Error {}

function expect(cond, msg) {
  if (!cond) throw new Mismatch(msg)
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const eq = (a, b) => JSON.stringify(a) === JSON.stringify(b)

function plan(t0) {
  const recs = []
  for (let i = 0; i < N_RECORDS; i++) {
    recs.push({ i, key: `key-${i % N_KEYS}`, value: `value-${i}`, ts: t0 + TS_STEP * i, headers: { idx: String(i) }, partition: -1, offset: -1 })
  }
  return recs
}

function checkMetadata(leaders, brokers) {
  expect(brokers.length >= 1, `metadata lists no brokers`)
  const ids = Object.keys(leaders).map(Number).sort()
  expect(eq(ids, [0, 1, 2]), `expected partitions [0,1,2], metadata has ${JSON.stringify(ids)}`)
  for (const p of ids) {
    expect(brokers.includes(leaders[p]), `partition ${p}: leader ${leaders[p]} is not one of the brokers ${brokers}`)
  }
}

function checkProduced(recs) {
  const byKey = {}
  for (const r of recs) {
    expect(r.partition >= 0 && r.partition < PARTITIONS, `record ${r.i}: acked partition ${r.partition} out of range`)
    ;(byKey[r.key] = byKey[r.key] || new Set()).add(r.partition)
  }
  for (const [k, ps] of Object.entries(byKey)) expect(ps.size === 1, `key ${k} went to several partitions: ${[...ps]}`)
  for (let p = 0; p < PARTITIONS; p++) {
    const offs = recs.filter(r => r.partition === p).map(r => r.offset)
    expect(eq(offs, offs.map((_, j) => j)), `partition ${p}: acked offsets in send order are ${offs}`)
  }
}

function checkConsumed(recs, consumed) {
  expect(consumed.length === recs.length, `consumed ${consumed.length} records, produced ${recs.length}`)
  for (let p = 0; p < PARTITIONS; p++) {
    const want = recs.filter(r => r.partition === p)
    const got = consumed.filter(c => c.partition === p)
    expect(eq(got.map(c => c.offset), want.map(r => r.offset)), `partition ${p}: consumed offsets ${got.map(c => c.offset)}, expected ${want.map(r => r.offset)}`)
    want.forEach((w, j) => {
      const g = got[j]
      const where = `partition ${p} offset ${w.offset}`
      expect(g.key === w.key, `${where}: key ${g.key}, expected ${w.key}`)
      expect(g.value === w.value, `${where}: value ${g.value}, expected ${w.value}`)
      expect(g.ts === w.ts, `${where}: timestamp ${g.ts}, expected ${w.ts}`)
      expect(eq(g.headers, w.headers), `${where}: headers ${JSON.stringify(g.headers)}, expected ${JSON.stringify(w.headers)}`)
    })
  }
}

function expectedOffsetForTime(recs, p, t) {
  const offs = recs.filter(r => r.partition === p && r.ts >= t).map(r => r.offset)
  return offs.length ? Math.min(...offs) : null
}

function offsetTimes(recs) {
  const ts = recs.map(r => r.ts)
  return [Math.min(...ts) - 1000, recs[N_RECORDS / 2].ts, Math.max(...ts) + 1000]
}

function checkOffsets(recs, earliest, latest, byTime, how) {
  for (let p = 0; p < PARTITIONS; p++) {
    const n = recs.filter(r => r.partition === p).length
    expect(earliest[p] === 0, `${how}: partition ${p}: earliest offset ${earliest[p]}, expected 0`)
    expect(latest[p] === n, `${how}: partition ${p}: latest offset ${latest[p]}, expected ${n}`)
  }
  for (const [t, got] of Object.entries(byTime)) {
    for (let p = 0; p < PARTITIONS; p++) {
      const want = expectedOffsetForTime(recs, p, Number(t))
      expect(got[p] === want, `${how}: partition ${p}: offset for time ${t} is ${got[p]}, expected ${want} (first offset with timestamp >= ${t})`)
    }
  }
}

function createClusterOf(kafka) {
  // Kafka's private createCluster (what kafka.consumer() uses), found by its symbol's description
  const sym = Object.getOwnPropertySymbols(kafka).find(s => s.description === 'private:Kafka:createCluster')
  expect(sym !== undefined, 'kafkajs internals changed: no private:Kafka:createCluster')
  return kafka[sym]({ allowAutoTopicCreation: false, isolationLevel: 0 })
}

async function scenario(bootstrap, topic) {
  const kafka = new Kafka({
    clientId: 'compat-kafkajs',
    brokers: [bootstrap],
    logLevel: logLevel.ERROR,
    connectionTimeout: 5000,
    requestTimeout: 15000,
    retry: { retries: 5, initialRetryTime: 200 },
  })

  const admin = kafka.admin()
  await admin.connect()
  try {
    const created = await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }], waitForLeaders: true, timeout: 15000 })
    expect(created === true, `createTopics returned ${created} (topic already existed?)`)
    let leaders = {}
    let brokers = []
    const deadline = Date.now() + 15000
    for (;;) {
      const md = await admin.fetchTopicMetadata({ topics: [topic] })
      leaders = {}
      for (const p of md.topics[0].partitions) leaders[p.partitionId] = p.leader
      brokers = (await admin.describeCluster()).brokers.map(b => b.nodeId)
      if ((Object.keys(leaders).length === PARTITIONS && Object.values(leaders).every(l => l >= 0)) || Date.now() > deadline) break
      await sleep(200)
    }
    checkMetadata(leaders, brokers)
  } finally {
    await admin.disconnect()
  }

  const recs = plan((Math.floor(Date.now() / 1000) - 60) * 1000)
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, idempotent: false, allowAutoTopicCreation: false })
  await producer.connect()
  try {
    // one record per send: the answer then names its partition and offset
    for (const r of recs) {
      const [md] = await producer.send({ topic, acks: -1, timeout: 15000, messages: [{ key: r.key, value: r.value, timestamp: String(r.ts), headers: r.headers }] })
      expect(md.errorCode === 0, `record ${r.i}: produce error ${md.errorCode}`)
      r.partition = md.partition
      r.offset = Number(md.baseOffset)
    }
  } finally {
    await producer.disconnect()
  }
  checkProduced(recs)

  // consume: Fetch from each partition's leader, from offset 0, until the high watermark
  const cluster = createClusterOf(kafka)
  await cluster.connect()
  const consumed = []
  const raw = {}
  try {
    await cluster.addTargetTopic(topic)
    await cluster.refreshMetadata()
    const partitions = [...Array(PARTITIONS).keys()]
    const byLeader = cluster.findLeaderForPartitions(topic, partitions)
    const deadline = Date.now() + 30000
    for (const [nodeId, ps] of Object.entries(byLeader)) {
      const broker = await cluster.findBroker({ nodeId })
      const next = Object.fromEntries(ps.map(p => [p, 0]))
      const done = new Set()
      while (done.size < ps.length && Date.now() < deadline) {
        const todo = ps.filter(p => !done.has(p))
        const res = await broker.fetch({
          replicaId: -1,
          isolationLevel: 0,
          maxWaitTime: 200,
          minBytes: 1,
          maxBytes: 1 << 20,
          topics: [{ topic, partitions: todo.map(p => ({ partition: p, fetchOffset: String(next[p]), maxBytes: 1 << 20 })) }],
        })
        for (const t of res.responses) {
          for (const part of t.partitions) {
            expect(part.errorCode === 0, `fetch partition ${part.partition}: error ${part.errorCode}`)
            for (const m of part.messages) {
              const off = Number(m.offset)
              if (off < next[part.partition] || m.isControlRecord) continue // a batch can start before the fetch offset
              const headers = {}
              for (const [k, v] of Object.entries(m.headers || {})) headers[k] = v.toString()
              consumed.push({ partition: part.partition, offset: off, key: m.key.toString(), value: m.value.toString(), ts: Number(m.timestamp), headers })
              next[part.partition] = off + 1
            }
            if (next[part.partition] >= Number(part.highWatermark)) done.add(part.partition)
          }
        }
      }
    }
    consumed.sort((a, b) => a.partition - b.partition || a.offset - b.offset)
    checkConsumed(recs, consumed)

    // raw ListOffsets answers: -1 means "no record that recent"
    const partitionList = partitions.map(p => ({ partition: p }))
    const rawOffsets = async spec => {
      const [t] = await cluster.fetchTopicsOffset([{ topic, partitions: partitionList, ...spec }])
      return Object.fromEntries(t.partitions.map(p => [p.partition, Number(p.offset)]))
    }
    raw.earliest = await rawOffsets({ fromBeginning: true })
    raw.latest = await rawOffsets({ fromBeginning: false })
    raw.byTime = {}
    for (const t of offsetTimes(recs)) {
      const o = await rawOffsets({ fromTimestamp: t })
      raw.byTime[t] = Object.fromEntries(Object.entries(o).map(([p, v]) => [p, v < 0 ? null : v]))
    }
  } finally {
    await cluster.disconnect()
  }
  checkOffsets(recs, raw.earliest, raw.latest, raw.byTime, 'ListOffsets')

  const admin2 = kafka.admin()
  await admin2.connect()
  try {
    const offs = await admin2.fetchTopicOffsets(topic)
    const earliest = Object.fromEntries(offs.map(o => [o.partition, Number(o.low)]))
    const latest = Object.fromEntries(offs.map(o => [o.partition, Number(o.high)]))
    const byTime = {}
    for (const t of offsetTimes(recs)) {
      const res = await admin2.fetchTopicOffsetsByTimestamp(topic, t)
      // kafkajs answers the high watermark when no record has a timestamp >= t
      byTime[t] = Object.fromEntries(res.map(o => [o.partition, Number(o.offset) === latest[o.partition] ? null : Number(o.offset)]))
    }
    checkOffsets(recs, earliest, latest, byTime, 'admin.fetchTopicOffsets*')
  } finally {
    await admin2.disconnect()
  }

  const keyPartition = {}
  for (const r of recs) keyPartition[r.key] = r.partition
  const counts = {}
  for (let p = 0; p < PARTITIONS; p++) counts[String(p)] = recs.filter(r => r.partition === p).length
  return { client: CLIENT, key_partition: keyPartition, partition_counts: counts, records: recs.map(r => [r.partition, r.offset, r.key, r.value]) }
}

async function main() {
  const [bootstrap, topic] = process.argv.slice(2)
  if (!bootstrap || !topic) {
    console.error('usage: node scenario.js BOOTSTRAP TOPIC')
    process.exit(2)
  }
  const timer = setTimeout(() => {
    console.error(`ERROR [${CLIENT}]: scenario did not finish within ${TIMEOUT_MS / 1000}s`)
    process.exit(2)
  }, TIMEOUT_MS)
  try {
    const result = await scenario(bootstrap, topic)
    clearTimeout(timer)
    process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(0))
  } catch (e) {
    if (e instanceof Mismatch) {
      console.error(`MISMATCH [${CLIENT}]: ${e.message}`)
      process.exit(1)
    }
    console.error(e)
    console.error(`ERROR [${CLIENT}]: the scenario raised (see above)`)
    process.exit(2)
  }
}

main()

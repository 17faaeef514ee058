// A kafkajs group member (see member_common.py for the contract).
// Usage: node member.js BOOTSTRAP TOPIC GROUP [INSTANCE_ID]   (kafkajs has no static membership)
const path = require('path')
const { Kafka, logLevel } = require(path.join(__dirname, '..', '..', 'node', 'node_modules', 'kafkajs'))

const [bootstrap, topic, group] = process.argv.slice(2)
const sessionTimeout = parseInt(process.env.SESSION_MS || '6000', 10)
const lifetimeMs = parseFloat(process.env.MEMBER_LIFETIME_S || '240') * 1000
const emit = (obj) => process.stdout.write(JSON.stringify(obj) + '\n')

async function main() {
  const kafka = new Kafka({ clientId: `kafkajs-${group}`, brokers: [bootstrap], logLevel: logLevel.ERROR })
  // kafkajs heartbeats from its fetch loop: a short maxWaitTime lets it notice a rebalance quickly.
  const consumer = kafka.consumer({
    groupId: group, sessionTimeout, heartbeatInterval: 1000, rebalanceTimeout: 20000, maxWaitTimeInMs: 250,
  })
  consumer.on(consumer.events.GROUP_JOIN, (e) => {
    const parts = (e.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b)
    emit({ event: 'assigned', partitions: parts })
  })
  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    try { await consumer.disconnect() } finally { process.exit(0) }
  }
  process.on('SIGTERM', stop)
  setTimeout(stop, lifetimeMs).unref()
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
      let last = null
      for (const m of batch.messages) {
        if (!isRunning() || isStale()) break
        emit({ event: 'record', p: batch.partition, o: parseInt(m.offset, 10) })
        resolveOffset(m.offset)
        last = parseInt(m.offset, 10)
      }
      if (last !== null) {
        await consumer.commitOffsets([{ topic, partition: batch.partition, offset: String(last + 1) }])
        emit({ event: 'committed', offsets: { [String(batch.partition)]: last + 1 } })
      }
      await heartbeat()
    },
  })
}

main().catch((e) => { console.error(e); process.exit(2) })

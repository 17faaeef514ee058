#!/usr/bin/env node
// kafkajs against a secured listener (compat-tests/test_security_clients.py).
// Usage: node security_client.js MODE BOOTSTRAP TOPIC      with SECURITY='{"ssl": {...}, "sasl": {...}}'
//   MODE roundtrip: produce RECORDS values, then read them back with a consumer group (committing), print
//                   {"values": [...]} on stdout
//   MODE connect:   only connect an admin client and list the topics; print {"error": name, "message": ...}
//                   when that fails, {"ok": true} when it works
// SECURITY.ssl: {"ca": PATH, "cert": PATH, "key": PATH} (files read here); SECURITY.sasl: kafkajs's own
// {"mechanism": "scram-sha-512" | "plain", "username", "password"}.
'use strict'

const fs = require('fs')
const path = require('path')
const { Kafka, logLevel } = require(path.join(__dirname, 'node_modules', 'kafkajs'))

const RECORDS = 5
const TIMEOUT_MS = 60000
const [mode, bootstrap, topic] = process.argv.slice(2)
const security = JSON.parse(process.env.SECURITY || '{}')

function options() {
  const out = {}
  if (security.ssl) {
    out.ssl = { ca: [fs.readFileSync(security.ssl.ca, 'utf-8')] }
    if (security.ssl.cert) {
      out.ssl.cert = fs.readFileSync(security.ssl.cert, 'utf-8')
      out.ssl.key = fs.readFileSync(security.ssl.key, 'utf-8')
    }
  }
  if (security.sasl) out.sasl = security.sasl
  return out
}

// No retries: a refused login or a closed connection is reported at once, not after kafkajs's backoff.
const kafka = new Kafka({
  clientId: topic, brokers: [bootstrap], logLevel: logLevel.NOTHING, connectionTimeout: 10000,
  retry: { retries: mode === 'connect' ? 0 : 5 }, ...options(),
})

async function roundtrip() {
  const producer = kafka.producer()
  await producer.connect()
  const values = Array.from({ length: RECORDS }, (_, i) => `kjs-${i}`)
  for (const value of values) await producer.send({ topic, acks: -1, messages: [{ value }] })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: `g-${topic}`, sessionTimeout: 10000, maxWaitTimeInMs: 250 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const got = []
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`consumed ${got.length} of ${RECORDS} records`)), TIMEOUT_MS)
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        got.push(message.value.toString())
        await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }])
        if (got.length === RECORDS) { clearTimeout(timer); resolve() }
      },
    }).catch(reject)
  })
  const admin = kafka.admin()
  await admin.connect()
  const committed = await admin.fetchOffsets({ groupId: `g-${topic}`, topics: [topic] })
  await admin.disconnect()
  await consumer.disconnect()
  return { values: got, committed: committed[0].partitions.map(p => Number(p.offset)) }
}

async function connect() {
  const admin = kafka.admin()
  try {
    await admin.connect()
    await admin.listTopics()
    return { ok: true }
  } catch (e) {
    return { error: e.name, message: e.message }
  } finally {
    await admin.disconnect().catch(() => {})
  }
}

const run = mode === 'roundtrip' ? roundtrip : connect
run().then(
  (out) => { process.stdout.write(JSON.stringify(out) + '\n'); process.exit(0) },
  (e) => { console.error(e); process.exit(2) },
)

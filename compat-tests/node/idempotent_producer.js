#!/usr/bin/env node
// kafkajs idempotent producer for compat-tests/test_idempotent_retries.py: sends COUNT records "v-<i>" to
// partition 0 of TOPIC in batches of 20, through a proxy that loses some Produce responses; exits 0 once
// every send is acknowledged, 1 (with the error on stderr) otherwise.
// Usage: node idempotent_producer.js BOOTSTRAP TOPIC COUNT
'use strict'

const { Kafka, logLevel } = require('kafkajs')

async function main() {
  const [bootstrap, topic, count] = process.argv.slice(2)
  const kafka = new Kafka({
    clientId: 'idempotent-kafkajs',
    brokers: [bootstrap],
    logLevel: logLevel.NOTHING,
    requestTimeout: 5000,
    retry: { retries: 30, initialRetryTime: 50, maxRetryTime: 1000 },
  })
  // kafkajs allows idempotence only with one request in flight
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  try {
    for (let i = 0; i < Number(count); i += 20) {
      const messages = []
      for (let j = i; j < Math.min(i + 20, Number(count)); j++) messages.push({ value: `v-${j}`, partition: 0 })
      await producer.send({ topic, acks: -1, messages })
    }
  } finally {
    await producer.disconnect()
  }
}

main().then(
  () => process.exit(0),
  e => {
    console.error(`${e.name}: ${e.message}`)
    process.exit(1)
  },
)

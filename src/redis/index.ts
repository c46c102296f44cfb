/**
 * @module
 * The service's one Redis home: client construction by role, outage classification, the keyspace
 * table and URL redaction. See README.md.
 */
export {
  connectRedis,
  createRedisClient,
  quitRedis,
  RECONNECT_MAX_DELAY_MS,
  reconnectDelayMs,
  redisOptions,
  whenReady,
} from './clients.js'
export type { RedisRole } from './clients.js'
export { isRedisUnreachable, queueUnavailable, UNREACHABLE_MESSAGES } from './errors.js'
export { keyspace, QUEUE_NAMES } from './keyspace.js'
export type { Keyspace, QueueName } from './keyspace.js'
export { redactUrl } from './redact.js'

import type { Consumer } from './types.js'

/**
 * `consumer` as its queue hands it out: added to the queue's `consumers` (which the queue's own
 * `close()` closes) and taken out of them once closed by its owner.
 */
export function trackedConsumer(consumers: Set<Consumer>, consumer: Consumer): Consumer {
  consumers.add(consumer)
  return {
    workerId: consumer.workerId,
    get activeCount() {
      return consumer.activeCount
    },
    close: async (o) => {
      await consumer.close(o)
      consumers.delete(consumer)
    },
  }
}

export { LifecycleEventType } from './events.js'
export type { LifecycleEvent, LifecycleHook } from './events.js'
export { LifecycleDispatcher } from './dispatcher.js'
export type { LifecycleEventInit } from './dispatcher.js'

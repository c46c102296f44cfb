import { MemorySessionStore } from '../../../src/sessions/index.js'
import { runSessionStoreSuite } from './store-suite.js'

runSessionStoreSuite('memory', async () => {
  const store = new MemorySessionStore()
  return { store, cleanup: () => store.close() }
})

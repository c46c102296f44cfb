import { MemorySessionStore } from '../../../src/sessions/index.js'
import { runSessionStoreSuite } from '../../support/session-store-suite.js'

runSessionStoreSuite('memory', async () => {
  const store = new MemorySessionStore()
  return { store, cleanup: () => store.close() }
})

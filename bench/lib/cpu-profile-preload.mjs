// Preloaded (`node --import`) into the processes a bench starts with `--profile <dir>`: SIGUSR2
// starts the V8 CPU profiler, the next SIGUSR2 stops it and writes
// `<dir>/<role>-<pid>-<n>.cpuprofile` (open in Chrome DevTools or speedscope). Only the measured
// phases are profiled, not the start-up (tsx compiling the sources).
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector'
import process from 'node:process'

const dir = process.env.SBX_BENCH_PROFILE_DIR
const role = ['serve', 'api', 'worker'].find((r) => process.argv.includes(r))
if (dir && role && process.argv.some((a) => a.endsWith('sbx.js'))) {
  const session = new Session()
  session.connect()
  let running = false
  let n = 0
  process.on('SIGUSR2', () => {
    if (!running) {
      running = true
      session.post('Profiler.enable', () =>
        session.post('Profiler.setSamplingInterval', { interval: 250 }, () => session.post('Profiler.start')),
      )
      return
    }
    running = false
    session.post('Profiler.stop', (err, r) => {
      if (!err) writeFileSync(`${dir}/${role}-${process.pid}-${++n}.cpuprofile`, JSON.stringify(r.profile))
    })
  })
}

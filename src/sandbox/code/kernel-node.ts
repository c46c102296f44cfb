/**
 * The JavaScript kernel: a Node script the runner writes into the sandbox and starts as a background
 * process with the protocol on fds 3 (answers) and 4 (requests) and fds 0/1 on /dev/null, so user
 * code cannot read or corrupt it. One JSON request per line; one `\x1e` + JSON line per answer. Cells
 * run in one `vm` context, so globals and top-level `let`/`const`/functions persist; `console` and
 * `process.stdout/stderr.write` are captured per cell. The cell's value is its completion value;
 * `display(obj)` and that value give rich outputs through `_repr_png_()` / `_repr_html_()` / ….
 * A cell's timeout (and SIGINT) interrupts synchronous code (`vm` timeout, `breakOnSigint`) and stops
 * waiting for an awaited promise; the context survives.
 */
export const NODE_KERNEL = String.raw`
'use strict'
const fs = require('node:fs')
const vm = require('node:vm')
const util = require('node:util')
const { Console } = require('node:console')
const { Writable } = require('node:stream')
const readline = require('node:readline')

const CAP = Number(process.env.SBX_KERNEL_OUTPUT_CAP || 1048576)
const MIME = [['text/html', '_repr_html_'], ['image/png', '_repr_png_'], ['image/jpeg', '_repr_jpeg_'],
  ['image/svg+xml', '_repr_svg_'], ['text/markdown', '_repr_markdown_'], ['text/latex', '_repr_latex_'],
  ['application/json', '_repr_json_'], ['application/javascript', '_repr_javascript_']]

let cell = null
function sink(name) {
  return new Writable({ write(chunk, _enc, cb) { append(name, String(chunk)); cb() } })
}
function append(name, text) {
  if (!cell) return
  const room = CAP - cell[name].length
  if (text.length > room) { cell.truncated = true; text = text.slice(0, Math.max(0, room)) }
  cell[name] += text
}
function bundle(obj) {
  const data = {}
  if (obj !== null && (typeof obj === 'object' || typeof obj === 'function')) {
    for (const [mime, meth] of MIME) {
      if (typeof obj[meth] !== 'function') continue
      let v
      try { v = obj[meth]() } catch { continue }
      if (v === undefined || v === null) continue
      if (v instanceof Uint8Array) v = Buffer.from(v).toString('base64')
      else if (mime === 'application/json' && typeof v !== 'string') v = JSON.stringify(v)
      data[mime] = String(v)
    }
  }
  data['text/plain'] = typeof obj === 'string' ? util.inspect(obj) : util.inspect(obj, { depth: 4 })
  return data
}
function display(...objs) {
  if (!cell) return
  for (const o of objs) cell.outputs.push({ type: 'display', data: bundle(o) })
}

const out = sink('stdout'), err = sink('stderr')
const userConsole = new Console({ stdout: out, stderr: err })
const realWrite = { out: process.stdout.write, err: process.stderr.write }
const context = vm.createContext({
  console: userConsole, display, require, module, process, Buffer, URL, URLSearchParams,
  TextEncoder, TextDecoder, setTimeout, clearTimeout, setInterval, clearInterval, setImmediate,
  clearImmediate, queueMicrotask, structuredClone, fetch: globalThis.fetch, AbortController, AbortSignal,
  atob, btoa, performance,
})
vm.runInContext('globalThis.global = globalThis', context)

let count = 0
function send(msg) { fs.writeSync(3, '\x1e' + JSON.stringify(msg) + '\n') }
function errorOf(e, timedOut, ms) {
  if (timedOut) return { name: 'TimeoutError', value: 'the cell ran past its timeout (' + ms + ' ms) and was interrupted', traceback: '' }
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e))
    return { name: String(e.name || 'Error'), value: String(e.message || ''), traceback: String(e.stack || '') }
  return { name: 'Error', value: util.inspect(e), traceback: 'Uncaught ' + util.inspect(e) }
}

async function runCell(req) {
  count++
  const ms = Number(req.timeoutMs || 0)
  cell = { stdout: '', stderr: '', outputs: [], truncated: false }
  process.stdout.write = (c, ...a) => { append('stdout', String(c)); const cb = a.find((x) => typeof x === 'function'); if (cb) cb(); return true }
  process.stderr.write = (c, ...a) => { append('stderr', String(c)); const cb = a.find((x) => typeof x === 'function'); if (cb) cb(); return true }
  const savedEnv = Object.assign({}, process.env)
  Object.assign(process.env, req.env || {})
  const t0 = Date.now()
  let value, error = null, timedOut = false
  try {
    let script
    try {
      script = new vm.Script(req.code, { filename: '<cell>' })
    } catch (e) {
      if (!(e instanceof SyntaxError) || !/await/.test(String(e.message))) throw e
      script = new vm.Script('(async () => {\n' + req.code + '\n})()', { filename: '<cell>', lineOffset: -1 })
    }
    value = script.runInContext(context, ms > 0 ? { timeout: ms, breakOnSigint: true } : { breakOnSigint: true })
    if (value && typeof value.then === 'function') {
      let timer
      const left = ms > 0 ? Math.max(1, ms - (Date.now() - t0)) : 0
      value = await Promise.race([value, new Promise((_, rej) => { if (left) timer = setTimeout(() => rej(Object.assign(new Error('timeout'), { code: 'ERR_SCRIPT_EXECUTION_TIMEOUT' })), left) })])
      clearTimeout(timer)
    }
  } catch (e) {
    timedOut = !!(e && e.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT')
    const interrupted = !!(e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED')
    error = errorOf(e, timedOut, ms)
    if (interrupted) error = { name: 'KeyboardInterrupt', value: 'the cell was interrupted (SIGINT)', traceback: '' }
  }
  if (error === null && value !== undefined) {
    context._ = value
    cell.outputs.push({ type: 'result', data: bundle(value) })
  }
  process.stdout.write = realWrite.out
  process.stderr.write = realWrite.err
  for (const k of Object.keys(process.env)) if (!(k in savedEnv)) delete process.env[k]
  Object.assign(process.env, savedEnv)
  const c = cell
  cell = null
  return { id: req.id, stdout: c.stdout, stderr: c.stderr, outputs: c.outputs, error, executionCount: count,
    timedOut, truncated: c.truncated, durationMs: Date.now() - t0 }
}

process.on('SIGINT', () => {})
process.on('uncaughtException', (e) => { if (cell) append('stderr', 'Uncaught ' + (e && e.stack ? e.stack : String(e)) + '\n') })
process.on('unhandledRejection', (e) => { if (cell) append('stderr', 'Unhandled rejection: ' + (e && e.stack ? e.stack : String(e)) + '\n') })

const rl = readline.createInterface({ input: fs.createReadStream('', { fd: 4 }) })
const queue = []
let busy = false
async function pump() {
  if (busy) return
  busy = true
  while (queue.length) {
    const line = queue.shift()
    let req
    try { req = JSON.parse(line) } catch { continue }
    send(await runCell(req))
  }
  busy = false
}
rl.on('line', (line) => { if (line.trim()) { queue.push(line); void pump() } })
rl.on('close', () => process.exit(0))
`

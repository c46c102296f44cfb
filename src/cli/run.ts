import { parseArgs } from 'node:util'
import { AppError } from '../errors.js'
import { commands, helpText } from './commands.js'
import { paint, processIO, UsageError } from './output.js'

/** Runs the `sbx` CLI with `argv` (without node and script); resolves to the exit code. */
export async function runCli(argv: readonly string[], io = processIO): Promise<number> {
  const { positionals, values } = parseArgs({
    args: [...argv],
    strict: false,
    allowPositionals: true,
    options: { help: { type: 'boolean', short: 'h' }, json: { type: 'boolean' } },
  })
  const name = positionals.slice(0, 2).join(' ')
  const match =
    commands.find((c) => c.name === name) ?? commands.find((c) => c.name === (positionals[0] ?? ''))
  if (!match) {
    if (positionals.length > 0 && values.help !== true) io.err(`unknown command: ${positionals.join(' ')}`)
    io.out(helpText())
    return positionals.length === 0 || values.help === true ? 0 : 2
  }
  const rest = argv.slice(argv.indexOf(match.name.split(' ').at(-1) ?? '') + 1)
  try {
    return await match.run(rest, io)
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(err.message)
      return 2
    }
    if (err instanceof AppError) {
      io.err(paint(io, 'red', `error: ${err.code}: ${err.message}`))
      return 1
    }
    io.err(paint(io, 'red', `error: ${err instanceof Error ? err.message : String(err)}`))
    return 1
  }
}

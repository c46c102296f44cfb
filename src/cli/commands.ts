import { parseArgs } from 'node:util'
import { extensionInspect } from './extension-inspect.js'
import type { CliIO } from './output.js'

/** One `sbx` subcommand. `name` may have two words (`extension inspect`). */
export interface CliCommand {
  readonly name: string
  readonly summary: string
  run(args: readonly string[], io: CliIO): Promise<number>
}

/** Every subcommand, in help order. */
export const commands: CliCommand[] = [
  {
    name: 'extension inspect',
    summary: 'load an extension module and print its manifest and contributions',
    async run(args, io) {
      const { positionals, values } = parseArgs({
        args: [...args],
        allowPositionals: true,
        options: { json: { type: 'boolean' } },
      })
      return extensionInspect(positionals, io, { json: values.json === true })
    },
  },
]

/** The top-level help. */
export function helpText(): string {
  const width = Math.max(...commands.map((c) => c.name.length))
  return [
    'usage: sbx <command> [options]',
    '',
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'Run `sbx <command> --help` for the options of a command.',
  ].join('\n')
}

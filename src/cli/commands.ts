import { parseArgs } from 'node:util'
import type { CliIO } from './output.js'

// Each command loads its own modules when it runs: `sbx --help`, `sbx sessions ls` and the other
// client commands need none of the runtime (providers, queue, HTTP server), which costs seconds of
// start-up under tsx.
const runtime = () => import('./runtime-commands.js')
const client = () => import('./client-commands.js')
const engine = () => import('./engine-commands.js')

/** One `sbx` subcommand. `name` may have two words (`extension inspect`). */
export interface CliCommand {
  readonly name: string
  readonly summary: string
  run(args: readonly string[], io: CliIO): Promise<number>
}

/** Every subcommand, in help order. */
export const commands: CliCommand[] = [
  {
    name: 'serve',
    summary: 'API + exec worker + agent runs in one process (embedded default; --redis for fleet mode)',
    run: async (a, io) => (await runtime()).serveCommand(a, io, 'all'),
  },
  {
    name: 'api',
    summary: 'the HTTP API only (fleet mode: --redis or REDIS_URL)',
    run: async (a, io) => (await runtime()).serveCommand(a, io, 'api'),
  },
  {
    name: 'worker',
    summary: 'a fleet exec worker (--redis or REDIS_URL, --concurrency); --agent: an agent-run worker',
    run: async (a, io) => (await runtime()).workerCommand(a, io),
  },
  {
    name: 'exec',
    summary: 'run one command in a sandbox: sbx exec [--provider --profile --session --timeout] -- <command>',
    run: async (a, io) => (await runtime()).execCommand(a, io),
  },
  {
    name: 'sessions ls',
    summary: "list the tenant's sessions (through the API)",
    run: async (a, io) => (await client()).sessionsCommand('ls', a, io),
  },
  {
    name: 'sessions rm',
    summary: 'delete a session and its sandbox (through the API)',
    run: async (a, io) => (await client()).sessionsCommand('rm', a, io),
  },
  {
    name: 'agent run',
    summary: 'start an agent run on the server and stream its events',
    run: async (a, io) => (await client()).agentRunCommand(a, io),
  },
  {
    name: 'providers',
    summary: 'providers, their health and profiles',
    run: async (a, io) => (await runtime()).providersCommand(a, io),
  },
  {
    name: 'engine ls',
    summary: "the fleet's Docker engines, their state and load (queue.engineRouting)",
    run: async (a, io) => (await engine()).engineCommand('ls', a, io),
  },
  {
    name: 'engine drain',
    summary: 'no new sessions on an engine; its running commands finish, its sessions move',
    run: async (a, io) => (await engine()).engineCommand('drain', a, io),
  },
  {
    name: 'engine undrain',
    summary: 'an engine takes new sessions again',
    run: async (a, io) => (await engine()).engineCommand('undrain', a, io),
  },
  {
    name: 'reap',
    summary: 'destroy every owned sandbox without a live lease (--engine: stopped containers, no Redis)',
    run: async (a, io) => (await import('./reap-engine.js')).reapDispatch(a, io),
  },
  {
    name: 'config check',
    summary: 'validate the config file and print what it resolves to',
    run: async (a, io) => (await runtime()).configCheckCommand(a, io),
  },
  {
    name: 'setup',
    summary: 'install/start the Docker engine and build the base image (idempotent)',
    run: async (a, io) => (await import('./setup-command.js')).setupCommand(a, io),
  },
  {
    name: 'image build',
    summary:
      'build the base sandbox image (same as setup); dev: also the dev image; --compose: also the compose images',
    run: async (a, io) => (await import('./setup-command.js')).setupCommand(a, io),
  },
  {
    name: 'extension inspect',
    summary: 'load an extension module and print its manifest and contributions',
    async run(args, io) {
      const { positionals, values } = parseArgs({
        args: [...args],
        allowPositionals: true,
        options: { json: { type: 'boolean' }, config: { type: 'string', short: 'c' } },
      })
      const { loadConfig } = await import('../config/load.js')
      const { extensionInspect } = await import('./extension-inspect.js')
      const configured = loadConfig(values.config ? { file: values.config } : {}).config.extensions
      return extensionInspect(positionals, io, { json: values.json === true, configured })
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

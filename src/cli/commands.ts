import { parseArgs } from 'node:util'
import { agentRunCommand, sessionsCommand } from './client-commands.js'
import { loadConfig } from '../config/load.js'
import { extensionInspect } from './extension-inspect.js'
import {
  configCheckCommand,
  execCommand,
  providersCommand,
  serveCommand,
  workerCommand,
} from './runtime-commands.js'
import type { CliIO } from './output.js'
import { reapDispatch } from './reap-engine.js'
import { engineCommand } from './engine-commands.js'
import { setupCommand } from './setup-command.js'

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
    run: (a, io) => serveCommand(a, io, 'all'),
  },
  {
    name: 'api',
    summary: 'the HTTP API only (fleet mode: --redis or REDIS_URL)',
    run: (a, io) => serveCommand(a, io, 'api'),
  },
  {
    name: 'worker',
    summary: 'a fleet exec worker (--redis or REDIS_URL, --concurrency); --agent: an agent-run worker',
    run: workerCommand,
  },
  {
    name: 'exec',
    summary: 'run one command in a sandbox: sbx exec [--provider --profile --session --timeout] -- <command>',
    run: execCommand,
  },
  {
    name: 'sessions ls',
    summary: "list the tenant's sessions (through the API)",
    run: (a, io) => sessionsCommand('ls', a, io),
  },
  {
    name: 'sessions rm',
    summary: 'delete a session and its sandbox (through the API)',
    run: (a, io) => sessionsCommand('rm', a, io),
  },
  {
    name: 'agent run',
    summary: 'start an agent run on the server and stream its events',
    run: agentRunCommand,
  },
  { name: 'providers', summary: 'providers, their health and profiles', run: providersCommand },
  {
    name: 'engine ls',
    summary: "the fleet's Docker engines, their state and load (queue.engineRouting)",
    run: (a, io) => engineCommand('ls', a, io),
  },
  {
    name: 'engine drain',
    summary: 'no new sessions on an engine; its running commands finish, its sessions move',
    run: (a, io) => engineCommand('drain', a, io),
  },
  {
    name: 'engine undrain',
    summary: 'an engine takes new sessions again',
    run: (a, io) => engineCommand('undrain', a, io),
  },
  {
    name: 'reap',
    summary: 'destroy every owned sandbox without a live lease (--engine: stopped containers, no Redis)',
    run: reapDispatch,
  },
  {
    name: 'config check',
    summary: 'validate the config file and print what it resolves to',
    run: configCheckCommand,
  },
  {
    name: 'setup',
    summary: 'install/start the Docker engine and build the base image (idempotent)',
    run: setupCommand,
  },
  {
    name: 'image build',
    summary:
      'build the base sandbox image (same as setup); dev: also the dev image; --compose: also the compose images',
    run: setupCommand,
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

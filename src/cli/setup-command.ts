import { spawn } from 'node:child_process'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { loadConfig } from '../config/load.js'
import { DEV_IMAGE, usesDevImage } from '../sandbox/profiles.js'
import type { CliIO } from './output.js'
import { UsageError } from './output.js'

const ROOT = resolve(fileURLToPath(import.meta.url), '..', '..', '..')

/** Runs `bash scripts/<script> [args]` with inherited stdio; resolves with its exit code. */
function runScript(script: string, args: readonly string[], io: CliIO): Promise<number> {
  return new Promise((resolveExit) => {
    const child = spawn('bash', [join(ROOT, 'scripts', script), ...args], { stdio: 'inherit' })
    child.on('exit', (code) => resolveExit(code ?? 1))
    child.on('error', (err) => {
      io.err(`cannot run scripts/${script}: ${err.message}`)
      resolveExit(1)
    })
  })
}

/** Profiles of the config file (not the built-in ones) that run the dev image. */
function configuredDevProfiles(configFile: string | undefined): string[] {
  try {
    const { config } = loadConfig(configFile ? { file: configFile } : {})
    return Object.entries(config.profiles)
      .filter(([, p]) => usesDevImage(p))
      .map(([name]) => name)
  } catch {
    // An invalid config is reported by the commands that use it; setup still sets up the engine.
    return []
  }
}

const USAGE =
  'usage: sbx image build [dev] [--compose] [--config file]   (or sbx setup [--compose])\n' +
  '  the Docker engine and the sandbox base image;\n' +
  `  dev: also the dev image ${DEV_IMAGE} (python3, git, node, a C toolchain; Debian packages,\n` +
  '    about 80 s the first time, cached after); built too when a profile of the config uses it;\n' +
  '  --compose: also sandbox-router/node:20 and sandbox-router/redis:7 for docker-compose.yml\n' +
  '    (from Debian packages and npm node@20, no image registry)'

/**
 * `sbx setup` / `sbx image build [dev]`: the idempotent setup script (Docker engine + base image),
 * with `dev` (or a config profile that runs the dev image) also the dev image, and with `--compose`
 * the images docker-compose.yml runs (scripts/build-images.sh); each rebuilt only when its inputs
 * changed.
 */
export async function setupCommand(args: readonly string[], io: CliIO): Promise<number> {
  let values: { compose?: boolean; help?: boolean; config?: string }
  let positionals: string[]
  try {
    ;({ values, positionals } = parseArgs({
      args: [...args],
      allowPositionals: true,
      options: {
        compose: { type: 'boolean' },
        config: { type: 'string', short: 'c' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }))
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${USAGE}`)
  }
  if (values.help) return (io.out(USAGE), 0)
  const unknown = positionals.filter((p) => p !== 'dev')
  if (unknown.length > 0)
    throw new UsageError(`unknown image ${unknown.join(', ')}; the images are: dev\n${USAGE}`)
  const devProfiles = configuredDevProfiles(values.config)
  const dev = positionals.includes('dev') || devProfiles.length > 0
  if (dev && !positionals.includes('dev'))
    io.out(`setup: profile ${devProfiles.join(', ')} runs ${DEV_IMAGE}: building it too`)
  const code = await runScript('setup.sh', dev ? ['--dev'] : [], io)
  if (code !== 0 || !values.compose) return code
  return runScript('build-images.sh', ['all'], io)
}

import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { configDir, removeScopeContainers, runSbx, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

const run = promisify(execFile)

interface ToolCallAnswer {
  output: string
  result?: { exitCode: number | null; stdout: string; stderr: string; timedOut: boolean }
}

/**
 * Issue 13, "a dev image": an agent's session in the built-in `dev` profile through
 * `node bin/sbx.js serve`, the way an agent uses it (bash tool calls in one persistent shell):
 * write a Python file and run it, a venv, `git init` and a commit, compile and run a C file,
 * `node -e`. The dev image is built once per machine (`npm test`'s setup does it; cached after).
 */
describe('the dev profile through sbx serve', () => {
  const scope = uniqueName('devimg')
  let srv: SbxServer

  beforeAll(async () => {
    // `sbx image build dev` as a user runs it: up to date in seconds when setup built it (its log
    // says so), about 80 s on a machine that has none.
    const build = await runSbx(['image', 'build', 'dev'], { timeoutMs: 600_000 })
    expect(build.code, build.stderr).toBe(0)
    expect(build.stdout).toMatch(/image sandbox-router\/dev:latest (up to date|built)/)
    srv = await startSbxServer('serve', {
      config: {
        queue: { prefix: scope },
        // The agent's bash tool goes to the built-in dev profile.
        routing: { shell: { providerId: 'docker', profile: 'dev' } },
      },
    })
  }, 660_000)

  afterAll(async () => {
    await srv?.stop()
    await removeScopeContainers(scope)
  }, 60_000)

  const bash = async (command: string): Promise<NonNullable<ToolCallAnswer['result']>> => {
    const res = await srv.post('/v1/tool-calls', { name: 'bash', arguments: { command }, sessionId: 'work' })
    expect(res.status).toBe(200)
    const answer = (await res.json()) as ToolCallAnswer
    expect(answer.result, answer.output).toBeDefined()
    expect(answer.result?.exitCode, answer.output).toBe(0)
    return answer.result!
  }

  test('write a Python file and run it; a venv', async () => {
    await bash(`mkdir -p proj && cd proj && cat > fib.py <<'PY'
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
print(fib(20))
PY`)
    expect((await bash('python3 fib.py')).stdout).toBe('6765\n')
    const venv = await bash(
      'python3 -m venv .venv && . .venv/bin/activate && python -c "import sys; print(sys.prefix)"',
    )
    expect(venv.stdout).toBe('/workspace/proj/.venv\n')
  }, 120_000)

  test('git init and commit', async () => {
    const r = await bash(
      'git init -q && git config user.email agent@example.invalid && git config user.name agent && ' +
        'git add fib.py && git commit -qm "fib" && git log --format=%s',
    )
    expect(r.stdout).toBe('fib\n')
  }, 120_000)

  test('compile and run a C file', async () => {
    await bash(`cat > hello.c <<'C'
#include <stdio.h>
int main(void) { printf("hello from C\\n"); return 0; }
C`)
    expect((await bash('cc -O2 -o hello hello.c && ./hello')).stdout).toBe('hello from C\n')
  }, 120_000)

  test('node, the usual tools, and the user', async () => {
    expect((await bash(`node -e 'console.log([1, 2, 3].map((x) => x * 2).join(","))'`)).stdout).toBe(
      '2,4,6\n',
    )
    const tools = await bash(
      'for t in npm jq rg curl unzip file less ps make; do command -v $t >/dev/null || echo missing $t; done; id -un; echo $HOME',
    )
    expect(tools.stdout).toBe('sandbox\n/workspace\n')
  }, 120_000)

  test('a failed build says which step failed and leaves no image', async () => {
    const tag = `sandbox-router/dev:${uniqueName('failing')}`
    const r = await runSbx(['image', 'build', 'dev'], {
      env: { SBX_DEBIAN_SUITE: 'no-such-suite', SBX_DEV_IMAGE: tag },
      timeoutMs: 300_000,
    })
    expect(r.code).not.toBe(0)
    expect(r.stderr).toContain(
      "build-images: error: step 'mmdebstrap (Debian packages from this machine's apt sources)' failed",
    )
    const inspected = await run('docker', ['image', 'inspect', tag]).then(
      () => 'present',
      () => 'absent',
    )
    expect(inspected).toBe('absent')
  }, 300_000)

  test('sbx setup builds (here: finds up to date) the dev image when a profile of the config runs it', async () => {
    const dir = configDir({ profiles: { py: { provider: 'docker', image: 'sandbox-router/dev:latest' } } })
    const r = await runSbx(['setup'], { cwd: dir, timeoutMs: 300_000 })
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain('setup: profile py runs sandbox-router/dev:latest: building it too')
    expect(r.stdout).toMatch(/image sandbox-router\/dev:latest (up to date|built)/)
    // Without such a profile, setup leaves the dev image alone.
    const plain = await runSbx(['setup'], { cwd: configDir({}), timeoutMs: 300_000 })
    expect(plain.code, plain.stderr).toBe(0)
    expect(plain.stdout).not.toContain('sandbox-router/dev')
  }, 300_000)
})

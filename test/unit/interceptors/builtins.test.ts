import { describe, expect, test } from 'vitest'
import {
  extractShellCommand,
  forceWorkingDirectory,
  luhnValid,
  piiRedactor,
  redactSecrets,
  routeShellTools,
  scanSecrets,
  secretScanner,
  tenantScope,
} from '../../../src/interceptors/builtins/index.js'
import {
  evaluateModelRequest,
  evaluatePrompt,
  evaluateToolCall,
  evaluateToolResult,
} from '../../../src/interceptors/index.js'
import type { ToolCallRequest } from '../../../src/interceptors/index.js'

const call = (name: string, args: unknown): ToolCallRequest => ({
  name,
  arguments: typeof args === 'string' ? args : JSON.stringify(args),
  callId: 'c1',
  type: 'function',
})

describe('routeShellTools', () => {
  const ic = routeShellTools({ providerId: 'docker', profile: 'default' })

  test('routes bash, shell, sh and plugin__*__bash by suffix', async () => {
    for (const name of ['bash', 'shell', 'sh', 'plugin__devtools__bash']) {
      const v = await evaluateToolCall([ic], call(name, { command: 'ls -la' }))
      expect(v).toMatchObject({
        kind: 'routeTo',
        route: { providerId: 'docker', profile: 'default', command: 'ls -la' },
      })
    }
  })

  test('other tools pass', async () => {
    expect((await evaluateToolCall([ic], call('read_file', { path: 'x' }))).kind).toBe('allow')
    expect((await evaluateToolCall([ic], call('bashful', { command: 'x' }))).kind).toBe('allow')
  })

  test('a call without a command is blocked with a clear reason', async () => {
    const v = await evaluateToolCall([ic], call('bash', { path: 'x' }))
    expect(v).toMatchObject({ kind: 'block' })
    if (v.kind === 'block') expect(v.reason).toMatch(/needs a command: pass arguments like \{"command"/)
    expect((await evaluateToolCall([ic], call('bash', 'not json'))).kind).toBe('block')
  })

  test('command extraction: keys, arrays quoted, bare strings', () => {
    expect(extractShellCommand(call('bash', { cmd: 'pwd' }))).toBe('pwd')
    expect(extractShellCommand(call('bash', { command: ['echo', "it's here", 'a b'] }))).toBe(
      `echo 'it'\\''s here' 'a b'`,
    )
    expect(extractShellCommand(call('bash', '"uname -a"'))).toBe('uname -a')
    expect(extractShellCommand(call('bash', { command: '   ' }))).toBeUndefined()
  })

  test('custom tools and extractor; bad config fails at construction', async () => {
    const custom = routeShellTools({
      providerId: 'e2b',
      profile: 'py',
      tools: ['python'],
      extractCommand: (r) =>
        `python3 -c ${JSON.stringify((JSON.parse(r.arguments) as { code: string }).code)}`,
    })
    const v = await evaluateToolCall([custom], call('python', { code: 'print(1)' }))
    expect(v).toMatchObject({ kind: 'routeTo', route: { command: 'python3 -c "print(1)"' } })
    expect(() => routeShellTools({ providerId: '', profile: 'x' })).toThrow(/providerId/)
  })
})

describe('forceWorkingDirectory', () => {
  test('pins cwd with a modify, keeping other arguments', async () => {
    const v = await evaluateToolCall(
      [forceWorkingDirectory('/workspace/app')],
      call('bash', { command: 'ls', cwd: '/' }),
    )
    expect(v).toMatchObject({ kind: 'allow', modifiedBy: ['force-working-directory'] })
    expect(JSON.parse(v.request.arguments)).toEqual({ command: 'ls', cwd: '/workspace/app' })
    expect(v.request.name).toBe('bash')
  })

  test('leaves non-object arguments and already-pinned calls alone', async () => {
    const ic = forceWorkingDirectory('/w')
    expect((await evaluateToolCall([ic], call('bash', '"ls"'))).modifiedBy).toEqual([])
    expect((await evaluateToolCall([ic], call('bash', { cwd: '/w' }))).modifiedBy).toEqual([])
  })

  test('then routeShellTools sees the pinned call', async () => {
    const v = await evaluateToolCall(
      [
        forceWorkingDirectory('/w', { tools: ['bash'] }),
        routeShellTools({ providerId: 'docker', profile: 'default' }),
      ],
      call('bash', { command: 'ls' }),
    )
    expect(v.kind).toBe('routeTo')
    expect(JSON.parse(v.request.arguments)).toEqual({ command: 'ls', cwd: '/w' })
  })
})

describe('secretScanner', () => {
  const samples = {
    aws: 'key AKIAIOSFODNN7EXAMPLE here',
    github: 'token ghp_abcdefghijklmnopqrstuvwxyz0123456789',
    slack: 'xoxb-123456789012-abcdefghijkl',
    pem: '-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----',
    jwt: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U',
    password: 'DB password=hunter2secret and api_key: "abc123xyz"',
  }

  test('finds each kind', () => {
    expect(scanSecrets(samples.aws).map((f) => f.kind)).toEqual(['aws-access-key-id'])
    expect(scanSecrets(samples.github).map((f) => f.kind)).toEqual(['github-token'])
    expect(scanSecrets(samples.slack).map((f) => f.kind)).toEqual(['slack-token'])
    expect(scanSecrets(samples.pem).map((f) => f.kind)).toEqual(['private-key'])
    expect(scanSecrets(samples.jwt).map((f) => f.kind)).toEqual(['jwt'])
    expect(scanSecrets(samples.password).map((f) => f.kind)).toEqual(['assignment', 'assignment'])
    expect(scanSecrets('plain build output, 42 files, password reset page')).toEqual([])
  })

  test('redact masks only the secret values', async () => {
    expect(redactSecrets(samples.password).text).toBe(
      'DB password=[REDACTED:assignment] and api_key: "[REDACTED:assignment]"',
    )
    const v = await evaluateToolResult(
      [secretScanner()],
      call('bash', {}),
      `ok\n${samples.aws}\n${samples.pem}\nend`,
    )
    expect(v.blocked).toBe(false)
    expect(v.output).toBe('ok\nkey [REDACTED:aws-access-key-id] here\n[REDACTED:private-key]\nend')
  })

  test('block replaces the output with a reason', async () => {
    const v = await evaluateToolResult([secretScanner({ action: 'block' })], call('bash', {}), samples.github)
    expect(v).toMatchObject({ blocked: true, decidedBy: 'secret-scanner' })
    expect(v.output).toBe('tool output withheld: it contained credentials (github-token)')
    expect(v.output).not.toContain('ghp_')
  })

  test('clean output passes unchanged', async () => {
    const v = await evaluateToolResult([secretScanner()], call('bash', {}), 'all good')
    expect(v).toEqual({ output: 'all good', blocked: false, modifiedBy: [] })
  })
})

describe('piiRedactor', () => {
  test('masks e-mails, phones and Luhn-valid cards; keeps dates and invalid cards', async () => {
    const input =
      'Mail jane.doe@example.co.uk or call +1 415-555-0132, card 4111 1111 1111 1111, not 4111 1111 1111 1112, on 2024-05-01.'
    const v = await evaluatePrompt([piiRedactor()], { input })
    expect(v).toEqual({
      kind: 'allow',
      input: 'Mail [EMAIL] or call [PHONE], card [CARD], not 4111 1111 1111 1112, on 2024-05-01.',
      modifiedBy: ['pii-redactor'],
    })
  })

  test('allow when nothing to mask', async () => {
    expect(await evaluatePrompt([piiRedactor()], { input: 'list 3 files' })).toEqual({
      kind: 'allow',
      input: 'list 3 files',
      modifiedBy: [],
    })
  })

  test('luhn', () => {
    expect(luhnValid('4111111111111111')).toBe(true)
    expect(luhnValid('4111111111111112')).toBe(false)
    expect(luhnValid('0')).toBe(false)
  })
})

describe('tenantScope', () => {
  test('sets the system prompt and caps temperature and tokens', async () => {
    const v = await evaluateModelRequest(
      [tenantScope({ systemPrompt: 'acme', maxTemperature: 0.5, maxOutputTokens: 1000 })],
      {
        model: 'm',
        temperature: 0.9,
        maxOutputTokens: 4000,
      },
    )
    expect(v.request).toEqual({ model: 'm', systemPrompt: 'acme', temperature: 0.5, maxOutputTokens: 1000 })
  })

  test('values under the caps are kept', async () => {
    const v = await evaluateModelRequest([tenantScope({ maxTemperature: 0.5, maxOutputTokens: 1000 })], {
      model: 'm',
      temperature: 0.1,
      maxOutputTokens: 10,
    })
    expect(v.decision.isAllow).toBe(true)
  })

  test('needs at least one option', () => {
    expect(() => tenantScope({})).toThrow(/at least one/)
  })
})

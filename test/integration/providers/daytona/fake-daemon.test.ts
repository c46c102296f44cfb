import {
  Daytona,
  DaytonaBadRequestError,
  DaytonaNotFoundError,
  DaytonaTimeoutError,
  type Sandbox as RemoteSandbox,
} from '@daytonaio/sdk'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { rejectionOf } from '../../../../src/sandbox/conformance/io-cases.js'
import { type FakeDaytona, startFakeDaytona } from '../../../fakes/daytona/index.js'

// The fake's daemon behaviour the adapter relies on, checked through the bare SDK.
const TIMEOUT = 60_000
let fake: FakeDaytona
let daytona: Daytona
let remote: RemoteSandbox

beforeAll(async () => {
  fake = await startFakeDaytona()
  daytona = new Daytona({
    apiKey: fake.apiKey,
    apiUrl: fake.apiUrl,
    target: 'us',
    useDeprecatedPolling: true,
  })
  remote = await daytona.create({ labels: { 'sandbox-router.test': 'fake-daemon' } })
}, TIMEOUT)
afterAll(async () => {
  await remote?.delete().catch(() => undefined)
  await daytona?.[Symbol.asyncDispose]()
  await fake?.close()
}, TIMEOUT)

describe(
  'fake Daytona daemon',
  () => {
    test('the sandbox runs in a real container labelled for cleanup, with a toolbox URL on the fake', () => {
      expect(remote.state).toBe('started')
      expect(remote.toolboxProxyUrl).toBe(`${fake.url}/toolbox`)
      expect(fake.containers()).toHaveLength(1)
    })

    test('/process/execute: the command goes to a shell, stdout and stderr share one buffer in order', async () => {
      const r = await remote.process.executeCommand('echo a; echo b >&2; echo c; exit 3', undefined, {
        X_Y: 'z',
      })
      expect(r).toMatchObject({ exitCode: 3, result: 'a\nb\nc\n' })
      expect((await remote.process.executeCommand('printf %s "$X_Y"', undefined, { X_Y: 'z' })).result).toBe(
        'z',
      )
    })

    test('/process/execute: timeout answers 408 and the output is gone; bad env names answer 400', async () => {
      const err = await rejectionOf(
        remote.process.executeCommand('echo lost; sleep 30', undefined, undefined, 1),
      )
      expect(err).toBeInstanceOf(DaytonaTimeoutError)
      expect((err as DaytonaTimeoutError).statusCode).toBe(408)
      expect(
        await rejectionOf(remote.process.executeCommand('true', undefined, { 'A-B': '1' })),
      ).toBeInstanceOf(DaytonaBadRequestError)
    })

    test('files: upload creates parents; a missing file is a FILE_NOT_FOUND error part', async () => {
      await remote.fs.uploadFile(Buffer.from([0, 255]), '/workspace/a/b/c.bin')
      expect([...(await remote.fs.downloadFile('/workspace/a/b/c.bin'))]).toEqual([0, 255])
      const err = await rejectionOf(remote.fs.downloadFile('/workspace/none'))
      expect(err).toBeInstanceOf(DaytonaNotFoundError)
      expect((err as DaytonaNotFoundError).code).toBe('FILE_NOT_FOUND')
    })

    test('sessions: one shell keeps cd and variables; output is labelled line by line, stdout and stderr apart', async () => {
      const id = `fake-daemon-${Date.now()}`
      await remote.process.createSession(id)
      try {
        const first = await remote.process.executeSessionCommand(id, {
          command: 'cd /tmp; X=kept; echo out; echo err >&2; printf partial',
        })
        // The daemon's readers add a newline to a last line without one.
        expect(first).toMatchObject({ exitCode: 0, stdout: 'out\npartial\n', stderr: 'err\n' })
        const started = await remote.process.executeSessionCommand(id, {
          command: 'pwd; echo "$X"; (exit 4)',
          runAsync: true,
        })
        expect(started.exitCode).toBeUndefined()
        let command = await remote.process.getSessionCommand(id, started.cmdId!)
        for (let i = 0; command.exitCode === undefined && i < 200; i++) {
          await new Promise((resolve) => setTimeout(resolve, 20))
          command = await remote.process.getSessionCommand(id, started.cmdId!)
        }
        expect(command.exitCode).toBe(4)
        expect(await remote.process.getSessionCommandLogs(id, started.cmdId!)).toMatchObject({
          stdout: '/tmp\nkept\n',
          stderr: '',
        })
        // The daemon's session shell is the first of zsh/bash in /etc/shells: this image has none, so sh.
        const shell = await remote.process.executeSessionCommand(id, {
          command: 'echo "${BASH_VERSION:-none}"',
        })
        expect(shell.stdout).toBe('none\n')
      } finally {
        await remote.process.deleteSession(id)
      }
      expect(await rejectionOf(remote.process.getSession(id))).toBeInstanceOf(DaytonaNotFoundError)
    })

    test('a vanished sandbox answers 404 on the API and the toolbox', async () => {
      const doomed = await daytona.create({ labels: { 'sandbox-router.test': 'fake-daemon' } })
      await fake.faults.vanish(doomed.id)
      expect(await rejectionOf(daytona.get(doomed.id))).toBeInstanceOf(DaytonaNotFoundError)
      expect(await rejectionOf(doomed.process.executeCommand('true'))).toBeInstanceOf(DaytonaNotFoundError)
    })
  },
  TIMEOUT,
)

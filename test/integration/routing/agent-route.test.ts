import { afterEach, describe, expect, test } from 'vitest'
import { createAgent } from '../../../src/agent/agent.js'
import { shellTool } from '../../../src/agent/define-tool.js'
import { scriptedModel, scriptedToolCall } from '../../../src/agent/scripted-model.js'
import { routeShellTools } from '../../../src/interceptors/builtins/route-shell-tools.js'
import { secretScanner } from '../../../src/interceptors/builtins/secret-scanner.js'
import type { LifecycleEvent } from '../../../src/lifecycle/events.js'
import { createWorld } from '../../support/queue-world.js'
import type { World } from '../../support/queue-world.js'

describe.each(['in-process', 'bullmq'] as const)(
  'an agent routes its shell through the %s queue into Docker',
  (driver) => {
    let world: World | undefined
    afterEach(async () => {
      const w = world
      world = undefined
      if (!w) return
      await w.close()
      expect(await w.containers()).toEqual([])
    })

    test('routeTo → job → worker → pooled sandbox → result → after-chain → model, with files kept per session', async () => {
      world = await createWorld({ driver })
      const events: LifecycleEvent[] = []
      const model = scriptedModel([
        {
          toolCalls: [
            scriptedToolCall('bash', { command: 'echo AKIAIOSFODNN7EXAMPLE > key.txt && cat key.txt' }),
          ],
        },
        { toolCalls: [scriptedToolCall('bash', { command: 'ls; whoami 2>/dev/null || id -u' })] },
        'all done',
      ])
      const agent = createAgent({
        model,
        tools: [shellTool()],
        toolInterceptors: [routeShellTools({ providerId: 'docker', profile: 'default' }), secretScanner()],
        lifecycleHooks: [{ name: 'rec', onEvent: (e) => void events.push(e) }],
        router: world.executor,
        tenant: 'acme',
      })
      const result = await agent.run('do it', { sessionId: `agent-${driver}` })
      expect(result.output).toBe('all done')
      expect(result.finishReason).toEqual({ kind: 'natural_stop' })
      expect(result.toolCalls.map((t) => t.via)).toEqual(['routed', 'routed'])
      // the after-chain redacted the credential before the model saw it
      expect(result.toolCalls[0]?.output).toContain('[REDACTED:aws-access-key-id]')
      expect(result.toolCalls[0]?.output).not.toContain('AKIAIOSFODNN7EXAMPLE')
      expect(result.toolCalls[0]?.exec?.exitCode).toBe(0)
      // the second call ran in the same sandbox: the file is there, as uid 1000
      expect(result.toolCalls[1]?.output).toMatch(/key\.txt/)
      expect(result.toolCalls[1]?.exec?.sandboxId).toBe(result.toolCalls[0]?.exec?.sandboxId)
      const tool = model.requests[2]?.messages.filter((m) => m.role === 'tool') ?? []
      expect(tool).toHaveLength(2)
      const routed = events.filter((e) => e.type === 'AFTER_TOOL_CALL')
      expect(routed).toHaveLength(2)
      expect(routed[0]?.attributes['route']).toMatchObject({ providerId: 'docker', profile: 'default' })
    })

    test('an unknown profile is a tool error for the model and an ERROR event, never local execution', async () => {
      world = await createWorld({ driver })
      const events: LifecycleEvent[] = []
      const agent = createAgent({
        model: scriptedModel([
          { toolCalls: [scriptedToolCall('bash', { command: 'touch /tmp/host-marker' })] },
          'ok',
        ]),
        tools: [shellTool()],
        toolInterceptors: [routeShellTools({ providerId: 'docker', profile: 'no-such-profile' })],
        lifecycleHooks: [{ name: 'rec', onEvent: (e) => void events.push(e) }],
        router: world.executor,
      })
      const result = await agent.run('x')
      expect(result.toolCalls[0]?.output).toMatch(/^error: UNKNOWN_PROFILE: .*default/)
      expect(events.some((e) => e.type === 'ERROR')).toBe(true)
      expect(await world.containers()).toEqual([])
    })
  },
)

import { z } from 'zod'
import { AgentConfigError } from './errors.js'
import type { ToolSpec } from './model-client.js'
import type { JsonSchema, Tool, ToolExecuteContext } from './tool.js'

/** A tool definition whose parameters are a zod schema: `execute` receives the parsed arguments. */
export interface ZodToolDefinition<S extends z.ZodType> {
  name: string
  description: string
  parameters: S
  /** Local execution. Omit it for tools that must be routed (shell-style tools). */
  execute?: (args: z.output<S>, ctx: ToolExecuteContext) => unknown
  /** Per-call timeout (ms) for local execution; also sent as the routed command's timeout. */
  timeoutMs?: number
}

/** A tool definition whose parameters are a JSON Schema object: `execute` receives the parsed JSON. */
export interface JsonSchemaToolDefinition<Args> {
  name: string
  description: string
  parameters: JsonSchema
  execute?: (args: Args, ctx: ToolExecuteContext) => unknown
  timeoutMs?: number
}

const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/

/**
 * Defines a tool. `parameters` is a zod schema (converted with `z.toJSONSchema`, and the model's
 * arguments are validated against it before `execute`) or a JSON Schema object. Invalid definitions
 * throw {@link AgentConfigError} here, not on the first call. A tool without `execute` never runs on
 * the host: its calls must be routed by a routeTo interceptor.
 */
export function defineTool<S extends z.ZodType>(def: ZodToolDefinition<S>): Tool
export function defineTool<Args = Record<string, unknown>>(def: JsonSchemaToolDefinition<Args>): Tool
export function defineTool(def: ZodToolDefinition<z.ZodType> | JsonSchemaToolDefinition<unknown>): Tool {
  const tool: Tool = {
    name: def.name,
    description: def.description,
    parameters: def.parameters,
    ...(def.execute ? { execute: def.execute as (args: unknown, ctx: ToolExecuteContext) => unknown } : {}),
    ...(def.timeoutMs !== undefined ? { timeoutMs: def.timeoutMs } : {}),
  }
  compileTool(tool)
  return Object.freeze(tool)
}

/** Options of {@link shellTool}. */
export interface ShellToolOptions {
  /** @default 'bash' */
  name?: string
  /** @default a description asking for one shell command line */
  description?: string
  /** Timeout sent with routed commands (ms); the profile's default when absent. */
  timeoutMs?: number
}

/**
 * A shell-style tool (`{ command: string }`) with no local `execute`: it only runs when an
 * interceptor routes it (e.g. `routeShellTools`), otherwise the model gets an error result.
 */
export function shellTool(options: ShellToolOptions = {}): Tool {
  return defineTool({
    name: options.name ?? 'bash',
    description:
      options.description ??
      'Run one shell command line (bash) in an isolated sandbox and get its exit code, stdout and stderr.',
    parameters: z.object({ command: z.string().min(1).describe('The command line to run, e.g. "ls -la"') }),
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
  })
}

/** Result of validating a call's parsed arguments. */
export type ArgsCheck =
  { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly message: string }

/** A tool ready for the loop: its spec for the model and its argument validator. */
export interface CompiledTool {
  readonly tool: Tool
  readonly spec: ToolSpec
  readonly validate: (args: unknown) => ArgsCheck
}

function isZodSchema(p: unknown): p is z.ZodType {
  return typeof p === 'object' && p !== null && '_zod' in p
}

const accept = (value: unknown): ArgsCheck => ({ ok: true, value })

/** Validates a tool and converts its parameters to the JSON Schema offered to the model. */
export function compileTool(tool: Tool): CompiledTool {
  if (!tool || typeof tool.name !== 'string' || !TOOL_NAME.test(tool.name)) {
    throw new AgentConfigError(
      `invalid tool name ${JSON.stringify(tool?.name)}: use 1–128 letters, digits, "_", "-" or "."`,
    )
  }
  if (typeof tool.description !== 'string') {
    throw new AgentConfigError(
      `tool "${tool.name}" needs a description string telling the model when to use it`,
    )
  }
  if (tool.execute !== undefined && typeof tool.execute !== 'function') {
    throw new AgentConfigError(
      `tool "${tool.name}": execute must be a function (or omitted for routed tools)`,
    )
  }
  if (tool.timeoutMs !== undefined && !(Number.isInteger(tool.timeoutMs) && tool.timeoutMs > 0)) {
    throw new AgentConfigError(
      `tool "${tool.name}": timeoutMs must be a positive integer (ms), got ${tool.timeoutMs}`,
    )
  }
  const p = tool.parameters
  if (isZodSchema(p)) {
    let schema: Record<string, unknown>
    try {
      schema = z.toJSONSchema(p, { io: 'input' }) as Record<string, unknown>
    } catch (err) {
      throw new AgentConfigError(
        `tool "${tool.name}": its zod parameters cannot be expressed as JSON Schema (${(err as Error).message}); use plain JSON-compatible types`,
        err,
      )
    }
    const { $schema: _ignored, ...parameters } = schema
    assertObjectSchema(tool.name, parameters)
    const validate = (args: unknown): ArgsCheck => {
      const r = p.safeParse(args)
      if (r.success) return { ok: true, value: r.data }
      const detail = r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')
      return { ok: false, message: detail }
    }
    return { tool, spec: { name: tool.name, description: tool.description, parameters }, validate }
  }
  if (typeof p !== 'object' || p === null || Array.isArray(p)) {
    throw new AgentConfigError(
      `tool "${tool.name}": parameters must be a zod schema or a JSON Schema object like { type: 'object', properties: {...} }`,
    )
  }
  const parameters = p as JsonSchema
  assertObjectSchema(tool.name, parameters)
  return { tool, spec: { name: tool.name, description: tool.description, parameters }, validate: accept }
}

function assertObjectSchema(name: string, schema: JsonSchema): void {
  if (schema.type !== undefined && schema.type !== 'object') {
    throw new AgentConfigError(
      `tool "${name}": parameters must describe an object (type "object"), got type ${JSON.stringify(schema.type)}`,
    )
  }
}

// The application services, transport-free: their contracts (what the HTTP API, MCP and the E2B
// endpoint call: exec.ts, sessions.ts, …) and their implementations over the job queue, the session
// directory and the pool (exec-service.ts, session-service.ts, …, agent-runs/), which src/runtime
// builds and wires. A request body or a view is one zod schema and its type (`ExecInput`, `JobView`
// are both); src/http only adds OpenAPI metadata to them. Nothing here imports src/http or
// src/runtime (eslint's no-restricted-imports keeps it so).
export { AgentRunInput, AgentRunView } from './agent-runs.js'
export type { AgentRunsApi } from './agent-runs.js'
export { MAX_CODE_CHARS, RunCodeInput } from './code.js'
export type { CodeService } from './code.js'
export { Env, SessionId } from './common.js'
export { ExecInput, JobState, JobView } from './exec.js'
export type { ExecService, JobEvent } from './exec.js'
export { noSuchJobMessage, unknownJobView, vanishedJobView, jobView } from './job-view.js'
export { ProcessStartInput } from './processes.js'
export type { ProcessService, ProcessStartOptions } from './processes.js'
export type { PolicyView, ProviderView } from './providers.js'
export type { SessionPortStream, SessionStreamService, SessionTerminal } from './session-streams.js'
export { SessionInput, SessionView } from './sessions.js'
export type { SessionService } from './sessions.js'
export type { CaptureOptions, ForkResult, SnapshotService, SnapshotView } from './snapshots.js'
export type { ToolCallEvaluateOptions, ToolCallEvaluation, ToolCallService } from './tool-calls.js'

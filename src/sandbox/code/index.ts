export { runKernelCode, kernelLaunch, kernelProcessId, KERNEL_DIR } from './kernel-runner.js'
export type { KernelSpec } from './kernel-runner.js'
export { codeOf, kernelCode, probeLanguages, requireCode } from './sandbox-code.js'
export { CODE_LANGUAGES } from './types.js'
export type {
  CodeCellPart,
  CodeError,
  CodeLanguage,
  CodeOutput,
  CodeResult,
  RunCodeRequest,
} from './types.js'

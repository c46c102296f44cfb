// The `sbx` entry point: the only module with side effects at import time.
import { runCli } from './run.js'

process.exitCode = await runCli(process.argv.slice(2))

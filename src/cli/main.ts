// The `sbx` entry point: the only module with side effects at import time.
import { runCli } from './run.js'

const code = await runCli(process.argv.slice(2))
process.exitCode = code
// The command is over and has closed what it opened (runtimes, servers, clients). A socket a library
// still holds (seen once: dockerode's HEAD response in the agent volume check, now ended there) must
// not keep a finished one-shot command such as `sbx exec` running: exit once stdout and stderr are
// flushed.
process.stdout.write('', () => process.stderr.write('', () => process.exit(code)))

/** Where CLI commands write; injectable so commands are testable without a TTY. */
export interface CliIO {
  out(line: string): void
  err(line: string): void
  /** Whether stdout is a terminal (colours and progress) or a pipe (plain). */
  readonly tty: boolean
}

/** The process's own stdout/stderr. */
export const processIO: CliIO = {
  out: (line) => void process.stdout.write(`${line}\n`),
  err: (line) => void process.stderr.write(`${line}\n`),
  tty: Boolean(process.stdout.isTTY),
}

/** Usage error: printed with the command's help, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError'
}

const CODES = { red: 31, green: 32, yellow: 33, dim: 2, cyan: 36 } as const

/** Colours `text` on a TTY (unless NO_COLOR is set); plain text otherwise. */
export function paint(io: CliIO, colour: keyof typeof CODES, text: string): string {
  if (!io.tty || process.env['NO_COLOR']) return text
  return `\u001b[${CODES[colour]}m${text}\u001b[0m`
}

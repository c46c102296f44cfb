import { AppError } from '../errors.js'

/** A misbehaving or misconfigured extension (undeclared capability, unknown id, bad module…). */
export class ExtensionError extends AppError {
  override readonly name = 'ExtensionError'
  constructor(message: string, cause?: unknown) {
    super('EXTENSION_ERROR', message, { cause })
  }
}

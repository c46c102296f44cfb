/*
 * Keeping a provider's API key out of everything that leaves the provider edge: error messages and
 * the `cause` chained to them (which loggers serialise).
 */

/** Shorter "secrets" are not keys, and scrubbing them would mangle ordinary words. */
const MIN_SECRET_LENGTH = 8

/** `text` with every occurrence of `secret` replaced by `***`. */
export function scrubSecret(text: string, secret: string): string {
  return secret.length >= MIN_SECRET_LENGTH ? text.split(secret).join('***') : text
}

/**
 * The error as a cause that is safe to keep: the original when it does not quote the secret
 * (message, stack or own enumerable fields), else a copy of its name, message and stack, scrubbed.
 */
export function secretSafeCause(err: unknown, secret: string): unknown {
  if (!(err instanceof Error) || secret.length < MIN_SECRET_LENGTH) return err
  const text = `${err.message}\n${err.stack ?? ''}\n${jsonOf(err)}`
  if (!text.includes(secret)) return err
  const copy = new Error(scrubSecret(err.message, secret))
  copy.name = err.name
  copy.stack = scrubSecret(err.stack ?? '', secret)
  return copy
}

function jsonOf(value: unknown): string {
  try {
    return JSON.stringify(value) ?? ''
  } catch {
    return ''
  }
}

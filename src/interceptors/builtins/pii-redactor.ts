import { PromptDecision } from '../decisions.js'
import type { PromptInterceptor } from '../types.js'

/** Options of {@link piiRedactor}. */
export interface PiiRedactorOptions {
  /** Which kinds to mask. @default all three */
  mask?: { emails?: boolean; phones?: boolean; cards?: boolean }
  /** @default 'pii-redactor' */
  name?: string
}

const CARD = /(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])/g
const EMAIL = /\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b/g
const PHONE = /(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]?\d{2,4}){1,4}(?![\w])/g
const ISO_DATE = /^\d{4}-\d{2}-\d{2}$/

/** Luhn checksum of a digit string. */
export function luhnValid(digits: string): boolean {
  let sum = 0
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48
    if (i % 2 === 1) {
      d *= 2
      if (d > 9) d -= 9
    }
    sum += d
  }
  return digits.length >= 13 && sum % 10 === 0
}

/** Masks e-mail addresses (`[EMAIL]`), Luhn-valid card numbers (`[CARD]`) and phone numbers (`[PHONE]`). */
export function redactPii(input: string, mask: PiiRedactorOptions['mask'] = {}): string {
  let out = input
  if (mask.cards ?? true) {
    out = out.replace(CARD, (m) => (luhnValid(m.replace(/\D/g, '')) ? '[CARD]' : m))
  }
  if (mask.emails ?? true) out = out.replace(EMAIL, '[EMAIL]')
  if (mask.phones ?? true) {
    out = out.replace(PHONE, (m) => {
      const digits = m.replace(/\D/g, '').length
      return digits >= 7 && digits <= 15 && !ISO_DATE.test(m) ? '[PHONE]' : m
    })
  }
  return out
}

/**
 * A prompt interceptor that masks PII before the input reaches memory or the model: e-mail
 * addresses, phone numbers (7–15 digits, optional country code and separators; ISO dates excluded)
 * and card numbers (13–19 digits passing the Luhn check).
 *
 * @example createAgent({ model, promptInterceptors: [piiRedactor()] })
 */
export function piiRedactor(options: PiiRedactorOptions = {}): PromptInterceptor {
  return {
    name: options.name ?? 'pii-redactor',
    intercept(request) {
      const cleaned = redactPii(request.input, options.mask)
      return cleaned === request.input ? PromptDecision.allow() : PromptDecision.modify(cleaned)
    },
  }
}

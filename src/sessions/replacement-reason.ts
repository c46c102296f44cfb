/**
 * A provider's lost-sandbox message without its "destroy it and create a new sandbox" advice: the
 * pool already does that, so a session's replacement notice must not tell the user to.
 */
export function withoutRecreateAdvice(message: string): string {
  return message.replace(/;\s*destroy it and create a new sandbox\.?$/, '')
}

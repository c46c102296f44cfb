/** One step of closing a runtime: closes one thing the runtime opened. */
export type Cleanup = () => Promise<unknown>

/**
 * What a runtime has opened so far, closed in reverse: the builders add a step as soon as they open
 * something, so a start that fails half-way closes exactly what it opened.
 */
export class Cleanups {
  private readonly steps: Cleanup[] = []

  /** Adds the step that closes what was just opened. */
  add(step: Cleanup): void {
    this.steps.push(step)
  }

  /**
   * Runs every step once, the last added first. A failing step goes to `onError` and the others
   * still run; a second call finds nothing left to close.
   */
  async run(onError: (err: unknown) => void): Promise<void> {
    for (const step of this.steps.splice(0).reverse()) await step().catch(onError)
  }
}

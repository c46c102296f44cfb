/** Key names of one queue under the `redis` driver (base: `keyspace(prefix).jobs(queue)`). */
export class RedisQueueKeys {
  constructor(readonly base: string) {}

  /** A job's hash: `data` (the ExecJob JSON), `state` (waiting|active|finished), `attempt`, `worker`, `stalls`. */
  job(jobId: string): string {
    return `${this.jobPrefix}${jobId}}`
  }

  /** What {@link job} keys start with (scripts that find jobs by id build the key from it). */
  get jobPrefix(): string {
    return `${this.base}:{`
  }

  /** The waiting list: producers push on the left, consumers take from the right (hand-backs go there). */
  get wait(): string {
    return `${this.base}:wait`
  }

  /** Leases of running jobs: a sorted set of job ids scored by lease deadline (Redis time, ms). */
  get leases(): string {
    return `${this.base}:leases`
  }

  /** Live consumers: a sorted set of worker ids scored by heartbeat deadline (Redis time, ms). */
  get workers(): string {
    return `${this.base}:workers`
  }

  /** Jobs one consumer's blocking pop moved off the waiting list and its take script has not yet taken. */
  pending(workerId: string): string {
    return `${this.pendingPrefix}${workerId}`
  }

  /** What {@link pending} keys start with. */
  get pendingPrefix(): string {
    return `${this.base}:pending:`
  }
}

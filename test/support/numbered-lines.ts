import { expect } from 'vitest'
import { droppedMarker, outputSplit } from '../../src/sandbox/output-cap.js'

/** Lines `seq 1 N` prints for about 5 MiB of output. */
export const NUMBERED_LINES = 700_000

/** Bytes `seq 1 lines` prints. */
export function numberedLinesBytes(lines: number): number {
  let total = 0
  for (let i = 1; i <= lines; i++) total += String(i).length + 1
  return total
}

/** `stdout` of `seq 1 lines` past `capBytes`: the first line, the marker at the head's end, the last line. */
export function expectHeadMarkerTail(stdout: string, capBytes: number, lines = NUMBERED_LINES): void {
  expect(stdout.startsWith('1\n2\n3\n')).toBe(true)
  expect(stdout.endsWith(`\n${lines - 1}\n${lines}\n`)).toBe(true)
  const marker = droppedMarker(numberedLinesBytes(lines) - capBytes)
  expect(stdout.indexOf(marker)).toBe(outputSplit(capBytes).head)
  expect(Buffer.byteLength(stdout)).toBe(capBytes + marker.length)
}

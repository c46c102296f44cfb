import { describe, expect, test } from 'vitest'
import { ShellMarkerScanner, parseShellMark, shellMarkers } from '../../../src/sandbox/shell-script.js'

describe('ShellMarkerScanner', () => {
  const { stdout: marker } = shellMarkers('ab12')

  test('passes output through and stops at the marker line, keeping what follows it on the line', () => {
    const s = new ShellMarkerScanner(marker)
    expect(s.push('hello\n')).toBe('hello\n')
    expect(s.push(`last${marker} 7 1 0\nnoise after`)).toBe('last')
    expect(s.found).toBe(' 7 1 0')
    expect(s.push('more')).toBe('')
  })

  test('a marker split across chunks is held back, never shown as output', () => {
    const s = new ShellMarkerScanner(marker)
    let out = ''
    for (const ch of `x${marker} 0 0 1\n`) out += s.push(ch)
    expect(out).toBe('x')
    expect(parseShellMark(s.found!)).toEqual({
      status: 0,
      continuous: false,
      ended: true,
      droppedStdout: 0,
      droppedStderr: 0,
    })
  })

  test('text that only looks like the start of the marker is released once it cannot be', () => {
    const s = new ShellMarkerScanner(marker)
    expect(s.push('__sbx_e')).toBe('')
    expect(s.push('nd_zz\n')).toBe('__sbx_end_zz\n')
    expect(s.flush()).toBe('')
  })

  test('parseShellMark refuses what is not ours', () => {
    expect(parseShellMark(' x 1 0')).toBeUndefined()
    expect(parseShellMark(' -1 1 0')).toEqual({
      status: -1,
      continuous: true,
      ended: false,
      droppedStdout: 0,
      droppedStderr: 0,
    })
  })
})

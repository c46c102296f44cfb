import { describe, expect, test } from 'vitest'
import {
  Frame,
  FrameDecoder,
  StreamCtl,
  decodeStreamClosed,
  encodePortOpen,
  encodePtyOpen,
  encodeStreamCtl,
  encodeStreamData,
} from '../../../../providers/docker/protocol.js'

/** The frames of the stream protocol (agent/protocol.h): types 11-14 host to agent, 30-34 back. */
describe('stream frames', () => {
  const decode = (b: Buffer) => {
    const frames = new FrameDecoder().push(b)
    expect(frames).toHaveLength(1)
    return frames[0]!
  }

  test('PORT_OPEN carries the port; STREAM_DATA the raw bytes', () => {
    const open = decode(encodePortOpen(7, 8000))
    expect(open).toMatchObject({ type: Frame.PORT_OPEN, id: 7 })
    expect(open.payload.readUInt32BE(0)).toBe(8000)
    const data = decode(encodeStreamData(7, Buffer.from('GET /')))
    expect(data).toMatchObject({ type: Frame.STREAM_DATA, id: 7 })
    expect(data.payload.toString()).toBe('GET /')
  })

  test('PTY_OPEN: cols, rows, cwd, command, env pairs', () => {
    const f = decode(encodePtyOpen(3, { cols: 80, rows: 24, cwd: '/w', command: '', env: { TERM: 'xterm' } }))
    expect(f.type).toBe(Frame.PTY_OPEN)
    const p = f.payload
    expect([p.readUInt32BE(0), p.readUInt32BE(4)]).toEqual([80, 24])
    expect(p.readUInt32BE(8)).toBe(2)
    expect(p.toString('utf8', 12, 14)).toBe('/w')
    expect(p.readUInt32BE(14)).toBe(0)
    expect(p.readUInt32BE(18)).toBe(1)
  })

  test('STREAM_CTL ops and their arguments', () => {
    expect([...decode(encodeStreamCtl(1, { op: 'eof' })).payload]).toEqual([StreamCtl.EOF])
    expect([...decode(encodeStreamCtl(1, { op: 'close' })).payload]).toEqual([StreamCtl.CLOSE])
    const ack = decode(encodeStreamCtl(1, { op: 'ack', bytes: 65536 })).payload
    expect([ack[0], ack.readUInt32BE(1)]).toEqual([StreamCtl.ACK, 65536])
    const rs = decode(encodeStreamCtl(1, { op: 'resize', cols: 100, rows: 40 })).payload
    expect([rs[0], rs.readUInt32BE(1), rs.readUInt32BE(5)]).toEqual([StreamCtl.RESIZE, 100, 40])
  })

  test('STREAM_CLOSED kinds', () => {
    const closed = (kind: number, code: number): Buffer => {
      const b = Buffer.alloc(5)
      b.writeUInt8(kind, 0)
      b.writeUInt32BE(code, 1)
      return b
    }
    expect(decodeStreamClosed(closed(0, 3))).toEqual({ kind: 'exited', code: 3 })
    expect(decodeStreamClosed(closed(1, 9))).toEqual({ kind: 'signalled', code: 9 })
    expect(decodeStreamClosed(closed(2, 0))).toEqual({ kind: 'closed', code: 0 })
  })
})

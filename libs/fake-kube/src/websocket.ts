/**
 * The server side of RFC 6455, as little as the fake needs to serve `pods/exec` to client-node:
 * the upgrade handshake with subprotocol choice, masked client frames (fragmented or not), binary
 * and close frames out, ping answered. No extensions (permessage-deflate is declined by not
 * answering it). Written here rather than taken from the `ws` package so that this test library
 * adds no dependency.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

const OP = { continuation: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 } as const;

export interface WebSocketHandlers {
  /** A whole message (text or binary) from the client. */
  onMessage(data: Buffer, binary: boolean): void;
  /** The connection closed (by either side, or it broke). Called once. */
  onClose(): void;
}

/** One accepted WebSocket connection. */
export class ServerWebSocket {
  readonly protocol: string;
  readonly #socket: Duplex;
  #handlers: WebSocketHandlers | undefined;
  #buffer = Buffer.alloc(0);
  #fragments: Buffer[] = [];
  #fragmentBinary = false;
  #closed = false;

  private constructor(socket: Duplex, protocol: string) {
    this.#socket = socket;
    this.protocol = protocol;
  }

  /** Starts reading the client's frames. */
  listen(handlers: WebSocketHandlers): void {
    this.#handlers = handlers;
    this.#socket.on('data', (chunk: Buffer) => this.#receive(chunk));
    this.#socket.on('close', () => this.#finish());
    this.#socket.on('error', () => this.#finish());
  }

  /**
   * Completes the handshake of an `upgrade` request, choosing the first of `protocols` the client
   * offered; answers 400 (and returns undefined) when it offered none of them.
   */
  static accept(req: IncomingMessage, socket: Duplex, protocols: string[]): ServerWebSocket | undefined {
    const key = req.headers['sec-websocket-key'];
    const offered = String(req.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((p) => p.trim());
    const protocol = protocols.find((p) => offered.includes(p));
    if (typeof key !== 'string' || req.headers.upgrade?.toLowerCase() !== 'websocket' || !protocol) {
      rejectUpgrade(socket, 400, `the fake API server speaks ${protocols.join(', ')} over WebSocket only`);
      return undefined;
    }
    const accept = createHash('sha1')
      .update(key + GUID)
      .digest('base64');
    socket.write(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        `Sec-WebSocket-Accept: ${accept}\r\nSec-WebSocket-Protocol: ${protocol}\r\n\r\n`,
    );
    return new ServerWebSocket(socket, protocol);
  }

  sendBinary(data: Buffer): void {
    this.#send(OP.binary, data);
  }

  /** Sends a close frame (normal closure) and ends the connection. */
  close(code = 1000): void {
    if (this.#closed) return;
    const payload = Buffer.alloc(2);
    payload.writeUInt16BE(code, 0);
    this.#send(OP.close, payload);
    this.#socket.end();
    this.#finish();
  }

  #send(opcode: number, payload: Buffer): void {
    if (this.#closed || this.#socket.destroyed) return;
    let header: Buffer;
    if (payload.length < 126) {
      header = Buffer.from([0x80 | opcode, payload.length]);
    } else if (payload.length < 65536) {
      header = Buffer.alloc(4);
      header.writeUInt8(0x80 | opcode, 0);
      header.writeUInt8(126, 1);
      header.writeUInt16BE(payload.length, 2);
    } else {
      header = Buffer.alloc(10);
      header.writeUInt8(0x80 | opcode, 0);
      header.writeUInt8(127, 1);
      header.writeBigUInt64BE(BigInt(payload.length), 2);
    }
    this.#socket.write(Buffer.concat([header, payload]));
  }

  #receive(chunk: Buffer): void {
    this.#buffer = Buffer.concat([this.#buffer, chunk]);
    for (;;) {
      if (this.#buffer.length < 2) return;
      const first = this.#buffer[0]!;
      const second = this.#buffer[1]!;
      let length = second & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (this.#buffer.length < 4) return;
        length = this.#buffer.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (this.#buffer.length < 10) return;
        length = Number(this.#buffer.readBigUInt64BE(2));
        offset = 10;
      }
      const masked = (second & 0x80) !== 0;
      const total = offset + (masked ? 4 : 0) + length;
      if (this.#buffer.length < total) return;
      const payload = Buffer.from(this.#buffer.subarray(offset + (masked ? 4 : 0), total));
      if (masked) {
        const mask = this.#buffer.subarray(offset, offset + 4);
        for (let i = 0; i < payload.length; i++) payload[i]! ^= mask[i % 4]!;
      }
      this.#buffer = this.#buffer.subarray(total);
      this.#frame((first & 0x80) !== 0, first & 0x0f, payload);
    }
  }

  #frame(fin: boolean, opcode: number, payload: Buffer): void {
    switch (opcode) {
      case OP.close:
        this.close();
        return;
      case OP.ping:
        this.#send(OP.pong, payload);
        return;
      case OP.pong:
        return;
      case OP.text:
      case OP.binary:
        this.#fragments = [payload];
        this.#fragmentBinary = opcode === OP.binary;
        break;
      case OP.continuation:
        this.#fragments.push(payload);
        break;
      default:
        this.close(1002);
        return;
    }
    if (fin) {
      const message = Buffer.concat(this.#fragments);
      this.#fragments = [];
      this.#handlers?.onMessage(message, this.#fragmentBinary);
    }
  }

  #finish(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#handlers?.onClose();
  }
}

/** Answers an upgrade request with a plain HTTP error (before any handshake). */
export function rejectUpgrade(socket: Duplex, code: number, body: string): void {
  const reason = code === 404 ? 'Not Found' : code === 401 ? 'Unauthorized' : 'Bad Request';
  socket.end(`HTTP/1.1 ${code} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}

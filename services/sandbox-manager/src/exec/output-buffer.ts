/**
 * One output stream of a command (stdout or stderr) as the exec protocol sends it: text cut only
 * at UTF-8 character boundaries, each piece with the byte offset of its first byte, kept so that a
 * client that reconnects gets exactly what it has not seen. Offsets count bytes of the command's
 * output; a chunk cut inside a character waits for the character's remaining bytes.
 */

/** Where the trailing incomplete UTF-8 sequence of `bytes` starts (bytes.length when there is none). */
export function completeUtf8Length(bytes: Buffer): number {
  const end = bytes.length;
  for (let back = 1; back <= Math.min(3, end); back++) {
    const byte = bytes[end - back]!;
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: keep looking for the lead byte
    const need = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return need > back ? end - back : end;
  }
  return end;
}

export interface OutputPiece {
  offset: number;
  data: string;
}

export class OutputBuffer {
  /** Complete pieces, in order; the oldest are dropped past `limitBytes`. */
  readonly #pieces: { offset: number; bytes: Buffer }[] = [];
  #pending: Buffer = Buffer.alloc(0);
  /** Bytes handed out so far (the offset of the next piece). */
  #end = 0;
  #retained = 0;
  readonly #listeners = new Set<(piece: OutputPiece) => void>();

  constructor(private readonly limitBytes = 64 * 1024 * 1024) {}

  /** Offset of the oldest byte still kept (0 until the limit drops some). */
  get start(): number {
    return this.#pieces[0]?.offset ?? this.#end;
  }

  append(chunk: Buffer): void {
    const bytes = this.#pending.length ? Buffer.concat([this.#pending, chunk]) : chunk;
    const complete = completeUtf8Length(bytes);
    this.#pending = bytes.subarray(complete);
    if (complete > 0) this.emit(bytes.subarray(0, complete));
  }

  /** At exit: bytes of an unfinished character go out as they are. */
  flush(): void {
    if (this.#pending.length === 0) return;
    const rest = this.#pending;
    this.#pending = Buffer.alloc(0);
    this.emit(rest);
  }

  /** What a client that has seen `offset` bytes has not seen yet. */
  since(offset: number): OutputPiece[] {
    const pieces: OutputPiece[] = [];
    for (const piece of this.#pieces) {
      const end = piece.offset + piece.bytes.length;
      if (end <= offset) continue;
      const skip = Math.max(0, offset - piece.offset);
      pieces.push({ offset: piece.offset + skip, data: piece.bytes.subarray(skip).toString('utf8') });
    }
    return pieces;
  }

  /** Every piece from now on; returns the unsubscribe function. */
  subscribe(listener: (piece: OutputPiece) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  private emit(bytes: Buffer): void {
    const piece = { offset: this.#end, bytes: Buffer.from(bytes) };
    this.#end += bytes.length;
    this.#pieces.push(piece);
    this.#retained += bytes.length;
    while (this.#retained > this.limitBytes && this.#pieces.length > 1) this.#retained -= this.#pieces.shift()!.bytes.length;
    const out = { offset: piece.offset, data: piece.bytes.toString('utf8') };
    for (const listener of this.#listeners) listener(out);
  }
}

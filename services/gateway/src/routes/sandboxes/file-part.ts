/**
 * The `file` part of a `multipart/form-data` upload (what the client's `write` sends), read as the
 * body arrives, in chunks of at most `chunkBytes`: a file of any size passes through the gateway
 * without being held in memory. The boundary comes from the same parsing as trace ingest
 * (`boundaryOf`) and the same streaming split (`multipartEvents`).
 */
import { RequestValidationError } from '@berth/errors';
import { multipartEvents } from '../traces/multipart.js';

function malformed(msg: string, loc: (string | number)[] = ['body']): RequestValidationError {
  return new RequestValidationError([{ loc, msg, type: 'value_error.multipart' }]);
}

/**
 * Yields the bytes of the part named `field`; other parts are skipped. Throws
 * RequestValidationError (422) for a body without that part, with it twice, or cut short.
 */
export async function* filePart(body: AsyncIterable<Buffer>, boundary: string, field: string, chunkBytes: number): AsyncGenerator<Buffer, void, undefined> {
  let seen = false;
  let inFile = false;
  for await (const event of multipartEvents(body, boundary)) {
    if (event.kind === 'part') {
      inFile = event.name === field;
      if (inFile && seen) throw malformed(`The body has more than one part named ${field}`);
      seen ||= inFile;
    } else if (inFile) {
      for (let at = 0; at < event.data.length; at += chunkBytes) yield event.data.subarray(at, Math.min(at + chunkBytes, event.data.length));
    }
  }
  if (!seen) throw malformed(`Send the file as a multipart part named ${field}`, ['body', field]);
}

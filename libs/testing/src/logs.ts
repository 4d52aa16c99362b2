/** A logger whose JSON lines a test can read back (e.g. to assert that a failure was logged). */
import { PassThrough } from 'node:stream';
import { createLogger, type Logger } from '@berth/log';

export interface CapturedLogs {
  logger: Logger;
  /** Every line written so far, parsed. */
  lines(): Record<string, unknown>[];
}

export function captureLogger(name = 'test'): CapturedLogs {
  const stream = new PassThrough();
  const chunks: string[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk.toString('utf8')));
  const logger = createLogger({ name, level: 'debug', destination: stream });
  return {
    logger,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((line) => line.trim() !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

/**
 * Structured logging (pino). Every Berth process logs JSON lines; a child logger per service
 * adds `service` so lines from the one-process embedded mode stay attributable.
 */
import { traceFields, tracingOn } from '@berth/tracing';
import { pino, type Logger, type LoggerOptions } from 'pino';

export type { Logger } from 'pino';

export interface LoggerConfig {
  /** Service or component name, written as `service` on every line. */
  name: string;
  /**
   * Minimum level written.
   * @default 'info'
   */
  level?: LoggerOptions['level'];
  /** Where lines go; defaults to stdout. Tests pass a stream to capture them. */
  destination?: NodeJS.WritableStream;
}

const NO_FIELDS = Object.freeze({});

let stdoutDestination: pino.DestinationStream | undefined;

/**
 * One asynchronous stdout for every logger of the process: lines queue while a write is in flight
 * and go out together, instead of one blocking write per line on the request path. pino flushes
 * what is left when the process exits.
 */
function stdout(): pino.DestinationStream {
  stdoutDestination ??= pino.destination({ dest: 1, sync: false });
  return stdoutDestination;
}

/**
 * pino's error serializer, minus the `client` that pg-pool attaches to an idle connection's error:
 * the whole connection object, kilobytes of internals on every lost-connection line.
 */
function serializeError(error: Error): pino.SerializedError {
  const serialized = pino.stdSerializers.err(error);
  delete serialized['client'];
  return serialized;
}

export function createLogger(config: LoggerConfig): Logger {
  const options: LoggerOptions = {
    level: config.level ?? 'info',
    base: { service: config.name },
    timestamp: pino.stdTimeFunctions.isoTime,
    serializers: { err: serializeError },
    // A line logged inside a span (a request, a gRPC call) names its trace: an operator goes from
    // the request id in a log line to the whole trace, and back.
    // Loggers are made before tracing starts, so the check is per line (one branch when off).
    mixin: () => (tracingOn() ? (traceFields() ?? NO_FIELDS) : NO_FIELDS),
    // pino's own merge copies the line's fields into the mixin's object; nothing to merge, no copy.
    mixinMergeStrategy: (line, fields) => (fields === NO_FIELDS ? line : Object.assign(fields, line)),
    redact: {
      paths: ['req.headers["x-api-key"]', 'req.headers.authorization', 'req.headers.cookie', '*.password', '*.secret'],
      censor: '[redacted]',
    },
  };
  return pino(options, (config.destination as pino.DestinationStream | undefined) ?? stdout());
}

/** A logger that writes nothing: for tests and library defaults. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/**
 * Runs `shutdown` once on SIGINT or SIGTERM, logging the signal, then exits: the end of every
 * service's `main.ts`.
 */
export function shutdownOnSignals(logger: Logger, shutdown: () => Promise<void>): void {
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'shutting down');
      shutdown().then(
        () => process.exit(0),
        (error: unknown) => {
          logger.error({ err: error }, 'shutdown failed');
          process.exit(1);
        },
      );
    });
  }
}

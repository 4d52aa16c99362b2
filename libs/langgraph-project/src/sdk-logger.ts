/**
 * The logger graph code gets from `getLogger()` of `@langchain/langgraph-sdk/logging`. That
 * function reads a global the server registers and throws when there is none, so a project that
 * logs this way at module level does not even load without it. Berth's logger writes the graph's
 * lines into the server's own structured (pino) log, with the run, thread, graph and node the line
 * was logged from.
 */
import { AsyncLocalStorageProviderSingleton } from '@langchain/core/singletons';
import type { Logger } from '@berth/log';

const SDK_LOGGER = Symbol.for('langgraph.api.sdk-logger');

/** The SDK's leveled methods (winston's names), each mapped to the nearest pino level. */
const LEVELS = {
  error: 'error',
  warn: 'warn',
  info: 'info',
  help: 'info',
  data: 'info',
  prompt: 'info',
  input: 'info',
  http: 'debug',
  verbose: 'debug',
  debug: 'debug',
  silly: 'trace',
} as const satisfies Record<string, 'error' | 'warn' | 'info' | 'debug' | 'trace'>;

type SdkLevel = keyof typeof LEVELS;

/** Where in a run the current line comes from (empty outside a run). */
function runScope(): Record<string, unknown> {
  const config = AsyncLocalStorageProviderSingleton.getRunnableConfig() as
    { metadata?: Record<string, unknown>; configurable?: Record<string, unknown> } | undefined;
  if (config === undefined) return {};
  const scope: Record<string, unknown> = {};
  const source = { ...config.configurable, ...config.metadata };
  for (const [from, to] of [
    ['run_id', 'run_id'],
    ['thread_id', 'thread_id'],
    ['graph_id', 'graph_id'],
    ['assistant_id', 'assistant_id'],
    ['langgraph_node', 'node'],
    ['langgraph_step', 'step'],
  ] as const) {
    if (source[from] !== undefined) scope[to] = source[from];
  }
  return scope;
}

/** Splits winston-style arguments (`message, ...meta` or one info object) into pino's `(object, message)`. */
function toPino(args: unknown[]): [Record<string, unknown>, string | undefined] {
  const [first, ...rest] = args;
  const meta: Record<string, unknown> = {};
  for (const extra of rest) {
    if (extra instanceof Error) meta.err = extra;
    else if (extra !== null && typeof extra === 'object') Object.assign(meta, extra);
    else if (extra !== undefined) ((meta.args ??= []) as unknown[]).push(extra);
  }
  if (typeof first === 'string') return [meta, first];
  if (first instanceof Error) return [{ ...meta, err: first }, first.message];
  if (first !== null && typeof first === 'object') {
    const { message, ...fields } = first as Record<string, unknown>;
    return [{ ...fields, ...meta }, typeof message === 'string' ? message : undefined];
  }
  return [meta, first === undefined ? undefined : String(first)];
}

export type SdkLogger = Record<SdkLevel, (...args: unknown[]) => SdkLogger> & {
  log(level: string, ...args: unknown[]): SdkLogger;
};

/** A logger with the SDK's interface that writes to `logger`, tagging each line with its run scope. */
export function createSdkLogger(logger: Logger): SdkLogger {
  const write = (level: SdkLevel, args: unknown[]): SdkLogger => {
    const [fields, message] = toPino(args);
    logger[LEVELS[level]]({ ...runScope(), ...fields }, message);
    return sdkLogger;
  };
  const sdkLogger = {
    log: (level: string, ...args: unknown[]) => write(level in LEVELS ? (level as SdkLevel) : 'info', args),
  } as SdkLogger;
  for (const level of Object.keys(LEVELS) as SdkLevel[]) sdkLogger[level] = (...args: unknown[]) => write(level, args);
  return sdkLogger;
}

/**
 * Makes `getLogger()` work in project code loaded by this process. Call before a project's
 * modules are imported; a later call replaces the logger.
 */
export function registerSdkLogger(logger: Logger): void {
  (globalThis as Record<symbol, unknown>)[SDK_LOGGER] = createSdkLogger(logger.child({ component: 'graph' }));
}

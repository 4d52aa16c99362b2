/**
 * Build and deploy log entries as lines a person reads. An agent server logs pino JSON to stdout,
 * and the control plane stores each stdout line as an entry's message; such a message is shown as
 * `level message key=value…` (the error's first stack line included), anything else as it is.
 */
import type { LogEntry } from './api.js';

const PINO_LEVELS: Record<number, string> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };
/** pino's bookkeeping: said by the line's own columns, or noise to a reader. */
const HIDDEN = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'service', 'name', 'v']);

interface Readable {
  level: string;
  text: string;
}

/** The level and text of a message: parsed when it is a pino line, else the entry's own. */
function readable(entry: Pick<LogEntry, 'level' | 'message'>): Readable {
  const line = pinoLine(entry.message);
  if (!line) return { level: entry.level, text: entry.message };
  const level = typeof line.level === 'number' ? (PINO_LEVELS[line.level] ?? entry.level) : typeof line.level === 'string' ? line.level : entry.level;
  const fields = Object.entries(line)
    .filter(([key, value]) => !HIDDEN.has(key) && value !== null)
    .map(([key, value]) => `${key}=${quote(fieldValue(key, value))}`);
  return { level, text: [typeof line.msg === 'string' ? line.msg : '', ...fields].filter(Boolean).join(' ') };
}

function pinoLine(message: string): Record<string, unknown> | undefined {
  if (!message.startsWith('{')) return undefined;
  try {
    const parsed = JSON.parse(message) as unknown;
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) && 'level' in parsed ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    // A line cut short (the store keeps at most so many characters) or JSON of another shape.
    return undefined;
  }
}

function fieldValue(key: string, value: unknown): string {
  if (typeof value !== 'object') return String(value);
  const object = value as Record<string, unknown>;
  // pino's serialisers: an error's first stack line says what and where; a request its method and URL.
  if (key === 'err' || key === 'error') {
    const first = typeof object.stack === 'string' ? object.stack.split('\n')[0] : undefined;
    return first ?? String(object.message ?? JSON.stringify(value));
  }
  if (key === 'req' && typeof object.method === 'string') return `${object.method} ${String(object.url ?? '')}`;
  if (key === 'res' && typeof object.statusCode === 'number') return String(object.statusCode);
  if (Array.isArray(value) && value.every((item) => typeof item !== 'object')) return value.join(',');
  return JSON.stringify(value);
}

function quote(value: string): string {
  return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
}

/** `12:01:02` in local time. */
function clockTime(timestamp: string): string {
  const date = new Date(timestamp);
  return Number.isNaN(date.getTime()) ? timestamp : date.toTimeString().slice(0, 8);
}

/** `2025-01-02` in local time: `berth deploy logs` says when the day changes. */
export function localDay(timestamp: string): string {
  const date = new Date(timestamp);
  if (Number.isNaN(date.getTime())) return '';
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
}

/** One entry as a line: `12:01:02 deploy INFO  server listening port=1234`. */
export function formatLog(entry: Pick<LogEntry, 'timestamp' | 'type' | 'level' | 'message'>): string {
  const { level, text } = readable(entry);
  return `${clockTime(entry.timestamp)} ${entry.type.padEnd(6)} ${level.toUpperCase().padEnd(5)} ${text}`;
}

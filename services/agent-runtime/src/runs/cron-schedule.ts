/**
 * Cron schedules as the LangGraph server reads them: five fields (minute hour day-of-month month
 * day-of-week) or a macro such as `@daily`, in an IANA time zone (UTC by default). Seconds
 * fields are refused: the server ticks at most once a minute.
 */
import { CronExpressionParser } from 'cron-parser';

const MACROS = new Set(['@yearly', '@annually', '@monthly', '@weekly', '@daily', '@hourly']);

/** Why a schedule cannot be used; undefined when it can. */
export function scheduleProblem(schedule: string): string | undefined {
  const trimmed = schedule.trim();
  if (trimmed.startsWith('@')) {
    if (!MACROS.has(trimmed)) return `Unknown schedule macro ${trimmed} (use one of ${[...MACROS].join(', ')})`;
  } else {
    const fields = trimmed.split(/\s+/);
    if (fields.length !== 5) return `A schedule has 5 fields (minute hour day-of-month month day-of-week); got ${fields.length}`;
    // Jenkins-style hashed values pick a time per seed: a tick must be the same wherever it is computed.
    if (fields.some((field) => /(^|,)H($|[(/,])/.test(field))) return 'Hashed values (H) are not supported; name the minute and hour';
  }
  try {
    CronExpressionParser.parse(trimmed, { tz: 'UTC' }).next();
    return undefined;
  } catch (error) {
    return `Invalid cron schedule: ${(error as Error).message}`;
  }
}

/** Why a time zone cannot be used; undefined for a zone both Intl and the cron parser know. */
export function timezoneProblem(timezone: string): string | undefined {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: timezone });
    CronExpressionParser.parse('0 0 * * *', { tz: timezone }).next();
    return undefined;
  } catch {
    return `Unknown time zone ${timezone} (use an IANA zone such as Europe/Paris)`;
  }
}

/**
 * The first tick strictly after `after`, or null when there is none before `endTime`. Only for
 * schedules and zones the checks above accepted.
 */
export function nextRunDate(schedule: string, timezone: string | null, after: Date, endTime: Date | null): Date | null {
  const expression = CronExpressionParser.parse(schedule.trim(), { tz: timezone ?? 'UTC', currentDate: after });
  const next = expression.next().toDate();
  return endTime && next > endTime ? null : next;
}

import { timestampDate, type Timestamp } from '@berth/proto';

/** Times without a zone are UTC, as LangSmith reads them. */
export function utc(text: string): Date {
  return new Date(/(Z|[+-]\d{2}:?\d{2})$/i.test(text) || !text.includes('T') ? text : `${text}Z`);
}

/** A protobuf time as the API writes times, or undefined when unset. */
export const isoOf = (t: Timestamp | undefined): string | undefined => (t ? timestampDate(t).toISOString() : undefined);

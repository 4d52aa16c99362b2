/**
 * A JSON object typed as text, checked as it is typed: the store's values, a search's filter and a
 * cron's input must each be a JSON object, so the form says what is wrong before anything is sent.
 */
import { useId } from 'react';
import { inputClass } from '../../components/controls';

export type JsonObject = Record<string, unknown>;

/** The object `text` holds, or why it is not one. Empty text is `empty` (a field may allow it). */
export function parseJsonObject(text: string, empty?: JsonObject): { value: JsonObject; problem?: undefined } | { value?: undefined; problem: string } {
  if (!text.trim() && empty) return { value: empty };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { problem: `Not JSON: ${(error as Error).message}` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { problem: 'Must be a JSON object ({…})' };
  return { value: value as JsonObject };
}

/** A labelled textarea (or one-line input) for a JSON object; `problem` is shown under it and marks it invalid. */
export function JsonField({
  label,
  text,
  onText,
  problem,
  rows = 6,
  hint,
}: {
  label: string;
  text: string;
  onText: (text: string) => void;
  problem?: string | undefined;
  /** 1: a one-line input. */
  rows?: number;
  hint?: string;
}) {
  const id = useId();
  const common = {
    id,
    value: text,
    spellCheck: false,
    'aria-invalid': problem ? true : undefined,
    'aria-describedby': `${id}-note`,
    className: `${inputClass} w-full font-mono text-xs`,
  } as const;
  return (
    <div className="space-y-1">
      <label htmlFor={id} className="block text-sm font-medium">
        {label}
      </label>
      {rows === 1 ? (
        <input type="text" {...common} placeholder="{}" onChange={(e) => onText(e.target.value)} />
      ) : (
        <textarea {...common} rows={rows} onChange={(e) => onText(e.target.value)} />
      )}
      <p id={`${id}-note`} className={`text-xs ${problem ? 'text-red-800 dark:text-red-300' : 'text-slate-700 dark:text-slate-300'}`}>
        {problem ?? hint ?? ''}
      </p>
    </div>
  );
}

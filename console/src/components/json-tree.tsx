/**
 * Any JSON value as a collapsible tree that stays light whatever its size: objects and arrays
 * below the first levels start collapsed and render their entries only when opened, a hundred at
 * a time; a long string shows its start and "show all"; a data URL (an image or file pasted as
 * base64) is a labelled placeholder with its size until asked for. So a 5 MB output puts a few
 * kilobytes in the DOM, and nothing is inlined as an image.
 */
import { useState, type ReactNode } from 'react';

/** Characters of a string shown before "show all". */
export const STRING_PREVIEW = 1_000;
/** Entries of an object or array shown before "show more". */
const ENTRIES_PAGE = 100;
/** Levels open at first (0: the value itself). */
const OPEN_LEVELS = 2;

const DATA_URL = /^data:([\w.+-]+\/[\w.+-]+)?[^,]{0,200},/;

/** "1.2 MB" for a byte count. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** The bytes a base64 text decodes to (about: padding aside). */
export const base64Bytes = (length: number) => Math.floor((length * 3) / 4);

/** A data URL's media type and decoded size, or undefined for any other string. */
export function dataUrlInfo(text: string): { type: string; bytes: number } | undefined {
  const match = DATA_URL.exec(text.slice(0, 300));
  if (!match) return undefined;
  const body = text.length - match[0].length;
  return { type: match[1] ?? 'data', bytes: match[0].includes(';base64') ? base64Bytes(body) : body };
}

const linkButton = 'rounded text-xs font-medium text-blue-700 underline hover:no-underline dark:text-blue-300';

/** A long text as its first characters and a "show all" that renders the rest when pressed. */
export function LongText({ text, className = '' }: { text: string; className?: string }) {
  const [all, setAll] = useState(false);
  const data = dataUrlInfo(text);
  if (data && !all) {
    return (
      <span className="inline-flex flex-wrap items-baseline gap-2">
        <span className="rounded bg-slate-200 px-1.5 py-0.5 text-xs text-slate-800 dark:bg-slate-800 dark:text-slate-200">
          {data.type} data URL, {formatBytes(data.bytes)}
        </span>
        <button type="button" className={linkButton} onClick={() => setAll(true)}>
          show all ({text.length.toLocaleString('en')} characters)
        </button>
      </span>
    );
  }
  if (all || text.length <= STRING_PREVIEW) return <span className={`break-words whitespace-pre-wrap ${className}`}>{text}</span>;
  return (
    <span className={`break-words whitespace-pre-wrap ${className}`}>
      {text.slice(0, STRING_PREVIEW)}…{' '}
      <button type="button" className={linkButton} onClick={() => setAll(true)}>
        show all ({text.length.toLocaleString('en')} characters)
      </button>
    </span>
  );
}

function Scalar({ value }: { value: unknown }) {
  if (typeof value === 'string')
    return (
      <span className="text-emerald-800 dark:text-emerald-300">
        <LongText text={value} />
      </span>
    );
  if (typeof value === 'number') return <span className="text-blue-800 dark:text-blue-300">{String(value)}</span>;
  if (typeof value === 'boolean' || value === null) return <span className="text-purple-800 dark:text-purple-300">{String(value)}</span>;
  return <span>{JSON.stringify(value) ?? 'undefined'}</span>;
}

function Entries({ entries, depth }: { entries: [string, unknown][]; depth: number }) {
  const [shown, setShown] = useState(ENTRIES_PAGE);
  return (
    <ul className="ml-4 border-l border-slate-200 pl-3 dark:border-slate-700">
      {entries.slice(0, shown).map(([key, value]) => (
        <li key={key}>
          <JsonNode label={key} value={value} depth={depth} />
        </li>
      ))}
      {entries.length > shown ? (
        <li>
          <button type="button" className={linkButton} onClick={() => setShown(shown + ENTRIES_PAGE)}>
            show {Math.min(ENTRIES_PAGE, entries.length - shown)} more of {entries.length.toLocaleString('en')}
          </button>
        </li>
      ) : null}
    </ul>
  );
}

function JsonNode({ label, value, depth }: { label?: ReactNode; value: unknown; depth: number }) {
  const container = typeof value === 'object' && value !== null;
  const [open, setOpen] = useState(depth < OPEN_LEVELS);
  const key = label === undefined ? null : <span className="text-slate-700 dark:text-slate-300">{label}: </span>;
  if (!container) {
    return (
      <div className="py-0.5">
        {key}
        <Scalar value={value} />
      </div>
    );
  }
  const isArray = Array.isArray(value);
  const entries = isArray ? value.map((item, i): [string, unknown] => [String(i), item]) : Object.entries(value);
  const summary = isArray ? `[${entries.length} item${entries.length === 1 ? '' : 's'}]` : `{${entries.length} key${entries.length === 1 ? '' : 's'}}`;
  if (entries.length === 0) {
    return (
      <div className="py-0.5">
        {key}
        <span className="text-slate-600 dark:text-slate-400">{isArray ? '[]' : '{}'}</span>
      </div>
    );
  }
  return (
    <div className="py-0.5">
      <button type="button" aria-expanded={open} onClick={() => setOpen(!open)} className="rounded text-left hover:bg-slate-100 dark:hover:bg-slate-800">
        <span aria-hidden="true" className="inline-block w-3 text-slate-600 dark:text-slate-400">
          {open ? '▾' : '▸'}
        </span>
        {key}
        <span className="text-slate-600 dark:text-slate-400">{summary}</span>
      </button>
      {open ? <Entries entries={entries} depth={depth + 1} /> : null}
    </div>
  );
}

/** `value` as a tree; `label` names the top (e.g. "inputs"). */
export function JsonTree({ value, label }: { value: unknown; label?: string }) {
  return (
    <div className="font-mono text-xs leading-5">
      <JsonNode label={label} value={value} depth={0} />
    </div>
  );
}

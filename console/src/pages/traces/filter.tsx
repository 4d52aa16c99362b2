/**
 * The runs filter in the filter language, checked as it is typed (`POST /runs/filter/validate`,
 * a moment after the last key): a problem is shown under the text with a caret at the character
 * the API names (`ctx.position`). Enter (or Apply) applies a filter that is valid.
 */
import { queryOptions, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState, type FormEvent } from 'react';
import { call } from '../../api';
import type { FilterProblem } from './data';

/** How long typing pauses before the text is checked. */
const CHECK_DELAY_MS = 250;

type Problem = FilterProblem['detail'][number];

const validation = (filter: string) =>
  queryOptions({
    queryKey: ['filter-validate', filter],
    queryFn: async ({ signal }) => {
      const answer = await call<{ valid: true } | FilterProblem>('/runs/filter/validate', { method: 'POST', body: { filter }, accept: [422], signal });
      return 'detail' in answer ? (answer.detail[0] ?? null) : null;
    },
    staleTime: Infinity,
  });

function useDebounced<T>(value: T, ms: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(timer);
  }, [value, ms]);
  return settled;
}

export function FilterBox({ value, onApply }: { value: string; onApply: (filter: string) => void }) {
  const queryClient = useQueryClient();
  const [draft, setDraft] = useState(value);
  // A new filter from the URL (a link, back/forward) replaces what is in the box.
  useEffect(() => setDraft(value), [value]);
  const settled = useDebounced(draft.trim(), CHECK_DELAY_MS);
  const check = useQuery({ ...validation(settled), enabled: settled !== '' });
  const problem: Problem | null | undefined = settled === draft.trim() && settled !== '' ? check.data : undefined;
  const position = problem?.ctx?.position;

  const apply = async (event: FormEvent) => {
    event.preventDefault();
    const text = draft.trim();
    if (text === '' || (await queryClient.fetchQuery(validation(text))) === null) onApply(text);
  };

  return (
    <form role="search" aria-label="Filter runs" onSubmit={(event) => void apply(event)} className="flex flex-col gap-1">
      <div className="flex items-center gap-2">
        <label htmlFor="run-filter" className="text-sm font-medium">
          Filter
        </label>
        <input
          id="run-filter"
          type="text"
          spellCheck={false}
          autoComplete="off"
          value={draft}
          maxLength={10_000}
          placeholder='and(eq(status, "error"), gt(latency, "2s"))'
          aria-invalid={problem ? true : undefined}
          aria-describedby={problem ? 'run-filter-problem' : 'run-filter-help'}
          onChange={(event) => setDraft(event.target.value)}
          className="min-w-0 flex-1 rounded-md border border-slate-400 bg-white px-3 py-1.5 font-mono text-sm dark:border-slate-500 dark:bg-slate-900"
        />
        <button type="submit" className="rounded-md border border-slate-300 px-3 py-1 text-sm hover:bg-slate-100 dark:border-slate-600 dark:hover:bg-slate-800">
          Apply
        </button>
        {value ? (
          <button
            type="button"
            onClick={() => onApply('')}
            className="rounded-md border border-slate-300 px-3 py-1 text-sm hover:bg-slate-100 dark:border-slate-600 dark:hover:bg-slate-800"
          >
            Clear
          </button>
        ) : null}
      </div>
      {problem ? (
        <div id="run-filter-problem" role="alert" className="rounded-md bg-red-50 p-2 text-sm text-red-800 dark:bg-red-950 dark:text-red-200">
          {position !== undefined ? (
            <pre aria-hidden="true" className="overflow-x-auto font-mono text-xs" data-testid="filter-caret" data-position={position}>
              {`${draft.trim()}\n${' '.repeat(position)}^`}
            </pre>
          ) : null}
          <p>{problem.msg}</p>
        </div>
      ) : (
        <p id="run-filter-help" className="text-xs text-slate-700 dark:text-slate-300">
          The filter language of <code>POST /runs/query</code>, e.g. <code>eq(thread_id, "…")</code>, <code>has(tags, "prod")</code>,{' '}
          <code>gt(latency, "2s")</code>; Enter applies it.
        </p>
      )}
    </form>
  );
}

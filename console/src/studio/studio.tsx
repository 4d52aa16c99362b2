/**
 * Studio: see, run and debug the agents of one agent server. It talks to the agent server only
 * through the official LangGraph SDK (`Client` of @langchain/langgraph-sdk), at the deployment URL
 * through the gateway (the console session, its CSRF token as a default header) or at `berth dev`'s
 * own origin: what Studio does, any SDK user can, so using it checks the server's compatibility.
 * Loaded on demand (a chunk of its own): the console's first load does not carry the SDK or dagre.
 */
import { Client } from '@langchain/langgraph-sdk';
import { useMemo, useRef, useState, type KeyboardEvent } from 'react';
import { StudioContext, type StudioTarget } from './context';
import { STUDIO_TABS } from './tabs';

export type { StudioTarget } from './context';

export interface StudioProps {
  target: StudioTarget;
  /** The open tab's id, when the page keeps it (the console: `?tab=`); else Studio keeps it. */
  tab?: string | undefined;
  onTab?: ((id: string) => void) | undefined;
}

export default function Studio({ target, tab, onTab }: StudioProps) {
  const client = useMemo(() => new Client({ apiUrl: target.apiUrl, apiKey: null, defaultHeaders: target.headers }), [target]);
  const context = useMemo(() => ({ target, client }), [target, client]);
  const [own, setOwn] = useState(STUDIO_TABS[0]!.id);
  const open = STUDIO_TABS.find((t) => t.id === (onTab ? tab : own)) ?? STUDIO_TABS[0]!;
  const choose = (id: string) => (onTab ? onTab(id) : setOwn(id));
  const buttons = useRef<(HTMLButtonElement | null)[]>([]);

  // The tab pattern: arrows move between tabs (and open them), Home/End go to the ends.
  const onKeyDown = (event: KeyboardEvent) => {
    const at = STUDIO_TABS.indexOf(open);
    const to = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: STUDIO_TABS.length - 1 }[event.key];
    if (to === undefined) return;
    event.preventDefault();
    const next = STUDIO_TABS[(to + STUDIO_TABS.length) % STUDIO_TABS.length]!;
    choose(next.id);
    buttons.current[STUDIO_TABS.indexOf(next)]?.focus();
  };

  return (
    <StudioContext.Provider value={context}>
      <div role="tablist" aria-label="Studio" onKeyDown={onKeyDown} className="mb-4 flex gap-1 border-b border-slate-300 dark:border-slate-700">
        {STUDIO_TABS.map((t, i) => (
          <button
            key={t.id}
            ref={(el) => {
              buttons.current[i] = el;
            }}
            type="button"
            role="tab"
            id={`studio-tab-${t.id}`}
            aria-selected={t === open}
            aria-controls="studio-panel"
            tabIndex={t === open ? 0 : -1}
            onClick={() => choose(t.id)}
            className={`-mb-px border-b-2 px-3 py-1.5 text-sm font-medium ${t === open ? 'border-slate-900 dark:border-slate-100' : 'border-transparent text-slate-700 dark:text-slate-300'}`}
          >
            {t.label}
          </button>
        ))}
      </div>
      <div role="tabpanel" id="studio-panel" aria-labelledby={`studio-tab-${open.id}`}>
        <open.Component key={open.id} />
      </div>
    </StudioContext.Provider>
  );
}

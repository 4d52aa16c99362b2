/**
 * A thread's pending interrupts, each with its value and a way to answer it: a JSON answer, or —
 * when the value looks like a human-in-the-loop request (an action to approve) — Approve, Reject
 * and Edit. An answer resumes the run (`command: { resume }`); with several interrupts pending, it
 * answers only its own (a resume map keyed by the interrupt's id), the others stay pending.
 */
import type { Interrupt, ThreadTask } from '@langchain/langgraph-sdk';
import { useId, useState, type FormEvent } from 'react';
import { JsonTree } from '../../components/json-tree';
import { ErrorNote } from '../../components/ui';
import { buttonClass, inputClass, secondaryButtonClass } from './styles';

export interface PendingInterrupt {
  /** The interrupt's id (a resume map's key); undefined for interrupt_before/after pauses. */
  id?: string;
  /** The node that was interrupted. */
  node: string;
  value: unknown;
}

/** Every interrupt of the thread's pending tasks, in task order. */
export function pendingInterrupts(tasks: ThreadTask[] | undefined): PendingInterrupt[] {
  return (tasks ?? []).flatMap((task) =>
    task.interrupts.map((i: Interrupt) => ({ ...(i.id === undefined ? {} : { id: i.id }), node: task.name, value: i.value })),
  );
}

/** Whether a value asks a human to approve an action (langchain's HITL middleware and the like). */
export function isApprovalRequest(value: unknown): boolean {
  const first = Array.isArray(value) ? value[0] : value;
  if (typeof first !== 'object' || first === null) return false;
  return ['action_request', 'action_requests', 'allowed_decisions', 'review_configs', 'allow_accept'].some((key) => key in first);
}

/** `value` for this interrupt alone when others are pending too (a resume map), else `value` itself. */
export function resumeFor(all: PendingInterrupt[], one: PendingInterrupt, value: unknown): unknown {
  return all.length > 1 && one.id !== undefined ? { [one.id]: value } : value;
}

export function Interrupts({ interrupts, busy, onAnswer }: { interrupts: PendingInterrupt[]; busy: boolean; onAnswer: (resume: unknown) => void }) {
  if (interrupts.length === 0) return null;
  return (
    <section aria-label="Interrupts" className="space-y-3 rounded-md border border-amber-400 bg-amber-50 p-3 dark:border-amber-700 dark:bg-amber-950">
      <h3 className="text-sm font-semibold">{interrupts.length === 1 ? 'The run waits for an answer' : `The run waits for ${interrupts.length} answers`}</h3>
      <ul className="space-y-3">
        {interrupts.map((one, i) => (
          <li key={one.id ?? i} data-interrupt={one.node}>
            <InterruptCard interrupt={one} busy={busy} onAnswer={(value) => onAnswer(resumeFor(interrupts, one, value))} />
          </li>
        ))}
      </ul>
    </section>
  );
}

function InterruptCard({ interrupt, busy, onAnswer }: { interrupt: PendingInterrupt; busy: boolean; onAnswer: (value: unknown) => void }) {
  const approval = isApprovalRequest(interrupt.value);
  const [editing, setEditing] = useState(!approval);
  const [text, setText] = useState(approval ? JSON.stringify(interrupt.value, null, 2) : '');
  const [error, setError] = useState<string>();
  const answerId = useId();

  const submit = (event: FormEvent) => {
    event.preventDefault();
    try {
      onAnswer(parseAnswer(text));
      setError(undefined);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };

  return (
    <div className="space-y-2 rounded-md border border-slate-300 bg-white p-3 text-sm dark:border-slate-700 dark:bg-slate-900">
      <p className="font-medium">
        {interrupt.node}
        {interrupt.id ? <span className="ml-2 font-mono text-xs text-slate-700 dark:text-slate-300">{interrupt.id.slice(0, 8)}</span> : null}
      </p>
      <JsonTree value={interrupt.value} label="value" />
      {approval ? (
        <div className="flex gap-2">
          <button type="button" disabled={busy} onClick={() => onAnswer('approve')} className={buttonClass}>
            Approve
          </button>
          <button type="button" disabled={busy} onClick={() => onAnswer('reject')} className={secondaryButtonClass}>
            Reject
          </button>
          <button type="button" disabled={busy} aria-expanded={editing} onClick={() => setEditing(!editing)} className={secondaryButtonClass}>
            Edit
          </button>
        </div>
      ) : null}
      {editing ? (
        <form onSubmit={submit} className="space-y-2">
          <label htmlFor={answerId} className="block text-xs font-medium">
            Answer (JSON, or plain text)
          </label>
          <textarea id={answerId} value={text} onChange={(e) => setText(e.target.value)} rows={approval ? 6 : 2} className={`w-full font-mono ${inputClass}`} />
          <button type="submit" disabled={busy || !text.trim()} className={buttonClass}>
            {approval ? 'Send edited' : 'Answer'}
          </button>
          {error ? <ErrorNote error={error} /> : null}
        </form>
      ) : null}
    </div>
  );
}

/** An answer as JSON when it is JSON, else as the text typed (a plain word answers most questions). */
function parseAnswer(text: string): unknown {
  const trimmed = text.trim();
  try {
    return JSON.parse(trimmed);
  } catch {
    if (/^[[{"]/.test(trimmed)) throw new Error('The answer looks like JSON but is not valid JSON.');
    return trimmed;
  }
}

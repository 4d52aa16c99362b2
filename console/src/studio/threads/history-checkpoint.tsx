/**
 * One checkpoint of a thread's history: its state (values, next nodes, tasks and their interrupts)
 * and the two ways to fork the thread there. **Re-run from here** starts a run with no input from
 * the checkpoint (`runs.stream` with `checkpointId`: LangGraph copies the checkpoint, source
 * `fork`, and runs its next nodes again). **Edit state** writes values at the checkpoint
 * (`threads.updateState` with `checkpointId`: a checkpoint of source `update` whose parent is this
 * one). Either way the new checkpoint is the thread's head.
 */
import type { ThreadState } from '@langchain/langgraph-sdk';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { Button, inputClass } from '../../components/controls';
import { JsonTree } from '../../components/json-tree';
import { ErrorNote, Time } from '../../components/ui';
import { useStudio } from '../context';
import { describeError } from '../memory/errors';
import { JsonField, parseJsonObject } from '../memory/json-field';
import { changedValues, checkpointId, nodeNames, writtenBy, type Timeline } from './history-tree';
import { threadKeys, type RunRequest } from './use-run-stream';

const pretty = (value: unknown) => JSON.stringify(value, null, 2);

export function CheckpointPanel({
  threadId,
  state,
  isHead,
  timeline,
  assistantId,
  busy,
  onRun,
  onForked,
  onClose,
}: {
  threadId: string;
  state: ThreadState;
  isHead: boolean;
  timeline: Timeline;
  /** The assistant a re-run uses (the one whose run wrote the checkpoint, when it says). */
  assistantId: string | undefined;
  busy: boolean;
  onRun: (assistantId: string, request: RunRequest) => void;
  /** A fork was made: its new checkpoint's id, or undefined when a run makes it (it is the head once the run ends). */
  onForked: (checkpointId: string | undefined) => void;
  onClose: () => void;
}) {
  const id = checkpointId(state);
  const step = String(state.metadata?.step ?? '?');
  const headingId = useId();
  const [editing, setEditing] = useState(false);
  const tasks = state.tasks ?? [];
  const rerun = () => {
    if (!assistantId) return;
    onRun(assistantId, { input: null, checkpointId: id });
    onForked(undefined);
  };

  return (
    <section aria-labelledby={headingId} data-open-checkpoint={id} className="space-y-3 rounded-md border border-slate-300 p-3 text-sm dark:border-slate-700">
      <div className="flex items-start gap-2">
        <h4 id={headingId} className="font-semibold">
          Step {step}: {writtenBy(timeline, state)}
          {isHead ? ' (the head)' : ''}
        </h4>
        <Button className="ml-auto px-2 py-0.5 text-xs" onClick={onClose}>
          Close<span className="sr-only"> checkpoint</span>
        </Button>
      </div>
      <dl className="grid grid-cols-[auto_1fr] gap-x-3 gap-y-0.5 text-xs">
        <dt className="text-slate-700 dark:text-slate-300">Checkpoint</dt>
        <dd className="font-mono break-all">{id}</dd>
        <dt className="text-slate-700 dark:text-slate-300">Parent</dt>
        <dd className="font-mono break-all">{state.parent_checkpoint?.checkpoint_id ?? 'none (the first)'}</dd>
        <dt className="text-slate-700 dark:text-slate-300">Written</dt>
        <dd>{state.created_at ? <Time iso={state.created_at} /> : 'unknown'}</dd>
        <dt className="text-slate-700 dark:text-slate-300">Next</dt>
        <dd data-testid="checkpoint-next">{state.next.length > 0 ? state.next.join(', ') : 'nothing (the graph ended here)'}</dd>
      </dl>
      <div data-testid="checkpoint-values">
        <JsonTree value={state.values} label="values" />
      </div>
      {tasks.length > 0 ? (
        <div>
          <h5 className="text-xs font-semibold">Tasks</h5>
          <ul className="space-y-1">
            {tasks.map((task) => (
              <li key={task.id} data-task={task.name} className="text-xs">
                <span className="font-mono">{task.name}</span>
                {task.error ? <span className="text-red-800 dark:text-red-300"> failed: {task.error}</span> : null}
                {task.interrupts.map((interrupt, i) => (
                  <div key={interrupt.id ?? i} className="mt-1">
                    <JsonTree value={interrupt.value} label="interrupt" />
                  </div>
                ))}
              </li>
            ))}
          </ul>
        </div>
      ) : null}
      {editing ? (
        <EditState threadId={threadId} state={state} timeline={timeline} busy={busy} onDone={onForked} onCancel={() => setEditing(false)} />
      ) : (
        <div className="flex flex-wrap items-center gap-2">
          <Button tone="primary" disabled={busy || !assistantId || state.next.length === 0} onClick={rerun}>
            Re-run from here
          </Button>
          <Button disabled={busy} onClick={() => setEditing(true)}>
            Edit state
          </Button>
          {state.next.length === 0 ? (
            <p className="w-full text-xs text-slate-700 dark:text-slate-300">
              The graph ended here, so there is nothing to re-run: edit the state to fork from it.
            </p>
          ) : null}
        </div>
      )}
    </section>
  );
}

/** The checkpoint's values as JSON to edit; the keys changed are written at the checkpoint (a fork). */
function EditState({
  threadId,
  state,
  timeline,
  busy,
  onDone,
  onCancel,
}: {
  threadId: string;
  state: ThreadState;
  timeline: Timeline;
  busy: boolean;
  onDone: (checkpointId: string | undefined) => void;
  onCancel: () => void;
}) {
  const { client, target } = useStudio();
  const queries = useQueryClient();
  const [text, setText] = useState(() => pretty(state.values));
  const [asNode, setAsNode] = useState('');
  const ids = { asNode: useId(), nodes: useId() };
  const parsed = parseJsonObject(text);
  const changes = parsed.value ? changedValues(state.values, parsed.value) : {};
  const problem = parsed.problem ?? (Object.keys(changes).length === 0 ? 'Nothing changed yet' : undefined);
  const save = useMutation({
    mutationFn: async () => {
      // The LangGraph API answers `{checkpoint}` (the SDK's type says `{configurable}`).
      const made = (await client.threads.updateState(threadId, {
        values: changes,
        checkpointId: checkpointId(state),
        ...(asNode.trim() ? { asNode: asNode.trim() } : {}),
      })) as { checkpoint?: { checkpoint_id?: string } };
      const keys = threadKeys(target.key, threadId);
      await Promise.all([keys.state, keys.list].map((queryKey) => queries.invalidateQueries({ queryKey })));
      return made.checkpoint?.checkpoint_id;
    },
    onSuccess: onDone,
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (!problem) save.mutate();
  };

  return (
    <form onSubmit={submit} aria-label="Edit the state at this checkpoint" className="space-y-2">
      <JsonField
        label="Values (JSON object)"
        text={text}
        onText={setText}
        problem={problem}
        rows={12}
        hint={`Writes ${Object.keys(changes).join(', ')} at this checkpoint: a new branch.`}
      />
      <div className="flex flex-wrap items-center gap-2">
        <label htmlFor={ids.asNode} className="text-sm font-medium">
          As node
        </label>
        <input
          id={ids.asNode}
          name="as-node"
          list={ids.nodes}
          value={asNode}
          onChange={(e) => setAsNode(e.target.value)}
          placeholder="the node that wrote it"
          className={`min-w-0 ${inputClass}`}
        />
        <datalist id={ids.nodes}>
          {nodeNames(timeline).map((node) => (
            <option key={node} value={node} />
          ))}
        </datalist>
      </div>
      <p className="text-xs text-slate-700 dark:text-slate-300">
        Only the keys you change are written, as if the node had returned them (its reducers apply); the graph goes on from there as it would after that node.
      </p>
      {save.error ? <ErrorNote error={describeError(save.error)} /> : null}
      <div className="flex gap-2">
        <Button type="submit" tone="primary" disabled={busy || Boolean(problem) || save.isPending}>
          Save as a new branch
        </Button>
        <Button onClick={onCancel}>Cancel</Button>
      </div>
    </form>
  );
}

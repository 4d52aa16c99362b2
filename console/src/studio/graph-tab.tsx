/**
 * Studio's Graph tab: each graph of the agent server drawn for the assistant chosen (its system
 * assistant, or another of the graph: `GET /assistants/{id}/graph` with its subgraphs, `xray`), and
 * a message box that runs it with that assistant, the executing node highlighted live and each node's latest update shown.
 */
import type { Client } from '@langchain/langgraph-sdk';
import { useQuery } from '@tanstack/react-query';
import { useId, useMemo, useState, type FormEvent } from 'react';
import { Chat, findMessages } from '../components/chat';
import { JsonTree } from '../components/json-tree';
import { inputClass } from '../components/controls';
import { ErrorNote } from '../components/ui';
import { GraphView, type NodeState } from './graph-view';
import { layoutGraph, type DrawableGraph } from './layout';
import { useStudio, type StudioTarget } from './context';
import { GraphPicker, useGraphs } from './graphs';

type RunStatus = 'idle' | 'running' | 'success' | 'error';

interface RunView {
  status: RunStatus;
  states: Map<string, NodeState>;
  updates: Map<string, unknown>;
  error?: string;
}

const IDLE: RunView = { status: 'idle', states: new Map(), updates: new Map() };

export function GraphTab() {
  const { client, target } = useStudio();
  const graphs = useGraphs();
  const [chosen, setChosen] = useState<string>();
  const graph = graphs.data?.find((g) => g.graphId === chosen) ?? graphs.data?.[0];
  // The graph's assistants: each is drawn and run with its own config (the system one to start with).
  const assistants = useQuery({
    queryKey: ['studio', target.key, 'graph-assistants', graph?.graphId],
    queryFn: ({ signal }) => client.assistants.search({ graphId: graph!.graphId, limit: 100, sortBy: 'created_at', sortOrder: 'asc', signal }),
    enabled: graph !== undefined,
  });
  const [chosenAssistant, setChosenAssistant] = useState<string>();
  const assistantPicker = useId();
  const assistantId = assistants.data?.some((a) => a.assistant_id === chosenAssistant) ? chosenAssistant! : graph?.assistantId;

  if (graphs.error) return <ErrorNote error={graphs.error} />;
  if (!graphs.data) return <p>Loading the graphs…</p>;
  if (!graph || !assistantId) return <p>This agent server has no graphs.</p>;
  return (
    <div className="space-y-4">
      <div className="flex flex-wrap items-center gap-4">
        {graphs.data.length > 1 ? <GraphPicker graphs={graphs.data} value={graph.graphId} onChange={setChosen} /> : null}
        {assistants.data && assistants.data.length > 1 ? (
          <div className="flex items-center gap-2 text-sm">
            <label htmlFor={assistantPicker} className="font-medium">
              Assistant
            </label>
            <select id={assistantPicker} name="graph-assistant" value={assistantId} onChange={(e) => setChosenAssistant(e.target.value)} className={inputClass}>
              {assistants.data.map((a) => (
                <option key={a.assistant_id} value={a.assistant_id}>
                  {a.name}
                  {a.metadata?.created_by === 'system' ? ' (system)' : ''}
                </option>
              ))}
            </select>
          </div>
        ) : null}
      </div>
      <GraphRun key={assistantId} client={client} target={target} graphId={graph.graphId} assistantId={assistantId} />
    </div>
  );
}

function GraphRun({ client, target, graphId, assistantId }: { client: Client; target: StudioTarget; graphId: string; assistantId: string }) {
  const drawing = useQuery({
    queryKey: ['studio', target.key, 'graph', assistantId],
    queryFn: ({ signal }) => client.assistants.getGraph(assistantId, { xray: true, signal }) as Promise<DrawableGraph>,
  });
  const layout = useMemo(() => (drawing.data ? layoutGraph(drawing.data) : undefined), [drawing.data]);
  const [run, setRun] = useState<RunView>(IDLE);
  const [threadId, setThreadId] = useState<string>();
  const [selected, setSelected] = useState<string>();
  const [text, setText] = useState('');
  const messageId = useId();

  async function send(event: FormEvent) {
    event.preventDefault();
    const content = text.trim();
    if (!content || run.status === 'running') return;
    setText('');
    const view: RunView = { status: 'running', states: new Map(), updates: new Map() };
    const show = () => setRun({ ...view, states: new Map(view.states), updates: new Map(view.updates) });
    show();
    try {
      const thread = threadId ?? (await client.threads.create({ graphId })).thread_id;
      setThreadId(thread);
      const stream = client.runs.stream(thread, assistantId, {
        input: { messages: [{ role: 'user', content }] },
        // `tasks`: a node starts and ends; `updates`: what it wrote. A subgraph's too (its nodes are drawn: xray).
        streamMode: ['tasks', 'updates'],
        streamSubgraphs: true,
      });
      for await (const part of stream) {
        const [mode, ...namespace] = part.event.split('|');
        // `tasks|inner:<task id>` is node `inner`'s subgraph, whose nodes are drawn as `inner:<node>`.
        const prefix = namespace.map((segment) => segment.split(':')[0]).join(':');
        const nodeId = (name: string) => (prefix ? `${prefix}:${name}` : name);
        if (mode === 'tasks') {
          // A task's start carries its input; its end, its result (or error).
          const task = part.data as { name: string; input?: unknown };
          view.states.set(nodeId(task.name), 'input' in task ? 'running' : 'done');
        } else if (mode === 'updates') {
          for (const [node, update] of Object.entries(part.data as Record<string, unknown>)) {
            view.updates.set(nodeId(node), update);
            view.states.set(nodeId(node), 'done');
          }
        } else if (mode === 'error') {
          throw new Error(String((part.data as { message?: unknown })?.message ?? JSON.stringify(part.data)));
        } else continue;
        show();
      }
      for (const [node, state] of view.states) if (state === 'running') view.states.set(node, 'done');
      view.status = 'success';
    } catch (error) {
      view.status = 'error';
      view.error = error instanceof Error ? error.message : String(error);
    }
    show();
  }

  if (drawing.error) return <ErrorNote error={drawing.error} />;
  if (!layout) return <p>Drawing {graphId}…</p>;
  const update = selected === undefined ? undefined : run.updates.get(selected);
  return (
    <div className="grid gap-4 lg:grid-cols-[1fr_22rem]">
      <section aria-label={`Graph ${graphId}`}>
        <GraphView layout={layout} states={run.states} selected={selected} onSelect={setSelected} />
      </section>
      <aside className="space-y-4">
        <form onSubmit={(e) => void send(e)} className="space-y-2" aria-label="Run the graph">
          <label htmlFor={messageId} className="block text-sm font-medium">
            Message
          </label>
          <textarea
            id={messageId}
            value={text}
            onChange={(e) => setText(e.target.value)}
            rows={3}
            className="w-full rounded-md border border-slate-400 bg-white p-2 text-sm dark:border-slate-500 dark:bg-slate-900"
          />
          <button
            type="submit"
            disabled={run.status === 'running' || !text.trim()}
            className="rounded-md bg-slate-900 px-3 py-1.5 text-sm font-medium text-white disabled:opacity-60 dark:bg-slate-100 dark:text-slate-900"
          >
            Send
          </button>
        </form>
        <p role="status" data-testid="run-status" data-status={run.status} className="text-sm">
          {run.status === 'idle' ? 'No run yet.' : run.status === 'running' ? 'Running…' : run.status === 'success' ? 'The run finished.' : 'The run failed.'}
          {threadId ? <span className="block font-mono text-xs text-slate-700 dark:text-slate-300">thread {threadId}</span> : null}
        </p>
        {run.error ? <ErrorNote error={run.error} /> : null}
        <section aria-label="Node details" className="text-sm">
          {selected === undefined ? (
            <p className="text-slate-700 dark:text-slate-300">Choose a node to see its latest update.</p>
          ) : (
            <>
              <h2 className="font-medium">{selected}</h2>
              {update === undefined ? <p className="text-slate-700 dark:text-slate-300">No update in this run.</p> : <NodeUpdate update={update} />}
            </>
          )}
        </section>
      </aside>
    </div>
  );
}

/** A node's latest update: its messages as a chat (as the trace page shows them), the rest as JSON. */
function NodeUpdate({ update }: { update: unknown }) {
  const found = findMessages(update);
  if (!found) return <JsonTree value={update} label="Latest update" />;
  return (
    <>
      <Chat messages={found.messages} />
      {found.rest ? <JsonTree value={found.rest} label="Other keys" /> : null}
    </>
  );
}

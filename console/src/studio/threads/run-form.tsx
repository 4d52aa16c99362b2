/**
 * Starts a run on a thread: the assistant, the input — a chat message (`{messages: [...]}`), or the
 * graph's input in a form built from its input schema (`GET /assistants/{id}/schemas`,
 * `input_schema`) or as JSON — and the stream modes; while a run streams, another is queued behind
 * it. The events the chosen modes stream are logged beside (event-log.tsx).
 */
import type { Assistant, StreamMode } from '@langchain/langgraph-sdk';
import { useQuery } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { ErrorNote } from '../../components/ui';
import type { JsonSchema } from '../assistants/json-schema';
import { editorState, pressedClass, readEditor, SchemaEditor, type EditorState } from '../assistants/schema-editor';
import { useStudio } from '../context';
import { buttonClass, inputClass, secondaryButtonClass } from './styles';
import { DEFAULT_STREAM_MODES, STREAM_MODES, type RunRequest } from './use-run-stream';

type InputKind = 'message' | 'input';

export function RunForm({
  assistants,
  assistantId,
  busy,
  onRun,
}: {
  assistants: Assistant[];
  assistantId: string | undefined;
  /** A run streams: a new one is queued behind it. */
  busy: boolean;
  /** Starts (or queues) the run; a failure to is shown here. */
  onRun: (assistantId: string, request: RunRequest, modes: StreamMode[]) => Promise<void>;
}) {
  const { client, target } = useStudio();
  const [chosen, setChosen] = useState<string>();
  const assistant = chosen ?? assistantId;
  const [kind, setKind] = useState<InputKind>('message');
  const [text, setText] = useState('');
  const [modes, setModes] = useState<StreamMode[]>(DEFAULT_STREAM_MODES);
  const [error, setError] = useState<unknown>();
  const ids = { assistant: useId(), text: useId() };
  const schemas = useQuery({
    queryKey: ['studio', target.key, 'schemas', assistant],
    queryFn: ({ signal }) => client.assistants.getSchemas(assistant!, { signal }),
    enabled: kind === 'input' && assistant !== undefined,
  });
  const inputSchema = (schemas.data?.input_schema ?? null) as JsonSchema | null;
  // The editor's state belongs to one assistant's schema: another assistant starts afresh.
  const [editor, setEditor] = useState<{ for: string; state: EditorState }>();
  const editing = schemas.data && assistant && editor?.for === assistant ? editor.state : schemas.data ? editorState(inputSchema, {}) : undefined;

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (!assistant) return;
    let input: Record<string, unknown>;
    if (kind === 'message') {
      if (!text.trim()) return;
      input = { messages: [{ role: 'user', content: text.trim() }] };
    } else {
      if (!editing) return;
      const parsed = readEditor(inputSchema, editing);
      if (!parsed.ok) return setEditor({ for: assistant, state: { ...editing, errors: parsed.errors } });
      input = parsed.value as Record<string, unknown>;
    }
    setError(undefined);
    if (kind === 'message') setText('');
    try {
      // Resolves when the run ends (or, queued, once the server has it).
      await onRun(assistant, { input }, modes);
    } catch (e) {
      setError(e);
      if (kind === 'message') setText(text);
    }
  };

  const toggleMode = (mode: StreamMode, on: boolean) => setModes((now) => STREAM_MODES.filter((m) => (m === mode ? on : now.includes(m))));
  const ready = assistant !== undefined && modes.length > 0 && (kind === 'message' ? text.trim() !== '' : editing !== undefined);
  return (
    <form onSubmit={(e) => void submit(e)} aria-label="Start a run" className="space-y-3 rounded-md border border-slate-300 p-3 dark:border-slate-700">
      <div className="flex flex-wrap items-center gap-3 text-sm">
        <label htmlFor={ids.assistant} className="font-medium">
          Assistant
        </label>
        <select id={ids.assistant} name="run-assistant" value={assistant ?? ''} onChange={(e) => setChosen(e.target.value)} className={inputClass}>
          {assistants.map((a) => (
            <option key={a.assistant_id} value={a.assistant_id}>
              {assistantLabel(a)}
            </option>
          ))}
        </select>
        <div role="group" aria-label="Input" className="flex gap-1">
          {(['message', 'input'] as const).map((k) => (
            <button
              key={k}
              type="button"
              aria-pressed={kind === k}
              onClick={() => setKind(k)}
              className={`${secondaryButtonClass} px-2 py-0.5 text-xs ${pressedClass}`}
            >
              {k === 'message' ? 'Message' : 'Graph input'}
            </button>
          ))}
        </div>
      </div>
      {kind === 'message' ? (
        <>
          <label htmlFor={ids.text} className="sr-only">
            Message
          </label>
          <textarea
            id={ids.text}
            name="run-input"
            value={text}
            onChange={(e) => setText(e.target.value)}
            rows={2}
            placeholder="Write a message"
            className={`w-full ${inputClass}`}
          />
        </>
      ) : schemas.error ? (
        <ErrorNote error={schemas.error} />
      ) : editing === undefined ? (
        <p className="text-sm">Loading the graph’s input schema…</p>
      ) : (
        <SchemaEditor title="Input" schema={inputSchema} state={editing} onState={(state) => setEditor({ for: assistant!, state })} />
      )}
      <fieldset className="flex flex-wrap gap-x-3 gap-y-1 text-sm">
        <legend className="mb-1 font-medium">Stream modes</legend>
        {STREAM_MODES.map((mode) => (
          <label key={mode} className="flex items-center gap-1 font-mono text-xs">
            <input
              type="checkbox"
              name="stream-mode"
              value={mode}
              checked={modes.includes(mode)}
              onChange={(e) => toggleMode(mode, e.target.checked)}
              className="size-4"
            />
            {mode}
          </label>
        ))}
      </fieldset>
      <div className="flex items-center gap-3">
        <button type="submit" disabled={!ready} className={buttonClass}>
          {busy ? 'Queue' : kind === 'message' ? 'Send' : 'Run'}
        </button>
        {busy ? <span className="text-xs text-slate-700 dark:text-slate-300">A run is under way: this one waits behind it on the server.</span> : null}
      </div>
      {error ? <ErrorNote error={error} /> : null}
    </form>
  );
}

/** An assistant's name, and its graph when the name does not say it. */
export function assistantLabel(a: Assistant): string {
  return a.name === a.graph_id ? a.graph_id : `${a.name} (${a.graph_id})`;
}

/**
 * Studio's Assistants tab: a graph's assistants (its system assistant marked), an assistant's
 * versions (the active one marked), any version made the active one, a version's context and
 * config.configurable edited in a form generated from the graph's schemas (or as JSON) and saved as
 * a new version, and a new assistant created from a version.
 */
import type { Assistant, AssistantVersion, Client, Config } from '@langchain/langgraph-sdk';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { Badge, ErrorNote, TableHead, Time } from '../../components/ui';
import { Button, Dialog, inputClass } from '../../components/controls';
import { useStudio } from '../context';
import { GraphPicker, useGraphs } from '../graphs';
import type { JsonSchema } from './json-schema';
import { editorState, pressedClass, readEditor, SchemaEditor, type EditorState } from './schema-editor';

const isSystem = (assistant: Assistant) => assistant.metadata?.created_by === 'system';

export function AssistantsTab() {
  const graphs = useGraphs();
  const [chosen, setChosen] = useState<string>();
  const graphId = chosen ?? graphs.data?.[0]?.graphId;

  if (graphs.error) return <ErrorNote error={graphs.error} />;
  if (!graphs.data) return <p>Loading the graphs…</p>;
  if (!graphId) return <p>This agent server has no graphs.</p>;
  return (
    <div className="space-y-4">
      <GraphPicker graphs={graphs.data} value={graphId} onChange={setChosen} />
      <GraphAssistants key={graphId} graphId={graphId} />
    </div>
  );
}

function GraphAssistants({ graphId }: { graphId: string }) {
  const { client, target } = useStudio();
  const assistants = useQuery({
    queryKey: ['studio', target.key, 'assistants', graphId],
    queryFn: async ({ signal }) => {
      const found = await client.assistants.search({ graphId, limit: 1000, sortBy: 'created_at', sortOrder: 'asc', signal });
      // The system assistant first, then the others as they were made.
      return [...found.filter(isSystem), ...found.filter((a) => !isSystem(a))];
    },
  });
  const [chosen, setChosen] = useState<string>();

  if (assistants.error) return <ErrorNote error={assistants.error} />;
  if (!assistants.data) return <p>Loading the assistants of {graphId}…</p>;
  const assistant = assistants.data.find((a) => a.assistant_id === chosen) ?? assistants.data[0];
  return (
    <div className="grid gap-4 lg:grid-cols-[18rem_1fr]">
      <nav aria-label={`Assistants of ${graphId}`}>
        <ul className="space-y-1">
          {assistants.data.map((a) => (
            <li key={a.assistant_id}>
              <button
                type="button"
                aria-current={a === assistant ? 'true' : undefined}
                onClick={() => setChosen(a.assistant_id)}
                className="w-full rounded-md border border-slate-300 px-3 py-2 text-left text-sm aria-[current=true]:border-slate-900 aria-[current=true]:bg-slate-100 focus-visible:outline-2 focus-visible:outline-blue-600 dark:border-slate-700 dark:aria-[current=true]:border-slate-100 dark:aria-[current=true]:bg-slate-800"
              >
                <span className="flex items-center gap-2 font-medium">
                  {a.name}
                  {isSystem(a) ? <Badge tone="none">system</Badge> : null}
                </span>
                <span className="block font-mono text-xs text-slate-700 dark:text-slate-300">
                  {a.assistant_id} · v{a.version}
                </span>
              </button>
            </li>
          ))}
        </ul>
      </nav>
      {assistant ? <AssistantDetail key={assistant.assistant_id} assistant={assistant} onCreated={setChosen} /> : null}
    </div>
  );
}

function AssistantDetail({ assistant, onCreated }: { assistant: Assistant; onCreated: (assistantId: string) => void }) {
  const { client, target } = useStudio();
  const queryClient = useQueryClient();
  const versionsKey = ['studio', target.key, 'assistant-versions', assistant.assistant_id];
  const versions = useQuery({
    queryKey: versionsKey,
    queryFn: ({ signal }) => client.assistants.getVersions(assistant.assistant_id, { limit: 1000, signal }),
  });
  const schemas = useQuery({
    queryKey: ['studio', target.key, 'assistant-schemas', assistant.assistant_id],
    queryFn: ({ signal }) => client.assistants.getSchemas(assistant.assistant_id, { signal }),
  });
  const [open, setOpen] = useState(assistant.version);
  const [creatingFrom, setCreatingFrom] = useState<AssistantVersion | null>(null);
  const [notice, setNotice] = useState('');
  const titleId = useId();
  const refresh = () =>
    Promise.all([
      queryClient.invalidateQueries({ queryKey: ['studio', target.key, 'assistants', assistant.graph_id] }),
      queryClient.invalidateQueries({ queryKey: versionsKey }),
    ]);
  const activate = useMutation({
    mutationFn: (version: number) => client.assistants.setLatest(assistant.assistant_id, version),
    onSuccess: async (updated) => {
      await refresh();
      setNotice(`Version ${updated.version} is the active one.`);
    },
  });

  if (versions.error) return <ErrorNote error={versions.error} />;
  if (schemas.error) return <ErrorNote error={schemas.error} />;
  if (!versions.data || !schemas.data) return <p>Loading {assistant.name}…</p>;
  const version = versions.data.find((v) => v.version === open) ?? versions.data[0];
  return (
    <section aria-labelledby={titleId} className="min-w-0 space-y-4">
      <div>
        <h2 id={titleId} className="text-lg font-semibold">
          {assistant.name}
        </h2>
        <p className="font-mono text-xs text-slate-700 dark:text-slate-300">{assistant.assistant_id}</p>
      </div>
      <table className="w-full border-collapse text-left text-sm">
        <caption className="sr-only">Versions of {assistant.name}, newest first</caption>
        <TableHead columns={['Version', 'Created', 'Actions']} />
        <tbody>
          {versions.data.map((v) => (
            <tr
              key={v.version}
              data-version={v.version}
              aria-current={v === version ? 'true' : undefined}
              className="border-b border-slate-200 dark:border-slate-800"
            >
              <td className="py-2 pr-4">
                <span className="mr-2 font-medium">v{v.version}</span>
                {v.version === assistant.version ? <Badge tone="good">active</Badge> : null}
              </td>
              <td className="py-2 pr-4">
                <Time iso={v.created_at} />
              </td>
              <td className="py-2 pr-4">
                <div className="flex flex-wrap gap-1">
                  <Button
                    className={`px-2 py-0.5 text-xs ${pressedClass}`}
                    aria-pressed={v === version}
                    onClick={() => setOpen(v.version)}
                    aria-label={`Open v${v.version}`}
                  >
                    Open
                  </Button>
                  <Button
                    className="px-2 py-0.5 text-xs"
                    disabled={v.version === assistant.version || activate.isPending}
                    onClick={() => activate.mutate(v.version)}
                    aria-label={`Make active: v${v.version}`}
                  >
                    Make active
                  </Button>
                  <Button className="px-2 py-0.5 text-xs" onClick={() => setCreatingFrom(v)} aria-label={`Create from this version (v${v.version})`}>
                    Create from this version
                  </Button>
                </div>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <p role="status" className="text-sm">
        {notice}
      </p>
      {activate.error ? <ErrorNote error={activate.error} /> : null}
      {version ? (
        <VersionEditor
          key={`${assistant.assistant_id}:${version.version}`}
          client={client}
          version={version}
          contextSchema={(schemas.data.context_schema ?? null) as JsonSchema | null}
          configSchema={(schemas.data.config_schema ?? null) as JsonSchema | null}
          onSaved={async (saved) => {
            await refresh();
            setOpen(saved.version);
            setNotice(`Saved as version ${saved.version}, now the active one.`);
          }}
        />
      ) : null}
      <Dialog open={creatingFrom !== null} title={`New assistant from version ${creatingFrom?.version ?? ''}`} onClose={() => setCreatingFrom(null)}>
        {creatingFrom ? (
          <CreateFromVersion
            client={client}
            version={creatingFrom}
            onCancel={() => setCreatingFrom(null)}
            onCreated={async (created) => {
              setCreatingFrom(null);
              await refresh();
              onCreated(created.assistant_id);
            }}
          />
        ) : null}
      </Dialog>
    </section>
  );
}

/**
 * A version's context and config.configurable, edited. `config_schema` is `context_schema` as the
 * LangGraph.js server reports it; config.configurable gets a form of its own only when the graph
 * declares a different one, else it is edited as JSON.
 */
function VersionEditor({
  client,
  version,
  contextSchema,
  configSchema,
  onSaved,
}: {
  client: Client;
  version: AssistantVersion;
  contextSchema: JsonSchema | null;
  configSchema: JsonSchema | null;
  onSaved: (saved: Assistant) => Promise<void>;
}) {
  const configurableSchema = JSON.stringify(configSchema) === JSON.stringify(contextSchema) ? null : configSchema;
  const [context, setContext] = useState<EditorState>(() => editorState(contextSchema, version.context));
  const [configurable, setConfigurable] = useState<EditorState>(() => editorState(configurableSchema, version.config.configurable));
  const [refused, setRefused] = useState(false);
  const titleId = useId();
  const save = useMutation({
    mutationFn: (values: { context: unknown; configurable: unknown }) =>
      client.assistants.update(version.assistant_id, {
        context: values.context,
        config: { ...version.config, configurable: values.configurable as NonNullable<Config['configurable']> },
      }),
    onSuccess: onSaved,
  });

  function submit(event: FormEvent) {
    event.preventDefault();
    const readContext = readEditor(contextSchema, context);
    const readConfigurable = readEditor(configurableSchema, configurable);
    if (!readContext.ok) setContext({ ...context, errors: readContext.errors });
    if (!readConfigurable.ok) setConfigurable({ ...configurable, errors: readConfigurable.errors });
    setRefused(!readContext.ok || !readConfigurable.ok);
    if (readContext.ok && readConfigurable.ok) save.mutate({ context: readContext.value, configurable: readConfigurable.value });
  }

  return (
    <form onSubmit={submit} noValidate aria-labelledby={titleId} className="space-y-3">
      <h3 id={titleId} className="font-medium">
        Version {version.version}
      </h3>
      <SchemaEditor title="Context" schema={contextSchema} state={context} onState={setContext} />
      <SchemaEditor title="Configurable" schema={configurableSchema} state={configurable} onState={setConfigurable} />
      {refused ? (
        <p role="alert" className="text-sm text-red-700 dark:text-red-300">
          Not saved: correct the marked fields.
        </p>
      ) : null}
      {save.error ? <ErrorNote error={save.error} /> : null}
      <Button type="submit" tone="primary" disabled={save.isPending}>
        Save as a new version
      </Button>
    </form>
  );
}

/** A name for the new assistant; it gets the version's graph, config and context. */
function CreateFromVersion({
  client,
  version,
  onCancel,
  onCreated,
}: {
  client: Client;
  version: AssistantVersion;
  onCancel: () => void;
  onCreated: (created: Assistant) => Promise<void>;
}) {
  const [name, setName] = useState(`${version.name} (from v${version.version})`);
  const nameId = useId();
  const create = useMutation({
    mutationFn: () => client.assistants.create({ graphId: version.graph_id, config: version.config, context: version.context, name: name.trim() }),
    onSuccess: onCreated,
  });
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault();
        if (name.trim()) create.mutate();
      }}
      className="space-y-3"
    >
      <label htmlFor={nameId} className="block font-medium">
        Name
      </label>
      <input id={nameId} value={name} onChange={(e) => setName(e.target.value)} required className={`${inputClass} w-full`} />
      {create.error ? <ErrorNote error={create.error} /> : null}
      <div className="flex justify-end gap-2">
        <Button onClick={onCancel}>Cancel</Button>
        <Button type="submit" tone="primary" disabled={create.isPending || !name.trim()}>
          Create assistant
        </Button>
      </div>
    </form>
  );
}
